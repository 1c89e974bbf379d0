//! How a proxy listens and bounds its sessions ([`ProxyOptions`], [`ListenAddress`]), and
//! setting those options by name, so every binding passes `key=value` pairs and the rule for
//! each (its name, its range, its error text) lives here once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::client::Route;
use crate::error::{Error, Result};

/// Where a proxy listens, or listens now (with the port a `:0` request was given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddress {
    /// A TCP address. Loopback unless [`ProxyOptions::allow_remote`] is set.
    Tcp(SocketAddr),
    /// A Unix socket path, created with [`ProxyOptions::unix_mode`] and removed at close.
    Unix(PathBuf),
}

impl ListenAddress {
    /// The listening IP as text (without brackets for IPv6); `None` on a Unix socket.
    pub fn host(&self) -> Option<String> {
        match self {
            ListenAddress::Tcp(a) => Some(a.ip().to_string()),
            ListenAddress::Unix(_) => None,
        }
    }

    /// The listening port; `None` on a Unix socket.
    pub fn port(&self) -> Option<u16> {
        match self {
            ListenAddress::Tcp(a) => Some(a.port()),
            ListenAddress::Unix(_) => None,
        }
    }

    /// The Unix socket's path; `None` on TCP.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            ListenAddress::Tcp(_) => None,
            ListenAddress::Unix(p) => Some(p),
        }
    }
}

/// `IP:PORT` (`[IP]:PORT` for IPv6) or `unix:PATH`.
impl std::fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddress::Tcp(addr) => write!(f, "{addr}"),
            ListenAddress::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// How a proxy listens and bounds its sessions.
#[derive(Clone, Debug)]
pub struct ProxyOptions {
    /// Where to listen. Default `127.0.0.1:0` (a free loopback port).
    pub listen: ListenAddress,
    /// How long a request may wait for a primary (a promotion under way, none known yet) before
    /// it is answered `FENCED` without being sent. `None`: the URL's `command_timeout_ms`.
    pub hold: Option<Duration>,
    /// Most client connections at once; past it a new one gets Redis' own `ERR max number of
    /// clients reached` and is closed. Default 10,000 (Redis' `maxclients` default).
    pub max_clients: usize,
    /// Closes a session with nothing in flight, no subscription and no MONITOR after this long
    /// without a request. `None` (default): never, as Redis' `timeout 0`.
    pub idle_timeout: Option<Duration>,
    /// Largest request accepted, as the server's `proto-max-bulk-len` (default 512 MiB): a
    /// larger one gets an error reply and its session is closed.
    pub max_request_bytes: usize,
    /// [`Route::Primary`] (default): every session goes to the verified primary.
    /// [`Route::Read`]: sessions go where the URL's `read_from` sends reads (replicas); writes
    /// there get the server's READONLY.
    pub route: Route,
    /// Authenticates sessions whose client did not with the URL's data-node credentials.
    /// Off by default: anyone who can connect to the listener would act as that user. Only
    /// allowed on a Unix socket or a loopback address.
    pub lend_credentials: bool,
    /// Allows a TCP address that is not loopback. Off by default: a proxy passes on whatever
    /// reaches it, so exposing it beyond this host exposes the primary (with the client's own
    /// AUTH still checked by the server), with none of the server's own network protections
    /// (`protected-mode`, `bind`).
    pub allow_remote: bool,
    /// The Unix socket's file mode. Default `0o600`: the owner only.
    pub unix_mode: u32,
}

impl Default for ProxyOptions {
    fn default() -> ProxyOptions {
        ProxyOptions {
            listen: ListenAddress::Tcp(SocketAddr::from(([127, 0, 0, 1], 0))),
            hold: None,
            max_clients: 10_000,
            idle_timeout: None,
            max_request_bytes: 512 * 1024 * 1024,
            route: Route::Primary,
            lend_credentials: false,
            allow_remote: false,
            unix_mode: 0o600,
        }
    }
}

/// The option names [`ProxyOptions::set`] takes; any other key belongs to the client's URL.
pub const PROXY_KEYS: [&str; 9] = [
    "listen",
    "hold_ms",
    "max_clients",
    "idle_timeout_ms",
    "max_request_bytes",
    "route",
    "lend_credentials",
    "allow_remote",
    "unix_mode",
];

