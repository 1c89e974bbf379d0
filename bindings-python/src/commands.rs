//! Commands, pipelines and the wait for a primary, for `NativeClient`. Transactions are in
//! [`crate::transactions`].

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use sentinel_recovery::host::Handle;
use sentinel_recovery::Value;

use crate::awaitable::start;
use crate::call::{call, Mode};
use crate::convert::{self, call_timeout};
use crate::errors::error_object;

/// A reply as Python (see [`convert::value`]).
pub(crate) fn reply(py: Python<'_>, value: Value, decode: bool) -> PyResult<Py<PyAny>> {
    Ok(convert::value(py, value, decode)?.unbind())
}

/// Each command's arguments, converted once (see [`convert::args`]).
pub(crate) fn commands<'py>(commands: &[Bound<'py, PyTuple>]) -> PyResult<Vec<convert::Args<'py>>> {
    commands.iter().map(convert::args).collect()
}

pub(crate) fn slices<'a>(args: &'a [convert::Args<'_>]) -> Vec<Vec<&'a [u8]>> {
    args.iter().map(|a| a.slices()).collect()
}

/// One command. A blocking call reads its own reply when it wrote the command to an idle
/// connection (`Handle::execute_here`).
pub(crate) fn execute(
    py: Python<'_>,
    mode: Mode,
    handle: &Handle,
    decode: bool,
    args: &Bound<'_, PyTuple>,
    timeout: Option<f64>,
) -> PyResult<Py<PyAny>> {
    let args = convert::args(args)?;
    let timeout = call_timeout(timeout)?;
    // Borrowed while the GIL is released: the caller's tuple keeps the objects alive, and
    // `bytes` are immutable (everything else was copied by `convert::args`). The core checks
    // the command (and its sizes) before it copies them.
    let slices = args.slices();
    call(
        py,
        mode,
        move |py, v| reply(py, v, decode),
        |done| match mode {
            Mode::Await => handle.execute(&slices, timeout, done).into(),
            Mode::Block => handle.execute_here(&slices, timeout, done, None),
        },
    )
}

pub(crate) fn panic_for_test(py: Python<'_>, handle: &Handle, decode: bool) -> PyResult<Py<PyAny>> {
    start(
        py,
        move |py, v| reply(py, v, decode),
        |done| handle.panic_for_test(done),
    )
}

/// A pipeline's results as a list: each reply, or the exception object of that command's error
/// in its place.
fn results(
    py: Python<'_>,
    items: Vec<sentinel_recovery::Result<Value>>,
    decode: bool,
) -> PyResult<Py<PyAny>> {
    let list = PyList::empty(py);
    for item in items {
        match item {
            Ok(v) => list.append(convert::value(py, v, decode)?)?,
            Err(e) => list.append(error_object(py, &e))?,
        }
    }
    Ok(list.into_any().unbind())
}

pub(crate) fn pipeline(
    py: Python<'_>,
    mode: Mode,
    handle: &Handle,
    decode: bool,
    cmds: Vec<Bound<'_, PyTuple>>,
    timeout: Option<f64>,
) -> PyResult<Py<PyAny>> {
    let args = commands(&cmds)?;
    let timeout = call_timeout(timeout)?;
    let s = slices(&args);
    call(
        py,
        mode,
        move |py, items| results(py, items, decode),
        |done| handle.pipeline(&s, timeout, done),
    )
}

pub(crate) fn ready(py: Python<'_>, mode: Mode, handle: &Handle) -> PyResult<Py<PyAny>> {
    call(
        py,
        mode,
        |py, t: sentinel_recovery::Topology| Ok(convert::serialized(py, &t)?.unbind()),
        |done| handle.ready(done),
    )
}
