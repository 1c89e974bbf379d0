//! The hand-off between core threads and Python: this binding's scheduler.
//!
//! Core threads never take the GIL: an event, a log record, or a completion that can't go
//! straight to its loop (see [`crate::waker`]: most asyncio completions do, `close` and loops
//! without a waker don't) is pushed onto the queue of one process-wide thread, `sr-py-dispatch`,
//! which is not a core thread and may wait for the GIL as long as it takes. With the GIL it builds the Python objects and hands them to
//! their owner: asyncio futures and queues through `loop.call_soon_threadsafe` (one call per loop
//! per batch), event callbacks of `BlockingClient` by calling them, and log records through
//! Python's `logging`. Work that piles up while it waits for the GIL goes out as one batch, in
//! the order it was pushed.
//!
//! What runs when, and how often, is the core's business (`sentinel_recovery::host`): each
//! completion is pushed exactly once, and nothing is pushed for an event handler after its
//! removal has returned. What is left here is the queue itself: [`flush`] waits until what was
//! pushed has been handed over, and an event callback whose subscription the core reports removed
//! is not called from the queue any more (events pushed before the removal may still wait here).
//!
//! A forked child sees a changed pid and starts a dispatcher of its own (the parent's thread does
//! not exist there). At interpreter exit the dispatcher stops before finalization begins.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use sentinel_recovery::host::EventSubscription;
use sentinel_recovery::{Error, Event, Topology, Value};

use crate::{convert, errors, logging};

/// Log records allowed to wait for the dispatcher; more are dropped (and counted) so a flood of
/// core logging can never grow memory without bound.
const MAX_PENDING_LOGS: usize = 4096;

/// What a finished core operation produced, converted to Python on the dispatcher thread.
pub enum Outcome {
    /// A command reply; `decode` turns strings into `str`.
    Reply(sentinel_recovery::Result<Value>, bool),
    /// A topology snapshot (from `ready`).
    Topology(sentinel_recovery::Result<Topology>),
    /// Nothing (from `close`, a transaction's `watch`).
    Unit(sentinel_recovery::Result<()>),
    /// A node's address, as `(host, port)` (from `route`).
    Address(sentinel_recovery::Result<sentinel_recovery::Address>),
    /// A pub/sub subscription (see [`crate::pubsub`]); `decode` turns its strings into `str`.
    Subscriber(
        sentinel_recovery::Result<sentinel_recovery::host::Subscriber>,
        bool,
    ),
    /// A pub/sub message, or `None` once the subscription ended.
    Message(
        sentinel_recovery::Result<Option<sentinel_recovery::Message>>,
        bool,
    ),
    /// A pipeline's results (each a reply or that command's error).
    Replies(
        sentinel_recovery::Result<Vec<sentinel_recovery::Result<Value>>>,
        bool,
    ),
    /// EXEC's replies, `None` when a watched key changed.
    Exec(sentinel_recovery::Result<Option<Vec<Value>>>, bool),
    /// A transaction begun.
    Transaction(sentinel_recovery::Result<crate::apps::NativeTransaction>),
    /// A doctor report as `(json, text, status, exit_code)`.
    Diagnosis(sentinel_recovery::Result<crate::doctor::DiagnosisTuple>),
}

/// One piece of work for the dispatcher.
pub enum Job {
    /// Complete an asyncio future on its loop.
    Future {
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        outcome: Outcome,
    },
    /// Put an event (`None`: the stream ended) into an `asyncio.Queue` on its loop.
    QueueEvent {
        target: Arc<QueueTarget>,
        event: Option<Event>,
    },
    /// Call an event callback.
    Callback {
        target: Arc<CallbackTarget>,
        event: Event,
    },
    /// Forward a log record to `logging`.
    Log {
        level: i32,
        target: String,
        message: String,
    },
}

/// Where the events of one asyncio subscription go.
pub struct QueueTarget {
    /// The loop that owns the queue.
    pub event_loop: Py<PyAny>,
    /// The `asyncio.Queue`.
    pub queue: Py<PyAny>,
}

/// The Python function of a `BlockingClient.on_event` and the core subscription that feeds it.
pub struct CallbackTarget {
    /// The function, called with each event as a dict.
    pub callback: Py<PyAny>,
    /// Set right after the core accepted the handler.
    pub subscription: OnceLock<EventSubscription>,
}

impl CallbackTarget {
    /// Whether the core has removed the subscription: events still queued here for it are then
    /// dropped. With [`flush`] (which waits for the call in progress) this makes "no callback
    /// after `on_event(None)` / `close()` returned" hold for the Python function too, also when
    /// the removal runs inside the callback, on this thread, where nothing can wait.
    fn removed(&self) -> bool {
        self.subscription
            .get()
            .is_some_and(EventSubscription::is_removed)
    }
}

