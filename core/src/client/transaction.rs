//! MULTI/EXEC (and WATCH) on a connection of their own, bound to the primary they started on.
//!
//! A transaction can't share the multiplexed connection: WATCH and MULTI are connection state,
//! and other callers' commands would land inside. So it gets a dedicated connection, and `exec`
//! refuses to run if the primary changed since the transaction began: its reads (under WATCH)
//! and its queued writes belonged to the old primary.
//!
//! A transaction begun with a timeout of its own ([`Client::transaction_timeout`]) has one
//! deadline for all of it, from the begin until EXEC's reply: each step may only use the time
//! left. Without one, waiting for the primary and each step get `command_timeout_ms` apiece.
//! Either way, a step that times out ends the transaction: its connection is closed (nothing
//! stays queued or blocked on the server) and later steps fail with `config`, "the transaction
//! has ended".

use std::time::Duration;

use tokio::time::Instant;

use super::command::{self, Deadline, Encoded, Kind};
use super::durable;
use super::execute::wait_for_node;
use super::handle::Client;
use crate::error::{Error, ErrorCode, Result};
use crate::resp::{Connection, Value};
use crate::runtime::on_core;
use crate::types::Address;

/// A transaction begun with [`Client::transaction`]: `watch`, immediate `execute`s, `queue`d
/// commands, then `exec` or `discard`.
pub struct Transaction {
    client: Client,
    conn: Connection,
    primary: Address,
    queued: Vec<Vec<Vec<u8>>>,
    /// The whole transaction's deadline, when it has one; else each step gets
    /// `command_timeout_ms`.
    deadline: Option<Instant>,
    /// A step timed out: the connection is closed and every later step fails with [`ended`].
    ended: bool,
}

/// The error of a step of a transaction that has ended.
pub(crate) fn ended() -> Error {
    Error::config("the transaction has ended (after exec, discard, or an error that ended it)")
}

impl Client {
    /// Opens a transaction on a dedicated connection to the current primary (waiting for one up
    /// to the command deadline, like `execute`). Each later step is bounded by
    /// `command_timeout_ms` on its own; a step that times out ends the transaction.
    pub async fn transaction(&self) -> Result<Transaction> {
        let by = Instant::now() + self.inner.config.command_timeout();
        self.transaction_by(by, None).await
    }

    /// [`Client::transaction`] with a deadline of its own instead of `command_timeout_ms`: it
    /// bounds the whole transaction, from this call until EXEC's reply (waiting for the primary,
    /// WATCH, reads, EXEC, and whatever the caller does in between). Each step may only use the
    /// time left; a step started or still running when it passes fails with `timeout` and ends
    /// the transaction: its connection is closed, so nothing stays queued or blocked on the
    /// server, and later steps fail with `config` ("the transaction has ended"). An EXEC that
    /// timed out may or may not have been applied, as a timed-out command may or may not have
    /// run. A zero timeout, or one beyond [`crate::deadline::MAX_MS`], is refused with `config`
    /// (the rule every language shares, [`crate::deadline`]).
    pub async fn transaction_timeout(&self, timeout: Duration) -> Result<Transaction> {
        let timeout = Deadline::of_call(Some(timeout), Duration::ZERO)?.timeout();
        let by = Instant::now() + timeout;
        self.transaction_by(by, Some(by)).await
    }

    /// Opens a transaction, waiting for the primary and connecting until `begin_by`; `deadline`
    /// is the whole transaction's, if it has one.
    pub(crate) async fn transaction_by(
        &self,
        begin_by: Instant,
        deadline: Option<Instant>,
    ) -> Result<Transaction> {
        let inner = self.inner.clone();
        let monitor = self.monitor()?;
        let (conn, primary) = on_core(async move {
            // The same wait (bounded queue, deadline, closed) as every command's.
            let primary = wait_for_node(&inner, &monitor, Kind::Write, 0, begin_by).await?;
            let conn = inner
                .nodes
                .dedicated(&primary.address, primary.expect, begin_by)
                .await?;
            Ok((conn, primary.address))
        })
        .await?;
        Ok(Transaction {
            client: self.clone(),
            conn,
            primary,
            queued: Vec::new(),
            deadline,
            ended: false,
        })
    }
}

