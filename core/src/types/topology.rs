//! What a host sees of the service: the topology snapshot and the events that change it.

use serde::Serialize;

use super::Address;
use crate::error::Error;

/// One sentinel as the monitor knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SentinelInfo {
    /// Host as configured (names are kept) or as reported by another sentinel.
    pub host: String,
    /// Port.
    pub port: u16,
    /// The address the sentinel was announced with, when `address_map` mapped it to `host` and
    /// `port`; `None` when used as reported or configured. Serialized only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announced: Option<Address>,
    /// Whether the last attempt to ask it succeeded; `false` before it was ever reached.
    pub up: bool,
    /// Whether it is in TILT (`+tilt`, or `sentinel_tilt:1` in its `INFO sentinel`): it answers,
    /// but its view may be stale and it takes part in no failover until TILT ends.
    pub tilt: bool,
    /// Whether it monitors the service; `false` once it answered that it does not (removed,
    /// renamed, or a sentinel of another deployment). `true` until it says otherwise.
    pub knows_service: bool,
}

/// A point-in-time view of the followed service. Reading it never blocks on network work.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Topology {
    /// The service (master name).
    pub service: String,
    /// The verified primary, or `None` before the first successful discovery. Kept while
    /// sentinels report no healthy primary, so a lost quorum never makes the client drop it.
    pub primary: Option<Address>,
    /// Replicas of the primary not flagged `s_down`, `o_down` or `disconnected`.
    pub replicas: Vec<Address>,
    /// Every sentinel known: configured seeds first, then learned ones.
    pub sentinels: Vec<SentinelInfo>,
    /// The sentinels' `config-epoch` of the service at the last successful discovery.
    pub epoch: u64,
    /// True when the last discovery round found and verified the primary.
    pub healthy: bool,
}

/// Something that changed, with the service it concerns and when (unix milliseconds).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
    /// The service.
    pub service: String,
    /// Unix time in milliseconds when the monitor observed it.
    pub at: u64,
}

/// The event kinds of DESIGN.md; serialized with `"kind": "<snake_case name>"`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// The verified primary moved (`old` is `None` at the first discovery).
    PrimaryChanged {
        /// The previous primary.
        old: Option<Address>,
        /// The new, ROLE-verified primary.
        new: Address,
    },
    /// The set of healthy replicas changed.
    ReplicasChanged {
        /// The replicas now.
        replicas: Vec<Address>,
    },
    /// A sentinel was learned.
    SentinelsChanged {
        /// All sentinels now.
        sentinels: Vec<SentinelInfo>,
    },
    /// A sentinel stopped answering.
    SentinelDown {
        /// The sentinel.
        sentinel: Address,
    },
    /// A sentinel answered again (or for the first time after being down).
    SentinelUp {
        /// The sentinel.
        sentinel: Address,
    },
    /// The connection to the primary broke.
    ConnectionLost {
        /// The primary it was connected to.
        address: Address,
    },
    /// A connection to the primary works again after a loss.
    ConnectionRestored {
        /// The primary connected to.
        address: Address,
    },
    /// The failover leader started promoting a replica: writes to the primary wait until the
    /// replica answers as primary (then `primary_changed`), or resume if the failover aborts.
    FailoverStarted {
        /// The primary being demoted.
        primary: Address,
        /// The replica being promoted.
        promoting: Address,
    },
    /// A sentinel entered or left TILT.
    SentinelTilt {
        /// The sentinel.
        sentinel: Address,
        /// True when it entered TILT, false when it left.
        on: bool,
    },
    /// A reachable sentinel answered that it does not monitor the service.
    SentinelServiceUnknown {
        /// The sentinel.
        sentinel: Address,
    },
    /// A discovery round found no usable primary; the monitor keeps its last primary and retries.
    DiscoveryFailed {
        /// Why: `sentinels_unreachable`, `service_unknown` or `no_healthy_primary`.
        error: Error,
    },
    /// A pub/sub subscription of this client lost its node (connection lost, or the node is no
    /// longer the one to use after a failover): messages published from now until
    /// `subscription_restored` are not received (Redis pub/sub is at-most-once).
    SubscriptionLost {
        /// The node the subscription was on.
        address: Address,
    },
    /// A pub/sub subscription is back: every channel and pattern was subscribed again.
    SubscriptionRestored {
        /// The node subscribed on now.
        address: Address,
        /// Milliseconds between `subscription_lost` and this event: how long messages were lost.
        gap_ms: u64,
    },
    /// With `sentinel_majority_ms`: fewer than a majority of the known sentinels answered
    /// within the bound; writes wait until `sentinel_majority_regained`.
    SentinelMajorityLost {
        /// Sentinels heard within the bound.
        heard: usize,
        /// Sentinels known.
        known: usize,
    },
    /// With `sentinel_majority_ms`: a majority of the known sentinels name the client's
    /// primary again; writes resume.
    SentinelMajorityRegained {
        /// The primary they name.
        primary: Address,
        /// Sentinels that named it within the bound.
        confirmed: usize,
        /// Sentinels known.
        known: usize,
    },
}

