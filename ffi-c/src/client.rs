//! The client handle (`sr_client_t`): open, execute, pipeline, topology, events, close, free,
//! over the core's host layer (which guarantees exactly-once completions, no callback after
//! close, and says when a call is not accepted); this file converts C arguments and results,
//! nothing more.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sr::host::{ApiNames, Done, EventHandler, EventRegistration, Handle, Operation};
use sr::{Event, Value};

use crate::args::{arguments, command_list, config_of, out_param, sr_command_t, sr_option_t};
use crate::codes::SR_ERR_CLOSED;
use crate::error::sr_error_t;
use crate::ffi::{
    blocking, clone_arc, free_arc, guard, report, start, to_arc_mut_ptr, Castable, ErrorObject,
    SharedArc, UserData, SR_OK,
};
use crate::mailbox::{
    acquire_mailbox, events_into, ready_into, reply_into, results_into, sr_mailbox_t, MailboxBox,
};
use crate::operation::{call_options, deadline, give_operation, sr_call_options_t};
use crate::reply::{into_owned_reply, reply_to, sr_reply_cb, sr_reply_t};
use crate::results::{deliver_results, into_owned_results, sr_results_cb, sr_results_t};
use crate::topology::{sr_event_t, sr_topology_t, topology_to_c, EventBox};

/// A client of one Sentinel-managed service.
///
/// Opaque. Created by sr_client_open(), which gives the caller one reference; released only by
/// sr_client_free(). sr_client_close() closes it but keeps the handle valid, so using a closed
/// client, or closing it twice, gives SR_ERR_CLOSED instead of undefined behaviour. After
/// sr_client_free() the pointer must not be used again. All functions taking a client are
/// thread-safe.
pub struct sr_client_t {
    _private: [u8; 0],
}

/// What an `sr_client_t *` points to.
pub(crate) struct Client {
    pub(crate) handle: Handle,
    /// Set by the first sr_client_close().
    closing: AtomicBool,
    /// The installed event callback's subscription.
    events: Mutex<Option<EventRegistration>>,
}

impl Castable for sr_client_t {
    type Ownership = SharedArc;
    type RustType = Client;
}

/// How the C API is named in error hints (MULTI refused on the shared connection, ...).
static C_API: ApiNames = ApiNames {
    transaction: "sr_client_transaction()",
    watch: "sr_client_transaction() with its watch keys",
};

/// Event callback, installed with sr_client_set_event_callback(): called for each topology event
/// of the client, in order, on a core thread (one call at a time). The first call reflects the
/// current state: when a primary is known it is a primary_changed from none to it, so an early
/// change is never missed.
///
/// `event` and everything it points to are borrowed for the duration of the call only: copy what
/// you need (or sr_event_clone()) and return quickly; do not block and do not unwind. It may call
/// sr_client_close(), sr_client_free() and sr_client_set_event_callback(client, NULL, NULL) on its
/// own client; installing another callback from inside it is refused.
pub type sr_event_cb =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const sr_event_t)>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new reference to the client for the duration of a call, so that a concurrent
/// sr_client_free() can't free it under our feet.
///
/// # Safety
/// `client` is NULL or a handle not yet freed.
pub(crate) unsafe fn acquire(client: *const sr_client_t) -> Result<Arc<Client>, sr_error_t> {
    clone_arc(client).ok_or_else(|| sr_error_t::invalid("client is NULL"))
}

/// A callback the call needs (`what` names it in errors).
pub(crate) fn required<F>(callback: Option<F>, what: &str) -> Result<F, sr_error_t> {
    callback.ok_or_else(|| sr_error_t::invalid(&format!("{what} is NULL")))
}

/// Starts one call of a callback form with its options (the body of sr_client_execute_with(),
/// sr_client_pipeline(), sr_client_transaction() and sr_client_transaction_begin()):
/// `options->operation` is NULLed first and receives the cancel handle once the client accepted
/// the call; `begin` checks the call's arguments and starts it.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `options` is NULL or valid.
pub(crate) unsafe fn client_call(
    client: *mut sr_client_t,
    options: *const sr_call_options_t,
    begin: impl FnOnce(&Handle, Option<std::time::Duration>) -> Result<Operation, sr_error_t>,
) -> Result<(), sr_error_t> {
    let (timeout, operation_out) = call_options(options);
    let h = acquire(client)?;
    let operation = h.handle.accept(|handle| begin(handle, timeout))??;
    give_operation(operation_out, operation);
    Ok(())
}

