//! The log callback: core log records (and the binding's own warnings) for JavaScript.
//!
//! Log records wait in one process-wide queue (the core's [`Mailbox`]) for the JavaScript thread,
//! woken like a client's completions: a threadsafe function called when the queue goes from idle
//! to non-empty, after which JavaScript takes every record with [`drain_logs`].

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;
use sentinel_recovery::host::{log, Delivery, Mailbox};

use crate::errors::napi_failure;

/// One core log record for JavaScript.
#[napi(object)]
pub struct LogRecord {
    /// 5 (trace), 10 (debug), 20 (info), 30 (warn) or 40 (error): Python's level numbers.
    pub level: u32,
    /// The emitting module, under `sentinel_recovery`.
    pub target: String,
    /// The text (never a password).
    pub message: String,
}

/// Log records that may wait for the JavaScript thread: beyond it the newest are dropped,
/// counted, and reported by a warning record in their place.
const LOG_BOUND: usize = 10_000;

/// The log wake function: called with no arguments when records wait for [`drain_logs`].
type LogWakeFn = ThreadsafeFunction<(), (), (), Status, false, true>;

/// The installed logger's mailbox (none without a logger). Each `set_logger` with a function
/// makes a new one; removing the logger closes it, so its wake-up is never called again.
static LOGS: Mutex<Option<Mailbox<LogRecord>>> = Mutex::new(None);

/// The installed logger's mailbox, if any.
fn logs() -> Option<Mailbox<LogRecord>> {
    LOGS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Reports `message` as a warning of the binding through the installed logger, if any (for
/// what the binding itself drops, which the core's log does not know of).
pub(crate) fn warn(message: &str) {
    if let Some(mailbox) = logs() {
        let _ = mailbox.push(LogRecord {
            level: log::WARN as u32,
            target: "sentinel_recovery".to_string(),
            message: message.to_string(),
        });
    }
}

/// Installs (with `wake`) or removes (without) the process-wide forwarding of core log records
/// at `level` or above: `wake` is called when records wait for [`drain_logs`] (not again once the
/// logger is removed). It does not keep the process alive. Returns false when the process
/// already had another tracing subscriber.
#[napi(catch_unwind)]
pub fn set_logger(wake: Option<Function<(), ()>>, level: i32) -> napi::Result<bool> {
    let Some(wake) = wake else {
        let installed = log::set_log_sink(None, level);
        if let Some(old) = LOGS.lock().unwrap_or_else(|e| e.into_inner()).take() {
            old.close();
        }
        return Ok(installed);
    };
    let wake: LogWakeFn = wake
        .build_threadsafe_function::<()>()
        .weak::<true>()
        .build_callback(|_| Ok(()))
        .map_err(|e| {
            let e = napi_failure("creating the log wake function", e);
            napi::Error::new(Status::GenericFailure, e.message().to_string())
        })?;
    let mailbox: Mailbox<LogRecord> = Mailbox::new(LOG_BOUND, move || {
        // Only signals (the mailbox's rule for its wake-up).
        let _ = wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
    });
    let sink = mailbox.clone();
    if let Some(old) = LOGS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .replace(mailbox)
    {
        old.close();
    }
    // The core's log sink: on the emitting thread, queue (never blocks; counted when full).
    let push_log = move |level: i32, target: &str, message: &str| {
        let _ = sink.push(LogRecord {
            level: level.max(0) as u32,
            target: target.to_string(),
            message: message.to_string(),
        });
    };
    Ok(log::set_log_sink(Some(Arc::new(push_log)), level))
}

/// Takes every waiting log record, in order; records dropped because JavaScript did not take
/// them fast enough are reported by a warning record in their place.
#[napi(catch_unwind)]
pub fn drain_logs() -> Vec<LogRecord> {
    let mut records = Vec::new();
    if let Some(mailbox) = logs() {
        mailbox.drain(|d| match d {
            Delivery::Item(r) => records.push(r),
            Delivery::Dropped(n) => records.push(LogRecord {
                level: log::WARN as u32,
                target: "sentinel_recovery".to_string(),
                message: format!(
                    "{n} log records from the core were dropped (JavaScript too slow to take them)"
                ),
            }),
        });
    }
    records
}

/// Log records dropped because JavaScript did not drain them fast enough, since the logger was
/// installed.
#[napi(catch_unwind)]
pub fn logs_dropped() -> f64 {
    logs().map_or(0, |m| m.dropped()) as f64
}
