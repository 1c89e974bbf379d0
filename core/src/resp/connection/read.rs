//! The read side of a plain TCP connection, shared by its task and one waiting caller.
//!
//! A host thread that wrote a command to an idle connection and then blocks until the reply
//! comes may read that reply from the socket itself, as a synchronous client does: the reply then
//! wakes only the thread waiting for it, not a core thread that hands it over. So the read buffer
//! and its scanner ([`ReadSide`]) are lent: whoever holds them reads and decodes. The caller
//! takes only the reply to its own command (the next one due: the connection was idle), and
//! those of the commands it sent on the same connection while that reply was due (an event loop
//! that keeps many in flight: [`Reading::Extend`](super::Reading::Extend)), and hands back
//! whatever came after them. While the side is lent, the runtime is not woken for the
//! socket's bytes at all where the platform allows it (the `socket` module). The task never
//! waits for the caller: finding the read side lent out, it stops reading until the caller hands
//! it back (and wakes it if bytes are waiting); its writes and deadlines go on meanwhile. Under
//! TLS only the task reads (its records cannot be shared); nothing is lent.

use std::io;
use std::sync::Arc;
use std::task::Poll;

use bytes::Buf;
use tokio::time::Instant;

use super::outbox::dispatch;
use super::read_side::{Broken, ReadSide, ReadState};
use super::shared::ConnectionState;
use super::socket::Socket;
use crate::sync::Locked;

/// A command this thread wrote whole to an idle connection, with the read side lent to it from
/// before the write: its reply is the next to come, and only the thread that waits for it reads
/// it ([`OwnReply::read`]), with the replies of commands that joined it since
/// ([`Reading::Extend`](super::Reading::Extend)). Dropped unread, it hands the read side back to
/// the task.
pub struct OwnReply {
    shared: Arc<ConnectionState>,
    stream: Arc<Socket>,
    /// The command's place among the replies the connection matches (`Outbox::answered`).
    seq: u64,
    deadline: std::time::Instant,
    /// `Some` until handed back.
    side: Option<ReadSide>,
    /// The caller watches the socket beyond the reply ([`OwnReply::keep_watching`]).
    keep_watching: bool,
    /// Commands that join these replies are left in the outbox for [`OwnReply::flush`].
    defer_writes: bool,
    /// Some were, and are not written yet.
    unflushed: bool,
    /// Replies handed over by this value's reads.
    handed_over: u64,
    /// Commands deferred since the last write (see [`FLUSH_EVERY`]).
    deferred: u32,
}

/// How many deferred commands go out together at most ([`OwnReply::defer_writes`]). Holding all
/// of a burst until its callback returns leaves the server idle while the loop's thread prepares
/// the whole burst (and that thread idle while the server answers it); writing every 16 lets the
/// server start on them meanwhile, for one system call per 16 commands. At 64 in flight from
/// Node, 16 B GETs: 154–179 k/s holding all, 181–185 k/s every 8, 190–195 k/s every 16
/// (`throughput.js x64-one`; bench/history/sequential-latency.md).
const FLUSH_EVERY: u32 = 16;

impl OwnReply {
    pub(super) fn new(
        shared: Arc<ConnectionState>,
        stream: Arc<Socket>,
        seq: u64,
        deadline: Instant,
        side: ReadSide,
    ) -> OwnReply {
        OwnReply {
            shared,
            stream,
            seq,
            deadline: deadline.into_std(),
            side: Some(side),
            keep_watching: false,
            defer_writes: false,
            unflushed: false,
            handed_over: 0,
            deferred: 0,
        }
    }

    /// How many replies this value's reads have handed over so far (its own and those that
    /// joined it).
    pub fn handed_over(&self) -> u64 {
        self.handed_over
    }

    /// With `defer` set, commands that join these replies
    /// ([`Reading::Extend`](super::Reading::Extend)) are queued but not written until
    /// [`OwnReply::flush`] (or until this is given back or dropped, which flushes), at most
    /// sixteen at a time: an event loop that sends a burst of commands from one callback writes
    /// them with one system call per sixteen instead of one each.
    pub fn defer_writes(&mut self, defer: bool) {
        self.defer_writes = defer;
    }

