//! Core log records to Python's `logging`, under the logger `sentinel_recovery`, through the
//! core's one log hook (`sentinel_recovery::host::log`).
//!
//! The hook runs on the thread that emits a record; it only pushes the record into this
//! process's log mailbox (a host mailbox: bounded, its overflow rule the core's), whose wake-up
//! asks the dispatcher ([`crate::dispatch`]) to drain it; there each record goes to `logging`
//! with the GIL, and a count of dropped records is logged as a warning in their place. The log
//! has its own mailbox so that a flood of records can't crowd out events, or events records.
//! No core thread ever waits for the GIL. Records below the effective level of the
//! `sentinel_recovery` logger are discarded before formatting; that level is read again whenever
//! a client opens and after each drain. The core's levels are Python's level numbers (TRACE is 5,
//! below DEBUG).

use std::sync::{Arc, Mutex, Weak};

use pyo3::prelude::*;
use sentinel_recovery::host::{log, Delivery, Mailbox};

use crate::dispatch::{self, Job};

/// Log records allowed to wait for the dispatcher; more are dropped (and counted) so a
/// flood of core logging can never grow memory without bound.
const MAX_QUEUED_LOGS: usize = 4096;

/// One record: level, logger name (dotted), message.
type Record = (i32, String, String);

/// This process's log records on their way to `logging`.
struct Logs {
    mailbox: Mailbox<Record>,
}

impl Logs {
    fn drain(&self, py: Python<'_>) {
        let mut logged = false;
        self.mailbox.drain(|delivery| match delivery {
            Delivery::Item((level, target, message)) => {
                dispatch::forward_log(py, level, &target, &message);
                logged = true;
            }
            Delivery::Dropped(n) => dispatch::forward_log(
                py,
                log::WARN,
                "sentinel_recovery",
                &format!(
                    "{n} log records from the core were dropped (Python too slow to take them)"
                ),
            ),
        });
        if logged {
            refresh_threshold(py);
        }
    }
}

/// The log mailbox of this process (a forked child makes its own: the parent's may be locked).
static LOGS: Mutex<Option<(u32, Arc<Logs>)>> = Mutex::new(None);

fn logs() -> Arc<Logs> {
    let mut current = LOGS.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    match current.take() {
        Some((p, l)) if p == pid => {
            *current = Some((p, l.clone()));
            return l;
        }
        Some((_, inherited)) => std::mem::forget(inherited),
        None => {}
    }
    let made = Arc::new_cyclic(|me: &Weak<Logs>| {
        let me = me.clone();
        Logs {
            mailbox: Mailbox::new(MAX_QUEUED_LOGS, move || {
                if let Some(me) = me.upgrade() {
                    dispatch::push(Job::Call(Box::new(move |py| me.drain(py))));
                }
            }),
        }
    });
    *current = Some((pid, made.clone()));
    made
}

/// Sets the level threshold (a Python `logging` level number).
pub(crate) fn set_threshold(level: i32) {
    log::set_log_threshold(level);
}

/// Reads the effective level of the `sentinel_recovery` logger (GIL held).
pub(crate) fn refresh_threshold(py: Python<'_>) {
    let level = py
        .import("logging")
        .and_then(|m| m.call_method1("getLogger", ("sentinel_recovery",)))
        .and_then(|l| l.call_method0("getEffectiveLevel"))
        .and_then(|l| l.extract::<i32>());
    if let Ok(level) = level {
        set_threshold(level);
    }
}

/// Forwards core records to `logging` (from `logging.WARNING` until told otherwise).
pub(crate) fn install() {
    log::set_log_sink(
        Some(Arc::new(|level, target: &str, message: &str| {
            let _ = logs()
                .mailbox
                .push((level, target.replace("::", "."), message.to_string()));
        })),
        log::WARN,
    );
}
