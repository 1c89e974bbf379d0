//! Per-call options (deadline, cancel handle), pipelines and their results: conversions over the
//! core's host layer, nothing more.

use std::ffi::{c_char, c_int, c_void};
use std::time::Duration;

use sr::host::{Handle, Operation};
use sr::Value;

use crate::client::{acquire, arguments, reply_to, UserData};
use crate::*;

/// Options of one call, all optional: pass NULL for the defaults, or a zeroed struct with the
/// fields you need set. Borrowed for the duration of the call only.
#[repr(C)]
pub struct sr_call_options_t {
    /// The call's deadline in milliseconds, instead of the client's `command_timeout_ms`; 0 for
    /// that default. For a blocking command (BLPOP, ...) it is added to how long it may block.
    pub timeout_ms: u64,
    /// NULL, or where to store a cancel handle for the started call (callback forms only; set to
    /// NULL when the call is not accepted). Free it with sr_operation_free().
    pub operation: *mut *mut sr_operation_t,
}

/// A started call that can be cancelled with sr_operation_cancel().
///
/// Opaque, owned by the caller: free it with sr_operation_free() (freeing does not cancel). It
/// stays valid after the call completed and after its client was freed; cancelling then does
/// nothing.
pub struct sr_operation_t {
    operation: Operation,
}

/// The results of a pipeline or of a transaction's EXEC: one per command, in order, each a
/// reply or that command's own error.
///
/// Opaque. Borrowed when passed to an sr_results_cb (valid during the call only); owned when
/// returned by sr_client_pipeline_blocking() or sr_transaction_exec_blocking() (free with
/// sr_results_free()).
pub struct sr_results_t {
    items: Vec<Result<Value, sr_error_t>>,
}

/// One command of a pipeline or transaction: arguments as for sr_client_execute() (`argv_len`
/// may be NULL when every argument is a NUL-terminated string).
#[repr(C)]
pub struct sr_command_t {
    /// Number of arguments (> 0), the command name first.
    pub argc: usize,
    /// The arguments.
    pub argv: *const *const c_char,
    /// Their lengths, or NULL.
    pub argv_len: *const usize,
}

/// Completion of sr_client_pipeline() and sr_transaction_exec(): exactly one call per accepted
/// call, on a core thread. `results` (one per command) is non-NULL and `error` NULL when the
/// commands were sent and answered; `results` NULL and `error` non-NULL when the call failed as
/// a whole (no node within the deadline, cancelled, closed, ...). For sr_transaction_exec()
/// both NULL means a watched key changed and nothing ran. Both are borrowed for the call only;
/// the same rules as sr_reply_cb apply (do not block, do not unwind).
pub type sr_results_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        results: *const sr_results_t,
        error: *const sr_error_t,
    ),
>;

impl sr_results_t {
    pub(crate) fn new(items: Vec<sr::Result<Value>>) -> sr_results_t {
        sr_results_t {
            items: items
                .into_iter()
                .map(|r| r.map_err(sr_error_t::from))
                .collect(),
        }
    }
}

/// The options' deadline (`None`: the client's own) and where the cancel handle goes.
pub(crate) unsafe fn call_options(
    options: *const sr_call_options_t,
) -> (Option<Duration>, *mut *mut sr_operation_t) {
    match options.as_ref() {
        None => (None, std::ptr::null_mut()),
        Some(o) => (
            (o.timeout_ms > 0).then(|| Duration::from_millis(o.timeout_ms)),
            o.operation,
        ),
    }
}

/// Clears the cancel-handle out-parameter (before a call may be refused).
pub(crate) unsafe fn clear_operation(out: *mut *mut sr_operation_t) {
    if !out.is_null() {
        *out = std::ptr::null_mut();
    }
}

/// Hands out `operation` when the caller asked for it.
pub(crate) unsafe fn give_operation(out: *mut *mut sr_operation_t, operation: Operation) {
    if !out.is_null() {
        *out = Box::into_raw(Box::new(sr_operation_t { operation }));
    }
}

/// Every command's arguments, borrowed from the caller for the call.
pub(crate) unsafe fn commands<'a>(
    commands: *const sr_command_t,
    n: usize,
) -> Result<Vec<Vec<&'a [u8]>>, sr_error_t> {
    if commands.is_null() && n > 0 {
        return Err(sr_error_t::invalid("commands is NULL but n > 0"));
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    std::slice::from_raw_parts(commands, n)
        .iter()
        .enumerate()
        .map(|(i, c)| {
            arguments(c.argc, c.argv, c.argv_len)
                .map_err(|e| sr_error_t::invalid(&format!("command #{i}: {}", e.message())))
        })
        .collect()
}

