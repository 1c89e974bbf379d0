//! A sentinel started with an old view of the service (a stale sentinel).

use std::fs;

use super::conf::{debug_commands, default_sentinel_debug, SentinelConf};
use super::node::{Node, NodeAccess};
use super::server::ServerKind;
use super::spawn::make_temp_dir;
use crate::TestkitError;

/// What a standalone stale sentinel believes (see [`start_stale_sentinel`]).
#[derive(Debug, Clone)]
pub struct StaleSentinelSpec {
    /// Service name. Default `"mymaster"`.
    pub service: String,
    /// The (outdated) primary it monitors. Default `("127.0.0.1", refusing port)`.
    pub old_primary: (String, u16),
    /// `sentinel known-replica` lines. Default none.
    pub known_replicas: Vec<(String, u16)>,
    /// Quorum. Default 2 (so it never fails over alone).
    pub quorum: usize,
    /// `down-after-milliseconds`. Default 1000.
    pub down_after_ms: u64,
    /// `failover-timeout`. Default 3000.
    pub failover_timeout_ms: u64,
    /// Server binary. Default from env `SR_SERVER`.
    pub server: ServerKind,
}

impl Default for StaleSentinelSpec {
    fn default() -> Self {
        StaleSentinelSpec {
            service: "mymaster".into(),
            old_primary: ("127.0.0.1".into(), crate::refusing_port()),
            known_replicas: Vec::new(),
            quorum: 2,
            down_after_ms: 1000,
            failover_timeout_ms: 3000,
            server: ServerKind::from_env(),
        }
    }
}

/// Starts a sentinel process, outside any [`Topology`], that monitors `spec.old_primary` (it may
/// be dead, or a replica now) under `spec.service`. The returned [`Node`] owns its temp dir: dropping
/// it kills the process and removes the dir. Waits only until it answers; the fast DEBUG periods of
/// [`TopologySpec::default`] are applied. A real sentinel corrects itself once it hears hellos with a
/// newer epoch from other sentinels; for a permanently stale answer use [`crate::FakeSentinel`].
pub fn start_stale_sentinel(spec: &StaleSentinelSpec) -> Result<Node, TestkitError> {
    let binary = spec.server.binary()?;
    let dir = make_temp_dir("stale")?;
    let conf = SentinelConf {
        service: &spec.service,
        primary: (&spec.old_primary.0, spec.old_primary.1),
        quorum: spec.quorum,
        down_after_ms: spec.down_after_ms,
        failover_timeout_ms: spec.failover_timeout_ms,
        known_replicas: &spec.known_replicas,
        bind: "127.0.0.1".into(),
        extra: String::new(),
    };
    let d = dir.clone();
    let res = Node::start_new(
        true,
        binary,
        dir.clone(),
        |p, _| conf.render(&d, p),
        debug_commands(&default_sentinel_debug()),
        true,
        NodeAccess::default(),
    );
    if res.is_err() {
        let _ = fs::remove_dir_all(&dir);
    }
    res
}
