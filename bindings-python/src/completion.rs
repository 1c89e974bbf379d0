//! What every operation of the Python layer shares, whatever it runs: the started operation
//! (`Operation`, what `asyncio` cancellation cancels), a finished operation's result on its way
//! to the loop that awaits it ([`Pending`], converted to Python only there, with the GIL), and
//! the blocking wait (GIL released, signals handled).
//!
//! A leaf: it knows no other module of the binding but [`crate::errors`], so each operation's
//! module brings its own conversion.

use std::time::Duration;

use pyo3::intern;
use pyo3::prelude::*;
use sentinel_recovery::deadline::{optional_call_timeout, Unit};
use sentinel_recovery::host::{Done, Handle};

use crate::errors::{error_object, to_pyerr};

/// How often a blocking wait wakes up to run Python's signal handlers (Ctrl-C).
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// A finished operation's result, turned into Python with the GIL: the value to set, or the
/// exception object.
pub(crate) type Outcome = Box<dyn FnOnce(Python<'_>) -> Result<Py<PyAny>, Py<PyAny>> + Send>;

/// The [`Outcome`] of `result`: `convert` builds the value, a core error becomes its exception.
pub(crate) fn outcome<T, F>(result: sentinel_recovery::Result<T>, convert: F) -> Outcome
where
    T: Send + 'static,
    F: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    Box::new(move |py: Python<'_>| match result {
        Ok(value) => convert(py, value).map_err(|e| e.into_value(py).into_any()),
        Err(e) => Err(error_object(py, &e).unbind()),
    })
}

/// One completion of an asyncio operation, waiting to be handed to its loop.
pub(crate) struct Pending {
    /// The loop that awaits `future` (kept so the completion can still be scheduled on it through
    /// the dispatcher after the loop's own waker is gone).
    pub(crate) event_loop: Py<PyAny>,
    pub(crate) future: Py<PyAny>,
    pub(crate) outcome: Outcome,
}

/// Sets the future's result or exception unless it is done already (cancelled); on the loop's
/// thread.
pub(crate) fn settle(py: Python<'_>, pending: Pending) {
    let future = pending.future.bind(py);
    let result = (|| -> PyResult<()> {
        if future.call_method0(intern!(py, "done"))?.is_truthy()? {
            return Ok(());
        }
        match (pending.outcome)(py) {
            Ok(value) => future.call_method1(intern!(py, "set_result"), (value,))?,
            Err(exc) => future.call_method1(intern!(py, "set_exception"), (exc,))?,
        };
        Ok(())
    })();
    if let Err(e) = result {
        e.write_unraisable(py, Some(future));
    }
}

/// A started asyncio operation; `cancel()` (called when the awaiting task is cancelled) stops it
/// in the core.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct Operation(pub(crate) sentinel_recovery::host::Operation);

#[pymethods]
impl Operation {
    /// Stops the operation if it still runs. A command already sent may still have run on the
    /// server; one not sent yet will not be.
    fn cancel(&self) {
        self.0.cancel();
    }
}

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

/// A call's own timeout in seconds, under the rule every language shares
/// (`sentinel_recovery::deadline`): `None` is the client's default; 0, negative, NaN, infinite
/// and too large values raise `ConfigError` naming the value.
pub(crate) fn call_timeout(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    optional_call_timeout(timeout, Unit::Seconds).map_err(|e| to_pyerr(&e))
}

/// A wait in seconds (for an event, between doctor rounds) as a duration; a negative or
/// non-finite one is refused.
pub(crate) fn seconds(s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| {
        pyo3::exceptions::PyValueError::new_err("timeout must be a non-negative number of seconds")
    })
}

/// How often a blocking wait of its own (an event iterator) wakes up to run signal handlers.
pub(crate) fn signal_check_interval() -> Duration {
    SIGNAL_CHECK_INTERVAL
}
