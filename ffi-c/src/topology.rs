//! Topology snapshots and events as plain C structs.

use std::ffi::{c_char, c_int, CString};

use sr::{Address, Event, EventKind, SentinelInfo, Topology};

use crate::codes::{
    SR_EVENT_CONNECTION_LOST, SR_EVENT_CONNECTION_RESTORED, SR_EVENT_DISCOVERY_FAILED,
    SR_EVENT_FAILOVER_STARTED, SR_EVENT_PRIMARY_CHANGED, SR_EVENT_REPLICAS_CHANGED,
    SR_EVENT_SENTINELS_CHANGED, SR_EVENT_SENTINEL_DOWN, SR_EVENT_SENTINEL_MAJORITY_LOST,
    SR_EVENT_SENTINEL_MAJORITY_REGAINED, SR_EVENT_SENTINEL_SERVICE_UNKNOWN, SR_EVENT_SENTINEL_TILT,
    SR_EVENT_SENTINEL_UP, SR_EVENT_SUBSCRIPTION_LOST, SR_EVENT_SUBSCRIPTION_RESTORED,
};
use crate::error::{c_string, sr_error_t};
use crate::ffi::{box_to_mut_ptr, free_box, guard, to_boxed_mut_ptr, try_ref, Castable, OwnedBox};

/// A node address. `host` is NUL-terminated and owned by the struct containing this address.
#[repr(C)]
pub struct sr_address_t {
    /// Host name or IP address as configured or reported by a sentinel.
    pub host: *const c_char,
    /// TCP port.
    pub port: u16,
    /// The address a sentinel reported, when `address_map` mapped it to `host`:`port`; NULL when
    /// used as reported (or configured). Owned like `host`.
    pub announced: *const sr_address_t,
}

/// A sentinel as the client knows it. `host` is owned by the struct containing it.
#[repr(C)]
pub struct sr_sentinel_t {
    /// Host as configured (names are kept) or as reported by another sentinel.
    pub host: *const c_char,
    /// TCP port.
    pub port: u16,
    /// Whether the last attempt to ask it succeeded (false before it was ever reached).
    pub up: bool,
    /// Whether it is in TILT: it answers, but takes part in no failover until TILT ends.
    pub tilt: bool,
    /// False once it answered that it does not monitor the service.
    pub knows_service: bool,
    /// The address another sentinel reported, when `address_map` mapped it to `host`:`port`;
    /// NULL otherwise. Owned like `host`.
    pub announced: *const sr_address_t,
}

/// A point-in-time view of the service, from sr_client_topology().
///
/// Owned by the caller and read-only: free it (and with it every pointer inside) with
/// sr_topology_free().
#[repr(C)]
pub struct sr_topology_t {
    /// The service (master name).
    pub service: *const c_char,
    /// The verified primary, or NULL before the first successful discovery.
    pub primary: *const sr_address_t,
    /// Healthy replicas (`replicas_len` of them; NULL when there are none).
    pub replicas: *const sr_address_t,
    /// Number of entries in `replicas`.
    pub replicas_len: usize,
    /// Every known sentinel, configured ones first (`sentinels_len` of them).
    pub sentinels: *const sr_sentinel_t,
    /// Number of entries in `sentinels`.
    pub sentinels_len: usize,
    /// The sentinels' config epoch of the service at the last successful discovery.
    pub epoch: u64,
    /// True when the last discovery round found and verified the primary.
    pub healthy: bool,
}

/// An event kind newer than this header; `kind_name` and `json` still describe it.
pub const SR_EVENT_OTHER: c_int = 0;

