//! Event handlers of a handle: each fed by a task of its own, in order, one call at a time; after
//! [`EventRegistration::remove`] has returned its handler is not called again.

use std::sync::{Arc, Mutex};

use super::gate::Gate;
use super::inflight::Registry;
use crate::client::EventStream;
use crate::monitor::Event;
use crate::sync::Locked;

/// A function the core calls with each event, on a core thread. It must only copy the event and
/// hand it to its host's scheduler.
pub type EventHandler = Box<dyn FnMut(&Event) + Send + 'static>;

/// One installed handler. Dropping it does not remove the handler; [`EventRegistration::remove`]
/// (or closing the handle) does.
#[derive(Clone)]
pub struct EventRegistration {
    gate: Gate<dyn FnMut(&Event) + Send + 'static>,
    task: Arc<Mutex<Option<tokio::task::AbortHandle>>>,
}

impl EventRegistration {
    /// Starts feeding `events` to `handler`.
    pub(super) fn start(
        registry: Arc<Registry>,
        mut events: EventStream,
        handler: EventHandler,
    ) -> crate::Result<EventRegistration> {
        let gate = Gate::new(handler);
        let feeding = gate.clone();
        let task = crate::runtime::handle()?.spawn(async move {
            while let Some(event) = events.next().await {
                // Closed by `remove`: stop before calling, even for an event already received.
                if !feeding.call(&registry, |handler| handler(&event)) {
                    break;
                }
            }
        });
        Ok(EventRegistration {
            gate,
            task: Arc::new(Mutex::new(Some(task.abort_handle()))),
        })
    }

    /// Removes the handler: when this returns it is not running (unless this is called from
    /// inside it, when the current call finishes after this returns) and is never called again.
    pub fn remove(&self) {
        if let Some(task) = self.task.locked().take() {
            task.abort();
        }
        self.gate.close();
    }

    /// Whether the handler was removed.
    pub fn is_removed(&self) -> bool {
        self.gate.is_closed()
    }
}
