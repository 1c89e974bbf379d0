//! The multiplexed connection: cheap handles in front of one task that owns the socket.
//!
//! Callers encode their command, hand it to the task over a channel and wait on a oneshot. The task
//! appends everything queued to one write buffer (so concurrent callers share writes), reads and
//! decodes replies, and completes waiters in FIFO order: Redis answers in request order. Because a
//! request is queued synchronously, a caller that stops waiting never desynchronises the stream:
//! its reply is still read and matched, then discarded.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
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
    tx: mpsc::UnboundedSender<Msg>,
    shared: Arc<Shared>,
}

/// A connection in pub/sub mode, yielding the messages of the channels it subscribed to.
///
/// Dropping it closes the connection (unless other [`Connection`] clones are still alive).
pub struct Subscription {
    conn: Connection,
    rx: mpsc::UnboundedReceiver<Value>,
    /// Messages that arrived while `subscribe` was still waiting for confirmations.
    early: VecDeque<(Bytes, Bytes)>,
}

/// State visible to both the handles and the task.
struct Shared {
    peer: SocketAddr,
    protocol: AtomicU8,
    /// Cancelled by `close()` (asking the task to stop) and by the task when it ends.
    done: CancellationToken,
    /// Why the connection ended, for errors returned to later requests.
    end_reason: Mutex<Option<String>>,
}

