//! Transactions: begin on a dedicated connection to the primary, WATCH, read, EXEC; over the
//! core's host layer (which refuses EXEC when the primary changed since the begin).

use std::ffi::{c_char, c_int, c_void};

use sr::host::HostTransaction;
use sr::Value;

use crate::args::{arguments, command_list, out_param, sr_command_t};
use crate::client::{acquire, required, sr_client_t};
use crate::error::sr_error_t;
use crate::ffi::{
    blocking, free_box, guard, start, to_boxed_mut_ptr, try_ref, Castable, OwnedBox, UserData,
};
use crate::operation::{call_options, give_operation, sr_call_options_t};
use crate::reply::{into_owned_reply, reply_to, sr_reply_cb, sr_reply_t};
use crate::results::{deliver_results, into_owned_results, sr_results_cb, sr_results_t};

/// A transaction on a dedicated connection to the primary it began on.
///
/// Opaque, owned by the caller from the sr_transaction_cb that delivered it (or from
/// sr_client_transaction_begin_blocking()): free it with
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

/// The transaction behind `transaction`, or the error naming it NULL.
///
/// # Safety
/// `transaction` is NULL or not yet freed, for `'a`.
unsafe fn transaction_ref<'a>(
    transaction: *const sr_transaction_t,
) -> Result<&'a HostTransaction, sr_error_t> {
    try_ref(transaction).ok_or_else(|| sr_error_t::invalid("transaction is NULL"))
}

/// Completion of sr_client_transaction_begin(): exactly once, on a core thread. Either
/// `transaction` is non-NULL (owned by the callee: free it with sr_transaction_free(), from any
/// thread) and `error` NULL, or `transaction` NULL and `error` non-NULL (borrowed for the call).
pub type sr_transaction_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        transaction: *mut sr_transaction_t,
        error: *const sr_error_t,
    ),
>;

/// Begins a transaction (MULTI/EXEC with optional WATCH) on a dedicated connection to the
/// current primary, waiting for one up to the deadline like a command, and returns at once;
/// `callback` receives the transaction. `options` (NULL for defaults) may ask for a cancel
/// handle. Its `timeout_ms` (0: none) is the transaction's own deadline and bounds all of it,
/// from this call until sr_transaction_exec() completes: each step (begin, watch, execute,
/// exec) may only use the time left, and one started or still running when it passes fails
/// with SR_ERR_TIMEOUT and ends the transaction (its connection is closed, so nothing stays
/// queued or blocked on the server; later steps fail with SR_ERR_CONFIG, "the transaction has
/// ended"). An EXEC that timed out may or may not have been applied. Without it, the begin
/// waits up to `command_timeout_ms` and each step gets `command_timeout_ms` of its own (as
/// with sr_client_transaction_begin_blocking(), which has no options).
///
/// Returns SR_OK when accepted (the callback is then called exactly once), otherwise
/// SR_ERR_INVALID_ARGUMENT or SR_ERR_CLOSED.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `options` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn sr_client_transaction_begin(
    client: *mut sr_client_t,
    options: *const sr_call_options_t,
    callback: sr_transaction_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        let (timeout, operation_out) = call_options(options);
        let h = acquire(client)?;
        let cb = required(callback, "callback")?;
        let user_data = UserData::new(user_data);
        let operation = h.handle.accept(|handle| {
            let begin_transaction = |done| handle.begin_transaction(timeout, done);
            begin_transaction(Box::new(move |result: sr::Result<HostTransaction>| {
                let user_data = user_data.get();
                // SAFETY: the host promised a valid callback.
                unsafe {
                    match result {
                        Ok(tx) => cb(
                            user_data,
                            to_boxed_mut_ptr::<sr_transaction_t>(tx),
                            std::ptr::null(),
                        ),
                        Err(e) => cb(user_data, std::ptr::null_mut(), &sr_error_t::from(e)),
                    }
                }
            }))
        })?;
        give_operation(operation_out, operation);
        Ok::<(), sr_error_t>(())
    })
}

/// `WATCH keys...` on the transaction's connection: sr_transaction_exec() then reports that a
/// watched key changed (results and error both NULL) and runs nothing. `callback` gets the
/// reply (`OK`) or the error, as sr_reply_cb. Keys as sr_client_execute()'s arguments
/// (`keys_len` NULL for NUL-terminated keys); `n` > 0.
///
/// Returns SR_OK when accepted (the callback is then called exactly once), otherwise
/// SR_ERR_INVALID_ARGUMENT.
///
/// # Safety
/// `transaction` is NULL or not yet freed; `keys` points to `n` keys as for sr_client_execute().
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_watch(
    transaction: *mut sr_transaction_t,
    n: usize,
    keys: *const *const c_char,
    keys_len: *const usize,
    callback: sr_reply_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        let t = transaction_ref(transaction)?;
        let cb = required(callback, "callback")?;
        let keys = arguments(n, keys, keys_len)?;
        let done = reply_to(cb, user_data);
        t.watch(
            &keys,
            Box::new(move |result: sr::Result<()>| {
                done(result.map(|()| Value::Simple("OK".into())))
            }),
        );
        Ok::<(), sr_error_t>(())
    })
}

