//! One multiplexed connection per data node, opened on demand, verified with ROLE, and opened
//! again (with the whole handshake: credentials, db, client name, protocol) after any loss.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::Address;
use crate::dns::Resolver;
use crate::error::{Error, ErrorCode, Result};
use crate::resp::{ConnectOptions, Connection};
use crate::sentinel::replies::{self, Role};

/// The role a node must have for a connection to it to be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Expect {
    /// ROLE must say master.
    Primary,
    /// ROLE must say slave.
    Replica,
}

type Slot = Arc<tokio::sync::Mutex<Option<Connection>>>;

/// The data connections of one client.
pub struct Nodes {
    options: ConnectOptions,
    resolver: Resolver,
    slots: Mutex<HashMap<(Address, Expect), Slot>>,
}

impl Nodes {
    /// An empty pool that connects with `options` (data-node credentials, db, name, protocol).
    pub fn new(options: ConnectOptions, resolver: Resolver) -> Nodes {
        Nodes {
            options,
            resolver,
            slots: Mutex::new(HashMap::new()),
        }
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
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.entry((address.clone(), expect)).or_default().clone()
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
        let addrs =
            tokio::time::timeout_at(deadline, self.resolver.resolve(&address.host, address.port))
                .await
                .map_err(|_| {
                    Error::timeout(format!("resolving {} took too long", address.host))
                })??;
        let mut last = Error::new(
            ErrorCode::ConnectionLost,
            format!("{address} resolved to no address"),
        );
        for addr in addrs {
            match Connection::connect_named(addr, &address.host, &options).await {
                Ok(conn) => {
                    verify(&conn, address, expect, options.connect_timeout).await?;
                    return Ok(conn);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
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

    /// Closes every connection; later `get` calls open new ones.
    pub fn close_all(&self) {
        let slots: Vec<Slot> = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.drain().map(|(_, s)| s).collect()
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

/// The connection must reach a node in the role the topology says, or it is not used: a node
/// that was demoted (or not yet promoted) behind the sentinels' back would otherwise take writes
/// it refuses or reads it should not serve.
async fn verify(
    conn: &Connection,
    address: &Address,
    expect: Expect,
    timeout: Duration,
) -> Result<()> {
    let role = conn
        .request_timeout(&["ROLE"], timeout)
        .await
        .and_then(replies::role);
    let ok = match (&role, expect) {
        (Ok(Role::Master), Expect::Primary) => true,
        (Ok(Role::Replica { .. }), Expect::Replica) => true,
        (Err(e), _) if e.server_code() == Some("NOPERM") => {
            // ROLE denied by ACL: trust the sentinels' verified view rather than fail every command.
            tracing::debug!(node = %address, error = %e, "ROLE refused; using the node as reported");
            true
        }
        _ => false,
    };
    if ok {
        return Ok(());
    }
    conn.close();
    match role {
        Err(e) => Err(e.context(format!("ROLE on {address}"))),
        Ok(role) => Err(Error::new(
            ErrorCode::NoHealthyPrimary,
            format!("{address} is {role:?}, not the expected {expect:?}"),
        )),
    }
}
