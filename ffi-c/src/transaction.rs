//! Transactions: begin on a dedicated connection to the primary, WATCH, read, EXEC; over the
//! core's host layer (which refuses EXEC when the primary changed since the begin).

use std::ffi::{c_char, c_int, c_void};

use sr::host::{Done, HostTransaction, Operation};
use sr::Value;

use crate::args::{arguments, command_list, out_param, sr_command_t};
use crate::client::{acquire, client_call, client_into, required, sr_client_t};
use crate::error::sr_error_t;
use crate::ffi::{blocking, free_box, guard, start, to_boxed_mut_ptr, try_ref, UserData};
use crate::mailbox::{
    acquire_mailbox, began_into, exec_into, reply_into, sr_mailbox_t, MailboxBox,
};
use crate::operation::sr_call_options_t;
use crate::reply::{into_owned_reply, reply_to, sr_reply_cb, sr_reply_t};
use crate::results::{
    deliver_results, exec_results, into_owned_results, sr_results_cb, sr_results_t,
};
use crate::transaction_handle::sr_transaction_t;

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
        client_call(client, options, |handle, timeout| {
            let cb = required(callback, "callback")?;
            let user_data = UserData::new(user_data);
            Ok(handle.begin_transaction(
                timeout,
                Box::new(move |result: sr::Result<HostTransaction>| {
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
                }),
            ))
        })
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
        t.watch(&keys, watched(reply_to(cb, user_data)));
        Ok::<(), sr_error_t>(())
    })
}

/// WATCH's completion as a reply completion: `OK` once the server answered.
fn watched(done: sr::host::Done<Value>) -> sr::host::Done<()> {
    Box::new(move |result: sr::Result<()>| done(result.map(|()| Value::Simple("OK".into()))))
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
                deliver_results(cb, user_data.get(), result.map(exec_results))
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
        if let Some(items) = exec_results(waiter.wait(|done| t.exec(&cmds, done))?) {
            *results = into_owned_results(items);
        }
        Ok(())
    })
}

/// sr_client_transaction_begin() whose completion goes to `mailbox` as `op_id`'s
/// SR_DELIVERY_COMPLETION, as sr_client_execute_into(): `transaction` (owned by you from that
/// delivery on: free it with sr_transaction_free()), or `error`. A transaction whose completion
/// is handed back by sr_mailbox_close() (SR_ERR_CLOSED) is discarded for you. `options` as for
/// sr_client_transaction_begin().
///
/// Returns as sr_client_execute_into(): SR_OK (exactly one completion with `op_id` then comes),
/// SR_ERR_INVALID_ARGUMENT (NULL client or mailbox), SR_ERR_CLOSED (client or mailbox closed).
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `options` is NULL or valid; `mailbox` is NULL or
/// a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_transaction_begin_into(
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
            began_into,
            |handle, timeout, done| handle.begin_transaction(timeout, done),
        )
    })
}

/// Runs `commands` (`n` of them) in MULTI/EXEC on a dedicated connection to the primary, after
/// `WATCH` of the `watch_n` keys in `watch` (`watch_len` NULL for NUL-terminated keys;
/// `watch_n` 0 for none), in one call, and returns at once; `callback` (see sr_results_cb) gets
/// one result per command (a command that failed inside EXEC is an SR_REPLY_ERROR reply in its
/// place), both NULL when a watched key changed (nothing ran), or an error: SR_ERR_CONNECTION_LOST
/// "... nothing was applied" when the primary changed meanwhile, SR_ERR_CONFIG for a command
/// that can't be queued (blocking commands, MULTI, WATCH, ...; nothing sent). `options` (NULL for
/// defaults): `timeout_ms` (0: `command_timeout_ms`) bounds the whole transaction, from this
/// call until EXEC's reply (past it SR_ERR_TIMEOUT, and the transaction's connection is closed:
/// an EXEC sent but not answered may or may not have been applied); `operation` receives a
/// handle that cancels all of it. To read watched keys before EXEC use
/// sr_client_transaction_begin().
///
/// Returns SR_OK when accepted (the callback is then called exactly once), otherwise
/// SR_ERR_INVALID_ARGUMENT (NULL client or callback, NULL commands with `n` > 0, NULL watch with
/// `watch_n` > 0) or SR_ERR_CLOSED, and the callback is never called.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `commands` points to `n` commands as for
/// sr_client_pipeline(); `watch` to `watch_n` keys as sr_client_execute()'s arguments;
/// `options` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn sr_client_transaction(
    client: *mut sr_client_t,
    commands: *const sr_command_t,
    n: usize,
    watch_n: usize,
    watch: *const *const c_char,
    watch_len: *const usize,
    options: *const sr_call_options_t,
    callback: sr_results_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        client_call(client, options, |handle, timeout| {
            let cb = required(callback, "callback")?;
            let (cmds, keys) = composite(commands, n, watch_n, watch, watch_len)?;
            let user_data = UserData::new(user_data);
            Ok(handle.transaction(
                &cmds,
                &keys,
                timeout,
                Box::new(move |result: sr::Result<Option<Vec<Value>>>| {
                    deliver_results(cb, user_data.get(), result.map(exec_results))
                }),
            ))
        })
    })
}

