//! URL and options: the one way every language describes what to follow.

use std::path::PathBuf;

pub use crate::types::{Address, Credentials, Protocol, Secret};

/// Which node commands are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadFrom {
    /// Everything goes to the primary.
    #[default]
    Primary,
    /// Reads go to a replica when one is healthy, else to the primary.
    PreferReplica,
    /// Reads go to replicas only.
    Replica,
}

/// The default sentinel port when a seed gives none.
pub const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// Everything needed to follow one service: parsed from the URL, then adjusted key by key.
///
/// `Debug` is safe to log: passwords print as `***`. [`Config::redacted_url`] gives the URL form
/// without secrets.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// Configured sentinels, in order; host names are kept and re-resolved, never replaced by IPs.
    pub sentinels: Vec<Address>,
    /// The service (master name) the sentinels monitor.
    pub service: String,
    /// Credentials for data nodes (primary and replicas): the URL's userinfo.
    pub auth: Option<Credentials>,
    /// Credentials for sentinels (`sentinel_user`, `sentinel_password`).
    pub sentinel_auth: Option<Credentials>,
    /// Database index selected on data nodes.
    pub db: i64,
    /// `CLIENT SETNAME` value on every connection.
    pub client_name: Option<String>,
    /// RESP version to ask for first.
    pub protocol: Protocol,
    /// TCP connect plus handshake deadline.
    pub connect_timeout_ms: u64,
    /// Deadline of one command on the data path.
    pub command_timeout_ms: u64,
    /// Deadline of one discovery round across all sentinels.
    pub sentinel_timeout_ms: u64,
    /// Node to read from.
    pub read_from: ReadFrom,
    /// Interval of the backstop check while everything is healthy.
    pub check_interval_ms: u64,
    /// First retry delay after a failed discovery; doubles per failure.
    pub retry_base_ms: u64,
    /// Cap of the retry delay.
    pub retry_max_ms: u64,
    /// Per-lookup DNS deadline.
    pub dns_timeout_ms: u64,
    /// A DNS server to use instead of the system's (tests, special setups).
    pub dns_server: Option<std::net::SocketAddr>,
    /// Commands allowed to wait for a primary at once; more fail with `queue_full`.
    pub queue_size: usize,
    /// Subscribe to sentinel events (`sentinel_events`, on by default). Off, changes are learnt
    /// only from discovery rounds (the periodic check and the data path's reports): for one-shot
    /// tools such as `exec`, which would otherwise open and drop a subscription per sentinel.
    pub sentinel_events: bool,
    /// TLS to sentinels (`sentinel_tls`; `tls` and the `rediss+sentinel://` scheme set it too).
    pub sentinel_tls: bool,
    /// TLS to data nodes, primary and replicas (`data_tls`; `tls` and `rediss+sentinel://` set it
    /// too). Independent of [`Config::sentinel_tls`]: sentinels and data nodes are often set up
    /// separately.
    pub data_tls: bool,
    /// PEM file of the CA certificates that sign the servers' certificates (`tls_ca_file`); the
    /// system's roots when unset. Used for data nodes, and for sentinels unless
    /// [`Config::sentinel_tls_ca_file`] is set.
    pub tls_ca_file: Option<PathBuf>,
    /// PEM file of the client certificate chain for mutual TLS (`tls_cert_file`), with
    /// [`Config::tls_key_file`]. Used for data nodes, and for sentinels unless
    /// [`Config::sentinel_tls_cert_file`] is set.
    pub tls_cert_file: Option<PathBuf>,
    /// PEM file of the client certificate's private key (`tls_key_file`). Only the path is kept;
    /// the file is read when a client is opened and its contents never appear in errors or logs.
    pub tls_key_file: Option<PathBuf>,
    /// CA file for sentinels only (`sentinel_tls_ca_file`); defaults to [`Config::tls_ca_file`].
    pub sentinel_tls_ca_file: Option<PathBuf>,
    /// Client certificate for sentinels only (`sentinel_tls_cert_file`); defaults to
    /// [`Config::tls_cert_file`].
    pub sentinel_tls_cert_file: Option<PathBuf>,
    /// Client key for sentinels only (`sentinel_tls_key_file`); defaults to
    /// [`Config::tls_key_file`].
    pub sentinel_tls_key_file: Option<PathBuf>,
    /// Skip server certificate verification on both sides (`tls_insecure`): the connection is
    /// encrypted but the server is not authenticated. Off unless asked for explicitly.
    pub tls_insecure: bool,
    /// Verify every server's certificate against this name (`tls_server_name`) instead of the host
    /// connected to (the configured sentinel host, or the host or IP a sentinel reported for a
    /// data node).
    pub tls_server_name: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            sentinels: Vec::new(),
            service: String::new(),
            auth: None,
            sentinel_auth: None,
            db: 0,
            client_name: None,
            protocol: Protocol::Resp3,
            connect_timeout_ms: 2000,
            command_timeout_ms: 5000,
            sentinel_timeout_ms: 500,
            read_from: ReadFrom::Primary,
            check_interval_ms: 5000,
            retry_base_ms: 100,
            retry_max_ms: 5000,
            dns_timeout_ms: 1000,
            dns_server: None,
            queue_size: 4096,
            sentinel_events: true,
            sentinel_tls: false,
            data_tls: false,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            sentinel_tls_ca_file: None,
            sentinel_tls_cert_file: None,
            sentinel_tls_key_file: None,
            tls_insecure: false,
            tls_server_name: None,
        }
    }
}

