//! `sentinel-recovery-testkit`: fixtures for sentinel-recovery's tests.
//!
//! - [`Topology`]: real `redis-server` (or Valkey) primary + replicas + sentinels on free loopback
//!   ports, each in its own temp dir, with fault injection on every [`Node`] (kill -9, SIGSTOP/SIGCONT,
//!   restart on the same or a new port, `CLIENT KILL`, `DEBUG SLEEP`, `REPLICAOF`).
//! - [`SlowDns`]: a DNS server with a per-name answer delay and a query log.
//! - [`FakeSentinel`]: a scriptable RESP2 server for replies real servers cannot be made to send.
//! - [`FaultProxy`]: a loopback TCP proxy with run-time latency, blackhole and reset faults.
//! - [`resp`]: the tiny synchronous RESP2 client used by all of the above.
//!
//! Every process a fixture starts is killed (SIGKILL + waitpid) when the fixture is dropped, also
//! when a test panics; processes are spawned with `PR_SET_PDEATHSIG` from a process-lifetime thread,
//! so they also die if the test process is killed.

#![warn(missing_docs)]

pub mod dns;
mod fake;
pub mod net;
pub mod proxy;
pub mod resp;
pub mod security;
pub mod setfull;
mod topology;

use std::fmt;
use std::net::{TcpListener, UdpSocket};
use std::time::{Duration, Instant};

pub use dns::SlowDns;
pub use fake::{
    master_reply, master_reply_named, replica_reply, sentinel_reply, FakeReply, FakeSentinel,
};
pub use proxy::{Affects, FaultProxy, LinkFaults};
pub use resp::{Conn, Reply};
pub use security::{AclSpec, AclUser, TlsFiles, TlsSpec};
pub use topology::{
    sentinel_url, start_stale_sentinel, Node, ServerKind, StaleSentinelSpec, Topology, TopologySpec,
};

/// Everything that can go wrong in the testkit. `Display` says what was being done.
#[derive(Debug)]
pub enum TestkitError {
    /// An I/O error while doing `context`.
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A [`wait_until`] (or another wait) ran out of time; the text names what was awaited and the
    /// last state seen.
    Timeout(String),
    /// The server answered with an error reply (text without the leading `-`).
    Server(String),
    /// The peer sent something that is not valid RESP2, or an unexpected reply shape.
    Protocol(String),
    /// A fixture could not be set up (missing binary, process exited at start, bad spec ...).
    Setup(String),
}

impl TestkitError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> TestkitError {
        TestkitError::Io {
            context: context.into(),
            source,
        }
    }
}

impl TestkitError {
    /// Appends `detail` (e.g. the last state seen) to the text of a `Timeout`, `Setup` or
    /// `Protocol` error; other kinds are returned unchanged.
    pub fn with_detail(self, detail: &str) -> TestkitError {
        match self {
            TestkitError::Timeout(s) => TestkitError::Timeout(format!("{s}; {detail}")),
            TestkitError::Setup(s) => TestkitError::Setup(format!("{s}; {detail}")),
            TestkitError::Protocol(s) => TestkitError::Protocol(format!("{s}; {detail}")),
            other => other,
        }
    }
}

impl fmt::Display for TestkitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestkitError::Io { context, source } => write!(f, "{context}: {source}"),
            TestkitError::Timeout(what) => write!(f, "timed out waiting for {what}"),
            TestkitError::Server(msg) => write!(f, "server error: {msg}"),
            TestkitError::Protocol(msg) => write!(f, "protocol error: {msg}"),
            TestkitError::Setup(msg) => write!(f, "setup failed: {msg}"),
        }
    }
}

impl std::error::Error for TestkitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TestkitError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Polls `f` every 25 ms until it returns `Some`, and returns that value; after `timeout` returns
/// [`TestkitError::Timeout`] naming `what`. `f` is always called at least once.
pub fn wait_until<T>(
    timeout: Duration,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> Result<T, TestkitError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(TestkitError::Timeout(format!(
                "{what} (after {:.1} s)",
                timeout.as_secs_f64()
            )));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A loopback TCP port that was free a moment ago (bound with port 0, then released). The UDP port
/// of the same number was free too. Another process may take it before you bind it; fixtures
/// that start servers retry with a new port when that happens.
pub fn free_port() -> u16 {
    for _ in 0..50 {
        let Ok(l) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(addr) = l.local_addr() else { continue };
        if UdpSocket::bind(("127.0.0.1", addr.port())).is_ok() {
            return addr.port();
        }
    }
    panic!("no free loopback port after 50 attempts")
}

/// A loopback port with nothing listening on it (bound, noted, released): connecting to it is
/// refused at once (unless some other process takes the port meanwhile).
pub fn refusing_port() -> u16 {
    free_port()
}

#[cfg(test)]
mod tests {
    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn fixtures_are_send_and_sync() {
        send_sync::<crate::Topology>();
        send_sync::<crate::Node>();
        send_sync::<crate::SlowDns>();
        send_sync::<crate::FakeSentinel>();
    }
}
