//! The core's fencing RESP proxy ([`HostProxy`]) for the foreign side: started from a URL and
//! options, it returns once it listens (never waiting for discovery); any Redis client then
//! points at its address as if at one standalone Redis. Which key goes to the proxy and which to
//! the client, every option's rule and error, the fence and the close are the core's; this file
//! converts values.

use std::collections::HashMap;
use std::sync::Arc;

use sentinel_recovery::deadline;
use sentinel_recovery::host::HostProxy;

use crate::codes::SentinelError;
use crate::model::TimeoutUnit;

type Outcome<T> = Result<T, SentinelError>;

/// What a proxy has done since it started ([`Proxy::stats`]). Every field only grows, except
/// `sessions_open`. Counts are signed 64-bit so that Java can read them (a Kotlin `ULong`
/// property has no Java getter); they cannot reach 2^63.
#[derive(Clone, Debug, PartialEq, uniffi::Record)]
pub struct ProxyStats {
    /// Client connections open now.
    pub sessions_open: i64,
    /// Client connections accepted since the start.
    pub sessions_accepted: i64,
    /// Client connections refused with `max number of clients reached`.
    pub sessions_refused: i64,
    /// Requests written to a data node.
    pub commands_forwarded: i64,
    /// Requests that had to wait for a primary (a promotion under way, no primary yet).
    pub commands_held: i64,
    /// Time those requests waited, summed, in seconds.
    pub held_seconds: f64,
    /// Held requests answered `FENCED` because no primary came within the hold bound.
    pub held_expired: i64,
    /// Replies read from a primary being demoted that were turned into `UNCERTAIN` errors.
    pub fenced_replies: i64,
    /// Writes answered `NOTREPLICATED` (`wait_replicas`).
    pub not_replicated: i64,
    /// Sessions moved to a new primary with their state replayed.
    pub moves: i64,
    /// Sessions closed at a move because their state could not follow (MONITOR, CLIENT
    /// TRACKING, a reply still pending past the hold bound).
    pub sessions_closed_at_move: i64,
    /// `primary_changed` events seen.
    pub primary_changes: i64,
    /// Upstream connections that failed to open or broke.
    pub upstream_errors: i64,
    /// Client connections closed for malformed or oversized requests.
    pub malformed_requests: i64,
}

impl From<sentinel_recovery::ProxyStats> for ProxyStats {
    fn from(s: sentinel_recovery::ProxyStats) -> ProxyStats {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        ProxyStats {
            sessions_open: n(s.sessions_open),
            sessions_accepted: n(s.sessions_accepted),
            sessions_refused: n(s.sessions_refused),
            commands_forwarded: n(s.commands_forwarded),
            commands_held: n(s.commands_held),
            held_seconds: s.held_seconds,
            held_expired: n(s.held_expired),
            fenced_replies: n(s.fenced_replies),
            not_replicated: n(s.not_replicated),
            moves: n(s.moves),
            sessions_closed_at_move: n(s.sessions_closed_at_move),
            primary_changes: n(s.primary_changes),
            upstream_errors: n(s.upstream_errors),
            malformed_requests: n(s.malformed_requests),
        }
    }
}

/// A fencing RESP proxy in front of one Sentinel-managed service, running on the core's
/// threads in this process. Error replies of the proxy itself begin with a stable code word:
/// `UNCERTAIN` (the command reached a primary being demoted, or its connection broke before the
/// reply: it may or may not have been applied; never re-sent), `FENCED` (no verified primary
/// within the hold bound: not sent), `NOTREPLICATED` (`wait_replicas` not met) and `EXECABORT`
/// (a MULTI was open when the primary changed).
#[derive(uniffi::Object)]
pub struct Proxy {
    proxy: HostProxy,
}

#[uniffi::export]
impl Proxy {
    /// Parses `url` (`redis+sentinel://...`), applies `options` (a proxy key, one of `listen`,
    /// `hold_ms`, `max_clients`, `idle_timeout_ms`, `max_request_bytes`, `route`,
    /// `lend_credentials`, `allow_remote`, `unix_mode`, to the proxy; any other to the client,
    /// as the URL's query) and starts the proxy; returns once it accepts connections, without
    /// waiting for discovery. A bad URL or option fails with `config` naming it; an address that
    /// cannot be bound fails too.
    #[uniffi::constructor]
    pub fn start(url: String, options: HashMap<String, String>) -> Outcome<Arc<Proxy>> {
        let mut options: Vec<(String, String)> = options.into_iter().collect();
        // Applied in a stable order, so the same map always gives the same first error.
        options.sort();
        let proxy = HostProxy::start(&url, &options).map_err(|e| SentinelError::from(&e))?;
        Ok(Arc::new(Proxy { proxy }))
    }

    /// Where the proxy listens: `IP:PORT` (`[IP]:PORT` for IPv6) or `unix:PATH`.
    pub fn address(&self) -> String {
        self.proxy.address().to_string()
    }

