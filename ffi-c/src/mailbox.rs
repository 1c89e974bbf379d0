//! The host mailbox (`sr_mailbox_t`): completions and events of clients queue in it, in order,
//! and the host takes them on a thread of its own with sr_mailbox_drain(), instead of being
//! called on a core thread. Order, the single wake-up per burst, the overflow rule, the close
//! barrier and exactly-once are the core's (`sr::host::Mailbox`); this file converts what
//! queues into `sr_delivery_t` and back, nothing more.

use std::ffi::{c_char, c_int, c_void, CString};

use sr::host::{Delivery, Diagnosis, Done, HostTransaction, Mailbox, Pushed, Subscriber};
use sr::{Event, Message, Topology, Value};

use crate::codes::{SR_ERR_CLOSED, SR_ERR_INVALID_ARGUMENT};
use crate::error::{c_string, sr_error_t};
use crate::ffi::free_box;
use crate::ffi::{
    clone_arc, free_arc, guard, start, to_arc_mut_ptr, to_boxed_mut_ptr, to_const_ptr, Castable,
    SharedArc, UserData, SR_OK,
};
use crate::message_view::{message_view, sr_message_t};
use crate::reply::{as_reply, sr_reply_t};
use crate::results::{exec_results, results_of, sr_results_t, Results};
use crate::subscription_handle::{sr_subscription_t, Subscription};
use crate::topology::{sr_event_t, sr_topology_t, topology_to_c, EventBox};
use crate::transaction_handle::sr_transaction_t;

/// A delivery that completes a call started with a `*_into` function (sr_client_execute_into(),
/// sr_client_pipeline_into(), sr_client_wait_ready_into(), sr_client_subscribe_into(),
/// sr_subscription_next_into(), sr_subscription_change_into(),
/// sr_client_transaction_begin_into(), sr_transaction_watch_into(),
/// sr_transaction_execute_into(), sr_transaction_exec_into(), sr_doctor_into(),
/// sr_proxy_close_into()): `op_id` is the caller's, the field that call's documentation names
/// (or `error`) its outcome.
pub const SR_DELIVERY_COMPLETION: c_int = 1;
/// A delivery carrying a topology event (`event`) of a client whose events go to the mailbox
/// (sr_client_set_event_mailbox()).
pub const SR_DELIVERY_EVENT: c_int = 2;
/// A delivery carrying a core log record (`level`, `target`, `message`), for a process whose log
/// records go to the mailbox (sr_set_log_mailbox()).
pub const SR_DELIVERY_LOG: c_int = 4;
/// A delivery saying that `dropped` events or log records were dropped at this place because the
/// mailbox held its `bound` of them (completions are never dropped).
pub const SR_DELIVERY_DROPPED: c_int = 5;

/// A host mailbox: an ordered, bounded queue that clients' completions and events go to, for the
/// host to take on a thread of its own with sr_mailbox_drain().
///
/// - Order: items are delivered in the order the mailbox took them (the completions of one
///   connection's commands in their reply order, events in their order).
/// - Wake-up: the mailbox calls its sr_wake_cb only when it goes from idle (empty, no drain
///   pending) to non-empty: a burst of items costs one wake-up, and an item arriving while a
///   drain runs costs none (that drain delivers it). Answer each wake-up with one
///   sr_mailbox_drain() on your thread.
/// - Overflow: completions are never dropped (their number is bounded by the calls in flight);
///   beyond `bound` queued events and log records, new ones are dropped and an
///   SR_DELIVERY_DROPPED delivery takes their place.
/// - Exactly once: every call accepted by a `*_into` function gets exactly one
///   SR_DELIVERY_COMPLETION, from sr_mailbox_drain() or from sr_mailbox_close(), provided its
///   client is closed (sr_client_close(), which waits until every completion of that client has
///   reached the mailbox) before the mailbox is. A completion that reaches a mailbox already
///   closed is discarded.
/// - Close barrier: once sr_mailbox_close() has returned, no delivery callback runs for this
///   mailbox and its wake-up is never called again.
///
/// Opaque, shared: sr_mailbox_new() gives the caller one reference, released by
/// sr_mailbox_free(); a client whose completions or events go to the mailbox keeps the memory
/// alive as long as it needs it, so the order of freeing does not matter. All functions taking a
/// mailbox are thread-safe.
pub struct sr_mailbox_t {
    _private: [u8; 0],
}

