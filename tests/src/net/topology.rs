//! [`NetTopology`]: a primary, replicas, sentinels and client hosts, each in its own network
//! namespace on a private [`Lan`], with partitions and per-link faults.

use std::fmt;
use std::process::Command;
use std::sync::Mutex;

use super::cuts::Cuts;
use super::lan::Lan;
use crate::netns::command_in;
use crate::proxy::LinkFaults;
use crate::topology::{Placement, Placements};
use crate::{TestkitError, Topology, TopologySpec};

/// What to start on the LAN.
#[derive(Debug, Clone)]
pub struct NetSpec {
    /// The nodes (default: primary, 2 replicas, 3 sentinels, quorum 2, down-after 1000 ms).
    pub topology: TopologySpec,
    /// Client hosts: namespaces with an address and no server, for client processes. Default 2.
    pub clients: usize,
    /// Every node sits behind a [`crate::FaultProxy`] on its host address, so
    /// [`NetTopology::set_link_faults`] reaches every link into it. Default false.
    pub link_proxies: bool,
}

impl Default for NetSpec {
    fn default() -> Self {
        NetSpec {
            topology: TopologySpec::default(),
            clients: 2,
            link_proxies: false,
        }
    }
}

/// One host of a [`NetTopology`], by the role it was started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    /// The node started as primary (a replica after a failover).
    Primary,
    /// The n-th replica started, from 1.
    Replica(usize),
    /// The n-th sentinel, from 1.
    Sentinel(usize),
    /// The n-th client host, from 1.
    Client(usize),
}

impl Host {
    /// `primary`, `replica-N`, `sentinel-N`, `client-N` (also the namespace name's suffix).
    pub fn role(self) -> String {
        match self {
            Host::Primary => "primary".into(),
            Host::Replica(n) => format!("replica-{n}"),
            Host::Sentinel(n) => format!("sentinel-{n}"),
            Host::Client(n) => format!("client-{n}"),
        }
    }

    /// The inverse of [`Host::role`]; `None` for anything else.
    pub fn parse(role: &str) -> Option<Host> {
        if role == "primary" {
            return Some(Host::Primary);
        }
        let (kind, n) = role.split_once('-')?;
        let n: usize = n.parse().ok().filter(|n| *n >= 1)?;
        match kind {
            "replica" => Some(Host::Replica(n)),
            "sentinel" => Some(Host::Sentinel(n)),
            "client" => Some(Host::Client(n)),
            _ => None,
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.role())
    }
}

/// A [`Topology`] whose every node, and every client host, is its own host on a private LAN
/// (see [`crate::net`]). The testkit's own commands reach each node on 127.0.0.1 inside the
/// node's namespace, so partitions never cut them and [`NetTopology::topology`]'s waits work
/// throughout. Dropping it kills every process, then deletes every namespace and link it
/// created; so does a failed or panicking start.
pub struct NetTopology {
    // Field order is drop order: processes die before their namespaces are deleted.
    topology: Topology,
    cuts: Mutex<Cuts>,
    lan: Lan,
    spec: NetSpec,
}

impl NetTopology {
    /// Creates the LAN (one host per node and client), starts the nodes on their hosts and waits
    /// as [`Topology::start`] does. Needs root: see [`super::netns_available`].
    pub fn start(spec: NetSpec) -> Result<NetTopology, TestkitError> {
        crate::netns::netns_available().map_err(TestkitError::Setup)?;
        let mut lan = Lan::create()?;
        let t = &spec.topology;
        let mut place = |host: Host| -> Result<Placement, TestkitError> {
            let i = lan.add_host(&host.role())?;
            Ok(Placement {
                ip: lan.host(i).ip().to_string(),
                netns: Some(lan.host(i).netns().to_string()),
                proxied: spec.link_proxies,
            })
        };
        let placements = Placements {
            primary: place(Host::Primary)?,
            replicas: (1..=t.replicas)
                .map(|n| place(Host::Replica(n)))
                .collect::<Result<_, _>>()?,
            sentinels: (1..=t.sentinels)
                .map(|n| place(Host::Sentinel(n)))
                .collect::<Result<_, _>>()?,
        };
        for n in 1..=spec.clients {
            place(Host::Client(n))?;
        }
        let topology = Topology::start_placed(t.clone(), placements)?;
        Ok(NetTopology {
            topology,
            cuts: Mutex::new(Cuts::default()),
            lan,
            spec,
        })
    }

