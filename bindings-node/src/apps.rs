//! Pipelines, transactions and the log callback for `index.js`: conversions and queueing only,
//! over the core's host layer (which sends, orders replies, refuses an EXEC after a failover and
//! formats log records without secrets).
//!
//! A pipeline's or EXEC's results complete their id like any operation, as an array whose items
//! are each the reply or that command's error object (EXEC: `null` when a watched key changed).
//! Transactions live in the client's table under an id JavaScript chooses; `exec` and `discard`
//! remove them. Log records wait in one process-wide queue for the JavaScript thread, woken like
//! a client's completions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;
use sentinel_recovery::host::{log, ApiNames, Delivery, HostTransaction, Mailbox};
use sentinel_recovery::{Error as SrError, Value};

use crate::args::Args;
use crate::{deadline, napi_failure, Item, NativeClient, NativeOperation};

/// How the Node API is named in error hints (MULTI refused on the shared connection, ...).
pub static NODE_API: ApiNames = ApiNames {
    transaction: "client.transaction(commands) or client.beginTransaction()",
    watch: "client.transaction(commands, { watch }) or tx.watch() after client.beginTransaction()",
};

/// A client's transactions by the id JavaScript gave them.
pub type Transactions = Arc<Mutex<HashMap<u32, HostTransaction>>>;

fn ended() -> SrError {
    SrError::config("the transaction has ended (after exec, discard, or close)")
}

#[napi]
impl NativeClient {
    /// Sends `commands` back to back and completes `id` with one result per command. `timeoutMs`
    /// is the whole pipeline's deadline. With `cancellable`, returns the operation.
    #[napi(catch_unwind)]
    pub fn pipeline(
        &self,
        id: u32,
        #[napi(ts_arg_type = "Array<Array<string | Uint8Array>>")] commands: Vec<Args>,
        timeout_ms: Option<f64>,
        cancellable: bool,
    ) -> Option<NativeOperation> {
        self.starting(id, |start| {
            let timeout = match deadline(timeout_ms) {
                Ok(timeout) => timeout,
                Err(e) => {
                    start.complete(Item::Many(id, Err(e)));
                    return None;
                }
            };
            let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(Args::to_vecs).collect();
            let done = start.done_with(|id, result| Item::Many(id, result.map(Some)));
            // Busy from now on: a reply this thread watches for goes back to the core.
            crate::watch::stop(&self.deliverer);
            let operation = self.handle.pipeline(&commands, timeout, done);
            cancellable.then_some(NativeOperation { operation })
        })
    }

    /// Begins transaction `tx` on a dedicated connection to the primary; completes `id` with
    /// its primary (`host:port`).
    #[napi(catch_unwind)]
    pub fn begin_transaction(&self, id: u32, tx: u32) {
        self.starting(id, |start| {
            let table = self.transactions.clone();
            self.handle.begin_transaction(start.done_with(
                move |id, result: sentinel_recovery::Result<HostTransaction>| {
                    let result = result.map(|t| {
                        let primary = Value::Simple(t.primary().to_string());
                        table
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(tx, t);
                        primary
                    });
                    Item::Completion(id, result)
                },
            ));
            Some(())
        });
    }

    /// `WATCH keys...` in transaction `tx`; completes `id` with `null`.
    #[napi(catch_unwind)]
    pub fn transaction_watch(
        &self,
        id: u32,
        tx: u32,
        #[napi(ts_arg_type = "Array<string | Uint8Array>")] keys: Args,
    ) {
        self.starting(id, |start| {
            let keys = keys.to_vecs();
            let table = self.transactions.lock().unwrap_or_else(|e| e.into_inner());
            match table.get(&tx) {
                Some(t) => {
                    t.watch(&keys, start.done(|()| Value::Nil));
                }
                None => start.complete(Item::Completion(id, Err(ended()))),
            }
            Some(())
        });
    }

    /// Runs one command now in transaction `tx`; completes `id` with its reply.
    #[napi(catch_unwind)]
    pub fn transaction_execute(
        &self,
        id: u32,
        tx: u32,
        #[napi(ts_arg_type = "Array<string | Uint8Array>")] args: Args,
    ) {
        self.starting(id, |start| {
            let args = args.to_vecs();
            let table = self.transactions.lock().unwrap_or_else(|e| e.into_inner());
            match table.get(&tx) {
                Some(t) => {
                    t.execute(&args, start.done(|v| v));
                }
                None => start.complete(Item::Completion(id, Err(ended()))),
            }
            Some(())
        });
    }

    /// MULTI, `commands`, EXEC in transaction `tx`, which ends; completes `id` with the replies
    /// (`null` when a watched key changed).
    #[napi(catch_unwind)]
    pub fn transaction_exec(
        &self,
        id: u32,
        tx: u32,
        #[napi(ts_arg_type = "Array<Array<string | Uint8Array>>")] commands: Vec<Args>,
    ) {
        self.starting(id, |start| {
            let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(Args::to_vecs).collect();
            let taken = self
                .transactions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&tx);
            match taken {
                Some(t) => {
                    t.exec(
                        &commands,
                        start.done_with(
                            |id, result: sentinel_recovery::Result<Option<Vec<Value>>>| {
                                Item::Many(
                                    id,
                                    result.map(|r| r.map(|v| v.into_iter().map(Ok).collect())),
                                )
                            },
                        ),
                    );
                }
                None => start.complete(Item::Completion(id, Err(ended()))),
            }
            Some(())
        });
    }

    /// Ends transaction `tx` without running anything. Idempotent.
    #[napi(catch_unwind)]
    pub fn transaction_discard(&self, tx: u32) {
        let taken = self
            .transactions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&tx);
        if let Some(t) = taken {
            t.discard();
        }
    }
}

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
