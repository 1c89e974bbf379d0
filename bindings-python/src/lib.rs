//! `sentinel_recovery._native`: the compiled part of the Python package `sentinel_recovery`.
//!
//! It converts values, owns host-side lifetimes and schedules completions on the host; every
//! behaviour, and every guarantee about completions, lives in the core crate's host layer
//! (`sentinel_recovery::host`), and so do the queues results travel in (host mailboxes). Core
//! threads never take the GIL: asyncio completions wake their loop through its own eventfd (see
//! [`waker`]); events, log records, event callbacks and the completions a loop can't take that
//! way reach Python through one callback thread (see [`dispatch`]). The public API is the Python
//! layer in `python/sentinel_recovery/`.
//!
//! Modules import one way: [`completion`] (with `errors`, `convert`) at the bottom, then
//! `dispatch`, `logging` and `waker`, then the operations (`apps`, `doctor`, `client`, `pubsub`, `proxy`).

mod address_map;
mod apps;
mod client;
mod completion;
mod convert;
mod dispatch;
mod doctor;
mod errors;
mod logging;
mod proxy;
mod pubsub;
mod waker;

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use pyo3::{intern, wrap_pyfunction};

/// Completes a batch on the event loop thread: `(0, future, value)` sets a result, `(1, future,
/// exc)` an exception (both skipped when the future is already done, e.g. cancelled), and `(2,
/// queue, item)` puts an item into an `asyncio.Queue`.
#[pyfunction]
fn _deliver(py: Python<'_>, items: &Bound<'_, PyList>) {
    for item in items.iter() {
        let Ok(item) = item.cast::<PyTuple>() else {
            continue;
        };
        let result = (|| -> PyResult<()> {
            let kind: u8 = item.get_item(0)?.extract()?;
            let target = item.get_item(1)?;
            let value = item.get_item(2)?;
            match kind {
                0 | 1 => {
                    if target.call_method0(intern!(py, "done"))?.is_truthy()? {
                        return Ok(());
                    }
                    let method = if kind == 0 {
                        intern!(py, "set_result")
                    } else {
                        intern!(py, "set_exception")
                    };
                    target.call_method1(method, (value,))?;
                }
                _ => {
                    target.call_method1(intern!(py, "put_nowait"), (value,))?;
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            e.write_unraisable(py, Some(item.as_any()));
        }
    }
}

/// Registers the function that builds exceptions: `make_error(code, message, server_code)`.
#[pyfunction]
fn _set_error_factory(factory: Py<PyAny>) {
    errors::set_factory(factory);
}

/// Sets the level (a `logging` level number) below which core log records are dropped.
#[pyfunction]
fn _set_log_level(level: i32) {
    logging::set_threshold(level);
}

/// Stops the dispatcher thread before interpreter exit (registered with `atexit`).
#[pyfunction]
fn _shutdown(py: Python<'_>) {
    py.detach(|| dispatch::shutdown(Duration::from_secs(2)));
}

/// Sets the number of core worker threads; only before the first client opens in this process.
#[pyfunction]
fn set_worker_threads(threads: usize) -> PyResult<()> {
    sentinel_recovery::runtime::set_worker_threads(threads).map_err(|e| errors::to_pyerr(&e))
}

/// Whether the calling thread is one of the core's (`sr-worker-N`); for tests.
#[pyfunction]
fn _on_core_thread() -> bool {
    sentinel_recovery::runtime::on_core_thread()
}

/// The core's error codes as `(name, value, description)`, in the order of their values: what
/// the generated `_tables.ERROR_CODES` must equal (checked by the test suite).
#[pyfunction]
fn error_codes() -> Vec<(&'static str, i32, &'static str)> {
    sentinel_recovery::ErrorCode::ALL
        .iter()
        .map(|c| (c.as_str(), c.as_i32(), c.description()))
        .collect()
}

/// The core's event kinds as `(name, value, description)`, in the order of their values: what
/// the generated `_tables.EVENT_KINDS` must equal (checked by the test suite).
#[pyfunction]
fn event_kinds() -> Vec<(&'static str, i32, &'static str)> {
    sentinel_recovery::EventKind::TABLE
        .iter()
        .enumerate()
        .map(|(i, (name, what))| (*name, i as i32 + 1, *what))
        .collect()
}

/// The compiled module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    logging::install();
    let deliver = wrap_pyfunction!(_deliver, m)?;
    dispatch::set_deliver(deliver.clone().into_any().unbind());
    m.add_function(deliver)?;
    m.add_function(wrap_pyfunction!(_set_error_factory, m)?)?;
    m.add_function(wrap_pyfunction!(_set_log_level, m)?)?;
    m.add_function(wrap_pyfunction!(_shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(_on_core_thread, m)?)?;
    m.add_function(wrap_pyfunction!(set_worker_threads, m)?)?;
    m.add_function(wrap_pyfunction!(error_codes, m)?)?;
    m.add_function(wrap_pyfunction!(event_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(doctor::doctor_async, m)?)?;
    m.add_function(wrap_pyfunction!(doctor::doctor_blocking, m)?)?;
    m.add_class::<client::NativeClient>()?;
    m.add_class::<completion::Operation>()?;
    m.add_class::<waker::LoopWaker>()?;
    m.add_class::<apps::NativeTransaction>()?;
    m.add_class::<client::Subscription>()?;
    m.add_class::<client::EventIter>()?;
    m.add_class::<pubsub::NativeSubscriber>()?;
    m.add_class::<proxy::NativeProxy>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
