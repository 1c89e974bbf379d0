//! One command and its first driver: when the client already holds an open connection to the
//! node the command goes to, the calling thread routes it, queues it and (the writer being idle)
//! writes it itself; the connection's task, or the calling thread when it reads its own reply
//! ([`Reading`]), completes it when the reply comes. Only what needs waiting (no usable node yet,
//! a connection to open, a retry) runs as a task, the second driver (`execute::run_shared`).
//! Both step through the same [`Attempt`]: the same routing, the same fencing of late writes,
//! the same retries (only when the command provably did not run), the same deadline.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::attempt::{Attempt, Judged};
use super::command::{self, Deadline, Encoded, Kind};
use super::execute::{run_dedicated, run_shared};
use super::handle::{Client, Inner};
use crate::error::{Error, ErrorCode, Result};
use crate::monitor::Monitor;
use crate::resp::{OwnReply, Reading, Reply, Value};

/// A completion: called once with an operation's result, on a core thread (or, for a command,
/// on the thread that reads its own reply). The one callback type of every operation.
pub type Done<T> = Box<dyn FnOnce(Result<T>) + Send + 'static>;

/// One command, checked, encoded and given its deadline (counted from its making), not started.
pub(crate) struct Command {
    inner: Arc<Inner>,
    monitor: Arc<Monitor>,
    kind: Kind,
    encoded: Encoded,
    deadline: Instant,
    /// The deadline is the call's own ([`Deadline::Call`]): it also bounds a blocking reply.
    call_deadline: bool,
}

/// A started command: what it is, what stops it before it is sent, and who gets its result.
struct Call {
    command: Command,
    cancel: CancellationToken,
    done: Done<Value>,
}

impl Client {
    /// Checks and encodes one command for [`Command::start`]. Fails on what it cannot start with:
    /// a malformed or refused command (`config`), a closed client.
    pub(crate) fn command<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        deadline: Deadline,
    ) -> Result<Command> {
        Ok(Command {
            kind: command::classify(args)?,
            monitor: self.monitor()?,
            inner: self.inner.clone(),
            encoded: Encoded::one(args),
            deadline: Instant::now() + deadline.timeout(),
            call_deadline: matches!(deadline, Deadline::Call(_)),
        })
    }
}

impl Command {
    /// Starts the command as [`Client::execute`] runs it and hands the result to `done`, once.
    /// Never waits. When the client already has an open connection to the node the command goes
    /// to, the calling thread sends it right away; otherwise it runs as a task. Cancelling
    /// `cancel` stops a command not sent yet (`done` then gets [`Error::cancelled`]); one
    /// already sent completes as usual.
    ///
    /// `reading` says who reads the reply of a command this thread sends: with
    /// [`Reading::Offer`], a thread that wrote the whole command to an idle connection gets the
    /// [`OwnReply`] back, and must read it (or drop it, which hands it to the connection's task);
    /// with [`Reading::Extend`] a command for that connection joins the replies the held one
    /// reads. Returns `None` otherwise.
    pub(crate) fn start(
        self,
        reading: Reading<'_>,
        cancel: CancellationToken,
        done: Done<Value>,
    ) -> Option<OwnReply> {
        Call {
            command: self,
            cancel,
            done,
        }
        .start(reading)
    }
}

impl Call {
    fn start(self, reading: Reading<'_>) -> Option<OwnReply> {
        let Some(attempt) = self.route() else {
            self.run_as_task(0, None);
            return None;
        };
        let Some(conn) = self
            .command
            .inner
            .nodes
            .ready(&attempt.address, attempt.expect)
        else {
            // The node is picked (a replica read advanced the round robin): the task connects
            // to it rather than picking again.
            self.run_as_task(0, Some(attempt));
            return None;
        };
        let bytes = self.command.encoded.bytes.clone();
        let deadline = self.command.deadline;
        let encode = |out: &mut bytes::BytesMut| out.extend_from_slice(&bytes);
        match conn.call(
            encode,
            deadline,
            Finish {
                call: self,
                attempt,
            },
            reading,
        ) {
            Ok(own) => own,
            // The connection ended before anything was queued: nothing ran.
            Err(finish) => {
                finish.call.run_as_task(0, None);
                None
            }
        }
    }

    /// The node to send to now, when there is one and the command may go without waiting.
    fn route(&self) -> Option<Attempt> {
        let Command {
            inner,
            monitor,
            kind,
            ..
        } = &self.command;
        // A durable write needs the server's command table and a WAIT after it: the task does
        // both (what WAIT costs dwarfs what the direct send saves).
        if matches!(kind, Kind::Blocking(_))
            || (*kind == Kind::Write && inner.durability.is_some())
            || self.cancel.is_cancelled()
            || inner.closed.is_cancelled()
        {
            return None;
        }
        monitor.with_status(|status| Attempt::route(inner, status, *kind))
    }

    /// Runs the command as a task from round `min_round` on (waiting for a node, connecting,
    /// retrying), as [`Client::execute`] does; its first attempt goes to `first` when given.
    fn run_as_task(self, min_round: u64, first: Option<Attempt>) {
        let Call {
            command:
                Command {
                    inner,
                    monitor,
                    kind,
                    encoded,
                    deadline,
                    call_deadline,
                },
            cancel,
            done,
        } = self;
        let work = async move {
            match kind {
                Kind::Blocking(block) => {
                    let reply_by = if call_deadline {
                        Some(deadline)
                    } else {
                        block.map(|b| deadline + b)
                    };
                    run_dedicated(&inner, &monitor, &encoded, deadline, reply_by).await
                }
                kind => run_shared(&inner, &monitor, &encoded, kind, deadline, min_round, first)
                    .await
                    .and_then(|mut results| {
                        results
                            .pop()
                            .unwrap_or_else(|| Err(Error::protocol("no reply")))
                    }),
            }
        };
        let task = async move {
            let result = tokio::select! {
                _ = cancel.cancelled() => Err(Error::cancelled()),
                result = AssertUnwindSafe(work).catch_unwind() => {
                    result.unwrap_or_else(|panic| Err(Error::internal(&*panic)))
                }
            };
            done(result);
        };
        match crate::runtime::handle() {
            Ok(handle) => {
                handle.spawn(task);
            }
            // Dropping the task drops `done`, whose owner completes it with `closed`.
            Err(_) => drop(task),
        }
    }
}

/// Handles the reply of a command sent without a task: the calling thread's driver of
/// [`Attempt`], judging as `run_shared` does.
struct Finish {
    call: Call,
    attempt: Attempt,
}

impl Reply for Finish {
    fn reply(self, result: Result<Value>) {
        let Finish { call, attempt } = self;
        let Command {
            inner,
            monitor,
            kind,
            ..
        } = &call.command;
        if matches!(&result, Err(e) if e.code() == ErrorCode::Timeout) {
            // The connection's deadline for this call passed.
            return (call.done)(Err(attempt.timed_out(monitor)));
        }
        match attempt.judge(inner, monitor, *kind, vec![result]) {
            Judged::Retry { min_round } => call.run_as_task(min_round, None),
            Judged::Finished(mut results) => (call.done)(
                results
                    .pop()
                    .unwrap_or_else(|| Err(Error::protocol("no reply"))),
            ),
        }
    }
}
