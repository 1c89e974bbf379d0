//! The socket task: owns the stream, writes what the handles queue, reads and decodes replies,
//! completes waiters in order.

use super::pubsub::{is_resp2_pubsub_frame, is_subscribe_confirmation};
use super::*;

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
pub(super) enum Transport {
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

pub(super) async fn run(
    stream: Transport,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    shared: Arc<Shared>,
) {
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
