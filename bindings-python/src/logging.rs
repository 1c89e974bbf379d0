//! Core log records (tracing) to Python's `logging`, under the logger `sentinel_recovery`.
//!
//! A minimal global tracing subscriber: a record is formatted on the thread that emits it and
//! queued to the dispatcher thread, which hands it to `logging` with the GIL. No core thread ever
//! waits for the GIL. Records below the effective level of the `sentinel_recovery` logger are
//! discarded before formatting; that level is read again whenever a client opens and after each
//! batch of forwarded records.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use pyo3::prelude::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Level, Metadata, Subscriber};

use crate::dispatch;

/// Python level number below which records are dropped (`logging.WARNING` until told).
static THRESHOLD: AtomicI32 = AtomicI32::new(30);
static NEXT_SPAN: AtomicU64 = AtomicU64::new(1);

/// Python's level number for a tracing level (TRACE is 5, below DEBUG).
fn py_level(level: &Level) -> i32 {
    match *level {
        Level::TRACE => 5,
        Level::DEBUG => 10,
        Level::INFO => 20,
        Level::WARN => 30,
        Level::ERROR => 40,
    }
}

/// Sets the level threshold (a Python `logging` level number).
pub fn set_threshold(level: i32) {
    THRESHOLD.store(level, Ordering::Relaxed);
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

/// Installs the forwarding subscriber as the process-wide default, unless one is already set.
pub fn install() {
    let _ = tracing::subscriber::set_global_default(PyLogSubscriber);
}

struct PyLogSubscriber;

impl Subscriber for PyLogSubscriber {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // The threshold follows Python's logging configuration: ask every time.
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && py_level(metadata.level()) >= THRESHOLD.load(Ordering::Relaxed)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(NEXT_SPAN.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let meta = event.metadata();
        let mut text = Fields::default();
        event.record(&mut text);
        let mut message = text.message;
        if !text.fields.is_empty() {
            if !message.is_empty() {
                message.push(' ');
            }
            message.push_str(text.fields.trim_start());
        }
        let target = if meta.target().starts_with("sentinel_recovery") {
            meta.target()
        } else {
            "sentinel_recovery"
        };
        dispatch::log(py_level(meta.level()), target, message);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// The message and `key=value` pairs of one record.
#[derive(Default)]
struct Fields {
    message: String,
    fields: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}
