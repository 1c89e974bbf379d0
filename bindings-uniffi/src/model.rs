//! The topology and its events as uniffi records: copies of the core's types, with the same names
//! (`kind` is the shared snake_case event-kind name).

use sentinel_recovery as core;

/// A host and port.
#[derive(Clone, Debug, PartialEq, Eq, uniffi::Record)]
pub struct Address {
    /// Host name or IP literal, without brackets for IPv6.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

/// One sentinel as the monitor knows it.
#[derive(Clone, Debug, PartialEq, Eq, uniffi::Record)]
pub struct SentinelInfo {
    /// Host as configured, or as reported by another sentinel.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Whether the last attempt to ask it succeeded.
    pub up: bool,
    /// Whether it is in TILT.
    pub tilt: bool,
    /// Whether it monitors the service.
    pub knows_service: bool,
}

/// A point-in-time view of the followed service.
#[derive(Clone, Debug, PartialEq, Eq, uniffi::Record)]
pub struct Topology {
    /// The service (master name).
    pub service: String,
    /// The verified primary; `None` before the first successful discovery.
    pub primary: Option<Address>,
    /// Healthy replicas of the primary.
    pub replicas: Vec<Address>,
    /// Every sentinel known: configured seeds first, then learned ones.
    pub sentinels: Vec<SentinelInfo>,
    /// The sentinels' config-epoch of the service at the last successful discovery.
    pub epoch: u64,
    /// True when the last discovery round found and verified the primary.
    pub healthy: bool,
}

/// Something that changed, with the service it concerns and when.
#[derive(Clone, Debug, PartialEq, uniffi::Record)]
pub struct Event {
    /// The event kind's shared name (`primary_changed`, `discovery_failed`, ...).
    pub kind: String,
    /// The service.
    pub service: String,
    /// Unix time in milliseconds when the monitor observed it.
    pub at_ms: u64,
    /// The kind's data.
    pub detail: EventDetail,
}

/// The unit a language states a call's timeout and the doctor's watch in (Ruby: seconds; the
/// JVM: milliseconds); the refusal of a bad value names it in that unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, uniffi::Enum)]
pub enum TimeoutUnit {
    /// Seconds.
    Seconds,
    /// Milliseconds.
    Milliseconds,
}

impl From<TimeoutUnit> for sentinel_recovery::deadline::Unit {
    fn from(unit: TimeoutUnit) -> Self {
        match unit {
            TimeoutUnit::Seconds => sentinel_recovery::deadline::Unit::Seconds,
            TimeoutUnit::Milliseconds => sentinel_recovery::deadline::Unit::Milliseconds,
        }
    }
}

/// The data of each event kind (one variant per kind of the core's table).
#[derive(Clone, Debug, PartialEq, uniffi::Enum)]
pub enum EventDetail {
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
    /// A sentinel answered again.
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
    /// The failover leader started promoting a replica; writes wait.
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
        /// True when it entered TILT.
        on: bool,
    },
    /// A reachable sentinel does not monitor the service.
    SentinelServiceUnknown {
        /// The sentinel.
        sentinel: Address,
    },
    /// A discovery round found no usable primary; the last one is kept.
    DiscoveryFailed {
        /// Why: the shared code name (`sentinels_unreachable`, `service_unknown` or
        /// `no_healthy_primary`).
        code: String,
        /// The message.
        message: String,
    },
    /// A kind newer than this binding; [`Event::kind`] names it.
    Other,
}

impl From<&core::Address> for Address {
    fn from(a: &core::Address) -> Address {
        Address {
            host: a.host.clone(),
            port: a.port,
        }
    }
}

impl From<&core::SentinelInfo> for SentinelInfo {
    fn from(s: &core::SentinelInfo) -> SentinelInfo {
        SentinelInfo {
            host: s.host.clone(),
            port: s.port,
            up: s.up,
            tilt: s.tilt,
            knows_service: s.knows_service,
        }
    }
}

fn addresses(list: &[core::Address]) -> Vec<Address> {
    list.iter().map(Address::from).collect()
}

impl From<core::Topology> for Topology {
    fn from(t: core::Topology) -> Topology {
        Topology {
            primary: t.primary.as_ref().map(Address::from),
            replicas: addresses(&t.replicas),
            sentinels: t.sentinels.iter().map(SentinelInfo::from).collect(),
            service: t.service,
            epoch: t.epoch,
            healthy: t.healthy,
        }
    }
}

impl From<&core::Event> for Event {
    fn from(e: &core::Event) -> Event {
        use core::EventKind as K;
        let detail = match &e.kind {
            K::PrimaryChanged { old, new } => EventDetail::PrimaryChanged {
                old: old.as_ref().map(Address::from),
                new: new.into(),
            },
            K::ReplicasChanged { replicas } => EventDetail::ReplicasChanged {
                replicas: addresses(replicas),
            },
            K::SentinelsChanged { sentinels } => EventDetail::SentinelsChanged {
                sentinels: sentinels.iter().map(SentinelInfo::from).collect(),
            },
            K::SentinelDown { sentinel } => EventDetail::SentinelDown {
                sentinel: sentinel.into(),
            },
            K::SentinelUp { sentinel } => EventDetail::SentinelUp {
                sentinel: sentinel.into(),
            },
            K::ConnectionLost { address } => EventDetail::ConnectionLost {
                address: address.into(),
            },
            K::ConnectionRestored { address } => EventDetail::ConnectionRestored {
                address: address.into(),
            },
            K::FailoverStarted { primary, promoting } => EventDetail::FailoverStarted {
                primary: primary.into(),
                promoting: promoting.into(),
            },
            K::SentinelTilt { sentinel, on } => EventDetail::SentinelTilt {
                sentinel: sentinel.into(),
                on: *on,
            },
            K::SentinelServiceUnknown { sentinel } => EventDetail::SentinelServiceUnknown {
                sentinel: sentinel.into(),
            },
            K::DiscoveryFailed { error } => EventDetail::DiscoveryFailed {
                code: error.code().as_str().to_string(),
                message: error.message().to_string(),
            },
            _ => EventDetail::Other,
        };
        Event {
            kind: e.kind.name().to_string(),
            service: e.service.clone(),
            at_ms: e.at,
            detail,
        }
    }
}