    /// Writes the commands left unwritten by [`OwnReply::defer_writes`], with one non-blocking
    /// write; what the socket does not take, the task writes (it is woken for it). Nothing to
    /// do when none were deferred, or when the task is writing (it takes them after its own).
    pub fn flush(&mut self) {
        if !std::mem::take(&mut self.unflushed) {
            return;
        }
        let shared = &*self.shared;
        let mut out = shared.outbox.locked();
        if out.task_writing || out.bytes.is_empty() || out.closed {
            return;
        }
        if let Ok(n) = self.stream.try_write(&out.bytes) {
            out.bytes.advance(n);
        }
        let unsent = !out.bytes.is_empty();
        drop(out);
        if unsent {
            shared.wake.notify_one();
        }
    }

    /// Whether a command that joins these replies now is left for [`OwnReply::flush`] (noted
    /// here); every [`FLUSH_EVERY`]th is not: the caller writes it with those before it.
    pub(super) fn defers_writes(&mut self) -> bool {
        if !self.defer_writes {
            return false;
        }
        self.deferred += 1;
        if self.deferred >= FLUSH_EVERY {
            self.deferred = 0;
            self.unflushed = false;
            return false;
        }
        self.unflushed = true;
        true
    }

    /// Promises that the caller's event loop goes on watching [`OwnReply::fd`] after the reply
    /// was read, for as long as it keeps this value, and calls [`OwnReply::give_back`] (or drops
    /// it) when the socket is readable with no reply of its own due, or when it stops watching.
    /// The runtime then does not watch the socket again after the reply, and a caller that sends
    /// its next command on the same connection takes the read side again without telling the
    /// runtime twice (two system calls fewer per command). Whatever the task itself must read
    /// meanwhile (a command sent another way), it takes the socket back for.
    pub fn keep_watching(&mut self) {
        self.keep_watching = true;
    }

    /// Reads the command's reply on the calling thread and hands it to the command's
    /// [`Reply`](super::Reply) here, as the task would have. Waits for the socket until `until` or the command's
    /// deadline, whichever is first; until `spin_until` it does not sleep but keeps trying the
    /// socket (on a fast network the reply comes sooner than a sleeping thread is woken: see
    /// `host::waiter`). Returns whether the reply was handed over; when not (the wait ended first,
    /// a signal interrupted it, the connection ended or sent something invalid), the task
    /// completes the command as usual.
    ///
    /// Only for a thread that blocks for this reply anyway, never a core thread: it waits on the
    /// network.
    pub fn read(
        mut self,
        until: std::time::Instant,
        spin_until: Option<std::time::Instant>,
    ) -> bool {
        let until = until.min(self.deadline);
        loop {
            match self.read_ready() {
                Poll::Ready(delivered) => return delivered,
                Poll::Pending => {
                    if !wait_readable(&self.stream, until, spin_until) {
                        return false;
                    }
                }
            }
        }
    }

