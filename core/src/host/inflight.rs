//! Operations in flight and their completions: each runs exactly once — with the result, with
//! `internal` after a panic, or with `closed` when the handle is closed or the runtime stops —
//! and `close` can complete them all and then wait until no completion is still running.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::resp::OwnReply;
use crate::sync::Locked;

pub use crate::client::Done;

thread_local! {
    /// The registries (by address) whose completions or event callbacks this thread is running,
    /// innermost last (a callback that closes its handle runs the others' failures nested).
    static RUNNING_FOR: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// A completion that has not run yet; taking it out is what makes it run at most once.
struct Slot<T>(Mutex<Option<Done<T>>>);

/// A pending completion seen without its type, so `close` can fail it.
trait Unfinished: Send + Sync {
    fn fail(&self, registry: &Registry, error: Error);
}

impl<T: Send + 'static> Unfinished for Slot<T> {
    fn fail(&self, registry: &Registry, error: Error) {
        if let Some(done) = self.0.locked().take() {
            registry.call(move || done(Err(error)));
        }
    }
}

/// Hashes the operation ids of [`Registry`]: they come from a counter of ours, not from a peer
/// who could pick colliding ones, so a multiply spreads them (SipHash was a visible part of a
/// sequential command's cost).
#[derive(Clone, Copy, Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b) ^ self.0.rotate_left(8));
        }
    }

    fn write_u64(&mut self, id: u64) {
        // 2^64 / golden ratio: consecutive ids land far apart in the high bits hashbrown uses.
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Ids = std::hash::BuildHasherDefault<IdHasher>;

/// The operations of one handle.
#[derive(Default)]
pub(crate) struct Registry {
    next: AtomicU64,
    pending: Mutex<HashMap<u64, Arc<dyn Unfinished>, Ids>>,
    /// Completions and event callbacks running right now.
    running: AtomicUsize,
    idle: tokio::sync::Notify,
}

impl Registry {
    /// Runs `work` as a task on the core runtime and hands its result to `done`: exactly once,
    /// also when `work` panics (`internal`), when the task is dropped unfinished (runtime shut
    /// down: `closed`), or when [`Registry::fail_all`] runs first. The returned handle aborts the
    /// task; `done` then gets `closed`.
    pub(crate) fn spawn<T, F>(self: &Arc<Self>, work: F, done: Done<T>) -> Operation
    where
        T: Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        self.begin(done).run(work)
    }

    /// Registers `done` as pending and returns what completes it: exactly once, through
    /// [`Completer::complete`], [`Registry::fail_all`], a cancel, or (dropped unused) with
    /// `closed`.
    pub(crate) fn begin<T: Send + 'static>(self: &Arc<Self>, done: Done<T>) -> Completer<T> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot(Mutex::new(Some(done))));
        self.pending.locked().insert(id, slot.clone());
        Completer {
            registry: self.clone(),
            id,
            slot,
            cancelled: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Takes operation `id` out of `pending` and runs `complete` (which completes it if its slot
    /// is still full). Counted as running before it leaves `pending`: a close in between must
    /// not see it neither pending nor running, complete, and be followed by this completion.
    fn settle(&self, id: u64, complete: impl FnOnce()) {
        self.running.fetch_add(1, Ordering::SeqCst);
        self.pending.locked().remove(&id);
        complete();
        if self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }

    /// Fails every pending completion with `error`, on this thread.
    pub(crate) fn fail_all(&self, error: &Error) {
        let pending: Vec<Arc<dyn Unfinished>> =
            self.pending.locked().drain().map(|(_, p)| p).collect();
        for p in pending {
            p.fail(self, error.clone());
        }
    }

    /// Operations not completed yet.
    pub(crate) fn len(&self) -> usize {
        self.pending.locked().len()
    }

    /// Runs a completion or event callback of this handle: counted, so [`Registry::idle`]
    /// can wait for it, and with panics caught (a host callback that panics must not take a core
    /// thread down; it is logged).
    pub(crate) fn call(&self, f: impl FnOnce()) {
        self.running.fetch_add(1, Ordering::SeqCst);
        let me = self as *const Registry as usize;
        RUNNING_FOR.with(|c| c.borrow_mut().push(me));
        if std::panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
            tracing::error!("a completion or event callback panicked");
        }
        RUNNING_FOR.with(|c| c.borrow_mut().pop());
        if self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }

    /// Whether this thread is inside one of this handle's callbacks.
    pub(crate) fn in_callback(&self) -> bool {
        self.calls_on_this_thread() > 0
    }

    fn calls_on_this_thread(&self) -> usize {
        let me = self as *const Registry as usize;
        RUNNING_FOR.with(|c| c.borrow().iter().filter(|r| **r == me).count())
    }

    /// Waits until no callback of this handle runs (for a task: it never blocks a core thread).
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Owned by an operation's work: completes its slot once, and with `closed` if the work is
/// dropped before it could.
pub(crate) struct Completer<T: Send + 'static> {
    registry: Arc<Registry>,
    id: u64,
    slot: Arc<Slot<T>>,
    /// Set by [`Operation::cancel`], so the completion says it was the caller's doing.
    cancelled: Arc<AtomicBool>,
}

impl<T: Send + 'static> Completer<T> {
    /// Completes the operation with `result` (nothing happens if it completed already).
    pub(crate) fn complete(self, result: Result<T>) {
        self.finish(result);
    }

    /// Runs `work` as a task on the core runtime and completes with its result (see
    /// [`Registry::spawn`]).
    pub(crate) fn run<F>(self, work: F) -> Operation
    where
        F: Future<Output = Result<T>> + Send + 'static,
    {
        let cancelled = self.cancelled.clone();
        let handle = match crate::runtime::handle() {
            Ok(handle) => handle,
            Err(e) => {
                self.complete(Err(e));
                return Operation(Cancel::Nothing);
            }
        };
        let task = handle.spawn(async move {
            let result = AssertUnwindSafe(work)
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| Err(Error::internal(&*panic)));
            self.complete(result);
        });
        Operation(Cancel::Task(task.abort_handle(), cancelled))
    }

    /// The operation of work that runs without a task of its own (a command written by the
    /// calling thread): cancelling it cancels `token` for the work, and completes the operation
    /// with `cancelled` at once (on a core thread) unless it completed first.
    pub(crate) fn cancelled_by(&self, token: CancellationToken) -> Operation {
        Operation(Cancel::Token {
            token,
            slot: self.slot.clone(),
            registry: Arc::downgrade(&self.registry),
            id: self.id,
        })
    }

    fn finish(&self, result: Result<T>) {
        self.registry.settle(self.id, || {
            if let Some(done) = self.slot.0.locked().take() {
                self.registry.call(move || done(result));
            }
        });
    }
}

