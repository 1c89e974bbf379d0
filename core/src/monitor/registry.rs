//! Sharing: clients with the same sentinels, service and credentials use one monitor, so sentinel
//! connections, subscriptions and timers do not grow with the number of clients in a process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::handle::Monitor;
use crate::config::Config;
use crate::error::Result;
use crate::sync::Locked;

static MONITORS: Mutex<Option<HashMap<Config, Entry>>> = Mutex::new(None);

/// One shared monitor and the clients holding it. Clients are counted apart from the `Arc`'s
/// references: a command still on its way after its client closed holds the monitor too, and
/// must not keep it running for a client that comes later (nor from being shut down now).
struct Entry {
    monitor: Weak<Monitor>,
    clients: usize,
}
/// The part of a configuration a monitor depends on. Data-path settings (db, command timeout,
/// read policy, durable acknowledgements) do not change what the monitor does, so clients that differ only there share.
/// Data-node credentials stay in the key because the monitor verifies primaries with ROLE using
/// them.
fn key(config: &Config) -> Config {
    let defaults = Config::default();
    Config {
        db: defaults.db,
        command_timeout_ms: defaults.command_timeout_ms,
        read_from: defaults.read_from,
        wait_replicas: defaults.wait_replicas,
        wait_timeout_ms: defaults.wait_timeout_ms,
        ..config.clone()
    }
}

/// The running monitor for `config`, started if there is none usable in this process. Each
/// call is one client's hold, given back once with [`release`].
pub(crate) fn acquire(config: &Config) -> Result<Arc<Monitor>> {
    let key = key(config);
    let mut guard = MONITORS.locked();
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(entry) = map.get_mut(&key) {
        if let Some(monitor) = entry.monitor.upgrade().filter(|m| m.is_usable()) {
            entry.clients += 1;
            return Ok(monitor);
        }
    }
    map.retain(|_, entry| entry.monitor.strong_count() > 0);
    let monitor = Monitor::start(key.clone())?;
    let entry = Entry {
        monitor: Arc::downgrade(&monitor),
        clients: 1,
    };
    map.insert(key, entry);
    Ok(monitor)
}

/// Gives back one client's hold. Returns the monitor when that was the last client, so the
/// caller can shut it down; no other client can pick it up once this returns it. A monitor no
/// longer in the registry (it stopped, and a later client started another) is returned too:
/// shutting it down again only waits for its tasks.
pub(crate) fn release(monitor: Arc<Monitor>) -> Option<Arc<Monitor>> {
    let mut guard = MONITORS.locked();
    let map = guard.get_or_insert_with(HashMap::new);
    let Some((key, entry)) = map
        .iter_mut()
        .find(|(_, entry)| std::ptr::eq(entry.monitor.as_ptr(), Arc::as_ptr(&monitor)))
    else {
        return Some(monitor);
    };
    entry.clients = entry.clients.saturating_sub(1);
    if entry.clients > 0 {
        return None;
    }
    let key = key.clone();
    map.remove(&key);
    Some(monitor)
}

/// How many monitors are alive in this process (for the testkit's lifecycle suites).
#[cfg(feature = "internals")]
pub fn live_monitors() -> usize {
    let guard = MONITORS.locked();
    guard
        .as_ref()
        .map(|m| {
            m.values()
                .filter(|e| e.monitor.upgrade().is_some_and(|m| m.is_usable()))
                .count()
        })
        .unwrap_or(0)
}