enum Msg {
    Request {
        bytes: Bytes,
        reply: oneshot::Sender<Result<Value>>,
    },
    /// Several commands written back to back, one reply each, in order.
    Batch {
        bytes: Bytes,
        replies: Vec<oneshot::Sender<Result<Value>>>,
    },
    /// A SUBSCRIBE: it has no ordinary reply; confirmations and messages go to `push`.
    Subscribe {
        bytes: Bytes,
        push: mpsc::UnboundedSender<Value>,
    },
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
                None => Transport::Plain(stream),
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
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            peer,
            protocol: AtomicU8::new(encode_protocol(Protocol::Resp2)),
            done: CancellationToken::new(),
            end_reason: Mutex::new(None),
        });
        tokio::spawn(run(stream, rx, shared.clone()));
        Connection { tx, shared }
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
        let mut bytes = BytesMut::new();
        codec::encode_command(args, &mut bytes);
        let (reply, rx) = oneshot::channel();
        self.send(Msg::Request {
            bytes: bytes.freeze(),
            reply,
        })?;
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
        let mut replies = Vec::with_capacity(commands.len());
        let mut receivers = Vec::with_capacity(commands.len());
        for command in commands {
            codec::encode_command(command, &mut bytes);
            let (tx, rx) = oneshot::channel();
            replies.push(tx);
            receivers.push(rx);
        }
        self.send(Msg::Batch {
            bytes: bytes.freeze(),
            replies,
        })?;
        let mut results = Vec::with_capacity(receivers.len());
        for rx in receivers {
            results.push(rx.await.unwrap_or_else(|_| Err(self.lost())));
        }
        Ok(results)
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
        let mut bytes = BytesMut::new();
        codec::encode_command(&args, &mut bytes);
        let (push, rx) = mpsc::unbounded_channel();
        self.send(Msg::Subscribe {
            bytes: bytes.freeze(),
            push,
        })?;

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

    fn send(&self, msg: Msg) -> Result<()> {
        if self.is_closed() {
            return Err(self.lost());
        }
        self.tx.send(msg).map_err(|_| self.lost())
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

impl Subscription {
    /// The next message as `(channel, payload)`, from `message` and `pmessage` (pattern
    /// subscriptions) frames alike; confirmations and other frames are skipped.
    ///
    /// `None` once the connection has ended.
    pub async fn next(&mut self) -> Option<(Bytes, Bytes)> {
        if let Some(message) = self.early.pop_front() {
            return Some(message);
        }
        loop {
            let value = self.rx.recv().await?;
            match PubSub::parse(value) {
                PubSub::Message(channel, payload) => return Some((channel, payload)),
                PubSub::Subscribed | PubSub::Other => {}
            }
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("connection", &self.conn)
            .finish_non_exhaustive()
    }
}

/// What a pub/sub frame means to a subscriber.
enum PubSub {
    Subscribed,
    Message(Bytes, Bytes),
    Other,
}

impl PubSub {
    fn parse(value: Value) -> PubSub {
        let Some(items) = value.into_array() else {
            return PubSub::Other;
        };
        let mut items = items.into_iter();
        let Some(kind) = items.next() else {
            return PubSub::Other;
        };
        let Some(kind) = kind.as_bytes() else {
            return PubSub::Other;
        };
        if kind.eq_ignore_ascii_case(b"subscribe") {
            return PubSub::Subscribed;
        }
        let rest: Vec<Value> = items.collect();
        let (channel, payload) =
            if kind.eq_ignore_ascii_case(b"message") || kind.eq_ignore_ascii_case(b"smessage") {
                match <[Value; 2]>::try_from(rest) {
                    Ok([channel, payload]) => (channel, payload),
                    Err(_) => return PubSub::Other,
                }
            } else if kind.eq_ignore_ascii_case(b"pmessage") {
                match <[Value; 3]>::try_from(rest) {
                    Ok([_pattern, channel, payload]) => (channel, payload),
                    Err(_) => return PubSub::Other,
                }
            } else {
                return PubSub::Other;
            };
        match (channel.into_bytes(), payload.into_bytes()) {
            (Some(channel), Some(payload)) => PubSub::Message(channel, payload),
            _ => PubSub::Other,
        }
    }
}

/// RESP2 pub/sub frames are plain arrays; these first elements mark them.
fn is_resp2_pubsub_frame(value: &Value) -> bool {
    const KINDS: [&[u8]; 9] = [
        b"message",
        b"pmessage",
        b"smessage",
        b"subscribe",
        b"psubscribe",
        b"ssubscribe",
        b"unsubscribe",
        b"punsubscribe",
        b"sunsubscribe",
    ];
    let Value::Array(items) = value else {
        return false;
    };
    let Some(kind) = items.first().and_then(Value::as_bytes) else {
        return false;
    };
    KINDS.iter().any(|k| kind.eq_ignore_ascii_case(k))
}

fn is_subscribe_confirmation(value: &Value) -> bool {
    match value {
        Value::Array(items) | Value::Push(items) => items
            .first()
            .and_then(Value::as_bytes)
            .is_some_and(|k| k.eq_ignore_ascii_case(b"subscribe")),
        _ => false,
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

// ---------------------------------------------------------------------------------------------
// The connection task.

/// Who is waiting for the next reply in line.
enum Waiter {
    Reply(oneshot::Sender<Result<Value>>),
    /// A SUBSCRIBE: its first confirmation, or its error reply, takes this place in the FIFO.
    Subscribe,
}

/// Why the task stopped.
enum End {
    ClosedByClient,
    HandlesDropped,
    Lost(String),
    /// rustls failed: a handshake alert from the peer (a refused client certificate arrives with
    /// the first reply under TLS 1.3), a corrupt record.
    Tls(String),
    Protocol(String),
}

enum Event {
    Shutdown,
    Msg(Option<Msg>),
    Wrote(io::Result<usize>),
    Flushed(io::Result<()>),
    Read(io::Result<usize>),
}

/// Marks the connection done however the task ends, panics included, so `closed()` never hangs.
struct DoneGuard(Arc<Shared>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        self.0.done.cancel();
    }
}

/// Writes what is buffered, or flushes once the buffer is empty (one select branch: both need the
/// writer).
async fn write_or_flush<W: AsyncWrite + Unpin>(wr: &mut W, buf: &mut BytesMut) -> Event {
    if buf.is_empty() {
        Event::Flushed(wr.flush().await)
    } else {
        Event::Wrote(wr.write_buf(buf).await)
    }
}

/// The socket a connection task owns: plain TCP, or TLS over TCP.
enum Transport {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

struct Task {
    waiters: VecDeque<Waiter>,
    push: Option<mpsc::UnboundedSender<Value>>,
    rbuf: BytesMut,
    wbuf: BytesMut,
    scanner: FrameScanner,
}

async fn run(stream: Transport, mut rx: mpsc::UnboundedReceiver<Msg>, shared: Arc<Shared>) {
    let _done = DoneGuard(shared.clone());
    let mut task = Task {
        waiters: VecDeque::new(),
        push: None,
        rbuf: BytesMut::with_capacity(READ_CHUNK),
        wbuf: BytesMut::new(),
        scanner: FrameScanner::default(),
    };
    let end = match stream {
        // TcpStream splits into borrowed halves without a lock: the plain path pays nothing.
        Transport::Plain(mut stream) => {
            let (mut rd, mut wr) = stream.split();
            task.drive(&mut rd, &mut wr, false, &mut rx, &shared).await
        }
        Transport::Tls(stream) => {
            let (mut rd, mut wr) = tokio::io::split(*stream);
            task.drive(&mut rd, &mut wr, true, &mut rx, &shared).await
        }
    };

    let peer = shared.peer;
    let (error, reason) = match end {
        End::ClosedByClient => {
            let reason = "closed by the client".to_owned();
            (
                Error::connection_lost(format!("connection to {peer} {reason}")),
                reason,
            )
        }
        End::HandlesDropped => (
            Error::connection_lost(format!("connection to {peer} dropped")),
            "dropped".to_owned(),
        ),
        End::Lost(why) => {
            tracing::debug!(%peer, reason = %why, "connection lost");
            (
                Error::connection_lost(format!("connection to {peer} lost: {why}")),
                why,
            )
        }
        End::Tls(why) => {
            tracing::debug!(%peer, reason = %why, "TLS connection failed");
            (
                Error::new(
                    crate::ErrorCode::Tls,
                    format!("TLS connection to {peer} failed: {why}"),
                ),
                format!("TLS: {why}"),
            )
        }
        End::Protocol(why) => {
            tracing::warn!(%peer, reason = %why, "closing connection after an invalid reply");
            (
                Error::protocol(format!("invalid reply from {peer}: {why}")),
                format!("invalid reply: {why}"),
            )
        }
    };
    // Record the reason before the queue closes so late requests report it.
    *shared.end_reason.locked() = Some(reason);
    rx.close();
    while let Ok(msg) = rx.try_recv() {
        match msg {
            Msg::Request { reply, .. } => {
                let _ = reply.send(Err(error.clone()));
            }
            Msg::Batch { replies, .. } => {
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
            Msg::Subscribe { .. } => {}
        }
    }
    for waiter in task.waiters.drain(..) {
        if let Waiter::Reply(reply) = waiter {
            let _ = reply.send(Err(error.clone()));
        }
    }
}

impl Task {
    /// Runs the connection until it ends. `needs_flush` is set for TLS: a TLS stream may accept
    /// bytes into its record buffer without sending them, so once the write buffer is empty the
    /// stream is flushed (for TCP, flushing is a no-op and skipped).
    async fn drive<R, W>(
        &mut self,
        rd: &mut R,
        wr: &mut W,
        needs_flush: bool,
        rx: &mut mpsc::UnboundedReceiver<Msg>,
        shared: &Shared,
    ) -> End
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut unflushed = false;
        loop {
            if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
                self.rbuf.reserve(READ_CHUNK);
            }
            // Unbiased on purpose: a steady stream of new requests must not starve reads, nor a
            // flood of replies starve writes.
            let event = tokio::select! {
                _ = shared.done.cancelled() => Event::Shutdown,
                msg = rx.recv() => Event::Msg(msg),
                event = write_or_flush(wr, &mut self.wbuf), if !self.wbuf.is_empty() || unflushed => event,
                res = rd.read_buf(&mut self.rbuf) => Event::Read(res),
            };
            match event {
                Event::Shutdown => return End::ClosedByClient,
                Event::Msg(None) => return End::HandlesDropped,
                Event::Msg(Some(msg)) => {
                    self.accept(msg);
                    while let Ok(msg) = rx.try_recv() {
                        self.accept(msg);
                    }
                }
                Event::Wrote(Ok(0)) => return End::Lost("socket refused further writes".into()),
                Event::Wrote(Ok(_)) => {
                    unflushed = needs_flush;
                    if self.wbuf.is_empty() && self.wbuf.capacity() > KEEP_CAPACITY {
                        self.wbuf = BytesMut::new();
                    }
                }
                Event::Flushed(Ok(())) => unflushed = false,
                Event::Wrote(Err(e)) | Event::Flushed(Err(e)) | Event::Read(Err(e)) => {
                    return match crate::tls::tls_error_text(&e) {
                        Some(why) => End::Tls(why),
                        None => End::Lost(e.to_string()),
                    }
                }
                Event::Read(Ok(0)) => {
                    return End::Lost(if self.rbuf.is_empty() {
                        "closed by the server".into()
                    } else {
                        "closed by the server in the middle of a reply".into()
                    })
                }
                Event::Read(Ok(_)) => {
                    if let Err(why) = self.process(shared) {
                        return End::Protocol(why);
                    }
                    if self.rbuf.is_empty() && self.rbuf.capacity() > KEEP_CAPACITY {
                        self.rbuf = BytesMut::with_capacity(READ_CHUNK);
                    }
                }
            }
        }
    }

    fn accept(&mut self, msg: Msg) {
        match msg {
            Msg::Request { bytes, reply } => {
                self.wbuf.extend_from_slice(&bytes);
                self.waiters.push_back(Waiter::Reply(reply));
            }
            Msg::Batch { bytes, replies } => {
                self.wbuf.extend_from_slice(&bytes);
                self.waiters.extend(replies.into_iter().map(Waiter::Reply));
            }
            Msg::Subscribe { bytes, push } => {
                self.wbuf.extend_from_slice(&bytes);
                self.waiters.push_back(Waiter::Subscribe);
                self.push = Some(push);
            }
        }
    }

    /// Decodes and dispatches every complete frame in the read buffer.
    fn process(&mut self, shared: &Shared) -> std::result::Result<(), String> {
        loop {
            // Read per frame: the handshake switches protocols between replies.
            let protocol = shared.protocol();
            match self.scanner.scan(&self.rbuf, protocol)? {
                Some(len) => {
                    let frame = self.rbuf.split_to(len).freeze();
                    let value = codec::decode(frame, protocol)?;
                    self.dispatch(value, protocol);
                }
                None if self.rbuf.len() > MAX_BUFFER => {
                    return Err(format!("reply larger than {MAX_BUFFER} bytes"));
                }
                None => return Ok(()),
            }
        }
    }

    fn dispatch(&mut self, value: Value, protocol: Protocol) {
        let out_of_band = match &value {
            Value::Push(_) => true,
            Value::Array(_) => {
                protocol == Protocol::Resp2 && self.push.is_some() && is_resp2_pubsub_frame(&value)
            }
            _ => false,
        };
        if out_of_band {
            if matches!(self.waiters.front(), Some(Waiter::Subscribe))
                && is_subscribe_confirmation(&value)
            {
                self.waiters.pop_front();
            }
            self.push_value(value);
            return;
        }
        match self.waiters.pop_front() {
            Some(Waiter::Reply(reply)) => {
                let result = match value {
                    Value::Error(text) => Err(Error::server(&text)),
                    other => Ok(other),
                };
                // The caller may have stopped waiting; the reply is simply discarded then.
                let _ = reply.send(result);
            }
            // Only an error can answer SUBSCRIBE in band; the subscriber reports it.
            Some(Waiter::Subscribe) => self.push_value(value),
            None => tracing::debug!("discarding a reply nobody asked for"),
        }
    }

    fn push_value(&mut self, value: Value) {
        match &self.push {
            Some(push) => {
                if push.send(value).is_err() {
                    self.push = None;
                }
            }
            None => tracing::debug!("discarding a push message outside pub/sub"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::resp::test_server::{bulk, Action, MockServer};

    fn resp2() -> ConnectOptions {
        ConnectOptions {
            protocol: Protocol::Resp2,
            ..ConnectOptions::default()
        }
    }

    fn text(v: &Value) -> &str {
        v.as_str().unwrap_or("<not a string>")
    }

    #[tokio::test]
    async fn pipelines_concurrent_requests_in_order() {
        let server = MockServer::start(|cmd| {
            Action::Reply(bulk(&String::from_utf8_lossy(&cmd[1])).into_bytes())
        })
        .await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let tasks: Vec<_> = (0..100)
            .map(|i| {
                let conn = conn.clone();
                tokio::spawn(async move {
                    let reply = conn.request(&["ECHO", &format!("msg-{i}")]).await;
                    (i, reply)
                })
            })
            .collect();
        for task in tasks {
            let (i, reply) = task.await.unwrap();
            assert_eq!(text(&reply.unwrap()), format!("msg-{i}"));
        }
        drop(conn);
        let log = server.finish().await;
        assert_eq!(log.commands.len(), 100);
        assert!(
            log.max_per_read > 1,
            "requests were not batched: {}",
            log.max_per_read
        );
    }

    #[tokio::test]
    async fn server_closing_mid_reply_fails_pending_and_later_requests() {
        let mut n = 0;
        let server = MockServer::start(move |_| {
            n += 1;
            if n == 1 {
                Action::reply("+first\r\n")
            } else {
                Action::Close(b"$10\r\nabc".to_vec())
            }
        })
        .await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let (a, b, c) = tokio::join!(
            conn.request(&["GET", "a"]),
            conn.request(&["GET", "b"]),
            conn.request(&["GET", "c"])
        );
        assert_eq!(text(&a.unwrap()), "first");
        for r in [b, c] {
            let e = r.unwrap_err();
            assert_eq!(e.code(), ErrorCode::ConnectionLost, "{e}");
            assert!(e.message().contains(&server.addr.to_string()), "{e}");
        }
        tokio::time::timeout(Duration::from_secs(2), conn.closed())
            .await
            .unwrap();
        assert!(conn.is_closed());
        let e = conn.request(&["PING"]).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::ConnectionLost);
    }

    #[tokio::test]
    async fn malformed_reply_is_a_protocol_error() {
        let server = MockServer::start(|_| Action::reply("?garbage\r\n")).await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let (a, b) = tokio::join!(conn.request(&["PING"]), conn.request(&["PING"]));
        for r in [a, b] {
            assert_eq!(r.unwrap_err().code(), ErrorCode::Protocol);
        }
        tokio::time::timeout(Duration::from_secs(2), conn.closed())
            .await
            .unwrap();
        assert_eq!(
            conn.request(&["PING"]).await.unwrap_err().code(),
            ErrorCode::ConnectionLost
        );
    }

    #[tokio::test]
    async fn resp3_types_are_refused_on_resp2() {
        let server = MockServer::start(|_| Action::reply("%1\r\n+a\r\n+b\r\n")).await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        assert_eq!(
            conn.request(&["PING"]).await.unwrap_err().code(),
            ErrorCode::Protocol
        );
    }

    #[tokio::test]
    async fn error_replies_become_server_errors_nested_ones_values() {
        let server = MockServer::start(|cmd| match cmd[0].as_slice() {
            b"EXEC" => Action::reply("*2\r\n+OK\r\n-WRONGTYPE no\r\n"),
            _ => Action::reply("-READONLY You can't write against a read only replica.\r\n"),
        })
        .await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let e = conn.request(&["SET", "k", "v"]).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Server);
        assert_eq!(e.server_code(), Some("READONLY"));
        let v = conn.request(&["EXEC"]).await.unwrap();
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Simple("OK".into()),
                Value::Error("WRONGTYPE no".into())
            ])
        );
        assert!(!conn.is_closed());
    }

    #[tokio::test]
    async fn request_timeout_leaves_the_connection_usable() {
        let server = MockServer::start(|cmd| match cmd[0].as_slice() {
            b"SLOW" => Action::Silent,
            // Answers the abandoned SLOW first, as a late server would.
            _ => Action::reply("+slow\r\n+PONG\r\n"),
        })
        .await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let started = std::time::Instant::now();
        let e = conn
            .request_timeout(&["SLOW"], Duration::from_millis(100))
            .await
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Timeout);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(!conn.is_closed());
        let v = conn.request(&["PING"]).await.unwrap();
        assert_eq!(
            v,
            Value::Simple("PONG".into()),
            "late reply was matched to the abandoned request"
        );
    }

    #[tokio::test]
    async fn close_fails_pending_requests_and_is_idempotent() {
        let server = MockServer::start(|_| Action::Silent).await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let pending = tokio::spawn({
            let conn = conn.clone();
            async move { conn.request(&["BLPOP", "q", "0"]).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        conn.close();
        conn.close();
        let e = pending.await.unwrap().unwrap_err();
        assert_eq!(e.code(), ErrorCode::ConnectionLost);
        assert!(conn.is_closed());
        conn.closed().await;
        // The socket really closed: the server sees EOF.
        server.finish().await;
    }

    #[tokio::test]
    async fn dropping_every_handle_ends_the_task() {
        let server = MockServer::start(|_| Action::reply("+PONG\r\n")).await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let watcher = conn.shared.clone();
        conn.request(&["PING"]).await.unwrap();
        drop(conn);
        server.finish().await;
        tokio::time::timeout(Duration::from_secs(2), watcher.done.cancelled())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn connect_errors_name_the_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let e = Connection::connect(addr, &resp2()).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::ConnectionLost);
        assert!(e.message().contains(&addr.to_string()), "{e}");
    }

    #[tokio::test]
    async fn subscribe_resp2() {
        let server = MockServer::start(|cmd| match cmd[0].as_slice() {
            b"SUBSCRIBE" => Action::Close(
                [
                    "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n",
                    "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$5\r\nhello\r\n",
                    "*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
                    "*4\r\n$8\r\npmessage\r\n$2\r\nb*\r\n$1\r\nb\r\n$5\r\nworld\r\n",
                    "*2\r\n$4\r\npong\r\n$0\r\n\r\n",
                    "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$4\r\nlast\r\n",
                ]
                .concat()
                .into_bytes(),
            ),
            _ => Action::reply("+OK\r\n"),
        })
        .await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let mut sub = conn
            .subscribe(&["a", "b"], Duration::from_secs(2))
            .await
            .unwrap();
        let mut got = Vec::new();
        while let Some((channel, payload)) = sub.next().await {
            got.push(format!(
                "{}={}",
                String::from_utf8_lossy(&channel),
                String::from_utf8_lossy(&payload)
            ));
        }
        assert_eq!(got, ["a=hello", "b=world", "a=last"]);
    }

    #[tokio::test]
    async fn subscribe_resp3_and_unsolicited_pushes() {
        let server = MockServer::start(|cmd| match cmd[0].as_slice() {
            b"HELLO" => Action::reply("%1\r\n$5\r\nproto\r\n:3\r\n"),
            b"PING" => Action::reply(">2\r\n$10\r\ninvalidate\r\n*0\r\n+PONG\r\n"),
            b"SUBSCRIBE" => Action::reply(
                &[
                    ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
                    ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\none\r\n",
                ]
                .concat(),
            ),
            _ => Action::reply("+OK\r\n"),
        })
        .await;
        let opts = ConnectOptions::default();
        let conn = Connection::connect(server.addr, &opts).await.unwrap();
        assert_eq!(conn.protocol(), Protocol::Resp3);
        assert_eq!(
            conn.request(&["PING"]).await.unwrap(),
            Value::Simple("PONG".into())
        );
        let keep = conn.clone();
        let mut sub = conn
            .subscribe(&["ch"], Duration::from_secs(2))
            .await
            .unwrap();
        let (channel, payload) = sub.next().await.unwrap();
        assert_eq!((&channel[..], &payload[..]), (&b"ch"[..], &b"one"[..]));
        keep.close();
        assert_eq!(sub.next().await, None);
    }

    #[tokio::test]
    async fn refused_subscribe_is_an_error() {
        let server = MockServer::start(|_| {
            Action::reply("-NOPERM this user has no permissions to access the 'x' channel\r\n")
        })
        .await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let e = conn
            .subscribe(&["x"], Duration::from_secs(2))
            .await
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Server, "{e}");
        assert_eq!(e.server_code(), Some("NOPERM"));
    }

    #[tokio::test]
    async fn subscribe_times_out_without_confirmation() {
        let server = MockServer::start(|_| Action::Silent).await;
        let conn = Connection::connect(server.addr, &resp2()).await.unwrap();
        let e = conn
            .subscribe(&["x"], Duration::from_millis(100))
            .await
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
        server.finish().await; // closed after the failure
    }

    #[tokio::test]
    async fn random_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let alphabet = b"+-:$*_,#(!=%~>|?.;0123456789\r\n\r\nabc";
        for _ in 0..200 {
            let len = rng.gen_range(1..64);
            let garbage: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            let server = MockServer::start(move |_| Action::Close(garbage.clone())).await;
            let protocol = if rng.gen_bool(0.5) {
                Protocol::Resp2
            } else {
                Protocol::Resp3
            };
            if let Ok(conn) = Connection::connect(server.addr, &resp2()).await {
                conn.set_protocol(protocol);
                let _ = conn.request(&["PING"]).await;
                let _ = conn.request(&["PING"]).await;
            }
        }
    }
}
