//! TLS and ACL for topologies: a throwaway CA and certificates made with the `openssl` command
//! line, and the `tls-*` / `user` config lines for data nodes and sentinels.
//!
//! Every node of a TLS topology keeps its plain `port` open too: the testkit's own control traffic
//! (INFO, SENTINEL, fault injection) stays a plain synchronous RESP2 client, while the code under
//! test talks TLS to the `tls-port`s. With `tls-replication yes`, replicas replicate over TLS and
//! announce their TLS port, and sentinels monitor and report TLS ports and talk TLS to each
//! other, so every address a client learns from a sentinel is a TLS address.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::TestkitError;

/// TLS for a [`crate::TopologySpec`]: every node gets a `tls-port` next to its plain port.
#[derive(Debug, Clone, Default)]
pub struct TlsSpec {
    /// `tls-auth-clients yes`: TLS clients must present a certificate signed by the topology's
    /// CA (mutual TLS). Default false (`tls-auth-clients no`).
    pub require_client_cert: bool,
}

/// The PEM files of a TLS topology, all in `<topology dir>/tls`.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The throwaway CA's certificate (what clients pass as `tls_ca_file`).
    pub ca_cert: PathBuf,
    /// The server certificate every node uses: SAN `IP:127.0.0.1` and `DNS:localhost` only, so
    /// any other name fails verification.
    pub server_cert: PathBuf,
    /// The server certificate's key.
    pub server_key: PathBuf,
    /// A client certificate signed by the CA (for `tls_cert_file`).
    pub client_cert: PathBuf,
    /// The client certificate's key (for `tls_key_file`).
    pub client_key: PathBuf,
    /// A second CA that signed nothing here: trusting only it must fail verification.
    pub other_ca_cert: PathBuf,
}

impl TlsFiles {
    /// Makes a CA, a server certificate and a client certificate (ECDSA P-256, valid 2 days) and
    /// an unrelated CA in `dir`, with the `openssl` command line.
    pub fn generate(dir: &Path) -> Result<TlsFiles, TestkitError> {
        fs::create_dir_all(dir)
            .map_err(|e| TestkitError::io(format!("creating {}", dir.display()), e))?;
        let files = TlsFiles {
            ca_cert: dir.join("ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.crt"),
            client_key: dir.join("client.key"),
            other_ca_cert: dir.join("other-ca.crt"),
        };
        let ca_key = dir.join("ca.key");
        make_ca(dir, &ca_key, &files.ca_cert, "sr-testkit-ca")?;
        make_ca(
            dir,
            &dir.join("other-ca.key"),
            &files.other_ca_cert,
            "sr-testkit-other-ca",
        )?;
        let leaf = |name: &str, cert: &Path, key: &Path, ext: &str| {
            let csr = dir.join(format!("{name}.csr"));
            let ext_file = dir.join(format!("{name}.ext"));
            fs::write(&ext_file, ext)
                .map_err(|e| TestkitError::io(format!("writing {}", ext_file.display()), e))?;
            openssl(
                dir,
                &[
                    "req",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:prime256v1",
                    "-nodes",
                    "-keyout",
                    path_str(key)?,
                    "-out",
                    path_str(&csr)?,
                    "-subj",
                    &format!("/CN={name}"),
                ],
            )?;
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    path_str(&csr)?,
                    "-CA",
                    path_str(&files.ca_cert)?,
                    "-CAkey",
                    path_str(&ca_key)?,
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-out",
                    path_str(cert)?,
                    "-extfile",
                    path_str(&ext_file)?,
                ],
            )
        };
        // Nodes use the server certificate as their client certificate too (replication and
        // sentinel links under tls-auth-clients), hence both key usages.
        leaf(
            "localhost",
            &files.server_cert,
            &files.server_key,
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n",
        )?;
        leaf(
            "sr-client",
            &files.client_cert,
            &files.client_key,
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=clientAuth\n",
        )?;
        Ok(files)
    }

    /// The `tls-*` lines for a node listening for TLS on `tls_port`.
    pub(crate) fn render(&self, tls_port: u16, require_client_cert: bool) -> String {
        format!(
            "tls-port {tls_port}\ntls-cert-file \"{}\"\ntls-key-file \"{}\"\n\
             tls-ca-cert-file \"{}\"\ntls-auth-clients {}\ntls-replication yes\n",
            self.server_cert.display(),
            self.server_key.display(),
            self.ca_cert.display(),
            if require_client_cert { "yes" } else { "no" }
        )
    }
}

