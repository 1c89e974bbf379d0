//! The results of a pipeline or a transaction's EXEC (`sr_results_t`) and the completion that
//! hands them to a host's `sr_results_cb`.

use std::ffi::c_void;

use sr::Value;

use crate::error::sr_error_t;
use crate::ffi::{free_box, guard, to_boxed_mut_ptr, try_ref, Castable, OwnedBox};
use crate::reply::{as_reply, sr_reply_t};

/// The results of a pipeline or of a transaction's EXEC: one per command, in order, each a
/// reply or that command's own error.
///
/// Opaque. Borrowed when passed to an sr_results_cb (valid during the call only); owned when
/// returned by sr_client_pipeline_blocking() or sr_transaction_exec_blocking() (free with
/// sr_results_free()).
pub struct sr_results_t {
    _private: [u8; 0],
}

/// What an `sr_results_t *` points to.
pub(crate) struct Results {
    items: Vec<Result<Value, sr_error_t>>,
}

impl Castable for sr_results_t {
    type Ownership = OwnedBox;
    type RustType = Results;
}

/// Completion of sr_client_pipeline(), sr_client_transaction() and sr_transaction_exec():
/// exactly one call per accepted call, on a core thread. `results` (one per command) is
/// non-NULL and `error` NULL when the commands were sent and answered; `results` NULL and
/// `error` non-NULL when the call failed as a whole (no node within the deadline, cancelled,
/// closed, ...). For a transaction both NULL means a watched key changed and nothing ran. Both are borrowed for the call only;
/// the same rules as sr_reply_cb apply (do not block, do not unwind).
pub type sr_results_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        results: *const sr_results_t,
        error: *const sr_error_t,
    ),
>;

/// What `sr_results_cb` holds when it is not NULL.
pub(crate) type ResultsFn =
    unsafe extern "C" fn(*mut c_void, *const sr_results_t, *const sr_error_t);

impl Results {
    fn new(items: Vec<sr::Result<Value>>) -> Results {
        Results {
            items: items
                .into_iter()
                .map(|r| r.map_err(sr_error_t::from))
                .collect(),
        }
    }
}

/// The results of a pipeline or EXEC, as the library keeps them until the host takes them.
pub(crate) fn results_of(items: Vec<sr::Result<Value>>) -> Results {
    Results::new(items)
}

/// EXEC's replies as results, one per command (a command that failed inside EXEC is an error
/// reply in its place); `None` when a watched key changed and nothing ran.
pub(crate) fn exec_results(values: Option<Vec<Value>>) -> Option<Vec<sr::Result<Value>>> {
    values.map(|values| values.into_iter().map(Ok).collect())
}

/// Results handed to the host, owned by it (freed with sr_results_free()).
pub(crate) fn into_owned_results(items: Vec<sr::Result<Value>>) -> *mut sr_results_t {
    to_boxed_mut_ptr::<sr_results_t>(Results::new(items))
}

/// Hands a pipeline's or EXEC's outcome to a host's `sr_results_cb` (`Ok(None)`: a watched key
/// changed, nothing ran).
pub(crate) fn deliver_results(
    cb: ResultsFn,
    user_data: *mut c_void,
    result: sr::Result<Option<Vec<sr::Result<Value>>>>,
) {
    let converted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        result
            .map(|r| r.map(Results::new))
            .map_err(sr_error_t::from)
    }));
    // SAFETY: the host promised a valid callback; the pointers live until it returns.
    unsafe {
        match converted {
            Ok(Ok(Some(results))) => cb(
                user_data,
                crate::ffi::to_const_ptr::<sr_results_t>(&results),
                std::ptr::null(),
            ),
            Ok(Ok(None)) => cb(user_data, std::ptr::null(), std::ptr::null()),
            Ok(Err(e)) => cb(user_data, std::ptr::null(), &e),
            Err(_) => cb(user_data, std::ptr::null(), &sr_error_t::panic()),
        }
    }
}

/// Number of results (one per command); 0 for NULL.
///
/// # Safety
/// `results` is NULL or live results from this library.
#[no_mangle]
pub unsafe extern "C" fn sr_results_len(results: *const sr_results_t) -> usize {
    guard(|| try_ref(results).map_or(0, |r| r.items.len()))
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
    guard(|| match try_ref(results).and_then(|r| r.items.get(index)) {
        Some(Ok(v)) => as_reply(v),
        _ => std::ptr::null(),
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
    guard(|| match try_ref(results).and_then(|r| r.items.get(index)) {
        Some(Err(e)) => e,
        _ => std::ptr::null(),
    })
}

/// Frees owned results. NULL is ignored. Never pass results borrowed in a callback.
///
/// # Safety
/// `results` is NULL or owned results from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_results_free(results: *mut sr_results_t) {
    guard(|| drop(free_box(results)))
}