const SCHEMES: [&str; 2] = ["redis+sentinel", "valkey+sentinel"];
const TLS_SCHEMES: [&str; 2] = ["rediss+sentinel", "valkeys+sentinel"];

impl Config {
    /// Parses `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service[?key=value&...]`.
    ///
    /// `valkey+sentinel://` is a synonym; `rediss+sentinel://` (and `valkeys+sentinel://`) turn
    /// TLS on for sentinels and data nodes alike. Percent-escapes are decoded in the userinfo and
    /// in query values. Every error names the offending part and never contains the password.
    pub fn from_url(url: &str) -> crate::Result<Config> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| Error::config("URL must start with redis+sentinel://"))?;
        let tls = TLS_SCHEMES.contains(&scheme);
        if !tls && !SCHEMES.contains(&scheme) {
            return Err(Error::config(format!(
                "unknown scheme '{scheme}': expected redis+sentinel, rediss+sentinel or \
                 valkey+sentinel"
            )));
        }
        let (before_query, query) = match rest.split_once('?') {
            Some((a, q)) => (a, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = before_query
            .split_once('/')
            .ok_or_else(|| Error::config("URL has no /service after the sentinel list"))?;
        // The userinfo ends at the first '/': a password holding a raw '/' (base64 has them)
        // leaves its '@' behind it, and its start would be read as a sentinel (its text then
        // shown in errors, or a digit-only start taken as a port). Refused, showing nothing.
        if path.contains('@') {
            return Err(Error::config(
                "'@' after the first '/': write a '/' in the user name or password as %2F \
                 (and an '@' in the service name as %40)",
            ));
        }
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let mut config = Config {
            auth: userinfo.map(parse_userinfo).transpose()?,
            sentinel_tls: tls,
            data_tls: tls,
            ..Config::default()
        };
        config.sentinels = hosts
            .split(',')
            .enumerate()
            .map(|(i, h)| parse_host_port(h).map_err(|e| e.context(format!("sentinel #{}", i + 1))))
            .collect::<crate::Result<_>>()?;
        config.service = decode(path, "service")?;
        if let Some(query) = query {
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                let value = decode(value, key)?;
                config.set(key, &value)?;
            }
        }
        config.validate()?;
        Ok(config)
    }

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
            _ => return Err(Error::config(format!("unknown option '{key}'"))),
        }
        Ok(())
    }

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

    /// The URL form of this configuration with passwords replaced by `***`.
    pub fn redacted_url(&self) -> String {
        let user = match &self.auth {
            Some(Credentials {
                username: Some(u), ..
            }) => format!("{u}:***@"),
            Some(_) => ":***@".to_string(),
            None => String::new(),
        };
        let hosts: Vec<String> = self.sentinels.iter().map(|a| a.to_string()).collect();
        let scheme = if self.sentinel_tls && self.data_tls {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        format!("{scheme}://{user}{}/{}", hosts.join(","), self.service)
    }
}

use crate::error::Error;
use percent_encoding::percent_decode_str;

fn decode(value: &str, what: &str) -> crate::Result<String> {
    percent_decode_str(value)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| Error::config(format!("{what} is not valid UTF-8 after percent-decoding")))
}

fn parse_userinfo(userinfo: &str) -> crate::Result<Credentials> {
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (userinfo, None),
    };
    let user = decode(user, "username")?;
    // Redis URLs put a lone password in the user position ("redis://secret@host"); with no colon
    // we follow that convention, as redis-py and ioredis do.
    let (username, password) = match password {
        Some(p) => (
            (!user.is_empty()).then_some(user),
            percent_decode_str(p)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| Error::config("password is not valid UTF-8 after percent-decoding"))?,
        ),
        None => (None, user),
    };
    Ok(Credentials {
        username,
        password: Secret::new(password),
    })
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

