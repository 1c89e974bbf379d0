//! The panic guard every synchronous entry point of the host layer runs in.

use crate::error::{Error, Result};

/// Runs a synchronous entry point with panics turned into `internal` errors.
pub(super) fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(Error::internal(&*panic)))
}
