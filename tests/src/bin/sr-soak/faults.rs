//! The faults the soak mixes, picked from the seeded [`Rng`], and how each is done and undone.
//! A fault returns once it is over (a stopped process continued, a proxy healed); the driver then
//! waits for the topology to be healthy again before the next one.

use std::time::Duration;

use serde_json::{json, Value};

use crate::cluster::{pollable, Cluster, POLL};
use crate::jsonl::now_ms;
use crate::rng::Rng;

/// Every kind of fault, in the order the schedule's weights use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 of the primary; after the failover the old primary is restarted (empty, as a
    /// master) and must be turned into a replica by the sentinels.
    KillPrimary,
    /// SIGSTOP of the primary for longer than down-after, then SIGCONT.
    StopPrimary,
    /// `SENTINEL FAILOVER`.
    ManualFailover,
    /// `CLIENT KILL TYPE normal` on every data node.
    ClientKill,
    /// kill -9 of one sentinel, restarted after a moment.
    SentinelRestart,
    /// SIGSTOP of one sentinel long enough for it to enter TILT, then SIGCONT.
    SentinelTilt,
    /// `DEBUG SLEEP` of the primary (shorter or a little longer than down-after).
    DebugSleep,
    /// A replica's link to its primary down for 1-2.5 s (`REPLICAOF` a closed port, then the
    /// primary again): it answers MASTERDOWN meanwhile, then resyncs.
    ReplicaResync,
    /// Added latency on the client's connections to one data node.
    Latency,
    /// The client's connections to the primary blackholed for a while.
    Blackhole,
    /// The client's connections to one data node reset.
    Reset,
}

const WEIGHTED: [(Fault, u64); 11] = [
    (Fault::KillPrimary, 2),
    (Fault::StopPrimary, 2),
    (Fault::ManualFailover, 3),
    (Fault::ClientKill, 2),
    (Fault::SentinelRestart, 2),
    (Fault::SentinelTilt, 1),
    (Fault::DebugSleep, 2),
    (Fault::ReplicaResync, 2),
    (Fault::Latency, 2),
    (Fault::Blackhole, 2),
    (Fault::Reset, 2),
];

impl Fault {
    /// The next fault of the schedule.
    pub fn pick(rng: &mut Rng) -> Fault {
        let total: u64 = WEIGHTED.iter().map(|(_, w)| w).sum();
        let mut x = rng.range(0, total - 1);
        for (f, w) in WEIGHTED {
            if x < w {
                return f;
            }
            x -= w;
        }
        Fault::ClientKill
    }

