//! One way to take a lock.
//!
//! Every mutex in the crate guards bookkeeping that is valid between statements, so a panic
//! while one was held (caught at a task or callback boundary) leaves nothing half-done: the lock
//! is taken anyway instead of spreading the panic.

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
        let pid = std::process::id();
        let mut guard = self.0.locked();
        let (owner, value) = guard.get_or_insert_with(|| (pid, T::default()));
        if *owner != pid {
            *owner = pid;
            *value = T::default();
        }
        f(value)
    }
}
