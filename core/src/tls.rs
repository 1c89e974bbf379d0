//! TLS with rustls: building client configurations from a [`Config`], and choosing the name a
//! server certificate is verified against.
//!
//! Sentinels and data nodes are configured separately (they are often run by different teams with
//! different CAs), so a [`Config`] yields up to two rustls configurations. They are built once per
//! monitor, on the caller's thread: reading CA, certificate and key files is blocking file I/O that
//! must never run on a core runtime thread. Errors name the option and the file, never a file's
//! contents (a key file's bytes are a secret).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::config::{parse_server_name, Config};
use crate::error::{Error, ErrorCode, Result};
use crate::types::Side;

/// What a connection needs for TLS: the shared rustls configuration and, optionally, the name to
/// verify the server's certificate against instead of the host connected to.
#[derive(Clone)]
pub struct TlsOptions {
    /// Built once per monitor by [`client_config`] and shared by every connection.
    pub config: Arc<ClientConfig>,
    /// Overrides the name the certificate is verified against (option `tls_server_name`). `None`
    /// verifies against the host connected to: the configured sentinel host, or the host (name or
    /// IP) a sentinel reported for a data node.
    pub server_name: Option<String>,
}

/// Shows the server name only: the rustls configuration holds the client key.
impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsOptions {
    /// The name to verify a server reached as `host` against: the override if set, else `host`
    /// (an IP literal is checked against the certificate's IP SANs, a name against its DNS SANs).
    pub fn server_name_for(&self, host: &str) -> Result<ServerName<'static>> {
        let name = self.server_name.as_deref().unwrap_or(host);
        parse_server_name(name)
    }
}

/// Runs the TLS handshake over `stream`, connected to `addr` for `host`, verifying the server's
/// certificate against `host` (or the configured override). A rustls error (certificate, alert,
/// garbage from a non-TLS port) is a `tls` error; a socket error during the handshake stays a
/// connection error. The data path's connections and the proxy's upstreams both come through
/// here.
pub async fn handshake(
    stream: tokio::net::TcpStream,
    host: &str,
    addr: std::net::SocketAddr,
    tls: &TlsOptions,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let name = tls.server_name_for(host)?;
    let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
    connector
        .connect(name, stream)
        .await
        .map_err(|e| match tls_error_text(&e) {
            Some(why) => Error::new(
                ErrorCode::Tls,
                format!("TLS handshake with {host} ({addr}) failed: {why}"),
            ),
            None => Error::from(e).context(format_args!("TLS handshake with {host} ({addr})")),
        })
}

/// The files and switches that apply to one side (sentinels or data nodes).
struct SideFiles<'a> {
    what: &'static str,
    ca: Option<(&'static str, &'a Path)>,
    cert: Option<(&'static str, &'a Path)>,
    key: Option<(&'static str, &'a Path)>,
}

/// The rustls configuration for connections to one side, sentinels or data nodes, or `None`
/// when TLS is off for that side.
///
///
/// Reads the CA, certificate and key files (sentinels use `sentinel_tls_*_file` where set, else
/// the shared `tls_*_file`), or the system's root certificates when no CA file is given and
/// `tls_insecure` is off. Blocking file I/O: call it on the caller's thread, never on a core
/// runtime thread. Errors have [`ErrorCode::Tls`] and name the option and the file.
pub fn client_config(config: &Config, side: Side) -> Result<Option<Arc<ClientConfig>>> {
    let this = config;
    let side = if side == Side::Sentinel {
        if !this.sentinel_tls {
            return Ok(None);
        }
        SideFiles {
            what: "sentinels",
            ca: pick(
                ("sentinel_tls_ca_file", &this.sentinel_tls_ca_file),
                ("tls_ca_file", &this.tls_ca_file),
            ),
            cert: pick(
                ("sentinel_tls_cert_file", &this.sentinel_tls_cert_file),
                ("tls_cert_file", &this.tls_cert_file),
            ),
            key: pick(
                ("sentinel_tls_key_file", &this.sentinel_tls_key_file),
                ("tls_key_file", &this.tls_key_file),
            ),
        }
    } else {
        if !this.data_tls {
            return Ok(None);
        }
        SideFiles {
            what: "data nodes",
            ca: this.tls_ca_file.as_deref().map(|p| ("tls_ca_file", p)),
            cert: this.tls_cert_file.as_deref().map(|p| ("tls_cert_file", p)),
            key: this.tls_key_file.as_deref().map(|p| ("tls_key_file", p)),
        }
    };
    build(&side, this.tls_insecure)
        .map(|c| Some(Arc::new(c)))
        .map_err(|e| e.context(format_args!("TLS for {}", side.what)))
}

