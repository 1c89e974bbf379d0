//! Running commands: pick the node, wait while there is none, send, and decide whether a failure
//! may be retried (only when the command provably did not run).

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use super::attempt::RE_RESOLVE;
use super::attempt::{distrust_late_writes, is_permanent_handshake_error, Attempt, Judged};
use super::command::{self, Deadline, Encoded, Kind};
use super::durable;
use super::handle::{Client, Inner};
use crate::config::ReadFrom;
use crate::error::{Error, ErrorCode, Result};
use crate::monitor::Monitor;
use crate::resp::{Reading, Value};
use crate::runtime::on_core;

impl Client {
    /// Runs one command on the primary (or on a replica for reads, per `read_from`) and returns
    /// its reply, RESP3 values as sent (RESP2 servers work too).
    ///
    /// While no primary is usable the command waits, in a queue bounded by `queue_size`
    /// (`queue_full` beyond it), for up to `command_timeout_ms` in all (`timeout`). It is retried
    /// automatically only when it provably did not run: a connection that could not be opened or
    /// had already ended, or a READONLY, LOADING or MASTERDOWN reply (each also makes the monitor
    /// re-resolve). A connection lost after sending gives `connection_lost`: the command may have
    /// run, and is not repeated. Blocking commands (BLPOP, XREAD BLOCK, WAIT, ...) run on a
    /// connection of their own; commands that change connection state (MULTI, WATCH, SUBSCRIBE,
    /// SELECT, ...) are refused with a `config` error saying what to use instead.
    ///
    /// `command_timeout_ms` bounds waiting for a node, connecting and the reply; a blocking
    /// command may block beyond it for as long as it asked the server (`BLPOP k 0`: until data
    /// arrives or the future is dropped).
    pub async fn execute<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Value> {
        let timeout = self.inner.config.command_timeout();
        self.execute_under(args, Deadline::Default(timeout)).await
    }

    /// [`Client::execute`] with a deadline of its own instead of `command_timeout_ms`. It ends
    /// the whole call, blocking commands included: `BLPOP k 0` with a 300 ms timeout fails with
    /// `timeout` after 300 ms and its dedicated connection is closed, so the server stops
    /// blocking it. A zero timeout, or one beyond [`crate::deadline::MAX_MS`], is refused with
    /// `config` (the rule every language shares, [`crate::deadline`]).
    pub async fn execute_timeout<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        timeout: Duration,
    ) -> Result<Value> {
        let deadline = Deadline::of_call(Some(timeout), Duration::ZERO)?;
        self.execute_under(args, deadline).await
    }

    async fn execute_under<A: AsRef<[u8]>>(&self, args: &[A], deadline: Deadline) -> Result<Value> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let cancel = CancellationToken::new();
        // Dropping this future stops a command not sent yet; an interrupted `BLPOP k 0` closes
        // its dedicated connection instead of staying blocked on the server.
        let _stop = cancel.clone().drop_guard();
        self.command(args, deadline)?.start(
            Reading::Task,
            cancel,
            Box::new(move |result| {
                let _ = tx.send(result);
            }),
        );
        rx.await.unwrap_or_else(|_| Err(Error::closed()))
    }

    /// Sends several commands back to back on one connection and returns one result per command.
    /// Not atomic (use [`Client::transaction`] for that); reads go to a replica only when every
    /// command is a read. Retried as a whole only when nothing was sent.
    pub async fn pipeline<A: AsRef<[u8]>>(
        &self,
        commands: &[Vec<A>],
    ) -> Result<Vec<Result<Value>>> {
        let timeout = self.inner.config.command_timeout();
        on_core(self.pipeline_work(commands, timeout)?).await
    }

    /// [`Client::pipeline`] with a deadline of its own instead of `command_timeout_ms`: it
    /// bounds the whole pipeline (waiting for a node, connecting, every reply), and a pipeline
    /// not answered in full by then fails with `timeout` as a whole. A zero timeout, or one
    /// beyond [`crate::deadline::MAX_MS`], is refused with `config` before anything is sent (the
    /// rule every language shares, [`crate::deadline`]).
    pub async fn pipeline_timeout<A: AsRef<[u8]>>(
        &self,
        commands: &[Vec<A>],
        timeout: Duration,
    ) -> Result<Vec<Result<Value>>> {
        let timeout = Deadline::of_call(Some(timeout), Duration::ZERO)?.timeout();
        on_core(self.pipeline_work(commands, timeout)?).await
    }

    /// A pipeline's work, checked and copied but not started (see [`Client::command`]);
    /// `timeout` is the deadline of the whole pipeline, counted from now.
    pub(crate) fn pipeline_work<A: AsRef<[u8]>>(
        &self,
        commands: &[Vec<A>],
        timeout: Duration,
    ) -> Result<impl Future<Output = Result<Vec<Result<Value>>>> + Send + 'static> {
        let mut kind = Kind::Read;
        for c in commands {
            match command::classify(c)? {
                Kind::Blocking(_) => return Err(Error::config(
                    "blocking commands can't be pipelined on the shared connection; use execute()",
                )),
                Kind::Write => kind = Kind::Write,
                Kind::Read => {}
            }
        }
        let encoded = Encoded::many(commands);
        let inner = self.inner.clone();
        let monitor = self.monitor()?;
        let deadline = Instant::now() + timeout;
        Ok(async move {
            if encoded.count == 0 {
                return Ok(Vec::new());
            }
            run_shared(&inner, &monitor, &encoded, kind, deadline, 0, None).await
        })
    }
}

