//! Routes for connections that another Redis library opens (the adapters for redis-py and
//! ioredis): the node a command of this client would use, so a foreign connection goes where the
//! core's own would, waits where the core's would wait (no primary yet, a promotion under way),
//! and can ask, before each write, whether its node is still the one to use.
//!
//! Nothing here touches the network: answers come from the monitor's published status, and
//! [`Client::route`] only waits for the next one.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::command::Kind;
use super::execute::wait_for_node;
use super::handle::Client;
use crate::config::ReadFrom;
use crate::error::Result;
use crate::types::Address;

/// What a connection opened by another library will carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Writes (and anything else that must reach the primary): the verified primary, never one
    /// that a failover is demoting.
    Primary,
    /// Reads, under the client's `read_from` rule: a replica for `replica` and
    /// `prefer-replica` (the primary when `prefer-replica` finds none), the primary for
    /// `primary`. A primary being demoted still serves reads.
    Read,
}

impl Route {
    fn kind(self) -> Kind {
        match self {
            Route::Primary => Kind::Write,
            Route::Read => Kind::Read,
        }
    }
}

impl Client {
    /// The node a connection for `route` should go to, waiting up to `timeout` for one, as a
    /// command would: while no primary is verified yet, while a promotion is under way (for
    /// [`Route::Primary`]), and while sentinels report the primary down. Fails at once on what
    /// waiting cannot fix (refused credentials, failed TLS, a closed client) and at the deadline
    /// with `timeout`, naming the last discovery error.
    pub async fn route(&self, route: Route, timeout: Duration) -> Result<Address> {
        let monitor = self.monitor()?;
        let deadline = Instant::now() + timeout;
        let attempt = wait_for_node(&self.inner, &monitor, route.kind(), 1, deadline).await?;
        Ok(attempt.address)
    }

    /// Whether a connection to `address` may still carry `route` now: for [`Route::Primary`],
    /// `address` is the verified primary and no failover is demoting it; for [`Route::Read`],
    /// it is a replica of the topology or (unless `read_from=replica`) its primary. A
    /// connection for which this turns false must not send again: the adapters close it and
    /// ask [`Client::route`] for the next node. Never waits.
    pub fn is_routable(&self, address: &Address, route: Route) -> bool {
        let Ok(monitor) = self.monitor() else {
            return false;
        };
        monitor.with_status(|status| match route {
            Route::Primary => {
                super::attempt::pick(&self.inner, status, Kind::Write).map(|(a, _)| a)
                    == Some(address.clone())
            }
            Route::Read => {
                let t = &status.topology;
                t.replicas.contains(address)
                    || (self.inner.config.read_from != ReadFrom::Replica
                        && t.primary.as_ref() == Some(address))
            }
        })
    }

    /// Whether a failover is demoting `address`, or has replaced it: a write reply read from it
    /// now may be discarded with its data set, so an adapter reports such a reply as a lost
    /// connection, never as a success (the core's own commands do the same).
    pub fn is_fenced(&self, address: &Address) -> bool {
        self.monitor()
            .is_ok_and(|monitor| monitor.fenced_since(address).is_some())
    }

    /// A counter that changes whenever the answers of [`Client::is_routable`] and
    /// [`Client::is_fenced`] may change (it is bumped after every view the monitor publishes):
    /// an adapter can keep a verdict while the counter reads the same, and ask again only when
    /// it moved. Reading it is one atomic load, with no lock and no call into the core. A child
    /// forked after this call must ask for the counter again (its client follows a monitor of
    /// its own).
    pub fn routing_epoch(&self) -> Result<Arc<AtomicU64>> {
        Ok(self.monitor()?.routing_epoch())
    }

    /// Tells the core that a foreign connection to `address` could not be opened or found the
    /// wrong role there: reads pass over it for a while, and the monitor runs a discovery round
    /// (one per round however many connections report, within its backoff).
    pub fn report_unusable(&self, address: &Address) -> Result<()> {
        let monitor = self.monitor()?;
        self.inner.nodes.mark_failed(address);
        let round = monitor.with_status(|s| s.rounds);
        monitor.report("a connection of an adapter failed", round);
        Ok(())
    }

    /// What the data path connects with: the monitor's resolver and the data nodes' connect
    /// options (timeout, TLS, credentials). For the proxy's own upstream connections.
    pub(crate) fn data_path(&self) -> Result<(crate::dns::Resolver, crate::resp::ConnectOptions)> {
        let monitor = self.monitor()?;
        Ok((monitor.resolver().clone(), monitor.data_options().clone()))
    }

    /// The server's command table, read once per client on a RESP2 connection of its own to
    /// the primary (the table's RESP3 form nests sets the decoder refuses), with the data
    /// side's credentials and TLS; cached in the client's table cache for every later caller.
    pub(crate) async fn write_table(
        &self,
        timeout: Duration,
    ) -> Result<Arc<super::durable::WriteTable>> {
        if let Some(table) = self.inner.write_tables.cached() {
            return Ok(table);
        }
        let address = self.route(Route::Primary, timeout).await?;
        let (resolver, options) = self.data_path()?;
        let options = crate::resp::ConnectOptions {
            protocol: crate::types::Protocol::Resp2,
            client_name: None,
            ..options
        };
        let (conn, _) = crate::node::connect(&resolver, &address, &options).await?;
        let table = self.inner.write_tables.get(&conn, timeout).await;
        conn.close();
        Ok(table)
    }
}