    /// Snake-case name used in the records.
    pub fn name(self) -> &'static str {
        match self {
            Fault::KillPrimary => "kill_primary",
            Fault::StopPrimary => "stop_primary",
            Fault::ManualFailover => "sentinel_failover",
            Fault::ClientKill => "client_kill",
            Fault::SentinelRestart => "sentinel_restart",
            Fault::SentinelTilt => "sentinel_tilt",
            Fault::DebugSleep => "debug_sleep",
            Fault::ReplicaResync => "replica_resync",
            Fault::Latency => "net_latency",
            Fault::Blackhole => "net_blackhole",
            Fault::Reset => "net_reset",
        }
    }

    /// Does the fault (all its random choices from `rng`) and returns its record:
    /// `{"kind", "t0", "t1", "target", "detail"}` with `t0`/`t1` the unix ms when the fault
    /// began and ended.
    pub fn run(self, c: &Cluster, rng: &mut Rng, down_after_ms: u64) -> Value {
        let t0 = now_ms();
        let primary = c.primary_index().unwrap_or(0);
        let nodes = c.topo.data_nodes();
        let sentinels = c.topo.sentinels();
        let pnode = nodes[primary];
        let mut target = format!(
            "data node {} (proxy {})",
            pnode.port(),
            c.proxies[primary].port()
        );
        let detail: String = match self {
            Fault::KillPrimary => {
                pnode.kill9();
                let moved = wait_primary_moves(c, c.proxies[primary].port());
                let r = pnode.restart();
                format!(
                    "failover seen: {moved}; old primary restarted: {}",
                    r.is_ok()
                )
            }
            Fault::StopPrimary => {
                let ms = down_after_ms + rng.range(1000, 2500);
                pnode.stop();
                std::thread::sleep(Duration::from_millis(ms));
                pnode.cont();
                format!("stopped {ms} ms")
            }
            Fault::ManualFailover => match c.topo.sentinel_failover() {
                Ok(()) => format!(
                    "failover seen: {}",
                    wait_primary_moves(c, c.proxies[primary].port())
                ),
                Err(e) => format!("SENTINEL FAILOVER refused: {e}"),
            },
            Fault::ClientKill => {
                target = "every data node".into();
                for n in nodes.iter().filter(|n| pollable(n)) {
                    n.client_kill_normal();
                }
                "CLIENT KILL TYPE normal".into()
            }
            Fault::SentinelRestart => {
                let s = &sentinels[rng.index(sentinels.len())];
                target = format!("sentinel {}", s.port());
                let ms = rng.range(300, 2000);
                s.kill9();
                std::thread::sleep(Duration::from_millis(ms));
                let r = s.restart();
                format!("down {ms} ms; restarted: {}", r.is_ok())
            }
            Fault::SentinelTilt => {
                let s = &sentinels[rng.index(sentinels.len())];
                target = format!("sentinel {}", s.port());
                // Sentinel enters TILT when its timer sees a jump of more than 2 s.
                let ms = rng.range(2500, 3500);
                s.stop();
                std::thread::sleep(Duration::from_millis(ms));
                s.cont();
                format!("stopped {ms} ms")
            }
            Fault::DebugSleep => {
                let ms = rng.range(300, down_after_ms + 800);
                pnode.debug_sleep(ms as f64 / 1000.0);
                std::thread::sleep(Duration::from_millis(ms));
                format!("DEBUG SLEEP {ms} ms")
            }
            Fault::ReplicaResync => {
                let replicas: Vec<usize> = (0..nodes.len()).filter(|i| *i != primary).collect();
                let i = replicas[rng.index(replicas.len())];
                target = format!(
                    "data node {} (proxy {})",
                    nodes[i].port(),
                    c.proxies[i].port()
                );
                // Its link down for a while (it answers MASTERDOWN meanwhile), then a resync
                // with the primary.
                let ms = rng.range(1000, 2500);
                nodes[i].replicaof("127.0.0.1", sentinel_recovery_testkit::refusing_port());
                // What a reader gets from it meanwhile (the record shows the fault took).
                let answer = match nodes[i].cmd_with_timeout(&["GET", "soak:probe"], POLL) {
                    Ok(r) => format!("{r:?}"),
                    Err(e) => e.to_string(),
                };
                std::thread::sleep(Duration::from_millis(ms));
                nodes[i].replicaof("127.0.0.1", c.proxies[primary].port());
                format!(
                    "replicating from a closed port for {ms} ms (a GET there: {answer}), then from the primary again"
                )
            }
            Fault::Latency => {
                let i = rng.index(nodes.len());
                target = format!(
                    "proxy {} (data node {})",
                    c.proxies[i].port(),
                    nodes[i].port()
                );
                let lat = rng.range(100, 800);
                let ms = rng.range(2000, 5000);
                c.proxies[i].set_latency(Duration::from_millis(lat));
                std::thread::sleep(Duration::from_millis(ms));
                c.proxies[i].heal();
                format!("+{lat} ms for {ms} ms")
            }
            Fault::Blackhole => {
                target = format!("proxy {} (primary)", c.proxies[primary].port());
                let ms = rng.range(1000, 4000);
                c.proxies[primary].set_blackhole(true);
                std::thread::sleep(Duration::from_millis(ms));
                c.proxies[primary].heal();
                format!("blackholed {ms} ms")
            }
            Fault::Reset => {
                // Every client has connections to the primary; only prefer-replica ones to
                // replicas.
                let i = if rng.range(0, 1) == 0 {
                    primary
                } else {
                    rng.index(nodes.len())
                };
                target = format!(
                    "proxy {} (data node {})",
                    c.proxies[i].port(),
                    nodes[i].port()
                );
                format!("{} connections reset", c.proxies[i].reset())
            }
        };
        json!({"kind": self.name(), "t0": t0, "t1": now_ms(), "target": target,
               "detail": detail})
    }
}

/// Waits (up to 30 s) until the sentinels report a primary other than proxy `old`.
fn wait_primary_moves(c: &Cluster, old: u16) -> bool {
    sentinel_recovery_testkit::wait_until(Duration::from_secs(30), "a new primary", || {
        c.reported_primary().filter(|p| *p != old)
    })
    .is_ok()
}
