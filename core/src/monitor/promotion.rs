//! Watching a replica become primary: the sentinels name it (`+failover-state-send-slaveof-noone`
//! when the leader starts promoting it, `+switch-master` once one of them has switched), and the
//! monitor switches the moment the node itself answers ROLE `master`, without waiting for a
//! discovery round that would ask sentinels still reporting the old primary.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::node;
use crate::node::parse_role;
use crate::resp::Connection;
use crate::sentinel::discovery::RoundSettings;
use crate::types::Address;
use crate::types::Role;

/// How often the named replica is asked for its ROLE while it is being promoted.
const POLL: Duration = Duration::from_millis(20);

/// What announced the node being watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Announced {
    /// The failover leader started promoting it: writes are fenced until it answers.
    Promotion,
    /// A sentinel published `+switch-master` naming it.
    Switch,
}

/// The end of one watch.
pub(super) struct Promoted {
    /// The node watched.
    pub address: Address,
    /// What announced it.
    pub announced: Announced,
    /// A connection on which ROLE answered `master`, or why that did not happen in time.
    pub outcome: Result<Connection>,
}

/// Polls `address` with ROLE until it answers `master` or `until` passes, then reports once on
/// `to_monitor` (nothing when cancelled).
pub(super) async fn watch(
    settings: RoundSettings,
    address: Address,
    announced: Announced,
    until: Instant,
    cancel: CancellationToken,
    to_monitor: mpsc::UnboundedSender<Promoted>,
) {
    let outcome = tokio::select! {
        _ = cancel.cancelled() => return,
        outcome = tokio::time::timeout_at(until, until_master(&settings, &address)) => outcome,
    };
    let outcome = outcome.unwrap_or_else(|_| {
        Err(Error::timeout(format!(
            "{address} did not report role master in time"
        )))
    });
    let _ = to_monitor.send(Promoted {
        address,
        announced,
        outcome,
    });
}

async fn until_master(settings: &RoundSettings, address: &Address) -> Result<Connection> {
    let options = &settings.data_connect;
    let mut conn: Option<Connection> = None;
    loop {
        let live = match conn.take().filter(|c| !c.is_closed()) {
            Some(c) => Some(c),
            None => node::connect(&settings.resolver, address, options)
                .await
                .map(|(c, _)| c)
                .map_err(|e| tracing::debug!(node = %address, error = %e, "promotion watch: not reachable yet"))
                .ok(),
        };
        if let Some(c) = live {
            let role = c
                .request_timeout(&["ROLE"], options.connect_timeout)
                .await
                .and_then(parse_role);
            match role {
                Ok(Role::Master) => return Ok(c),
                // ACLs that forbid ROLE: the sentinels' word is all there is (as in discovery).
                Err(e) if e.server_code() == Some("NOPERM") => return Ok(c),
                Ok(_) => conn = Some(c),
                Err(e) => {
                    tracing::debug!(node = %address, error = %e, "promotion watch: ROLE failed");
                    c.close();
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}
