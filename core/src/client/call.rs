//! One command handed over without a task: when the client already holds an open connection to
//! the node the command goes to, the calling thread routes it, queues it and (the writer being
//! idle) writes it itself; the connection's task completes it when the reply comes. Only what
//! needs waiting — no usable node yet, a connection to open, a retry — runs as a task, the same
//! one [`Client::execute`] always ran.
//!
//! The result is the same either way: the same routing ([`pick`]), the same fencing of late
//! writes, the same retries (only when the command provably did not run), the same deadline.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::command::{self, Deadline, Encoded, Kind};
use super::execute::{judge, pick, run_dedicated, run_shared, timed_out, Judged};
use super::handle::{Client, Inner};
use crate::config::Address;
use crate::error::{Error, ErrorCode, Result};
use crate::monitor::Monitor;
use crate::node::Expect;
use crate::resp::{Reply, Value};

/// Called once with a command's result, on a core thread.
pub type Done = Box<dyn FnOnce(Result<Value>) + Send + 'static>;

/// A command on its way, with everything a retry needs.
struct Pending {
    inner: Arc<Inner>,
    monitor: Arc<Monitor>,
    kind: Kind,
    encoded: Encoded,
    deadline: Instant,
    /// The deadline is the call's own ([`Deadline::Call`]): it also bounds a blocking reply.
    call_deadline: bool,
    cancel: CancellationToken,
    done: Done,
}

/// One command, checked, encoded and given its deadline (counted from its making), not started.
pub(crate) struct Command {
    inner: Arc<Inner>,
    monitor: Arc<Monitor>,
    kind: Kind,
    encoded: Encoded,
    deadline: Instant,
    call_deadline: bool,
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
    /// Starts the command as [`Client::execute`] runs it and hands the result to `done`, once,
    /// on a core thread. Never waits. When the client already has an open connection to the
    /// node the command goes to, the calling thread sends it right away; otherwise it runs as a
    /// task. Cancelling `cancel` stops a command not sent yet (`done` then gets
    /// [`Error::cancelled`]); one already sent completes as usual.
    pub(crate) fn start(self, cancel: CancellationToken, done: Done) {
        let Command {
            inner,
            monitor,
            kind,
            encoded,
            deadline,
            call_deadline,
        } = self;
        Pending {
            inner,
            monitor,
            kind,
            encoded,
            deadline,
            call_deadline,
            cancel,
            done,
        }
        .start();
    }
}

impl Pending {
    fn start(self) {
        let Some(target) = self.route() else {
            return self.run_as_task(0, None);
        };
        let Some(conn) = self.inner.nodes.ready(&target.address, target.expect) else {
            // The node is picked (a replica read advanced the round robin): the task connects
            // to it rather than picking again.
            return self.run_as_task(0, Some(target));
        };
        let bytes = self.encoded.bytes.clone();
        let deadline = self.deadline;
        let reply = Finish {
            pending: self,
            target,
        };
        let mut ended = None;
        let offered = super::rendezvous::reading(|reading| {
            let encode = |out: &mut bytes::BytesMut| out.extend_from_slice(&bytes);
            match conn.call(encode, deadline, reply, reading) {
                Ok(offered) => offered,
                Err(reply) => {
                    ended = Some(reply);
                    None
                }
            }
        });
        if let Some(own) = offered {
            super::rendezvous::offer(own);
        }
        // The connection ended before anything was queued: nothing ran.
        if let Some(reply) = ended {
            reply.pending.run_as_task(0, None);
        }
    }

    /// The node to send to now, when there is one and the command may go without waiting.
    fn route(&self) -> Option<Target> {
        // A durable write needs the server's command table and a WAIT after it: the task does
        // both (what WAIT costs dwarfs what the direct send saves).
        if matches!(self.kind, Kind::Blocking(_))
            || (self.kind == Kind::Write && self.inner.durability.is_some())
            || self.cancel.is_cancelled()
            || self.inner.closed.is_cancelled()
        {
            return None;
        }
        self.monitor.with_status(|status| {
            pick(&self.inner, status, self.kind).map(|(address, expect)| Target {
                address,
                expect,
                round: status.rounds,
            })
        })
    }

    /// Runs the command as a task from round `min_round` on (waiting for a node, connecting,
    /// retrying), as [`Client::execute`] does; its first attempt goes to `first` when given.
    fn run_as_task(self, min_round: u64, first: Option<Target>) {
        let Pending {
            inner,
            monitor,
            kind,
            encoded,
            deadline,
            call_deadline,
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
                kind => run_shared(
                    &inner,
                    &monitor,
                    &encoded,
                    kind,
                    deadline,
                    min_round,
                    first.map(|t| (t.address, t.expect, t.round)),
                )
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

/// Where a command was sent.
struct Target {
    address: Address,
    expect: Expect,
    /// The discovery round the node was picked in.
    round: u64,
}

/// Handles the reply of a command sent without a task, as `run_shared` handles one.
struct Finish {
    pending: Pending,
    target: Target,
}

impl Reply for Finish {
    fn reply(self, result: Result<Value>) {
        let Finish { pending, target } = self;
        let Target {
            address,
            expect,
            round,
        } = target;
        if matches!(&result, Err(e) if e.code() == ErrorCode::Timeout) {
            // The connection's deadline for this call passed.
            return (pending.done)(Err(timed_out(&pending.monitor, &address, round)));
        }
        let judged = judge(
            &pending.inner,
            &pending.monitor,
            &address,
            expect,
            pending.kind,
            round,
            vec![result],
        );
        match judged {
            Judged::Retry { min_round } => pending.run_as_task(min_round, None),
            Judged::Done(mut results) => (pending.done)(
                results
                    .pop()
                    .unwrap_or_else(|| Err(Error::protocol("no reply"))),
            ),
        }
    }
}