/// What an `sr_mailbox_t *` points to.
pub(crate) struct MailboxBox {
    mailbox: Mailbox<Item>,
}

impl Castable for sr_mailbox_t {
    type Ownership = SharedArc;
    type RustType = MailboxBox;
}

/// What queues in a mailbox.
pub(crate) enum Item {
    /// The completion of the `*_into` call `op_id`: its outcome, or why it failed as a whole.
    Completion {
        op_id: u64,
        outcome: Result<Outcome, sr_error_t>,
    },
    /// A topology event (converted to C on the draining thread).
    Event(Event),
    /// A core log record.
    Log {
        level: c_int,
        target: CString,
        message: CString,
    },
}

/// What a `*_into` call that succeeded hands to the host (the `sr_delivery_t` field it fills).
pub(crate) enum Outcome {
    /// sr_client_execute_into(), sr_transaction_watch_into(), sr_transaction_execute_into():
    /// `reply`.
    Reply(Value),
    /// sr_client_pipeline_into(), sr_transaction_exec_into(): `results` (`None`: a watched key
    /// changed, nothing ran; `results` and `error` both NULL).
    Results(Option<Results>),
    /// sr_client_wait_ready_into(): `topology`.
    Ready(Topology),
    /// sr_client_subscribe_into(): `subscription`, handed over to the host by the delivery
    /// (closed when dropped undelivered).
    Subscribed(Subscription),
    /// sr_subscription_next_into(): `pubsub_message` (`None`: the subscription ended).
    Message(Option<Message>),
    /// sr_subscription_change_into(), sr_proxy_close_into(): nothing but success (every pointer
    /// NULL).
    Done,
    /// sr_client_transaction_begin_into(): `transaction`, handed over to the host by the
    /// delivery (its connection closes when dropped undelivered).
    Began(HostTransaction),
    /// sr_doctor_into(): `json` and `exit_code`.
    Doctor(CString, c_int),
}

/// Wake-up of a mailbox, given to sr_mailbox_new(): called when the mailbox goes from idle to
/// non-empty, on the thread that queued the item (usually a core thread), after the mailbox's
/// lock is released; sr_mailbox_close() waits for a wake-up under way. It must only signal your
/// draining thread (post a semaphore, write an eventfd or a pipe, signal a condition variable)
/// and return: it must not block, must not unwind, and must not call any sr_mailbox_* function
/// (sr_mailbox_close() there would wait for itself).
pub type sr_wake_cb = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// One item taken from a mailbox, passed to an sr_delivery_cb.
///
/// Everything it points to is borrowed for the duration of the callback only: copy what you need
/// or take an owned copy (sr_reply_clone(), sr_error_clone(), sr_event_clone()). Fields that do
/// not apply to `kind` are NULL or 0. Kinds not known to your code (later versions may add some)
/// should be ignored.
#[repr(C)]
pub struct sr_delivery_t {
    /// SR_DELIVERY_COMPLETION, SR_DELIVERY_EVENT, SR_DELIVERY_LOG or SR_DELIVERY_DROPPED.
    pub kind: c_int,
    /// SR_DELIVERY_COMPLETION: the `op_id` given to the `*_into` call it completes.
    pub op_id: u64,
    /// SR_DELIVERY_COMPLETION of sr_client_execute_into() that succeeded: the reply.
    pub reply: *const sr_reply_t,
    /// SR_DELIVERY_COMPLETION of sr_client_pipeline_into() that succeeded: one result per
    /// command.
    pub results: *const sr_results_t,
    /// SR_DELIVERY_COMPLETION of sr_client_wait_ready_into() that succeeded: the topology with
    /// the verified primary.
    pub topology: *const sr_topology_t,
    /// SR_DELIVERY_COMPLETION that failed as a whole: why (SR_ERR_CLOSED when handed back by
    /// sr_mailbox_close()). Either `error` or the one field the call's documentation names is
    /// non-NULL, except where that documentation says both are NULL (sr_transaction_exec_into()
    /// when a watched key changed, sr_subscription_next_into() once the subscription ended,
    /// sr_subscription_change_into() and sr_proxy_close_into() on success).
    pub error: *const sr_error_t,
    /// SR_DELIVERY_EVENT: the event.
    pub event: *const sr_event_t,
    /// SR_DELIVERY_DROPPED: how many events or log records were dropped at this place.
    pub dropped: u64,
    /// SR_DELIVERY_LOG: the record's level (`SR_LOG_*`).
    pub level: c_int,
    /// SR_DELIVERY_LOG: the emitting module (`sentinel_recovery::monitor::actor`, ...).
    pub target: *const c_char,
    /// SR_DELIVERY_LOG: the text, never containing a password.
    pub message: *const c_char,
    /// SR_DELIVERY_COMPLETION of sr_client_subscribe_into() that succeeded: the subscription,
    /// owned by you from this delivery on (free it with sr_subscription_free()), also when you
    /// ignore it.
    pub subscription: *mut sr_subscription_t,
    /// SR_DELIVERY_COMPLETION of sr_subscription_next_into(): the next message (borrowed for the
    /// delivery), or NULL with `error` NULL once the subscription ended.
    pub pubsub_message: *const sr_message_t,
    /// SR_DELIVERY_COMPLETION of sr_client_transaction_begin_into() that succeeded: the
    /// transaction, owned by you from this delivery on (free it with sr_transaction_free()), also
    /// when you ignore it.
    pub transaction: *mut sr_transaction_t,
    /// SR_DELIVERY_COMPLETION of sr_doctor_into() that succeeded: the report as JSON (borrowed
    /// for the delivery; see sr_doctor_cb).
    pub json: *const c_char,
    /// SR_DELIVERY_COMPLETION of sr_doctor_into() that succeeded: the verdict, 0 healthy,
    /// 1 warnings, 2 failures.
    pub exit_code: c_int,
}

