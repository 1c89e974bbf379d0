//! The socket of a plain TCP connection, and what the runtime watches it for.
//!
//! A caller that reads its own reply ([`OwnReply`](super::OwnReply)) must not have the core
//! woken for that reply too: on a machine whose cores are busy, that wake-up is one more context
//! switch per command, on the core the caller and the server share. So the runtime does not watch
//! the socket for bytes directly. On Linux the socket sits alone in an epoll instance of its own,
//! which the runtime watches: readable when the socket is. While a caller holds the read side,
//! the socket is taken out of that instance ([`Socket::pause_reads`]) and bytes that come wake
//! nobody; handing the side back puts it in again ([`Socket::resume_reads`]), and bytes already
//! waiting then wake the task at once. The runtime watches the socket itself only for room to
//! write, which replies do not signal. The cost: one more descriptor per connection, and two
//! `epoll_ctl` calls per reply read by its caller (cheaper than the wake-up they save; see
//! bench/history/sequential-latency.md).
//!
//! Elsewhere the runtime watches the socket for both, and pausing does nothing: the task is
//! woken for a lent reply, finds the read side gone and sleeps again (see the `read` module).

use std::io;

use bytes::BytesMut;

pub(super) use imp::Socket;

impl Socket {
    /// One non-blocking read into `buf`'s spare room, bypassing the runtime's readiness (which
    /// only its reactor thread updates): for a caller reading its own reply, and for the task
    /// when it knows bytes are waiting.
    #[cfg(unix)]
    pub(super) fn receive(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let spare = buf.spare_capacity_mut();
        // SAFETY: recv writes at most `spare.len()` bytes into the spare room and reports how
        // many; `set_len` then covers exactly those initialised bytes.
        let n = unsafe {
            libc::recv(
                self.as_raw_fd(),
                spare.as_mut_ptr().cast(),
                spare.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        unsafe { buf.set_len(buf.len() + n) };
        Ok(n)
    }

    /// Without a way to read past the runtime here, nothing is read: the task reads.
    #[cfg(not(unix))]
    pub(super) fn receive(&self, _: &mut BytesMut) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io::{self, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::task::{ready, Context, Poll};

    use bytes::BytesMut;
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;

    /// A connected, non-blocking TCP socket that the runtime watches for room to write, with an
    /// epoll instance of its own through which it watches for bytes.
    pub(in super::super) struct Socket {
        /// Holds the socket while reads are not paused; the runtime watches it for readability.
        reads: AsyncFd<OwnedFd>,
        /// Registered with the runtime for writability only.
        io: AsyncFd<std::net::TcpStream>,
    }

    /// What the socket's own epoll instance waits for: bytes, and the peer's end of the stream.
    /// Level-triggered: the instance stays readable while bytes wait, so that putting the socket
    /// back in reports bytes that came while it was out.
    const READ_EVENTS: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;

    impl Socket {
        /// Takes `stream` over from the runtime's default registration. Needs the runtime.
        pub(in super::super) fn new(stream: tokio::net::TcpStream) -> io::Result<Socket> {
            let stream = stream.into_std()?;
            // SAFETY: no pointers; the result is checked before use.
            let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if epfd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: a descriptor just created here and owned by nobody else.
            let epoll = unsafe { OwnedFd::from_raw_fd(epfd) };
            ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, stream.as_raw_fd())?;
            // SAFETY: an `OwnedFd` and a `TcpStream` own their descriptor, the same one for
            // as long as they live, and the `AsyncFd` owns them.
            let (reads, io) = unsafe {
                (
                    AsyncFd::register_with_interest(epoll, Interest::READABLE)?,
                    AsyncFd::register_with_interest(stream, Interest::WRITABLE)?,
                )
            };
            Ok(Socket { reads, io })
        }

        /// Reads what the socket holds into `buf`'s spare room, or registers `cx` for when
        /// bytes (or the end) come. While reads are paused, nothing comes.
        pub(in super::super) fn poll_read(
            &self,
            cx: &mut Context<'_>,
            buf: &mut BytesMut,
        ) -> Poll<io::Result<usize>> {
            loop {
                let mut ready = ready!(self.reads.poll_read_ready(cx))?;
                match self.receive(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => ready.clear_ready(),
                    other => return Poll::Ready(other),
                }
            }
        }

        /// Forgets the readiness recorded so far and registers `cx` for the next: for a task
        /// that does not read now, and must not be polled again and again for bytes it leaves.
        /// `Ready` only with an error.
        pub(in super::super) fn poll_forget_readable(
            &self,
            cx: &mut Context<'_>,
        ) -> Poll<io::Error> {
            loop {
                match self.reads.poll_read_ready(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => return Poll::Ready(e),
                    Poll::Ready(Ok(mut ready)) => ready.clear_ready(),
                }
            }
        }

        /// Writes what the socket takes of `buf`, or registers `cx` for when it has room.
        pub(in super::super) fn poll_write(
            &self,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            loop {
                let mut ready = ready!(self.io.poll_write_ready(cx))?;
                if let Ok(result) = ready.try_io(|stream| Write::write(&mut stream.get_ref(), buf))
                {
                    return Poll::Ready(result);
                }
            }
        }

        /// One write that never waits: `WouldBlock` when the socket has no room.
        pub(in super::super) fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
            Write::write(&mut self.io.get_ref(), buf)
        }

        /// Stops the runtime from being woken for bytes until [`Socket::resume_reads`]. Only an
        /// optimisation: on failure the runtime keeps watching, as it does where pausing is not
        /// supported.
        pub(in super::super) fn pause_reads(&self) {
            let _ = ctl(
                self.reads.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                self.as_raw_fd(),
            );
        }

        /// Has the runtime watch for bytes again; bytes already waiting wake it at once. An
        /// error means the runtime would never hear of bytes again: the connection must end.
        pub(in super::super) fn resume_reads(&self) -> io::Result<()> {
            match ctl(
                self.reads.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                self.as_raw_fd(),
            ) {
                // Not paused (the pause failed): still watched.
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
                other => other,
            }
        }

        pub(in super::super) fn as_raw_fd(&self) -> RawFd {
            self.io.as_raw_fd()
        }
    }

    /// Adds `fd` to (or removes it from) the epoll instance `epfd`, watching for [`READ_EVENTS`].
    /// An instance of its own rather than a change of the runtime's registration: the runtime
    /// offers no way to change what it watches for. Removing and adding rather than modifying:
    /// a modification reports bytes already waiting only when the instance had no stale record
    /// of the socket being ready, and a removal drops that record.
    fn ctl(epfd: RawFd, op: libc::c_int, fd: RawFd) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: READ_EVENTS,
            u64: 0,
        };
        // SAFETY: valid descriptors (owned by the `Socket`); `event` lives for the call.
        if unsafe { libc::epoll_ctl(epfd, op, fd, &mut event) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::task::{ready, Context, Poll};

    use bytes::BytesMut;
    use tokio::net::TcpStream;

    /// A connected TCP socket that the runtime watches for bytes and for room to write.
    pub(in super::super) struct Socket(TcpStream);

    impl Socket {
        /// Keeps `stream` with the runtime's default registration.
        pub(in super::super) fn new(stream: TcpStream) -> io::Result<Socket> {
            Ok(Socket(stream))
        }

        /// Reads what the socket holds into `buf`'s spare room, or registers `cx` for when
        /// bytes (or the end) come.
        pub(in super::super) fn poll_read(
            &self,
            cx: &mut Context<'_>,
            buf: &mut BytesMut,
        ) -> Poll<io::Result<usize>> {
            loop {
                ready!(self.0.poll_read_ready(cx))?;
                match self.0.try_read_buf(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    other => return Poll::Ready(other),
                }
            }
        }

        /// Forgets the readiness recorded so far and registers `cx` for the next. `Ready` only
        /// with an error.
        pub(in super::super) fn poll_forget_readable(
            &self,
            cx: &mut Context<'_>,
        ) -> Poll<io::Error> {
            loop {
                let _ = self.0.try_io(tokio::io::Interest::READABLE, || {
                    Err::<(), _>(io::ErrorKind::WouldBlock.into())
                });
                match self.0.poll_read_ready(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => return Poll::Ready(e),
                    // Bytes came meanwhile: forgotten too.
                    Poll::Ready(Ok(())) => continue,
                }
            }
        }

        /// Writes what the socket takes of `buf`, or registers `cx` for when it has room.
        pub(in super::super) fn poll_write(
            &self,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            loop {
                ready!(self.0.poll_write_ready(cx))?;
                match self.0.try_write(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    other => return Poll::Ready(other),
                }
            }
        }

        /// One write that never waits: `WouldBlock` when the socket has no room.
        pub(in super::super) fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
            self.0.try_write(buf)
        }

        /// Does nothing here: the runtime keeps watching for bytes.
        pub(in super::super) fn pause_reads(&self) {}

        /// Does nothing here: the runtime never stopped watching.
        pub(in super::super) fn resume_reads(&self) -> io::Result<()> {
            Ok(())
        }

        #[cfg(unix)]
        pub(in super::super) fn as_raw_fd(&self) -> std::os::fd::RawFd {
            use std::os::fd::AsRawFd;
            self.0.as_raw_fd()
        }
    }
}
