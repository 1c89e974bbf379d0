//! Every operation is written once and called two ways ([`Mode`]): awaited (`*_async` returns an
//! awaitable, see [`crate::awaitable`]) or waited for (`*_blocking`: the calling thread
//! blocks with the GIL released, see [`crate::blocking`]).

use pyo3::prelude::*;
use sentinel_recovery::host::{Done, Started};

use crate::awaitable::start;
use crate::blocking::wait;

/// How a call completes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Returns an awaitable at once.
    Await,
    /// Returns the result, blocking the calling thread.
    Block,
}

/// Starts `run` (the core's callback form) and returns the awaitable of its result, or waits
/// for the result: in both cases `convert` makes it Python, and a core error is raised as its
/// exception.
pub(crate) fn call<T, S>(
    py: Python<'_>,
    mode: Mode,
    convert: impl FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
    run: impl FnOnce(Done<T>) -> S + Send,
) -> PyResult<Py<PyAny>>
where
    T: Send + 'static,
    S: Into<Started>,
{
    match mode {
        Mode::Await => start(py, convert, |done| run(done).into().operation),
        Mode::Block => {
            let value = wait(py, run)?;
            convert(py, value)
        }
    }
}
