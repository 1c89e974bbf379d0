//! The faults the soak mixes, picked from the seeded [`Rng`], and how each is done and undone.
//! A fault returns once it is over (a stopped process continued, a proxy healed); the driver then
//! waits for the topology to be healthy again before the next one.
//!
//! On the netns LAN the schedule also draws issue 28's partitions (A, B, C; see
//! `sentinel_recovery_testkit::net::scenario` for the same shapes as single tests): silent
//! receiver-side cuts between hosts, healed once the sentinels have failed over.

use std::time::Duration;

use serde_json::{json, Value};

use sentinel_recovery_testkit::net::Host;

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
    /// Partition A (Jepsen's shape): the primary and one writer's host cut from the replicas,
    /// the sentinels and the other writers; healed a while after the majority failed over.
    PartitionPrimaryWithWriter,
    /// Partition B: one writer's host cut from every sentinel (not from the data nodes) during a
    /// planned `SENTINEL FAILOVER`; healed a while after it finished.
    PartitionWriterFromSentinels,
    /// Partition C: the primary cut from the sentinels and the replicas while every writer still
    /// reaches it; healed a while after the majority failed over.
    PartitionPrimary,
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

/// Drawn besides [`WEIGHTED`] on the netns LAN only, so a loopback run's schedule for a seed
/// draws from [`WEIGHTED`] alone.
const PARTITIONS: [(Fault, u64); 3] = [
    (Fault::PartitionPrimaryWithWriter, 2),
    (Fault::PartitionWriterFromSentinels, 2),
    (Fault::PartitionPrimary, 2),
];

/// Prefix of the partition faults' names (the checker tells them apart by it).
pub const PARTITION_PREFIX: &str = "partition_";

impl Fault {
    /// The next fault of the schedule; partitions only when `net` (the cluster runs on the LAN).
    pub fn pick(rng: &mut Rng, net: bool) -> Fault {
        let extra: &[(Fault, u64)] = if net { &PARTITIONS } else { &[] };
        let table: Vec<(Fault, u64)> = WEIGHTED.iter().chain(extra).copied().collect();
        let total: u64 = table.iter().map(|(_, w)| w).sum();
        let mut x = rng.range(0, total - 1);
        for (f, w) in table {
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
            Fault::PartitionPrimaryWithWriter => "partition_primary_with_writer",
            Fault::PartitionWriterFromSentinels => "partition_writer_from_sentinels",
            Fault::PartitionPrimary => "partition_primary",
        }
    }

    /// Does the fault (all its random choices from `rng`) and returns its record:
    /// `{"kind", "t0", "t1", "target", "detail"}` with `t0`/`t1` the unix ms when the fault
    /// began and ended (for a partition: the cut and the heal). `writers` are the writers' ids,
    /// writer `k` on client host `k + 1`.
    pub fn run(self, c: &Cluster, rng: &mut Rng, down_after_ms: u64, writers: &[String]) -> Value {
        let t0 = now_ms();
        let primary = c.primary_index().unwrap_or(0);
        let nodes = c.topo().data_nodes();
        let sentinels = c.topo().sentinels();
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
            Fault::ManualFailover => match c.topo().sentinel_failover() {
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
                // 127.0.0.1 is the node's own host, on the LAN too.
                nodes[i].replicaof("127.0.0.1", sentinel_recovery_testkit::refusing_port());
                // What a reader gets from it meanwhile (the record shows the fault took).
                let answer = match nodes[i].cmd_with_timeout(&["GET", "soak:probe"], POLL) {
                    Ok(r) => format!("{r:?}"),
                    Err(e) => e.to_string(),
                };
                std::thread::sleep(Duration::from_millis(ms));
                let (pip, pport) = c.proxy_addr(primary);
                nodes[i].replicaof(pip, pport);
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
            Fault::PartitionPrimaryWithWriter
            | Fault::PartitionWriterFromSentinels
            | Fault::PartitionPrimary => {
                let (t, d) = self.partition(c, rng, primary, writers);
                target = t;
                d
            }
        };
        json!({"kind": self.name(), "t0": t0, "t1": now_ms(), "target": target,
               "detail": detail})
    }
}

