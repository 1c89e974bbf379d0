//! Sharing: clients with the same sentinels, service and credentials use one monitor, so sentinel
//! connections, subscriptions and timers do not grow with the number of clients in a process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::handle::Monitor;
use crate::config::Config;
use crate::error::Result;
use crate::sync::Locked;

static MONITORS: Mutex<Option<HashMap<Config, Weak<Monitor>>>> = Mutex::new(None);

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

/// The running monitor for `config`, started if there is none usable in this process.
pub(crate) fn acquire(config: &Config) -> Result<Arc<Monitor>> {
    let key = key(config);
    let mut guard = MONITORS.locked();
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(monitor) = map.get(&key).and_then(Weak::upgrade) {
        if monitor.is_usable() {
            return Ok(monitor);
        }
    }
    map.retain(|_, weak| weak.strong_count() > 0);
    let monitor = Monitor::start(key.clone())?;
    map.insert(key, Arc::downgrade(&monitor));
    Ok(monitor)
}

/// Gives back one reference. Returns the monitor when that was the last one, so the caller can
/// shut it down; no other client can pick it up once this returns it.
pub(crate) fn release(monitor: Arc<Monitor>) -> Option<Arc<Monitor>> {
    let mut guard = MONITORS.locked();
    if Arc::strong_count(&monitor) > 1 {
        return None;
    }
    if let Some(map) = guard.as_mut() {
        map.retain(|_, weak| {
            !std::ptr::eq(weak.as_ptr(), Arc::as_ptr(&monitor)) && weak.strong_count() > 0
        });
    }
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
                .filter(|w| w.upgrade().is_some_and(|m| m.is_usable()))
                .count()
        })
        .unwrap_or(0)
}
