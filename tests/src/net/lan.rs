//! A private LAN: a bridge in its own hub namespace and one namespace per host, each joined to the
//! bridge by a veth pair and given its own 127.x address, reachable from the other hosts.
//!
//! Nothing is created in the test process' own namespace: the bridge and the hub ends of the veths
//! live in the hub namespace, so deleting the namespaces deletes every link, and two LANs (even
//! with the same addresses) never see each other.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::netns::{ip_in, remove_stale_namespaces, Namespace, NAME_PREFIX};
use crate::TestkitError;

/// The interface name of every host's end of its veth pair, inside the host's namespace.
pub(crate) const HOST_IFACE: &str = "eth0";

static LAN_SEQ: AtomicU32 = AtomicU32::new(0);

/// One host on a [`Lan`]: its namespace and address.
#[derive(Debug)]
pub struct LanHost {
    ns: Namespace,
    role: String,
    ip: Ipv4Addr,
}

impl LanHost {
    /// The host's namespace name (for `ip netns exec`).
    pub fn netns(&self) -> &str {
        self.ns.name()
    }

    /// The host's role name given at [`Lan::add_host`] (e.g. `primary`, `client-1`).
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The host's address on the LAN, in 127.0.0.0/8.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }
}

/// A bridge and its hosts. Dropping it deletes every namespace it created (the hosts', then the
/// hub's), and with them every veth; a `Lan` dropped half-built (an error or a panic during setup)
/// deletes what existed so far.
#[derive(Debug)]
pub struct Lan {
    /// Hosts before the hub, so they are deleted first (field order is drop order).
    hosts: Vec<LanHost>,
    hub: Namespace,
    prefix: String,
    subnet: [u8; 3],
}

impl Lan {
    /// Creates the hub namespace with an up bridge, after deleting the namespaces that dead test
    /// processes left behind. The subnet `127.S.T.0/24` comes from the pid and a per-process
    /// counter, so logs of parallel runs are told apart (the LANs are isolated anyway).
    pub fn create() -> Result<Lan, TestkitError> {
        for name in remove_stale_namespaces() {
            eprintln!("sr-testkit: removed stale namespace {name}");
        }
        let pid = std::process::id();
        let seq = LAN_SEQ.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("{NAME_PREFIX}{pid}-{seq}-");
        // 127.0.x.x holds 127.0.0.1: keep S in 1..=250.
        let subnet = [127, 1 + (pid % 250) as u8, (seq % 256) as u8];
        let hub = Namespace::create(format!("{prefix}hub"))?;
        ip_in(hub.name(), &["link", "add", "br0", "type", "bridge"])?;
        ip_in(hub.name(), &["link", "set", "br0", "up"])?;
        Ok(Lan {
            hosts: Vec::new(),
            hub,
            prefix,
            subnet,
        })
    }

    /// The prefix of every namespace name of this LAN (`srnet-<pid>-<seq>-`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Adds a host named `role` (letters, digits, `-`): a namespace, a veth pair to the bridge and
    /// the next address. Inside, 127.x addresses are routed over the veth (`route_localnet`), only
    /// 127.0.0.1 stays local, and the local-table lookup runs after the cut rules (see
    /// [`super::cuts`]). Returns the host's index.
    pub fn add_host(&mut self, role: &str) -> Result<usize, TestkitError> {
        let index = self.hosts.len();
        if index >= 250 {
            return Err(TestkitError::Setup("a LAN holds at most 250 hosts".into()));
        }
        let ns = Namespace::create(format!("{}{role}", self.prefix))?;
        let ip = Ipv4Addr::new(
            self.subnet[0],
            self.subnet[1],
            self.subnet[2],
            index as u8 + 1,
        );
        let hub_end = format!("h{index}");
        ip_in(
            self.hub.name(),
            &[
                "link",
                "add",
                &hub_end,
                "type",
                "veth",
                "peer",
                "name",
                HOST_IFACE,
                "netns",
                ns.name(),
            ],
        )?;
        ip_in(self.hub.name(), &["link", "set", &hub_end, "master", "br0"])?;
        ip_in(self.hub.name(), &["link", "set", &hub_end, "up"])?;
        ns.sysctl_conf("all", "route_localnet", "1")?;
        ns.sysctl_conf(HOST_IFACE, "route_localnet", "1")?;
        let cidr = format!("{ip}/24");
        ip_in(ns.name(), &["addr", "add", &cidr, "dev", HOST_IFACE])?;
        ip_in(ns.name(), &["link", "set", HOST_IFACE, "up"])?;
        // `local 127.0.0.0/8 dev lo` would capture every peer's address; 127.0.0.1 keeps its own
        // local route (added with lo).
        ip_in(
            ns.name(),
            &[
                "route",
                "del",
                "local",
                "127.0.0.0/8",
                "dev",
                "lo",
                "table",
                "local",
            ],
        )?;
        // Receiving-side cuts are rules; they must be looked at before a packet is delivered.
        ip_in(
            ns.name(),
            &["rule", "add", "pref", "100", "lookup", "local"],
        )?;
        ip_in(ns.name(), &["rule", "del", "pref", "0"])?;
        self.hosts.push(LanHost {
            ns,
            role: role.to_string(),
            ip,
        });
        Ok(index)
    }

    /// The hosts, in the order they were added.
    pub fn hosts(&self) -> &[LanHost] {
        &self.hosts
    }

    /// The host at `index`.
    pub fn host(&self, index: usize) -> &LanHost {
        &self.hosts[index]
    }

    /// The host whose role is `role`.
    pub fn host_by_role(&self, role: &str) -> Option<&LanHost> {
        self.hosts.iter().find(|h| h.role == role)
    }
}