/// Receives deliveries from sr_mailbox_drain() (on the draining thread, one at a time, in order)
/// and from sr_mailbox_close() (the completions it hands back, on the closing thread).
/// `delivery` is borrowed for the call only (see sr_delivery_t). It may start calls into any
/// mailbox and close any client or mailbox (closing this mailbox stops the drain after the
/// current delivery); it must not unwind. The sr_*_blocking functions are allowed, since it runs
/// on your thread, but block that drain meanwhile.
pub type sr_delivery_cb =
    Option<unsafe extern "C" fn(user_data: *mut c_void, delivery: *const sr_delivery_t)>;

impl sr_delivery_t {
    fn empty(kind: c_int) -> sr_delivery_t {
        sr_delivery_t {
            kind,
            op_id: 0,
            reply: std::ptr::null(),
            results: std::ptr::null(),
            topology: std::ptr::null(),
            error: std::ptr::null(),
            event: std::ptr::null(),
            dropped: 0,
            level: 0,
            target: std::ptr::null(),
            message: std::ptr::null(),
            subscription: std::ptr::null_mut(),
            pubsub_message: std::ptr::null(),
            transaction: std::ptr::null_mut(),
            json: std::ptr::null(),
            exit_code: 0,
        }
    }
}

impl Item {
    /// Lends the item to `deliver` as an `sr_delivery_t`; a subscription or a transaction it
    /// carries is handed over to the host.
    fn lend(self, deliver: impl FnOnce(&sr_delivery_t)) {
        let mut d = sr_delivery_t::empty(SR_DELIVERY_COMPLETION);
        match self {
            Item::Completion { op_id, outcome } => {
                d.op_id = op_id;
                match outcome {
                    Ok(outcome) => outcome.lend(d, deliver),
                    Err(e) => {
                        d.error = &e;
                        deliver(&d)
                    }
                }
            }
            Item::Event(event) => {
                let event = EventBox::new(&event);
                d.kind = SR_DELIVERY_EVENT;
                d.event = event.view();
                deliver(&d)
            }
            Item::Log {
                level,
                target,
                message,
            } => {
                d.kind = SR_DELIVERY_LOG;
                d.level = level;
                d.target = target.as_ptr();
                d.message = message.as_ptr();
                deliver(&d)
            }
        }
    }

    /// The completion's id, or `None` for an event or a log record.
    fn op_id(&self) -> Option<u64> {
        match self {
            Item::Completion { op_id, .. } => Some(*op_id),
            Item::Event(_) | Item::Log { .. } => None,
        }
    }
}

