//! A finished asyncio operation on its way to the future that awaits it ([`Pending`]), and
//! [`settle`], the one function that completes such a future, whichever way it came (the loop's
//! waker or the dispatcher). A leaf: it knows no module of the binding but [`crate::errors`].

use pyo3::intern;
use pyo3::prelude::*;

use crate::errors::error_object;

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
    /// The loop of `future`: the dispatcher schedules the completion on it.
    pub(crate) event_loop: Py<PyAny>,
    pub(crate) future: Py<PyAny>,
    pub(crate) outcome: Outcome,
}

/// Sets the future's result or exception, on the loop's thread. A future already done was
/// cancelled by its awaiting task: the result is dropped, never an `InvalidStateError`.
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
