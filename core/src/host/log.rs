//! Core log records forwarded to the host's logging, once for every binding.
//!
//! A minimal process-wide tracing subscriber: each record is formatted on the thread that emits
//! it (often a core thread) and handed to the one installed [`LogSink`], which must only copy or
//! queue it (never block, never call back into the core and wait). Records below the threshold
//! are dropped before formatting. Levels use one numeric scale in every language, the one of
//! Python's `logging`: [`TRACE`] 5, [`DEBUG`] 10, [`INFO`] 20, [`WARN`] 30, [`ERROR`] 40.
//! Targets are the emitting module's path, always under `sentinel_recovery` (`sentinel_recovery`,
//! `sentinel_recovery::monitor::actor`, ...). The core never puts a secret into a record.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Level, Metadata, Subscriber};

/// Level of the most detailed records.
pub const TRACE: i32 = 5;
/// Level of debugging records.
pub const DEBUG: i32 = 10;
/// Level of informational records (a switch, a reconnect).
pub const INFO: i32 = 20;
/// Level of warnings (a sentinel unreachable, a discovery round failed).
pub const WARN: i32 = 30;
/// Level of errors (a host callback panicked).
pub const ERROR: i32 = 40;

/// Receives each record: `(level, target, message)`, on the emitting thread. It must not log
/// through `tracing` itself nor call [`set_log_sink`].
pub type LogSink = Arc<dyn Fn(i32, &str, &str) + Send + Sync + 'static>;

/// Records below this level are dropped. No sink: nothing passes.
static THRESHOLD: AtomicI32 = AtomicI32::new(i32::MAX);
static SINK: RwLock<Option<LogSink>> = RwLock::new(None);
static NEXT_SPAN: AtomicU64 = AtomicU64::new(1);

/// The shared level of a tracing level.
pub fn level_of(level: &Level) -> i32 {
    match *level {
        Level::TRACE => TRACE,
        Level::DEBUG => DEBUG,
        Level::INFO => INFO,
        Level::WARN => WARN,
        Level::ERROR => ERROR,
    }
}

/// The name of a shared level (`"trace"`, `"debug"`, `"info"`, `"warn"`, `"error"`): the
/// nearest one at or below `level`.
pub fn level_name(level: i32) -> &'static str {
    match level {
        l if l >= ERROR => "error",
        l if l >= WARN => "warn",
        l if l >= INFO => "info",
        l if l >= DEBUG => "debug",
        _ => "trace",
    }
}

/// Installs `sink` for every record at `threshold` or above, replacing the previous sink
/// (`None` removes it: records are dropped again). Once this returns, the previous sink is not
/// running and is never called again. Returns `false` when another tracing
/// subscriber was already the process-wide default (then nothing is forwarded from here: the
/// host configured tracing itself).
pub fn set_log_sink(sink: Option<LogSink>, threshold: i32) -> bool {
    let installed = install();
    let active = sink.is_some();
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = sink;
    THRESHOLD.store(if active { threshold } else { i32::MAX }, Ordering::Relaxed);
    installed
}

/// Changes the threshold of the installed sink (ignored without one).
pub fn set_log_threshold(threshold: i32) {
    if SINK.read().unwrap_or_else(|e| e.into_inner()).is_some() {
        THRESHOLD.store(threshold, Ordering::Relaxed);
    }
}

/// Makes the forwarding subscriber the process-wide default once; whether it is.
fn install() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| tracing::subscriber::set_global_default(Forward).is_ok())
}

struct Forward;

impl Subscriber for Forward {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // The threshold changes at run time: ask every time.
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && level_of(metadata.level()) >= THRESHOLD.load(Ordering::Relaxed)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(NEXT_SPAN.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        // Held during the call, so that once `set_log_sink` returned the old sink is not
        // running and never runs again (its host-side state may then be released).
        let sink = SINK.read().unwrap_or_else(|e| e.into_inner());
        let Some(sink) = sink.as_ref() else {
            return;
        };
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
        // A sink that panics must not take the emitting (core) thread down.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sink(level_of(meta.level()), target, &message)
        }));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_names_cover_the_scale() {
        assert_eq!(level_name(TRACE), "trace");
        assert_eq!(level_name(DEBUG), "debug");
        assert_eq!(level_name(INFO), "info");
        assert_eq!(level_name(WARN), "warn");
        assert_eq!(level_name(ERROR), "error");
        assert_eq!(level_name(45), "error");
        assert_eq!(level_of(&Level::WARN), WARN);
    }
}