    /// Reads what the socket holds now, without waiting, and hands the reply to the command's
    /// [`Reply`](super::Reply) here once it is whole. `Pending`: the reply is not whole yet; call again when
    /// the socket ([`OwnReply::fd`]) is readable. `Ready(true)`: the reply was handed over;
    /// `Ready(false)`: the connection ended or sent something invalid, and the task completes
    /// the command as usual. After `Ready` the read side is back with the task and further calls
    /// return `Ready(false)`.
    ///
    /// For a host thread that runs an event loop: it watches the socket and never waits on it.
    /// Until this returns `Ready` (or the `OwnReply` is dropped) the task reads nothing from the
    /// connection, so the loop must watch the socket from the moment it gets the `OwnReply`. Past
    /// the command's deadline the task completes it with a timeout as usual; the late reply, read
    /// here when it comes, is discarded.
    pub fn read_ready(&mut self) -> Poll<bool> {
        let Some(mut side) = self.side.take() else {
            return Poll::Ready(false);
        };
        let shared = &*self.shared;
        // Whether the last reply due here was handed over here.
        let mut delivered_last = false;
        let broken = loop {
            let protocol = shared.protocol();
            match side.next_frame(protocol) {
                Ok(Some(value)) => {
                    let (delivery, through) = {
                        let mut out = shared.outbox.locked();
                        // The next reply due (ours, or one of the earlier ones this thread
                        // reads too), or a push frame.
                        let delivery = dispatch(&mut out, value, protocol);
                        (delivery, out.answered > self.seq || out.closed)
                    };
                    if let Some((done, result)) = delivery {
                        // After the lock, as the task delivers; the read side stays here, so
                        // no other reader can overtake this completion.
                        done(result);
                        self.handed_over += 1;
                        delivered_last = through;
                    }
                    if through {
                        break None;
                    }
                    continue;
                }
                Ok(None) => {}
                Err(why) => break Some(Broken::Invalid(why)),
            }
            side.make_room();
            match self.stream.receive(&mut side.rbuf) {
                // The task reads the end of the stream again, and ends the connection.
                Ok(0) => break None,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.side = Some(side);
                    return Poll::Pending;
                }
                Err(e) => break Some(Broken::Io(e)),
            }
        };
        if self.keep_watching && broken.is_none() && delivered_last {
            leave_watched(shared, &self.stream, side);
        } else {
            hand_back(shared, Some(&self.stream), side, broken);
        }
        Poll::Ready(delivered_last)
    }

    /// Whether a command sent now on `shared`'s connection can have its reply read here too
    /// ([`Connection::call`](super::Connection::call) with [`Reading::Extend`](super::Reading)):
    /// the read side is still lent here, for that connection.
    pub(super) fn reads_for(&self, shared: &Arc<ConnectionState>) -> bool {
        self.side.is_some() && Arc::ptr_eq(&self.shared, shared)
    }

    /// Reads here every reply up to the `seq`th (counted as `Outbox::answered` counts), the
    /// last of a command just queued behind this one's.
    pub(super) fn read_through(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// Hands the read side back to the task now, as dropping this would, unread reply and all
    /// (the task completes the command); this value stays, keeping only the socket's descriptor
    /// open. For an event loop that watches [`OwnReply::fd`] beyond the reply and must not have
    /// that descriptor number reused meanwhile (epoll registrations are removed by number).
    /// Later calls do nothing; [`OwnReply::read_ready`] then returns `Ready(false)`.
    pub fn give_back(&mut self) {
        self.flush();
        match self.side.take() {
            Some(side) => give_back(&self.shared, Some(&self.stream), side),
            None if self.keep_watching => stop_watching_elsewhere(&self.shared, &self.stream),
            None => {}
        }
    }

    /// The connection's socket, for an event loop to watch for [`OwnReply::read_ready`]. It stays
    /// open as long as this `OwnReply` lives (after its reply too).
    #[cfg(unix)]
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.stream.as_raw_fd()
    }
}

