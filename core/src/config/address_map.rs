//! `address_map`: what the client connects to instead of an address a sentinel reported (NAT,
//! Docker, port forwards), like ioredis' `natMap`.
//!
//! Applied to every address a sentinel reports — primary, replicas, sentinels it knows, and the
//! addresses in its events — before anything connects to it. The configured seed sentinels are
//! never mapped: they are already what the client can reach.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::names::{parse_host_port, shorten};
use crate::error::Error;
use crate::types::Address;

/// The function form of the map: `Some(address)` to connect there instead, `None` to use the
/// reported address. It is called for every reported address and should be a quick lookup; a
/// panic in it is caught, logged, and the reported address is used. A binding's function may
/// have to wait for its host (a GIL, an event loop): on a core runtime worker it is called under
/// `block_in_place`, so that wait holds up only the discovery step that asked, never the
/// worker's other tasks.
pub type AddressMapFn = dyn Fn(&Address) -> Option<Address> + Send + Sync;

/// Reported address -> address to connect to: fixed entries (`address_map=a:p>b:q,...`) and an
/// optional function, asked when no entry matches.
///
/// Two maps are equal when their entries are and they hold the same function (the same `Arc`),
/// so clients sharing one map also share one monitor.
#[derive(Clone, Default)]
pub struct AddressMap {
    entries: Vec<(Address, Address)>,
    function: Option<Arc<AddressMapFn>>,
}

impl AddressMap {
    /// Parses `host:port>host:port[,host:port>host:port...]` (IPv6 in brackets). An empty text is
    /// an empty map. Errors name the bad entry.
    pub fn parse(text: &str) -> crate::Result<Vec<(Address, Address)>> {
        text.split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .enumerate()
            .map(|(i, entry)| {
                let context = || format!("address_map entry #{} '{}'", i + 1, shorten(entry));
                let (from, to) = entry.split_once('>').ok_or_else(|| {
                    Error::config(format!("{}: expected host:port>host:port", context()))
                })?;
                let from = endpoint(from.trim()).map_err(|e| e.context(context()))?;
                let to = endpoint(to.trim()).map_err(|e| e.context(context()))?;
                Ok((from, to))
            })
            .collect()
    }

    /// The fixed entries, in order.
    pub fn entries(&self) -> &[(Address, Address)] {
        &self.entries
    }

    /// Replaces the fixed entries (what `Config::set("address_map", ...)` does).
    pub fn set_entries(&mut self, entries: Vec<(Address, Address)>) {
        self.entries = entries;
    }

    /// Sets (or with `None` removes) the function asked for addresses no entry matches.
    pub fn set_function(&mut self, function: Option<Arc<AddressMapFn>>) {
        self.function = function;
    }

    /// Whether the map changes nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.function.is_none()
    }

    /// Where to connect for the address a sentinel reported: the mapped address with
    /// [`Address::announced`] set, or `reported` itself when nothing maps it. A matching entry
    /// wins over the function. Host names match without regard to case.
    pub fn apply(&self, reported: &Address) -> Address {
        let entry = self.entries.iter().find(|(from, _)| {
            from.port == reported.port && from.host.eq_ignore_ascii_case(&reported.host)
        });
        let mapped = match (entry, &self.function) {
            (Some((_, to)), _) => Some(to.clone()),
            (None, Some(function)) => call(function.as_ref(), reported),
            (None, None) => None,
        };
        match mapped {
            Some(to) if to.host != reported.host || to.port != reported.port => {
                Address::new(to.host, to.port).mapped_from(reported)
            }
            _ => reported.clone(),
        }
    }
}

/// Runs the user's function; its mistakes (a panic, an unusable answer) fall back to the reported
/// address and are logged, so a bad map never stops the monitor.
fn call(function: &AddressMapFn, reported: &Address) -> Option<Address> {
    let called = || off_the_workers(|| function(reported));
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(called)) {
        Ok(Some(to)) if to.host.is_empty() || to.port == 0 => {
            tracing::warn!(address = %reported, mapped = %to,
                "address_map function returned an empty host or port 0; using the reported address");
            None
        }
        Ok(mapped) => mapped,
        Err(_) => {
            tracing::warn!(address = %reported,
                "address_map function panicked; using the reported address");
            None
        }
    }
}

/// Runs host code that may wait: on a worker of a multi-threaded runtime (the core's) under
/// `block_in_place`, which hands the worker's other tasks to another thread first; elsewhere
/// (a blocking-pool thread, a current-thread runtime, no runtime) as it is.
fn off_the_workers<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// `host:port` with the port required (a reported address always has one).
fn endpoint(text: &str) -> crate::Result<Address> {
    let has_port = match text.strip_prefix('[') {
        Some(rest) => rest.contains("]:"),
        None => text.contains(':'),
    };
    if !has_port {
        return Err(Error::config(format!(
            "'{}' has no port (write host:port)",
            shorten(text)
        )));
    }
    parse_host_port(text)
}

impl PartialEq for AddressMap {
    fn eq(&self, other: &AddressMap) -> bool {
        let same_function = match (&self.function, &other.function) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same_function && self.entries == other.entries
    }
}

impl Eq for AddressMap {}

impl Hash for AddressMap {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.entries.hash(state);
        self.function
            .as_ref()
            .map(|f| Arc::as_ptr(f) as *const () as usize)
            .hash(state);
    }
}

