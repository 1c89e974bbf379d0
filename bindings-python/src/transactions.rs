//! Transactions for the Python layer: MULTI/EXEC in one call (`NativeClient.transaction_*`) and
//! the interactive [`NativeTransaction`] (WATCH, reads, EXEC) on a dedicated connection. The core
//! sends, orders replies and refuses an EXEC after a failover; this converts.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use sentinel_recovery::host::{ApiNames, Handle, HostTransaction};
use sentinel_recovery::Value;

use crate::call::{call, Mode};
use crate::commands::{commands, reply, slices};
use crate::convert::{self, call_timeout};

/// How the Python API is named in error hints (MULTI refused on the shared connection, ...).
pub static PYTHON_API: ApiNames = ApiNames {
    transaction: "client.transaction(commands) or client.begin_transaction()",
    watch:
        "client.transaction(commands, watch=[...]) or tx.watch() after client.begin_transaction()",
};

/// EXEC's replies as a list, or `None` when a watched key changed.
fn exec_result(py: Python<'_>, replies: Option<Vec<Value>>, decode: bool) -> PyResult<Py<PyAny>> {
    match replies {
        None => Ok(py.None()),
        Some(values) => {
            let list = PyList::empty(py);
            for v in values {
                list.append(convert::value(py, v, decode)?)?;
            }
            Ok(list.into_any().unbind())
        }
    }
}

fn transaction_object(py: Python<'_>, tx: HostTransaction, decode: bool) -> PyResult<Py<PyAny>> {
    Ok(Bound::new(py, NativeTransaction { tx, decode })?
        .into_any()
        .unbind())
}

/// MULTI/EXEC of `cmds` after `WATCH watch...` (when not empty), all in the core
/// (`Handle::transaction`).
pub(crate) fn transaction(
    py: Python<'_>,
    mode: Mode,
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
    call(
        py,
        mode,
        move |py, replies| exec_result(py, replies, decode),
        |done| handle.transaction(&s, &w, timeout, done),
    )
}

/// Begins a transaction: `timeout` (seconds) bounds all of it, until its EXEC completes
/// (`Handle::begin_transaction`).
pub(crate) fn begin(
    py: Python<'_>,
    mode: Mode,
    handle: &Handle,
    decode: bool,
    timeout: Option<f64>,
) -> PyResult<Py<PyAny>> {
    let timeout = call_timeout(timeout)?;
    call(
        py,
        mode,
        move |py, tx| transaction_object(py, tx, decode),
        |done| handle.begin_transaction(timeout, done),
    )
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

    /// `WATCH keys...`; awaited for `None`.
    fn watch_async(&self, py: Python<'_>, keys: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        self.watch(py, Mode::Await, keys)
    }

    /// `WATCH keys...`, waiting.
    fn watch_blocking(&self, py: Python<'_>, keys: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        self.watch(py, Mode::Block, keys)
    }

    /// One command now, on the transaction's connection; awaited for the reply.
    fn execute_async(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        self.execute(py, Mode::Await, args)
    }

    /// One command now, waiting for its reply.
    fn execute_blocking(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        self.execute(py, Mode::Block, args)
    }

    /// MULTI, the commands, EXEC; awaited for the replies, or `None` when a watched key changed.
    fn exec_async(&self, py: Python<'_>, commands: Vec<Bound<'_, PyTuple>>) -> PyResult<Py<PyAny>> {
        self.exec(py, Mode::Await, commands)
    }

    /// MULTI, the commands, EXEC, waiting.
    fn exec_blocking(
        &self,
        py: Python<'_>,
        commands: Vec<Bound<'_, PyTuple>>,
    ) -> PyResult<Py<PyAny>> {
        self.exec(py, Mode::Block, commands)
    }

    /// Ends the transaction without running anything. Idempotent.
    fn discard(&self) {
        self.tx.discard();
    }
}

impl NativeTransaction {
    fn watch(&self, py: Python<'_>, mode: Mode, keys: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        let keys = convert::args(keys)?;
        let s = keys.slices();
        call(
            py,
            mode,
            |py, ()| Ok(py.None()),
            |done| self.tx.watch(&s, done),
        )
    }

    fn execute(
        &self,
        py: Python<'_>,
        mode: Mode,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<Py<PyAny>> {
        let args = convert::args(args)?;
        let (s, decode) = (args.slices(), self.decode);
        call(
            py,
            mode,
            move |py, v| reply(py, v, decode),
            |done| self.tx.execute(&s, done),
        )
    }

    fn exec(
        &self,
        py: Python<'_>,
        mode: Mode,
        commands: Vec<Bound<'_, PyTuple>>,
    ) -> PyResult<Py<PyAny>> {
        let args = self::commands(&commands)?;
        let (s, decode) = (slices(&args), self.decode);
        call(
            py,
            mode,
            move |py, replies| exec_result(py, replies, decode),
            |done| self.tx.exec(&s, done),
        )
    }
}
