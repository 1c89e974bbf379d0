//! Interactive transactions for bindings: begin on a dedicated connection to the primary, WATCH,
//! read, then EXEC the queued commands; refused (`connection_lost`, "nothing was applied") when
//! the primary changed since the transaction began (see [`crate::Transaction`]).

use std::sync::Arc;

use super::handle::Handle;
use super::inflight::{Done, Operation};
use crate::client::Transaction;
use crate::error::Error;
use crate::resp::Value;

/// A transaction begun with [`Handle::begin_transaction`]. Each step completes through its
/// `done` like every host operation (and with `closed` when the handle closes first). After
/// [`HostTransaction::exec`] or [`HostTransaction::discard`], or once a step failed in a way that
/// ends it, further steps fail with a `config` error saying the transaction has ended.
pub struct HostTransaction {
    handle: Handle,
    tx: Arc<tokio::sync::Mutex<Option<Transaction>>>,
    primary: String,
}

fn ended() -> Error {
    Error::config("the transaction has ended (after exec, discard, or an error that ended it)")
}

fn owned<A: AsRef<[u8]>>(args: &[A]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_ref().to_vec()).collect()
}

impl Handle {
    /// Begins a transaction on a dedicated connection to the current primary, waiting for one
    /// up to `command_timeout_ms` like a command.
    pub fn begin_transaction(&self, done: Done<HostTransaction>) -> Operation {
        let handle = self.clone();
        self.start(
            move |c| {
                Ok(async move {
                    let tx = c.transaction().await?;
                    Ok(HostTransaction {
                        handle,
                        primary: tx.primary().to_string(),
                        tx: Arc::new(tokio::sync::Mutex::new(Some(tx))),
                    })
                })
            },
            done,
        )
    }
}

impl HostTransaction {
    /// The primary (`host:port`) this transaction runs on.
    pub fn primary(&self) -> &str {
        &self.primary
    }

    /// `WATCH keys...`: `exec` then completes with `None` if any of them changed meanwhile.
    pub fn watch<A: AsRef<[u8]>>(&self, keys: &[A], done: Done<()>) -> Operation {
        let keys = owned(keys);
        let tx = self.tx.clone();
        self.handle.start(
            move |_| {
                Ok(async move {
                    let mut guard = tx.lock().await;
                    guard.as_mut().ok_or_else(ended)?.watch(&keys).await
                })
            },
            done,
        )
    }

    /// Runs one command now on the transaction's connection (a read between WATCH and EXEC).
    pub fn execute<A: AsRef<[u8]>>(&self, args: &[A], done: Done<Value>) -> Operation {
        let args = owned(args);
        let tx = self.tx.clone();
        let names = self.handle.api_names();
        self.handle.start(
            move |_| {
                Ok(async move {
                    let mut guard = tx.lock().await;
                    let tx = guard.as_mut().ok_or_else(ended)?;
                    tx.execute(&args).await.map_err(|e| names.localize(e))
                })
            },
            done,
        )
    }

    /// Runs `commands` as MULTI ... EXEC and ends the transaction: `None` when a watched key
    /// changed (nothing ran), else one reply per command (a command that failed inside EXEC is a
    /// [`Value::Error`] in its place; a command the server refused to queue fails the whole EXEC
    /// with its `server` error, EXECABORT). Fails with
    /// `connection_lost` and applies nothing when the primary changed since the transaction
    /// began; a command that can't be queued (blocking, MULTI, ...) fails it with `config`.
    pub fn exec<A: AsRef<[u8]>>(
        &self,
        commands: &[Vec<A>],
        done: Done<Option<Vec<Value>>>,
    ) -> Operation {
        let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(|c| owned(c)).collect();
        let tx = self.tx.clone();
        let names = self.handle.api_names();
        self.handle.start(
            move |_| {
                Ok(async move {
                    let mut tx = tx.lock().await.take().ok_or_else(ended)?;
                    for command in &commands {
                        tx.queue(command).map_err(|e| names.localize(e))?;
                    }
                    tx.exec().await
                })
            },
            done,
        )
    }

    /// Ends the transaction without running anything (its connection closes). Idempotent.
    pub fn discard(&self) {
        if let Ok(mut guard) = self.tx.try_lock() {
            drop(guard.take());
            return;
        }
        // A step is running: end the transaction once that step is done.
        let tx = self.tx.clone();
        if let Ok(runtime) = crate::runtime::handle() {
            runtime.spawn(async move { drop(tx.lock().await.take()) });
        }
    }
}
