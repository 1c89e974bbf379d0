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

use super::command;
use super::execute::run_command;
use super::Client;
use crate::error::{Error, ErrorCode, Result};
use crate::monitor::Event;
use crate::resp::Value;
use crate::sync::Locked;

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
    current: Mutex<Option<Installed>>,
}

/// One installation: its callback slot (locked while the callback runs) and its feeding task.
struct Installed {
    slot: Arc<Mutex<Option<EventCallback>>>,
    task: tokio::task::JoinHandle<()>,
}

impl EventSink {
    /// Removes the callback; after this returns it is not called again. Called from inside the
    /// callback itself, the current run finishes after this returns, and nothing runs after it.
    pub(super) fn clear(&self) {
        let installed = self.current.locked().take();
        let Some(installed) = installed else { return };
        installed.task.abort();
        if IN_EVENT_CALLBACK.with(|c| c.get()) {
            // The slot's lock may be held by this very thread's callback: don't wait for it. The
            // feeding loop checks the slot before every call, so emptying it when the lock frees
            // (below, or by the loop itself seeing the abort) is enough; try now in case another
            // installation's callback is the one running.
            let emptied = match installed.slot.try_lock() {
                Ok(mut cb) => {
                    cb.take();
                    true
                }
                Err(_) => false,
            };
            if !emptied {
                CLEAR_AFTER_CALLBACK.with(|c| c.borrow_mut().push(installed.slot));
            }
            return;
        }
        installed.slot.locked().take();
    }
}

thread_local! {
    /// Slots to empty as soon as the callback running on this thread returns.
    static CLEAR_AFTER_CALLBACK: std::cell::RefCell<Vec<Arc<Mutex<Option<EventCallback>>>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl Client {
    /// Runs `args` like [`Client::execute`] and calls `done` exactly once with the result, also
    /// when the client is closed meanwhile or something panics, and by the command's deadline
    /// (`command_timeout_ms`; for a blocking command, plus how long it may block). `done` runs on a
    /// core thread, or, for a command refused before it starts (invalid arguments, a closed
    /// client), on the calling thread before this returns. `done` must not block: copy the result
    /// and return; a binding that hands it to its host's scheduler owns that hand-off's delivery.
    pub fn execute_with_callback<A, F>(&self, args: &[A], done: F)
    where
        A: AsRef<[u8]>,
        F: FnOnce(Result<Value>) + Send + 'static,
    {
        // Classified and copied here, then run directly on a core task: one spawn per command.
        let prepared = command::classify(args).and_then(|kind| Ok((kind, self.monitor()?)));
        let (kind, monitor) = match prepared {
            Ok(p) => p,
            Err(e) => return done(Err(e)),
        };
        let handle = match crate::runtime::handle() {
            Ok(h) => h,
            Err(e) => return done(Err(e)),
        };
        // A guard so that a panic anywhere below still completes the command.
        struct Once<F: FnOnce(Result<Value>)>(Option<F>);
        impl<F: FnOnce(Result<Value>)> Drop for Once<F> {
            fn drop(&mut self) {
                if let Some(f) = self.0.take() {
                    f(Err(Error::new(
                        ErrorCode::Closed,
                        "the command was abandoned (client closed or core stopped)",
                    )));
                }
            }
        }
        let mut once = Once(Some(done));
        let timeout = std::time::Duration::from_millis(self.inner.config.command_timeout_ms);
        let work = run_command(
            self.inner.clone(),
            monitor,
            kind,
            super::owned(args),
            timeout,
        );
        handle.spawn(async move {
            let result = work.await;
            if let Some(f) = once.0.take() {
                f(result);
            }
        });
    }

    /// Installs (or with `None` removes) the function called with every event of this client,
    /// on a core thread, in order. Replaces any earlier one; when this returns, the earlier one
    /// is no longer called. May be called from inside a callback.
    pub fn set_event_callback(&self, callback: Option<EventCallback>) -> Result<()> {
        self.inner.sink.clear();
        let Some(callback) = callback else {
            return Ok(());
        };
        let mut events = self.events()?;
        let slot = Arc::new(Mutex::new(Some(callback)));
        let feeding = slot.clone();
        let handle = crate::runtime::handle()?;
        let task = handle.spawn(async move {
            while let Some(event) = events.next().await {
                let mut guard = feeding.locked();
                // Emptied by `clear`: stop before calling, even for an event already received.
                let Some(cb) = guard.as_mut() else { break };
                IN_EVENT_CALLBACK.with(|c| c.set(true));
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&event)));
                IN_EVENT_CALLBACK.with(|c| c.set(false));
                let panicked = outcome.is_err();
                if panicked {
                    tracing::error!("an event callback panicked; it is removed");
                    guard.take();
                }
                drop(guard);
                // `clear` called from inside the callback could not take the lock it held.
                for cleared in CLEAR_AFTER_CALLBACK.with(|c| std::mem::take(&mut *c.borrow_mut())) {
                    cleared.locked().take();
                }
                if panicked {
                    break;
                }
            }
        });
        *self.inner.sink.current.locked() = Some(Installed { slot, task });
        Ok(())
    }
}
