//! The soak's topology: the testkit's 1 primary + 2 replicas + 3 sentinels with every data node
//! behind its own [`FaultProxy`] link. Each data node announces its proxy's address
//! (`replica-announce-ip`/`-port`) and the sentinels monitor the primary at its proxy's address,
//! so every address a sentinel reports — and so every connection a client makes to a data node —
//! goes through a proxy. The proxies apply faults only to connections that start with `HELLO`
//! (sentinel-recovery's clients); sentinels and replication pass through untouched.
//!
//! On loopback ([`Cluster::start`] without client hosts) everything shares 127.0.0.1. On the
//! netns LAN (with client hosts) each node, and each writer, is its own host of a
//! [`NetTopology`]: a data node's proxy listens on its host's address inside its namespace, so a
//! partition's receiver-side cut drops what peers and clients send to the proxy exactly as it
//! would drop what they send to the server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sentinel_recovery_testkit::net::{Host, NetSpec, NetTopology};
use sentinel_recovery_testkit::{
    free_port, wait_until, Affects, FaultProxy, Node, TestkitError, Topology, TopologySpec,
};

/// Timeout of the driver's own commands to a node (a SIGSTOPped node must not stall the driver).
pub const POLL: Duration = Duration::from_millis(500);

/// Where the servers run: all on loopback, or each on its own host of a netns LAN (boxed: both
/// are large).
enum Servers {
    Loopback(Box<Topology>),
    Lan(Box<NetTopology>),
}

/// The topology and the proxy link in front of each data node.
pub struct Cluster {
    /// `proxies[i]` fronts `topo().data_nodes()[i]`. Before `servers`: field order is drop order,
    /// and a proxy inside a namespace is closed before the namespace is deleted.
    pub proxies: Vec<Arc<FaultProxy>>,
    /// The address each proxy listens on (127.0.0.1, or its node's host address on the LAN).
    proxy_ips: Vec<String>,
    servers: Servers,
    service: String,
}

/// Where a data node's client-facing proxy listens and what it forwards to, on the LAN: the
/// node's host address inside its namespace, to the server's 127.0.0.1 port there. Retries with
/// other ports: the port comes from the test's own namespace, where it was free.
fn lan_proxy(n: &Node) -> Result<(FaultProxy, String), TestkitError> {
    let ns = n
        .netns()
        .ok_or_else(|| TestkitError::Setup("a LAN node without a namespace".into()))?;
    let target: SocketAddr = ([127, 0, 0, 1], n.port()).into();
    let mut last = None;
    for _ in 0..5 {
        let listen: SocketAddr = format!("{}:{}", n.ip(), free_port())
            .parse()
            .map_err(|_| TestkitError::Setup(format!("bad host address {}", n.ip())))?;
        match FaultProxy::start_in_netns(ns, listen, target, Affects::FirstCommand("HELLO".into()))
        {
            Ok(p) => return Ok((p, n.ip().to_string())),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| TestkitError::Setup("no port for a proxy".into())))
}

impl Cluster {
    /// Starts the topology and routes it through the proxies; returns when every sentinel
    /// reports the primary and both replicas at proxy addresses and knows the other sentinels.
    /// With `client_hosts` = `Some(n)` every node runs on its own host of a netns LAN with `n`
    /// client hosts for the writers (needs root); with `None` all on loopback.
    pub fn start(spec: TopologySpec, client_hosts: Option<usize>) -> Result<Cluster, TestkitError> {
        let servers = match client_hosts {
            None => Servers::Loopback(Box::new(Topology::start(spec.clone())?)),
            Some(clients) => Servers::Lan(Box::new(NetTopology::start(NetSpec {
                topology: spec.clone(),
                clients,
                link_proxies: false,
            })?)),
        };
        let mut proxies = Vec::new();
        let mut proxy_ips = Vec::new();
        let topo = match &servers {
            Servers::Loopback(t) => t,
            Servers::Lan(n) => n.topology(),
        };
        for n in topo.data_nodes() {
            let (proxy, ip) = match &servers {
                Servers::Loopback(_) => {
                    let target: SocketAddr = ([127, 0, 0, 1], n.port()).into();
                    let p = FaultProxy::start(target, Affects::FirstCommand("HELLO".into()))?;
                    (p, "127.0.0.1".to_string())
                }
                Servers::Lan(_) => lan_proxy(n)?,
            };
            proxies.push(Arc::new(proxy));
            proxy_ips.push(ip);
        }
        let cluster = Cluster {
            proxies,
            proxy_ips,
            servers,
            service: spec.service.clone(),
        };
        cluster.route_through_proxies(&spec)?;
        Ok(cluster)
    }

