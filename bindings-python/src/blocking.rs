//! The blocking wait of every `*_blocking` method: the GIL released, Python's signal handlers
//! run every [`SIGNAL_CHECK_INTERVAL`] so Ctrl-C interrupts it.

use std::time::Duration;

use pyo3::prelude::*;
use sentinel_recovery::host::{Done, Handle};

use crate::errors::to_pyerr;

/// How often a blocking wait wakes up to run Python's signal handlers (Ctrl-C).
pub(crate) const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// Runs an operation's callback form and waits for it with the GIL released; when a signal
/// handler raises (Ctrl-C: `KeyboardInterrupt`) the operation is cancelled and the exception
/// propagates. Refused by the core on one of its own threads.
pub(crate) fn wait<T: Send + 'static, S: Into<sentinel_recovery::host::Started>>(
    py: Python<'_>,
    start: impl FnOnce(Done<T>) -> S + Send,
) -> PyResult<T> {
    let mut raised: Option<PyErr> = None;
    let got = py.detach(|| {
        Handle::wait(start, SIGNAL_CHECK_INTERVAL, || {
            Python::attach(|py| match py.check_signals() {
                Ok(()) => false,
                Err(e) => {
                    raised = Some(e);
                    true
                }
            })
        })
    });
    match got {
        Some(result) => result.map_err(|e| to_pyerr(&e)),
        None => Err(raised.unwrap_or_else(|| {
            pyo3::exceptions::PyKeyboardInterrupt::new_err("the wait was interrupted")
        })),
    }
}
