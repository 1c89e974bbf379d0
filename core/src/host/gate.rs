//! The gate in front of a host callback that the core calls many times (event handlers, message
//! handlers): calls run one at a time, and once [`Gate::close`] has returned the callback is not
//! called again, not even for something already received.

use std::cell::Cell;
use std::sync::{Arc, Mutex, TryLockError};

use super::inflight::Registry;
use crate::sync::Locked;

thread_local! {
    /// The gate whose callback this thread is calling (its address), if any.
    static CALLING: Cell<usize> = const { Cell::new(0) };
    /// Set when that callback closed its own gate: the gate is emptied once the call returns.
    static CLOSED_DURING_CALL: Cell<bool> = const { Cell::new(false) };
}

/// A host callback behind a gate. Clones share the callback.
pub(crate) struct Gate<H: ?Sized> {
    slot: Arc<Mutex<Option<Box<H>>>>,
}

impl<H: ?Sized> Clone for Gate<H> {
    fn clone(&self) -> Gate<H> {
        Gate {
            slot: self.slot.clone(),
        }
    }
}

impl<H: ?Sized> Gate<H> {
    /// A gate in front of `handler`.
    pub(crate) fn new(handler: Box<H>) -> Gate<H> {
        Gate {
            slot: Arc::new(Mutex::new(Some(handler))),
        }
    }

    /// Calls the callback through `call` (counted by `registry`, panics caught), unless the gate
    /// is closed; `false` then.
    pub(crate) fn call(&self, registry: &Registry, call: impl FnOnce(&mut H)) -> bool {
        let mut guard = self.slot.locked();
        let Some(handler) = guard.as_mut() else {
            return false;
        };
        let previous = CALLING.with(|c| c.replace(self.id()));
        registry.call(|| call(handler));
        CALLING.with(|c| c.set(previous));
        if CLOSED_DURING_CALL.with(|r| r.replace(false)) {
            guard.take();
        }
        true
    }

    /// Closes the gate: when this returns the callback is not running (unless this is called
    /// from inside it: the current call then finishes after this returns) and is never called
    /// again.
    pub(crate) fn close(&self) {
        match self.slot.try_lock() {
            Ok(mut handler) => {
                handler.take();
            }
            Err(TryLockError::Poisoned(p)) => {
                p.into_inner().take();
            }
            // Held by a call in progress: by this thread (closed from inside the callback) it is
            // emptied when the call returns; by another, wait for that call to finish.
            Err(TryLockError::WouldBlock) => {
                if CALLING.with(|c| c.get()) == self.id() {
                    CLOSED_DURING_CALL.with(|r| r.set(true));
                } else {
                    self.slot.locked().take();
                }
            }
        }
    }

    /// Returns once a call that is running on another thread has finished (at once from inside
    /// the callback itself).
    pub(crate) fn barrier(&self) {
        if CALLING.with(|c| c.get()) != self.id() {
            drop(self.slot.locked());
        }
    }

    /// Whether the gate was closed (a call in progress may still be finishing).
    pub(crate) fn is_closed(&self) -> bool {
        matches!(self.slot.try_lock(), Ok(h) if h.is_none())
    }

    fn id(&self) -> usize {
        Arc::as_ptr(&self.slot) as *const () as usize
    }
}
