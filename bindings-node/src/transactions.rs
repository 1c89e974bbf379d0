//! Transactions for `index.js`: conversions and queueing only, over the core's host layer (which
//! runs MULTI/EXEC on a dedicated connection, orders replies and refuses an EXEC after a
//! failover).
//!
//! Transactions live in the client's table under an id JavaScript chooses; `exec` and `discard`
//! remove them. EXEC's results complete their id like any operation, as an array whose items are
//! each the reply or that command's error object (`null` when a watched key changed).

use napi_derive::napi;
use sentinel_recovery::host::HostTransaction;
use sentinel_recovery::{Error as SrError, Value};

use crate::args::{deadline, Args};
use crate::client::NativeClient;
use crate::completions::Item;
use crate::operation::NativeOperation;

fn ended() -> SrError {
    SrError::config("the transaction has ended (after exec, discard, or close)")
}

#[napi]
impl NativeClient {
    /// Begins transaction `tx` on a dedicated connection to the primary; completes `id` with
    /// its primary (`host:port`). `timeoutMs` bounds the whole transaction, until its EXEC
    /// completes (`Handle::begin_transaction`).
    #[napi(catch_unwind)]
    pub fn begin_transaction(&self, id: u32, tx: u32, timeout_ms: Option<f64>) {
        self.starting(id, |start| {
            let timeout = match deadline(timeout_ms) {
                Ok(timeout) => timeout,
                Err(e) => {
                    start.complete(Item::Completion(id, Err(e)));
                    return None;
                }
            };
            let table = self.transactions.clone();
            self.handle.begin_transaction(
                timeout,
                start.done_with(
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
                ),
            );
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
            let timeout = match deadline(timeout_ms) {
                Ok(timeout) => timeout,
                Err(e) => {
                    start.complete(Item::Many(id, Err(e)));
                    return None;
                }
            };
            let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(Args::to_vecs).collect();
            let watch = watch.to_vecs();
            let operation = self.handle.transaction(
                &commands,
                &watch,
                timeout,
                start.done_with(
                    |id, result: sentinel_recovery::Result<Option<Vec<Value>>>| {
                        Item::Many(
                            id,
                            result.map(|r| r.map(|v| v.into_iter().map(Ok).collect())),
                        )
                    },
                ),
            );
            cancellable.then_some(NativeOperation { operation })
        })
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
