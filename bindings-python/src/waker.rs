//! Completions of asyncio operations, from a core thread straight to the loop that awaits them.
//!
//! Each event loop gets one host mailbox ([`sentinel_recovery::host::Mailbox`]) and one eventfd
//! (a pipe where eventfd is missing) that it watches with `loop.add_reader`. A core thread
//! finishing an operation queues the [`Pending`] there without the GIL (the mailbox owns the
//! Python references; they are released with the GIL held); the mailbox's wake-up writes the
//! eventfd, so a burst of completions costs one wake-up. The reader callback ([`LoopWaker`], on
//! the loop thread) drains the mailbox and [`settle`]s each future.
//!
//! Where a loop can't have a waker the completion takes the dispatcher's path
//! ([`crate::dispatch`]): a loop without `add_reader` (or with no fd to spare), a loop registered
//! by the parent of a forked process, and a loop that closed (its selector dropped the reader)
//! with operations in flight; on a closed loop the result is then dropped with the GIL held.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyWeakrefMethods, PyWeakrefReference};
use sentinel_recovery::host::{Delivery, Done, Mailbox};

use crate::completion::{settle, Outcome, Pending};
use crate::dispatch::{self, Job};

/// The file descriptor the loop watches: readable while completions wait.
enum Signal {
    EventFd(OwnedFd),
    Pipe { read: OwnedFd, write: OwnedFd },
}

impl Signal {
    fn new() -> io::Result<Signal> {
        // SAFETY: plain system calls; each fd returned is owned by exactly one OwnedFd.
        unsafe {
            let fd = libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC);
            if fd >= 0 {
                return Ok(Signal::EventFd(OwnedFd::from_raw_fd(fd)));
            }
            let mut fds = [0; 2];
            if libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Signal::Pipe {
                read: OwnedFd::from_raw_fd(fds[0]),
                write: OwnedFd::from_raw_fd(fds[1]),
            })
        }
    }

    fn watched(&self) -> RawFd {
        match self {
            Signal::EventFd(fd) => fd.as_raw_fd(),
            Signal::Pipe { read, .. } => read.as_raw_fd(),
        }
    }

    /// Makes the fd readable. Never blocks: a full pipe (or counter) is readable already.
    fn notify(&self) {
        let (fd, bytes): (RawFd, &[u8]) = match self {
            Signal::EventFd(fd) => (fd.as_raw_fd(), &1u64.to_ne_bytes()),
            Signal::Pipe { write, .. } => (write.as_raw_fd(), &[1u8]),
        };
        loop {
            // SAFETY: `bytes` is valid for its length; the fd lives as long as `self`.
            let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return;
            }
        }
    }

    /// Makes the fd unreadable again (until the next `notify`).
    fn clear(&self) {
        let fd = self.watched();
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: `buf` is valid for its length; the fd lives as long as `self`.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            let more = match self {
                // One read resets an eventfd's counter.
                Signal::EventFd(_) => false,
                Signal::Pipe { .. } => n == buf.len() as isize,
            };
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if !more {
                return;
            }
        }
    }
}

/// The part of a loop's waker that core threads hold: no Python object in it, so it may be
/// dropped anywhere (its fds close when the last completion holding it has run).
struct Shared {
    pid: u32,
    signal: Arc<Signal>,
    /// Completions only: none is ever dropped, so its bound does not matter.
    mailbox: Mailbox<Pending>,
}

/// The completion of an asyncio operation: `wrap(result)` settles `future` of `event_loop`,
/// exactly once, through the loop's waker (or the dispatcher, see the module documentation).
/// Call it on the loop's thread.
pub(crate) fn complete<T: Send + 'static>(
    py: Python<'_>,
    event_loop: Py<PyAny>,
    future: Py<PyAny>,
    wrap: impl FnOnce(sentinel_recovery::Result<T>) -> Outcome + Send + 'static,
) -> PyResult<Done<T>> {
    let Some(shared) = for_loop(py, &event_loop) else {
        return dispatch::complete(event_loop, future, wrap);
    };
    let Ok(completion) = shared.mailbox.completion() else {
        // The loop's reader is gone: the dispatcher schedules it on the loop, if it can.
        return dispatch::complete(event_loop, future, wrap);
    };
    Ok(Box::new(move |result| {
        let pending = Pending {
            event_loop,
            future,
            outcome: wrap(result),
        };
        // The loop's reader went away meanwhile.
        if let Err(pending) = completion.complete(pending) {
            dispatch::push(Job::Future(pending));
        }
    }))
}

