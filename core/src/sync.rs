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