pub(crate) fn deliver_results(
    cb: unsafe extern "C" fn(*mut c_void, *const sr_results_t, *const sr_error_t),
    user_data: *mut c_void,
    result: sr::Result<Option<Vec<sr::Result<Value>>>>,
) {
    let converted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        result
            .map(|r| r.map(sr_results_t::new))
            .map_err(sr_error_t::from)
    }));
    // SAFETY: the host promised a valid callback; the pointers live until it returns.
    unsafe {
        match converted {
            Ok(Ok(Some(results))) => cb(user_data, &results, std::ptr::null()),
            Ok(Ok(None)) => cb(user_data, std::ptr::null(), std::ptr::null()),
            Ok(Err(e)) => cb(user_data, std::ptr::null(), &e),
            Err(_) => cb(user_data, std::ptr::null(), &sr_error_t::panic()),
        }
    }
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
    boundary!(SR_ERR_INTERNAL, {
        let (timeout, operation_out) = call_options(options);
        clear_operation(operation_out);
        let Some(h) = acquire(client) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let Some(cb) = callback else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let args = match arguments(argc, argv, argv_len) {
            Ok(a) => a,
            Err(e) => return e.code(),
        };
        if h.handle().is_closed() {
            return SR_ERR_CLOSED;
        }
        let operation = h.handle().execute(&args, timeout, reply_to(cb, user_data));
        give_operation(operation_out, operation);
        SR_OK
    })
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
    boundary!(fail(error, sr_error_t::panic()), {
        let (timeout, _) = call_options(options);
        crate::client::execute_blocking(client, argc, argv, argv_len, timeout, reply, error)
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
    boundary!(SR_ERR_INTERNAL, {
        let (timeout, operation_out) = call_options(options);
        clear_operation(operation_out);
        let Some(h) = acquire(client) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let Some(cb) = callback else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let cmds = match crate::calls::commands(commands, n) {
            Ok(c) => c,
            Err(e) => return e.code(),
        };
        if h.handle().is_closed() {
            return SR_ERR_CLOSED;
        }
        let user_data = UserData(user_data);
        let operation = h.handle().pipeline(
            &cmds,
            timeout,
            Box::new(move |result: sr::Result<Vec<sr::Result<Value>>>| {
                deliver_results(cb, user_data.get(), result.map(Some))
            }),
        );
        give_operation(operation_out, operation);
        SR_OK
    })
}

/// sr_client_pipeline() that blocks the calling thread (only it) until the results or the
/// deadline. On SR_OK `*results` receives owned results (free with sr_results_free()); otherwise
/// it is NULL and `*error` (if not NULL) receives an owned error. Refused
/// (SR_ERR_INVALID_ARGUMENT) inside a callback.
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
    boundary!(fail(error, sr_error_t::panic()), {
        clear_error(error);
        if results.is_null() {
            return fail(
                error,
                sr_error_t::invalid("the results out-parameter is NULL"),
            );
        }
        *results = std::ptr::null_mut();
        let (timeout, _) = call_options(options);
        let Some(h) = acquire(client) else {
            return fail(error, sr_error_t::invalid("client is NULL"));
        };
        let cmds = match crate::calls::commands(commands, n) {
            Ok(c) => c,
            Err(e) => return fail(error, e),
        };
        if sr::runtime::on_core_thread() {
            return fail(
                error,
                sr_error_t::invalid(
                    "sr_client_pipeline_blocking can't wait inside a callback; use \
                     sr_client_pipeline",
                ),
            );
        }
        match Handle::block(|done| h.handle().pipeline(&cmds, timeout, done)) {
            Ok(items) => {
                *results = Box::into_raw(Box::new(sr_results_t::new(items)));
                SR_OK
            }
            Err(e) => fail(error, e.into()),
        }
    })
}

/// Cancels the call if it is still running: its callback is then called (once, on a core
/// thread) with SR_ERR_CLOSED and a message saying the caller cancelled it. A command already
/// sent may still have run on the server; it is never retried. After the callback ran this does
/// nothing. NULL is ignored.
///
/// # Safety
/// `operation` is NULL or a handle from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_operation_cancel(operation: *const sr_operation_t) {
    boundary!((), {
        if let Some(o) = operation.as_ref() {
            o.operation.cancel();
        }
    })
}

/// Frees a cancel handle (without cancelling). NULL is ignored.
///
/// # Safety
/// `operation` is NULL or a handle from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_operation_free(operation: *mut sr_operation_t) {
    boundary!((), {
        if !operation.is_null() {
            drop(Box::from_raw(operation));
        }
    })
}

/// Number of results (one per command); 0 for NULL.
///
/// # Safety
/// `results` is NULL or live results from this library.
#[no_mangle]
pub unsafe extern "C" fn sr_results_len(results: *const sr_results_t) -> usize {
    boundary!(0, { results.as_ref().map_or(0, |r| r.items.len()) })
}

/// The reply of command `index`, borrowed from `results`; NULL when that command failed (see
/// sr_results_error()), when `index` is out of range, or for NULL.
///
/// # Safety
/// `results` is NULL or live results from this library.
#[no_mangle]
pub unsafe extern "C" fn sr_results_reply(
    results: *const sr_results_t,
    index: usize,
) -> *const sr_reply_t {
    boundary!(std::ptr::null(), {
        match results.as_ref().and_then(|r| r.items.get(index)) {
            Some(Ok(v)) => as_reply(v),
            _ => std::ptr::null(),
        }
    })
}

/// The error of command `index` (e.g. SR_ERR_SERVER with WRONGTYPE), borrowed from `results`;
/// NULL when that command succeeded, when `index` is out of range, or for NULL.
///
/// # Safety
/// `results` is NULL or live results from this library.
#[no_mangle]
pub unsafe extern "C" fn sr_results_error(
    results: *const sr_results_t,
    index: usize,
) -> *const sr_error_t {
    boundary!(std::ptr::null(), {
        match results.as_ref().and_then(|r| r.items.get(index)) {
            Some(Err(e)) => e,
            _ => std::ptr::null(),
        }
    })
}

/// Frees owned results. NULL is ignored. Never pass results borrowed in a callback.
///
/// # Safety
/// `results` is NULL or owned results from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_results_free(results: *mut sr_results_t) {
    boundary!((), {
        if !results.is_null() {
            drop(Box::from_raw(results));
        }
    })
}