impl Outcome {
    /// Lends the outcome to `deliver` in its field of `d`.
    fn lend(self, mut d: sr_delivery_t, deliver: impl FnOnce(&sr_delivery_t)) {
        match self {
            Outcome::Reply(value) => {
                d.reply = as_reply(&value);
                deliver(&d)
            }
            Outcome::Results(results) => {
                if let Some(results) = &results {
                    d.results = to_const_ptr::<sr_results_t>(results);
                }
                deliver(&d)
            }
            Outcome::Ready(topology) => {
                let owned = topology_to_c(&topology);
                d.topology = owned;
                deliver(&d);
                // SAFETY: made just above, lent for the call only.
                drop(unsafe { free_box(owned) });
            }
            Outcome::Subscribed(subscription) => {
                d.subscription = to_arc_mut_ptr::<sr_subscription_t>(subscription);
                deliver(&d)
            }
            Outcome::Message(message) => {
                let view = message.as_ref().map(message_view);
                if let Some(view) = &view {
                    d.pubsub_message = view;
                }
                deliver(&d)
            }
            Outcome::Done => deliver(&d),
            Outcome::Began(transaction) => {
                d.transaction = to_boxed_mut_ptr::<sr_transaction_t>(transaction);
                deliver(&d)
            }
            Outcome::Doctor(json, exit_code) => {
                d.json = json.as_ptr();
                d.exit_code = exit_code;
                deliver(&d)
            }
        }
    }
}

/// The completion of an `*_into` call: `outcome` makes what it hands to the host from the
/// operation's value. Refused with SR_ERR_CLOSED when the mailbox is already closed (the call is
/// then not accepted); a completion the mailbox refuses later, because it closed meanwhile, is
/// discarded (see sr_mailbox_t).
fn completion_into<T: 'static>(
    mailbox: &MailboxBox,
    op_id: u64,
    outcome: fn(T) -> Outcome,
) -> Result<Done<T>, sr_error_t> {
    let completion = mailbox.mailbox.completion()?;
    Ok(Box::new(move |result: sr::Result<T>| {
        let outcome = result.map(outcome).map_err(sr_error_t::from);
        let _ = completion.complete(Item::Completion { op_id, outcome });
    }))
}

/// The completion of sr_client_execute_into() (and of the transaction steps that complete with a
/// reply): the reply or error.
pub(crate) fn reply_into(mailbox: &MailboxBox, op_id: u64) -> Result<Done<Value>, sr_error_t> {
    completion_into(mailbox, op_id, Outcome::Reply)
}

/// The completion of sr_client_pipeline_into(): one result per command, or the error.
pub(crate) fn results_into(
    mailbox: &MailboxBox,
    op_id: u64,
) -> Result<Done<Vec<sr::Result<Value>>>, sr_error_t> {
    completion_into(mailbox, op_id, |items| {
        Outcome::Results(Some(results_of(items)))
    })
}

/// The completion of sr_transaction_exec_into(): one result per command, nothing when a watched
/// key changed, or the error.
pub(crate) fn exec_into(
    mailbox: &MailboxBox,
    op_id: u64,
) -> Result<Done<Option<Vec<Value>>>, sr_error_t> {
    completion_into(mailbox, op_id, |values| {
        Outcome::Results(exec_results(values).map(results_of))
    })
}

/// The completion of sr_client_wait_ready_into(): the topology, or the error.
pub(crate) fn ready_into(mailbox: &MailboxBox, op_id: u64) -> Result<Done<Topology>, sr_error_t> {
    completion_into(mailbox, op_id, Outcome::Ready)
}

/// The completion of sr_client_subscribe_into(): the subscription, or the error.
pub(crate) fn subscribed_into(
    mailbox: &MailboxBox,
    op_id: u64,
) -> Result<Done<Subscriber>, sr_error_t> {
    completion_into(mailbox, op_id, |subscriber| {
        Outcome::Subscribed(Subscription::new(subscriber))
    })
}

/// The completion of sr_subscription_next_into(): the next message, `None` at the end.
pub(crate) fn message_into(
    mailbox: &MailboxBox,
    op_id: u64,
) -> Result<Done<Option<Message>>, sr_error_t> {
    completion_into(mailbox, op_id, Outcome::Message)
}

/// The completion of a call that gives nothing but success (sr_subscription_change_into(),
/// sr_proxy_close_into()).
pub(crate) fn done_into(mailbox: &MailboxBox, op_id: u64) -> Result<Done<()>, sr_error_t> {
    completion_into(mailbox, op_id, |()| Outcome::Done)
}

