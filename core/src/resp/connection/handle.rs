//! The [`Connection`] handle: hands commands to the task (or writes them itself on an idle
//! connection), reports the connection's state, closes it.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::outbox::{Callback, Outbox, Reply, Waiter};
use super::read;
use super::read::OwnReply;
use super::read_side::{ReadSide, ReadState};
use super::shared::{encode_protocol, ConnectionState, Handles};
use super::task::{run, Transport};
use crate::error::{Error, Result};
use crate::resp::{codec, Value};
use crate::sync::Locked;
use crate::types::Protocol;

/// A multiplexed, pipelined connection to one server.
///
/// Clones share the socket. Requests from concurrent callers are batched into shared writes and
/// their replies matched in order. The socket closes when [`Connection::close`] is called, the
/// peer or the network ends it, a reply cannot be decoded, or the last clone is dropped.
#[derive(Clone)]
pub struct Connection {
    pub(super) shared: Arc<ConnectionState>,
    /// Dropped with the last handle, which ends the task.
    pub(super) _handles: Arc<Handles>,
}

/// Who reads the reply of a command sent with [`Connection::call`].
pub enum Reading<'a> {
    /// The connection's task.
    Task,
    /// The calling thread, when it writes the whole command to an idle connection (it then gets
    /// an [`OwnReply`]); otherwise the task.
    Offer,
    /// The thread that holds this [`OwnReply`], whose replies it has not all read yet: it reads
    /// this command's reply after them (when the reply is for the same connection; otherwise
    /// the task does).
    Extend(&'a mut OwnReply),
}

/// [`Reading`] as [`Connection::submit`] acts on it.
pub(super) enum Own<'a> {
    No,
    /// Offer an [`OwnReply`] with this deadline.
    Offer(Instant),
    /// The caller holds the read side for this connection.
    Extend(&'a mut OwnReply),
}

impl Connection {
    /// Starts the task that owns `stream`; no handshake.
    pub(super) fn spawn(stream: Transport, peer: SocketAddr) -> Connection {
        let shared = Arc::new(ConnectionState {
            peer,
            protocol: AtomicU8::new(encode_protocol(Protocol::Resp2)),
            done: CancellationToken::new(),
            end_reason: Mutex::new(None),
            outbox: Mutex::new(Outbox {
                bytes: BytesMut::new(),
                waiters: VecDeque::new(),
                answered: 0,
                task_writing: false,
                inline: stream.inline(),
                closed: false,
                next_deadline: None,
                push: None,
            }),
            read: Mutex::new(ReadState::new(
                matches!(stream, Transport::Plain(_)).then(ReadSide::new),
            )),
            wake: Notify::new(),
            handles_gone: AtomicBool::new(false),
            group: Mutex::default(),
        });
        tokio::spawn(run(stream, shared.clone()));
        Connection {
            _handles: Arc::new(Handles(shared.clone())),
            shared,
        }
    }

    /// Sends one command (an array of bulk strings) and returns its reply.
    ///
    /// A top-level error reply is returned as `Err(Error::server(text))`. If the connection is or
    /// becomes broken, every pending and later request fails with
    /// [`ErrorCode::ConnectionLost`](crate::ErrorCode::ConnectionLost) (with
    /// [`ErrorCode::Protocol`](crate::ErrorCode::Protocol) for requests pending when an undecodable
    /// reply arrived). Dropping the returned future does not disturb the connection: the reply
    /// is read and discarded.
    pub async fn request<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Value> {
        if args.is_empty() {
            return Err(Error::config("a command needs at least one argument"));
        }
        let (reply, rx) = oneshot::channel();
        self.submit(
            |out| {
                codec::encode_command(args, &mut out.bytes);
                out.waiters.push_back(Waiter::to(reply));
            },
            Own::No,
        )
        .map_err(|_| self.lost())?;
        match rx.await {
            Ok(result) => result,
            Err(_) => Err(self.lost()),
        }
    }

