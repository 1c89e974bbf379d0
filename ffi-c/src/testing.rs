//! Support for the suites of the C ABI and of the bindings built on it (.NET), compiled only
//! with the `test-hooks` feature: the shipped library and the committed header do not have it.
//! A suite declares what it calls from here itself.

use std::ffi::{c_int, c_void};

use crate::client::{acquire, required, sr_client_t};
use crate::error::sr_error_t;
use crate::ffi::start;
use crate::reply::{reply_to, sr_reply_cb};

/// For test suites only: starts an operation whose work panics on a core thread, so a suite can
/// show that a panic inside the library reaches it as SR_ERR_INTERNAL, exactly once, through
/// `callback` (as sr_client_execute() delivers), and that the process and the client go on.
/// Nothing is sent to any server.
///
/// Returns SR_OK (then `callback` is called exactly once) or SR_ERR_INVALID_ARGUMENT (NULL
/// client or callback; then it is never called).
///
/// # Safety
/// `client` is NULL or a handle not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_panic_for_test(
    client: *mut sr_client_t,
    callback: sr_reply_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        let h = acquire(client)?;
        let cb = required(callback, "callback")?;
        h.handle.panic_for_test(reply_to(cb, user_data));
        Ok::<(), sr_error_t>(())
    })
}
