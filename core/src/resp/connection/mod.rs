//! The multiplexed connection: cheap handles in front of one task that owns the socket.
//!
//! Callers encode their command straight into the connection's outbox and queue who waits for
//! the reply, both under one lock, so bytes and waiters stay in the same order. On an idle
//! connection (nothing waiting to be written, no reply outstanding) the caller then sends its
//! bytes itself with one non-blocking write: a command one at a time needs no other thread to wake
//! (what the socket does not take at once is left to the task, which is woken for it). Bursts of
//! commands from many callers are left to the task, which writes each burst with one call. The task reads and decodes replies and
//! completes waiters in FIFO order: Redis answers in request order. Because a request is queued
//! synchronously, a caller that stops waiting never desynchronises the stream: its reply is still
//! read and matched, then discarded.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{Credentials, Protocol};
use crate::error::{Error, Result};
use crate::resp::codec::{self, FrameScanner, MAX_BUFFER};
use crate::resp::handshake;
use crate::resp::Value;
use crate::sync::Locked;
use crate::tls::TlsOptions;

/// Bytes requested from the socket per read; also the spare room kept in the read buffer.
const READ_CHUNK: usize = 64 * 1024;
/// Buffers that grew past this for one large reply or pipeline are released once empty.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// How to open a [`Connection`]: deadline and the state applied by the handshake.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// Deadline for the TCP connect and the whole handshake together.
    ///
    /// A zero duration expires at once; [`ConnectOptions::default`] uses 5 seconds.
    pub connect_timeout: Duration,
    /// Credentials sent with `HELLO 3 AUTH` or `AUTH`; never logged or put in errors.
    pub auth: Option<Credentials>,
    /// Sent with `HELLO 3 SETNAME` or `CLIENT SETNAME`.
    pub client_name: Option<String>,
    /// [`Protocol::Resp3`] tries `HELLO 3` first and falls back to RESP2 when the server refuses it.
    pub protocol: Protocol,
    /// Database selected with `SELECT` after authentication when not 0.
    pub db: i64,
    /// TLS (rustls) when set: the handshake runs inside the connect deadline, before the RESP
    /// handshake. `None` is plain TCP.
    pub tls: Option<TlsOptions>,
}

/// A 5-second connect timeout, no credentials, no name, RESP3 with fallback, database 0.
impl Default for ConnectOptions {
    fn default() -> ConnectOptions {
        ConnectOptions {
            connect_timeout: Duration::from_secs(5),
            auth: None,
            client_name: None,
            protocol: Protocol::default(),
            db: 0,
            tls: None,
        }
    }
}

/// A multiplexed, pipelined connection to one server.
///
/// Clones share the socket. Requests from concurrent callers are batched into shared writes and
/// their replies matched in order. The socket closes when [`Connection::close`] is called, the
/// peer or the network ends it, a reply cannot be decoded, or the last clone is dropped.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
    /// Dropped with the last handle, which ends the task.
    _handles: Arc<Handles>,
}

/// Called once with a command's reply (or its error), on the connection's core thread.
type Callback = Box<dyn FnOnce(Result<Value>) + Send + 'static>;

/// Who gets the reply of a command sent with [`Connection::call`]: called once, on the
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

/// State visible to both the handles and the task.
struct Shared {
    peer: SocketAddr,
    protocol: AtomicU8,
    /// Cancelled by `close()` (asking the task to stop) and by the task when it ends.
    done: CancellationToken,
    /// Why the connection ended, for errors returned to later requests.
    end_reason: Mutex<Option<String>>,
    outbox: Mutex<Outbox>,
    /// The read side of plain TCP, lent to a caller that reads its own reply (see `read`).
    /// Lock order: `read`, then `outbox`.
    read: Mutex<ReadState>,
    /// Wakes the task: bytes it must write, an earlier deadline to watch, or no handle left.
    wake: Notify,
    handles_gone: AtomicBool,
}

/// Marks the last handle's drop, so the task can end.
struct Handles(Arc<Shared>);

impl Drop for Handles {
    fn drop(&mut self) {
        self.0.handles_gone.store(true, Ordering::SeqCst);
        self.0.wake.notify_one();
    }
}

