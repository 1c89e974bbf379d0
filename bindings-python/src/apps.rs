//! Pipelines and transactions for the Python layer, over the core's host layer: conversions and
//! completions only (the core sends, orders replies and refuses an EXEC after a failover).

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use sentinel_recovery::host::{ApiNames, Handle, HostTransaction};
use sentinel_recovery::Value;

use crate::completion::{call_timeout, outcome, wait, Operation};
use crate::convert;
use crate::errors::error_object;
use crate::waker::complete;

/// How the Python API is named in error hints (MULTI refused on the shared connection, ...).
pub static PYTHON_API: ApiNames = ApiNames {
    transaction: "client.transaction(commands) or client.begin_transaction()",
    watch:
        "client.transaction(commands, watch=[...]) or tx.watch() after client.begin_transaction()",
};

/// Each command's arguments, converted once (see [`convert::args`]).
fn commands<'py>(commands: &[Bound<'py, PyTuple>]) -> PyResult<Vec<convert::Args<'py>>> {
    commands.iter().map(convert::args).collect()
}

fn slices<'a>(args: &'a [convert::Args<'_>]) -> Vec<Vec<&'a [u8]>> {
    args.iter().map(|a| a.slices()).collect()
}

/// A pipeline's results as a list: each reply, or the exception object of that command's error
/// in its place.
fn results<'py>(
    py: Python<'py>,
    items: Vec<sentinel_recovery::Result<Value>>,
    decode: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let list = PyList::empty(py);
    for item in items {
        match item {
            Ok(v) => list.append(convert::value(py, v, decode)?)?,
            Err(e) => list.append(error_object(py, &e))?,
        }
    }
    Ok(list.into_any())
}

/// EXEC's replies as a list, or `None` when a watched key changed.
fn exec_result<'py>(
    py: Python<'py>,
    replies: Option<Vec<Value>>,
    decode: bool,
) -> PyResult<Bound<'py, PyAny>> {
    match replies {
        None => Ok(py.None().into_bound(py)),
        Some(values) => {
            let list = PyList::empty(py);
            for v in values {
                list.append(convert::value(py, v, decode)?)?;
            }
            Ok(list.into_any())
        }
    }
}

/// Starts a pipeline; `future` gets the list of results.
pub fn pipeline_async(
    handle: &Handle,
    decode: bool,
    event_loop: Py<PyAny>,
    future: Py<PyAny>,
    cmds: Vec<Bound<'_, PyTuple>>,
    timeout: Option<f64>,
) -> PyResult<Operation> {
    let args = commands(&cmds)?;
    let timeout = call_timeout(timeout)?;
    let done = complete(event_loop, future, move |r| {
        outcome(r, move |py, items| Ok(results(py, items, decode)?.unbind()))
    })?;
    Ok(Operation(handle.pipeline(&slices(&args), timeout, done)))
}

/// Runs a pipeline and waits (GIL released, signals handled).
pub fn pipeline_blocking(
    py: Python<'_>,
    handle: &Handle,
    decode: bool,
    cmds: Vec<Bound<'_, PyTuple>>,
    timeout: Option<f64>,
) -> PyResult<Py<PyAny>> {
    let args = commands(&cmds)?;
    let timeout = call_timeout(timeout)?;
    let s = slices(&args);
    let items = wait(py, |done| handle.pipeline(&s, timeout, done))?;
    Ok(results(py, items, decode)?.unbind())
}

/// Starts a transaction; `future` gets a [`NativeTransaction`]. `timeout` (seconds) bounds
/// the whole transaction, until its EXEC completes (`Handle::begin_transaction`).
pub fn begin_async(
    handle: &Handle,
    decode: bool,
    event_loop: Py<PyAny>,
    future: Py<PyAny>,
    timeout: Option<f64>,
) -> PyResult<Operation> {
    let timeout = call_timeout(timeout)?;
    let done = complete(event_loop, future, move |r| {
        outcome(r, move |py, tx| {
            Ok(Bound::new(py, NativeTransaction { tx, decode })?
                .into_any()
                .unbind())
        })
    })?;
    Ok(Operation(handle.begin_transaction(timeout, done)))
}