/// The completion of sr_client_transaction_begin_into(): the transaction, or the error.
pub(crate) fn began_into(
    mailbox: &MailboxBox,
    op_id: u64,
) -> Result<Done<HostTransaction>, sr_error_t> {
    completion_into(mailbox, op_id, Outcome::Began)
}

/// A diagnosis as C hands it over: the report's JSON and its verdict (0 healthy, 1 warnings,
/// 2 failures).
pub(crate) fn report_of(d: &Diagnosis) -> (CString, c_int) {
    // The JSON of serde_json never holds a NUL byte (it escapes control characters).
    let json = CString::new(d.json.as_str()).unwrap_or_default();
    (json, c_int::from(d.exit_code))
}

/// The completion of sr_doctor_into(): the report and its verdict, or the error.
pub(crate) fn doctor_into(mailbox: &MailboxBox, op_id: u64) -> Result<Done<Diagnosis>, sr_error_t> {
    completion_into(mailbox, op_id, |d| {
        let (json, exit_code) = report_of(&d);
        Outcome::Doctor(json, exit_code)
    })
}

/// The event handler that queues a client's events in `mailbox` (dropped and counted beyond its
/// bound; discarded once it is closed).
pub(crate) fn events_into(
    mailbox: &MailboxBox,
) -> Result<impl FnMut(&Event) + Send + 'static, sr_error_t> {
    let mailbox = mailbox.mailbox.sender()?;
    Ok(
        move |event: &Event| match mailbox.push(Item::Event(event.clone())) {
            Pushed::Queued | Pushed::Dropped | Pushed::Closed(_) => {}
        },
    )
}

/// The log sink that queues core log records in `mailbox` (dropped and counted beyond its bound;
/// discarded once it is closed).
pub(crate) fn logs_into(
    mailbox: &MailboxBox,
) -> Result<impl Fn(i32, &str, &str) + Send + Sync + 'static, sr_error_t> {
    let mailbox = mailbox.mailbox.sender()?;
    Ok(move |level: i32, target: &str, message: &str| {
        let item = Item::Log {
            level,
            target: c_string(target),
            message: c_string(message),
        };
        match mailbox.push(item) {
            Pushed::Queued | Pushed::Dropped | Pushed::Closed(_) => {}
        }
    })
}

/// The mailbox behind `mailbox` for the duration of a call.
///
/// # Safety
/// `mailbox` is NULL or a mailbox not yet freed.
pub(crate) unsafe fn acquire_mailbox(
    mailbox: *const sr_mailbox_t,
) -> Result<std::sync::Arc<MailboxBox>, sr_error_t> {
    clone_arc(mailbox).ok_or_else(|| sr_error_t::invalid("mailbox is NULL"))
}

/// Creates a mailbox holding at most `bound` events and log records (0 is taken as 1;
/// completions are not counted), calling `wake(wake_user_data)` when it goes from idle to non-empty (see
/// sr_wake_cb). On SR_OK `*mailbox` receives a new mailbox (free it with sr_mailbox_free());
/// otherwise it is set to NULL and the code is SR_ERR_INVALID_ARGUMENT (NULL `wake` or
/// `mailbox`).
///
/// # Safety
/// `mailbox` is NULL or writable; `wake_user_data` stays valid until sr_mailbox_close() (or
/// sr_mailbox_free()) has returned.
#[no_mangle]
pub unsafe extern "C" fn sr_mailbox_new(
    bound: usize,
    wake: sr_wake_cb,
    wake_user_data: *mut c_void,
    mailbox: *mut *mut sr_mailbox_t,
) -> c_int {
    start(|| {
        let out = mailbox
            .as_mut()
            .ok_or_else(|| sr_error_t::invalid("mailbox is NULL"))?;
        *out = std::ptr::null_mut();
        let wake = wake.ok_or_else(|| sr_error_t::invalid("wake is NULL"))?;
        let user_data = UserData::new(wake_user_data);
        // SAFETY: the host promised a valid function that only signals.
        let wake = move || unsafe { wake(user_data.get()) };
        *out = to_arc_mut_ptr::<sr_mailbox_t>(MailboxBox {
            mailbox: Mailbox::new(bound, wake),
        });
        Ok::<(), sr_error_t>(())
    })
}

