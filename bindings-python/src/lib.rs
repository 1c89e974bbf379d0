//! `sentinel_recovery._native`: the compiled part of the Python package `sentinel_recovery`.
//!
//! It converts values, owns host-side lifetimes and schedules completions on the host; every
//! behaviour and guarantee lives in the core's host layer (`sentinel_recovery::host`). Core
//! threads never take the GIL. An asyncio method returns the awaitable of a future of the
//! running loop (see [`awaitable`]), which the loop's own waker ([`waker`]) settles; events,
//! log records, `on_event` calls and what a loop can't take that way go through one dispatcher
//! thread ([`dispatch`]).
//! docs/architecture.md (Python) follows a completion hop by hop.
//!
//! Modules import one way: `completion`, `convert`, `errors` and `blocking` at the bottom, then
//! `dispatch`, `logging`, `waker`, `awaitable`, `call`, then the operations.

mod address_map;
mod awaitable;
mod blocking;
mod call;
mod client;
mod commands;
mod completion;
mod convert;
mod dispatch;
mod doctor;
mod errors;
mod events;
mod logging;
mod proxy;
mod pubsub;
mod routing;
mod transactions;
mod waker;

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::wrap_pyfunction;

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
    m.add_class::<awaitable::Operation>()?;
    m.add_class::<waker::LoopWaker>()?;
    m.add_class::<dispatch::LoopBatch>()?;
    m.add_class::<transactions::NativeTransaction>()?;
    m.add_class::<events::Subscription>()?;
    m.add_class::<events::EventIter>()?;
    m.add_class::<pubsub::NativeSubscriber>()?;
    m.add_class::<proxy::NativeProxy>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
