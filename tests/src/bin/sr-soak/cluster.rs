//! The soak's topology: the testkit's 1 primary + 2 replicas + 3 sentinels with every data node
//! behind its own [`FaultProxy`] link. Each data node announces its proxy's port
//! (`replica-announce-port`) and the sentinels monitor the primary at its proxy's port, so every
//! address a sentinel reports — and so every connection a client makes to a data node — goes
//! through a proxy. The proxies apply faults only to connections that start with `HELLO`
//! (sentinel-recovery's clients); sentinels and replication pass through untouched.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sentinel_recovery_testkit::{
    wait_until, Affects, FaultProxy, Node, TestkitError, Topology, TopologySpec,
};

/// Timeout of the driver's own commands to a node (a SIGSTOPped node must not stall the driver).
pub const POLL: Duration = Duration::from_millis(500);

/// The topology and the proxy link in front of each data node.
pub struct Cluster {
    /// The servers (dropping it kills them all).
    pub topo: Topology,
    /// `proxies[i]` fronts `topo.data_nodes()[i]`.
    pub proxies: Vec<Arc<FaultProxy>>,
    service: String,
}

impl Cluster {
    /// Starts the topology and routes it through the proxies; returns when every sentinel
    /// reports the primary and both replicas at proxy ports and knows the other sentinels.
    pub fn start(spec: TopologySpec) -> Result<Cluster, TestkitError> {
        let topo = Topology::start(spec.clone())?;
        let mut proxies = Vec::new();
        for n in topo.data_nodes() {
            let target: SocketAddr = ([127, 0, 0, 1], n.port()).into();
            proxies.push(Arc::new(FaultProxy::start(
                target,
                Affects::FirstCommand("HELLO".into()),
            )?));
        }
        let cluster = Cluster {
            topo,
            proxies,
            service: spec.service.clone(),
        };
        cluster.route_through_proxies(&spec)?;
        Ok(cluster)
    }

    fn route_through_proxies(&self, spec: &TopologySpec) -> Result<(), TestkitError> {
        for (n, p) in self.topo.data_nodes().into_iter().zip(&self.proxies) {
            let port = p.port().to_string();
            n.cmd(&["CONFIG", "SET", "replica-announce-ip", "127.0.0.1"])?;
            n.cmd(&["CONFIG", "SET", "replica-announce-port", &port])?;
            // A replica whose link is down answers MASTERDOWN (the soak's resync fault).
            n.cmd(&["CONFIG", "SET", "replica-serve-stale-data", "no"])?;
            // Kept across the restarts of the "old primary restarted" fault.
            n.cmd(&["CONFIG", "REWRITE"])?;
        }
        // Replicas announce their port in the replication handshake: make them redo it.
        let primary = self.topo.primary();
        primary.cmd(&["CLIENT", "KILL", "TYPE", "replica"])?;
        let want: Vec<String> = self.proxies[1..]
            .iter()
            .map(|p| p.port().to_string())
            .collect();
        wait_until(
            Duration::from_secs(20),
            "replicas to announce their proxy ports",
            || {
                let info = primary.info("replication").ok()?;
                let seen: Vec<&String> = info
                    .iter()
                    .filter(|(k, _)| k.starts_with("slave"))
                    .map(|(_, v)| v)
                    .collect();
                want.iter()
                    .all(|w| seen.iter().any(|s| s.contains(&format!("port={w},"))))
                    .then_some(())
            },
        )?;
        let svc = &spec.service;
        let p0 = self.proxies[0].port().to_string();
        for s in self.topo.sentinels() {
            s.cmd(&["SENTINEL", "REMOVE", svc])?;
            s.cmd(&[
                "SENTINEL",
                "MONITOR",
                svc,
                "127.0.0.1",
                &p0,
                &spec.quorum.to_string(),
            ])?;
            s.cmd(&[
                "SENTINEL",
                "SET",
                svc,
                "down-after-milliseconds",
                &spec.down_after_ms.to_string(),
                "failover-timeout",
                &spec.failover_timeout_ms.to_string(),
                "parallel-syncs",
                "1",
            ])?;
        }
        let others = (self.topo.sentinels().len() - 1).to_string();
        wait_until(
            Duration::from_secs(30),
            "sentinels to see the topology through the proxies",
            || {
                for s in self.topo.sentinels() {
                    let m = s.sentinel_master(svc).ok()?;
                    if m.get("port")? != &p0
                        || m.get("flags")? != "master"
                        || m.get("num-other-sentinels")? != &others
                    {
                        return None;
                    }
                    let reps = s.sentinel_replicas(svc).ok()?;
                    let ok = want.iter().all(|w| {
                        reps.iter().any(|r| {
                            r.get("port") == Some(w)
                                && r.get("flags").map(String::as_str) == Some("slave")
                        })
                    });
                    if !ok || reps.len() != want.len() {
                        return None;
                    }
                }
                Some(())
            },
        )
        .map_err(|e| e.with_detail(&self.topo.sentinel_log_tails(10)))
    }

