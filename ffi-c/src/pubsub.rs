//! Pub/sub for C: a subscription handle whose messages reach a callback or, read one at a time,
//! a host mailbox, over the host layer's `Subscriber` (which guarantees in-order calls, one at a
//! time, and none after close); this file converts C arguments and messages, nothing more.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use sr::host::Subscriber;
use sr::Message;

use crate::args::{arguments, names, out_param};
use crate::client::{acquire, client_into, required, sr_client_t};
use crate::codes::SR_ERR_CLOSED;
use crate::error::sr_error_t;
use crate::ffi::{
    blocking, clone_arc, free_arc, guard, start, to_arc_mut_ptr, ErrorObject, UserData, SR_OK,
};
use crate::mailbox::{acquire_mailbox, done_into, message_into, sr_mailbox_t, subscribed_into};
use crate::message_view::{message_view, sr_message_t};
use crate::operation::{sr_call_options_t, sr_operation_t};
use crate::subscription_handle::{sr_subscription_t, Subscription};

/// Message callback: called with each message of the subscription, in the order the node sent
/// them, on a core thread, one call at a time. Copy what you need and return quickly; do not
/// block and do not unwind. It may call sr_subscription_close() and sr_subscription_free() on its
/// own subscription.
pub type sr_message_cb =
    Option<unsafe extern "C" fn(user_data: *mut c_void, message: *const sr_message_t)>;

/// Completion of sr_client_subscribe(): called exactly once, on a core thread. Either
/// `subscription` is non-NULL (an owned handle: free it with sr_subscription_free()) and `error`
/// NULL, or `subscription` is NULL and `error` (borrowed for the call) says why.
pub type sr_subscribe_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        subscription: *mut sr_subscription_t,
        error: *const sr_error_t,
    ),
>;

/// Completion of sr_subscription_change() and sr_proxy_close(): called exactly once, on a core
/// thread, with NULL on success or the error (borrowed for the call).
pub type sr_done_cb =
    Option<unsafe extern "C" fn(user_data: *mut c_void, error: *const sr_error_t)>;

/// sr_subscription_change(): add channels (`SUBSCRIBE`).
pub const SR_SUBSCRIBE: c_int = 1;
/// sr_subscription_change(): add patterns (`PSUBSCRIBE`).
pub const SR_PSUBSCRIBE: c_int = 2;
/// sr_subscription_change(): remove channels (`UNSUBSCRIBE`).
pub const SR_UNSUBSCRIBE: c_int = 3;
/// sr_subscription_change(): remove patterns (`PUNSUBSCRIBE`).
pub const SR_PUNSUBSCRIBE: c_int = 4;

/// The message handler that forwards to a C callback.
fn forward(
    cb: unsafe extern "C" fn(*mut c_void, *const sr_message_t),
    user_data: UserData,
) -> sr::host::MessageHandler {
    Box::new(move |m: &Message| {
        let view = message_view(m);
        // SAFETY: the host promised a valid callback; the message lives until it returns.
        unsafe { cb(user_data.get(), &view) };
    })
}

/// Wraps a new subscriber for C, with its message callback installed.
fn into_c(
    subscriber: Subscriber,
    cb: unsafe extern "C" fn(*mut c_void, *const sr_message_t),
    user_data: UserData,
) -> sr::Result<*mut sr_subscription_t> {
    if let Err(e) = subscriber.on_message(forward(cb, user_data)) {
        subscriber.close();
        return Err(e);
    }
    Ok(to_arc_mut_ptr::<sr_subscription_t>(Subscription::new(
        subscriber,
    )))
}

/// The buffer a subscribe call asks for (0: the default).
fn buffer_of(buffer: usize) -> Option<usize> {
    (buffer > 0).then_some(buffer)
}