/// What the handles hand to the task, under one lock so bytes and waiters keep one order.
struct Outbox {
    /// Encoded commands not yet written nor taken by the task.
    bytes: BytesMut,
    /// Who waits for each reply still to come, in request order.
    waiters: VecDeque<Waiter>,
    /// How many waiters have been matched to their reply (taken from the front of `waiters`).
    answered: u64,
    /// The task holds bytes it has not finished writing: later bytes must queue behind them.
    task_writing: bool,
    /// The socket for writes by the submitting thread (plain TCP); `None` under TLS, whose
    /// records only the task can write, and once the connection ended.
    inline: Option<Arc<Socket>>,
    /// Set when the connection ended: nothing more is accepted.
    closed: bool,
    /// The earliest deadline of a waiting [`Waiter::Call`] the task knows of (it may have been
    /// answered since: the task then finds nothing to expire and looks again).
    next_deadline: Option<Instant>,
    /// Where pub/sub frames go once a SUBSCRIBE was sent.
    push: Option<mpsc::UnboundedSender<Value>>,
}

impl Outbox {
    /// Nothing waits to be written or answered (what [`Connection::submit`] calls idle).
    fn looks_idle(&self) -> bool {
        self.bytes.is_empty() && !self.task_writing && self.waiters.is_empty() && !self.closed
    }
}

/// Who is waiting for the next reply in line.
enum Waiter {
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
    fn to(tx: oneshot::Sender<Result<Value>>) -> Waiter {
        Waiter::Call {
            done: Some(Box::new(move |result| {
                // The caller may have stopped waiting; the reply is simply discarded then.
                let _ = tx.send(result);
            })),
            deadline: None,
        }
    }
}

impl Connection {
    /// Connects over TCP (with `TCP_NODELAY`) and runs the handshake of `opts`, all within
    /// `opts.connect_timeout`.
    ///
    /// Errors name `addr`: [`ErrorCode::Timeout`](crate::ErrorCode::Timeout) past the deadline,
    /// [`ErrorCode::Auth`](crate::ErrorCode::Auth) for refused credentials, the server's error for
    /// a failed `CLIENT SETNAME`/`SELECT`, connection errors otherwise. Must run inside a tokio
    /// runtime: the connection's task is spawned on it.
    ///
    /// With [`ConnectOptions::tls`] the certificate is verified against `addr`'s IP (or the
    /// configured server name); use [`Connection::connect_named`] to verify against a host name.
    #[cfg(any(test, feature = "internals"))]
    pub async fn connect(addr: SocketAddr, opts: &ConnectOptions) -> Result<Connection> {
        Connection::connect_named(addr, &addr.ip().to_string(), opts).await
    }

    /// [`Connection::connect`] to `addr`, which `host` (a name or IP literal, as configured or
    /// as a sentinel reported it) resolved to. With TLS, the server's certificate is verified
    /// against `host` unless [`TlsOptions::server_name`] overrides it; TLS failures (unknown CA,
    /// name mismatch, a refused client certificate) have [`ErrorCode::Tls`](crate::ErrorCode::Tls).
    /// Without TLS, `host` is not used.
    pub async fn connect_named(
        addr: SocketAddr,
        host: &str,
        opts: &ConnectOptions,
    ) -> Result<Connection> {
        let attempt = async {
            let stream = TcpStream::connect(addr)
                .await
                .map_err(|e| Error::from(e).context(format_args!("cannot connect to {addr}")))?;
            stream
                .set_nodelay(true)
                .map_err(|e| Error::from(e).context(format_args!("cannot connect to {addr}")))?;
            let transport = match &opts.tls {
                None => Transport::Plain(Arc::new(Socket::new(stream).map_err(|e| {
                    Error::from(e).context(format_args!("cannot connect to {addr}"))
                })?)),
                Some(tls) => {
                    let name = tls.server_name_for(host)?;
                    let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                    // A rustls error (certificate, alert, garbage from a non-TLS port) is a TLS
                    // failure; a socket error during the handshake stays a connection error.
                    let stream = connector.connect(name, stream).await.map_err(|e| {
                        match crate::tls::tls_error_text(&e) {
                            Some(why) => Error::new(
                                crate::ErrorCode::Tls,
                                format!("TLS handshake with {host} ({addr}) failed: {why}"),
                            ),
                            None => Error::from(e)
                                .context(format_args!("TLS handshake with {host} ({addr})")),
                        }
                    })?;
                    Transport::Tls(Box::new(stream))
                }
            };
            let conn = Connection::spawn(transport, addr);
            if let Err(e) = handshake::run(&conn, opts).await {
                conn.close();
                return Err(e.context(format_args!("handshake with {addr}")));
            }
            Ok(conn)
        };
        match tokio::time::timeout(opts.connect_timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(Error::timeout(format!(
                "connecting to {addr} took longer than {}",
                crate::error::duration_text(opts.connect_timeout)
            ))),
        }
    }