impl fmt::Debug for AddressMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self
            .entries
            .iter()
            .map(|(from, to)| format!("{from}>{to}"))
            .collect();
        f.debug_struct("AddressMap")
            .field("entries", &entries)
            .field("function", &self.function.as_ref().map(|_| "fn"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(host: &str, port: u16) -> Address {
        Address::new(host, port)
    }

    #[test]
    fn entries_map_reported_addresses_and_keep_what_was_announced() {
        let mut map = AddressMap::default();
        map.set_entries(
            AddressMap::parse("10.0.0.5:6379>127.0.0.1:16379, [fe80::1]:6380>localhost:6380")
                .unwrap(),
        );
        let mapped = map.apply(&a("10.0.0.5", 6379));
        assert_eq!(mapped, a("127.0.0.1", 16379));
        assert_eq!(mapped.announced.as_deref(), Some(&a("10.0.0.5", 6379)));
        assert_eq!(map.apply(&a("fe80::1", 6380)), a("localhost", 6380));
        let untouched = map.apply(&a("10.0.0.5", 6380));
        assert_eq!(untouched, a("10.0.0.5", 6380));
        assert!(untouched.announced.is_none());
    }

    #[test]
    fn bad_entries_are_named() {
        for (text, needle) in [
            (
                "10.0.0.5:6379",
                "entry #1 '10.0.0.5:6379': expected host:port>host:port",
            ),
            (
                "a:1>b:2,10.0.0.5>127.0.0.1:1",
                "entry #2 '10.0.0.5>127.0.0.1:1'",
            ),
            ("a:1>b:0", "port '0'"),
            ("a:1>b", "'b' has no port"),
            ("a:1>[::1]", "'[::1]' has no port"),
            ("a:1>bad host:2", "entry #1"),
        ] {
            let e = AddressMap::parse(text).unwrap_err();
            assert!(e.message().contains(needle), "{text}: {e}");
        }
        assert!(AddressMap::parse("").unwrap().is_empty());
    }

    #[test]
    fn the_function_is_asked_when_no_entry_matches_and_its_panic_falls_back() {
        let mut map = AddressMap::default();
        map.set_entries(AddressMap::parse("10.0.0.5:6379>127.0.0.1:1").unwrap());
        map.set_function(Some(Arc::new(|a: &Address| match a.port {
            6379 => Some(Address::new("127.0.0.1", 2)),
            6380 => panic!("user bug"),
            6381 => Some(Address::new("", 1)),
            _ => None,
        })));
        assert_eq!(map.apply(&a("10.0.0.5", 6379)), a("127.0.0.1", 1));
        assert_eq!(map.apply(&a("10.0.0.6", 6379)), a("127.0.0.1", 2));
        assert_eq!(map.apply(&a("10.0.0.6", 6380)), a("10.0.0.6", 6380));
        assert_eq!(map.apply(&a("10.0.0.6", 6381)), a("10.0.0.6", 6381));
        assert_eq!(map.apply(&a("10.0.0.6", 6382)), a("10.0.0.6", 6382));
    }

    #[test]
    fn the_url_and_set_are_the_one_way_in() {
        let config = crate::Config::from_url(
            "redis+sentinel://127.0.0.1/svc?address_map=10.0.0.5:6379%3E127.0.0.1:16379,\
             10.0.0.6:6379>127.0.0.1:16380",
        )
        .unwrap();
        assert_eq!(
            config.address_map.entries(),
            [
                (a("10.0.0.5", 6379), a("127.0.0.1", 16379)),
                (a("10.0.0.6", 6379), a("127.0.0.1", 16380))
            ]
        );
        let e = crate::Config::from_url("redis+sentinel://127.0.0.1/svc?address_map=x:1>y")
            .unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.message().contains("address_map entry #1 'x:1>y'"), "{e}");
        let mut config = config;
        config.set("address_map", "").unwrap();
        assert!(config.address_map.is_empty());
    }

    #[test]
    fn maps_with_the_same_function_are_equal() {
        let f: Arc<AddressMapFn> = Arc::new(|_: &Address| None);
        let mut x = AddressMap::default();
        let mut y = AddressMap::default();
        x.set_function(Some(f.clone()));
        assert_ne!(x, y);
        y.set_function(Some(f));
        assert_eq!(x, y);
        y.set_function(Some(Arc::new(|_: &Address| None)));
        assert_ne!(x, y);
    }
    /// A function that waits for its host (here: for a task of the same runtime to answer)
    /// must not stall the worker it is called on: with one worker, the answering task can only
    /// run if the waiting call handed that worker over.
    #[test]
    fn a_waiting_function_does_not_hold_up_the_worker() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (answer, answered) = std::sync::mpsc::channel::<Address>();
        let answered = std::sync::Mutex::new(answered);
        let mut map = AddressMap::default();
        map.set_function(Some(Arc::new(move |_: &Address| {
            ask.send(()).unwrap();
            answered
                .lock()
                .unwrap()
                .recv_timeout(std::time::Duration::from_secs(10))
                .ok()
        })));
        let mapped = runtime.block_on(async move {
            let mapping = tokio::spawn(async move { map.apply(&Address::new("10.0.0.5", 6379)) });
            tokio::spawn(async move {
                tokio::task::spawn_blocking(move || asked.recv().unwrap())
                    .await
                    .unwrap();
                answer.send(Address::new("127.0.0.1", 16379)).unwrap();
            });
            mapping.await.unwrap()
        });
        assert_eq!(mapped, Address::new("127.0.0.1", 16379));
    }
}
