//! What the monitor task publishes for the handles and the data path to read: the current
//! [`Status`] and the primaries writes are fenced from.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use crate::error::Error;
use crate::types::Address;
use crate::types::Topology;

/// What the monitor task publishes after every round.
#[derive(Clone, Debug)]
pub(crate) struct Status {
    /// The current view.
    pub topology: Arc<Topology>,
    /// Why the last round failed, if it did.
    pub last_error: Option<Error>,
    /// Rounds finished so far.
    pub rounds: u64,
    /// Primaries that writes must not go to: the one being demoted by a failover in progress,
    /// and former ones a failover replaced (for a while, as they may still accept writes that
    /// the new primary will never have).
    pub fenced: Arc<Vec<Fenced>>,
    /// With `sentinel_majority_ms`: fewer than a majority of the sentinels answered within the
    /// bound, so writes wait.
    pub majority_lost: bool,
}

/// What the monitor task shares with readers about publishing a view: the lock that new
/// subscribers take, and a counter bumped after every publish.
#[derive(Default)]
pub(crate) struct Publishing {
    /// Held while a snapshot and its events go out (see the actor's `publish`).
    pub lock: Mutex<()>,
    /// Bumped after each published status: a verdict computed from the status (whether a node
    /// is routable or fenced) holds while this is unchanged, so a host can cache it and read
    /// one integer instead of asking again for every command.
    pub epoch: Arc<AtomicU64>,
}

/// A primary that writes must not go to, and since when.
#[derive(Clone, Debug)]
pub(crate) struct Fenced {
    /// The demoted (or being demoted) primary.
    pub address: Address,
    /// When the monitor first learnt of its demotion: replies to writes that it sends after
    /// this (plus a grace for those already in flight) may be discarded with its data set.
    pub since: tokio::time::Instant,
}

impl Status {
    /// Since when `address` has been fenced, if it is.
    pub fn fenced_since(&self, address: &Address) -> Option<tokio::time::Instant> {
        self.fenced
            .iter()
            .find(|f| f.address == *address)
            .map(|f| f.since)
    }
}
