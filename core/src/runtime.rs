//! The one process-wide tokio runtime all core work runs on.
//!
//! Started lazily on first use, on threads named `sr-worker-N`, so hosts can tell them apart in
//! a debugger and none of the host's own threads ever runs discovery, DNS or reconnect logic. A
//! forked child sees a changed pid and starts a runtime of its own: the parent's worker threads do
//! not exist in the child, so the inherited runtime is leaked rather than touched.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use crate::error::{Error, Result};
use crate::sync::Locked;

thread_local! {
    static ON_CORE_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is one of the core runtime's own.
pub fn on_core_thread() -> bool {
    ON_CORE_THREAD.with(|c| c.get())
}

/// The one rule for every blocking form: refused (`config`) on a core runtime thread, inside a
/// callback of the library, where waiting could starve the very work it waits for.
pub fn refuse_blocking_on_core_thread() -> Result<()> {
    if on_core_thread() {
        return Err(Error::config(
            "a blocking call was made on a core runtime thread (inside a callback of the \
             library); use the callback or async form there",
        ));
    }
    Ok(())
}

/// Runs `work` on the core runtime and waits for it from whatever executor the caller uses.
/// Dropping the returned future cancels `work` (an interrupted `BLPOP k 0` must not stay blocked
/// on the server, swallowing the next push; a doctor's `watch` must not sample on unseen):
/// requests go through each connection's own task, and a dedicated connection closes when its
/// last handle is dropped.
pub(crate) async fn on_core<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);
    impl<T> Drop for AbortOnDrop<T> {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let handle = crate::runtime::handle()?;
    let mut task = AbortOnDrop(handle.spawn(work));
    match (&mut task.0).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => Err(Error::new(
            crate::error::ErrorCode::Protocol,
            "internal error: a core task panicked",
        )),
        Err(_) => Err(Error::closed()),
    }
}

/// Runs `work` on the core runtime and blocks the calling thread, and only it, until it is done.
///
/// Refused with a config error on a core thread: blocking one of the few workers on work queued
/// behind it could stall everything.
pub fn block_on<F>(work: F) -> Result<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    refuse_blocking_on_core_thread()?;
    let handle = handle()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(work.await);
    });
    rx.recv().map_err(|_| Error::closed())
}

/// Default number of worker threads.
pub const DEFAULT_WORKER_THREADS: usize = 2;

struct Global {
    pid: u32,
    runtime: Option<tokio::runtime::Runtime>,
    worker_threads: Option<usize>,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global {
    pid: 0,
    runtime: None,
    worker_threads: None,
});

fn lock() -> std::sync::MutexGuard<'static, Global> {
    // A panic while holding this lock can only come from tokio's builder; the state stays
    // consistent, so a poisoned lock is safe to reuse.
    GLOBAL.locked()
}

/// Sets the worker thread count for the runtime started next. Overrides `SR_WORKER_THREADS`.
///
/// Fails with a config error if the runtime is already running in this process (the count of a
/// running runtime can't change) or if `threads` is 0 or above 256.
pub fn set_worker_threads(threads: usize) -> Result<()> {
    if !(1..=256).contains(&threads) {
        return Err(Error::config(format!(
            "worker_threads must be in 1..256, not {threads}"
        )));
    }
    let mut g = lock();
    if g.runtime.is_some() && g.pid == crate::sync::current_pid() {
        return Err(Error::config(
            "worker_threads must be set before the runtime starts (before the first client opens)",
        ));
    }
    g.worker_threads = Some(threads);
    Ok(())
}

fn configured_threads(g: &Global) -> Result<usize> {
    if let Some(n) = g.worker_threads {
        return Ok(n);
    }
    match std::env::var("SR_WORKER_THREADS") {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=256).contains(&n) => Ok(n),
            _ => Err(Error::config(format!(
                "SR_WORKER_THREADS must be a number in 1..256, not '{v}'"
            ))),
        },
        Err(_) => Ok(DEFAULT_WORKER_THREADS),
    }
}

/// A handle to the core runtime, starting it if this process has none yet. For the testkit and
/// this crate's own layers; bindings go through [`crate::host`] instead.
#[doc(hidden)]
pub fn handle() -> Result<tokio::runtime::Handle> {
    let mut g = lock();
    let pid = crate::sync::current_pid();
    if g.pid != pid {
        if let Some(inherited) = g.runtime.take() {
            // Forked child: the parent's worker threads are gone; dropping the runtime would
            // try to join them. Leak it instead.
            std::mem::forget(inherited);
        }
        g.pid = pid;
    }
    if let Some(rt) = &g.runtime {
        return Ok(rt.handle().clone());
    }
    let threads = configured_threads(&g)?;
    let counter = Arc::new(AtomicUsize::new(0));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .on_thread_start(|| {
            ON_CORE_THREAD.with(|c| c.set(true));
            block_sigpipe();
        })
        .thread_name_fn(move || format!("sr-worker-{}", counter.fetch_add(1, Ordering::Relaxed)))
        .enable_all()
        .build()
        .map_err(|e| Error::config(format!("cannot start the core runtime: {e}")))?;
    tracing::debug!(threads, "core runtime started");
    let handle = rt.handle().clone();
    g.runtime = Some(rt);
    Ok(handle)
}

/// Blocks SIGPIPE on the calling (core) thread. Socket writes here use writev, which has no
/// MSG_NOSIGNAL: a write to a peer that is gone would otherwise raise SIGPIPE in the host
/// process, whose default action kills a C program (Rust, Python, Node and Mono ignore it). A
/// blocked SIGPIPE caused by this thread stays pending on it; the write fails with EPIPE, which
/// the connection handles like any lost peer. The host's own threads are untouched.
fn block_sigpipe() {
    // SAFETY: plain libc calls on a local signal set; only this thread's mask changes.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Whether the runtime is running in this process.
pub fn is_running() -> bool {
    let g = lock();
    g.runtime.is_some() && g.pid == crate::sync::current_pid()
}

/// Stops the runtime, waiting up to `timeout` for its tasks to end. Clients still open fail with
/// `closed` afterwards; a later call to [`handle`] starts a fresh runtime.
///
/// Called from a core thread, it can't wait for itself, so it stops in the background.
pub fn shutdown(timeout: Duration) {
    let rt = {
        let mut g = lock();
        if g.pid != crate::sync::current_pid() {
            return;
        }
        g.runtime.take()
    };
    let Some(rt) = rt else { return };
    if tokio::runtime::Handle::try_current().is_err() {
        rt.shutdown_timeout(timeout);
    } else {
        rt.shutdown_background();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_threads_are_named_and_bounds_are_checked() {
        assert!(set_worker_threads(0).is_err());
        assert!(set_worker_threads(257).is_err());
        let h = handle().unwrap();
        let name = h
            .block_on(async {
                tokio::spawn(async { std::thread::current().name().map(String::from) }).await
            })
            .unwrap()
            .unwrap();
        assert!(name.starts_with("sr-worker-"), "{name}");
        assert!(
            set_worker_threads(3).is_err(),
            "running runtime can't be resized"
        );
    }
}
