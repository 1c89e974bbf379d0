//! Core log records to a host callback, through the core's one log hook.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use sr::host::log;

use crate::codes::SR_ERR_INVALID_ARGUMENT;
use crate::error::{c_string, sr_error_t};
use crate::ffi::{guard, start, UserData, SR_OK};
use crate::mailbox::{acquire_mailbox, logs_into, sr_mailbox_t};

/// Most detailed records.
pub const SR_LOG_TRACE: c_int = 5;
/// Debugging records.
pub const SR_LOG_DEBUG: c_int = 10;
/// Informational records (a primary switch, a reconnect).
pub const SR_LOG_INFO: c_int = 20;
/// Warnings (a sentinel unreachable, a discovery round failed).
pub const SR_LOG_WARN: c_int = 30;
/// Errors.
pub const SR_LOG_ERROR: c_int = 40;

// The header's levels are the core's (the numbers of Python's `logging`): a mismatch fails the
// build.
const _: () = assert!(
    SR_LOG_TRACE == log::TRACE
        && SR_LOG_DEBUG == log::DEBUG
        && SR_LOG_INFO == log::INFO
        && SR_LOG_WARN == log::WARN
        && SR_LOG_ERROR == log::ERROR
);

/// Log callback, installed with sr_set_log_callback(): one call per record at or above the
/// chosen level, on the thread that emitted it (usually a core thread). `level` is one of
/// `SR_LOG_*` (the numbers of Python's `logging`: 5, 10, 20, 30, 40); `target` is the emitting
/// module (`sentinel_recovery`, `sentinel_recovery::monitor::actor`, ...); `message` the text,
/// never containing a password. Both strings are borrowed for the call only. Copy or queue the
/// record and return: do not block, do not unwind, and do not call into this library from it.
pub type sr_log_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: c_int,
        target: *const c_char,
        message: *const c_char,
    ),
>;

/// Installs the process-wide log callback for records at `min_level` (`SR_LOG_*`) or above,
/// replacing any earlier one; `callback` NULL removes it. Once this returns, the earlier
/// callback is not called again, so its `user_data` may be released.
///
/// Returns SR_OK, or SR_ERR_INVALID_ARGUMENT when the process already has another `tracing`
/// subscriber (a Rust host that configured logging itself): nothing is forwarded then.
///
/// # Safety
/// `user_data` stays valid until the callback is replaced or removed; the callback may be
/// called from any thread.
#[no_mangle]
pub unsafe extern "C" fn sr_set_log_callback(
    callback: sr_log_cb,
    user_data: *mut c_void,
    min_level: c_int,
) -> c_int {
    guard(|| {
        let sink: Option<log::LogSink> = callback.map(|cb| {
            let user_data = UserData::new(user_data);
            let sink: log::LogSink = Arc::new(move |level: i32, target: &str, message: &str| {
                let (target, message) = (c_string(target), c_string(message));
                // SAFETY: the host promised a valid callback; the strings live until it returns.
                unsafe { cb(user_data.get(), level, target.as_ptr(), message.as_ptr()) };
            });
            sink
        });
        if log::set_log_sink(sink, min_level) {
            SR_OK
        } else {
            SR_ERR_INVALID_ARGUMENT
        }
    })
}

/// sr_set_log_callback() whose records queue in `mailbox` as SR_DELIVERY_LOG deliveries, in
/// order, for your thread to take with sr_mailbox_drain(), replacing any earlier callback or
/// mailbox; NULL `mailbox` removes it. Records beyond the mailbox's bound are dropped and counted
/// (an SR_DELIVERY_DROPPED delivery in their place), so a stalled host never grows memory.
///
/// Returns SR_OK, SR_ERR_CLOSED (the mailbox is closed), or SR_ERR_INVALID_ARGUMENT when the
/// process already has another `tracing` subscriber.
///
/// # Safety
/// `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_set_log_mailbox(
    mailbox: *const sr_mailbox_t,
    min_level: c_int,
) -> c_int {
    start(|| {
        let sink: Option<log::LogSink> = if mailbox.is_null() {
            None
        } else {
            Some(Arc::new(logs_into(&*acquire_mailbox(mailbox)?)?))
        };
        if log::set_log_sink(sink, min_level) {
            Ok(())
        } else {
            Err(sr_error_t::invalid(
                "the process already has another tracing subscriber",
            ))
        }
    })
}