/// MULTI/EXEC of `cmds` after `WATCH watch...` (when not empty), all in the core
/// (`Handle::transaction`); `future` gets the replies, or `None` when a watched key changed.
/// `timeout` (seconds) bounds the whole transaction, until EXEC's reply.
pub fn transaction_async(
    handle: &Handle,
    decode: bool,
    event_loop: Py<PyAny>,
    future: Py<PyAny>,
    cmds: Vec<Bound<'_, PyTuple>>,
    watch: &Bound<'_, PyTuple>,
    timeout: Option<f64>,
) -> PyResult<Operation> {
    let args = commands(&cmds)?;
    let watch = convert::args(watch)?;
    let timeout = call_timeout(timeout)?;
    let done = complete(event_loop, future, move |r| {
        outcome(r, move |py, replies| {
            Ok(exec_result(py, replies, decode)?.unbind())
        })
    })?;
    Ok(Operation(handle.transaction(
        &slices(&args),
        &watch.slices(),
        timeout,
        done,
    )))
}

/// [`transaction_async`], waiting (GIL released, signals handled).
pub fn transaction_blocking(
    py: Python<'_>,
    handle: &Handle,
    decode: bool,
    cmds: Vec<Bound<'_, PyTuple>>,
    watch: &Bound<'_, PyTuple>,
    timeout: Option<f64>,
) -> PyResult<Py<PyAny>> {
    let args = commands(&cmds)?;
    let watch = convert::args(watch)?;
    let timeout = call_timeout(timeout)?;
    let (s, w) = (slices(&args), watch.slices());
    let replies = wait(py, |done| handle.transaction(&s, &w, timeout, done))?;
    Ok(exec_result(py, replies, decode)?.unbind())
}

/// Begins a transaction and waits for its connection; `timeout` as for [`begin_async`].
pub fn begin_blocking(
    py: Python<'_>,
    handle: &Handle,
    decode: bool,
    timeout: Option<f64>,
) -> PyResult<NativeTransaction> {
    let timeout = call_timeout(timeout)?;
    let tx = wait(py, |done| handle.begin_transaction(timeout, done))?;
    Ok(NativeTransaction { tx, decode })
}

/// A transaction on a dedicated connection to the primary it began on. Not meant to be used
/// directly: see `sentinel_recovery.Transaction` and `BlockingTransaction`.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct NativeTransaction {
    tx: HostTransaction,
    decode: bool,
}

#[pymethods]
impl NativeTransaction {
    /// The primary (`host:port`) the transaction runs on.
    #[getter]
    fn primary(&self) -> String {
        self.tx.primary().to_string()
    }

    /// `WATCH keys...`; `future` gets `None`.
    fn watch_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        keys: &Bound<'_, PyTuple>,
    ) -> PyResult<Operation> {
        let keys = convert::args(keys)?;
        let done = complete(event_loop, future, |r| outcome(r, |py, ()| Ok(py.None())))?;
        Ok(Operation(self.tx.watch(&keys.slices(), done)))
    }

    /// `WATCH keys...`, waiting.
    fn watch_blocking(&self, py: Python<'_>, keys: &Bound<'_, PyTuple>) -> PyResult<()> {
        let keys = convert::args(keys)?;
        let s = keys.slices();
        wait(py, |done| self.tx.watch(&s, done))
    }

    /// One command now, on the transaction's connection; `future` gets the reply.
    fn execute_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<Operation> {
        let args = convert::args(args)?;
        let decode = self.decode;
        let done = complete(event_loop, future, move |r| {
            outcome(r, move |py, v| Ok(convert::value(py, v, decode)?.unbind()))
        })?;
        Ok(Operation(self.tx.execute(&args.slices(), done)))
    }

    /// One command now, waiting for its reply.
    fn execute_blocking(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        let args = convert::args(args)?;
        let s = args.slices();
        let value = wait(py, |done| self.tx.execute(&s, done))?;
        Ok(convert::value(py, value, self.decode)?.unbind())
    }

    /// MULTI, the commands, EXEC; `future` gets the replies, or `None` when a watched key
    /// changed.
    fn exec_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        commands: Vec<Bound<'_, PyTuple>>,
    ) -> PyResult<Operation> {
        let args = self::commands(&commands)?;
        let decode = self.decode;
        let done = complete(event_loop, future, move |r| {
            outcome(r, move |py, replies| {
                Ok(exec_result(py, replies, decode)?.unbind())
            })
        })?;
        Ok(Operation(self.tx.exec(&slices(&args), done)))
    }

    /// MULTI, the commands, EXEC, waiting.
    fn exec_blocking(
        &self,
        py: Python<'_>,
        commands: Vec<Bound<'_, PyTuple>>,
    ) -> PyResult<Py<PyAny>> {
        let args = self::commands(&commands)?;
        let s = slices(&args);
        let replies = wait(py, |done| self.tx.exec(&s, done))?;
        Ok(exec_result(py, replies, self.decode)?.unbind())
    }

    /// Ends the transaction without running anything. Idempotent.
    fn discard(&self) {
        self.tx.discard();
    }
}
