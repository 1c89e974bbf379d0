//! The completion queue: what a client hands from the core's threads to the JavaScript thread.
//!
//! Every asynchronous operation (`ready`, `execute`, `close`, ...) is identified by a `u32` id
//! (never 0) chosen by JavaScript. Its result goes, on a core thread, into the client's mailbox
//! (the core's [`Mailbox`]) through the operation's one completion token, so it is delivered once
//! by construction. Events take the same mailbox (as id 0 with the event as JSON, bounded: see
//! [`EVENT_BOUND`]), so JavaScript sees events and completions in the order the core produced
//! them: every event the core delivered before `close` completed is emitted before `close()`
//! resolves, and none after. The mailbox's wake-up calls the client's *wake* threadsafe function
//! (non-blocking) when it goes from idle to non-empty; dispatched on the JavaScript thread, its
//! native callback drains the mailbox into a [`Batch`], which converts every item straight into
//! the JavaScript values it calls the wake function with, so a burst costs one crossing into
//! JavaScript and a single completion no more.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::sync::Arc;

use napi::bindgen_prelude::ToNapiValue;
use napi::threadsafe_function::ThreadsafeFunction;
use napi::{sys, Status};
use sentinel_recovery::host::{Completion, Delivery, Done, Mailbox};
use sentinel_recovery::{Error as SrError, Value};

use crate::buffer_slab;
use crate::errors::{check, napi_failure};
use crate::logging;
use crate::values::{completion_value, many_value};

/// The wake function: called on the JavaScript thread with a [`Batch`] of what was waiting.
pub(crate) type WakeFn = ThreadsafeFunction<(), (), Batch, Status, false, true>;

/// Events that may wait for the JavaScript thread (beyond it the newest are dropped, counted,
/// and reported as a warning through the logger in their place).
pub(crate) const EVENT_BOUND: usize = 65_536;

/// Something waiting for the JavaScript thread.
pub(crate) enum Item {
    /// The result of operation `id`.
    Completion(u32, sentinel_recovery::Result<Value>),
    /// The results of operation `id` (a pipeline's, or EXEC's: `None` when a watched key
    /// changed), each a reply or that command's error.
    Many(
        u32,
        sentinel_recovery::Result<Option<Vec<sentinel_recovery::Result<Value>>>>,
    ),
    /// An event, as JSON.
    Event(String),
}

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

/// Items converted to JavaScript by the wake function's callback (see the module documentation).
#[doc(hidden)]
pub struct Batch {
    pub(crate) items: Vec<Item>,
    pub(crate) decode: bool,
    pub(crate) make_error: sys::napi_value,
}

impl ToNapiValue for Batch {
    unsafe fn to_napi_value(env: sys::napi_env, batch: Self) -> napi::Result<sys::napi_value> {
        let mut array = ptr::null_mut();
        check(sys::napi_create_array_with_length(
            env,
            batch.items.len() * 3,
            &mut array,
        ))?;
        for (i, item) in batch.items.iter().enumerate() {
            let (id, ok, value) = match item {
                Item::Completion(id, result) => match slab_view(env, result, batch.decode) {
                    Some((slab, at)) => (*id, slab, at),
                    None => {
                        let (ok, value) =
                            completion_value(env, result, batch.decode, batch.make_error)?;
                        (*id, ToNapiValue::to_napi_value(env, ok)?, value)
                    }
                },
                Item::Many(id, result) => {
                    let (ok, value) = many_value(env, result, batch.decode, batch.make_error)?;
                    (*id, ToNapiValue::to_napi_value(env, ok)?, value)
                }
                Item::Event(json) => (
                    0,
                    ToNapiValue::to_napi_value(env, true)?,
                    ToNapiValue::to_napi_value(env, json.as_str())?,
                ),
            };
            let base = (i * 3) as u32;
            check(sys::napi_set_element(
                env,
                array,
                base,
                ToNapiValue::to_napi_value(env, id)?,
            ))?;
            check(sys::napi_set_element(env, array, base + 1, ok))?;
            check(sys::napi_set_element(env, array, base + 2, value))?;
        }
        recycle(batch.items);
        Ok(array)
    }
}

/// A small Buffer reply as its slab, which goes in place of `ok`, and where its bytes are in it
/// (see `buffer_slab::packed`), in place of the value; JavaScript makes the view. `None` for
/// any other result, or when the slab can't be had (the reply is then copied as usual).
unsafe fn slab_view(
    env: sys::napi_env,
    result: &sentinel_recovery::Result<Value>,
    decode: bool,
) -> Option<(sys::napi_value, sys::napi_value)> {
    let Ok(Value::Bulk(bytes)) = result else {
        return None;
    };
    if decode || bytes.len() > buffer_slab::LARGEST {
        return None;
    }
    let (slab, offset) = buffer_slab::place(env, bytes).ok()?;
    let at = ToNapiValue::to_napi_value(env, buffer_slab::packed(offset, bytes.len())).ok()?;
    Some((slab, at))
}

thread_local! {
    /// The JavaScript thread's batch buffer, emptied and kept between wake-ups: a batch's
    /// buffer is often larger than the allocator's small sizes, and allocating it anew for each
    /// batch on this thread made the allocator consolidate its small free chunks, which then
    /// missed its per-thread cache (measured under callgrind at 64 commands in flight: about
    /// 8 % more instructions per command).
    static SPARE: std::cell::RefCell<Vec<Item>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty buffer for a batch, with the capacity of earlier ones.
pub(crate) fn batch_buffer() -> Vec<Item> {
    SPARE.with(|s| s.take())
}

/// Gives a converted batch's buffer back for the next one.
fn recycle(mut items: Vec<Item>) {
    items.clear();
    SPARE.with(|s| {
        if s.borrow().capacity() < items.capacity() {
            *s.borrow_mut() = items;
        }
    });
}
