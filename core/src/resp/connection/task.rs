//! The socket task: owns the stream, writes what the handles queue, reads and decodes replies,
//! completes waiters in order.

use std::future::poll_fn;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::outbox::{dispatch, Delivery, Waiter};
use super::read::take_back_from_loop;
use super::read_side::{Broken, ReadSide, ReadState, KEEP_CAPACITY};
use super::shared::ConnectionState;
use super::socket::Socket;
use crate::error::Error;
use crate::resp::Value;
use crate::sync::Locked;
use crate::types::Protocol;

// The connection task.

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

pub(super) enum Event {
    Shutdown,
    Wake,
    Deadline,
    Wrote(io::Result<usize>),
    Flushed(io::Result<()>),
    /// Bytes to decode are in the read side.
    Received,
    /// The peer ended the stream.
    PeerClosed,
    ReadFailed(io::Error),
    /// A caller reading its own reply found bytes that are not a valid reply.
    Invalid(String),
}

/// Ends the connection however the task ends, panics included: `closed()` never hangs and no
/// waiter is left without an answer.
struct DoneGuard(Arc<ConnectionState>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        self.0.done.cancel();
        let peer = self.0.peer;
        end_outbox(
            &self.0,
            &Error::connection_lost(format!("connection to {peer} ended")),
        );
    }
}

