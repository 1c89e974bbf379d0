//! Completion and event callbacks for bindings that can't await Rust futures (C, .NET, and the
//! hand-off points of Python and Node).
//!
//! Callbacks run on core threads and must only copy the result and hand it to the host's own
//! scheduler. The guarantees every binding needs, implemented once here: every command gets
//! exactly one completion (also on panic or close), and no event callback runs after
//! [`Client::close`] (or [`Client::set_event_callback`] with `None`) has returned — except that a
//! callback which itself closes the client may finish its own run.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use super::Client;
use crate::error::{Error, ErrorCode, Result};
use crate::monitor::Event;
use crate::resp::Value;

/// A function the core calls with each event, on a core thread.
pub type EventCallback = Box<dyn FnMut(&Event) + Send + 'static>;

thread_local! {
    /// Set while this thread runs an event callback, so `close` from inside it does not wait for
    /// itself.
    static IN_EVENT_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// The installed event callback and the task feeding it.
#[derive(Default)]
pub(super) struct EventSink {
    callback: Arc<Mutex<Option<EventCallback>>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl EventSink {
    /// Removes the callback; after this returns it is not called again (unless called from
    /// inside the callback, whose current run then finishes after this returns).
    pub(super) fn clear(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
        if IN_EVENT_CALLBACK.with(|c| c.get()) {
            // The lock is held by this very thread's callback; `take` below would deadlock. The
            // feeding task is aborted, so nothing runs after the current call.
            if let Ok(mut cb) = self.callback.try_lock() {
                cb.take();
            }
            return;
        }
        self.callback.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

impl Client {
    /// Runs `args` like [`Client::execute`] and calls `done` exactly once with the result, on a
    /// core thread, also when the client is closed meanwhile or something panics. `done` must not
    /// block: copy the result and return.
    pub fn execute_with_callback<A, F>(&self, args: &[A], done: F)
    where
        A: AsRef<[u8]>,
        F: FnOnce(Result<Value>) + Send + 'static,
    {
        let client = self.clone();
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
        let handle = match crate::runtime::handle() {
            Ok(h) => h,
            Err(e) => return done(Err(e)),
        };
        // A guard so that a panic anywhere below still completes the command.
        struct Once<F: FnOnce(Result<Value>)>(Option<F>);
        impl<F: FnOnce(Result<Value>)> Drop for Once<F> {
            fn drop(&mut self) {
                if let Some(f) = self.0.take() {
                    f(Err(Error::new(ErrorCode::Closed, "the command was abandoned (client closed or core stopped)")));
                }
            }
        }
        let mut once = Once(Some(done));
        handle.spawn(async move {
            let result = client.execute(&args).await;
            if let Some(f) = once.0.take() {
                f(result);
            }
        });
    }

    /// Installs (or with `None` removes) the function called with every event of this client,
    /// on a core thread, in order. Replaces any earlier one; when this returns, the earlier one
    /// is no longer called.
    pub fn set_event_callback(&self, callback: Option<EventCallback>) -> Result<()> {
        self.inner.sink.clear();
        let Some(callback) = callback else { return Ok(()) };
        let mut events = self.events()?;
        let slot = self.inner.sink.callback.clone();
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(callback);
        let handle = crate::runtime::handle()?;
        let task = handle.spawn(async move {
            while let Some(event) = events.next().await {
                let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
                let Some(cb) = guard.as_mut() else { break };
                IN_EVENT_CALLBACK.with(|c| c.set(true));
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&event)));
                IN_EVENT_CALLBACK.with(|c| c.set(false));
                if outcome.is_err() {
                    tracing::error!("an event callback panicked; it is removed");
                    guard.take();
                    break;
                }
            }
        });
        *self.inner.sink.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        Ok(())
    }
}