/// Starts one operation of `client` whose completion goes to `mailbox` as `op_id`'s (the body of
/// every `*_into` export of a client): `into` makes the completion, `begin` starts the operation
/// with the options' deadline (`options` NULL for none; its cancel handle is handed out when
/// asked for). Refused, with no completion ever, as sr_client_execute_into() says: NULL client
/// or mailbox, a closed mailbox, a closed client.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `options` is NULL or valid; `mailbox` is NULL or
/// a mailbox not yet freed.
pub(crate) unsafe fn client_into<T>(
    client: *mut sr_client_t,
    options: *const sr_call_options_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
    into: fn(&MailboxBox, u64) -> Result<Done<T>, sr_error_t>,
    begin: impl FnOnce(&Handle, Option<std::time::Duration>, Done<T>) -> Operation,
) -> Result<(), sr_error_t> {
    let (timeout, operation_out) = call_options(options);
    let h = acquire(client)?;
    let done = into(&*acquire_mailbox(mailbox)?, op_id)?;
    let operation = h.handle.accept(|handle| begin(handle, timeout, done))?;
    give_operation(operation_out, operation);
    Ok(())
}

impl Client {
    /// Closes the client; see sr_client_close().
    fn close(&self) -> c_int {
        if self.closing.swap(true, Ordering::SeqCst) {
            return SR_ERR_CLOSED;
        }
        lock(&self.events).take();
        self.handle.close_blocking();
        SR_OK
    }
}

/// Opens a client for a `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service
/// [?key=value&...]` URL (`valkey+sentinel://`, and `rediss+sentinel://` for TLS) and returns at
/// once: discovery runs in the background on the core's threads. Use sr_client_wait_ready() to
/// wait for the first discovery round, or just send commands (they wait for a primary up to
/// their deadline).
///
/// `options` (`options_len` of them; NULL when 0) override the URL's query keys. `url` and the
/// options are borrowed for the call only. On SR_OK, `*client` receives a new handle (free it
/// with sr_client_free()); otherwise `*client` is set to NULL and `*error` (if `error` is not
/// NULL) receives an owned error naming the offending part (never a password).
///
/// # Safety
/// `url` and every option string are NULL or NUL-terminated; `options` points to `options_len`
/// options; `client` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_open(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    client: *mut *mut sr_client_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    open_with(url, options, options_len, None, client, error)
}

/// sr_client_open(), with `address_map`'s function form when `map` is given.
///
/// # Safety
/// As sr_client_open().
pub(crate) unsafe fn open_with(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    map: Option<Arc<sr::config::AddressMapFn>>,
    client: *mut *mut sr_client_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    report(error, || {
        let client = out_param(client, "client")?;
        let mut config = config_of(url, options, options_len)?;
        if map.is_some() {
            config.address_map.set_function(map);
        }
        let handle = Handle::open(config)?;
        handle.set_api_names(&C_API);
        *client = to_arc_mut_ptr::<sr_client_t>(Client {
            handle,
            closing: AtomicBool::new(false),
            events: Mutex::new(None),
        });
        Ok(())
    })
}

/// Waits until the client's first discovery round has finished, blocking the calling thread
/// only. On SR_OK the round found a verified primary and, if `topology` is not NULL, `*topology`
/// receives an owned snapshot (free with sr_topology_free()). Otherwise the error says which
/// case happened (SR_ERR_SENTINELS_UNREACHABLE, SR_ERR_SERVICE_UNKNOWN,
/// SR_ERR_NO_HEALTHY_PRIMARY, SR_ERR_CLOSED); the client stays open and keeps retrying.
/// Refused (SR_ERR_CONFIG) inside a callback.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `topology` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_wait_ready(
    client: *mut sr_client_t,
    topology: *mut *mut sr_topology_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let topology = topology.as_mut().map(|t| {
            *t = std::ptr::null_mut();
            t
        });
        let h = acquire(client)?;
        let t = waiter.wait(|done| h.handle.ready(done))?;
        if let Some(out) = topology {
            *out = topology_to_c(&t);
        }
        Ok(())
    })
}