/// [`TlsOptions`] for one side, ready for [`ConnectOptions`](crate::resp::ConnectOptions), or
/// `None` when TLS is off there. Same file reading and errors as [`client_config`].
pub fn options(config: &Config, side: Side) -> Result<Option<TlsOptions>> {
    Ok(client_config(config, side)?.map(|tls| TlsOptions {
        config: tls,
        server_name: config.tls_server_name.clone(),
    }))
}

/// The sentinel-specific option if set, else the shared one, with the key that supplied it.
fn pick<'a>(
    specific: (&'static str, &'a Option<std::path::PathBuf>),
    shared: (&'static str, &'a Option<std::path::PathBuf>),
) -> Option<(&'static str, &'a Path)> {
    match (specific.1, shared.1) {
        (Some(p), _) => Some((specific.0, p.as_path())),
        (None, Some(p)) => Some((shared.0, p.as_path())),
        (None, None) => None,
    }
}

/// The crypto provider: rustls' `ring` backend, chosen explicitly so that another crate in the
/// process enabling a second backend cannot make rustls' process-wide default ambiguous.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn build(side: &SideFiles<'_>, insecure: bool) -> Result<ClientConfig> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(ErrorCode::Tls, format!("no usable TLS version: {e}")))?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification {
                algorithms: provider.signature_verification_algorithms,
            }))
    } else {
        builder.with_root_certificates(roots(side.ca)?)
    };
    let config = match (side.cert, side.key) {
        (Some((cert_key, cert_path)), Some((key_key, key_path))) => {
            let chain = read_certs(cert_key, cert_path)?;
            let key = read_key(key_key, key_path)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                Error::new(
                    ErrorCode::Tls,
                    format!(
                        "option {key_key}: the key in '{}' is not usable with the certificate in \
                         '{}': {}",
                        key_path.display(),
                        cert_path.display(),
                        describe_rustls(&e)
                    ),
                )
            })?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some((cert_key, _)), None) => {
            return Err(Error::new(
                ErrorCode::Tls,
                format!("option {cert_key} is set without a matching key file option"),
            ))
        }
        (None, Some((key_key, _))) => {
            return Err(Error::new(
                ErrorCode::Tls,
                format!("option {key_key} is set without a matching certificate file option"),
            ))
        }
    };
    Ok(config)
}

fn roots(ca: Option<(&'static str, &Path)>) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match ca {
        Some((key, path)) => {
            for cert in read_certs(key, path)? {
                store.add(cert).map_err(|e| {
                    Error::new(
                        ErrorCode::Tls,
                        format!(
                            "option {key}: a certificate in '{}' is not a usable CA: {}",
                            path.display(),
                            describe_rustls(&e)
                        ),
                    )
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _ignored) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(Error::new(
                    ErrorCode::Tls,
                    "no system root certificates found: set option tls_ca_file (or \
                     tls_insecure=true to skip verification)",
                ));
            }
        }
    }
    Ok(store)
}

/// Reads a whole file; the error names the option and the path, as does every TLS file error.
fn read_file(key: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        Error::new(
            ErrorCode::Tls,
            format!("option {key}: cannot read '{}': {e}", path.display()),
        )
    })
}

/// Why PEM parsing failed, without any of the file's text (the pem error's Display can quote a
/// line of the file, and a key file's lines are secret).
fn describe_pem(e: &pem::Error) -> &'static str {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a PEM section has no END line",
        pem::Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed",
        pem::Error::Base64Decode(_) => "a PEM section is not valid base64",
        pem::Error::NoItemsFound => "no PEM section of the expected kind",
        pem::Error::SectionTooLarge => "a PEM section is too large",
        _ => "the PEM text is invalid",
    }
}

/// A rustls error as text. rustls errors describe certificate and key problems by kind; they never
/// carry key material.
fn describe_rustls(e: &rustls::Error) -> String {
    e.to_string()
}