    /// The servers (dropping the cluster kills them all).
    pub fn topo(&self) -> &Topology {
        match &self.servers {
            Servers::Loopback(t) => t,
            Servers::Lan(n) => n.topology(),
        }
    }

    /// The LAN, when the cluster runs on one.
    pub fn net(&self) -> Option<&NetTopology> {
        match &self.servers {
            Servers::Loopback(_) => None,
            Servers::Lan(n) => Some(n),
        }
    }

    /// The LAN host of data node `i` (by the role it was started with; `None` on loopback).
    pub fn node_host(&self, i: usize) -> Option<Host> {
        self.net()?;
        Some(if i == 0 {
            Host::Primary
        } else {
            Host::Replica(i)
        })
    }

    /// Where proxy `i` listens: (address, port).
    pub fn proxy_addr(&self, i: usize) -> (&str, u16) {
        (&self.proxy_ips[i], self.proxies[i].port())
    }

    /// The namespace of the client host writer number `k` (from 0) runs on; `None` on loopback.
    pub fn writer_netns(&self, k: usize) -> Result<Option<String>, TestkitError> {
        match self.net() {
            None => Ok(None),
            Some(n) => n.netns(Host::Client(k + 1)).map(Some),
        }
    }

    fn route_through_proxies(&self, spec: &TopologySpec) -> Result<(), TestkitError> {
        for (i, n) in self.topo().data_nodes().into_iter().enumerate() {
            let (ip, port) = self.proxy_addr(i);
            let port = port.to_string();
            n.cmd(&["CONFIG", "SET", "replica-announce-ip", ip])?;
            n.cmd(&["CONFIG", "SET", "replica-announce-port", &port])?;
            // A replica whose link is down answers MASTERDOWN (the soak's resync fault).
            n.cmd(&["CONFIG", "SET", "replica-serve-stale-data", "no"])?;
            // Kept across the restarts of the "old primary restarted" fault.
            n.cmd(&["CONFIG", "REWRITE"])?;
        }
        // Replicas announce their port in the replication handshake: make them redo it.
        let primary = self.topo().primary();
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
        let (ip0, p0) = self.proxy_addr(0);
        let p0 = p0.to_string();
        for s in self.topo().sentinels() {
            s.cmd(&["SENTINEL", "REMOVE", svc])?;
            s.cmd(&[
                "SENTINEL",
                "MONITOR",
                svc,
                ip0,
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
        let others = (self.topo().sentinels().len() - 1).to_string();
        wait_until(
            Duration::from_secs(30),
            "sentinels to see the topology through the proxies",
            || {
                for s in self.topo().sentinels() {
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
        .map_err(|e| e.with_detail(&self.topo().sentinel_log_tails(10)))
    }

    /// Index (into `data_nodes()` and `proxies`) of the data node behind proxy `port`.
    pub fn index_of_proxy_port(&self, port: u16) -> Option<usize> {
        self.proxies.iter().position(|p| p.port() == port)
    }

    /// The proxy port of the primary the first answering sentinel reports.
    pub fn reported_primary(&self) -> Option<u16> {
        self.topo()
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
        for s in self.topo().sentinels() {
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
        for (i, n) in self.topo().data_nodes().into_iter().enumerate() {
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
        if let Some(net) = self.net() {
            if let Err(e) = net.heal() {
                eprintln!("sr-soak: healing the LAN's cuts: {e}");
            }
        }
        for p in &self.proxies {
            p.heal();
        }
        for n in self
            .topo()
            .data_nodes()
            .into_iter()
            .chain(self.topo().sentinels().iter())
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