    /// Starts the task that owns `stream`; no handshake.
    fn spawn(stream: Transport, peer: SocketAddr) -> Connection {
        let shared = Arc::new(Shared {
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
            None,
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

    /// Puts the connection in pub/sub mode with `SUBSCRIBE channels...` and waits up to `timeout`
    /// for one confirmation per channel.
    ///
    /// Works on RESP2 (every frame after SUBSCRIBE is a pub/sub array) and RESP3 (messages are
    /// push frames). Errors: the server's refusal, timeout, or connection loss; on any error the
    /// connection is closed. Use one subscription per connection.
    pub async fn subscribe(self, channels: &[&str], timeout: Duration) -> Result<Subscription> {
        if channels.is_empty() {
            return Err(Error::config("SUBSCRIBE needs at least one channel"));
        }
        let mut args: Vec<&[u8]> = vec![b"SUBSCRIBE"];
        args.extend(channels.iter().map(|c| c.as_bytes()));
        let (push, rx) = mpsc::unbounded_channel();
        self.queue_pubsub(&args, &push)?;

        let mut sub = Subscription {
            conn: self,
            rx,
            early: VecDeque::new(),
        };
        let wait = async {
            let mut confirmed = 0;
            while confirmed < channels.len() {
                match sub.rx.recv().await {
                    None => return Err(sub.conn.lost()),
                    Some(Value::Error(text)) => return Err(Error::server(&text)),
                    Some(value) => match PubSub::parse(value) {
                        PubSub::Subscribed => confirmed += 1,
                        PubSub::Message(channel, payload) => {
                            sub.early.push_back((channel, payload))
                        }
                        PubSub::Other => {}
                    },
                }
            }
            Ok(())
        };
        let peer = sub.conn.peer();
        let outcome = match tokio::time::timeout(timeout, wait).await {
            Ok(result) => result,
            Err(_) => Err(Error::timeout(format!(
                "no SUBSCRIBE confirmation from {peer} within {}",
                crate::error::duration_text(timeout)
            ))),
        };
        match outcome {
            Ok(()) => Ok(sub),
            Err(e) => {
                sub.conn.close();
                Err(e.context(format_args!("subscribe on {peer}")))
            }
        }
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
    /// quick and must not wait. With `own` set, a calling thread that wrote the whole command to
    /// an idle connection gets an [`OwnReply`]: if it is going to block until the reply comes
    /// anyway, it may read the reply itself ([`OwnReply::read`]), and `reply` then runs there.
    pub fn call<R: Reply>(
        &self,
        encode: impl FnOnce(&mut BytesMut),
        deadline: Instant,
        reply: R,
        own: bool,
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
            own.then_some(deadline),
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
            None,
        )
        .map_err(|_| self.lost())?;
        let mut results = Vec::with_capacity(receivers.len());
        for rx in receivers {
            results.push(rx.await.unwrap_or_else(|_| Err(self.lost())));
        }
        Ok(results)
    }

    /// Queues a pub/sub command whose confirmations and messages go to `push`.
    fn queue_pubsub(&self, args: &[&[u8]], push: &mpsc::UnboundedSender<Value>) -> Result<()> {
        let push = push.clone();
        self.submit(
            move |out| {
                codec::encode_command(args, &mut out.bytes);
                out.waiters.push_back(Waiter::Subscribe);
                out.push = Some(push);
            },
            None,
        )
        .map(|_| ())
        .map_err(|_| self.lost())
    }

    /// Runs `queue` on the outbox (appending bytes and their waiters) and gets the bytes on their
    /// way: written here with one non-blocking write when the connection is idle (nothing waits
    /// to be written, no reply is outstanding), otherwise (and for what the socket did not take)
    /// by the task. Gives `queue` back, unrun, when the connection has ended. With `own` (the
    /// command's deadline), returns the [`OwnReply`] of a single command written whole here.
    fn submit<Q: FnOnce(&mut Outbox)>(
        &self,
        queue: Q,
        own: Option<Instant>,
    ) -> std::result::Result<Option<OwnReply>, Q> {
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

    /// The error for a request that cannot get a reply because the connection ended.
    fn lost(&self) -> Error {
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

impl Shared {
    fn protocol(&self) -> Protocol {
        decode_protocol(self.protocol.load(Ordering::SeqCst))
    }
}

fn encode_protocol(protocol: Protocol) -> u8 {
    match protocol {
        Protocol::Resp2 => 2,
        Protocol::Resp3 => 3,
    }
}

fn decode_protocol(value: u8) -> Protocol {
    if value == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    }
}

mod pubsub;
mod read;
mod socket;
mod task;
#[cfg(test)]
mod tests;

use pubsub::PubSub;
pub use pubsub::{Frame, Subscription};
pub use read::OwnReply;
use read::{ReadSide, ReadState};
use socket::Socket;
use task::{dispatch, run, Transport};