struct State {
    jobs: Vec<Job>,
    sleeping: bool,
    stopped: bool,
    in_python: bool,
    /// Jobs pushed so far, and jobs whose batch has been handed over completely.
    pushed: u64,
    handed_over: u64,
}

/// The dispatcher of this process.
pub struct Dispatcher {
    state: Mutex<State>,
    wake: Condvar,
    idle: Condvar,
    pending_logs: AtomicUsize,
    dropped_logs: AtomicUsize,
}

thread_local! {
    static ON_DISPATCHER: Cell<bool> = const { Cell::new(false) };
    static LOGGERS: RefCell<HashMap<String, Py<PyAny>>> = RefCell::new(HashMap::new());
}

/// Whether the calling thread is the dispatcher (where event callbacks run).
pub fn on_dispatcher_thread() -> bool {
    ON_DISPATCHER.with(|c| c.get())
}

static CURRENT: Mutex<Option<(u32, Arc<Dispatcher>)>> = Mutex::new(None);
/// The native `_deliver` function, scheduled on each loop with a batch.
static DELIVER: OnceLock<Py<PyAny>> = OnceLock::new();

/// Registers the function that completes a batch on the loop thread.
pub fn set_deliver(f: Py<PyAny>) {
    let _ = DELIVER.set(f);
}