impl Transaction {
    /// The primary this transaction runs on.
    pub fn primary(&self) -> &Address {
        &self.primary
    }

    /// `WATCH keys...`: `exec` then returns `None` if any of them changed.
    pub async fn watch<A: AsRef<[u8]>>(&mut self, keys: &[A]) -> Result<()> {
        if keys.is_empty() {
            return Err(Error::config("WATCH needs at least one key"));
        }
        let mut args = vec![b"WATCH".to_vec()];
        args.extend(super::handle::owned(keys));
        self.send(vec![args], Step::Watch)
            .await?
            .pop()
            .unwrap_or_else(|| Err(Error::protocol("no reply")))
            .map(|_| ())
    }

    /// Runs one command now, on the transaction's connection (reads between WATCH and `exec`).
    pub async fn execute<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value> {
        check(args)?;
        let args = super::handle::owned(args);
        self.send(vec![args], Step::Command)
            .await?
            .pop()
            .unwrap_or_else(|| Err(Error::protocol("no reply")))
    }

    /// Adds a command to run atomically at `exec`. Nothing is sent.
    pub fn queue<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<&mut Transaction> {
        if self.ended {
            return Err(ended());
        }
        check(args)?;
        self.queued.push(super::handle::owned(args));
        Ok(self)
    }