/// A topology event, passed to the event callback.
///
/// Borrowed: every pointer in it is valid only during the callback; copy what you need or keep
/// the whole event with sr_event_clone(). Fields that do not apply to the kind are NULL / 0.
#[repr(C)]
pub struct sr_event_t {
    /// One of `SR_EVENT_*`.
    pub kind: c_int,
    /// The kind's snake_case name shared by all bindings (`"primary_changed"`, ...).
    pub kind_name: *const c_char,
    /// The service.
    pub service: *const c_char,
    /// Unix time in milliseconds when the client observed it.
    pub at: u64,
    /// primary_changed: the previous primary (NULL at the first discovery).
    pub old_primary: *const sr_address_t,
    /// primary_changed: the new primary; sentinel_down/up: the sentinel;
    /// connection_lost/restored: the primary; subscription_lost/restored: the node subscribed on;
    /// sentinel_majority_regained: the primary the majority names (counts are in `json`).
    pub address: *const sr_address_t,
    /// replicas_changed: the replicas now.
    pub replicas: *const sr_address_t,
    /// Number of entries in `replicas`.
    pub replicas_len: usize,
    /// sentinels_changed: all sentinels now.
    pub sentinels: *const sr_sentinel_t,
    /// Number of entries in `sentinels`.
    pub sentinels_len: usize,
    /// discovery_failed: why (borrowed like the rest of the event).
    pub error: *const sr_error_t,
    /// The whole event as one JSON object (`{"kind":"primary_changed","old":...,"new":...,
    /// "service":...,"at":...}`), the same form the CLI prints.
    pub json: *const c_char,
    /// sentinel_tilt: true when the sentinel entered TILT, false when it left.
    pub on: bool,
    /// subscription_restored: milliseconds since subscription_lost (messages published in
    /// between were missed); 0 for other kinds.
    pub gap_ms: u64,
}

/// Owned storage behind the pointers of a view struct.
#[derive(Default)]
struct Store {
    strings: Vec<CString>,
    // Boxed: pointers to single addresses are handed out while the Vec still grows.
    #[allow(clippy::vec_box)]
    addresses: Vec<Box<sr_address_t>>,
    lists: Vec<Vec<sr_address_t>>,
    sentinels: Vec<Vec<sr_sentinel_t>>,
}

// SAFETY: the raw pointers in Store point into data Store itself owns.
unsafe impl Send for Store {}

impl Store {
    fn string(&mut self, s: &str) -> *const c_char {
        let c = c_string(s);
        let p = c.as_ptr();
        self.strings.push(c);
        p
    }

    fn address_value(&mut self, a: &Address) -> sr_address_t {
        sr_address_t {
            host: self.string(&a.host),
            port: a.port,
            announced: self.address(a.announced.as_deref()),
        }
    }

    fn address(&mut self, a: Option<&Address>) -> *const sr_address_t {
        match a {
            None => std::ptr::null(),
            Some(a) => {
                let boxed = Box::new(self.address_value(a));
                let p: *const sr_address_t = &*boxed;
                self.addresses.push(boxed);
                p
            }
        }
    }

    fn address_list(&mut self, list: &[Address]) -> (*const sr_address_t, usize) {
        if list.is_empty() {
            return (std::ptr::null(), 0);
        }
        let v: Vec<sr_address_t> = list.iter().map(|a| self.address_value(a)).collect();
        let out = (v.as_ptr(), v.len());
        self.lists.push(v);
        out
    }

    fn sentinel_list(&mut self, list: &[SentinelInfo]) -> (*const sr_sentinel_t, usize) {
        if list.is_empty() {
            return (std::ptr::null(), 0);
        }
        let v: Vec<sr_sentinel_t> = list
            .iter()
            .map(|s| sr_sentinel_t {
                host: self.string(&s.host),
                port: s.port,
                up: s.up,
                tilt: s.tilt,
                knows_service: s.knows_service,
                announced: self.address(s.announced.as_ref()),
            })
            .collect();
        let out = (v.as_ptr(), v.len());
        self.sentinels.push(v);
        out
    }
}

/// What an `sr_topology_t *` really points to: the view first, then its storage.
#[repr(C)]
pub(crate) struct TopologyBox {
    view: sr_topology_t,
    store: Store,
}

impl Castable for sr_topology_t {
    type Ownership = OwnedBox;
    type RustType = TopologyBox;
}

impl Castable for sr_event_t {
    type Ownership = OwnedBox;
    type RustType = EventBox;
}