/// sr_client_wait_ready() that returns at once: its completion goes to `mailbox` as `op_id`'s
/// SR_DELIVERY_COMPLETION, with `topology` (borrowed for the delivery) when the first discovery
/// round found a verified primary, otherwise `error` saying which case happened. `options` (NULL
/// for none) may ask for a cancel handle; its `timeout_ms` is not used (the wait lasts up to the
/// client's `command_timeout_ms`). Returns as sr_client_execute_into().
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `options` is NULL or valid; `mailbox` is NULL or
/// a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_wait_ready_into(
    client: *mut sr_client_t,
    options: *const sr_call_options_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        client_into(
            client,
            options,
            mailbox,
            op_id,
            ready_into,
            |handle, _, done| handle.ready(done),
        )
    })
}

/// Sends one command and returns at once; `callback` gets its result later, on a core thread
/// (see sr_reply_cb), with `user_data` passed back untouched.
///
/// `argv` holds `argc` (> 0) arguments, the command name first; `argv_len[i]` is the length of
/// `argv[i]` (binary safe), or `argv_len` may be NULL when every argument is a NUL-terminated
/// string. The arguments are copied before this returns.
///
/// Returns SR_OK when the command was accepted: `callback` is then called exactly once (in the
/// rare case that the core runtime can't run at all, it is called before this returns, on the
/// calling thread). Any other code means it was not accepted and `callback` is never called:
/// SR_ERR_INVALID_ARGUMENT (NULL client, argv or callback, argc 0), SR_ERR_CLOSED.
///
/// The command's deadline is the client's `command_timeout_ms` option (default 5000); use
/// sr_client_execute_with() for a deadline of its own or a cancel handle.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `argv` points to `argc` pointers, each NULL
/// (only with a length of 0) or valid for its length (or NUL-terminated when `argv_len` is NULL);
/// `argv_len` is NULL or points to `argc` lengths.
#[no_mangle]
pub unsafe extern "C" fn sr_client_execute(
    client: *mut sr_client_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    callback: sr_reply_cb,
    user_data: *mut c_void,
) -> c_int {
    sr_client_execute_with(
        client,
        argc,
        argv,
        argv_len,
        std::ptr::null(),
        callback,
        user_data,
    )
}

/// sr_client_execute() with options: a deadline of its own (`options->timeout_ms`) and a cancel
/// handle (`options->operation`). `options` may be NULL. Returns and calls back as
/// sr_client_execute().
///
/// # Safety
/// As sr_client_execute(); `options` is NULL or points to valid options whose `operation` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_execute_with(
    client: *mut sr_client_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    options: *const sr_call_options_t,
    callback: sr_reply_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        client_call(client, options, |handle, timeout| {
            let cb = required(callback, "callback")?;
            let args = arguments(argc, argv, argv_len)?;
            Ok(handle.execute(&args, timeout, reply_to(cb, user_data)))
        })
    })
}

/// Sends one command and blocks the calling thread (only it) until its reply or its deadline,
/// the client's `command_timeout_ms` option (default 5000 ms; set it per client with
/// sr_client_open() options). Arguments as for sr_client_execute().
///
/// On SR_OK `*reply` receives an owned reply (free with sr_reply_free()). Otherwise `*reply` is
/// NULL and `*error` (if `error` is not NULL) receives an owned error; an error reply from the
/// server is SR_ERR_SERVER. Refused (SR_ERR_CONFIG) inside a callback, where waiting could
/// stall the threads the reply needs.
///
/// # Safety
/// As sr_client_execute(); `reply` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_execute_blocking(
    client: *mut sr_client_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    reply: *mut *mut sr_reply_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    sr_client_execute_blocking_with(client, argc, argv, argv_len, std::ptr::null(), reply, error)
}