/// The reader callback of one event loop (called by the loop when its fd is readable): settles
/// the futures whose results wait in the mailbox. Not meant to be used directly.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct LoopWaker {
    shared: Arc<Shared>,
    /// The loop's address, its key in [`LOOPS`].
    key: usize,
}

#[pymethods]
impl LoopWaker {
    /// Settles every future whose result is queued.
    fn __call__(&self, py: Python<'_>) {
        // A forked child must not consume the parent's wake-ups (the fd is shared with it).
        if self.shared.pid != std::process::id() {
            return;
        }
        self.shared.signal.clear();
        self.shared.mailbox.drain(|delivery| {
            if let Delivery::Item(pending) = delivery {
                settle(py, pending);
            }
        });
    }
}

impl Drop for LoopWaker {
    // Runs with the GIL held (Python deallocates the object): when the loop closes, its selector
    // lets go of the reader callback.
    fn drop(&mut self) {
        // Only this loop's reader drains the mailbox, and the loop let go of it: no drain runs.
        let left = self.shared.mailbox.close();
        let entry = {
            let mut guard = LOOPS.lock().unwrap_or_else(|e| e.into_inner());
            let loops = guard.get_or_insert_with(HashMap::new);
            let ours = loops.get(&self.key).is_some_and(|e| {
                e.shared
                    .as_ref()
                    .is_some_and(|s| Arc::ptr_eq(s, &self.shared))
            });
            if ours {
                loops.remove(&self.key)
            } else {
                None
            }
        };
        drop(entry);
        if self.shared.pid == std::process::id() {
            for pending in left {
                dispatch::push(Job::Future(pending));
            }
        }
    }
}

struct Entry {
    /// Tells a live loop from a new one at the address of a dead one.
    event_loop: Py<PyWeakrefReference>,
    /// `None`: this loop can't watch an fd; its completions use the dispatcher.
    shared: Option<Arc<Shared>>,
    pid: u32,
}

/// The waker of each loop, by the loop's address. Only locked with the GIL held, and never
/// across a call into Python.
static LOOPS: Mutex<Option<HashMap<usize, Entry>>> = Mutex::new(None);

/// The queue of `event_loop`'s waker, set up on first use; `None` when its completions must
/// take the dispatcher's path (see the module documentation). Call it on the loop's thread.
fn for_loop(py: Python<'_>, event_loop: &Py<PyAny>) -> Option<Arc<Shared>> {
    let key = event_loop.as_ptr() as usize;
    let pid = std::process::id();
    {
        let loops = LOOPS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = loops.as_ref().and_then(|m| m.get(&key)) {
            let same = entry
                .event_loop
                .bind(py)
                .upgrade()
                .is_some_and(|l| l.as_ptr() == event_loop.as_ptr());
            if same {
                // Registered by our parent before fork(): its reader watches the parent's fd.
                return if entry.pid == pid {
                    entry.shared.clone()
                } else {
                    None
                };
            }
        }
    }
    register(py, event_loop, key, pid)
}

fn register(py: Python<'_>, event_loop: &Py<PyAny>, key: usize, pid: u32) -> Option<Arc<Shared>> {
    let loop_ = event_loop.bind(py);
    // add_reader is only safe on the loop's own thread.
    let running = py
        .import(intern!(py, "asyncio"))
        .and_then(|m| m.getattr(intern!(py, "_get_running_loop")))
        .and_then(|f| f.call0())
        .ok()?;
    if running.as_ptr() != loop_.as_ptr() {
        return None;
    }
    let weak = PyWeakrefReference::new(loop_).ok()?.unbind();
    let shared = match Signal::new() {
        Ok(signal) => {
            let signal = Arc::new(signal);
            let waking = signal.clone();
            Some(Arc::new(Shared {
                pid,
                signal,
                mailbox: Mailbox::new(1, move || waking.notify()),
            }))
        }
        Err(e) => {
            tracing::warn!(target: "sentinel_recovery", "no eventfd or pipe for asyncio completions ({e}); using the dispatcher thread");
            None
        }
    };
    let shared = shared.and_then(|shared| {
        let waker = Py::new(
            py,
            LoopWaker {
                shared: shared.clone(),
                key,
            },
        )
        .ok()?;
        // A loop without add_reader (or one refusing it) keeps the dispatcher's path.
        loop_
            .call_method1(intern!(py, "add_reader"), (shared.signal.watched(), waker))
            .ok()?;
        Some(shared)
    });
    let old = LOOPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(
            key,
            Entry {
                event_loop: weak,
                shared: shared.clone(),
                pid,
            },
        );
    drop(old);
    shared
}
