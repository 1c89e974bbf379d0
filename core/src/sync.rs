//! One way to take a lock, and this process's id without a system call.
//!
//! Every mutex in the crate guards bookkeeping that is valid between statements, so a panic
//! while one was held (caught at a task or callback boundary) leaves nothing half-done: the lock
//! is taken anyway instead of spreading the panic.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// [`Mutex::lock`] that ignores poisoning (see the module doc).
pub(crate) trait Locked<T> {
    /// The guard, poisoned or not.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// This process's id, cached: the checks that tell a forked child from its parent run on every
/// command, and `getpid` is a system call each time. A forked child forgets the cached id in a
/// `pthread_atfork` child handler (which runs before `fork` returns there, while the child has
/// one thread), so it reads its own on first use.
pub(crate) fn current_pid() -> u32 {
    static PID: AtomicU32 = AtomicU32::new(0);
    #[cfg(unix)]
    {
        static FORGET_IN_CHILD: std::sync::Once = std::sync::Once::new();
        extern "C" fn forget() {
            PID.store(0, Ordering::Relaxed);
        }
        FORGET_IN_CHILD.call_once(|| {
            // SAFETY: registers a handler that only stores to an atomic (async-signal-safe).
            // Should registering fail, the id is read anew on every call instead.
            if unsafe { libc::pthread_atfork(None, None, Some(forget)) } != 0 {
                PID.store(u32::MAX, Ordering::Relaxed);
            }
        });
    }
    match PID.load(Ordering::Relaxed) {
        0 => {
            let pid = std::process::id();
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        u32::MAX => std::process::id(),
        pid => pid,
    }
}

/// A process-wide registry that a forked child starts afresh: what the parent put in it is
/// served by threads and tasks that do not exist in the child.
pub(crate) struct PerProcess<T>(Mutex<Option<(u32, T)>>);

impl<T: Default> PerProcess<T> {
    /// An empty registry (for a `static`).
    pub(crate) const fn new() -> PerProcess<T> {
        PerProcess(Mutex::new(None))
    }

    /// Runs `f` on this process's value, made anew after a fork.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let pid = current_pid();
        let mut guard = self.0.locked();
        let (owner, value) = guard.get_or_insert_with(|| (pid, T::default()));
        if *owner != pid {
            *owner = pid;
            *value = T::default();
        }
        f(value)
    }
}