/// Subscribes to `channels` and `patterns` (at least one name in all) on a connection of the
/// client's own and returns at once; `done` is called once, on a core thread, when the node
/// confirmed them (within the client's `command_timeout_ms`) or with the error. From then on
/// `on_message` gets every message (it may run before `done`).
///
/// Each list is `*_len` names, each with its length in `*_lens` (or NUL-terminated when `*_lens`
/// is NULL); a list may be empty (NULL, 0). `buffer` is how many messages may wait for
/// `on_message` (0: the default, 4096); beyond that the newest are dropped and counted
/// (sr_subscription_dropped()).
///
/// Returns SR_OK when `done` will be called; otherwise it is never called:
/// SR_ERR_INVALID_ARGUMENT (NULL client or callback, a NULL name), SR_ERR_CLOSED.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; the lists are valid as described;
/// `message_data` stays valid until the subscription is closed; `done_data` until `done` runs.
#[no_mangle]
pub unsafe extern "C" fn sr_client_subscribe(
    client: *mut sr_client_t,
    channels_len: usize,
    channels: *const *const c_char,
    channels_lens: *const usize,
    patterns_len: usize,
    patterns: *const *const c_char,
    patterns_lens: *const usize,
    buffer: usize,
    on_message: sr_message_cb,
    message_data: *mut c_void,
    done: sr_subscribe_cb,
    done_data: *mut c_void,
) -> c_int {
    start(|| {
        let h = acquire(client)?;
        let on_message = required(on_message, "the message callback")?;
        let done = required(done, "the done callback")?;
        let channels = names(channels_len, channels, channels_lens)?;
        let patterns = names(patterns_len, patterns, patterns_lens)?;
        let (message_data, done_data) = (UserData::new(message_data), UserData::new(done_data));
        h.handle.accept(|handle| {
            handle.subscribe(
                &channels,
                &patterns,
                buffer_of(buffer),
                Box::new(move |result: sr::Result<Subscriber>| {
                    let result = result.and_then(|s| into_c(s, on_message, message_data));
                    // SAFETY: the host promised a valid callback; the error lives until it returns.
                    unsafe {
                        match result {
                            Ok(sub) => done(done_data.get(), sub, std::ptr::null()),
                            Err(e) => {
                                done(done_data.get(), std::ptr::null_mut(), &sr_error_t::from(e))
                            }
                        }
                    }
                }),
            )
        })?;
        Ok::<(), sr_error_t>(())
    })
}

/// sr_client_subscribe() that blocks the calling thread (only it) until the node confirmed the
/// subscription. On SR_OK `*subscription` receives an owned handle (free it with
/// sr_subscription_free()); otherwise it is NULL and `*error` (if `error` is not NULL) receives
/// an owned error. Refused (SR_ERR_CONFIG) inside a callback.
///
/// # Safety
/// As sr_client_subscribe(); `subscription` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_subscribe_blocking(
    client: *mut sr_client_t,
    channels_len: usize,
    channels: *const *const c_char,
    channels_lens: *const usize,
    patterns_len: usize,
    patterns: *const *const c_char,
    patterns_lens: *const usize,
    buffer: usize,
    on_message: sr_message_cb,
    message_data: *mut c_void,
    subscription: *mut *mut sr_subscription_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let subscription = out_param(subscription, "subscription")?;
        let h = acquire(client)?;
        let on_message = required(on_message, "the message callback")?;
        let channels = names(channels_len, channels, channels_lens)?;
        let patterns = names(patterns_len, patterns, patterns_lens)?;
        let buffer = buffer_of(buffer);
        let subscriber =
            waiter.wait(|done| h.handle.subscribe(&channels, &patterns, buffer, done))?;
        *subscription = into_c(subscriber, on_message, UserData::new(message_data))?;
        Ok(())
    })
}

/// sr_client_subscribe() whose completion goes to `mailbox` as `op_id`'s SR_DELIVERY_COMPLETION,
/// as sr_client_execute_into(): `subscription` (owned by you from that delivery on: free it with
/// sr_subscription_free()) once the node confirmed the names (within the client's
/// `command_timeout_ms`), or `error`. No message callback: read the messages, in order, with
/// sr_subscription_next_into(); until then they wait in the subscription's buffer (`buffer`
/// messages, 0 for the default 4096; beyond that the newest are dropped and counted,
/// sr_subscription_dropped()). Names and `buffer` as for sr_client_subscribe(). A subscription
/// whose completion is handed back by sr_mailbox_close() (SR_ERR_CLOSED) is closed for you.
///
/// `operation` is NULL or where to store a handle that cancels the subscribe while it waits
/// (sr_operation_cancel(): the completion is then SR_ERR_CLOSED; free it with
/// sr_operation_free()); it is set to NULL when the call is not accepted.
///
/// Returns SR_OK when accepted: exactly one completion with `op_id` then reaches the mailbox.
/// Any other code means it was not accepted and no completion comes: SR_ERR_INVALID_ARGUMENT
/// (NULL client or mailbox, a NULL name), SR_ERR_CLOSED (client or mailbox closed).
///
/// # Safety
/// `client` is NULL or a handle not yet freed; the lists are valid as for sr_client_subscribe();
/// `operation` is NULL or writable; `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_subscribe_into(
    client: *mut sr_client_t,
    channels_len: usize,
    channels: *const *const c_char,
    channels_lens: *const usize,
    patterns_len: usize,
    patterns: *const *const c_char,
    patterns_lens: *const usize,
    buffer: usize,
    operation: *mut *mut sr_operation_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let channels = names(channels_len, channels, channels_lens)?;
        let patterns = names(patterns_len, patterns, patterns_lens)?;
        // No per-call timeout: the client's `command_timeout_ms` bounds a subscribe.
        let options = sr_call_options_t {
            timeout_ms: 0,
            operation,
        };
        client_into(
            client,
            &options,
            mailbox,
            op_id,
            subscribed_into,
            |handle, _, done| handle.subscribe(&channels, &patterns, buffer_of(buffer), done),
        )
    })
}

