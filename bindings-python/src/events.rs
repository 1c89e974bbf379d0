//! A client's events in Python, three ways: an `asyncio.Queue` fed through the dispatcher
//! (`Client.events()`), a blocking iterator ([`EventIter`], `BlockingClient.events()`), and an
//! `on_event` function called on the dispatcher ([`CallbackSlot`]). Each is a core event
//! subscription whose handler only copies the event and queues it.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use sentinel_recovery::host::{EventRegistration, Handle};
use sentinel_recovery::Event;

use crate::blocking::SIGNAL_CHECK_INTERVAL;
use crate::convert::{self, seconds};
use crate::dispatch::{self, Job, QueueTarget};
use crate::errors::to_pyerr;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Feeds `handle`'s events to the `asyncio.Queue` `queue` of `event_loop`; `None` is put at the
/// end (the client closed, or the subscription was cancelled).
pub(crate) fn subscribe_async(
    handle: &Handle,
    event_loop: Py<PyAny>,
    queue: Py<PyAny>,
) -> PyResult<Subscription> {
    dispatch::get()?;
    let feeder = QueueFeeder(Arc::new(QueueTarget { event_loop, queue }));
    let subscription = handle
        .subscribe_events(Box::new(move |event: &Event| {
            dispatch::push_event(Job::QueueItem {
                target: feeder.0.clone(),
                event: Some(event.clone()),
            })
        }))
        .map_err(|e| to_pyerr(&e))?;
    Ok(Subscription(subscription))
}

/// The handler side of an asyncio subscription: when the core drops the handler (client
/// closed, subscription removed) it queues the `None` that ends the iteration.
struct QueueFeeder(Arc<QueueTarget>);

impl Drop for QueueFeeder {
    fn drop(&mut self) {
        dispatch::push(Job::QueueItem {
            target: self.0.clone(),
            event: None,
        });
    }
}

/// An asyncio event subscription; `cancel()` stops it (so does dropping it).
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct Subscription(EventRegistration);

#[pymethods]
impl Subscription {
    /// Stops the subscription: nothing more is put into its queue but the final `None`.
    fn cancel(&self) {
        self.0.remove();
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.0.remove();
    }
}

/// The `on_event` function of a `BlockingClient`, if one is installed.
#[derive(Default)]
pub(crate) struct CallbackSlot(Mutex<Option<Installed>>);

impl CallbackSlot {
    /// Installs `callback` (or with `None` none). When this returns, an earlier one is no longer
    /// called (unless this is called from inside it: then its current call finishes).
    pub(crate) fn set(
        &self,
        py: Python<'_>,
        handle: &Handle,
        callback: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let installed = match callback {
            None => None,
            Some(callback) => Some(Installed::new(handle, callback)?),
        };
        let old = std::mem::replace(&mut *lock(&self.0), installed);
        if let Some(old) = old {
            py.detach(|| old.remove());
        }
        Ok(())
    }

    /// The installed function, taken out (for `close`).
    pub(crate) fn take(&self) -> Option<Installed> {
        lock(&self.0).take()
    }
}

/// An installed `on_event` function and the core subscription that feeds it.
pub(crate) struct Installed {
    callback: Arc<EventCallback>,
    subscription: EventRegistration,
}

impl Installed {
    fn new(handle: &Handle, callback: Py<PyAny>) -> PyResult<Installed> {
        dispatch::get()?;
        let callback = Arc::new(EventCallback {
            callback,
            removed: AtomicBool::new(false),
            calling: Mutex::new(()),
            pid: std::process::id(),
        });
        let feeding = callback.clone();
        let subscription = handle
            .subscribe_events(Box::new(move |event: &Event| {
                let (callback, event) = (feeding.clone(), event.clone());
                dispatch::push_event(Job::Call(Box::new(move |py| callback.call(py, &event))));
            }))
            .map_err(|e| to_pyerr(&e))?;
        Ok(Installed {
            callback,
            subscription,
        })
    }

    /// Removes the function: when this returns it is not running (unless called from inside
    /// it: its current call then finishes) and is never called again, not even for events
    /// already queued. Call it with the GIL released: it may wait for the call in progress.
    pub(crate) fn remove(&self) {
        self.subscription.remove();
        self.callback.remove();
    }
}

thread_local! {
    /// The `on_event` function this thread (the dispatcher) is calling, by address.
    static CALLING: Cell<usize> = const { Cell::new(0) };
}

