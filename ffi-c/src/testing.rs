//! Support for the suites of the C ABI and of the bindings built on it (.NET), compiled only
//! with the `test-hooks` feature: the shipped library and the committed header do not have it.
//! A suite declares what it calls from here itself.

use std::ffi::{c_int, c_void};

use crate::client::{acquire, client_into, required, sr_client_t};
use crate::error::sr_error_t;
use crate::ffi::start;
use crate::mailbox::{reply_into, sr_mailbox_t};
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

/// For test suites only: sr_client_panic_for_test() whose completion goes to `mailbox` as
/// `op_id`'s SR_DELIVERY_COMPLETION (SR_ERR_INTERNAL), as sr_client_execute_into() delivers.
///
/// Returns SR_OK (then exactly one completion comes), SR_ERR_INVALID_ARGUMENT (NULL client or
/// mailbox) or SR_ERR_CLOSED (the mailbox is closed); then none comes.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_panic_for_test_into(
    client: *mut sr_client_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        client_into(
            client,
            std::ptr::null(),
            mailbox,
            op_id,
            reply_into,
            |handle, _, done| handle.panic_for_test(done),
        )
    })
}
