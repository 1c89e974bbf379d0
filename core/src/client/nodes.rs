//! One multiplexed connection per data node, opened on demand, verified with ROLE, and opened
//! again (with the whole handshake: credentials, db, client name, protocol) after any loss.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::dns::Resolver;
use crate::error::{Error, Result};
use crate::node::{self, Expect};
use crate::resp::{ConnectOptions, Connection};
use crate::sync::Locked;
use crate::types::Address;

type Slot = Arc<tokio::sync::Mutex<Option<Connection>>>;

/// How long a node that just failed is passed over; doubles per consecutive failure.
const AVOID_BASE: Duration = Duration::from_millis(500);
const AVOID_MAX: Duration = Duration::from_secs(10);

/// The index of `expect`'s slot.
fn role(expect: Expect) -> usize {
    match expect {
        Expect::Primary => 0,
        Expect::Replica => 1,
    }
}

/// The data connections of one client.
pub struct Nodes {
    options: ConnectOptions,
    resolver: Resolver,
    /// One slot per address and expected role: `[primary, replica]`.
    slots: Mutex<HashMap<Address, [Slot; 2]>>,
    /// Nodes that failed a command or a connect: until when they are passed over, and how many
    /// times in a row they failed.
    failed: Mutex<HashMap<Address, (Instant, u32)>>,
}

impl Nodes {
    /// An empty pool that connects with `options` (data-node credentials, db, name, protocol).
    pub fn new(options: ConnectOptions, resolver: Resolver) -> Nodes {
        Nodes {
            options,
            resolver,
            slots: Mutex::new(HashMap::new()),
            failed: Mutex::new(HashMap::new()),
        }
    }

    /// Notes that `address` failed: it is picked again only after the other nodes, for a while
    /// that grows with each failure in a row.
    pub fn mark_failed(&self, address: &Address) {
        let mut failed = self.failed.locked();
        let count = failed.get(address).map_or(0, |(_, n)| *n);
        let avoid = AVOID_BASE.saturating_mul(1 << count.min(10)).min(AVOID_MAX);
        failed.insert(address.clone(), (Instant::now() + avoid, count + 1));
    }

    /// Notes that `address` answered: it is no longer passed over.
    pub fn mark_ok(&self, address: &Address) {
        let mut failed = self.failed.locked();
        if !failed.is_empty() {
            failed.remove(address);
        }
    }

    /// Whether `address` failed recently enough to be passed over.
    pub fn avoided(&self, address: &Address) -> bool {
        let failed = self.failed.locked();
        failed
            .get(address)
            .is_some_and(|(until, _)| *until > Instant::now())
    }

    /// The open connection to `address` in the role `expect`, if there is one and no one is
    /// (re)connecting it. Never waits.
    pub fn ready(&self, address: &Address, expect: Expect) -> Option<Connection> {
        let slot = self.slots.locked().get(address)?[role(expect)].clone();
        let guard = slot.try_lock().ok()?;
        guard.as_ref().filter(|c| !c.is_closed()).cloned()
    }

    /// The open connection to `address`, or a new one. Concurrent callers share one connect.
    ///
    /// Every error here means nothing was sent to the node: the caller may retry elsewhere.
    pub async fn get(
        &self,
        address: &Address,
        expect: Expect,
        deadline: Instant,
    ) -> Result<Connection> {
        let slot = {
            let mut slots = self.slots.locked();
            slots.entry(address.clone()).or_default()[role(expect)].clone()
        };
        let mut guard = tokio::time::timeout_at(deadline, slot.lock())
            .await
            .map_err(|_| {
                Error::timeout(format!("connecting to {address} did not finish in time"))
            })?;
        if let Some(conn) = guard.as_ref().filter(|c| !c.is_closed()) {
            return Ok(conn.clone());
        }
        let conn = self.open(address, expect, deadline).await?;
        *guard = Some(conn.clone());
        Ok(conn)
    }

    async fn open(
        &self,
        address: &Address,
        expect: Expect,
        deadline: Instant,
    ) -> Result<Connection> {
        let left = deadline.saturating_duration_since(Instant::now());
        let options = ConnectOptions {
            connect_timeout: self
                .options
                .connect_timeout
                .min(left.max(Duration::from_millis(1))),
            ..self.options.clone()
        };
        let (conn, _) =
            tokio::time::timeout_at(deadline, node::connect(&self.resolver, address, &options))
                .await
                .map_err(|_| Error::timeout(format!("reaching {address} took too long")))??;
        node::verify_role(&conn, address, expect, options.connect_timeout).await?;
        Ok(conn)
    }

    /// A fresh connection of its own (blocking commands, transactions), verified like the shared
    /// ones; the caller closes it.
    pub async fn dedicated(
        &self,
        address: &Address,
        expect: Expect,
        deadline: Instant,
    ) -> Result<Connection> {
        self.open(address, expect, deadline).await
    }

    /// Drops the connections inherited from the parent of a fork without closing them: their
    /// sockets are the parent's too, and their tasks run only there. Later `get` calls connect
    /// anew from this process.
    pub fn forget_inherited(&self) {
        let slots: Vec<Slot> = {
            let mut slots = self.slots.locked();
            slots.drain().flat_map(|(_, s)| s).collect()
        };
        std::mem::forget(slots);
    }

    /// Closes every connection; later `get` calls open new ones.
    pub fn close_all(&self) {
        let slots: Vec<Slot> = {
            let mut slots = self.slots.locked();
            slots.drain().flat_map(|(_, s)| s).collect()
        };
        for slot in slots {
            if let Ok(guard) = slot.try_lock() {
                if let Some(conn) = guard.as_ref() {
                    conn.close();
                }
            }
        }
    }
}
