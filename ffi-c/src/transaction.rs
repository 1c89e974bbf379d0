//! Transactions: begin on a dedicated connection to the primary, WATCH, read, EXEC; over the
//! core's host layer (which refuses EXEC when the primary changed since the begin).

use std::ffi::{c_char, c_int, c_void};

use sr::host::{ApiNames, HostTransaction};
use sr::Value;

use sr::host::Handle;

use crate::calls::{
    call_options, clear_operation, commands, deliver_results, give_operation, sr_call_options_t,
    sr_command_t, sr_results_cb, sr_results_t,
};
use crate::client::{acquire, arguments, reply_to, UserData};
use crate::*;

/// How the C API is named in error hints (MULTI refused on the shared connection, ...).
pub(crate) static C_API: ApiNames = ApiNames {
    transaction: "sr_client_transaction_begin() and sr_transaction_exec()",
    watch: "sr_client_transaction_begin() and sr_transaction_watch()",
};

/// A transaction on a dedicated connection to the primary it began on.
///
/// Opaque, owned by the caller from the sr_transaction_cb that delivered it (or from
/// sr_client_transaction_begin_blocking()): free it with
/// sr_transaction_free() (which discards it if EXEC has not run). Use it from one thread at a
/// time or from callbacks; steps run in the order they were started. After
/// sr_transaction_exec(), further steps fail with SR_ERR_CONFIG ("the transaction has ended").
pub struct sr_transaction_t {
    tx: HostTransaction,
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
/// handle; its `timeout_ms` is not used (a transaction's steps use `command_timeout_ms`).
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
    boundary!(SR_ERR_INTERNAL, {
        let (_, operation_out) = call_options(options);
        clear_operation(operation_out);
        let Some(h) = acquire(client) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let Some(cb) = callback else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        if h.handle().is_closed() {
            return SR_ERR_CLOSED;
        }
        let user_data = UserData(user_data);
        let operation =
            h.handle()
                .begin_transaction(Box::new(move |result: sr::Result<HostTransaction>| {
                    let user_data = user_data.get();
                    // SAFETY: the host promised a valid callback.
                    unsafe {
                        match result {
                            Ok(tx) => {
                                let tx = Box::into_raw(Box::new(sr_transaction_t { tx }));
                                cb(user_data, tx, std::ptr::null());
                            }
                            Err(e) => cb(user_data, std::ptr::null_mut(), &sr_error_t::from(e)),
                        }
                    }
                }));
        give_operation(operation_out, operation);
        SR_OK
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
    boundary!(SR_ERR_INTERNAL, {
        let Some(t) = transaction.as_ref() else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let Some(cb) = callback else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let keys = match arguments(n, keys, keys_len) {
            Ok(k) => k,
            Err(e) => return e.code(),
        };
        let done = reply_to(cb, user_data);
        t.tx.watch(
            &keys,
            Box::new(move |result: sr::Result<()>| {
                done(result.map(|()| Value::Simple("OK".into())))
            }),
        );
        SR_OK
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
    boundary!(SR_ERR_INTERNAL, {
        let Some(t) = transaction.as_ref() else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let Some(cb) = callback else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let args = match arguments(argc, argv, argv_len) {
            Ok(a) => a,
            Err(e) => return e.code(),
        };
        t.tx.execute(&args, reply_to(cb, user_data));
        SR_OK
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
    boundary!(SR_ERR_INTERNAL, {
        let Some(t) = transaction.as_ref() else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let Some(cb) = callback else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let cmds = match commands(commands_, n) {
            Ok(c) => c,
            Err(e) => return e.code(),
        };
        let user_data = UserData(user_data);
        t.tx.exec(
            &cmds,
            Box::new(move |result: sr::Result<Option<Vec<Value>>>| {
                let result = result.map(|r| r.map(|values| values.into_iter().map(Ok).collect()));
                deliver_results(cb, user_data.get(), result)
            }),
        );
        SR_OK
    })
}

/// Refuses a blocking call on a core thread (inside a callback), where waiting could stall the
/// threads the reply needs.
fn refuse_inside_callback(name: &str) -> Result<(), sr_error_t> {
    if sr::runtime::on_core_thread() {
        return Err(sr_error_t::invalid(&format!(
            "{name} can't wait inside a callback; use its callback form"
        )));
    }
    Ok(())
}

/// sr_client_transaction_begin() that blocks the calling thread (only it): on SR_OK
/// `*transaction` receives the transaction (free it with sr_transaction_free()); otherwise it is
/// NULL and `*error` (if not NULL) receives an owned error. Refused (SR_ERR_INVALID_ARGUMENT)
/// inside a callback.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `transaction` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_transaction_begin_blocking(
    client: *mut sr_client_t,
    transaction: *mut *mut sr_transaction_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    boundary!(fail(error, sr_error_t::panic()), {
        clear_error(error);
        if transaction.is_null() {
            return fail(
                error,
                sr_error_t::invalid("the transaction out-parameter is NULL"),
            );
        }
        *transaction = std::ptr::null_mut();
        let Some(h) = acquire(client) else {
            return fail(error, sr_error_t::invalid("client is NULL"));
        };
        if let Err(e) = refuse_inside_callback("sr_client_transaction_begin_blocking") {
            return fail(error, e);
        }
        match Handle::block(|done| h.handle().begin_transaction(done)) {
            Ok(tx) => {
                *transaction = Box::into_raw(Box::new(sr_transaction_t { tx }));
                SR_OK
            }
            Err(e) => fail(error, e.into()),
        }
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
    boundary!(fail(error, sr_error_t::panic()), {
        clear_error(error);
        let Some(t) = transaction.as_ref() else {
            return fail(error, sr_error_t::invalid("transaction is NULL"));
        };
        let keys = match arguments(n, keys, keys_len) {
            Ok(k) => k,
            Err(e) => return fail(error, e),
        };
        if let Err(e) = refuse_inside_callback("sr_transaction_watch_blocking") {
            return fail(error, e);
        }
        match Handle::block(|done| t.tx.watch(&keys, done)) {
            Ok(()) => SR_OK,
            Err(e) => fail(error, e.into()),
        }
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
    boundary!(fail(error, sr_error_t::panic()), {
        clear_error(error);
        if reply.is_null() {
            return fail(
                error,
                sr_error_t::invalid("the reply out-parameter is NULL"),
            );
        }
        *reply = std::ptr::null_mut();
        let Some(t) = transaction.as_ref() else {
            return fail(error, sr_error_t::invalid("transaction is NULL"));
        };
        let args = match arguments(argc, argv, argv_len) {
            Ok(a) => a,
            Err(e) => return fail(error, e),
        };
        if let Err(e) = refuse_inside_callback("sr_transaction_execute_blocking") {
            return fail(error, e);
        }
        match Handle::block(|done| t.tx.execute(&args, done)) {
            Ok(v) => {
                *reply = into_owned_reply(v);
                SR_OK
            }
            Err(e) => fail(error, e.into()),
        }
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
    boundary!(fail(error, sr_error_t::panic()), {
        clear_error(error);
        if results.is_null() {
            return fail(
                error,
                sr_error_t::invalid("the results out-parameter is NULL"),
            );
        }
        *results = std::ptr::null_mut();
        let Some(t) = transaction.as_ref() else {
            return fail(error, sr_error_t::invalid("transaction is NULL"));
        };
        let cmds = match commands(commands_, n) {
            Ok(c) => c,
            Err(e) => return fail(error, e),
        };
        if let Err(e) = refuse_inside_callback("sr_transaction_exec_blocking") {
            return fail(error, e);
        }
        match Handle::block(|done| t.tx.exec(&cmds, done)) {
            Ok(Some(values)) => {
                let items = values.into_iter().map(Ok).collect();
                *results = Box::into_raw(Box::new(sr_results_t::new(items)));
                SR_OK
            }
            Ok(None) => SR_OK,
            Err(e) => fail(error, e.into()),
        }
    })
}

/// Frees the transaction, discarding it (its connection closes) unless EXEC already ran.
/// Steps still running complete as usual. NULL is ignored.
///
/// # Safety
/// `transaction` is NULL or from sr_client_transaction_begin(), not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_transaction_free(transaction: *mut sr_transaction_t) {
    boundary!((), {
        if !transaction.is_null() {
            let t = Box::from_raw(transaction);
            t.tx.discard();
        }
    })
}
