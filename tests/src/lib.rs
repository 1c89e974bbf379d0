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
mod error;
mod fake;
pub mod net;
mod netns;
mod ports;
pub mod proxy;
pub mod resp;
pub mod security;
pub mod setfull;
mod topology;
mod wait;

pub use dns::SlowDns;
pub use error::TestkitError;
pub use fake::{
    master_reply, master_reply_named, replica_reply, sentinel_reply, FakeReply, FakeSentinel,
};
pub use ports::{free_port, refusing_port};
pub use proxy::{Affects, FaultProxy, LinkFaults};
pub use resp::{Conn, Reply};
pub use security::{AclSpec, AclUser, TlsFiles, TlsSpec};
pub use topology::stalled::StalledFailover;
pub use topology::{
    sentinel_url, start_stale_sentinel, Node, ServerKind, StaleSentinelSpec, Topology, TopologySpec,
};
pub use wait::wait_until;

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