impl EventKind {
    /// Every kind's name and what it means, in the order of their C integer values (1-based):
    /// the table the bindings' event tables are generated from.
    pub const TABLE: [(&'static str, &'static str); 15] = [
        ("primary_changed", "the verified primary moved (old, new)"),
        (
            "replicas_changed",
            "the set of healthy replicas changed (replicas)",
        ),
        (
            "sentinels_changed",
            "a sentinel was learned (sentinels: all of them now)",
        ),
        ("sentinel_down", "a sentinel stopped answering (sentinel)"),
        ("sentinel_up", "a sentinel answered again (sentinel)"),
        (
            "connection_lost",
            "the connection to the primary broke (address)",
        ),
        (
            "connection_restored",
            "a connection to the primary works again (address)",
        ),
        (
            "discovery_failed",
            "a discovery round found no usable primary; the last one is kept (error)",
        ),
        (
            "failover_started",
            "the leader started promoting a replica; writes wait (primary, promoting)",
        ),
        (
            "sentinel_tilt",
            "a sentinel entered or left TILT (sentinel, on)",
        ),
        (
            "sentinel_service_unknown",
            "a reachable sentinel does not monitor the service (sentinel)",
        ),
        (
            "subscription_lost",
            "a pub/sub subscription lost its node; messages are missed until restored (address)",
        ),
        (
            "subscription_restored",
            "a pub/sub subscription is back on a node (address, gap_ms)",
        ),
        (
            "sentinel_majority_lost",
            "fewer than a majority of the known sentinels answered in time; writes wait (heard, known)",
        ),
        (
            "sentinel_majority_regained",
            "a majority of the sentinels name the primary again; writes resume (primary, confirmed, known)",
        ),
    ];

    /// The kind's integer (1-based position in [`EventKind::TABLE`]), as the C ABI uses it.
    pub fn as_i32(&self) -> i32 {
        let name = self.name();
        EventKind::TABLE
            .iter()
            .position(|(n, _)| *n == name)
            .map(|i| i as i32 + 1)
            .unwrap_or(0)
    }

    /// The snake_case name used as `kind` in every language.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::PrimaryChanged { .. } => "primary_changed",
            EventKind::ReplicasChanged { .. } => "replicas_changed",
            EventKind::SentinelsChanged { .. } => "sentinels_changed",
            EventKind::SentinelDown { .. } => "sentinel_down",
            EventKind::SentinelUp { .. } => "sentinel_up",
            EventKind::ConnectionLost { .. } => "connection_lost",
            EventKind::ConnectionRestored { .. } => "connection_restored",
            EventKind::DiscoveryFailed { .. } => "discovery_failed",
            EventKind::FailoverStarted { .. } => "failover_started",
            EventKind::SentinelTilt { .. } => "sentinel_tilt",
            EventKind::SentinelServiceUnknown { .. } => "sentinel_service_unknown",
            EventKind::SubscriptionLost { .. } => "subscription_lost",
            EventKind::SubscriptionRestored { .. } => "subscription_restored",
            EventKind::SentinelMajorityLost { .. } => "sentinel_majority_lost",
            EventKind::SentinelMajorityRegained { .. } => "sentinel_majority_regained",
        }
    }
}

/// Milliseconds since the Unix epoch, for [`Event::at`].
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_kind_in_c_order() {
        let a = Address::new("127.0.0.1", 1);
        let kinds = [
            EventKind::PrimaryChanged {
                old: None,
                new: a.clone(),
            },
            EventKind::ReplicasChanged { replicas: vec![] },
            EventKind::SentinelsChanged { sentinels: vec![] },
            EventKind::SentinelDown {
                sentinel: a.clone(),
            },
            EventKind::SentinelUp {
                sentinel: a.clone(),
            },
            EventKind::ConnectionLost { address: a.clone() },
            EventKind::ConnectionRestored { address: a.clone() },
            EventKind::DiscoveryFailed {
                error: Error::closed(),
            },
            EventKind::FailoverStarted {
                primary: a.clone(),
                promoting: a.clone(),
            },
            EventKind::SentinelTilt {
                sentinel: a.clone(),
                on: true,
            },
            EventKind::SentinelServiceUnknown {
                sentinel: a.clone(),
            },
            EventKind::SubscriptionLost { address: a.clone() },
            EventKind::SubscriptionRestored {
                address: a.clone(),
                gap_ms: 1,
            },
            EventKind::SentinelMajorityLost { heard: 1, known: 3 },
            EventKind::SentinelMajorityRegained {
                primary: a,
                confirmed: 2,
                known: 3,
            },
        ];
        assert_eq!(kinds.len(), EventKind::TABLE.len());
        for (i, k) in kinds.iter().enumerate() {
            assert_eq!(k.as_i32(), i as i32 + 1, "{}", k.name());
            assert_eq!(EventKind::TABLE[i].0, k.name());
        }
    }
}