/// Runs one command now on the transaction's connection (typically a read of a watched key
/// before EXEC); `callback` as for sr_client_execute().
///
/// # Safety
/// `transaction` is NULL or not yet freed; arguments as for sr_client_execute().
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_execute(
    transaction: *mut sr_transaction_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    callback: sr_reply_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        let t = transaction_ref(transaction)?;
        let cb = required(callback, "callback")?;
        let args = arguments(argc, argv, argv_len)?;
        t.execute(&args, reply_to(cb, user_data));
        Ok::<(), sr_error_t>(())
    })
}

/// Runs the `n` commands atomically as MULTI ... EXEC and ends the transaction. `callback`
/// (see sr_results_cb) gets one result per command (a command that failed inside EXEC is an
/// SR_REPLY_ERROR reply in its place), or both NULL when a watched key changed (nothing ran),
/// or an error: SR_ERR_CONNECTION_LOST "... nothing was applied" when the primary changed since
/// the transaction began (a failover: begin again on the new primary), SR_ERR_CONFIG for a
/// command that can't be queued (blocking commands, MULTI, WATCH, ...).
///
/// # Safety
/// `transaction` is NULL or not yet freed; `commands` points to `n` valid commands.
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_exec(
    transaction: *mut sr_transaction_t,
    commands_: *const sr_command_t,
    n: usize,
    callback: sr_results_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        let t = transaction_ref(transaction)?;
        let cb = required(callback, "callback")?;
        let cmds = command_list(commands_, n)?;
        let user_data = UserData::new(user_data);
        t.exec(
            &cmds,
            Box::new(move |result: sr::Result<Option<Vec<Value>>>| {
                let result = result.map(|r| r.map(|values| values.into_iter().map(Ok).collect()));
                deliver_results(cb, user_data.get(), result)
            }),
        );
        Ok::<(), sr_error_t>(())
    })
}

/// sr_client_transaction_begin() that blocks the calling thread (only it): on SR_OK
/// `*transaction` receives the transaction (free it with sr_transaction_free()); otherwise it is
/// NULL and `*error` (if not NULL) receives an owned error. Refused (SR_ERR_CONFIG)
/// inside a callback. It has no options: the transaction has no deadline of its own (the begin
/// and each step get `command_timeout_ms`); for one, use sr_client_transaction_begin().
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `transaction` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_transaction_begin_blocking(
    client: *mut sr_client_t,
    transaction: *mut *mut sr_transaction_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let transaction = out_param(transaction, "transaction")?;
        let h = acquire(client)?;
        let tx = waiter.wait(|done| h.handle.begin_transaction(None, done))?;
        *transaction = to_boxed_mut_ptr::<sr_transaction_t>(tx);
        Ok(())
    })
}

/// sr_transaction_watch() that blocks the calling thread until the server answered.
///
/// # Safety
/// As sr_transaction_watch(); `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_watch_blocking(
    transaction: *mut sr_transaction_t,
    n: usize,
    keys: *const *const c_char,
    keys_len: *const usize,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let t = transaction_ref(transaction)?;
        let keys = arguments(n, keys, keys_len)?;
        Ok(waiter.wait(|done| t.watch(&keys, done))?)
    })
}

/// sr_transaction_execute() that blocks the calling thread: on SR_OK `*reply` receives an owned
/// reply (free with sr_reply_free()).
///
/// # Safety
/// As sr_transaction_execute(); `reply` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_execute_blocking(
    transaction: *mut sr_transaction_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    reply: *mut *mut sr_reply_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let reply = out_param(reply, "reply")?;
        let t = transaction_ref(transaction)?;
        let args = arguments(argc, argv, argv_len)?;
        *reply = into_owned_reply(waiter.wait(|done| t.execute(&args, done))?);
        Ok(())
    })
}

/// sr_transaction_exec() that blocks the calling thread: on SR_OK `*results` receives owned
/// results (free with sr_results_free()), or NULL when a watched key changed (nothing ran);
/// otherwise `*error` (if not NULL) receives the error, e.g. SR_ERR_CONNECTION_LOST "nothing
/// was applied" after a primary change.
///
/// # Safety
/// As sr_transaction_exec(); `results` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_exec_blocking(
    transaction: *mut sr_transaction_t,
    commands_: *const sr_command_t,
    n: usize,
    results: *mut *mut sr_results_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let results = out_param(results, "results")?;
        let t = transaction_ref(transaction)?;
        let cmds = command_list(commands_, n)?;
        if let Some(values) = waiter.wait(|done| t.exec(&cmds, done))? {
            *results = into_owned_results(values.into_iter().map(Ok).collect());
        }
        Ok(())
    })
}

/// Frees the transaction, discarding it (its connection closes) unless EXEC already ran.
/// Steps still running complete as usual. NULL is ignored.
///
/// # Safety
/// `transaction` is NULL or from sr_client_transaction_begin(), not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_free(transaction: *mut sr_transaction_t) {
    guard(|| {
        if let Some(t) = free_box(transaction) {
            t.discard();
        }
    })
}
