//! The handles and views that a completion may hand to the host through a mailbox delivery as
//! well as through a callback: the subscription (`sr_subscription_t`), the transaction
//! (`sr_transaction_t`) and the message view (`sr_message_t`). They sit below both `mailbox`,
//! whose `sr_delivery_t` carries them, and `pubsub` and `transaction`, whose functions take them.

use std::sync::atomic::AtomicBool;

use sr::host::{HostTransaction, Subscriber};
use sr::Message;

use crate::ffi::{Castable, OwnedBox, SharedArc};

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

/// One message, borrowed for the duration of the message callback only (copy what you need).
/// The byte strings are not NUL-terminated.
#[repr(C)]
pub struct sr_message_t {
    /// The channel it was published to.
    pub channel: *const u8,
    /// Length of `channel` in bytes.
    pub channel_len: usize,
    /// The pattern it matched (a PSUBSCRIBE subscription), or NULL for a channel subscription.
    pub pattern: *const u8,
    /// Length of `pattern` in bytes (0 when NULL).
    pub pattern_len: usize,
    /// The payload, as published.
    pub payload: *const u8,
    /// Length of `payload` in bytes.
    pub payload_len: usize,
}

/// A message as C sees it, borrowing from `m`.
pub(crate) fn message_view(m: &Message) -> sr_message_t {
    let (pattern, pattern_len) = match &m.pattern {
        Some(p) => (p.as_ptr(), p.len()),
        None => (std::ptr::null(), 0),
    };
    sr_message_t {
        channel: m.channel.as_ptr(),
        channel_len: m.channel.len(),
        pattern,
        pattern_len,
        payload: m.payload.as_ptr(),
        payload_len: m.payload.len(),
    }
}

/// A transaction on a dedicated connection to the primary it began on.
///
/// Opaque, owned by the caller from the sr_transaction_cb or the mailbox delivery that handed it
/// over (or from sr_client_transaction_begin_blocking()): free it with
/// sr_transaction_free() (which discards it if EXEC has not run). Use it from one thread at a
/// time or from callbacks; steps run in the order they were started. After
/// sr_transaction_exec(), further steps fail with SR_ERR_CONFIG ("the transaction has ended").
pub struct sr_transaction_t {
    _private: [u8; 0],
}

impl Castable for sr_transaction_t {
    type Ownership = OwnedBox;
    type RustType = HostTransaction;
}
