//! Sentinel connections shared by every monitor of the process.
//!
//! A process that follows many services through the same sentinels (one monitor per service)
//! would otherwise hold one command connection per service and sentinel. Monitors whose
//! sentinel-side settings are equal (credentials, TLS, protocol, name, timeouts: the
//! [`LinkKey`]) share one [`Link`] per sentinel instead, so sentinel connections grow with the
//! number of sentinels, not of services. The connection is multiplexed: each monitor's requests
//! are answered in order on it, and a monitor that stops waiting does not disturb the others.
//!
//! A link lives while a monitor holds it: the registry keeps only weak references, and the last
//! holder dropping it closes the connection. A link that broke or answered garbage is closed
//! by whoever saw it (it is broken for everyone); the next monitor to ask opens a new one.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, Weak};

use tokio::time::Instant;

use crate::config::Config;
use crate::error::Result;
use crate::resp::Connection;
use crate::sync::PerProcess;
use crate::types::Address;

/// Which monitors may share a sentinel's connection: the sentinel's address and the
/// sentinel-side part of their configuration (see [`sentinel_side`]).
pub type LinkKey = (Address, Config);

/// The part of a configuration that decides how sentinels are connected to and asked: every
/// field but the service, the sentinel list, the data nodes' credentials and the data path's
/// settings. Kept conservative: a field not cleared here only makes monitors share less.
pub fn sentinel_side(config: &Config) -> Config {
    let defaults = Config::default();
    Config {
        sentinels: Vec::new(),
        service: String::new(),
        auth: None,
        db: defaults.db,
        command_timeout_ms: defaults.command_timeout_ms,
        read_from: defaults.read_from,
        queue_size: defaults.queue_size,
        wait_replicas: defaults.wait_replicas,
        wait_timeout_ms: defaults.wait_timeout_ms,
        sentinel_majority_ms: defaults.sentinel_majority_ms,
        ..config.clone()
    }
}

/// What was learnt when the connection was opened, handed to every monitor that starts using
/// it (so each one records the sentinel's run id and TILT state once).
#[derive(Clone, Debug, Default)]
pub struct Learned {
    /// The addresses the sentinel's name resolved to.
    pub resolved: Vec<SocketAddr>,
    /// `SENTINEL MYID`, when the sentinel has it.
    pub run_id: Option<String>,
    /// `INFO sentinel`'s TILT flag, and when it was asked.
    pub tilt: Option<(bool, Instant)>,
}

/// One shared connection to a sentinel.
pub struct Link {
    conn: Connection,
    learned: Learned,
}

impl Link {
    /// What was learnt when the connection was opened.
    pub fn learned(&self) -> &Learned {
        &self.learned
    }
}

impl Deref for Link {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.conn.close();
    }
}

/// One slot per key; its async lock makes monitors that need the same new link at once wait
/// for one connection instead of opening one each.
type Slot = Arc<tokio::sync::Mutex<Weak<Link>>>;

static LINKS: PerProcess<HashMap<LinkKey, Slot>> = PerProcess::new();

fn slot(key: &LinkKey) -> Slot {
    LINKS.with(|map| {
        // Slots nobody holds a link of, or waits on, go.
        map.retain(|_, slot| {
            Arc::strong_count(slot) > 1 || slot.try_lock().map_or(true, |w| w.strong_count() > 0)
        });
        map.entry(key.clone()).or_default().clone()
    })
}

/// The open link for `key`, or a new one made by `connect` (which opens the connection and
/// learns what [`Learned`] holds).
pub async fn get<F, Fut>(key: &LinkKey, connect: F) -> Result<Arc<Link>>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<(Connection, Learned)>>,
{
    let slot = slot(key);
    let mut held = slot.lock().await;
    if let Some(link) = held.upgrade().filter(|l| !l.is_closed()) {
        return Ok(link);
    }
    let (conn, learned) = connect().await?;
    let link = Arc::new(Link { conn, learned });
    *held = Arc::downgrade(&link);
    Ok(link)
}
