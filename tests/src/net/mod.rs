//! Real network partitions (issue 28): every node and client host in its own network namespace,
//! joined to a private bridge by veth pairs, each on its own 127.x address, cut silently on the
//! receiving side and healed at will.
//!
//! - [`ns`]: namespaces by name, processes and sockets inside them, stale cleanup;
//! - [`lan`]: the bridge and its hosts;
//! - [`cuts`]: partitions as receiver-side blackhole rules;
//! - [`NetTopology`]: a [`crate::Topology`] whose nodes each run on their own host of a LAN.
//!
//! Everything needs root (`ip netns`); [`netns_available`] says why not, for tests to skip.

pub mod cuts;
pub mod lan;

pub mod scenario;
mod topology;

pub use crate::netns::{command_in, dial, in_netns, namespaces_named, netns_available, Namespace};
pub use cuts::Cuts;
pub use lan::{Lan, LanHost};
pub use topology::{Host, NetSpec, NetTopology};