/// Parses `host`, `host:port`, `[v6]` or `[v6]:port` (default port 26379).
///
/// Host names are checked up front (length, labels, characters); errors show at most the start
/// of what was given.
pub(crate) fn parse_host_port(text: &str) -> crate::Result<Address> {
    if text.is_empty() {
        return Err(Error::config("empty host"));
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| Error::config(format!("'{}' has an unclosed '['", shorten(text))))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| {
                Error::config(format!(
                    "unexpected '{}' after ']' in '{}'",
                    shorten(p),
                    shorten(text)
                ))
            })?),
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(Error::config(format!(
                "'{}' in brackets is not an IPv6 address",
                shorten(host)
            )));
        }
        (host, port)
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            Some(_) => {
                return Err(Error::config(format!(
                    "'{}': write IPv6 addresses in brackets, like [::1]:26379",
                    shorten(text)
                )))
            }
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(Error::config(format!(
            "'{}' has an empty host",
            shorten(text)
        )));
    }
    if host.parse::<std::net::IpAddr>().is_err() {
        if let Some(problem) = host_name_problem(host) {
            return Err(Error::config(problem));
        }
    }
    let port = match port {
        None => DEFAULT_SENTINEL_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => {
                return Err(Error::config(format!(
                    "port '{}' of '{}' is not in 1..65535",
                    shorten(p),
                    shorten(host)
                )))
            }
            Ok(n) => n,
        },
    };
    Ok(Address::new(host, port))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(url: &str) -> String {
        let e = Config::from_url(url).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config, "{url}");
        e.message().to_string()
    }

    #[test]
    fn full_url() {
        let c = Config::from_url(
            "redis+sentinel://app:s%40cret@s1.example,10.0.0.2:26380,[::1]:26381/cache?db=2&client_name=svc&protocol=2\
             &sentinel_user=watcher&sentinel_password=pw&connect_timeout_ms=300&read_from=prefer-replica",
        )
        .unwrap();
        assert_eq!(
            c.sentinels,
            [
                Address::new("s1.example", 26379),
                Address::new("10.0.0.2", 26380),
                Address::new("::1", 26381)
            ]
        );
        assert_eq!(c.service, "cache");
        let auth = c.auth.as_ref().unwrap();
        assert_eq!(auth.username.as_deref(), Some("app"));
        assert_eq!(auth.password.expose(), "s@cret");
        let sauth = c.sentinel_auth.as_ref().unwrap();
        assert_eq!(
            (sauth.username.as_deref(), sauth.password.expose()),
            (Some("watcher"), "pw")
        );
        assert_eq!(
            (c.db, c.protocol, c.connect_timeout_ms),
            (2, Protocol::Resp2, 300)
        );
        assert_eq!(c.client_name.as_deref(), Some("svc"));
        assert_eq!(c.read_from, ReadFrom::PreferReplica);
    }

    #[test]
    fn synonyms_defaults_and_lone_password() {
        let c = Config::from_url("valkey+sentinel://secret@localhost/svc").unwrap();
        assert_eq!(c.sentinels, [Address::new("localhost", 26379)]);
        let auth = c.auth.unwrap();
        assert_eq!((auth.username, auth.password.expose()), (None, "secret"));
        let c = Config::from_url("redis+sentinel://:pw@h:1/s").unwrap();
        assert_eq!(c.auth.unwrap().username, None);
        assert_eq!(c.sentinel_timeout_ms, Config::default().sentinel_timeout_ms);
    }

    #[test]
    fn errors_name_the_bad_part() {
        assert!(err("redis://h/s").contains("unknown scheme 'redis'"));
        assert!(err("h:26379/s").contains("redis+sentinel://"));
        assert!(err("redis+sentinel://h/s?tls=maybe").contains("option tls must be"));
        assert!(err("redis+sentinel://h/s?tls_ca_file=/ca.pem").contains("tls_ca_file"));
        assert!(
            err("redis+sentinel://h/s?data_tls=1&sentinel_tls_ca_file=/ca.pem")
                .contains("sentinel_tls_ca_file")
        );
        assert!(err("rediss+sentinel://h/s?tls_server_name=a%20b").contains("tls_server_name"));
        assert!(err("redis+sentinel://h").contains("/service"));
        assert!(err("redis+sentinel://h/").contains("service name is empty"));
        assert!(err("redis+sentinel:///s").contains("sentinel #1"));
        assert!(err("redis+sentinel://a,,b/s").contains("sentinel #2"));
        assert!(err("redis+sentinel://h:0/s").contains("port '0'"));
        assert!(err("redis+sentinel://h:65536/s").contains("port '65536'"));
        assert!(err("redis+sentinel://h:x/s").contains("port 'x'"));
        assert!(err("redis+sentinel://h:-1/s").contains("port '-1'"));
        assert!(err("redis+sentinel://::1/s").contains("brackets"));
        assert!(err("redis+sentinel://[zz]:1/s").contains("not an IPv6"));
        assert!(err("redis+sentinel://h%20x/s").contains("not a valid host"));
        assert!(err("redis+sentinel://h/s?db=x").contains("option db"));
        assert!(err("redis+sentinel://h/s?db=-1").contains("option db"));
        assert!(err("redis+sentinel://h/s?protocol=4").contains("option protocol"));
        assert!(err("redis+sentinel://h/s?read_from=any").contains("option read_from"));
        assert!(err("redis+sentinel://h/s?colour=blue").contains("unknown option 'colour'"));
        assert!(
            err("redis+sentinel://h/s?retry_base_ms=500&retry_max_ms=100")
                .contains("retry_base_ms")
        );
        assert!(err("redis+sentinel://h/s?dns_server=nope").contains("dns_server"));
    }

    #[test]
    fn secrets_never_show() {
        let url = "redis+sentinel://app:hunter2@h/s?sentinel_password=swordfish&db=nope";
        let e = Config::from_url(url).unwrap_err();
        assert!(!e.to_string().contains("hunter2") && !e.to_string().contains("swordfish"));
        let c = Config::from_url("redis+sentinel://app:hunter2@h/s?sentinel_password=swordfish")
            .unwrap();
        let shown = format!("{c:?} {}", c.redacted_url());
        assert!(
            !shown.contains("hunter2") && !shown.contains("swordfish"),
            "{shown}"
        );
        assert!(c
            .redacted_url()
            .starts_with("redis+sentinel://app:***@h:26379/s"));
    }

    /// Fuzzing found (fuzz/ config_url, corpus crash-b286fd2e…, crash-6635cd40…): a password with
    /// a raw '/' ends the authority early, so its start was read as a sentinel: shown in the error
    /// ("port 'G' of 'n'"), or, digits only, taken as a port and the rest as the service.
    #[test]
    fn a_raw_slash_in_a_password_is_refused_without_showing_it() {
        for url in [
            "redis+sentinel://n:G/@/?=&db=",
            "valkeys+sentinel://q:1/!!))9G@/?",
            "redis+sentinel://app:c2VjcmV0/K3Bhc3M=@h/s",
            "redis+sentinel://app:12/34@h:26379/s",
            "redis+sentinel://:abc/def@h/s?db=1",
        ] {
            let m = err(url);
            assert!(m.contains("%2F"), "{url}: {m}");
            for part in ["G", "9G", "c2VjcmV0", "K3Bhc3M", "12", "34", "abc", "def"] {
                assert!(!m.contains(part), "{url}: {m}");
            }
        }
        // Written as %2F it is read whole; an '@' in the service is written %40.
        let c = Config::from_url("redis+sentinel://app:c2VjcmV0%2FK3Bhc3M=@h/s").unwrap();
        assert_eq!(c.auth.unwrap().password.expose(), "c2VjcmV0/K3Bhc3M=");
        assert_eq!(
            Config::from_url("redis+sentinel://h/a%40b")
                .unwrap()
                .service,
            "a@b"
        );
        assert!(err("redis+sentinel://h/a@b").contains("%40"));
        // '@' in a query value stays fine.
        let c = Config::from_url("redis+sentinel://h/s?sentinel_password=a@b/c").unwrap();
        assert_eq!(c.sentinel_auth.unwrap().password.expose(), "a@b/c");
    }

    /// Fuzzing found (fuzz/ config_url, corpus crash-2effb252…): `validate` let a hand-built
    /// config through with a sentinel on port 0, which the URL form refuses.
    #[test]
    fn validate_refuses_port_zero_like_the_url() {
        let mut c = Config::from_url("redis+sentinel://h/s").unwrap();
        c.sentinels.push(Address::new("-", 0));
        let e = c.validate().unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.message().starts_with("sentinel #2: port 0"), "{e}");
    }

    #[test]
    fn tls_keys() {
        let c = Config::from_url("rediss+sentinel://h/s").unwrap();
        assert!(c.sentinel_tls && c.data_tls && !c.tls_insecure);
        assert!(c.redacted_url().starts_with("rediss+sentinel://"));
        let c = Config::from_url(
            "redis+sentinel://h/s?sentinel_tls=true&tls_ca_file=/ca.pem&sentinel_tls_ca_file=/s.pem\
             &tls_cert_file=/c.pem&tls_key_file=/k.pem&tls_insecure=1&tls_server_name=cache.internal",
        )
        .unwrap();
        assert!(c.sentinel_tls && !c.data_tls && c.tls_insecure);
        assert_eq!(c.tls_ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(c.sentinel_tls_ca_file, Some(PathBuf::from("/s.pem")));
        assert_eq!(c.tls_server_name.as_deref(), Some("cache.internal"));
        let mut c = Config::from_url("rediss+sentinel://h/s?tls=false").unwrap();
        assert!(!c.sentinel_tls && !c.data_tls);
        c.set("data_tls", "yes").unwrap();
        assert!(c.data_tls && !c.sentinel_tls);
        c.set("tls_server_name", "10.0.0.1").unwrap();
        c.set("tls_server_name", "").unwrap();
        assert_eq!(c.tls_server_name, None);
        assert!(Config::from_url("valkeys+sentinel://h/s").unwrap().data_tls);
    }

    #[test]
    fn set_is_the_one_way_options_apply() {
        let mut c = Config::from_url("redis+sentinel://h/s").unwrap();
        c.set("password", "pw").unwrap();
        c.set("username", "u").unwrap();
        let auth = c.auth.clone().unwrap();
        assert_eq!(
            (auth.username.as_deref(), auth.password.expose()),
            (Some("u"), "pw")
        );
        assert!(c.set("check_interval_ms", "5").is_err());
        assert!(c.set("client_name", "has space").is_err());
        c.set("dns_server", "127.0.0.1:5353").unwrap();
        assert_eq!(c.dns_server, Some("127.0.0.1:5353".parse().unwrap()));
    }

    #[test]
    fn overlong_host_names_are_refused_up_front_without_being_echoed() {
        // Failure messages show the start only: a whole 2 MB name is what this guards against.
        let start = |m: &str| m.chars().take(300).collect::<String>();
        let huge = "a".repeat(2_000_000);
        let m = err(&format!(
            "redis+sentinel://ok.example,{huge}.example:26379/s"
        ));
        assert!(m.starts_with("sentinel #2: "), "{}", start(&m));
        assert!(m.contains("2000008 characters"), "{}", start(&m));
        assert!(m.contains("more than the 253 allowed"), "{}", start(&m));
        assert!(m.contains("aaaa…"), "{}", start(&m));
        assert!(m.len() < 200, "{}", start(&m));

        let label = "b".repeat(64);
        let m = err(&format!("redis+sentinel://x.{label}.example/s"));
        assert!(m.starts_with("sentinel #1: "), "{m}");
        assert!(m.contains("label #2"), "{m}");
        assert!(
            m.contains("64 characters long, more than the 63 allowed"),
            "{m}"
        );
        assert!(err("redis+sentinel://a..b/s").contains("empty label"));
        assert!(err("redis+sentinel://.a/s").contains("empty label"));
        let m = err(&format!("redis+sentinel://h:{huge}/s"));
        assert!(m.contains("port 'aaaa") && m.len() < 200, "{}", start(&m));

        // Longest allowed: 253 characters, labels of 63; a final dot does not count.
        let longest = [
            &"c".repeat(63)[..],
            &"d".repeat(63),
            &"e".repeat(63),
            &"f".repeat(61),
        ]
        .join(".");
        assert_eq!(longest.len(), 253);
        let c =
            Config::from_url(&format!("redis+sentinel://{longest}.:1,[::1],10.0.0.1/s")).unwrap();
        assert_eq!(c.sentinels[0].host.len(), 254);

        // Options objects and hand-built configs get the same check.
        let mut c = Config::from_url("redis+sentinel://h/s").unwrap();
        let e = c.set("tls_server_name", &huge).unwrap_err();
        assert!(
            e.message().starts_with("option tls_server_name: "),
            "{}",
            start(e.message())
        );
        assert!(e.message().contains("2000000 characters") && e.message().len() < 200);
        c.sentinels
            .push(Address::new(format!("{label}.example"), 1));
        let e = c.validate().unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.message().starts_with("sentinel #2: label #1"), "{e}");
    }

    #[test]
    fn shorten_cuts_at_a_character_boundary() {
        assert_eq!(shorten("short"), "short");
        let long = "é".repeat(100);
        let shown = shorten(&long);
        assert_eq!(shown.chars().count(), 65);
        assert!(shown.ends_with('…'));
    }
}