/// A composite transaction's commands and the keys it watches, borrowed from the caller.
type Composite<'a> = (Vec<Vec<&'a [u8]>>, Vec<&'a [u8]>);

/// The commands and watched keys of a composite transaction, checked as for a pipeline's
/// commands and a command's arguments.
///
/// # Safety
/// As sr_client_transaction().
unsafe fn composite<'a>(
    commands: *const sr_command_t,
    n: usize,
    watch_n: usize,
    watch: *const *const c_char,
    watch_len: *const usize,
) -> Result<Composite<'a>, sr_error_t> {
    let cmds = command_list(commands, n)?;
    let keys = match watch_n {
        0 => Vec::new(),
        _ => arguments(watch_n, watch, watch_len)?,
    };
    Ok((cmds, keys))
}

/// sr_client_transaction() whose completion goes to `mailbox` as `op_id`'s
/// SR_DELIVERY_COMPLETION as sr_transaction_exec_into()'s does (`results`, both NULL when a
/// watched key changed, or `error`). Commands, watched keys and `options` as for
/// sr_client_transaction().
///
/// Returns as sr_client_execute_into(): SR_OK (exactly one completion with `op_id` then comes),
/// SR_ERR_INVALID_ARGUMENT (NULL client or mailbox, NULL commands with `n` > 0, NULL watch with
/// `watch_n` > 0), SR_ERR_CLOSED (client or mailbox closed).
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `commands` points to `n` commands as for
/// sr_client_pipeline(); `watch` to `watch_n` keys as sr_client_execute()'s arguments;
/// `options` is NULL or valid; `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_transaction_into(
    client: *mut sr_client_t,
    commands: *const sr_command_t,
    n: usize,
    watch_n: usize,
    watch: *const *const c_char,
    watch_len: *const usize,
    options: *const sr_call_options_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let (cmds, keys) = composite(commands, n, watch_n, watch, watch_len)?;
        client_into(
            client,
            options,
            mailbox,
            op_id,
            exec_into,
            |handle, timeout, done| handle.transaction(&cmds, &keys, timeout, done),
        )
    })
}

/// Starts one step of `transaction` whose completion goes to `mailbox` as `op_id`'s (the body of
/// the transaction steps' `*_into` exports): `into` makes the completion, `step` starts the
/// step. Refused, with no completion ever, for a NULL transaction or mailbox and a closed
/// mailbox.
///
/// # Safety
/// `transaction` is NULL or not yet freed; `mailbox` is NULL or a mailbox not yet freed.
unsafe fn step_into<T>(
    transaction: *const sr_transaction_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
    into: fn(&MailboxBox, u64) -> Result<Done<T>, sr_error_t>,
    step: impl FnOnce(&HostTransaction, Done<T>) -> Operation,
) -> Result<(), sr_error_t> {
    let t = transaction_ref(transaction)?;
    let done = into(&*acquire_mailbox(mailbox)?, op_id)?;
    drop(step(t, done));
    Ok(())
}

/// sr_transaction_watch() whose completion goes to `mailbox` as `op_id`'s
/// SR_DELIVERY_COMPLETION, as sr_client_execute_into(): `reply` (`OK`) or `error`.
///
/// Returns SR_OK (exactly one completion with `op_id` then comes), SR_ERR_INVALID_ARGUMENT
/// (NULL transaction, mailbox or keys, `n` 0) or SR_ERR_CLOSED (the mailbox is closed); a step
/// after EXEC is accepted and completes with SR_ERR_CONFIG.
///
/// # Safety
/// As sr_transaction_watch(); `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_watch_into(
    transaction: *mut sr_transaction_t,
    n: usize,
    keys: *const *const c_char,
    keys_len: *const usize,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let keys = arguments(n, keys, keys_len)?;
        step_into(transaction, mailbox, op_id, reply_into, |t, done| {
            t.watch(&keys, watched(done))
        })
    })
}

/// sr_transaction_execute() whose completion goes to `mailbox` as `op_id`'s
/// SR_DELIVERY_COMPLETION (`reply` or `error`). Returns as sr_transaction_watch_into().
///
/// # Safety
/// As sr_transaction_execute(); `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_execute_into(
    transaction: *mut sr_transaction_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let args = arguments(argc, argv, argv_len)?;
        step_into(transaction, mailbox, op_id, reply_into, |t, done| {
            t.execute(&args, done)
        })
    })
}

/// sr_transaction_exec() whose completion goes to `mailbox` as `op_id`'s
/// SR_DELIVERY_COMPLETION: `results` (one per command), or `results` and `error` both NULL when
/// a watched key changed (nothing ran), or `error` (as for sr_transaction_exec()). Ends the
/// transaction. Returns as sr_transaction_watch_into() (`n` may be 0).
///
/// # Safety
/// As sr_transaction_exec(); `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_exec_into(
    transaction: *mut sr_transaction_t,
    commands_: *const sr_command_t,
    n: usize,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let cmds = command_list(commands_, n)?;
        step_into(transaction, mailbox, op_id, exec_into, |t, done| {
            t.exec(&cmds, done)
        })
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