fn make_ca(dir: &Path, key: &Path, cert: &Path, cn: &str) -> Result<(), TestkitError> {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            path_str(key)?,
            "-out",
            path_str(cert)?,
            "-days",
            "2",
            "-subj",
            &format!("/CN={cn}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    )
}

fn path_str(p: &Path) -> Result<&str, TestkitError> {
    p.to_str()
        .ok_or_else(|| TestkitError::Setup(format!("{} is not valid UTF-8", p.display())))
}

/// Runs `openssl args...` in `dir` and waits for it (it exits by itself in milliseconds).
fn openssl(dir: &Path, args: &[&str]) -> Result<(), TestkitError> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            TestkitError::io(
                "running openssl (install it: apt-get install openssl)".to_string(),
                e,
            )
        })?;
    if !out.status.success() {
        return Err(TestkitError::Setup(format!(
            "openssl {} failed: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// One ACL user: rendered as `user <name> on ><password> <rules>`.
#[derive(Debug, Clone)]
pub struct AclUser {
    /// User name.
    pub name: String,
    /// Password (test data; written to the node's config file).
    pub password: String,
    /// ACL rules after the password, e.g. `"~* &* +@all -@dangerous +role"`.
    pub rules: String,
}

impl AclUser {
    /// A user from its parts.
    pub fn new(name: &str, password: &str, rules: &str) -> AclUser {
        AclUser {
            name: name.into(),
            password: password.into(),
            rules: rules.into(),
        }
    }

    fn render(&self) -> String {
        format!("user {} on >{} {}\n", self.name, self.password, self.rules)
    }
}

/// ACL users for a [`crate::TopologySpec`]. The `default` user is switched off on every node, so
/// only named users get in. The testkit itself, replication (`masteruser`), sentinels towards data
/// nodes (`sentinel auth-user`) and sentinels towards each other (`sentinel sentinel-user`) use
/// an admin user [`ADMIN_USER`] with every permission.
#[derive(Debug, Clone, Default)]
pub struct AclSpec {
    /// Users on the data nodes (primary and replicas).
    pub data_users: Vec<AclUser>,
    /// Users on the sentinels.
    pub sentinel_users: Vec<AclUser>,
}

/// What a client's sentinel user needs: the events the core follows and the SENTINEL queries
/// of discovery, nothing else.
pub const SENTINEL_WATCHER_RULES: &str =
    "resetchannels &+switch-master &+sdown &-sdown &+odown &-odown \
     &+slave &+convert-to-slave &+sentinel &+tilt &-tilt &+failover-end &+reset-master \
     &+failover-state-send-slaveof-noone &-failover-abort-not-elected \
     &-failover-abort-no-good-slave &-failover-abort-slave-timeout \
     -@all +sentinel|master +sentinel|get-master-addr-by-name +sentinel|replicas \
     +sentinel|sentinels +sentinel|myid +subscribe +client|setname +info";

/// The name of the testkit's own admin user on ACL topologies.
pub const ADMIN_USER: &str = "sr-admin";

/// The ACL part of a topology once started: the spec plus the admin password.
#[derive(Debug, Clone)]
pub(crate) struct AclSetup {
    pub spec: AclSpec,
    pub admin_password: String,
}

impl AclSetup {
    pub(crate) fn new(spec: AclSpec) -> AclSetup {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        AclSetup {
            spec,
            admin_password: format!("admin-{}-{nanos}", std::process::id()),
        }
    }

    pub(crate) fn admin(&self) -> (String, String) {
        (ADMIN_USER.to_string(), self.admin_password.clone())
    }

    fn common(&self) -> String {
        format!(
            "user default off\nuser {ADMIN_USER} on >{} ~* &* +@all\n",
            self.admin_password
        )
    }

    /// Lines for a data node: users, and the credentials it replicates with.
    pub(crate) fn render_data(&self) -> String {
        let mut s = self.common();
        for u in &self.spec.data_users {
            s.push_str(&u.render());
        }
        s.push_str(&format!(
            "masteruser {ADMIN_USER}\nmasterauth {}\n",
            self.admin_password
        ));
        s
    }

    /// Lines for a sentinel monitoring `service`: users, and the credentials it uses towards
    /// other sentinels and towards the data nodes. Must come after the `sentinel monitor` line.
    pub(crate) fn render_sentinel(&self, service: &str) -> String {
        let mut s = self.common();
        for u in &self.spec.sentinel_users {
            s.push_str(&u.render());
        }
        s.push_str(&format!(
            "sentinel sentinel-user {ADMIN_USER}\nsentinel sentinel-pass {pw}\n\
             sentinel auth-user {service} {ADMIN_USER}\nsentinel auth-pass {service} {pw}\n",
            pw = self.admin_password
        ));
        s
    }
}