impl Drop for OwnReply {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// Lends the read side to a caller that reads its own reply, and has the runtime stop waking
/// the task for the bytes that caller reads (see the `socket` module): under the lock, so that
/// pausing and resuming keep the order of lending and handing back. `None` while it is lent
/// already. Every side lent goes back through [`give_back`] (or `hand_back`).
pub(super) fn lend(shared: &ConnectionState, socket: &Socket) -> Option<ReadSide> {
    let mut state = shared.read.locked();
    let side = state.side.take()?;
    // Out of the runtime's watch already when a loop kept watching it since its last reply.
    if !std::mem::take(&mut state.watched_elsewhere) {
        socket.pause_reads();
    }
    Some(side)
}

/// Gives the read side back to the task, waking it when there is something for it: bytes left
/// in the buffer, or (when it found the side lent, and so forgot the socket's readiness) bytes
/// already waiting in the socket. `stream` is `None` once the connection ended.
pub(super) fn give_back(shared: &ConnectionState, stream: Option<&Socket>, side: ReadSide) {
    hand_back(shared, stream, side, None);
}

/// Puts the side back after a lender's reply while its loop goes on watching the socket
/// ([`OwnReply::keep_watching`]): the socket stays out of the runtime's watch. When the task has
/// something to do already (bytes after the reply, readiness it forgot), it is an ordinary hand
/// back.
fn leave_watched(shared: &ConnectionState, stream: &Socket, side: ReadSide) {
    {
        let mut state = shared.read.locked();
        // Nothing else to read or write (lock order: `read`, then `outbox`): replies to other
        // commands are the task's to read, at once.
        let quiet = {
            let out = shared.outbox.locked();
            out.waiters.is_empty() && out.bytes.is_empty()
        };
        if quiet && side.rbuf.is_empty() && !state.deferred {
            state.side = Some(side);
            state.watched_elsewhere = true;
            return;
        }
    }
    hand_back(shared, Some(stream), side, None);
}

/// The loop that watched the socket since its last reply lets go, or a command is sent that the
/// task must read the reply of: the runtime watches the socket again, and the task reads
/// whatever is waiting. Nothing to do when the runtime watches it already.
pub(super) fn stop_watching_elsewhere(shared: &ConnectionState, stream: &Socket) {
    let wake = {
        let mut state = shared.read.locked();
        match take_back_from_loop(&mut state, stream) {
            Ok(false) => return,
            Err(e) => {
                state.broken = Some(Broken::Io(e));
                true
            }
            Ok(true) if !drained(stream) => {
                state.recheck = true;
                true
            }
            Ok(true) => false,
        }
    };
    if wake {
        shared.wake.notify_one();
    }
}

/// Under the read lock: puts the socket back in the runtime's watch if a loop watched it
/// instead; whether it did.
pub(super) fn take_back_from_loop(state: &mut ReadState, stream: &Socket) -> io::Result<bool> {
    if !std::mem::take(&mut state.watched_elsewhere) {
        return Ok(false);
    }
    stream.resume_reads().map(|()| true)
}

/// [`give_back`], with a failure the lender's read ran into, which the task ends the
/// connection with.
pub(super) fn hand_back(
    shared: &ConnectionState,
    stream: Option<&Socket>,
    side: ReadSide,
    broken: Option<Broken>,
) {
    let wake = {
        let mut state = shared.read.locked();
        state.unprocessed = !side.rbuf.is_empty();
        // After the side is back (under the lock): bytes the runtime reports from now on find
        // it there. Unwatched, the socket would never be read again: the connection ends.
        let broken = match stream.map(Socket::resume_reads) {
            Some(Err(e)) => broken.or(Some(Broken::Io(e))),
            _ => broken,
        };
        let mut wake = state.unprocessed || broken.is_some();
        if broken.is_some() {
            state.broken = broken;
        }
        state.side = Some(side);
        // Under the lock, so after the task forgot the readiness: bytes that come later are
        // recorded afresh and wake the task by themselves.
        if std::mem::take(&mut state.deferred) && !stream.is_some_and(drained) {
            state.recheck = true;
            wake = true;
        }
        wake
    };
    if wake {
        shared.wake.notify_one();
    }
}

/// Waits until the socket has something to read (bytes, its end, an error) or `until` passes;
/// false when it passed or a signal interrupted the wait (the host may have a handler to run).
/// Until `spin_until` (when given) it asks without sleeping, yielding the core between asks;
/// without it, it sleeps from the start. Never inlined, so that instruction counts
/// (bench/latency/callgrind.sh) can leave the busy wait out.
#[cfg(unix)]
#[inline(never)]
fn wait_readable(
    stream: &Socket,
    until: std::time::Instant,
    spin_until: Option<std::time::Instant>,
) -> bool {
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Without leave to spin, it sleeps from the start.
    let spin_until = spin_until.map_or(std::time::Instant::now(), |s| s.min(until));
    loop {
        let now = std::time::Instant::now();
        let left = until.saturating_duration_since(now);
        if left.is_zero() {
            return false;
        }
        let millis = if now < spin_until {
            // Polite: a thread runnable on this core (the server itself, when cores are few)
            // runs first, rather than waiting for this one's time slice to end.
            // SAFETY: no arguments, no memory.
            unsafe { libc::sched_yield() };
            0
        } else {
            // Rounded up: a wait that ends a little early only hands the reply to the task.
            left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        match unsafe { libc::poll(&mut fd, 1, millis) } {
            0 if millis == 0 => continue,
            n => return n > 0,
        }
    }
}

/// Whether the socket has nothing to read right now: no bytes, no end, no error.
#[cfg(unix)]
pub(super) fn drained(stream: &Socket) -> bool {
    let mut byte = 0u8;
    // SAFETY: recv writes at most one byte into `byte`; MSG_PEEK leaves it in the socket.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

#[cfg(not(unix))]
pub(super) fn drained(_: &Socket) -> bool {
    false
}

#[cfg(not(unix))]
fn wait_readable(_: &Socket, _: std::time::Instant, _: Option<std::time::Instant>) -> bool {
    false
}