impl Fault {
    /// Cuts, waits for the failover, holds the cut 1-3 s more (the isolated side keeps going:
    /// that is where default mode's losses come from), heals. Returns (target, detail).
    fn partition(
        self,
        c: &Cluster,
        rng: &mut Rng,
        primary: usize,
        writers: &[String],
    ) -> (String, String) {
        let (Some(net), Some(phost)) = (c.net(), c.node_host(primary)) else {
            return ("none".into(), "not on the netns LAN: skipped".into());
        };
        let old = c.proxies[primary].port();
        let sentinels: Vec<Host> = (1..=c.topo().sentinels().len())
            .map(Host::Sentinel)
            .collect();
        let replicas: Vec<Host> = (0..c.proxies.len())
            .filter(|i| *i != primary)
            .filter_map(|i| c.node_host(i))
            .collect();
        let w = rng.index(writers.len().max(1));
        let whost = Host::Client(w + 1);
        let wid = writers.get(w).map(String::as_str).unwrap_or("?");
        let hold = rng.range(1000, 3000);
        let (target, cut) = match self {
            Fault::PartitionPrimaryWithWriter => {
                let island = vec![phost, whost];
                let rest: Vec<Host> = net
                    .hosts()
                    .into_iter()
                    .filter(|h| !island.contains(h))
                    .collect();
                (
                    format!("{phost} (primary) + {whost} ({wid}) | the rest"),
                    net.partition(&[island, rest]),
                )
            }
            Fault::PartitionWriterFromSentinels => (
                format!("{whost} ({wid}) | every sentinel, during SENTINEL FAILOVER"),
                net.cut(&[whost], &sentinels),
            ),
            _ => {
                let mut others = replicas;
                others.extend(&sentinels);
                (
                    format!("{phost} (primary) | replicas and sentinels"),
                    net.cut(&[phost], &others),
                )
            }
        };
        let mut detail = match cut {
            Ok(()) => String::new(),
            Err(e) => format!("cut failed: {e}; "),
        };
        if self == Fault::PartitionWriterFromSentinels {
            if let Err(e) = c.topo().sentinel_failover() {
                detail.push_str(&format!("SENTINEL FAILOVER refused: {e}; "));
            }
        }
        let moved = wait_primary_moves(c, old);
        std::thread::sleep(Duration::from_millis(hold));
        let healed = net.heal();
        detail.push_str(&format!(
            "failover seen: {moved}; held {hold} ms after it; healed: {}",
            match healed {
                Ok(()) => "yes".to_string(),
                Err(e) => e.to_string(),
            }
        ));
        (target, detail)
    }
}

/// Waits (up to 30 s) until the sentinels report a primary other than proxy `old`.
fn wait_primary_moves(c: &Cluster, old: u16) -> bool {
    sentinel_recovery_testkit::wait_until(Duration::from_secs(30), "a new primary", || {
        c.reported_primary().filter(|p| *p != old)
    })
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::{Fault, PARTITIONS, PARTITION_PREFIX};
    use crate::rng::Rng;

    fn draws(seed: u64, net: bool) -> Vec<Fault> {
        let mut rng = Rng::new(seed);
        (0..300).map(|_| Fault::pick(&mut rng, net)).collect()
    }

    #[test]
    fn partitions_are_drawn_only_on_the_lan() {
        let loopback = draws(2028, false);
        assert!(loopback
            .iter()
            .all(|f| !f.name().starts_with(PARTITION_PREFIX)));
        let lan = draws(2028, true);
        for (p, _) in PARTITIONS {
            assert!(p.name().starts_with(PARTITION_PREFIX));
            assert!(lan.contains(&p), "{} never drawn", p.name());
        }
        // Same seed, same schedule.
        assert_eq!(lan, draws(2028, true));
    }
}