/// sr_client_execute_blocking() with a deadline of its own (`options->timeout_ms`; the
/// `operation` field is ignored: a blocking call is not cancelled from another thread).
/// `options` may be NULL.
///
/// # Safety
/// As sr_client_execute_blocking(); `options` is NULL or points to valid options.
#[no_mangle]
pub unsafe extern "C" fn sr_client_execute_blocking_with(
    client: *mut sr_client_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    options: *const sr_call_options_t,
    reply: *mut *mut sr_reply_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let reply = out_param(reply, "reply")?;
        let timeout = deadline(options);
        let h = acquire(client)?;
        let args = arguments(argc, argv, argv_len)?;
        let value = waiter.wait(|done| h.handle.execute_here(&args, timeout, done, None))?;
        *reply = into_owned_reply(value);
        Ok(())
    })
}

/// Sends `n` commands back to back on one connection and returns at once; `callback` gets one
/// result per command, in order (see sr_results_cb). Not atomic: use a transaction for that.
/// Reads go to a replica (per `read_from`) only when every command is a read; the pipeline is
/// retried as a whole only when nothing was sent. `options` (NULL for defaults) sets the whole
/// pipeline's deadline and asks for a cancel handle. `n` may be 0 (the callback then gets 0
/// results). The commands are copied before this returns.
///
/// Returns SR_OK when accepted (the callback is then called exactly once), otherwise
/// SR_ERR_INVALID_ARGUMENT (NULL client or callback, a malformed command) or SR_ERR_CLOSED and
/// the callback is never called. A command the pipeline can't carry (MULTI, BLPOP, ...) fails
/// the whole pipeline through the callback with SR_ERR_CONFIG, nothing sent.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `commands` points to `n` valid commands (see
/// sr_command_t); `options` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn sr_client_pipeline(
    client: *mut sr_client_t,
    commands: *const sr_command_t,
    n: usize,
    options: *const sr_call_options_t,
    callback: sr_results_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        client_call(client, options, |handle, timeout| {
            let cb = required(callback, "callback")?;
            let cmds = command_list(commands, n)?;
            let user_data = UserData::new(user_data);
            Ok(handle.pipeline(
                &cmds,
                timeout,
                Box::new(move |result: sr::Result<Vec<sr::Result<Value>>>| {
                    deliver_results(cb, user_data.get(), result.map(Some))
                }),
            ))
        })
    })
}

/// sr_client_pipeline() that blocks the calling thread (only it) until the results or the
/// deadline. On SR_OK `*results` receives owned results (free with sr_results_free()); otherwise
/// it is NULL and `*error` (if not NULL) receives an owned error. Refused (SR_ERR_CONFIG) inside
/// a callback.
///
/// # Safety
/// As sr_client_pipeline(); `results` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_pipeline_blocking(
    client: *mut sr_client_t,
    commands: *const sr_command_t,
    n: usize,
    options: *const sr_call_options_t,
    results: *mut *mut sr_results_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let results = out_param(results, "results")?;
        let timeout = deadline(options);
        let h = acquire(client)?;
        let cmds = command_list(commands, n)?;
        let items = waiter.wait(|done| h.handle.pipeline(&cmds, timeout, done))?;
        *results = into_owned_results(items);
        Ok(())
    })
}

/// sr_client_execute_with() whose completion goes to `mailbox` instead of a callback: it queues
/// there as an SR_DELIVERY_COMPLETION carrying `op_id` (any value you choose, e.g. an index into
/// a table of your pending calls) and the reply or error, for your thread to take with
/// sr_mailbox_drain(). Nothing of yours runs on a core thread.
///
/// Returns SR_OK when the command was accepted: exactly one completion with `op_id` then reaches
/// the mailbox (see sr_mailbox_t for the rule when the mailbox is closed first). Any other code
/// means it was not accepted and no completion comes: SR_ERR_INVALID_ARGUMENT (NULL client,
/// mailbox or argv, argc 0), SR_ERR_CLOSED (client or mailbox closed).
///
/// # Safety
/// As sr_client_execute_with(); `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_execute_into(
    client: *mut sr_client_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    options: *const sr_call_options_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let args = arguments(argc, argv, argv_len)?;
        client_into(
            client,
            options,
            mailbox,
            op_id,
            reply_into,
            |handle, timeout, done| handle.execute(&args, timeout, done),
        )
    })
}