/// Takes the subscription's next message: it goes to `mailbox` as `op_id`'s
/// SR_DELIVERY_COMPLETION with `pubsub_message` (borrowed for the delivery), in the order the
/// node sent them, as soon as one is there; once the subscription ended (closed, or its client
/// closed, also while this waited) `pubsub_message` and `error` are both NULL. Start the next
/// call when a message arrives (from the delivery callback, if you like): messages that arrive
/// meanwhile wait in the subscription's buffer. For subscriptions of sr_client_subscribe_into();
/// a subscription with a message callback gives its messages to that callback, and this then
/// completes only when it ends.
///
/// Returns as sr_client_execute_into(): SR_OK (exactly one completion with `op_id` then comes),
/// SR_ERR_INVALID_ARGUMENT (NULL subscription or mailbox), SR_ERR_CLOSED (the subscription
/// already ended, or the mailbox is closed).
///
/// # Safety
/// `subscription` is NULL or a handle not yet freed; `mailbox` is NULL or a mailbox not yet
/// freed.
#[no_mangle]
pub unsafe extern "C" fn sr_subscription_next_into(
    subscription: *mut sr_subscription_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let s = acquire_subscription(subscription)?;
        let m = acquire_mailbox(mailbox)?;
        let done = message_into(&m, op_id)?;
        s.subscriber.accept(|subscriber| subscriber.next(done))?;
        Ok::<(), sr_error_t>(())
    })
}

/// A new reference to the subscription for the duration of a call.
///
/// # Safety
/// `sub` is NULL or a handle not yet freed.
unsafe fn acquire_subscription(
    sub: *const sr_subscription_t,
) -> Result<Arc<Subscription>, sr_error_t> {
    clone_arc(sub).ok_or_else(|| sr_error_t::invalid("subscription is NULL"))
}

/// A change of sr_subscription_change() (`SR_SUBSCRIBE` ... `SR_PUNSUBSCRIBE`).
#[derive(Clone, Copy)]
enum Change {
    Subscribe,
    Psubscribe,
    Unsubscribe,
    Punsubscribe,
}

impl Change {
    /// The change a C code names, or the error naming it unknown.
    fn of(change: c_int) -> Result<Change, sr_error_t> {
        match change {
            SR_SUBSCRIBE => Ok(Change::Subscribe),
            SR_PSUBSCRIBE => Ok(Change::Psubscribe),
            SR_UNSUBSCRIBE => Ok(Change::Unsubscribe),
            SR_PUNSUBSCRIBE => Ok(Change::Punsubscribe),
            _ => Err(sr_error_t::invalid(
                "unknown change (want SR_SUBSCRIBE..SR_PUNSUBSCRIBE)",
            )),
        }
    }

    /// Starts it on `subscriber`.
    fn start(
        self,
        subscriber: &Subscriber,
        names: &[&[u8]],
        done: sr::host::Done<()>,
    ) -> sr::host::Operation {
        match self {
            Change::Subscribe => subscriber.subscribe(names, done),
            Change::Psubscribe => subscriber.psubscribe(names, done),
            Change::Unsubscribe => subscriber.unsubscribe(names, done),
            Change::Punsubscribe => subscriber.punsubscribe(names, done),
        }
    }
}