pub(crate) fn topology_to_c(t: &Topology) -> *mut sr_topology_t {
    let mut store = Store::default();
    let (replicas, replicas_len) = store.address_list(&t.replicas);
    let (sentinels, sentinels_len) = store.sentinel_list(&t.sentinels);
    let view = sr_topology_t {
        service: store.string(&t.service),
        primary: store.address(t.primary.as_ref()),
        replicas,
        replicas_len,
        sentinels,
        sentinels_len,
        epoch: t.epoch,
        healthy: t.healthy,
    };
    to_boxed_mut_ptr::<sr_topology_t>(TopologyBox { view, store })
}

/// Frees a topology from sr_client_topology(). NULL is ignored.
///
/// # Safety
/// `topology` is NULL or a topology from sr_client_topology(), not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_topology_free(topology: *mut sr_topology_t) {
    guard(|| drop(free_box(topology)))
}

/// What an `sr_event_t *` really points to: the view first, then its storage and the event.
#[repr(C)]
pub(crate) struct EventBox {
    view: sr_event_t,
    store: Store,
    error: Option<Box<sr_error_t>>,
    event: Event,
}

impl EventBox {
    pub(crate) fn new(event: &Event) -> Box<EventBox> {
        let mut store = Store::default();
        let mut error = None;
        let json = serde_json::to_string(event).unwrap_or_else(|_| "{}".to_string());
        let mut view = sr_event_t {
            kind: SR_EVENT_OTHER,
            kind_name: store.string(event.kind.name()),
            service: store.string(&event.service),
            at: event.at,
            old_primary: std::ptr::null(),
            address: std::ptr::null(),
            replicas: std::ptr::null(),
            replicas_len: 0,
            sentinels: std::ptr::null(),
            sentinels_len: 0,
            error: std::ptr::null(),
            json: store.string(&json),
            on: false,
            gap_ms: 0,
        };
        match &event.kind {
            EventKind::PrimaryChanged { old, new } => {
                view.kind = SR_EVENT_PRIMARY_CHANGED;
                view.old_primary = store.address(old.as_ref());
                view.address = store.address(Some(new));
            }
            EventKind::ReplicasChanged { replicas } => {
                view.kind = SR_EVENT_REPLICAS_CHANGED;
                (view.replicas, view.replicas_len) = store.address_list(replicas);
            }
            EventKind::SentinelsChanged { sentinels } => {
                view.kind = SR_EVENT_SENTINELS_CHANGED;
                (view.sentinels, view.sentinels_len) = store.sentinel_list(sentinels);
            }
            EventKind::SentinelDown { sentinel } => {
                view.kind = SR_EVENT_SENTINEL_DOWN;
                view.address = store.address(Some(sentinel));
            }
            EventKind::SentinelUp { sentinel } => {
                view.kind = SR_EVENT_SENTINEL_UP;
                view.address = store.address(Some(sentinel));
            }
            EventKind::ConnectionLost { address } => {
                view.kind = SR_EVENT_CONNECTION_LOST;
                view.address = store.address(Some(address));
            }
            EventKind::ConnectionRestored { address } => {
                view.kind = SR_EVENT_CONNECTION_RESTORED;
                view.address = store.address(Some(address));
            }
            EventKind::DiscoveryFailed { error: e } => {
                view.kind = SR_EVENT_DISCOVERY_FAILED;
                let boxed = Box::new(sr_error_t::from(e));
                view.error = &*boxed;
                error = Some(boxed);
            }
            EventKind::FailoverStarted { primary, promoting } => {
                view.kind = SR_EVENT_FAILOVER_STARTED;
                view.old_primary = store.address(Some(primary));
                view.address = store.address(Some(promoting));
            }
            EventKind::SentinelTilt { sentinel, on } => {
                view.kind = SR_EVENT_SENTINEL_TILT;
                view.address = store.address(Some(sentinel));
                view.on = *on;
            }
            EventKind::SentinelServiceUnknown { sentinel } => {
                view.kind = SR_EVENT_SENTINEL_SERVICE_UNKNOWN;
                view.address = store.address(Some(sentinel));
            }
            EventKind::SubscriptionLost { address } => {
                view.kind = SR_EVENT_SUBSCRIPTION_LOST;
                view.address = store.address(Some(address));
            }
            EventKind::SubscriptionRestored { address, gap_ms } => {
                view.kind = SR_EVENT_SUBSCRIPTION_RESTORED;
                view.address = store.address(Some(address));
                view.gap_ms = *gap_ms;
            }
            EventKind::SentinelMajorityLost { .. } => view.kind = SR_EVENT_SENTINEL_MAJORITY_LOST,
            EventKind::SentinelMajorityRegained { primary, .. } => {
                view.kind = SR_EVENT_SENTINEL_MAJORITY_REGAINED;
                view.address = store.address(Some(primary));
            }
            _ => {}
        }
        Box::new(EventBox {
            view,
            store,
            error,
            event: event.clone(),
        })
    }