/// sr_client_pipeline() whose completion goes to `mailbox` as `op_id`'s SR_DELIVERY_COMPLETION
/// (`results`, or `error` when it failed as a whole), as sr_client_execute_into(). Returns as
/// sr_client_execute_into().
///
/// # Safety
/// As sr_client_pipeline(); `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_pipeline_into(
    client: *mut sr_client_t,
    commands: *const sr_command_t,
    n: usize,
    options: *const sr_call_options_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let cmds = command_list(commands, n)?;
        client_into(
            client,
            options,
            mailbox,
            op_id,
            results_into,
            |handle, timeout, done| handle.pipeline(&cmds, timeout, done),
        )
    })
}

/// The current topology snapshot, without waiting on network work. On SR_OK `*topology`
/// receives an owned snapshot (free with sr_topology_free()); otherwise it is NULL and the error
/// is SR_ERR_INVALID_ARGUMENT or SR_ERR_CLOSED.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `topology` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_topology(
    client: *mut sr_client_t,
    topology: *mut *mut sr_topology_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    report(error, || {
        let topology = out_param(topology, "topology")?;
        let h = acquire(client)?;
        *topology = topology_to_c(&h.handle.topology()?);
        Ok(())
    })
}

/// Installs `callback` (with its `user_data`) as the client's event callback, replacing any
/// earlier one, or removes it when `callback` is NULL. When this returns, the earlier callback is
/// not running and will never be called again (except: called from inside that very callback,
/// its current run finishes first), so its `user_data` may be released.
///
/// Returns SR_OK, SR_ERR_INVALID_ARGUMENT (NULL client, or installing a callback from inside
/// this client's event callback) or SR_ERR_CLOSED.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `user_data` stays valid until the callback is
/// replaced or removed, or the client closed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_set_event_callback(
    client: *mut sr_client_t,
    callback: sr_event_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        let handler = callback.map(|cb| {
            let user_data = UserData::new(user_data);
            Box::new(move |event: &Event| {
                let Ok(boxed) = std::panic::catch_unwind(|| EventBox::new(event)) else {
                    return;
                };
                // SAFETY: the host promised a valid callback; the event lives until it returns.
                unsafe { cb(user_data.get(), boxed.view()) };
            }) as EventHandler
        });
        install_events(
            client,
            || Ok(handler),
            "an event callback can't install another one",
        )
    })
}

/// Replaces the client's event handler (callback or mailbox) with the one `make` gives, or
/// removes it for `None`: the one body of sr_client_set_event_callback() and
/// sr_client_set_event_mailbox(). Installing from inside the client's own event callback is
/// refused with `inside` (removing is not).
///
/// # Safety
/// `client` is NULL or a handle not yet freed.
unsafe fn install_events(
    client: *mut sr_client_t,
    make: impl FnOnce() -> Result<Option<EventHandler>, sr_error_t>,
    inside: &str,
) -> Result<(), sr_error_t> {
    let h = acquire(client)?;
    let handler = make()?;
    h.handle.accept(|handle| {
        let mut installed = lock(&h.events);
        let Some(handler) = handler else {
            if let Some(old) = installed.take() {
                old.remove();
            }
            return Ok(());
        };
        if handle.in_callback() {
            return Err(sr_error_t::invalid(inside));
        }
        if let Some(old) = installed.take() {
            old.remove();
        }
        *installed = Some(handle.subscribe_events_from_start(handler)?);
        Ok(())
    })?
}

