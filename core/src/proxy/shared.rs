//! What every session of one proxy shares: the client and its routing signals, the resolved
//! limits, the upstream's connect options, the command table and the counters.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::stats::Counters;
use crate::client::{Client, Route, WriteTable};
use crate::dns::Resolver;
use crate::tls::TlsOptions;
use crate::types::Credentials;

/// What every session of one proxy shares.
pub(super) struct ProxyState {
    pub(super) client: Client,
    pub(super) options: Limits,
    pub(super) counters: Arc<Counters>,
    /// Bumped at every event of the client: sessions waiting for a node look again.
    pub(super) changes: tokio::sync::watch::Sender<u64>,
    /// The client's routing epoch: a session's verdict on its node holds while it reads the same.
    pub(super) epoch: Arc<AtomicU64>,
    pub(super) resolver: Resolver,
    pub(super) tls: Option<TlsOptions>,
    pub(super) connect_timeout: Duration,
    pub(super) lent: Option<Credentials>,
    /// `wait_replicas` and `wait_timeout_ms`, when on.
    pub(super) durability: Option<(u32, Duration)>,
    pub(super) table: OnceLock<Arc<WriteTable>>,
    /// Stop reading requests; finish what is in flight.
    pub(super) closing: CancellationToken,
}

/// The options a session reads, resolved.
#[derive(Clone, Debug)]
pub(super) struct Limits {
    pub(super) hold: Duration,
    pub(super) max_clients: usize,
    pub(super) idle_timeout: Option<Duration>,
    pub(super) max_request_bytes: usize,
    pub(super) route: Route,
}

impl ProxyState {
    /// The server's command table, or until it is read the hand list of reads (anything else
    /// counts as a write: a needless `UNCERTAIN` costs less than a lost write).
    pub(super) fn write_table(&self) -> Arc<WriteTable> {
        self.table
            .get()
            .cloned()
            .unwrap_or_else(|| Arc::new(WriteTable::default()))
    }
}
