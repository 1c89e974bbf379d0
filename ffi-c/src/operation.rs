//! Per-call options and the cancel handle of a started call (`sr_operation_t`).

use std::os::raw::c_int;
use std::time::Duration;

use sr::deadline::{call_timeout, Unit};
use sr::host::Operation;

use crate::error::sr_error_t;
use crate::ffi::{free_box, guard, report, to_boxed_mut_ptr, try_ref, Castable, OwnedBox};

/// Options of one call, all optional: pass NULL for the defaults, or a zeroed struct with the
/// fields you need set. Borrowed for the duration of the call only.
#[repr(C)]
pub struct sr_call_options_t {
    /// The call's deadline in milliseconds, instead of the client's `command_timeout_ms`; 0 for
    /// that default (a zeroed struct sets nothing). It ends blocking commands too (BLPOP k 0
    /// included: their connection is closed, so the server stops blocking them); the default
    /// does not count the block a blocking command asked for. More than 2147483647 (2^31 - 1,
    /// the limit every binding shares) fails the call with SR_ERR_CONFIG, nothing sent.
    pub timeout_ms: u64,
    /// NULL, or where to store a cancel handle for the started call (the callback and `*_into`
    /// forms; the blocking forms ignore it; set to NULL when the call is not accepted). Free it
    /// with sr_operation_free().
    pub operation: *mut *mut sr_operation_t,
}

/// A started call that can be cancelled with sr_operation_cancel().
///
/// Opaque, owned by the caller: free it with sr_operation_free() (freeing does not cancel). It
/// stays valid after the call completed and after its client was freed; cancelling then does
/// nothing.
pub struct sr_operation_t {
    _private: [u8; 0],
}

impl Castable for sr_operation_t {
    type Ownership = OwnedBox;
    type RustType = Operation;
}

/// The options' deadline (`None`: the client's own).
///
/// # Safety
/// `options` is NULL or valid.
pub(crate) unsafe fn deadline(options: *const sr_call_options_t) -> Option<Duration> {
    options
        .as_ref()
        .and_then(|o| (o.timeout_ms > 0).then(|| Duration::from_millis(o.timeout_ms)))
}

/// The options' deadline (`None`: the client's own) and where the cancel handle goes, that
/// out-parameter already cleared (before the call may be refused).
///
/// # Safety
/// `options` is NULL or valid, its `operation` NULL or writable.
pub(crate) unsafe fn call_options(
    options: *const sr_call_options_t,
) -> (Option<Duration>, *mut *mut sr_operation_t) {
    let Some(o) = options.as_ref() else {
        return (None, std::ptr::null_mut());
    };
    if !o.operation.is_null() {
        *o.operation = std::ptr::null_mut();
    }
    (deadline(options), o.operation)
}

/// Hands out `operation` when the caller asked for it.
///
/// # Safety
/// `out` is NULL or writable.
pub(crate) unsafe fn give_operation(out: *mut *mut sr_operation_t, operation: Operation) {
    if !out.is_null() {
        *out = to_boxed_mut_ptr::<sr_operation_t>(operation);
    }
}

/// The rule every binding keeps for a call's own timeout, for hosts whose timeouts are numbers
/// of their own (.NET's `TimeSpan`, a `double` of a config file): `ms` must be greater than 0
/// and at most 2147483647; 0, negative, NaN and infinite values are refused. On SR_OK
/// `*timeout_ms` receives it in whole milliseconds for sr_call_options_t (a fraction rounds up,
/// so it never becomes the 0 that means "not set"); otherwise it returns SR_ERR_CONFIG (or
/// SR_ERR_INVALID_ARGUMENT for a NULL `timeout_ms`) with an owned `*error` (if not NULL) whose
/// message names the value.
///
/// # Safety
/// `timeout_ms` is NULL or writable; `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_call_timeout_ms(
    ms: f64,
    timeout_ms: *mut u64,
    error: *mut *mut sr_error_t,
) -> c_int {
    report(error, || {
        let out = timeout_ms
            .as_mut()
            .ok_or_else(|| sr_error_t::invalid("timeout_ms is NULL"))?;
        let timeout = call_timeout(ms, Unit::Milliseconds)?;
        // At most 2^31 - 1 ms: the conversion cannot truncate.
        *out = timeout.as_nanos().div_ceil(1_000_000) as u64;
        Ok(())
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
    guard(|| {
        if let Some(o) = try_ref(operation) {
            o.cancel();
        }
    })
}

/// Frees a cancel handle (without cancelling). NULL is ignored.
///
/// # Safety
/// `operation` is NULL or a handle from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_operation_free(operation: *mut sr_operation_t) {
    guard(|| drop(free_box(operation)))
}