/// Sends the client's topology events to `mailbox` (SR_DELIVERY_EVENT deliveries, in order),
/// replacing any event callback or earlier mailbox, or stops them when `mailbox` is NULL. The
/// first event reflects the current state: when a primary is known it is a primary_changed from
/// none to it, so an early change is never missed. When this returns, the earlier callback is
/// not running and will never be called again; events already queued in an earlier mailbox stay
/// there.
///
/// Returns SR_OK, SR_ERR_INVALID_ARGUMENT (NULL client, or called from inside the client's event
/// callback with a mailbox), SR_ERR_CLOSED (client or mailbox closed).
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_set_event_mailbox(
    client: *mut sr_client_t,
    mailbox: *const sr_mailbox_t,
) -> c_int {
    start(|| {
        install_events(
            client,
            || match mailbox.is_null() {
                true => Ok(None),
                false => Ok(Some(
                    Box::new(events_into(&*acquire_mailbox(mailbox)?)?) as EventHandler
                )),
            },
            "an event callback can't install an event mailbox",
        )
    })
}

/// Closes the client: stops its event callback, fails its waiting commands with SR_ERR_CLOSED
/// and releases its connections (and, for the last client of a service, the shared sentinel
/// monitor). The handle stays valid until sr_client_free(); every later call on it gives
/// SR_ERR_CLOSED.
///
/// From a host thread it blocks until the close is done and every completion of this client's
/// commands has been delivered: after it returns, no callback of this client runs (so
/// `user_data` given to it may be released; do not hold a lock that a callback takes while
/// calling it). From inside a callback (a core thread) it does not wait: the event callback is
/// never called again after it returns, and the rest of the close runs in the background;
/// completions of other commands still in flight are still delivered, each once, on core
/// threads, typically with SR_ERR_CLOSED.
///
/// Returns SR_OK, SR_ERR_CLOSED if the client was already closed (or is being closed by another
/// thread), SR_ERR_INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `client` is NULL or a handle not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_close(client: *mut sr_client_t) -> c_int {
    guard(|| match acquire(client) {
        Ok(h) => h.close(),
        Err(e) => e.code(),
    })
}

/// Closes the client if it is still open (as sr_client_close()) and releases the handle; the
/// pointer must not be used afterwards. NULL is ignored. Memory still needed by completions in
/// flight (possible only when freed from inside a callback) is released after the last of them.
///
/// # Safety
/// `client` is NULL or a handle from sr_client_open(), not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_free(client: *mut sr_client_t) {
    guard(|| {
        if let Some(h) = free_arc(client) {
            let _ = h.close();
        }
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;
    use std::ptr::{null, null_mut};

    use super::{sr_client_close, sr_client_free, sr_client_open, sr_option_t};
    use crate::codes::{SR_ERR_CONFIG, SR_ERR_INVALID_ARGUMENT};
    use crate::error::{sr_error_free, sr_error_get_code, sr_error_get_message};

    #[test]
    fn bad_urls_and_nulls_give_codes() {
        unsafe {
            let mut c = null_mut();
            let mut e = null_mut();
            let rc = sr_client_open(c"http://x/y".as_ptr(), null(), 0, &mut c, &mut e);
            assert_eq!(rc, SR_ERR_CONFIG);
            assert!(c.is_null());
            assert_eq!(sr_error_get_code(e), SR_ERR_CONFIG);
            sr_error_free(e);
            assert_eq!(
                sr_client_open(null(), null(), 0, &mut c, null_mut()),
                SR_ERR_INVALID_ARGUMENT
            );
            let opt = sr_option_t {
                key: c"password".as_ptr(),
                value: c"hunter2".as_ptr(),
            };
            let bad = sr_option_t {
                key: c"nope".as_ptr(),
                value: c"1".as_ptr(),
            };
            let opts = [opt, bad];
            let rc = sr_client_open(
                c"redis+sentinel://127.0.0.1:1/m".as_ptr(),
                opts.as_ptr(),
                2,
                &mut c,
                &mut e,
            );
            assert_eq!(rc, SR_ERR_CONFIG);
            let msg = CStr::from_ptr(sr_error_get_message(e)).to_str().unwrap();
            assert!(msg.contains("nope") && !msg.contains("hunter2"), "{msg}");
            sr_error_free(e);
            assert_eq!(sr_client_close(null_mut()), SR_ERR_INVALID_ARGUMENT);
            sr_client_free(null_mut());
        }
    }
}
