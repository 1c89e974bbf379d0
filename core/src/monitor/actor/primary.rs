//! The primary the monitor follows, its connection and its replicas, and the events their changes
//! give.

use crate::resp::Connection;
use crate::types::Address;
use crate::types::EventKind;

use super::publisher::Publisher;

/// What the monitor knows of the service's primary and replicas.
pub(super) struct Primary {
    /// Where writes go: a node that answered ROLE `master`, found by a round or adopted on a
    /// verified announcement. `None` until the first round succeeds.
    pub(super) address: Option<Address>,
    /// The connection on which `address` answered master; rounds verify on it, and its closing
    /// is how a dead primary is noticed between rounds.
    conn: Option<Connection>,
    /// The primary whose connection closed, until a round or a switch restores one: a restored
    /// connection is an event only after a lost one.
    lost: Option<Address>,
    /// Replicas for reads: a sorted set of nodes reported healthy that answer from here.
    pub(super) replicas: Vec<Address>,
    /// The sentinels' config epoch for the primary; replaced primaries are retired with it.
    pub(super) epoch: u64,
    /// The last round found a primary, or a switch was verified since; false while retrying.
    pub(super) healthy: bool,
    /// False after switching on a verified announcement, until a round confirms the primary
    /// with the sentinels' epoch, replicas and peers.
    pub(super) confirmed: bool,
    /// Switches adopted on a verified announcement, to tell whether one happened meanwhile.
    pub(super) switches: u64,
}

impl Primary {
    pub(super) fn new() -> Primary {
        Primary {
            address: None,
            conn: None,
            lost: None,
            replicas: Vec::new(),
            epoch: 0,
            healthy: false,
            confirmed: true,
            switches: 0,
        }
    }

    pub(super) fn is(&self, address: &Address) -> bool {
        self.address.as_ref() == Some(address)
    }

    /// The open connection to the primary, if any.
    pub(super) fn conn(&self) -> Option<Connection> {
        self.conn.clone()
    }

    /// Makes `new` the primary with `conn` (closing the previous connection); returns the old
    /// primary.
    pub(super) fn replace(&mut self, new: Address, conn: Option<Connection>) -> Option<Address> {
        let old = self.address.replace(new);
        if let Some(previous) = std::mem::replace(&mut self.conn, conn) {
            previous.close();
        }
        old
    }

    /// A round found the primary (already in `address`) with `conn` and the sentinels' `epoch`;
    /// `confirmed` when the sentinels' replicas or peers came with it.
    pub(super) fn found(
        &mut self,
        conn: Connection,
        epoch: u64,
        confirmed: bool,
        publisher: &mut Publisher,
    ) {
        self.conn = Some(conn);
        self.restored(publisher);
        self.confirmed = confirmed;
        self.epoch = epoch;
        self.healthy = true;
    }

    /// A round found no primary: the monitor retries on its schedule.
    pub(super) fn not_found(&mut self) {
        self.healthy = false;
    }

    /// A switch to the primary (already in `address`) was verified with ROLE.
    pub(super) fn switched(&mut self, publisher: &mut Publisher) {
        self.restored(publisher);
        self.healthy = true;
        self.confirmed = false;
        self.switches += 1;
        self.drop_primary_from_replicas(publisher);
    }

    fn restored(&mut self, publisher: &mut Publisher) {
        if self.lost.take().is_some() {
            if let Some(address) = self.address.clone() {
                publisher.emit(EventKind::ConnectionRestored { address });
            }
        }
    }

    /// The connection to the primary closed; true (and the event queued) when there was one.
    pub(super) fn connection_lost(&mut self, publisher: &mut Publisher) -> bool {
        self.conn = None;
        let Some(address) = self.address.clone() else {
            return false;
        };
        tracing::warn!(primary = %address, "connection to primary lost");
        self.lost = Some(address.clone());
        publisher.emit(EventKind::ConnectionLost { address });
        true
    }

    /// Lists `next` as the replicas; true (and the event queued) when that changed them.
    pub(super) fn set_replicas(&mut self, next: Vec<Address>, publisher: &mut Publisher) -> bool {
        if next == self.replicas {
            return false;
        }
        self.replicas = next;
        tracing::info!(replicas = ?self.replicas.iter().map(|a| a.to_string()).collect::<Vec<_>>(), "replicas changed");
        publisher.emit(EventKind::ReplicasChanged {
            replicas: self.replicas.clone(),
        });
        true
    }

    /// A replica that became the primary is no longer listed as a replica.
    pub(super) fn drop_primary_from_replicas(&mut self, publisher: &mut Publisher) {
        let Some(primary) = &self.address else { return };
        if self.replicas.contains(primary) {
            self.replicas.retain(|a| a != primary);
            publisher.emit(EventKind::ReplicasChanged {
                replicas: self.replicas.clone(),
            });
        }
    }

    /// Closes the connection; the monitor is stopping.
    pub(super) fn close(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.close();
        }
    }
}