    pub(crate) fn view(&self) -> *const sr_event_t {
        &self.view
    }
}

/// An owned copy of an event passed to the event callback, to keep it after the callback
/// returns; free it with sr_event_free(). NULL for NULL. Only pass events this library handed
/// out.
///
/// # Safety
/// `event` is NULL or an event from this library, still valid.
#[no_mangle]
pub unsafe extern "C" fn sr_event_clone(event: *const sr_event_t) -> *mut sr_event_t {
    guard(|| match try_ref(event) {
        Some(b) => box_to_mut_ptr::<sr_event_t>(EventBox::new(&b.event)),
        None => std::ptr::null_mut(),
    })
}

/// Frees an event from sr_event_clone(). NULL is ignored. Never pass the borrowed event of a
/// callback.
///
/// # Safety
/// `event` is NULL or an event from sr_event_clone(), not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_event_free(event: *mut sr_event_t) {
    guard(|| drop(free_box(event)))
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::{
        sr_event_clone, sr_event_free, sr_topology_free, topology_to_c, Address, Event, EventBox,
        EventKind, SentinelInfo, Topology,
    };
    use crate::codes::SR_EVENT_PRIMARY_CHANGED;

    #[test]
    fn topology_and_events_convert() {
        let t = Topology {
            service: "mymaster".into(),
            primary: Some(Address::new("127.0.0.1", 6379)),
            replicas: vec![
                Address::new("127.0.0.1", 6380).mapped_from(&Address::new("10.0.0.9", 6380))
            ],
            sentinels: vec![SentinelInfo {
                host: "localhost".into(),
                port: 26379,
                announced: None,
                up: true,
                tilt: false,
                knows_service: true,
            }],
            epoch: 3,
            healthy: true,
        };
        let p = topology_to_c(&t);
        unsafe {
            let v = &*p;
            assert_eq!(CStr::from_ptr(v.service).to_str().unwrap(), "mymaster");
            assert_eq!((*v.primary).port, 6379);
            assert_eq!(v.replicas_len, 1);
            assert!((*v.primary).announced.is_null());
            let announced = &*(*v.replicas).announced;
            assert_eq!(CStr::from_ptr(announced.host).to_str().unwrap(), "10.0.0.9");
            assert_eq!(announced.port, 6380);
            assert_eq!((*v.sentinels).port, 26379);
            assert!((*v.sentinels).announced.is_null());
            sr_topology_free(p);
        }
        let e = Event {
            kind: EventKind::PrimaryChanged {
                old: None,
                new: Address::new("127.0.0.1", 6380),
            },
            service: "mymaster".into(),
            at: 5,
        };
        let b = EventBox::new(&e);
        unsafe {
            let copy = sr_event_clone(b.view());
            drop(b);
            let v = &*copy;
            assert_eq!(v.kind, SR_EVENT_PRIMARY_CHANGED);
            assert!(v.old_primary.is_null());
            assert_eq!((*v.address).port, 6380);
            let json = CStr::from_ptr(v.json).to_str().unwrap();
            assert!(json.contains("\"kind\":\"primary_changed\""), "{json}");
            sr_event_free(copy);
        }
    }
}
