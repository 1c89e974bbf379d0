//! Support for the suites of the C ABI and of the bindings built on it (.NET), compiled only
//! with the `test-hooks` feature: the shipped library and the committed header do not have it.
//! A suite declares what it calls from here itself.

use std::ffi::{c_int, c_void};

use crate::client::{acquire, reply_to};
use crate::*;

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
    boundary!(SR_ERR_INTERNAL, {
        let Some(h) = acquire(client) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let Some(cb) = callback else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        h.handle.panic_for_test(reply_to(cb, user_data));
        SR_OK
    })
}
