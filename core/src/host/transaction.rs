//! Interactive transactions for bindings: begin on a dedicated connection to the primary, WATCH,
//! read, then EXEC the queued commands; refused (`connection_lost`, "nothing was applied") when
//! the primary changed since the transaction began (see [`crate::Transaction`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::handle::Handle;
use super::inflight::{Done, Operation};
use crate::client::{transaction_ended, Deadline, Transaction};
use crate::resp::Value;

/// A transaction begun with [`Handle::begin_transaction`]. Each step completes through its
/// `done` like every host operation (and with `closed` when the handle closes first). Steps run
/// in the order they were started, each once the one before it ended (completed, failed or was
/// cancelled), whichever core thread picks them up first. After
/// [`HostTransaction::exec`] or [`HostTransaction::discard`], or once a step failed in a way that
/// ends it (a step that timed out), further steps fail with a `config` error saying the
/// transaction has ended.
pub struct HostTransaction {
    handle: Handle,
    tx: Arc<tokio::sync::Mutex<Option<Transaction>>>,
    primary: String,
    order: Order,
}

/// The order of a transaction's steps: the end of the step started last, which the next one
/// waits for. Each step is its own task, and tasks started back to back may first run on
/// different core threads in any order: without this, an EXEC could overtake the GET started
/// before it.
#[derive(Default)]
struct Order {
    last: std::sync::Mutex<Option<watch::Receiver<()>>>,
}

/// One step's place in the [`Order`]: what it waits for, and its own end (the sender, dropped
/// when the step ends or is cancelled; nothing is ever sent).
struct Turn {
    previous: Option<watch::Receiver<()>>,
    ended: Option<watch::Sender<()>>,
}

impl Order {
    /// The next step's turn, taken when the step is started (on the caller's thread).
    fn next(&self) -> Turn {
        let (ended, end) = watch::channel(());
        let previous = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(end);
        Turn {
            previous,
            ended: Some(ended),
        }
    }
}

impl Turn {
    /// Waits until the step started before this one ended.
    async fn wait(&mut self) {
        if let Some(previous) = self.previous.as_mut() {
            // Closed (Err) when that step's sender is dropped: the only change there is.
            let _ = previous.changed().await;
        }
        self.previous = None;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Cancelled before its turn: the next step must still wait for the one before this.
        if let (Some(mut previous), Some(ended)) = (self.previous.take(), self.ended.take()) {
            if previous.has_changed().is_ok() {
                if let Ok(runtime) = crate::runtime::handle() {
                    runtime.spawn(async move {
                        let _ = previous.changed().await;
                        drop(ended);
                    });
                }
            }
        }
    }
}

/// Drops the transaction in `slot` (which closes its connection) when a step ended it (it timed
/// out), so later steps fail with "the transaction has ended".
fn settle(slot: &mut Option<Transaction>) {
    if slot.as_ref().is_some_and(Transaction::is_ended) {
        drop(slot.take());
    }
}

fn owned<A: AsRef<[u8]>>(args: &[A]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_ref().to_vec()).collect()
}

impl Handle {
    /// Begins a transaction on a dedicated connection to the current primary.
    ///
    /// `timeout`, when given, is the transaction's own deadline and bounds all of it, from this
    /// call until [`HostTransaction::exec`] completes (see [`crate::Client::transaction_timeout`]):
    /// each step may only use the time left, and one started or still running when it passes
    /// completes with `timeout` and ends the transaction (its connection is closed, so nothing
    /// stays queued or blocked on the server; later steps fail with `config`, "the transaction
    /// has ended"). An EXEC that timed out may or may not have been applied. One that breaks
    /// [`crate::deadline`]'s rule completes with `config`, as in every binding. Without it, the
    /// begin waits for a primary up to `command_timeout_ms` like a command, and each step gets
    /// `command_timeout_ms` of its own.
    pub fn begin_transaction(
        &self,
        timeout: Option<Duration>,
        done: Done<HostTransaction>,
    ) -> Operation {
        let handle = self.clone();
        self.start(
            move |c| {
                let deadline = Deadline::of_call(timeout, c.config().command_timeout())?;
                let by = Instant::now() + deadline.timeout();
                let whole = timeout.is_some().then_some(by);
                Ok(async move {
                    let tx = c.transaction_by(by, whole).await?;
                    Ok(HostTransaction {
                        handle,
                        primary: tx.primary().to_string(),
                        tx: Arc::new(tokio::sync::Mutex::new(Some(tx))),
                        order: Order::default(),
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
        let mut turn = self.order.next();
        self.handle.start(
            move |_| {
                Ok(async move {
                    turn.wait().await;
                    let mut guard = tx.lock().await;
                    let result = guard
                        .as_mut()
                        .ok_or_else(transaction_ended)?
                        .watch(&keys)
                        .await;
                    settle(&mut guard);
                    result
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
        let mut turn = self.order.next();
        self.handle.start(
            move |_| {
                Ok(async move {
                    turn.wait().await;
                    let mut guard = tx.lock().await;
                    let result = guard
                        .as_mut()
                        .ok_or_else(transaction_ended)?
                        .execute(&args)
                        .await;
                    settle(&mut guard);
                    result.map_err(|e| names.localize(e))
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
    /// Within a transaction's own deadline (see [`Handle::begin_transaction`]): past it, EXEC is
    /// not sent and completes with `timeout`; sent and not answered by then, it completes with
    /// `timeout` and may or may not have been applied.
    pub fn exec<A: AsRef<[u8]>>(
        &self,
        commands: &[Vec<A>],
        done: Done<Option<Vec<Value>>>,
    ) -> Operation {
        let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(|c| owned(c)).collect();
        let tx = self.tx.clone();
        let names = self.handle.api_names();
        let mut turn = self.order.next();
        self.handle.start(
            move |_| {
                Ok(async move {
                    turn.wait().await;
                    let mut tx = tx.lock().await.take().ok_or_else(transaction_ended)?;
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