    /// Sends `commands` back to back, with nothing from other callers in between, and returns one
    /// result per command, in order (`MULTI` ... `EXEC` relies on this).
    ///
    /// The outer error means nothing was handed to the connection because it had already ended:
    /// none of the commands can have reached the server, so a caller may safely retry them on
    /// another connection. Inner errors are per command; a
    /// [`ErrorCode::ConnectionLost`](crate::ErrorCode::ConnectionLost) there means the command may
    /// or may not have run.
    pub async fn pipeline<A: AsRef<[u8]>>(
        &self,
        commands: &[Vec<A>],
    ) -> Result<Vec<Result<Value>>> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        if commands.iter().any(|c| c.is_empty()) {
            return Err(Error::config("a command needs at least one argument"));
        }
        let mut bytes = BytesMut::new();
        for command in commands {
            codec::encode_command(command, &mut bytes);
        }
        self.pipeline_encoded(&bytes, commands.len()).await
    }

    /// [`Connection::request`] with a deadline: past it, `Err(`[`ErrorCode::Timeout`](crate::ErrorCode::Timeout)`)`.
    ///
    /// The connection stays open (the late reply is discarded); closing it is the caller's call.
    pub async fn request_timeout<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        timeout: Duration,
    ) -> Result<Value> {
        match tokio::time::timeout(timeout, self.request(args)).await {
            Ok(result) => result,
            Err(_) => Err(Error::timeout(format!(
                "no reply from {} within {}",
                self.shared.peer,
                crate::error::duration_text(timeout)
            ))),
        }
    }

    /// The protocol the handshake negotiated (RESP2 after a fallback).
    pub fn protocol(&self) -> Protocol {
        self.shared.protocol()
    }

    /// The address connected to.
    pub fn peer(&self) -> SocketAddr {
        self.shared.peer
    }

    /// True once the connection has ended or [`Connection::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.shared.done.is_cancelled()
    }

    /// Resolves when the connection has ended: peer closed, I/O or protocol error, or `close()`.
    pub async fn closed(&self) {
        self.shared.done.cancelled().await
    }

    /// Closes the socket now. Pending requests fail with
    /// [`ErrorCode::ConnectionLost`](crate::ErrorCode::ConnectionLost). Idempotent.
    pub fn close(&self) {
        self.shared.done.cancel();
    }

    pub(crate) fn set_protocol(&self, protocol: Protocol) {
        self.shared
            .protocol
            .store(encode_protocol(protocol), Ordering::SeqCst);
    }

    /// Sends one command, encoded by `encode` into the buffer it is given, without waiting;
    /// `reply` gets its reply. Past `deadline` it gets a timeout instead (the reply is discarded
    /// when it comes). Gives `reply` back when the connection had already ended: then nothing
    /// was sent.
    ///
    /// `reply` runs on the connection's core thread, in the middle of its reading: it must be
    /// quick and must not wait. `reading` says whether the calling thread reads the reply
    /// itself (see [`Reading`]); with [`Reading::Offer`], a calling thread that wrote the whole
    /// command to an idle connection gets an [`OwnReply`]: if it is going to block until the
    /// reply comes anyway, it may read the reply itself ([`OwnReply::read`]), and `reply` then
    /// runs there.
    pub fn call<R: Reply>(
        &self,
        encode: impl FnOnce(&mut BytesMut),
        deadline: Instant,
        reply: R,
        reading: Reading<'_>,
    ) -> std::result::Result<Option<OwnReply>, R> {
        let mut reply = Some(reply);
        let queued = self.submit(
            |out| {
                encode(&mut out.bytes);
                out.waiters.push_back(Waiter::Call {
                    done: reply
                        .take()
                        .map(|r| -> Callback { Box::new(move |result| r.reply(result)) }),
                    deadline: Some(deadline),
                });
                if out.next_deadline.is_none_or(|d| deadline < d) {
                    out.next_deadline = Some(deadline);
                }
            },
            match reading {
                Reading::Task => Own::No,
                Reading::Offer => Own::Offer(deadline),
                Reading::Extend(own) if own.reads_for(&self.shared) => Own::Extend(own),
                Reading::Extend(_) => Own::No,
            },
        );
        match queued {
            Ok(own) => Ok(own),
            // Not run: `reply` is still here.
            Err(_) => reply.take().map_or(Ok(None), Err),
        }
    }

    /// [`Connection::pipeline`] for `count` commands already encoded in `bytes`.
    pub async fn pipeline_encoded(&self, bytes: &[u8], count: usize) -> Result<Vec<Result<Value>>> {
        let mut receivers = Vec::with_capacity(count);
        self.submit(
            |out| {
                out.bytes.extend_from_slice(bytes);
                for _ in 0..count {
                    let (tx, rx) = oneshot::channel();
                    out.waiters.push_back(Waiter::to(tx));
                    receivers.push(rx);
                }
            },
            Own::No,
        )
        .map_err(|_| self.lost())?;
        let mut results = Vec::with_capacity(receivers.len());
        for rx in receivers {
            results.push(rx.await.unwrap_or_else(|_| Err(self.lost())));
        }
        Ok(results)
    }

    /// Queues a pub/sub command whose confirmations and messages go to `push`.
    pub(super) fn queue_pubsub(
        &self,
        args: &[&[u8]],
        push: &mpsc::UnboundedSender<Value>,
    ) -> Result<()> {
        let push = push.clone();
        self.submit(
            move |out| {
                codec::encode_command(args, &mut out.bytes);
                out.waiters.push_back(Waiter::Subscribe);
                out.push = Some(push);
            },
            Own::No,
        )
        .map(|_| ())
        .map_err(|_| self.lost())
    }

    /// Runs `queue` on the outbox (appending bytes and their waiters) and gets the bytes on their
    /// way: written here with one non-blocking write when the connection is idle (nothing waits
    /// to be written, no reply is outstanding), otherwise (and for what the socket did not take)
    /// by the task. Gives `queue` back, unrun, when the connection has ended. With
    /// [`Own::Offer`], returns the [`OwnReply`] of a single command written whole here; with
    /// [`Own::Extend`], the queued replies join those the caller reads.
    pub(super) fn submit<Q: FnOnce(&mut Outbox)>(
        &self,
        queue: Q,
        own: Own<'_>,
    ) -> std::result::Result<Option<OwnReply>, Q> {
        let own = match own {
            Own::No => None,
            Own::Offer(deadline) => Some(deadline),
            Own::Extend(reader) => return self.submit_read_here(queue, reader).map(|()| None),
        };
        let shared = &self.shared;
        // Borrowed from before the write when the caller may read its reply itself, so that
        // the task cannot read that reply first; not held across the write (the task would
        // block on it), and taken before the outbox (lock order: `read`, then `outbox`). Only
        // when the connection looks idle: under load the reply is not offered anyway, and
        // the lend would only make the task that reads meanwhile wait for it.
        let mut lent = own
            .and_then(|_| {
                let out = shared.outbox.locked();
                out.inline.clone().filter(|_| out.looks_idle())
            })
            .and_then(|socket| read::lend(shared, &socket));
        let mut guard = shared.outbox.locked();
        let out = &mut *guard;
        if out.closed || shared.done.is_cancelled() {
            drop(guard);
            if let Some(side) = lent {
                read::give_back(shared, None, side);
            }
            return Err(queue);
        }
        // The task knows of bytes in the outbox (whoever queued them first woke it), and of any
        // queued while it writes (it looks again once its own bytes are out).
        let task_knows = !out.bytes.is_empty() || out.task_writing;
        // Idle: nothing waits to be written and no reply is outstanding. With replies
        // outstanding, commands come in bursts (many callers at once): they are left to the
        // task, which writes a burst with one call, instead of one system call each here.
        let idle = out.looks_idle();
        let deadline_before = out.next_deadline;
        queue(out);
        let mut own_reply = None;
        let stream = out.inline.clone();
        if let (true, Some(stream)) = (idle, &stream) {
            // Never waits: on WouldBlock or an error the bytes stay for the task, which waits
            // for the socket or ends the connection with the error.
            if let Ok(n) = stream.try_write(&out.bytes) {
                out.bytes.advance(n);
            }
            if let (Some(deadline), true) = (own, out.bytes.is_empty() && out.waiters.len() == 1) {
                own_reply = lent.take().map(|side| {
                    OwnReply::new(shared.clone(), stream.clone(), out.answered, deadline, side)
                });
            }
        }
        let earlier_deadline = out.next_deadline != deadline_before;
        let unsent = !task_knows && !out.bytes.is_empty();
        drop(guard);
        if let Some(side) = lent {
            read::give_back(shared, stream.as_deref(), side);
        }
        if let (None, Some(stream)) = (&own_reply, &stream) {
            // Its reply is the task's to read: a loop that kept watching the socket since its
            // own last reply (`OwnReply::keep_watching`) hands the watch back to the runtime.
            read::stop_watching_elsewhere(shared, stream);
        }
        if unsent || earlier_deadline {
            shared.wake.notify_one();
        }
        Ok(own_reply)
    }

    /// [`Connection::submit`] for a caller that holds the read side already (its [`OwnReply`]'s
    /// replies are not all read yet): the queued replies are read by it too, so the task is
    /// not woken for them, and the bytes are written here whenever the task has none of its own
    /// to write first (a caller whose loop reads its replies is the one that writes the next
    /// commands, as a client without a core thread does).
    fn submit_read_here<Q: FnOnce(&mut Outbox)>(
        &self,
        queue: Q,
        reader: &mut OwnReply,
    ) -> std::result::Result<(), Q> {
        let shared = &self.shared;
        let mut out = shared.outbox.locked();
        if out.closed || shared.done.is_cancelled() {
            return Err(queue);
        }
        let deadline_before = out.next_deadline;
        queue(&mut out);
        // The last waiter queued is the last reply read here.
        reader.read_through(out.answered + out.waiters.len() as u64 - 1);
        // Deferred: the caller flushes, so the task is not woken for these bytes either. While
        // the task writes, it takes these after its own.
        let deferred = reader.defers_writes();
        if let (false, false, Some(stream)) = (out.task_writing, deferred, &out.inline) {
            if let Ok(n) = stream.try_write(&out.bytes) {
                out.bytes.advance(n);
            }
        }
        let unsent = !out.task_writing && !deferred && !out.bytes.is_empty();
        let wake = unsent || out.next_deadline != deadline_before;
        drop(out);
        if wake {
            shared.wake.notify_one();
        }
        Ok(())
    }

    /// The error for a request that cannot get a reply because the connection ended.
    pub(super) fn lost(&self) -> Error {
        let reason = self.shared.end_reason.locked().clone();
        let peer = self.shared.peer;
        match reason {
            Some(reason) => Error::connection_lost(format!("connection to {peer} ended: {reason}")),
            None => Error::connection_lost(format!("connection to {peer} ended")),
        }
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.shared.peer)
            .field("protocol", &self.protocol())
            .field("closed", &self.is_closed())
            .finish()
    }
}
