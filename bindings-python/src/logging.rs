//! Core log records to Python's `logging`, under the logger `sentinel_recovery`, through the
//! core's one log hook (`sentinel_recovery::host::log`).
//!
//! The hook runs on the thread that emits a record; it only queues the record to the dispatcher
//! thread, which hands it to `logging` with the GIL. No core thread ever waits for the GIL.
//! Records below the effective level of the `sentinel_recovery` logger are discarded before
//! formatting; that level is read again whenever a client opens and after each batch of
//! forwarded records. The core's levels are Python's level numbers (TRACE is 5, below DEBUG).

use std::sync::Arc;

use pyo3::prelude::*;
use sentinel_recovery::host::log;

use crate::dispatch;

/// Sets the level threshold (a Python `logging` level number).
pub fn set_threshold(level: i32) {
    log::set_log_threshold(level);
}

/// Reads the effective level of the `sentinel_recovery` logger (GIL held).
pub fn refresh_threshold(py: Python<'_>) {
    let level = py
        .import("logging")
        .and_then(|m| m.call_method1("getLogger", ("sentinel_recovery",)))
        .and_then(|l| l.call_method0("getEffectiveLevel"))
        .and_then(|l| l.extract::<i32>());
    if let Ok(level) = level {
        set_threshold(level);
    }
}

/// Forwards core records to the dispatcher (from `logging.WARNING` until told otherwise).
pub fn install() {
    log::set_log_sink(
        Some(Arc::new(|level, target: &str, message: &str| {
            dispatch::log(level, target, message.to_string())
        })),
        log::WARN,
    );
}