fn read_certs(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bytes = read_file(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::new(
                ErrorCode::Tls,
                format!(
                    "option {key}: '{}' is not a PEM certificate file: {}",
                    path.display(),
                    describe_pem(&e)
                ),
            )
        })?;
    if certs.is_empty() {
        return Err(Error::new(
            ErrorCode::Tls,
            format!(
                "option {key}: '{}' holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                path.display()
            ),
        ));
    }
    Ok(certs)
}

fn read_key(key: &str, path: &Path) -> Result<PrivateKeyDer<'static>> {
    let bytes = read_file(key, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        Error::new(
            ErrorCode::Tls,
            format!(
                "option {key}: '{}' holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {}",
                path.display(),
                describe_pem(&e)
            ),
        )
    })
}

/// `tls_insecure=true`: accepts any server certificate (no CA, name or validity check), but still
/// checks that the server owns the key of the certificate it sent, so the handshake itself stays
/// sound. Only for tests and for setups that knowingly trade authentication away.
#[derive(Debug)]
struct NoVerification {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Whether an I/O error came from rustls (a failed handshake, a bad certificate, an alert from
/// the peer), so the connection layer can report it as [`ErrorCode::Tls`].
pub(crate) fn tls_error_text(err: &std::io::Error) -> Option<String> {
    err.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .map(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(query: &str) -> Config {
        Config::from_url(&format!("rediss+sentinel://h/s?{query}")).unwrap()
    }

    #[test]
    fn off_sides_build_nothing() {
        let c = Config::from_url("redis+sentinel://h/s").unwrap();
        assert!(client_config(&c, Side::Sentinel).unwrap().is_none());
        assert!(client_config(&c, Side::Data).unwrap().is_none());
        let c = Config::from_url("redis+sentinel://h/s?data_tls=true&tls_insecure=true").unwrap();
        assert!(client_config(&c, Side::Sentinel).unwrap().is_none());
        assert!(client_config(&c, Side::Data).unwrap().is_some());
    }

    #[test]
    fn insecure_needs_no_files() {
        let c = config("tls_insecure=true");
        assert!(client_config(&c, Side::Sentinel).unwrap().is_some());
        assert!(client_config(&c, Side::Data).unwrap().is_some());
    }

    #[test]
    fn file_errors_name_option_and_file_not_contents() {
        let dir = std::env::temp_dir().join(format!("sr-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "-----BEGIN PRIVATE KEY-----\nsupersecretline\n").unwrap();
        let missing = dir.join("missing.pem");

        let c = config(&format!("tls_ca_file={}", missing.display()));
        let e = client_config(&c, Side::Data).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Tls);
        assert!(e.message().contains("tls_ca_file") && e.message().contains("missing.pem"));
        assert!(e.message().contains("data nodes"), "{e}");

        let c = config(&format!(
            "sentinel_tls_ca_file={}&tls_insecure=false",
            junk.display()
        ));
        let e = client_config(&c, Side::Sentinel).unwrap_err();
        assert!(e.message().contains("sentinel_tls_ca_file"), "{e}");

        let c = config(&format!(
            "tls_insecure=true&tls_cert_file={0}&tls_key_file={0}",
            junk.display()
        ));
        let e = client_config(&c, Side::Data).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Tls);
        assert!(!e.to_string().contains("supersecretline"), "{e}");
        assert!(!format!("{e:?}").contains("supersecretline"), "{e:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn server_names() {
        let opts = TlsOptions {
            config: client_config(&config("tls_insecure=true"), Side::Data)
                .unwrap()
                .unwrap(),
            server_name: None,
        };
        assert!(matches!(
            opts.server_name_for("127.0.0.1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            opts.server_name_for("::1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            opts.server_name_for("redis.example").unwrap(),
            ServerName::DnsName(_)
        ));
        assert_eq!(
            opts.server_name_for("bad name").unwrap_err().code(),
            ErrorCode::Tls
        );
        let named = TlsOptions {
            server_name: Some("cache.internal".into()),
            ..opts
        };
        assert_eq!(
            named.server_name_for("10.0.0.1").unwrap(),
            ServerName::try_from("cache.internal").unwrap()
        );
        assert!(!format!("{named:?}").contains("config"));
    }
}
