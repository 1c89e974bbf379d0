//! What the monitor shows the handles and the data path: the status snapshot and the events, sent
//! so that a reader never sees an event before the snapshot that contains its change.

use std::sync::Arc;

use tokio::sync::{broadcast, watch};

use crate::monitor::status::{Publishing, Status};
use crate::sync::Locked;
use crate::types::{unix_ms, Event, EventKind};

/// The monitor's outbox: events wait in it until the snapshot that shows their change goes out.
pub(super) struct Publisher {
    /// The service every event is stamped with.
    service: String,
    /// The latest snapshot, read by the handles and the data path.
    status: watch::Sender<Status>,
    /// Where subscribers receive events; a send with no subscriber is not an error.
    events: broadcast::Sender<Event>,
    /// Shared with the handles: the lock new subscribers take, so a subscriber gets either an
    /// event or a snapshot that already contains it, and the count that tells cached verdicts
    /// are stale.
    publishing: Arc<Publishing>,
    /// Events whose change is not in a published snapshot yet.
    unpublished: Vec<Event>,
}

impl Publisher {
    pub(super) fn new(
        service: String,
        status: watch::Sender<Status>,
        events: broadcast::Sender<Event>,
        publishing: Arc<Publishing>,
    ) -> Publisher {
        Publisher {
            service,
            status,
            events,
            publishing,
            unpublished: Vec::new(),
        }
    }

    /// Queues an event; [`Publisher::publish`] sends it once the snapshot shows the change, so a
    /// host that reads the topology on an event never sees the state from before it.
    pub(super) fn emit(&mut self, kind: EventKind) {
        self.unpublished.push(Event {
            kind,
            service: self.service.clone(),
            at: unix_ms(),
        });
    }

    /// Sends `status`, then the events queued before it.
    pub(super) fn publish(&mut self, status: Status) {
        // Snapshot and events go out under the lock that new subscribers take, so a subscriber
        // either gets these events or a snapshot that already contains them, never neither.
        let _guard = self.publishing.lock.locked();
        self.status.send_replace(status);
        // After the status: whoever sees the new count reads the new status.
        self.publishing
            .epoch
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        for event in self.unpublished.drain(..) {
            let _ = self.events.send(event);
        }
    }
}
