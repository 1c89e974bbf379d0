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
mod task;
#[cfg(test)]
mod tests;

use pubsub::PubSub;
pub use pubsub::{Frame, Subscription};
use task::{run, Transport};
