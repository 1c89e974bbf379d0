//! Events for the foreign side: a callback interface the core calls on a core thread (the
//! foreign implementation must only hand the event to its host's scheduler), and the
//! subscription that removes it. "No call after removal or close" is the host layer's guarantee.

use std::sync::Arc;

use sentinel_recovery::host::EventRegistration;

use crate::model::Event;

/// Receives every event of a client, in order, one call at a time, on a core thread.
#[uniffi::export(with_foreign)]
pub trait EventListener: Send + Sync {
    /// One event. Must return quickly: copy it and hand it to the host's scheduler.
    fn on_event(&self, event: Event);
}

/// An installed [`EventListener`]; it stays installed until removed or the client is closed.
#[derive(uniffi::Object)]
pub struct Subscription {
    inner: EventRegistration,
}

impl Subscription {
    pub(crate) fn new(inner: EventRegistration) -> Arc<Subscription> {
        Arc::new(Subscription { inner })
    }
}

#[uniffi::export]
impl Subscription {
    /// Removes the listener: once this returns it is not running (unless called from inside
    /// it) and is never called again. Blocks the calling thread while a call of the listener
    /// finishes; hosts with an interpreter lock use [`Subscription::remove_async`].
    pub fn remove(&self) {
        self.inner.remove();
    }

    /// [`Subscription::remove`] without blocking the caller: completes once the listener is
    /// removed. The wait happens on a short-lived thread of its own, so a host whose listener
    /// needs a lock the caller holds (Ruby's GVL) can wait without holding it.
    pub async fn remove_async(&self) {
        let (sender, receiver) = futures_channel::oneshot::channel();
        let inner = self.inner.clone();
        let spawned = std::thread::Builder::new()
            .name("sr-uniffi-remove".into())
            .spawn(move || {
                inner.remove();
                let _ = sender.send(());
            });
        match spawned {
            Ok(_) => {
                let _ = receiver.await;
            }
            // No thread to be had: remove here, blocking, rather than not at all.
            Err(_) => self.inner.remove(),
        }
    }

    /// Whether the listener was removed (by [`Subscription::remove`] or by closing the client).
    pub fn is_removed(&self) -> bool {
        self.inner.is_removed()
    }
}
