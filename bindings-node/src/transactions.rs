//! Transactions: `NativeTransaction`, the object under `transaction.js`'s `Transaction`, holding
//! the core's transaction (the host layer runs MULTI/EXEC on a dedicated connection, orders the
//! steps and refuses an EXEC after a failover). Each step completes its operation id like any
//! operation; EXEC as an array of replies and error objects (`null` when a watched key changed).
//!
//! A transaction ends with `exec`, `discard`, the object's collection (steps already started
//! still complete) or the client's `close`, after which a begin that completes is ended at once.

use std::sync::{Arc, Mutex, MutexGuard};

use napi_derive::napi;
use sentinel_recovery::host::HostTransaction;
use sentinel_recovery::{Error as SrError, Value};

use crate::args::Args;
use crate::batch::Item;
use crate::client::{NativeClient, Slot};
use crate::completions::Shared;
use crate::operation::NativeOperation;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn ended() -> SrError {
    SrError::config("the transaction has ended (after exec, discard, or close)")
}

/// A transaction of a client. Not meant to be used directly: see `transaction.js`.
#[napi]
pub struct NativeTransaction {
    shared: Arc<Shared>,
    slot: Slot,
}

#[napi]
impl NativeClient {
    /// Begins a transaction on a dedicated connection to the primary and returns it; completes
    /// `id` with its primary (`host:port`) once begun (the transaction is usable from then on).
    /// `timeoutMs` bounds the whole transaction, until its EXEC completes
    /// (`Handle::begin_transaction`).
    #[napi(catch_unwind)]
    pub fn begin_transaction(&self, id: u32, timeout_ms: Option<f64>) -> NativeTransaction {
        let tx = NativeTransaction {
            shared: self.shared.clone(),
            slot: Slot::default(),
        };
        self.starting(id, |start| {
            let timeout = start.deadline(timeout_ms)?;
            let (slot, transactions) = (tx.slot.clone(), self.transactions.clone());
            self.handle.begin_transaction(
                timeout,
                start.done_with(
                    move |id, result: sentinel_recovery::Result<HostTransaction>| {
                        let result = result.and_then(|t| {
                            let primary = Value::Simple(t.primary().to_string());
                            transactions
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .adopt(&slot, t)
                                .map(|()| primary)
                        });
                        Item::Completion(id, result)
                    },
                ),
            );
            Some(())
        });
        tx
    }

    /// MULTI, `commands`, EXEC after `WATCH watch...` (when not empty), the whole composite in
    /// the core (`Handle::transaction`); completes `id` with the replies (`null` when a watched
    /// key changed). `timeoutMs` is the whole transaction's deadline, until EXEC's reply. With
    /// `cancellable`, returns the operation (an AbortSignal cancels it).
    #[napi(catch_unwind)]
    pub fn transaction(
        &self,
        id: u32,
        #[napi(ts_arg_type = "Array<Array<string | Uint8Array>>")] commands: Vec<Args>,
        #[napi(ts_arg_type = "Array<string | Uint8Array>")] watch: Args,
        timeout_ms: Option<f64>,
        cancellable: bool,
    ) -> Option<NativeOperation> {
        self.starting(id, |start| {
            let timeout = start.deadline(timeout_ms)?;
            let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(Args::to_vecs).collect();
            let operation =
                self.handle
                    .transaction(&commands, &watch.to_vecs(), timeout, exec_done(start));
            cancellable.then_some(NativeOperation { operation })
        })
    }
}

/// EXEC's completion: its replies as a pipeline's, each one a reply or an error value.
fn exec_done(
    start: &crate::completions::Start,
) -> sentinel_recovery::host::Done<Option<Vec<Value>>> {
    start.done_with(
        |id, result: sentinel_recovery::Result<Option<Vec<Value>>>| {
            Item::Many(
                id,
                result.map(|r| r.map(|v| v.into_iter().map(Ok).collect())),
            )
        },
    )
}

#[napi]
impl NativeTransaction {
    /// `WATCH keys...`; completes `id` with `null`.
    #[napi(catch_unwind)]
    pub fn watch(&self, id: u32, #[napi(ts_arg_type = "Array<string | Uint8Array>")] keys: Args) {
        self.shared.starting(id, |start| {
            match lock(&self.slot).as_ref() {
                Some(t) => {
                    t.watch(&keys.to_vecs(), start.done(|()| Value::Nil));
                }
                None => start.complete(Item::Completion(id, Err(ended()))),
            }
            Some(())
        });
    }

    /// Runs one command now; completes `id` with its reply.
    #[napi(catch_unwind)]
    pub fn execute(&self, id: u32, #[napi(ts_arg_type = "Array<string | Uint8Array>")] args: Args) {
        self.shared.starting(id, |start| {
            match lock(&self.slot).as_ref() {
                Some(t) => {
                    t.execute(&args.to_vecs(), start.done(|v| v));
                }
                None => start.complete(Item::Completion(id, Err(ended()))),
            }
            Some(())
        });
    }

    /// MULTI, `commands`, EXEC, which ends the transaction; completes `id` with the replies
    /// (`null` when a watched key changed).
    #[napi(catch_unwind)]
    pub fn exec(
        &self,
        id: u32,
        #[napi(ts_arg_type = "Array<Array<string | Uint8Array>>")] commands: Vec<Args>,
    ) {
        self.shared.starting(id, |start| {
            let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(Args::to_vecs).collect();
            let taken = lock(&self.slot).take();
            match taken {
                Some(t) => {
                    t.exec(&commands, exec_done(start));
                }
                None => start.complete(Item::Completion(id, Err(ended()))),
            }
            Some(())
        });
    }

    /// Ends the transaction without running anything. Idempotent.
    #[napi(catch_unwind)]
    pub fn discard(&self) {
        let taken = lock(&self.slot).take();
        if let Some(t) = taken {
            t.discard();
        }
    }
}