/// A place in the bounded queue of commands waiting for a node; given back on drop.
struct QueueSlot<'a>(&'a Inner);

impl<'a> QueueSlot<'a> {
    fn take(inner: &'a Inner) -> Result<QueueSlot<'a>> {
        let before = inner.waiting.fetch_add(1, Ordering::AcqRel);
        let slot = QueueSlot(inner);
        if before >= inner.config.queue_size {
            return Err(Error::new(
                ErrorCode::QueueFull,
                format!(
                    "{before} commands are already waiting for a primary (queue_size {})",
                    inner.config.queue_size
                ),
            ));
        }
        Ok(slot)
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits until a command of `kind` can go to a node ([`Attempt::route`]) in a status from round
/// `min_round` or later.
pub(super) async fn wait_for_node(
    inner: &Inner,
    monitor: &Monitor,
    kind: Kind,
    min_round: u64,
    deadline: Instant,
) -> Result<Attempt> {
    let mut status = monitor.watch_status();
    let mut slot = None;
    loop {
        let current = status.borrow_and_update().clone();
        if current.rounds >= min_round {
            if let Some(attempt) = Attempt::route(inner, &current, kind) {
                return Ok(attempt);
            }
            // Refused credentials or failed TLS verification don't fix themselves by waiting.
            if let Some(e) = current
                .last_error
                .as_ref()
                .filter(|e| matches!(e.code(), ErrorCode::Auth | ErrorCode::Tls))
            {
                return Err(e.clone());
            }
        }
        if slot.is_none() {
            slot = Some(QueueSlot::take(inner)?);
        }
        tokio::select! {
            _ = inner.closed.cancelled() => return Err(Error::closed()),
            changed = status.changed() => if changed.is_err() { return Err(Error::closed()) },
            _ = tokio::time::sleep_until(deadline) => {
                let why = current
                    .last_error
                    .map(|e| format!(" (last discovery: {e})"))
                    .unwrap_or_default();
                let what = if kind == Kind::Read && inner.config.read_from == ReadFrom::Replica { "replica" } else { "primary" };
                return Err(Error::timeout(format!("no usable {what} within the command deadline{why}")));
            }
        }
    }
}

/// Sends the `commands` back to back on the shared connection of the right node, from discovery
/// round `min_round` on, retrying while nothing has run: the task's driver of [`Attempt`]. The
/// first attempt goes to `first` when the caller already picked the node.
pub(super) async fn run_shared(
    inner: &Arc<Inner>,
    monitor: &Monitor,
    commands: &Encoded,
    kind: Kind,
    deadline: Instant,
    mut min_round: u64,
    mut first: Option<Attempt>,
) -> Result<Vec<Result<Value>>> {
    loop {
        let attempt = match first.take() {
            Some(picked) => picked,
            None => wait_for_node(inner, monitor, kind, min_round, deadline).await?,
        };
        let conn = match inner
            .nodes
            .get(&attempt.address, attempt.expect, deadline)
            .await
        {
            Ok(conn) => conn,
            Err(e) => {
                min_round = attempt.unreachable(inner, monitor, kind, e, deadline)?;
                continue;
            }
        };
        let durable = match inner.durability.as_ref().filter(|_| kind != Kind::Read) {
            Some(durability) => {
                let left = deadline.saturating_duration_since(Instant::now());
                let table = inner.write_tables.get(&conn, left).await;
                Some((durability, durable::plan(durability, &table, commands)?))
            }
            None => None,
        };
        let (send, reply_by) = match &durable {
            Some((durability, planned)) if planned.waits() => {
                (&planned.encoded, deadline + durability.allowance())
            }
            _ => (commands, deadline),
        };
        // One write shares its WAIT with the writes in flight with it (group commit).
        let grouped = durable
            .as_ref()
            .filter(|(_, planned)| planned.waits() && commands.count == 1)
            .map(|(durability, _)| *durability);
        let sent = match grouped {
            Some(durability) => {
                tokio::time::timeout_at(reply_by, durable::grouped(durability, &conn, commands))
                    .await
            }
            None => {
                tokio::time::timeout_at(reply_by, conn.pipeline_encoded(&send.bytes, send.count))
                    .await
            }
        };
        let results = match sent {
            Err(_) => return Err(attempt.timed_out(monitor)),
            // The connection had ended before anything was handed to it: nothing ran.
            Ok(Err(_)) => {
                min_round = attempt.ended_before_sending(monitor);
                continue;
            }
            Ok(Ok(results)) => match &durable {
                Some((durability, planned)) if grouped.is_none() => {
                    durable::fold(durability, planned, results)
                }
                _ => results,
            },
        };
        match attempt.judge(inner, monitor, kind, results) {
            Judged::Retry { min_round: next } => min_round = next,
            Judged::Finished(results) => return Ok(results),
        }
    }
}

/// A blocking command on a connection of its own, closed afterwards.
pub(super) async fn run_dedicated(
    inner: &Arc<Inner>,
    monitor: &Monitor,
    command: &Encoded,
    connect_by: Instant,
    deadline: Option<Instant>,
) -> Result<Value> {
    let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    let mut min_round = 0;
    loop {
        let Attempt {
            address,
            expect,
            round,
        } = wait_for_node(inner, monitor, Kind::Write, min_round, connect_by).await?;
        let conn = match inner.nodes.dedicated(&address, expect, connect_by).await {
            Ok(conn) => conn,
            Err(e) if Instant::now() >= connect_by => return Err(e),
            Err(e) if is_permanent_handshake_error(&e) => {
                return Err(e.context(format!("connecting to {address}")));
            }
            Err(_) => {
                monitor.report("data connection failed", round);
                min_round = round + 1;
                continue;
            }
        };
        // A blocking command that pops or moves (BLMOVE, BLMPOP, BZPOPMIN...) writes, and
        // gets its WAIT like any other write.
        let durable = match inner.durability.as_ref() {
            Some(durability) => {
                let left = connect_by.saturating_duration_since(Instant::now());
                let table = inner.write_tables.get(&conn, left).await;
                Some((durability, durable::plan(durability, &table, command)?))
            }
            None => None,
        };
        let (send, reply_by) = match &durable {
            Some((durability, planned)) if planned.waits() => (
                &planned.encoded,
                deadline.map(|d| d + durability.allowance()),
            ),
            _ => (command, deadline),
        };
        let reply = tokio::select! {
            _ = inner.closed.cancelled() => Err(Error::closed()),
            r = tokio::time::timeout_at(reply_by.unwrap_or(far), conn.pipeline_encoded(&send.bytes, send.count)) => match r {
                Err(_) => Err(Error::timeout(format!("no reply from {address} within the command deadline"))),
                Ok(Err(e)) => Err(e),
                Ok(Ok(results)) => {
                    let mut results = match &durable {
                        Some((durability, planned)) => durable::fold(durability, planned, results),
                        None => results,
                    };
                    results.pop().unwrap_or_else(|| Err(Error::protocol("no reply")))
                }
            }
        };
        conn.close();
        return match reply {
            Err(e) if e.server_code().is_some_and(|c| RE_RESOLVE.contains(&c)) => {
                monitor.report("node refused command (READONLY/LOADING/MASTERDOWN)", round);
                min_round = round + 1;
                continue;
            }
            other => {
                let mut results = distrust_late_writes(monitor, &address, Kind::Write, vec![other]);
                results
                    .pop()
                    .unwrap_or_else(|| Err(Error::protocol("no reply")))
            }
        };
    }
}