    /// Index (into `data_nodes()` and `proxies`) of the data node behind proxy `port`.
    pub fn index_of_proxy_port(&self, port: u16) -> Option<usize> {
        self.proxies.iter().position(|p| p.port() == port)
    }

    /// The proxy port of the primary the first answering sentinel reports.
    pub fn reported_primary(&self) -> Option<u16> {
        self.topo
            .sentinels()
            .iter()
            .filter(|s| pollable(s))
            .find_map(|s| {
                let r = s
                    .cmd_with_timeout(
                        &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service()],
                        POLL,
                    )
                    .ok()?;
                r.as_array()?.get(1)?.as_str()?.parse().ok()
            })
    }

    /// Index of the reported primary's data node.
    pub fn primary_index(&self) -> Option<usize> {
        self.index_of_proxy_port(self.reported_primary()?)
    }

    /// The service name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// Whether the whole topology is healthy: every sentinel running and answering, all of them
    /// report the same primary, which is running and says `master`, and every other data node is
    /// running and says `slave` with its link up. `Err` says what is not yet so.
    pub fn health(&self) -> Result<usize, String> {
        let mut reported = Vec::new();
        for s in self.topo.sentinels() {
            if !pollable(s) {
                return Err(format!("sentinel {} not running", s.port()));
            }
            let r = s
                .cmd_with_timeout(
                    &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service()],
                    POLL,
                )
                .map_err(|e| format!("sentinel {}: {e}", s.port()))?;
            let port: Option<u16> = r.as_array().and_then(|a| a.get(1)?.as_str()?.parse().ok());
            reported.push(port);
        }
        let first = reported[0].ok_or("no primary reported")?;
        if reported.iter().any(|p| *p != Some(first)) {
            return Err(format!("sentinels disagree: {reported:?}"));
        }
        let pi = self
            .index_of_proxy_port(first)
            .ok_or_else(|| format!("reported primary {first} is not a proxy port"))?;
        for (i, n) in self.topo.data_nodes().into_iter().enumerate() {
            if !pollable(n) {
                return Err(format!("data node {} not running", n.port()));
            }
            let info = n
                .cmd_with_timeout(&["INFO", "replication"], POLL)
                .ok()
                .and_then(|r| r.as_str())
                .ok_or_else(|| format!("data node {} does not answer", n.port()))?;
            let role_ok = if i == pi {
                info.contains("role:master")
            } else {
                info.contains("role:slave") && info.contains("master_link_status:up")
            };
            if !role_ok {
                return Err(format!("data node {} not yet in its role", n.port()));
            }
        }
        Ok(pi)
    }

    /// Waits up to `timeout` for [`Cluster::health`]; returns the primary's index or what was
    /// last wrong.
    pub fn wait_healthy(&self, timeout: Duration) -> Result<usize, String> {
        let mut last = String::new();
        wait_until(timeout, "a healthy topology", || match self.health() {
            Ok(i) => Some(i),
            Err(e) => {
                last = e;
                None
            }
        })
        .map_err(|_| last)
    }

    /// Undoes whatever a failed heal left: every proxy healed, every stopped process continued,
    /// every dead one restarted.
    pub fn repair(&self) {
        for p in &self.proxies {
            p.heal();
        }
        for n in self
            .topo
            .data_nodes()
            .into_iter()
            .chain(self.topo.sentinels().iter())
        {
            if n.is_stopped() {
                n.cont();
            }
            if !n.is_running() {
                let _ = n.restart();
            }
        }
    }
}

/// Running and not SIGSTOPped.
pub fn pollable(n: &Node) -> bool {
    n.is_running() && !n.is_stopped()
}
