//! The binding's callback thread, `sr-py-dispatch`: where core results that can't go straight to
//! an event loop's own waker (the `waker` module) reach Python.
//!
//! Core threads never take the GIL. What they hand over here queues in one host mailbox
//! ([`sentinel_recovery::host::Mailbox`]: order, coalesced wake-ups, the overflow rule and the
//! close barrier are the core's): completions of loops without a waker and of `close`, the events
//! of asyncio event iterators (and the end of each), and [`Drain`] jobs, which tell this thread
//! that another mailbox (a `BlockingClient`'s event callback, the log records) has items. The
//! mailbox's wake-up wakes this thread, which takes the GIL and drains everything in one go:
//! callbacks and log records are handed over at once, asyncio futures and queue items are
//! scheduled on their loop with one `loop.call_soon_threadsafe` per loop and drain.
//!
//! A forked child sees a changed pid and starts a thread of its own (the parent's does not exist
//! there). At interpreter exit the thread stops before finalization begins.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use sentinel_recovery::host::{Delivery, Done, Mailbox};
use sentinel_recovery::Event;

use crate::completion::{Outcome, Pending};
use crate::convert;

/// Events of asyncio iterators allowed to wait for this thread; more are dropped (and counted,
/// and the count logged) so a host that stops taking them can't grow memory without bound.
const MAX_QUEUED_EVENTS: usize = 65_536;