/// An `on_event` function, called on the dispatcher with each event queued for it.
struct EventCallback {
    callback: Py<PyAny>,
    removed: AtomicBool,
    /// Held for each call: `remove` takes it to wait for the call in progress.
    calling: Mutex<()>,
    pid: u32,
}

impl EventCallback {
    /// Calls the function with `event` as a dict, unless it was removed. An exception it
    /// raises goes to `sys.unraisablehook`; later events are still delivered.
    fn call(&self, py: Python<'_>, event: &Event) {
        let _calling = lock(&self.calling);
        if self.removed.load(Ordering::Acquire) {
            return;
        }
        let outer = CALLING.with(|c| c.replace(self.id()));
        let callback = self.callback.bind(py);
        let result = convert::serialized(py, event).and_then(|e| callback.call1((e,)));
        if let Err(e) = result {
            e.write_unraisable(py, Some(callback));
        }
        CALLING.with(|c| c.set(outer));
    }

    fn remove(&self) {
        self.removed.store(true, Ordering::Release);
        // From inside the call, waiting would be waiting for itself. In a forked child the
        // parent's dispatcher, and any call it was in, do not exist.
        if CALLING.with(|c| c.get()) != self.id() && self.pid == std::process::id() {
            drop(lock(&self.calling));
        }
    }

    fn id(&self) -> usize {
        self as *const EventCallback as usize
    }
}

/// A blocking iterator over `handle`'s events.
pub(crate) fn subscribe_blocking(handle: &Handle) -> PyResult<EventIter> {
    let (tx, rx) = mpsc::channel::<Event>();
    // The sender goes with the handler: the core drops it at close or removal, which ends the
    // iterator.
    let subscription = handle
        .subscribe_events(Box::new(move |event: &Event| {
            let _ = tx.send(event.clone());
        }))
        .map_err(|e| to_pyerr(&e))?;
    Ok(EventIter {
        rx: Mutex::new(Some(rx)),
        subscription,
    })
}

/// A blocking iterator over events (dicts); ends when the client is closed.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct EventIter {
    rx: Mutex<Option<mpsc::Receiver<Event>>>,
    subscription: EventRegistration,
}

impl Drop for EventIter {
    fn drop(&mut self) {
        self.subscription.remove();
    }
}

#[pymethods]
impl EventIter {
    /// The iterator itself.
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next event, waiting as long as it takes (GIL released); `StopIteration` at the end.
    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.wait(py, None)? {
            Some(event) => Ok(event),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    /// The next event, waiting at most `timeout` seconds (forever with `None`) with the GIL
    /// released. Returns `None` on timeout; raises `StopIteration` once the stream has ended.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyAny>>> {
        let deadline = timeout
            .map(seconds)
            .transpose()?
            .map(|t| Instant::now() + t);
        match self.wait(
            py,
            deadline.or(Some(Instant::now() + Duration::from_secs(365 * 86400))),
        )? {
            Some(event) => Ok(Some(event)),
            None if deadline.is_some_and(|d| Instant::now() >= d) && !self.ended() => Ok(None),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    /// Stops the iterator; later calls end at once.
    fn close(&self) {
        self.subscription.remove();
        lock(&self.rx).take();
    }
}

impl EventIter {
    fn ended(&self) -> bool {
        lock(&self.rx).is_none()
    }

    /// Waits in short slices so Ctrl-C (signals) is noticed; `None`: ended or deadline passed.
    fn wait(&self, py: Python<'_>, deadline: Option<Instant>) -> PyResult<Option<Py<PyAny>>> {
        loop {
            let step = match deadline {
                Some(d) => d
                    .saturating_duration_since(Instant::now())
                    .min(SIGNAL_CHECK_INTERVAL),
                None => SIGNAL_CHECK_INTERVAL,
            };
            let got = py.detach(|| {
                let guard = lock(&self.rx);
                match guard.as_ref() {
                    None => Err(true),
                    Some(rx) => match rx.recv_timeout(step) {
                        Ok(e) => Ok(e),
                        Err(mpsc::RecvTimeoutError::Timeout) => Err(false),
                        Err(mpsc::RecvTimeoutError::Disconnected) => Err(true),
                    },
                }
            });
            match got {
                Ok(event) => return Ok(Some(convert::serialized(py, &event)?.unbind())),
                Err(true) => {
                    lock(&self.rx).take();
                    return Ok(None);
                }
                Err(false) => {
                    py.check_signals()?;
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Ok(None);
                    }
                }
            }
        }
    }
}
