//! The outbox the handles fill and the task drains under one lock, so bytes and waiters keep one
//! order; and where each decoded frame goes from there (the next waiter, or the push channel).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::BytesMut;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::frames::{is_resp2_pubsub_frame, is_subscribe_confirmation};
use super::socket::Socket;
use crate::error::{Error, Result};
use crate::resp::Value;
use crate::types::Protocol;

/// Called once with a command's reply (or its error), on the connection's core thread.
pub(super) type Callback = Box<dyn FnOnce(Result<Value>) + Send + 'static>;

/// Who gets the reply of a command sent with [`Connection::call`](super::Connection::call): called once, on the
/// connection's core thread, with the reply, a timeout, or the connection's end.
pub trait Reply: Send + 'static {
    /// Takes the result; must be quick and must not wait (the connection reads no further
    /// replies meanwhile).
    fn reply(self, result: Result<Value>);
}

impl<F: FnOnce(Result<Value>) + Send + 'static> Reply for F {
    fn reply(self, result: Result<Value>) {
        self(result)
    }
}

/// What the handles hand to the task, under one lock so bytes and waiters keep one order.
pub(super) struct Outbox {
    /// Encoded commands not yet written nor taken by the task.
    pub(super) bytes: BytesMut,
    /// Who waits for each reply still to come, in request order.
    pub(super) waiters: VecDeque<Waiter>,
    /// How many waiters have been matched to their reply (taken from the front of `waiters`).
    pub(super) answered: u64,
    /// The task holds bytes it has not finished writing: later bytes must queue behind them.
    pub(super) task_writing: bool,
    /// The socket for writes by the submitting thread (plain TCP); `None` under TLS, whose
    /// records only the task can write, and once the connection ended.
    pub(super) inline: Option<Arc<Socket>>,
    /// Set when the connection ended: nothing more is accepted.
    pub(super) closed: bool,
    /// The earliest deadline of a waiting [`Waiter::Call`] the task knows of (it may have been
    /// answered since: the task then finds nothing to expire and looks again).
    pub(super) next_deadline: Option<Instant>,
    /// Where pub/sub frames go once a SUBSCRIBE was sent.
    pub(super) push: Option<mpsc::UnboundedSender<Value>>,
}

impl Outbox {
    /// Nothing waits to be written or answered (what [`Connection::submit`] calls idle).
    pub(super) fn looks_idle(&self) -> bool {
        self.bytes.is_empty() && !self.task_writing && self.waiters.is_empty() && !self.closed
    }
}

/// Who is waiting for the next reply in line.
pub(super) enum Waiter {
    /// A callback, with the deadline the task enforces if it has one; `done` is `None` once it
    /// was called (timed out: the late reply is discarded).
    Call {
        done: Option<Callback>,
        deadline: Option<Instant>,
    },
    /// A SUBSCRIBE: its first confirmation, or its error reply, takes this place in the FIFO.
    Subscribe,
}

impl Waiter {
    /// A waiter whose reply goes to `tx` (no deadline: the caller keeps its own).
    pub(super) fn to(tx: oneshot::Sender<Result<Value>>) -> Waiter {
        Waiter::Call {
            done: Some(Box::new(move |result| {
                // The caller may have stopped waiting; the reply is simply discarded then.
                let _ = tx.send(result);
            })),
            deadline: None,
        }
    }
}

/// A reply (or error) and who gets it, taken from the outbox under its lock and delivered after.
pub(super) type Delivery = (Callback, Result<Value>);

/// Where one frame goes: to the next waiter in line, or (pub/sub) to the push channel.
pub(super) fn dispatch(out: &mut Outbox, value: Value, protocol: Protocol) -> Option<Delivery> {
    let out_of_band = match &value {
        Value::Push(_) => true,
        Value::Array(_) => {
            protocol == Protocol::Resp2 && out.push.is_some() && is_resp2_pubsub_frame(&value)
        }
        _ => false,
    };
    if out_of_band {
        if matches!(out.waiters.front(), Some(Waiter::Subscribe))
            && is_subscribe_confirmation(&value)
        {
            out.next_waiter();
        }
        push_value(out, value);
        return None;
    }
    let result = |value| match value {
        Value::Error(text) => Err(Error::server(&text)),
        other => Ok(other),
    };
    match out.next_waiter() {
        Some(Waiter::Call {
            done: Some(done), ..
        }) => Some((done, result(value))),
        // Timed out already: the late reply is discarded.
        Some(Waiter::Call { done: None, .. }) => None,
        // Only an error can answer SUBSCRIBE in band; the subscriber reports it.
        Some(Waiter::Subscribe) => {
            push_value(out, value);
            None
        }
        None => {
            tracing::debug!("discarding a reply nobody asked for");
            None
        }
    }
}

impl Outbox {
    /// Takes the waiter the next reply answers, counting it as answered.
    pub(super) fn next_waiter(&mut self) -> Option<Waiter> {
        let waiter = self.waiters.pop_front();
        if waiter.is_some() {
            self.answered += 1;
        }
        waiter
    }
}

fn push_value(out: &mut Outbox, value: Value) {
    match &out.push {
        Some(push) => {
            if push.send(value).is_err() {
                out.push = None;
            }
        }
        None => tracing::debug!("discarding a push message outside pub/sub"),
    }
}