    /// The listening IP (without brackets for IPv6); `None` on a Unix socket.
    pub fn host(&self) -> Option<String> {
        self.proxy.address().host()
    }

    /// The listening port; `None` on a Unix socket.
    pub fn port(&self) -> Option<u16> {
        self.proxy.address().port()
    }

    /// The Unix socket's path; `None` on TCP.
    pub fn path(&self) -> Option<String> {
        self.proxy
            .address()
            .path()
            .map(|p| p.to_string_lossy().into_owned())
    }

    /// The proxy's counters now; `closed` once it was closed.
    pub fn stats(&self) -> Outcome<ProxyStats> {
        self.proxy
            .stats()
            .map(ProxyStats::from)
            .map_err(|e| SentinelError::from(&e))
    }

    /// Whether the proxy was closed (or is closing).
    pub fn is_closed(&self) -> bool {
        self.proxy.stats().is_err()
    }

    /// Closes the proxy: stops accepting, lets replies in flight reach their clients for up to
    /// `grace` in `unit` (`None`: 5 s), then closes every session and the proxy's client;
    /// completes after all that. A grace out of range fails with `config` and closes nothing.
    /// Idempotent. (Named `shutdown`: uniffi's generated classes use `close` to free the object.)
    pub async fn shutdown(&self, grace: Option<f64>, unit: TimeoutUnit) -> Outcome<()> {
        let grace =
            deadline::grace("grace", grace, unit.into()).map_err(|e| SentinelError::from(&e))?;
        let (sender, receiver) = futures_channel::oneshot::channel();
        self.proxy.close(
            grace,
            Box::new(move || {
                let _ = sender.send(());
            }),
        );
        // The host layer runs `done` exactly once, also when no runtime is left.
        let _ = receiver.await;
        Ok(())
    }

    /// [`Proxy::shutdown`], blocking the calling thread until it is complete (for `close()` of
    /// an `AutoCloseable`). Refused with `config` on a core thread (an event listener's call),
    /// which the close itself needs (the host layer's rule).
    pub fn shutdown_blocking(&self, grace: Option<f64>, unit: TimeoutUnit) -> Outcome<()> {
        let grace =
            deadline::grace("grace", grace, unit.into()).map_err(|e| SentinelError::from(&e))?;
        self.proxy
            .close_blocking(grace)
            .map_err(|e| SentinelError::from(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(options: &[(&str, &str)]) -> Outcome<Arc<Proxy>> {
        let options = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Proxy::start("redis+sentinel://127.0.0.1:1/svc".into(), options)
    }

    #[test]
    fn a_bad_option_fails_with_config_naming_it() {
        for (key, value) in [
            ("hold_ms", "soon"),
            ("command_timeout_ms", "x"),
            ("route", "x"),
        ] {
            let e = start(&[(key, value)]).err().expect(key);
            let (code, detail) = e.parts();
            assert_eq!(code, "config", "{key}");
            assert!(detail.contains(key), "{key}: {detail}");
        }
    }

    #[test]
    fn starts_at_once_reports_where_it_listens_and_closes_once() {
        let proxy = start(&[("hold_ms", "100")]).unwrap();
        let port = proxy.port().unwrap();
        assert_ne!(port, 0);
        assert_eq!(proxy.host().as_deref(), Some("127.0.0.1"));
        assert_eq!(proxy.address(), format!("127.0.0.1:{port}"));
        assert_eq!(proxy.path(), None);
        assert_eq!(proxy.stats().unwrap().sessions_open, 0);
        let e = proxy
            .shutdown_blocking(Some(-1.0), TimeoutUnit::Milliseconds)
            .unwrap_err();
        assert!(e.parts().1.contains("grace"), "{e}");
        assert!(!proxy.is_closed(), "a refused grace closes nothing");
        proxy
            .shutdown_blocking(Some(0.1), TimeoutUnit::Seconds)
            .unwrap();
        assert!(proxy.is_closed());
        assert_eq!(proxy.stats().unwrap_err().parts().0, "closed");
        futures_executor::block_on(proxy.shutdown(None, TimeoutUnit::Milliseconds)).unwrap();
    }

    #[test]
    fn listens_on_a_unix_socket_when_asked() {
        let dir = std::env::temp_dir().join(format!("sr-uniffi-proxy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.sock");
        let listen = format!("unix:{}", path.display());
        let proxy = start(&[("listen", &listen)]).unwrap();
        assert_eq!(proxy.address(), listen);
        assert_eq!(proxy.path().as_deref(), path.to_str());
        assert_eq!((proxy.host(), proxy.port()), (None, None));
        proxy
            .shutdown_blocking(Some(0.0), TimeoutUnit::Seconds)
            .unwrap();
        assert!(!path.exists(), "the socket is removed at close");
        let _ = std::fs::remove_dir_all(dir);
    }
}
