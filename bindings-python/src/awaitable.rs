//! What every asyncio method of the native module returns: the awaitable of a new future of the
//! running loop, which the operation's completion settles through the loop's waker
//! ([`crate::waker`]). The awaitable is the coroutine of `sentinel_recovery._calls._settled`
//! (written once, in Python, because a coroutine is the cheapest awaitable CPython drives):
//! it awaits the future, and cancelling the awaiting task cancels the [`Operation`].

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use sentinel_recovery::host::Done;

use crate::completion::outcome;
use crate::{dispatch, waker};

/// A started asyncio operation; `_settled` calls `cancel()` when the awaiting task is
/// cancelled. Not meant to be used directly.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct Operation(sentinel_recovery::host::Operation);

#[pymethods]
impl Operation {
    /// Stops the operation if it still runs. A command already sent may still have run on the
    /// server; one not sent yet will not be.
    fn cancel(&self) {
        self.0.cancel();
    }
}

/// Starts an operation and returns its awaitable: `convert` turns the result into the awaited
/// value (a core error becomes its exception). `run` gets the completion and starts the core's
/// callback form. Operations use it through [`crate::call::call`].
pub(crate) fn start<T: Send + 'static>(
    py: Python<'_>,
    convert: impl FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
    run: impl FnOnce(Done<T>) -> sentinel_recovery::host::Operation,
) -> PyResult<Py<PyAny>> {
    static SETTLED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let (event_loop, future) = new_future(py)?;
    let done = waker::complete(py, event_loop, future.clone_ref(py), move |r| {
        outcome(r, convert)
    })?;
    let operation = Operation(run(done));
    let settled = SETTLED.import(py, "sentinel_recovery._calls", "_settled")?;
    Ok(settled.call1((future, operation))?.unbind())
}

/// Starts a close and returns its future (of `None`); cancelling the awaiting task does not
/// stop the close. Its completion goes through the dispatcher, after the event-iterator items
/// queued before it.
pub(crate) fn start_close(
    py: Python<'_>,
    run: impl FnOnce(Box<dyn FnOnce() + Send>),
) -> PyResult<Py<PyAny>> {
    let (event_loop, future) = new_future(py)?;
    let done = dispatch::complete(event_loop, future.clone_ref(py), |r| {
        outcome(r, |py, ()| Ok(py.None()))
    })?;
    run(Box::new(move || done(Ok(()))));
    Ok(future)
}

/// The running loop (`RuntimeError` outside one, as `asyncio.get_running_loop()`) and a new
/// future of it.
fn new_future(py: Python<'_>) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let event_loop = GET_RUNNING_LOOP
        .import(py, "asyncio", "get_running_loop")?
        .call0()?;
    let future = event_loop.call_method0(intern!(py, "create_future"))?;
    Ok((event_loop.unbind(), future.unbind()))
}
