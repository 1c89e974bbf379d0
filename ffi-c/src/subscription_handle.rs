//! The subscription handle (`sr_subscription_t`), which a completion hands to the host through a
//! callback or a mailbox delivery; below both `mailbox` and `pubsub`, which take it.

use std::sync::atomic::AtomicBool;

use sr::host::Subscriber;

use crate::ffi::{Castable, SharedArc};

/// A pub/sub subscription of a client, on a connection of its own that follows failovers.
///
/// Opaque. Created by sr_client_subscribe() or sr_client_subscribe_blocking(), which give the
/// caller one reference, or handed over by the completion of sr_client_subscribe_into();
/// released by sr_subscription_free(). After a lost connection or a
/// failover it re-subscribes every channel and pattern on the new node; the client's event
/// callback receives SR_EVENT_SUBSCRIPTION_LOST, then SR_EVENT_SUBSCRIPTION_RESTORED with
/// `gap_ms`. Redis pub/sub is at-most-once: messages published during the gap are not received.
/// All functions taking a subscription are thread-safe.
pub struct sr_subscription_t {
    _private: [u8; 0],
}

/// What an `sr_subscription_t *` points to.
pub(crate) struct Subscription {
    pub(crate) subscriber: Subscriber,
    /// Set by the first sr_subscription_close().
    pub(crate) closing: AtomicBool,
}

impl Castable for sr_subscription_t {
    type Ownership = SharedArc;
    type RustType = Subscription;
}

impl Subscription {
    /// Wraps a new subscriber for C.
    pub(crate) fn new(subscriber: Subscriber) -> Subscription {
        Subscription {
            subscriber,
            closing: AtomicBool::new(false),
        }
    }
}

impl Drop for Subscription {
    /// A subscription nobody holds any more (freed, or a completion of
    /// sr_client_subscribe_into() discarded by a closed mailbox) is closed.
    fn drop(&mut self) {
        self.subscriber.close();
    }
}