/// Closes the outbox and fails every waiter still in it with `error` (once: later calls find
/// it empty).
fn end_outbox(shared: &ConnectionState, error: &Error) {
    let waiters = {
        let mut out = shared.outbox.locked();
        out.closed = true;
        out.inline = None;
        out.bytes.clear();
        out.push = None;
        std::mem::take(&mut out.waiters)
    };
    for waiter in waiters {
        if let Waiter::Call {
            done: Some(done), ..
        } = waiter
        {
            done(Err(error.clone()));
        }
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

/// The socket a connection task owns: plain TCP (shared with the handles, which may write to
/// it directly), or TLS over TCP.
pub(super) enum Transport {
    Plain(Arc<Socket>),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Transport {
    /// The socket other threads may write to directly: plain TCP only (TLS records are the
    /// task's to write).
    pub(super) fn inline(&self) -> Option<Arc<Socket>> {
        match self {
            Transport::Plain(stream) => Some(stream.clone()),
            Transport::Tls(_) => None,
        }
    }
}

/// The write side of a plain TCP socket that handles share: writes wait for room through the
/// runtime, which needs only `&Socket`.
struct SharedTcp(Arc<Socket>);

impl AsyncWrite for SharedTcp {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        self.0.poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Where the task reads from.
enum Reader<R> {
    /// Plain TCP: the read side is in `ConnectionState::read`, lent at times to a caller that reads its
    /// own reply (see the `read` module).
    Lendable(Arc<Socket>),
    /// TLS: only the task reads, into its own read side.
    Own(R, ReadSide),
}

impl<R: AsyncRead + Unpin> Reader<R> {
    /// Waits for the next bytes (or the end) and reads them into the read side.
    async fn read(&mut self, shared: &ConnectionState) -> Event {
        match self {
            Reader::Lendable(stream) => task_read(stream, shared).await,
            Reader::Own(rd, side) => {
                side.make_room();
                match rd.read_buf(&mut side.rbuf).await {
                    Ok(0) => Event::PeerClosed,
                    Ok(_) => Event::Received,
                    Err(e) => Event::ReadFailed(e),
                }
            }
        }
    }

    /// Runs `f` on the read side; `None` while a caller holds it (the caller decodes what it
    /// reads, and hands back the rest). For plain TCP `f` runs under the read lock: replies are
    /// decoded and matched before the side can be lent.
    fn with_side<T>(
        &mut self,
        shared: &ConnectionState,
        f: impl FnOnce(&mut ReadSide) -> T,
    ) -> Option<T> {
        match self {
            Reader::Lendable(_) => shared.read.locked().side.as_mut().map(f),
            Reader::Own(_, side) => Some(f(side)),
        }
    }
}

struct Task {
    /// Bytes taken from the outbox that the task is writing.
    wbuf: BytesMut,
    /// Frames decoded from one read, before they are matched to waiters.
    frames: Vec<(Value, Protocol)>,
    deliveries: Vec<Delivery>,
}

pub(super) async fn run(stream: Transport, shared: Arc<ConnectionState>) {
    let _done = DoneGuard(shared.clone());
    let mut task = Task {
        wbuf: BytesMut::new(),
        frames: Vec::new(),
        deliveries: Vec::new(),
    };
    let end = match stream {
        Transport::Plain(stream) => {
            let mut rd: Reader<tokio::io::Empty> = Reader::Lendable(stream.clone());
            let mut wr = SharedTcp(stream.clone());
            let end = task.drive(&mut rd, &mut wr, false, &shared).await;
            // A caller may be waiting on the socket for its reply, holding the stream open:
            // shutting it down wakes that wait now rather than at its deadline.
            shutdown(&stream);
            end
        }
        Transport::Tls(stream) => {
            let (rd, mut wr) = tokio::io::split(*stream);
            let mut rd = Reader::Own(rd, ReadSide::new());
            task.drive(&mut rd, &mut wr, true, &shared).await
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
    // Record the reason before the outbox closes so late requests report it.
    *shared.end_reason.locked() = Some(reason);
    shared.done.cancel();
    end_outbox(&shared, &error);
}

impl Task {
    /// Runs the connection until it ends. `needs_flush` is set for TLS: a TLS stream may accept
    /// bytes into its record buffer without sending them, so once the write buffer is empty the
    /// stream is flushed (for TCP, flushing is a no-op and skipped).
    async fn drive<R, W>(
        &mut self,
        rd: &mut Reader<R>,
        wr: &mut W,
        needs_flush: bool,
        shared: &ConnectionState,
    ) -> End
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut unflushed = false;
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let mut armed: Option<Instant> = None;
        let timer = tokio::time::sleep_until(far);
        tokio::pin!(timer);
        loop {
            if shared.handles_gone.load(Ordering::SeqCst) {
                return End::HandlesDropped;
            }
            // Unbiased on purpose: a steady stream of new requests must not starve reads, nor a
            // flood of replies starve writes.
            let event = tokio::select! {
                _ = shared.done.cancelled() => Event::Shutdown,
                _ = shared.wake.notified() => Event::Wake,
                event = write_or_flush(wr, &mut self.wbuf), if !self.wbuf.is_empty() || unflushed => event,
                event = rd.read(shared) => event,
                _ = &mut timer, if armed.is_some() => Event::Deadline,
            };
            match event {
                Event::Shutdown => return End::ClosedByClient,
                Event::Wake => {}
                Event::Deadline => self.expire(shared),
                Event::Wrote(Ok(0)) => return End::Lost("socket refused further writes".into()),
                Event::Wrote(Ok(_)) => {
                    unflushed = needs_flush;
                    if self.wbuf.is_empty() && self.wbuf.capacity() > KEEP_CAPACITY {
                        self.wbuf = BytesMut::new();
                    }
                }
                Event::Flushed(Ok(())) => unflushed = false,
                Event::Wrote(Err(e)) | Event::Flushed(Err(e)) | Event::ReadFailed(e) => {
                    return match crate::tls::tls_error_text(&e) {
                        Some(why) => End::Tls(why),
                        None => End::Lost(e.to_string()),
                    }
                }
                Event::PeerClosed => {
                    let midway = rd.with_side(shared, |side| !side.rbuf.is_empty());
                    return End::Lost(if midway == Some(true) {
                        "closed by the server in the middle of a reply".into()
                    } else {
                        "closed by the server".into()
                    });
                }
                Event::Invalid(why) => return End::Protocol(why),
                Event::Received => {
                    if let Err(why) = self.process(rd, shared) {
                        return End::Protocol(why);
                    }
                }
            }
            // Take what the handles queued once the task's own bytes are out, and follow the
            // earliest deadline they asked for.
            let next = {
                let mut out = shared.outbox.locked();
                if self.wbuf.is_empty() {
                    if out.bytes.is_empty() {
                        out.task_writing = false;
                    } else {
                        std::mem::swap(&mut self.wbuf, &mut out.bytes);
                        out.task_writing = true;
                    }
                }
                out.next_deadline
            };
            if next != armed {
                armed = next;
                timer.as_mut().reset(next.unwrap_or(far));
            }
        }
    }

    /// Completes every call whose deadline passed with a timeout (their replies, when they come,
    /// are discarded) and notes the next deadline.
    fn expire(&mut self, shared: &ConnectionState) {
        let now = Instant::now();
        let peer = shared.peer;
        {
            let mut out = shared.outbox.locked();
            let mut next: Option<Instant> = None;
            for waiter in out.waiters.iter_mut() {
                let Waiter::Call {
                    done: done @ Some(_),
                    deadline: Some(deadline),
                } = waiter
                else {
                    continue;
                };
                if *deadline > now {
                    next = Some(next.map_or(*deadline, |n| n.min(*deadline)));
                } else if let Some(done) = done.take() {
                    self.deliveries.push((
                        done,
                        Err(Error::timeout(format!(
                            "no reply from {peer} within the command deadline"
                        ))),
                    ));
                }
            }
            out.next_deadline = next;
        }
        for (done, result) in self.deliveries.drain(..) {
            done(result);
        }
    }

    /// Decodes every complete frame in the read buffer and matches them to their waiters, then
    /// delivers them (after the locks).
    fn process<R: AsyncRead + Unpin>(
        &mut self,
        rd: &mut Reader<R>,
        shared: &ConnectionState,
    ) -> std::result::Result<(), String> {
        let frames = &mut self.frames;
        let deliveries = &mut self.deliveries;
        let matched = rd.with_side(shared, |side| -> std::result::Result<(), String> {
            loop {
                // Read per frame: the handshake switches protocols between replies.
                let protocol = shared.protocol();
                match side.next_frame(protocol)? {
                    Some(value) => frames.push((value, protocol)),
                    None => break,
                }
            }
            if !frames.is_empty() {
                let mut out = shared.outbox.locked();
                for (value, protocol) in frames.drain(..) {
                    if let Some(delivery) = dispatch(&mut out, value, protocol) {
                        deliveries.push(delivery);
                    }
                }
            }
            Ok(())
        });
        // Lent out (`None`): the caller holding the side decodes what is in it.
        matched.unwrap_or(Ok(()))?;
        for (done, result) in self.deliveries.drain(..) {
            done(result);
        }
        Ok(())
    }
}

/// Shuts the socket down in both directions (errors ignored: it is ending anyway).
fn shutdown(stream: &Socket) {
    #[cfg(unix)]
    {
        // SAFETY: a valid descriptor, owned by `stream`, which outlives the call.
        unsafe { libc::shutdown(stream.as_raw_fd(), libc::SHUT_RDWR) };
    }
    #[cfg(not(unix))]
    let _ = stream;
}

/// The task's read of a plain TCP connection: waits for bytes and reads them into the shared
/// read side, unless a caller holds it.
pub(super) async fn task_read(stream: &Socket, shared: &ConnectionState) -> Event {
    poll_fn(|cx| poll_task_read(stream, shared, cx)).await
}

fn poll_task_read(stream: &Socket, shared: &ConnectionState, cx: &mut Context<'_>) -> Poll<Event> {
    let mut state = shared.read.locked();
    match state.broken.take() {
        Some(Broken::Io(e)) => return Poll::Ready(Event::ReadFailed(e)),
        Some(Broken::Invalid(why)) => return Poll::Ready(Event::Invalid(why)),
        None => {}
    }
    if std::mem::take(&mut state.unprocessed) {
        return Poll::Ready(Event::Received);
    }
    // Running anyway: the task watches (and reads) the socket itself again. The loop that
    // watched it finds it readable at most once more, and lets go.
    match take_back_from_loop(&mut state, stream) {
        Ok(true) => state.recheck = true,
        Ok(false) => {}
        Err(e) => return Poll::Ready(Event::ReadFailed(e)),
    }
    let ReadState {
        side,
        deferred,
        recheck,
        ..
    } = &mut *state;
    let Some(side) = side.as_mut() else {
        // The lender reads what comes now. The readiness the runtime recorded for it is
        // forgotten, so that the task sleeps until bytes come that the lender does not read;
        // for bytes already in the socket when it hands the side back, the lender wakes the task
        // to read without waiting for readiness (`recheck`). Both under the lock, in this order.
        *deferred = true;
        return stream.poll_forget_readable(cx).map(Event::ReadFailed);
    };
    if std::mem::take(recheck) {
        side.make_room();
        match stream.receive(&mut side.rbuf) {
            Ok(0) => return Poll::Ready(Event::PeerClosed),
            Ok(_) => {
                // More may be waiting: read on this way until the socket is empty.
                *recheck = true;
                return Poll::Ready(Event::Received);
            }
            // Empty: the readiness the runtime records from now on is accurate.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Poll::Ready(Event::ReadFailed(e)),
        }
    }
    side.make_room();
    stream.poll_read(cx, &mut side.rbuf).map(|read| match read {
        Ok(0) => Event::PeerClosed,
        Ok(_) => Event::Received,
        Err(e) => Event::ReadFailed(e),
    })
}