/// The dispatcher of this process, started on first use (and again in a forked child).
pub fn get() -> PyResult<Arc<Dispatcher>> {
    let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
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
    let d = Arc::new(Dispatcher {
        state: Mutex::new(State {
            jobs: Vec::new(),
            sleeping: false,
            stopped: false,
            in_python: false,
            pushed: 0,
            handed_over: 0,
        }),
        wake: Condvar::new(),
        idle: Condvar::new(),
        pending_logs: AtomicUsize::new(0),
        dropped_logs: AtomicUsize::new(0),
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

/// The dispatcher if one runs in this process, without starting one.
fn existing() -> Option<Arc<Dispatcher>> {
    let current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    match &*current {
        Some((p, d)) if *p == std::process::id() => Some(d.clone()),
        _ => None,
    }
}

/// Queues `job` on the dispatcher of the calling process (started if need be: after fork() a
/// completion or event belongs to the child's own dispatcher).
pub fn push(job: Job) {
    if let Ok(d) = get() {
        d.push(job);
    }
}

/// Waits (call it with the GIL released) until every job pushed before this call has been handed
/// over: callbacks returned, futures and queue items scheduled on their loops. Returns at once on
/// the dispatcher thread itself, where waiting would never end, and when no dispatcher runs.
pub fn flush() {
    if on_dispatcher_thread() {
        return;
    }
    let Some(d) = existing() else { return };
    let mut s = d.state.lock().unwrap_or_else(|e| e.into_inner());
    let target = s.pushed;
    while s.handed_over < target && !s.stopped {
        s = d.idle.wait(s).unwrap_or_else(|e| e.into_inner());
    }
}

/// Queues a log record (from any thread, never waiting on Python). Dropped when too many wait.
pub fn log(level: i32, target: &str, message: String) {
    let Ok(d) = get() else { return };
    if d.pending_logs.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING_LOGS {
        d.pending_logs.fetch_sub(1, Ordering::AcqRel);
        d.dropped_logs.fetch_add(1, Ordering::Relaxed);
        return;
    }
    d.push(Job::Log {
        level,
        target: target.replace("::", "."),
        message,
    });
}

/// Stops the dispatcher before interpreter finalization, waiting (GIL released by the caller)
/// up to `timeout` for a batch in progress to finish.
pub fn shutdown(timeout: Duration) {
    let Some(d) = existing() else { return };
    let mut s = d.state.lock().unwrap_or_else(|e| e.into_inner());
    s.stopped = true;
    s.jobs.clear();
    d.wake.notify_all();
    let deadline = std::time::Instant::now() + timeout;
    while s.in_python {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        s = d
            .idle
            .wait_timeout(s, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

impl Dispatcher {
    /// Queues `job`; never blocks on Python. After shutdown the job is dropped.
    pub fn push(&self, job: Job) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.stopped {
            drop(s);
            drop(job);
            return;
        }
        s.jobs.push(job);
        s.pushed += 1;
        if s.sleeping {
            s.sleeping = false;
            self.wake.notify_one();
        }
    }

    fn run(self: Arc<Self>) {
        ON_DISPATCHER.with(|c| c.set(true));
        loop {
            let (jobs, taken) = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                while s.jobs.is_empty() && !s.stopped {
                    s.sleeping = true;
                    s = self.wake.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                s.sleeping = false;
                if s.stopped {
                    break;
                }
                s.in_python = true;
                (std::mem::take(&mut s.jobs), s.pushed)
            };
            // `try_attach` declines once the interpreter is finalizing: stop for good then.
            let attached = Python::try_attach(|py| self.process(py, jobs));
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.in_python = false;
            s.handed_over = taken;
            self.idle.notify_all();
            if attached.is_none() {
                s.stopped = true;
                break;
            }
        }
    }

    fn process(&self, py: Python<'_>, jobs: Vec<Job>) {
        // Per event loop, in order: (kind, target, value) triples for `_deliver`.
        let mut batches: Vec<(Py<PyAny>, Vec<Bound<'_, PyTuple>>)> = Vec::new();
        let mut logged = false;
        for job in jobs {
            match job {
                Job::Future {
                    event_loop,
                    future,
                    outcome,
                } => {
                    let (kind, value) = match outcome_to_py(py, outcome) {
                        Ok(v) => (0u8, v),
                        Err(e) => (1u8, e),
                    };
                    let item =
                        PyTuple::new(py, [small_int(py, kind), future.into_bound(py), value]);
                    if let Ok(item) = item {
                        batch_for(&mut batches, py, event_loop).push(item);
                    }
                }
                Job::QueueEvent { target, event } => {
                    let value = match event {
                        Some(e) => convert::serialized(py, &e)
                            .unwrap_or_else(|err| err.into_value(py).into_bound(py).into_any()),
                        None => py.None().into_bound(py),
                    };
                    let queue = target.queue.clone_ref(py).into_bound(py);
                    if let Ok(item) = PyTuple::new(py, [small_int(py, 2), queue, value]) {
                        batch_for(&mut batches, py, target.event_loop.clone_ref(py)).push(item);
                    }
                }
                Job::Callback { target, event } => call_back(py, &target, &event),
                Job::Log {
                    level,
                    target,
                    message,
                } => {
                    self.pending_logs.fetch_sub(1, Ordering::AcqRel);
                    forward_log(py, level, &target, &message);
                    logged = true;
                }
            }
        }
        let dropped = self.dropped_logs.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            forward_log(
                py,
                30,
                "sentinel_recovery",
                &format!("{dropped} log records from the core were dropped (Python too slow to take them)"),
            );
        }
        if logged {
            logging::refresh_threshold(py);
        }
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
    _py: Python<'py>,
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

/// The result object, or the exception object to set (with the GIL, on any thread).
pub(crate) fn outcome_to_py<'py>(
    py: Python<'py>,
    outcome: Outcome,
) -> Result<Bound<'py, PyAny>, Bound<'py, PyAny>> {
    let fail = |e: &Error| errors::error_object(py, e);
    let converted = match outcome {
        Outcome::Reply(Ok(v), decode) => convert::value(py, v, decode),
        Outcome::Topology(Ok(t)) => convert::serialized(py, &t),
        Outcome::Unit(Ok(())) => Ok(py.None().into_bound(py)),
        Outcome::Address(Ok(a)) => (a.host, a.port).into_pyobject(py).map(|t| t.into_any()),
        Outcome::Address(Err(e)) => return Err(fail(&e)),
        Outcome::Subscriber(Ok(s), decode) => crate::pubsub::subscriber_to_py(py, s, decode),
        Outcome::Message(Ok(m), decode) => crate::pubsub::message_to_py(py, m, decode),
        Outcome::Subscriber(Err(e), _) => return Err(fail(&e)),
        Outcome::Message(Err(e), _) => return Err(fail(&e)),
        Outcome::Reply(Err(e), _) => return Err(fail(&e)),
        Outcome::Topology(Err(e)) => return Err(fail(&e)),
        Outcome::Unit(Err(e)) => return Err(fail(&e)),
        Outcome::Replies(Ok(items), decode) => crate::apps::results(py, items, decode),
        Outcome::Exec(Ok(replies), decode) => crate::apps::exec_result(py, replies, decode),
        Outcome::Replies(Err(e), _) | Outcome::Exec(Err(e), _) => return Err(fail(&e)),
        Outcome::Transaction(tx) => return crate::apps::transaction_object(py, tx),
        Outcome::Diagnosis(Ok(d)) => d.into_pyobject(py).map(|t| t.into_any()),
        Outcome::Diagnosis(Err(e)) => return Err(fail(&e)),
    };
    converted.map_err(|e| e.into_value(py).into_bound(py).into_any())
}

fn forward_log(py: Python<'_>, level: i32, target: &str, message: &str) {
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

/// Calls an event callback (unless its subscription was removed meanwhile); an exception it
/// raises goes to `sys.unraisablehook`, and later events are still delivered.
fn call_back(py: Python<'_>, target: &CallbackTarget, event: &Event) {
    if target.removed() {
        return;
    }
    let cb = target.callback.bind(py);
    let result = convert::serialized(py, event).and_then(|e| cb.call1((e,)));
    if let Err(e) = result {
        e.write_unraisable(py, Some(cb));
    }
}

fn small_int(py: Python<'_>, n: u8) -> Bound<'_, PyAny> {
    match n.into_pyobject(py) {
        Ok(o) => o.into_any(),
        Err(never) => match never {},
    }
}