    /// Runs the queued commands as `MULTI ... EXEC`. `Ok(None)` when a watched key changed.
    ///
    /// Fails with `connection_lost` and applies nothing if the primary changed since the
    /// transaction began or its connection is gone; if the connection breaks after EXEC was
    /// sent, the error says the outcome is unknown. So does the `timeout` of an EXEC sent but
    /// not answered by the deadline (its connection is closed); one whose deadline had already
    /// passed fails with `timeout` and sends nothing.
    pub async fn exec(mut self) -> Result<Option<Vec<Value>>> {
        let mut batch = Vec::with_capacity(self.queued.len() + 2);
        batch.push(vec![b"MULTI".to_vec()]);
        batch.append(&mut self.queued);
        batch.push(vec![b"EXEC".to_vec()]);
        let n = batch.len();
        let mut results = self.send(batch, Step::Exec).await?;
        self.conn.close();
        let exec = results
            .pop()
            .ok_or_else(|| Error::protocol("no EXEC reply"))?;
        // MULTI and each queued command answer +OK / +QUEUED; an error there aborts EXEC, and the
        // EXEC error names it (EXECABORT).
        if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
            if e.code() == ErrorCode::ConnectionLost {
                return Err(e.clone().context("transaction outcome unknown"));
            }
        }
        debug_assert_eq!(results.len() + 1, n);
        // The same check as every write: an EXEC a primary being demoted answers late is one the
        // promoted replica will not have.
        let exec = match self.client.monitor() {
            Ok(monitor) => super::attempt::distrust_late_writes(
                &monitor,
                &self.primary,
                Kind::Write,
                vec![exec],
            )
            .pop()
            .unwrap_or_else(|| Err(Error::protocol("no EXEC reply"))),
            Err(_) => exec,
        };
        match exec {
            Ok(Value::Nil) => Ok(None),
            Ok(Value::Array(items)) => Ok(Some(items)),
            Ok(other) => Err(Error::protocol(format!("unexpected EXEC reply {other:?}"))),
            Err(e) if e.code() == ErrorCode::ConnectionLost => {
                Err(e.context("transaction outcome unknown"))
            }
            Err(e) => Err(e),
        }
    }

    /// Drops the queued commands and ends the transaction (its connection closes).
    pub fn discard(self) {
        self.conn.close();
    }

    /// Whether a step timed out, which ended the transaction (its connection is closed).
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Closes the connection; later steps fail with [`ended`].
    fn end(&mut self) {
        self.ended = true;
        self.conn.close();
    }

    /// Sends on the transaction's connection once it is known to still belong to the primary,
    /// within the step's time (what is left of the transaction's deadline, or
    /// `command_timeout_ms`). A step out of time ends the transaction.
    async fn send(
        &mut self,
        commands: Vec<Vec<Vec<u8>>>,
        step: Step,
    ) -> Result<Vec<Result<Value>>> {
        if self.ended {
            return Err(ended());
        }
        let reply_by = match self.deadline {
            Some(deadline) if Instant::now() >= deadline => {
                self.end();
                return Err(Error::timeout(format!(
                    "the transaction's deadline passed before {} was sent; nothing was \
                     sent and the transaction has ended",
                    step.name()
                )));
            }
            Some(deadline) => deadline,
            None => Instant::now() + self.client.config().command_timeout(),
        };
        let current = self.client.topology()?.primary;
        if current.as_ref() != Some(&self.primary) {
            return Err(Error::connection_lost(format!(
                "the primary changed from {} to {} during the transaction; nothing was applied",
                self.primary,
                current
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "none".into())
            )));
        }
        let conn = self.conn.clone();
        let primary = self.primary.clone();
        let inner = self.client.inner.clone();
        let what = if self.deadline.is_some() {
            "the transaction's deadline"
        } else {
            "the command deadline"
        };
        let sent = on_core(async move {
            let mut reply_by = reply_by;
            let commands = Encoded::many(&commands);
            // With wait_replicas, EXEC (and a write run right away) gets its WAIT here too.
            let durable = match inner.durability.as_ref() {
                Some(durability) => {
                    let left = reply_by.saturating_duration_since(Instant::now());
                    let table = inner.write_tables.get(&conn, left).await;
                    reply_by += durability.allowance();
                    Some((durability, durable::plan(durability, &table, &commands)?))
                }
                None => None,
            };
            let send = durable.as_ref().map_or(&commands, |(_, planned)| &planned.encoded);
            let sent = conn.pipeline_encoded(&send.bytes, send.count);
            match tokio::time::timeout_at(reply_by, sent).await {
                Ok(Ok(results)) => Ok(match &durable {
                    Some((durability, planned)) => durable::fold(durability, planned, results),
                    None => results,
                }),
                Ok(Err(_)) => Err(Error::connection_lost(format!(
                    "the transaction's connection to {primary} is gone (a failover closes it); nothing was applied"
                ))),
                Err(_) => {
                    let e = Error::timeout(format!("no reply from {primary} within {what}"));
                    // EXEC was sent: the server may run it yet.
                    Err(match step {
                        Step::Exec => e.context("transaction outcome unknown"),
                        Step::Watch | Step::Command => e,
                    })
                }
            }
        })
        .await;
        if matches!(&sent, Err(e) if e.code() == ErrorCode::Timeout) {
            // The server may still hold the step (a paused primary runs it when it wakes): the
            // closed connection takes it, and any WATCH or MULTI state, with it.
            self.end();
        }
        sent
    }
}

/// A step that sends, for its errors.
#[derive(Clone, Copy)]
enum Step {
    Watch,
    Command,
    Exec,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Watch => "WATCH",
            Step::Command => "the command",
            Step::Exec => "EXEC",
        }
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.conn.close();
    }
}

/// Refuses what can't run inside a transaction (MULTI and the like, blocking commands) with
/// `config`, before anything is sent.
pub(crate) fn check<A: AsRef<[u8]>>(args: &[A]) -> Result<()> {
    let name = args.first().map(|a| command::Name::of(a.as_ref()));
    if matches!(
        name.as_ref().map(command::Name::as_str),
        Some("MULTI" | "EXEC" | "DISCARD" | "WATCH" | "UNWATCH")
    ) {
        return Err(Error::config(
            "use the Transaction methods for MULTI, EXEC, DISCARD and WATCH",
        ));
    }
    match command::classify(args)? {
        Kind::Blocking(_) => Err(Error::config(
            "blocking commands can't run inside a transaction",
        )),
        _ => Ok(()),
    }
}
