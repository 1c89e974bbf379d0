//! The core runtime's options.

use std::ffi::c_int;

use crate::error::sr_error_t;
use crate::ffi::{guard, report, SR_OK};

/// Sets the number of worker threads (`sr-worker-N`, 1..256; default 2, or `SR_WORKER_THREADS`)
/// of the runtime all clients run on. Call it before the first sr_client_open(): once the
/// runtime runs, SR_ERR_CONFIG. `error` (may be NULL) receives an owned error on failure.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_runtime_set_worker_threads(
    threads: usize,
    error: *mut *mut sr_error_t,
) -> c_int {
    report(error, || Ok(sr::runtime::set_worker_threads(threads)?))
}

/// Stops the runtime, waiting up to `timeout_ms` for its threads (e.g. before unloading the
/// library, or to end a leak checker's run with no thread alive). Clients still open fail with
/// SR_ERR_CLOSED afterwards; a later sr_client_open() starts a fresh runtime. Called from a
/// callback (a core thread) it stops the runtime in the background instead of waiting.
#[no_mangle]
pub extern "C" fn sr_runtime_shutdown(timeout_ms: u64) -> c_int {
    guard(|| {
        sr::runtime::shutdown(std::time::Duration::from_millis(timeout_ms));
        SR_OK
    })
}