impl ProxyOptions {
    /// Sets one option by name. `listen` takes `HOST:PORT` (an IP literal; port 0 picks a free
    /// one) or `unix:PATH`; `route` takes `primary` or `read`; booleans take `true`/`false`
    /// (or `1`/`0`); `unix_mode` is octal (`600`). Errors name the key and the value's problem,
    /// never echo a value longer than a line.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "listen" => self.listen = listen(value)?,
            "hold_ms" => self.hold = Some(Duration::from_millis(number(key, value, 1)?)),
            "max_clients" => self.max_clients = number(key, value, 1)? as usize,
            "idle_timeout_ms" => {
                let ms = number(key, value, 0)?;
                self.idle_timeout = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "max_request_bytes" => self.max_request_bytes = number(key, value, 1024)? as usize,
            "route" => {
                self.route = match value {
                    "primary" => Route::Primary,
                    "read" => Route::Read,
                    _ => {
                        return Err(Error::config(format!(
                            "proxy option route must be primary or read, not {}",
                            shown(value)
                        )))
                    }
                }
            }
            "lend_credentials" => self.lend_credentials = boolean(key, value)?,
            "allow_remote" => self.allow_remote = boolean(key, value)?,
            "unix_mode" => {
                self.unix_mode = u32::from_str_radix(value, 8)
                    .ok()
                    .filter(|m| *m <= 0o777)
                    .ok_or_else(|| {
                        Error::config(format!(
                            "proxy option unix_mode must be an octal file mode such as 600, not {}",
                            shown(value)
                        ))
                    })?
            }
            _ => {
                return Err(Error::config(format!(
                    "unknown proxy option {}; known: {}",
                    shown(key),
                    PROXY_KEYS.join(", ")
                )))
            }
        }
        Ok(())
    }
}

fn listen(value: &str) -> Result<ListenAddress> {
    if let Some(path) = value.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(Error::config("proxy option listen: unix: needs a path"));
        }
        return Ok(ListenAddress::Unix(PathBuf::from(path)));
    }
    value
        .parse::<SocketAddr>()
        .map(ListenAddress::Tcp)
        .map_err(|_| {
            Error::config(format!(
                "proxy option listen must be IP:PORT (e.g. 127.0.0.1:0) or unix:PATH, not {}",
                shown(value)
            ))
        })
}

fn number(key: &str, value: &str, min: u64) -> Result<u64> {
    value
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= min)
        .ok_or_else(|| {
            Error::config(format!(
                "proxy option {key} must be a whole number of at least {min}, not {}",
                shown(value)
            ))
        })
}

fn boolean(key: &str, value: &str) -> Result<bool> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(Error::config(format!(
            "proxy option {key} must be true or false, not {}",
            shown(value)
        ))),
    }
}

/// A value as errors quote it: on one line, cut at 64 characters.
fn shown(value: &str) -> String {
    let one_line: String = value.chars().filter(|c| !c.is_control()).take(64).collect();
    format!("{one_line:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_sets_its_option_and_bad_values_are_named() {
        let mut o = ProxyOptions::default();
        o.set("listen", "unix:/tmp/x.sock").unwrap();
        assert_eq!(o.listen, ListenAddress::Unix("/tmp/x.sock".into()));
        o.set("listen", "[::1]:7000").unwrap();
        o.set("hold_ms", "1500").unwrap();
        o.set("idle_timeout_ms", "0").unwrap();
        o.set("route", "read").unwrap();
        o.set("lend_credentials", "1").unwrap();
        o.set("unix_mode", "660").unwrap();
        assert_eq!(o.hold, Some(Duration::from_millis(1500)));
        assert_eq!(
            (o.idle_timeout, o.route, o.lend_credentials),
            (None, Route::Read, true)
        );
        assert_eq!(o.unix_mode, 0o660);
        for (key, value, says) in [
            ("listen", "localhost:1", "must be IP:PORT"),
            ("hold_ms", "0", "at least 1"),
            ("max_clients", "-3", "whole number"),
            ("route", "replica", "primary or read"),
            ("allow_remote", "yes", "true or false"),
            ("unix_mode", "999", "octal"),
            ("colour", "1", "unknown proxy option"),
        ] {
            let e = ProxyOptions::default().set(key, value).unwrap_err();
            assert!(e.message().contains(says), "{key}={value}: {e}");
            assert_eq!(e.code(), crate::ErrorCode::Config);
        }
    }
}
