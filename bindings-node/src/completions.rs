//! The completion queue: what a client hands from the core's threads to the JavaScript thread.
//!
//! Every asynchronous operation (`ready`, `execute`, `close`, ...) is identified by a `u32` id
//! (never 0) chosen by JavaScript. Its result goes, on a core thread, into the client's mailbox
//! (the core's [`Mailbox`]) through the operation's one completion token, so it is delivered once
//! by construction. Events take the same mailbox (bounded: see [`EVENT_BOUND`]), so JavaScript
//! sees events and completions in the order the core produced them: every event the core
//! delivered before `close` completed is emitted before `close()` resolves, and none after. The
//! mailbox's wake-up calls the client's *wake* threadsafe function (non-blocking) when it goes
//! from idle to non-empty; on the JavaScript thread its callback drains the mailbox into one
//! [`Batch`] (see `batch`), so a burst costs one crossing into JavaScript.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use napi::threadsafe_function::ThreadsafeFunction;
use napi::Status;
use sentinel_recovery::host::{Completion, Delivery, Done, Mailbox};
use sentinel_recovery::{Error as SrError, Value};

use crate::batch::{Batch, Item};
use crate::errors::napi_failure;
use crate::logging;

/// The wake function: called on the JavaScript thread with a [`Batch`] of what was waiting.
pub(crate) type WakeFn = ThreadsafeFunction<(), (), Batch, Status, false, true>;

/// Events that may wait for the JavaScript thread (beyond it the newest are dropped, counted,
/// and reported as a warning through the logger in their place).
pub(crate) const EVENT_BOUND: usize = 65_536;

/// What one client hands to the JavaScript thread: its mailbox (the core's ordered, bounded,
/// coalescing queue with its close barrier and exactly-once completions), whose wake-up calls
/// the wake function without blocking.
pub(crate) struct Shared {
    pub(crate) mailbox: Mailbox<Item>,
    /// Also held by the mailbox's wake-up; here for `NativeClient::hold`.
    pub(crate) wake: Arc<WakeFn>,
}

/// Appends a drain's deliveries to `items`; a count of dropped events becomes a warning.
pub(crate) fn collect(items: &mut Vec<Item>, delivery: Delivery<Item>) {
    match delivery {
        Delivery::Item(item) => items.push(item),
        Delivery::Dropped(n) => logging::warn(&format!(
            "{n} events for the 'event' listeners were dropped (the event loop was too slow to take them)"
        )),
    }
}

impl Shared {
    /// Completes operation `id` now with `item`'s result (nothing was started on the core).
    pub(crate) fn complete(&self, item: Item) {
        // Refused only once the client is gone: nobody waits for it then.
        if let Ok(completion) = self.mailbox.completion() {
            let _ = completion.complete(item);
        }
    }

    /// Runs `f` with the start of operation `id`, whose completion `f` hands to the core through
    /// [`Start`]; if `f` panics before it did, `id` completes with `internal` (after that, the
    /// core completes the `Done` it drops, with `internal` too): one completion either way. A
    /// completion `f` left unused (a bug) completes with `internal` too, so no promise waits
    /// forever.
    pub(crate) fn starting<R>(&self, id: u32, f: impl FnOnce(&Start) -> Option<R>) -> Option<R> {
        // Refused only once the client is gone (its mailbox closes when it is collected):
        // nobody can be waiting for `id` then.
        let Ok(token) = self.mailbox.completion() else {
            return None;
        };
        let start = Start {
            id,
            token: Cell::new(Some(token)),
        };
        let (result, error) = match std::panic::catch_unwind(AssertUnwindSafe(|| f(&start))) {
            Ok(result) => (result, None),
            Err(panic) => (None, Some(SrError::internal(&*panic))),
        };
        if let Some(token) = start.token.take() {
            let error = error.unwrap_or_else(|| {
                napi_failure("starting an operation", "its completion was left unused")
            });
            let _ = token.complete(Item::Completion(id, Err(error)));
        }
        result
    }
}

/// Operation `id` as it starts: its one completion (see [`Shared::starting`]).
pub(crate) struct Start {
    id: u32,
    token: Cell<Option<Completion<Item>>>,
}

impl Start {
    /// The operation's completion token; taken once.
    fn token(&self) -> Completion<Item> {
        // Taken at most once per operation by the call sites; a second take is a bug that
        // panics into `starting`, and the operation completes through the first.
        self.token
            .take()
            .expect("one completion per operation (a bug in the binding)")
    }

    /// The deadline `timeoutMs` asks for; one that breaks the core's rule completes the operation
    /// now with its `config` error, and `None` is returned.
    pub(crate) fn deadline(&self, timeout_ms: Option<f64>) -> Option<Option<Duration>> {
        match crate::args::deadline(timeout_ms) {
            Ok(timeout) => Some(timeout),
            Err(e) => {
                self.complete(Item::Completion(self.id, Err(e)));
                None
            }
        }
    }

    /// Completes the operation now with `item` (nothing was started on the core).
    pub(crate) fn complete(&self, item: Item) {
        let _ = self.token().complete(item);
    }

    /// The operation's completion as the host layer calls it (once, on a core thread), its
    /// value converted by `convert`.
    pub(crate) fn done<T: Send + 'static>(&self, convert: fn(T) -> Value) -> Done<T> {
        let (id, token) = (self.id, self.token());
        Box::new(move |result| {
            let _ = token.complete(Item::Completion(id, result.map(convert)));
        })
    }

    /// The operation's completion as a function of its result that makes the item.
    pub(crate) fn done_with<T: Send + 'static>(
        &self,
        make: impl FnOnce(u32, sentinel_recovery::Result<T>) -> Item + Send + 'static,
    ) -> Done<T> {
        let (id, token) = (self.id, self.token());
        Box::new(move |result| {
            let _ = token.complete(make(id, result));
        })
    }
}
