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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;
use sentinel_recovery::host::{log, ApiNames, HostTransaction};
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
        self.starting(id, || {
            let timeout = match deadline(timeout_ms) {
                Ok(timeout) => timeout,
                Err(e) => {
                    self.shared.push(Item::Many(id, Err(e)));
                    return None;
                }
            };
            let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(Args::to_vecs).collect();
            let shared = self.shared.clone();
            // Busy from now on: a reply this thread watches for goes back to the core.
            crate::watch::stop(&self.deliverer);
            let operation = self.handle.pipeline(
                &commands,
                timeout,
                Box::new(move |result| shared.push(Item::Many(id, result.map(Some)))),
            );
            cancellable.then_some(NativeOperation { operation })
        })
    }

    /// Begins transaction `tx` on a dedicated connection to the primary; completes `id` with
    /// its primary (`host:port`).
    #[napi(catch_unwind)]
    pub fn begin_transaction(&self, id: u32, tx: u32) {
        self.starting(id, || {
            let shared = self.shared.clone();
            let table = self.transactions.clone();
            self.handle.begin_transaction(Box::new(move |result| {
                let result = result.map(|t| {
                    let primary = Value::Simple(t.primary().to_string());
                    table
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(tx, t);
                    primary
                });
                shared.push(Item::Completion(id, result));
            }));
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
        self.starting(id, || {
            let keys = keys.to_vecs();
            let table = self.transactions.lock().unwrap_or_else(|e| e.into_inner());
            match table.get(&tx) {
                Some(t) => {
                    t.watch(&keys, self.shared.done(id, |()| Value::Nil));
                }
                None => self.shared.push(Item::Completion(id, Err(ended()))),
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
        self.starting(id, || {
            let args = args.to_vecs();
            let table = self.transactions.lock().unwrap_or_else(|e| e.into_inner());
            match table.get(&tx) {
                Some(t) => {
                    t.execute(&args, self.shared.done(id, |v| v));
                }
                None => self.shared.push(Item::Completion(id, Err(ended()))),
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
        self.starting(id, || {
            let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(Args::to_vecs).collect();
            let taken = self
                .transactions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&tx);
            match taken {
                Some(t) => {
                    let shared = self.shared.clone();
                    t.exec(
                        &commands,
                        Box::new(move |result| {
                            let result = result.map(|r| r.map(|v| v.into_iter().map(Ok).collect()));
                            shared.push(Item::Many(id, result));
                        }),
                    );
                }
                None => self.shared.push(Item::Completion(id, Err(ended()))),
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

/// Records waiting for the JavaScript thread (bounded: beyond it they are counted and dropped).
static RECORDS: Mutex<Vec<LogRecord>> = Mutex::new(Vec::new());
/// The log wake function: called with no arguments when records wait for [`drain_logs`].
type LogWakeFn = ThreadsafeFunction<(), (), (), Status, false, true>;

/// The installed logger's wake function.
static WAKE: Mutex<Option<LogWakeFn>> = Mutex::new(None);
/// As a client's: set from the push that scheduled a wake-up until it is dispatched.
static WAKE_PENDING: AtomicBool = AtomicBool::new(false);
static DROPPED: AtomicU64 = AtomicU64::new(0);
const MAX_PENDING_LOGS: usize = 10_000;

/// The core's log sink: on the emitting thread, queue and wake (never blocks).
fn push_log(level: i32, target: &str, message: &str) {
    {
        let mut records = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
        if records.len() >= MAX_PENDING_LOGS {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        records.push(LogRecord {
            level: level.max(0) as u32,
            target: target.to_string(),
            message: message.to_string(),
        });
    }
    if !WAKE_PENDING.swap(true, Ordering::SeqCst) {
        let wake = WAKE.lock().unwrap_or_else(|e| e.into_inner());
        let called = wake
            .as_ref()
            .map(|w| w.call((), ThreadsafeFunctionCallMode::NonBlocking) == Status::Ok);
        if called != Some(true) {
            WAKE_PENDING.store(false, Ordering::SeqCst);
        }
    }
}

/// Installs (with `wake`) or removes (without) the process-wide forwarding of core log records
/// at `level` or above: `wake` is called when records wait for [`drain_logs`]. It does not keep
/// the process alive. Returns false when the process already had another tracing subscriber.
#[napi(catch_unwind)]
pub fn set_logger(wake: Option<Function<(), ()>>, level: i32) -> napi::Result<bool> {
    let Some(wake) = wake else {
        let installed = log::set_log_sink(None, level);
        *WAKE.lock().unwrap_or_else(|e| e.into_inner()) = None;
        RECORDS.lock().unwrap_or_else(|e| e.into_inner()).clear();
        return Ok(installed);
    };
    let wake: LogWakeFn = wake
        .build_threadsafe_function::<()>()
        .weak::<true>()
        .build_callback(|_| {
            WAKE_PENDING.store(false, Ordering::SeqCst);
            Ok(())
        })
        .map_err(|e| {
            let e = napi_failure("creating the log wake function", e);
            napi::Error::new(Status::GenericFailure, e.message().to_string())
        })?;
    *WAKE.lock().unwrap_or_else(|e| e.into_inner()) = Some(wake);
    Ok(log::set_log_sink(Some(Arc::new(push_log)), level))
}

/// Takes every waiting log record.
#[napi(catch_unwind)]
pub fn drain_logs() -> Vec<LogRecord> {
    std::mem::take(&mut *RECORDS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Log records dropped because JavaScript did not drain them fast enough.
#[napi(catch_unwind)]
pub fn logs_dropped() -> f64 {
    DROPPED.load(Ordering::Relaxed) as f64
}