/// Something with a mailbox of its own that this thread drains (GIL held) when told to.
pub(crate) trait Drain: Send + Sync {
    /// Delivers what the mailbox holds.
    fn drain(&self, py: Python<'_>);
}

/// One piece of work for this thread.
pub(crate) enum Job {
    /// Complete an asyncio future on its loop.
    Future(Pending),
    /// Put an event (`None`: the stream ended) into an `asyncio.Queue` on its loop.
    QueueItem {
        target: Arc<QueueTarget>,
        event: Option<Event>,
    },
    /// Drain another mailbox.
    Drain(Arc<dyn Drain>),
}

/// Where the events of one asyncio subscription go.
pub(crate) struct QueueTarget {
    /// The loop that owns the queue.
    pub(crate) event_loop: Py<PyAny>,
    /// The `asyncio.Queue`.
    pub(crate) queue: Py<PyAny>,
}

/// Whether this thread was woken, and whether it must stop.
struct Signal {
    woken: bool,
    stopped: bool,
    in_python: bool,
}

/// The callback thread of this process.
pub(crate) struct Dispatcher {
    mailbox: Mailbox<Job>,
    signal: Arc<(Mutex<Signal>, Condvar)>,
}

thread_local! {
    static LOGGERS: RefCell<HashMap<String, Py<PyAny>>> = RefCell::new(HashMap::new());
}

static CURRENT: Mutex<Option<(u32, Arc<Dispatcher>)>> = Mutex::new(None);
/// The native `_deliver` function, scheduled on each loop with a batch.
static DELIVER: OnceLock<Py<PyAny>> = OnceLock::new();

/// Registers the function that completes a batch on the loop thread.
pub(crate) fn set_deliver(f: Py<PyAny>) {
    let _ = DELIVER.set(f);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The callback thread of this process, started on first use (and again in a forked child).
pub(crate) fn get() -> PyResult<Arc<Dispatcher>> {
    let mut current = lock(&CURRENT);
    let pid = std::process::id();
    match current.take() {
        Some((p, d)) if p == pid => {
            *current = Some((p, d.clone()));
            return Ok(d);
        }
        // Forked child: the parent's thread is gone and its locks may be in any state; leak it.
        Some((_, inherited)) => std::mem::forget(inherited),
        None => {}
    }
    let signal = Arc::new((
        Mutex::new(Signal {
            woken: false,
            stopped: false,
            in_python: false,
        }),
        Condvar::new(),
    ));
    let waking = signal.clone();
    let d = Arc::new(Dispatcher {
        mailbox: Mailbox::new(MAX_QUEUED_EVENTS, move || {
            lock(&waking.0).woken = true;
            waking.1.notify_all();
        }),
        signal,
    });
    let runner = d.clone();
    std::thread::Builder::new()
        .name("sr-py-dispatch".into())
        .spawn(move || runner.run())
        .map_err(|e| {
            pyo3::exceptions::PyRuntimeError::new_err(format!(
                "cannot start the sentinel_recovery dispatcher thread: {e}"
            ))
        })?;
    *current = Some((pid, d.clone()));
    Ok(d)
}

/// The callback thread if one runs in this process, without starting one.
fn existing() -> Option<Arc<Dispatcher>> {
    match &*lock(&CURRENT) {
        Some((p, d)) if *p == std::process::id() => Some(d.clone()),
        _ => None,
    }
}

/// Queues `job` on the callback thread of the calling process (started if need be: after fork()
/// a completion or event belongs to the child's own thread). Never dropped: completions, stream
/// ends and drains are all owed to someone.
pub(crate) fn push(job: Job) {
    if let Ok(d) = get() {
        // Refused only once the thread stopped at interpreter exit: nobody is left to take it.
        if let Ok(completion) = d.mailbox.completion() {
            let _ = completion.complete(job);
        }
    }
}

/// Queues an event for an asyncio iterator; dropped (and counted) beyond the bound.
pub(crate) fn push_event(target: &Arc<QueueTarget>, event: &Event) {
    if let Ok(d) = get() {
        let _ = d.mailbox.push(Job::QueueItem {
            target: target.clone(),
            event: Some(event.clone()),
        });
    }
}

/// The completion of an asyncio operation through this thread, in order with the events and
/// queue items it delivers (`close` uses it, so an event iterator has its end before `close()`
/// returns; loops without a waker of their own use it for everything).
pub(crate) fn complete<T: Send + 'static>(
    event_loop: Py<PyAny>,
    future: Py<PyAny>,
    wrap: impl FnOnce(sentinel_recovery::Result<T>) -> Outcome + Send + 'static,
) -> PyResult<Done<T>> {
    get()?; // started now, so a failure to start it shows here
    Ok(Box::new(move |result| {
        push(Job::Future(Pending {
            event_loop,
            future,
            outcome: wrap(result),
        }))
    }))
}

/// Stops the callback thread before interpreter finalization, waiting (GIL released by the
/// caller) up to `timeout` for a drain in progress to finish.
pub(crate) fn shutdown(timeout: Duration) {
    let Some(d) = existing() else { return };
    let (state, changed) = &*d.signal;
    let mut s = lock(state);
    s.stopped = true;
    changed.notify_all();
    let deadline = std::time::Instant::now() + timeout;
    while s.in_python {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        s = changed
            .wait_timeout(s, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

impl Dispatcher {
    fn run(self: Arc<Self>) {
        let (state, changed) = &*self.signal;
        loop {
            {
                let mut s = lock(state);
                while !s.woken && !s.stopped {
                    s = changed.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                s.woken = false;
                if s.stopped {
                    break;
                }
                s.in_python = true;
            }
            // `try_attach` declines once the interpreter is finalizing: stop for good then.
            let attached = Python::try_attach(|py| self.process(py));
            let mut s = lock(state);
            s.in_python = false;
            changed.notify_all();
            if attached.is_none() {
                s.stopped = true;
                break;
            }
        }
        // Nothing is delivered any more; what still comes is refused.
        let _ = self.mailbox.close();
    }

    fn process(&self, py: Python<'_>) {
        // Per event loop, in order: (kind, target, value) triples for `_deliver`.
        let mut batches: Vec<(Py<PyAny>, Vec<Bound<'_, PyTuple>>)> = Vec::new();
        self.mailbox.drain(|delivery| match delivery {
            Delivery::Item(Job::Future(pending)) => {
                let (kind, value) = match (pending.outcome)(py) {
                    Ok(v) => (0u8, v),
                    Err(e) => (1u8, e),
                };
                let item = PyTuple::new(
                    py,
                    [
                        small_int(py, kind),
                        pending.future.into_bound(py),
                        value.into_bound(py),
                    ],
                );
                if let Ok(item) = item {
                    batch_for(&mut batches, pending.event_loop).push(item);
                }
            }
            Delivery::Item(Job::QueueItem { target, event }) => {
                let value = match event {
                    Some(e) => convert::serialized(py, &e)
                        .unwrap_or_else(|err| err.into_value(py).into_bound(py).into_any()),
                    None => py.None().into_bound(py),
                };
                let queue = target.queue.clone_ref(py).into_bound(py);
                if let Ok(item) = PyTuple::new(py, [small_int(py, 2), queue, value]) {
                    batch_for(&mut batches, target.event_loop.clone_ref(py)).push(item);
                }
            }
            Delivery::Item(Job::Drain(other)) => other.drain(py),
            Delivery::Dropped(n) => forward_log(
                py,
                30,
                "sentinel_recovery",
                &format!("{n} events for async iterators were dropped (the event loop too slow to take them)"),
            ),
        });
        let Some(deliver) = DELIVER.get() else { return };
        for (event_loop, items) in batches {
            let Ok(list) = PyList::new(py, items) else {
                continue;
            };
            // A closed loop refuses (RuntimeError): nobody can await its futures any more.
            let _ = event_loop
                .bind(py)
                .call_method1(intern!(py, "call_soon_threadsafe"), (deliver, list));
        }
    }
}

fn batch_for<'a, 'py>(
    batches: &'a mut Vec<(Py<PyAny>, Vec<Bound<'py, PyTuple>>)>,
    event_loop: Py<PyAny>,
) -> &'a mut Vec<Bound<'py, PyTuple>> {
    let i = match batches
        .iter()
        .position(|(l, _)| l.as_ptr() == event_loop.as_ptr())
    {
        Some(i) => i,
        None => {
            batches.push((event_loop, Vec::new()));
            batches.len() - 1
        }
    };
    &mut batches[i].1
}

/// Hands a record to Python's `logging` (GIL held), under the logger named `target`.
pub(crate) fn forward_log(py: Python<'_>, level: i32, target: &str, message: &str) {
    let logger = LOGGERS.with(|cache| {
        if let Some(l) = cache.borrow().get(target) {
            return Some(l.clone_ref(py));
        }
        let l: Py<PyAny> = py
            .import("logging")
            .and_then(|m| m.call_method1("getLogger", (target,)))
            .ok()?
            .unbind();
        cache
            .borrow_mut()
            .insert(target.to_string(), l.clone_ref(py));
        Some(l)
    });
    if let Some(logger) = logger {
        if let Err(e) = logger
            .bind(py)
            .call_method1(intern!(py, "log"), (level, "%s", message))
        {
            e.write_unraisable(py, None);
        }
    }
}

fn small_int(py: Python<'_>, n: u8) -> Bound<'_, PyAny> {
    match n.into_pyobject(py) {
        Ok(o) => o.into_any(),
        Err(never) => match never {},
    }
}