impl<T: Send + 'static> Drop for Completer<T> {
    fn drop(&mut self) {
        // After `complete` the slot is empty and this does nothing.
        let error = if self.cancelled.load(Ordering::SeqCst) {
            Error::cancelled()
        } else if std::thread::panicking() {
            Error::new(
                crate::error::ErrorCode::Internal,
                "internal error (a bug in sentinel-recovery): a panic abandoned the operation",
            )
        } else {
            Error::new(
                crate::error::ErrorCode::Closed,
                "the operation was abandoned (the core runtime stopped)",
            )
        };
        self.finish(Err(error));
    }
}

/// A started operation. [`Operation::cancel`] stops it; its completion then runs with `closed`
/// and the message of [`Error::cancelled`].
pub struct Operation(Cancel);

enum Cancel {
    /// Completed before it started.
    Nothing,
    /// A task of its own, aborted on cancel.
    Task(tokio::task::AbortHandle, Arc<AtomicBool>),
    /// Work without a task of its own: told through `token`, and completed here.
    Token {
        token: CancellationToken,
        slot: Arc<dyn Unfinished>,
        registry: Weak<Registry>,
        id: u64,
    },
}

impl Operation {
    /// Stops the operation if it is still running. A command already sent may still have run
    /// on the server; one not sent yet will not be; neither is ever retried. Does nothing once
    /// the operation completed.
    pub fn cancel(&self) {
        match &self.0 {
            Cancel::Nothing => {}
            Cancel::Task(task, cancelled) => {
                cancelled.store(true, Ordering::SeqCst);
                task.abort();
            }
            Cancel::Token {
                token,
                slot,
                registry,
                id,
            } => {
                token.cancel();
                let (Some(registry), Ok(handle)) = (registry.upgrade(), crate::runtime::handle())
                else {
                    return;
                };
                let (slot, id) = (slot.clone(), *id);
                // Completions run on core threads, never on the canceller's.
                handle.spawn(async move {
                    registry.settle(id, || slot.fail(&registry, Error::cancelled()));
                });
            }
        }
    }
}

/// An operation just started, with the reply its calling thread may read itself.
///
/// `own` is there only when the caller asked to read (see [`super::Handle::execute_here`]) and
/// wrote the whole command itself to an idle connection: until it is read
/// ([`OwnReply::read`], [`OwnReply::read_ready`]) or dropped, nothing else reads that
/// connection, so the caller must read it (a blocking wait) or watch its socket (an event loop)
/// at once. Dropping it hands the reply back to the connection's task; the operation completes
/// exactly once either way.
pub struct Started {
    /// The operation, to cancel it.
    pub operation: Operation,
    /// The reply the calling thread reads itself, when it may.
    pub own: Option<OwnReply>,
}

impl From<Operation> for Started {
    /// An operation whose reply is read elsewhere.
    fn from(operation: Operation) -> Started {
        Started {
            operation,
            own: None,
        }
    }
}
