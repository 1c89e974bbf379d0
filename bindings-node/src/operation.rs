//! A started operation that JavaScript may cancel.

use napi_derive::napi;
use sentinel_recovery::host::Operation;

/// A started operation that JavaScript may cancel (a call with an `AbortSignal`: `execute`,
/// `pipeline`, `transaction`, `subscribe`, `doctor`).
#[napi]
pub struct NativeOperation {
    pub(crate) operation: Operation,
}

#[napi]
impl NativeOperation {
    /// Stops the operation if it is still running; its completion then comes with `closed`. A
    /// command already sent may still have run on the server.
    #[napi(catch_unwind)]
    pub fn cancel(&self) {
        self.operation.cancel();
    }
}
