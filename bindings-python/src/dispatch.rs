//! The binding's callback thread, `sr-py-dispatch`: where core results that have no event loop
//! waker to take them ([`crate::waker`]) reach Python, with the GIL and never on a core thread.
//!
//! Everything queues in one host mailbox ([`Job`]s, in order): the events of `on_event` functions
//! (called here) and of asyncio event iterators, the completion of each close (after the events
//! before it), the completions of loops without a waker, and the log drain. Futures and
//! `asyncio.Queue` items are handed to their loop as one [`LoopBatch`] per loop and drain, through
//! `loop.call_soon_threadsafe`; the batch [`settle`]s the futures there.
//!
//! A forked child starts a thread of its own (the parent's does not exist there). At interpreter
//! exit the thread stops before finalization begins.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use pyo3::intern;
use pyo3::prelude::*;
use sentinel_recovery::host::{Delivery, Done, Mailbox};
use sentinel_recovery::Event;

use crate::completion::{settle, Outcome, Pending};
use crate::convert;

/// Events allowed to wait for this thread; more are dropped (and counted, and the count logged)
/// so a host that stops taking them can't grow memory without bound.
const MAX_QUEUED_EVENTS: usize = 65_536;

/// One piece of work for this thread.
pub(crate) enum Job {
    /// Settle an asyncio future on its loop.
    Future(Pending),
    /// Put an event (`None`: the stream ended) into an `asyncio.Queue` on its loop.
    QueueItem {
        target: Arc<QueueTarget>,
        event: Option<Event>,
    },
    /// Run with the GIL here: an `on_event` function's call, the log drain.
    Call(Box<dyn FnOnce(Python<'_>) + Send>),
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

/// Queues the delivery of an event (an iterator's queue item, an `on_event` call); dropped (and
/// counted) beyond the bound.
pub(crate) fn push_event(job: Job) {
    if let Ok(d) = get() {
        let _ = d.mailbox.push(job);
    }
}

/// The completion of an asyncio operation through this thread, in order with the events it
/// delivers (a close's, so an event iterator has its end before `close()` returns; and those of
/// loops without a waker).
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
        let mut batches: Vec<(Py<PyAny>, Vec<ToLoop>)> = Vec::new();
        self.mailbox.drain(|delivery| match delivery {
            Delivery::Item(Job::Future(pending)) => {
                let event_loop = pending.event_loop.clone_ref(py);
                batch_for(&mut batches, event_loop).push(ToLoop::Settle(pending));
            }
            Delivery::Item(Job::QueueItem { target, event }) => {
                let value = match event {
                    Some(e) => convert::serialized(py, &e)
                        .map(Bound::unbind)
                        .unwrap_or_else(|err| err.into_value(py).into_any()),
                    None => py.None(),
                };
                let queue = target.queue.clone_ref(py);
                batch_for(&mut batches, target.event_loop.clone_ref(py))
                    .push(ToLoop::Put(queue, value));
            }
            Delivery::Item(Job::Call(call)) => call(py),
            Delivery::Dropped(n) => forward_log(
                py,
                sentinel_recovery::host::log::WARN,
                "sentinel_recovery",
                &format!("{n} events were dropped (Python too slow to take them)"),
            ),
        });
        for (event_loop, items) in batches {
            let Ok(batch) = Py::new(py, LoopBatch(Mutex::new(items))) else {
                continue;
            };
            // A closed loop refuses (RuntimeError): nobody can await its futures any more, and
            // the batch is dropped here, with the GIL.
            let _ = event_loop
                .bind(py)
                .call_method1(intern!(py, "call_soon_threadsafe"), (batch,));
        }
    }
}

/// What a [`LoopBatch`] does on its loop.
enum ToLoop {
    Settle(Pending),
    Put(Py<PyAny>, Py<PyAny>),
}

/// The futures and queue items of one loop from one drain, in order; the loop calls it. Not
/// meant to be used directly.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct LoopBatch(Mutex<Vec<ToLoop>>);

#[pymethods]
impl LoopBatch {
    fn __call__(&self, py: Python<'_>) {
        let items = std::mem::take(&mut *lock(&self.0));
        for item in items {
            match item {
                ToLoop::Settle(pending) => settle(py, pending),
                ToLoop::Put(queue, value) => {
                    let queue = queue.bind(py);
                    if let Err(e) = queue.call_method1(intern!(py, "put_nowait"), (value,)) {
                        e.write_unraisable(py, Some(queue));
                    }
                }
            }
        }
    }
}

fn batch_for(
    batches: &mut Vec<(Py<PyAny>, Vec<ToLoop>)>,
    event_loop: Py<PyAny>,
) -> &mut Vec<ToLoop> {
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
