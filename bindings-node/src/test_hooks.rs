//! Native functions the suite calls to check what it can't see from outside. Not part of the API.

use napi_derive::napi;

use crate::errors::{guarded, Code};
use crate::own_replies;

/// For the test suite only: how many replies the calling (JavaScript) thread has read from a
/// socket itself and handed over (see `own_replies`), since it started.
#[napi]
pub fn replies_read_here_for_test() -> f64 {
    own_replies::replies_read_here() as f64
}

/// Panics inside the binding's panic guard: the suite's check that a panic reaches JavaScript as
/// an `internal` error. Not part of the API.
#[doc(hidden)]
#[napi(catch_unwind)]
pub fn panic_for_test() -> napi::Result<(), Code> {
    guarded(|| panic!("a test panic"))
}
