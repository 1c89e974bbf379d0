//! Rules a configuration must meet however it was built, and the helpers that check names.

use super::*;

impl Config {
    /// Checks what single keys can't: a non-empty service and sentinel list, sane retry bounds.
    pub fn validate(&self) -> crate::Result<()> {
        if self.sentinels.is_empty() {
            return Err(Error::config("no sentinel given"));
        }
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            // The URL refuses port 0; a hand-built config gets the same check.
            if sentinel.port == 0 {
                return Err(Error::config(format!(
                    "sentinel #{}: port 0 of '{}' is not in 1..65535",
                    i + 1,
                    shorten(&sentinel.host)
                )));
            }
            if sentinel.host.parse::<std::net::IpAddr>().is_err() {
                if let Some(problem) = host_name_problem(&sentinel.host) {
                    return Err(Error::config(format!("sentinel #{}: {problem}", i + 1)));
                }
            }
        }
        if self.service.is_empty() {
            return Err(Error::config("service name is empty"));
        }
        if self
            .service
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(Error::config(
                "service name must not contain spaces or control characters",
            ));
        }
        let tls_files = [
            (
                "tls_ca_file",
                &self.tls_ca_file,
                self.sentinel_tls || self.data_tls,
            ),
            (
                "tls_cert_file",
                &self.tls_cert_file,
                self.sentinel_tls || self.data_tls,
            ),
            (
                "tls_key_file",
                &self.tls_key_file,
                self.sentinel_tls || self.data_tls,
            ),
            (
                "sentinel_tls_ca_file",
                &self.sentinel_tls_ca_file,
                self.sentinel_tls,
            ),
            (
                "sentinel_tls_cert_file",
                &self.sentinel_tls_cert_file,
                self.sentinel_tls,
            ),
            (
                "sentinel_tls_key_file",
                &self.sentinel_tls_key_file,
                self.sentinel_tls,
            ),
        ];
        // A TLS file given while TLS is off is almost surely a forgotten rediss://; connecting in
        // plain text instead would silently drop the protection the user asked for.
        for (key, file, used) in tls_files {
            if file.is_some() && !used {
                return Err(Error::config(format!(
                    "option {key} is set but TLS is off for the nodes it applies to: use \
                     rediss+sentinel:// or tls=true (or sentinel_tls / data_tls)"
                )));
            }
        }
        if self.retry_base_ms > self.retry_max_ms {
            return Err(Error::config(
                "option retry_base_ms must not exceed retry_max_ms",
            ));
        }
        Ok(())
    }
}

/// Longest host name in characters, without a final dot (RFC 1035: 255 octets on the wire).
const MAX_HOST_NAME: usize = 253;
/// Longest label (the part between dots) of a host name.
const MAX_HOST_LABEL: usize = 63;
/// Characters of a long value shown in error texts.
const SHOWN_CHARS: usize = 64;

/// `text` for an error message: at most its first 64 characters, with an ellipsis when cut, so a
/// huge value never ends up whole in errors or logs.
pub(crate) fn shorten(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Why `host` cannot be a host name, or `None` when it can: empty, longer than 253 characters
/// (a final dot aside), a label empty or longer than 63, or a character other than ASCII letters,
/// digits, `-`, `_` and `.`. The text gives lengths and shows at most the start of the name. For
/// names only: check IP literals before calling.
pub(crate) fn host_name_problem(host: &str) -> Option<String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() {
        return Some(format!("'{}' is not a valid host name", shorten(host)));
    }
    if name.len() > MAX_HOST_NAME {
        return Some(format!(
            "host name is {} characters long, more than the {MAX_HOST_NAME} allowed: '{}'",
            name.len(),
            shorten(name)
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Some(format!("'{}' is not a valid host name", shorten(name)));
    }
    for (i, label) in name.split('.').enumerate() {
        if label.is_empty() {
            return Some(format!(
                "host name '{}' has an empty label (two dots in a row, or a leading dot)",
                shorten(name)
            ));
        }
        if label.len() > MAX_HOST_LABEL {
            return Some(format!(
                "label #{} of host name '{}' is {} characters long, more than the \
                 {MAX_HOST_LABEL} allowed",
                i + 1,
                shorten(name),
                label.len()
            ));
        }
    }
    None
}

/// Parses a host name or IP literal into the name rustls verifies; `[v6]` brackets are accepted.
pub(crate) fn parse_server_name(
    name: &str,
) -> crate::Result<rustls_pki_types::ServerName<'static>> {
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    rustls_pki_types::ServerName::try_from(bare.to_string()).map_err(|_| {
        Error::new(
            crate::error::ErrorCode::Tls,
            format!("'{name}' is not a valid TLS server name (a DNS name or an IP address)"),
        )
    })
}