/// Delivers everything queued, in order, to `deliver(user_data, delivery)` on the calling
/// thread, including what arrives while it runs, then returns; `*delivered` (if not NULL)
/// receives how many deliveries it made. Call it once per wake-up, on your own thread (not in
/// the wake-up, not in a library callback). Drains of one mailbox on different threads deliver
/// one at a time; a drain called from inside a delivery of the same mailbox delivers nothing.
///
/// Returns SR_OK (also when nothing was queued), SR_ERR_CLOSED once the mailbox is closed
/// (nothing delivered), SR_ERR_INVALID_ARGUMENT for a NULL mailbox or `deliver`.
///
/// # Safety
/// `mailbox` is NULL or a mailbox not yet freed; `delivered` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_mailbox_drain(
    mailbox: *const sr_mailbox_t,
    deliver: sr_delivery_cb,
    user_data: *mut c_void,
    delivered: *mut usize,
) -> c_int {
    if !delivered.is_null() {
        *delivered = 0;
    }
    start(|| {
        let m = acquire_mailbox(mailbox)?;
        let deliver = deliver.ok_or_else(|| sr_error_t::invalid("deliver is NULL"))?;
        if m.mailbox.is_closed() {
            // Not an acceptance check: the answer SR_ERR_CLOSED tells the host to stop draining.
            return Err(sr_error_t::from(sr::Error::mailbox_closed()));
        }
        let count = m.mailbox.drain(|delivery| match delivery {
            // SAFETY: the host promised a valid callback; the delivery lives until it returns.
            Delivery::Item(item) => item.lend(|d| unsafe { deliver(user_data, d) }),
            Delivery::Dropped(n) => {
                let mut d = sr_delivery_t::empty(SR_DELIVERY_DROPPED);
                d.dropped = n;
                unsafe { deliver(user_data, &d) }
            }
        });
        if !delivered.is_null() {
            *delivered = count;
        }
        Ok::<(), sr_error_t>(())
    })
}

/// Closes the mailbox: when this returns, no delivery runs for it any more (a drain on another
/// thread finishes the delivery it is making first; this waits for it) and its wake-up is never
/// called again. Completions still queued are handed back, each once, in order, to
/// `deliver(user_data, delivery)` on the calling thread before this returns, as
/// SR_DELIVERY_COMPLETION with an SR_ERR_CLOSED error (pass NULL `deliver` to discard them);
/// queued events are discarded. Later `*_into` calls naming the mailbox give SR_ERR_CLOSED.
/// Called from inside one of its own deliveries it returns at once and that drain stops after
/// the current delivery.
///
/// Returns SR_OK, SR_ERR_CLOSED when it was already closed, SR_ERR_INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_mailbox_close(
    mailbox: *const sr_mailbox_t,
    deliver: sr_delivery_cb,
    user_data: *mut c_void,
) -> c_int {
    guard(|| {
        let Ok(m) = acquire_mailbox(mailbox) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        if m.mailbox.is_closed() {
            return SR_ERR_CLOSED;
        }
        hand_back(m.mailbox.close(), deliver, user_data);
        SR_OK
    })
}

/// Completes each handed-back completion as closed.
fn hand_back(items: Vec<Item>, deliver: sr_delivery_cb, user_data: *mut c_void) {
    let Some(deliver) = deliver else { return };
    let closed = sr_error_t::from(sr::Error::closed());
    for op_id in items.iter().filter_map(Item::op_id) {
        let mut d = sr_delivery_t::empty(SR_DELIVERY_COMPLETION);
        d.op_id = op_id;
        d.error = &closed;
        // SAFETY: the host promised a valid callback; the delivery lives until it returns.
        unsafe { deliver(user_data, &d) };
    }
}

/// Closes the mailbox if it is still open (as sr_mailbox_close() with a NULL `deliver`:
/// completions still queued are discarded) and releases the caller's reference; the pointer
/// must not be used afterwards. NULL is ignored.
///
/// # Safety
/// `mailbox` is NULL or a mailbox from sr_mailbox_new(), not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_mailbox_free(mailbox: *mut sr_mailbox_t) {
    guard(|| {
        if let Some(m) = free_arc(mailbox) {
            drop(m.mailbox.close());
        }
    })
}
