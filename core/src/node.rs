//! Reaching a node by the address it was configured or reported with: resolve it without
//! blocking, connect (TLS names checked against that address's host), and check its role.
//!
//! Discovery, the monitor's replica probes, event subscriptions and the data path all reach nodes
//! this one way.

use std::net::SocketAddr;
use std::time::Duration;

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

/// Resolves `address` and opens a connection to its first reachable IP; returns the resolution
/// too, for the sentinel list's bookkeeping.
pub async fn connect(
    resolver: &Resolver,
    address: &Address,
    options: &ConnectOptions,
) -> Result<(Connection, Vec<SocketAddr>)> {
    let resolved = resolver.resolve(&address.host, address.port).await?;
    let mut last = Error::new(
        ErrorCode::ConnectionLost,
        format!("{address} resolved to no address"),
    );
    for addr in &resolved {
        // Named: with TLS the certificate is checked against the host as configured or as the
        // sentinel reported it (a hostname under announce-hostnames), not the resolved IP.
        match Connection::connect_named(*addr, &address.host, options).await {
            Ok(conn) => return Ok((conn, resolved)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Checks with ROLE that `conn` reaches a node in the expected role; closes it otherwise.
///
/// A node demoted (or not yet promoted) behind the sentinels' back, or named by a stale sentinel,
/// must not be used. A user that ACLs forbid ROLE (NOPERM) is trusted on the sentinels' word, as
/// StackExchange.Redis does since 2.13.17: there is nothing better to check with.
pub async fn verify_role(
    conn: &Connection,
    address: &Address,
    expect: Expect,
    timeout: Duration,
) -> Result<()> {
    let role = conn
        .request_timeout(&["ROLE"], timeout)
        .await
        .and_then(replies::role);
    match (&role, expect) {
        (Ok(Role::Master), Expect::Primary) | (Ok(Role::Replica { .. }), Expect::Replica) => {
            return Ok(())
        }
        (Err(e), _) if e.server_code() == Some("NOPERM") => {
            tracing::warn!(node = %address, "ROLE refused by ACL; role not verified");
            return Ok(());
        }
        _ => {}
    }
    conn.close();
    match role {
        Err(e) => Err(e.context(format!("ROLE on {address}"))),
        Ok(role) => Err(Error::new(
            ErrorCode::NoHealthyPrimary,
            format!(
                "{address} was expected as {expect:?} but ROLE says {role:?} (stale sentinel, or \
                 changed behind the sentinels' back)"
            ),
        )),
    }
}
