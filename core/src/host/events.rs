//! Event handlers of a handle: each fed by a task of its own, in order, one call at a time; after
//! [`EventSubscription::remove`] has returned its handler is not called again.

use std::cell::Cell;
use std::sync::{Arc, Mutex, TryLockError};

use super::inflight::Registry;
use crate::client::EventStream;
use crate::monitor::Event;
use crate::sync::Locked;

/// A function the core calls with each event, on a core thread. It must only copy the event and
/// hand it to its host's scheduler.
pub type EventHandler = Box<dyn FnMut(&Event) + Send + 'static>;

type Slot = Arc<Mutex<Option<EventHandler>>>;

thread_local! {
    /// The slot whose handler this thread is calling (its address), if any.
    static CALLING: Cell<usize> = const { Cell::new(0) };
    /// Set when that handler removed itself: the slot is emptied once the call returns.
    static REMOVED_DURING_CALL: Cell<bool> = const { Cell::new(false) };
}

/// One installed handler. Dropping it does not remove the handler; [`EventSubscription::remove`]
/// (or closing the handle) does.
#[derive(Clone)]
pub struct EventSubscription {
    slot: Slot,
    task: Arc<Mutex<Option<tokio::task::AbortHandle>>>,
}

impl EventSubscription {
    /// Starts feeding `events` to `handler`.
    pub(super) fn start(
        registry: Arc<Registry>,
        mut events: EventStream,
        handler: EventHandler,
    ) -> crate::Result<EventSubscription> {
        let slot: Slot = Arc::new(Mutex::new(Some(handler)));
        let feeding = slot.clone();
        let task = crate::runtime::handle()?.spawn(async move {
            while let Some(event) = events.next().await {
                let mut guard = feeding.locked();
                // Emptied by `remove`: stop before calling, even for an event already received.
                let Some(handler) = guard.as_mut() else { break };
                CALLING.with(|c| c.set(Arc::as_ptr(&feeding) as usize));
                registry.call(|| handler(&event));
                CALLING.with(|c| c.set(0));
                if REMOVED_DURING_CALL.with(|r| r.replace(false)) {
                    guard.take();
                }
                drop(guard);
            }
        });
        Ok(EventSubscription {
            slot,
            task: Arc::new(Mutex::new(Some(task.abort_handle()))),
        })
    }

    /// Removes the handler: when this returns it is not running (unless this is called from
    /// inside it, when the current call finishes after this returns) and is never called again.
    pub fn remove(&self) {
        if let Some(task) = self.task.locked().take() {
            task.abort();
        }
        match self.slot.try_lock() {
            Ok(mut handler) => {
                handler.take();
            }
            Err(TryLockError::Poisoned(p)) => {
                p.into_inner().take();
            }
            // Held by a call in progress: by this thread (removal from inside the handler) it is
            // emptied when the call returns; by another, wait for that call to finish.
            Err(TryLockError::WouldBlock) => {
                let own = CALLING.with(|c| c.get()) == Arc::as_ptr(&self.slot) as usize;
                if own {
                    REMOVED_DURING_CALL.with(|r| r.set(true));
                } else {
                    self.slot.locked().take();
                }
            }
        }
    }

    /// Whether the handler was removed.
    pub fn is_removed(&self) -> bool {
        matches!(self.slot.try_lock(), Ok(h) if h.is_none())
    }
}