    /// The nodes, with every wait and fault of [`Topology`].
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The spec it was started with.
    pub fn spec(&self) -> &NetSpec {
        &self.spec
    }

    /// The LAN (namespace names, addresses).
    pub fn lan(&self) -> &Lan {
        &self.lan
    }

    /// The client URL over every sentinel's host address; `extra` query pairs are appended.
    pub fn url(&self, extra: &[(&str, &str)]) -> String {
        self.topology.url_with(None, None, extra)
    }

    /// Every host of the LAN, nodes then clients.
    pub fn hosts(&self) -> Vec<Host> {
        self.lan
            .hosts()
            .iter()
            .filter_map(|h| Host::parse(h.role()))
            .collect()
    }

    fn index(&self, host: Host) -> Result<usize, TestkitError> {
        let role = host.role();
        self.lan
            .hosts()
            .iter()
            .position(|h| h.role() == role)
            .ok_or_else(|| TestkitError::Setup(format!("no host {role} on this topology")))
    }

    /// The host's address on the LAN.
    pub fn ip(&self, host: Host) -> Result<String, TestkitError> {
        Ok(self.lan.host(self.index(host)?).ip().to_string())
    }

    /// The host's namespace name.
    pub fn netns(&self, host: Host) -> Result<String, TestkitError> {
        Ok(self.lan.host(self.index(host)?).netns().to_string())
    }

    /// A command that runs `program` on `host` (`ip netns exec`); the caller owns the process.
    pub fn command_on(
        &self,
        host: Host,
        program: impl AsRef<std::ffi::OsStr>,
    ) -> Result<Command, TestkitError> {
        Ok(command_in(&self.netns(host)?, program))
    }

    /// Hosts in different `groups` stop hearing each other, silently and both ways; hosts in no
    /// group keep hearing everyone. Adds to the cuts in force.
    pub fn partition(&self, groups: &[Vec<Host>]) -> Result<(), TestkitError> {
        let groups: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| g.iter().map(|h| self.index(*h)).collect())
            .collect::<Result<_, _>>()?;
        self.lock_cuts().partition(&self.lan, &groups)
    }

    /// Cuts every host of `a` from every host of `b`, both ways (adds to the cuts in force).
    pub fn cut(&self, a: &[Host], b: &[Host]) -> Result<(), TestkitError> {
        let ia: Vec<usize> = a.iter().map(|h| self.index(*h)).collect::<Result<_, _>>()?;
        let ib: Vec<usize> = b.iter().map(|h| self.index(*h)).collect::<Result<_, _>>()?;
        self.lock_cuts().cut(&self.lan, &ia, &ib)
    }

    /// True when `a` and `b` cannot hear each other now.
    pub fn is_cut(&self, a: Host, b: Host) -> Result<bool, TestkitError> {
        let (ia, ib) = (self.index(a)?, self.index(b)?);
        Ok(self.lock_cuts().is_cut(ia, ib))
    }

    /// Removes every cut.
    pub fn heal(&self) -> Result<(), TestkitError> {
        self.lock_cuts().heal(&self.lan)
    }

    /// Sets `faults` on every link into every node (needs [`NetSpec::link_proxies`]).
    pub fn set_link_faults(&self, faults: LinkFaults) -> Result<(), TestkitError> {
        let t = &self.topology;
        for node in t.data_nodes().into_iter().chain(t.sentinels()) {
            if !node.set_link_faults(faults) {
                return Err(TestkitError::Setup(
                    "link faults need NetSpec::link_proxies".into(),
                ));
            }
        }
        Ok(())
    }

    fn lock_cuts(&self) -> std::sync::MutexGuard<'_, Cuts> {
        self.cuts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::Host;

    #[test]
    fn host_roles_round_trip() {
        for h in [
            Host::Primary,
            Host::Replica(2),
            Host::Sentinel(3),
            Host::Client(1),
        ] {
            assert_eq!(Host::parse(&h.role()), Some(h));
        }
        for bad in ["", "replica", "replica-0", "client-x", "proxy-1"] {
            assert_eq!(Host::parse(bad), None, "{bad}");
        }
    }
}
