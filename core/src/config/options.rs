//! Options, key by key: [`Config::set`] is the one place a value is checked and applied.

use std::path::PathBuf;

use super::address_map::AddressMap;
use super::names::{host_name_problem, parse_server_name, shorten};
use super::settings::{Config, ReadFrom};
use crate::error::Error;
use crate::types::{Credentials, Protocol, Secret};

impl Config {
    /// Sets one option by its URL key; bindings pass their options objects through here so every
    /// language accepts the same keys with the same checks. Unknown keys are an error.
    pub fn set(&mut self, key: &str, value: &str) -> crate::Result<()> {
        match key {
            "db" => self.db = parse_num(key, value, 0, i64::from(i32::MAX))?,
            "client_name" => {
                if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(Error::config(
                        "option client_name must not contain spaces or control characters",
                    ));
                }
                self.client_name = (!value.is_empty()).then(|| value.to_string());
            }
            "protocol" => {
                self.protocol = match value {
                    "2" | "resp2" => Protocol::Resp2,
                    "3" | "resp3" => Protocol::Resp3,
                    _ => {
                        return Err(Error::config(format!(
                            "option protocol must be 2 or 3, not '{value}'"
                        )))
                    }
                }
            }
            "connect_timeout_ms" => self.connect_timeout_ms = parse_num(key, value, 1, 3_600_000)?,
            "command_timeout_ms" => self.command_timeout_ms = parse_num(key, value, 1, 3_600_000)?,
            "sentinel_timeout_ms" => {
                self.sentinel_timeout_ms = parse_num(key, value, 1, 3_600_000)?
            }
            "check_interval_ms" => self.check_interval_ms = parse_num(key, value, 10, 86_400_000)?,
            "retry_base_ms" => self.retry_base_ms = parse_num(key, value, 1, 3_600_000)?,
            "retry_max_ms" => self.retry_max_ms = parse_num(key, value, 1, 3_600_000)?,
            "dns_timeout_ms" => self.dns_timeout_ms = parse_num(key, value, 1, 3_600_000)?,
            "queue_size" => self.queue_size = parse_num(key, value, 0, 10_000_000)?,
            "wait_replicas" => self.wait_replicas = parse_num(key, value, 0, 1_000)?,
            "wait_timeout_ms" => self.wait_timeout_ms = parse_num(key, value, 1, 3_600_000)?,
            "sentinel_majority_ms" => {
                let ms = parse_num(key, value, 0, 3_600_000)?;
                if ms != 0 && ms < 200 {
                    return Err(Error::config(format!(
                        "option sentinel_majority_ms must be 0 (off) or at least 200 (the \
                         sentinels are asked four times per bound), not '{value}'"
                    )));
                }
                self.sentinel_majority_ms = ms;
            }
            "sentinel_events" => {
                self.sentinel_events = match value {
                    "true" | "yes" | "1" => true,
                    "false" | "no" | "0" => false,
                    _ => {
                        return Err(Error::config(format!(
                            "option sentinel_events must be true or false, not '{value}'"
                        )))
                    }
                }
            }
            "dns_server" => {
                self.dns_server = Some(value.parse().map_err(|_| {
                    Error::config(format!("option dns_server must be ip:port, not '{value}'"))
                })?)
            }
            "read_from" => {
                self.read_from = match value {
                    "primary" | "master" => ReadFrom::Primary,
                    "prefer-replica" | "prefer_replica" => ReadFrom::PreferReplica,
                    "replica" => ReadFrom::Replica,
                    _ => {
                        return Err(Error::config(format!(
                    "option read_from must be primary, prefer-replica or replica, not '{value}'"
                )))
                    }
                }
            }
            "sentinel_user" => {
                let password = self.sentinel_auth.take().map(|c| c.password);
                self.sentinel_auth = Some(Credentials {
                    username: (!value.is_empty()).then(|| value.to_string()),
                    password: password.unwrap_or_else(|| Secret::new("")),
                });
            }
            "sentinel_password" => {
                let username = self.sentinel_auth.take().and_then(|c| c.username);
                self.sentinel_auth = Some(Credentials {
                    username,
                    password: Secret::new(value),
                });
            }
            "username" | "user" => {
                let password = self.auth.take().map(|c| c.password);
                self.auth = Some(Credentials {
                    username: (!value.is_empty()).then(|| value.to_string()),
                    password: password.unwrap_or_else(|| Secret::new("")),
                });
            }
            "password" => {
                let username = self.auth.take().and_then(|c| c.username);
                self.auth = Some(Credentials {
                    username,
                    password: Secret::new(value),
                });
            }
            "tls" => {
                let on = parse_bool(key, value)?;
                self.sentinel_tls = on;
                self.data_tls = on;
            }
            "sentinel_tls" => self.sentinel_tls = parse_bool(key, value)?,
            "data_tls" => self.data_tls = parse_bool(key, value)?,
            "tls_insecure" => self.tls_insecure = parse_bool(key, value)?,
            "tls_ca_file" => self.tls_ca_file = parse_path(value),
            "tls_cert_file" => self.tls_cert_file = parse_path(value),
            "tls_key_file" => self.tls_key_file = parse_path(value),
            "sentinel_tls_ca_file" => self.sentinel_tls_ca_file = parse_path(value),
            "sentinel_tls_cert_file" => self.sentinel_tls_cert_file = parse_path(value),
            "sentinel_tls_key_file" => self.sentinel_tls_key_file = parse_path(value),
            "tls_server_name" => {
                if !value.is_empty() {
                    let bare = value
                        .strip_prefix('[')
                        .and_then(|v| v.strip_suffix(']'))
                        .unwrap_or(value);
                    if bare.parse::<std::net::IpAddr>().is_err() {
                        if let Some(problem) = host_name_problem(value) {
                            return Err(Error::config(format!(
                                "option tls_server_name: {problem}"
                            )));
                        }
                    }
                    parse_server_name(value).map_err(|_| {
                        Error::config(format!(
                            "option tls_server_name must be a DNS name or an IP address, not \
                             '{}'",
                            shorten(value)
                        ))
                    })?;
                }
                self.tls_server_name = (!value.is_empty()).then(|| value.to_string());
            }
            "address_map" => self.address_map.set_entries(AddressMap::parse(value)?),
            _ => return Err(Error::config(format!("unknown option '{key}'"))),
        }
        Ok(())
    }
}

fn parse_bool(key: &str, value: &str) -> crate::Result<bool> {
    match value {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Error::config(format!(
            "option {key} must be true or false, not '{value}'"
        ))),
    }
}

/// A file path option; empty means unset (so an options object can clear a URL's value).
fn parse_path(value: &str) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

fn parse_num<T>(key: &str, value: &str, min: T, max: T) -> crate::Result<T>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match value.parse::<T>() {
        Ok(n) if n >= min && n <= max => Ok(n),
        _ => Err(Error::config(format!(
            "option {key} must be a whole number in {min}..{max}, not '{value}'"
        ))),
    }
}
