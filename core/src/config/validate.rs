//! Rules a configuration must meet however it was built, and the helpers that check names.

use super::names::{host_name_problem, shorten};
use super::settings::Config;
use crate::error::Error;

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