/// Starts `change` (one of `SR_SUBSCRIBE`, `SR_PSUBSCRIBE`, `SR_UNSUBSCRIBE`,
/// `SR_PUNSUBSCRIBE`) for `count` names; `done` is called once, on a core thread, when the node
/// confirmed it (at once while the subscription is between nodes: the change applies when it is
/// restored). Once an unsubscribe's `done` runs, no message of the names it removed reaches the
/// message callback.
///
/// Returns SR_OK when `done` will be called; otherwise it is never called:
/// SR_ERR_INVALID_ARGUMENT (NULL subscription or callback, unknown `change`, no names),
/// SR_ERR_CLOSED.
///
/// # Safety
/// `subscription` is NULL or a handle not yet freed; `names` points to `count` names (with
/// `lens` or NUL-terminated); `user_data` stays valid until `done` runs.
#[no_mangle]
pub unsafe extern "C" fn sr_subscription_change(
    subscription: *mut sr_subscription_t,
    change: c_int,
    count: usize,
    names: *const *const c_char,
    lens: *const usize,
    done: sr_done_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        let s = acquire_subscription(subscription)?;
        let done = required(done, "the done callback")?;
        let list = arguments(count, names, lens)?;
        let user_data = UserData::new(user_data);
        let complete: sr::host::Done<()> = Box::new(move |result: sr::Result<()>| {
            // SAFETY: the host promised a valid callback; the error lives until it returns.
            unsafe {
                match result {
                    Ok(()) => done(user_data.get(), std::ptr::null()),
                    Err(e) => done(user_data.get(), &sr_error_t::from(e)),
                }
            }
        });
        start_change(&s, change, &list, complete)
    })
}

/// Starts the change a C code names on an open subscription; refused (never completing
/// `done`) for an unknown code or an ended subscription.
fn start_change(
    s: &Subscription,
    change: c_int,
    names: &[&[u8]],
    done: sr::host::Done<()>,
) -> Result<(), sr_error_t> {
    s.subscriber
        .accept(|subscriber| Change::of(change).map(|c| c.start(subscriber, names, done)))??;
    Ok(())
}

/// sr_subscription_change() whose completion goes to `mailbox` as `op_id`'s
/// SR_DELIVERY_COMPLETION, as sr_client_execute_into(): every pointer NULL once the node
/// confirmed the change, or `error`. Once an unsubscribe's completion is delivered, no
/// sr_subscription_next_into() gives a message of the names it removed.
///
/// Returns as sr_client_execute_into(): SR_OK (exactly one completion with `op_id` then comes),
/// SR_ERR_INVALID_ARGUMENT (NULL subscription or mailbox, unknown `change`, no names),
/// SR_ERR_CLOSED (the subscription ended, or the mailbox is closed).
///
/// # Safety
/// As sr_subscription_change(); `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_subscription_change_into(
    subscription: *mut sr_subscription_t,
    change: c_int,
    count: usize,
    names: *const *const c_char,
    lens: *const usize,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let s = acquire_subscription(subscription)?;
        let m = acquire_mailbox(mailbox)?;
        let list = arguments(count, names, lens)?;
        let done = done_into(&m, op_id)?;
        start_change(&s, change, &list, done)
    })
}

/// sr_subscription_change() that blocks the calling thread (only it) until the change is
/// confirmed. Returns SR_OK or the error (also in `*error` when `error` is not NULL). Refused
/// (SR_ERR_CONFIG) inside a callback.
///
/// # Safety
/// As sr_subscription_change(); `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_subscription_change_blocking(
    subscription: *mut sr_subscription_t,
    change: c_int,
    count: usize,
    names: *const *const c_char,
    lens: *const usize,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let s = acquire_subscription(subscription)?;
        let list = arguments(count, names, lens)?;
        let change = Change::of(change)?;
        Ok(waiter.wait(|done| change.start(&s.subscriber, &list, done))?)
    })
}

/// Messages dropped so far because the subscription's buffer was full (the newest are dropped);
/// 0 for NULL.
///
/// # Safety
/// `subscription` is NULL or a handle not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_subscription_dropped(subscription: *const sr_subscription_t) -> u64 {
    guard(|| acquire_subscription(subscription).map_or(0, |s| s.subscriber.dropped()))
}

/// Ends the subscription: when this returns the message callback is not running (unless this is
/// called from inside it: that call finishes first) and is never called again, so its
/// `user_data` may be released; the connection closes. Closing the client does the same. The
/// handle stays valid until sr_subscription_free().
///
/// Returns SR_OK, SR_ERR_CLOSED if it was already closed, SR_ERR_INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `subscription` is NULL or a handle not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_subscription_close(subscription: *mut sr_subscription_t) -> c_int {
    guard(|| {
        let s = match acquire_subscription(subscription) {
            Ok(s) => s,
            Err(e) => return e.code(),
        };
        if s.closing.swap(true, Ordering::SeqCst) {
            return SR_ERR_CLOSED;
        }
        s.subscriber.close();
        SR_OK
    })
}

/// Closes the subscription if it is still open (as sr_subscription_close()) and releases the
/// handle; the pointer must not be used afterwards. NULL is ignored.
///
/// # Safety
/// `subscription` is NULL or a handle from sr_client_subscribe*(), not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_subscription_free(subscription: *mut sr_subscription_t) {
    guard(|| {
        if let Some(s) = free_arc(subscription) {
            s.subscriber.close();
        }
    })
}
