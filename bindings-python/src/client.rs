//! `NativeClient`: the core's host [`Handle`] as seen by the Python layer
//! (`sentinel_recovery.Client` and `BlockingClient` wrap it).
//!
//! Everything here converts values and owns Python-side objects; the guarantees (each completion
//! exactly once, `closed` for what is in flight at close, nothing after close or removal, panics
//! as `internal`) are the host layer's, and so are the queues results travel in (host
//! mailboxes). Async operations take an event loop and a future, start the core's callback form
//! and return an [`Operation`] (what `asyncio` cancellation cancels); the completion goes to the
//! loop's waker (or, where there is none, to the callback thread of the process it runs in),
//! which completes the future on its loop. Blocking operations wait with [`Handle::wait`], the
//! GIL released, waking regularly to run Python's signal handlers. A `BlockingClient`'s event
//! callback has a mailbox of its own, drained on the callback thread: closing that mailbox is
//! what makes "no call after `on_event(None)` / `close()` returned" hold.

use std::sync::{mpsc, Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use sentinel_recovery::host::{Delivery, EventSubscription, Handle, Mailbox};
use sentinel_recovery::Event;

use crate::completion::{call_timeout, outcome, seconds, signal_check_interval, wait, Operation};
use crate::dispatch::{self, Drain, Job, QueueTarget};
use crate::errors::to_pyerr;
use crate::waker::complete;
use crate::{convert, logging};

/// Events allowed to wait for a `BlockingClient.on_event` function; more are dropped (counted,
/// and the count logged as a warning in their place) so a callback that never returns can't
/// grow memory without bound.
const MAX_QUEUED_EVENTS: usize = 65_536;

/// The native client. Not meant to be used directly: see `sentinel_recovery.Client` and
/// `sentinel_recovery.BlockingClient`.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct NativeClient {
    pub(crate) handle: Handle,
    pub(crate) decode: bool,
    /// The URL with passwords redacted, kept for `repr` after close.
    url: String,
    /// The `BlockingClient.on_event` function now installed.
    callback: Mutex<Option<Installed>>,
}

/// An installed `BlockingClient.on_event` function: the core subscription that feeds it and
/// the mailbox it is called from.
struct Installed {
    feed: Arc<CallbackFeed>,
    subscription: EventSubscription,
}

impl Installed {
    /// Removes the function: when this returns it is not running (unless called from inside
    /// it, on the callback thread: its current call then finishes) and is never called again.
    /// Call it with the GIL released: it may wait for the call in progress.
    fn remove(&self) {
        self.subscription.remove();
        // In a forked child the parent's callback thread, and any drain it was in, do not exist.
        if self.feed.pid == std::process::id() {
            let _ = self.feed.mailbox.close();
        }
    }
}

/// The events of one `on_event` function, waiting for the callback thread.
struct CallbackFeed {
    callback: Py<PyAny>,
    mailbox: Mailbox<Event>,
    pid: u32,
}

impl CallbackFeed {
    fn new(callback: Py<PyAny>) -> Arc<CallbackFeed> {
        Arc::new_cyclic(|me: &Weak<CallbackFeed>| {
            let me = me.clone();
            CallbackFeed {
                callback,
                mailbox: Mailbox::new(MAX_QUEUED_EVENTS, move || {
                    if let Some(me) = me.upgrade() {
                        dispatch::push(Job::Drain(me));
                    }
                }),
                pid: std::process::id(),
            }
        })
    }
}

impl Drain for CallbackFeed {
    /// Calls the function with each event (an exception it raises goes to
    /// `sys.unraisablehook`, and later events are still delivered).
    fn drain(&self, py: Python<'_>) {
        let cb = self.callback.bind(py);
        self.mailbox.drain(|delivery| match delivery {
            Delivery::Item(event) => {
                let result = convert::serialized(py, &event).and_then(|e| cb.call1((e,)));
                if let Err(e) = result {
                    e.write_unraisable(py, Some(cb));
                }
            }
            Delivery::Dropped(n) => dispatch::forward_log(
                py,
                sentinel_recovery::host::log::WARN,
                "sentinel_recovery",
                &format!("{n} events for the on_event callback were dropped (it was too slow to take them)"),
            ),
        });
    }
}

#[pymethods]
impl NativeClient {
    /// Parses `url`, applies `options` (key, value-as-string pairs, through the core's
    /// `Config::set`) and opens the client, returning at once (discovery runs on core threads).
    /// `address_map` is the function form of that option (see `address_map.rs`).
    #[staticmethod]
    #[pyo3(signature = (url, options, decode, address_map=None))]
    fn open(
        py: Python<'_>,
        url: &str,
        options: Vec<(String, String)>,
        decode: bool,
        address_map: Option<Py<PyAny>>,
    ) -> PyResult<NativeClient> {
        logging::refresh_threshold(py);
        dispatch::get()?; // started now, so a failure to start it shows here
        let mut config =
            sentinel_recovery::host::config_from_url(url, &options).map_err(|e| to_pyerr(&e))?;
        if let Some(map) = address_map {
            config
                .address_map
                .set_function(Some(crate::address_map::map_fn(map)));
        }
        let handle = Handle::open(config).map_err(|e| to_pyerr(&e))?;
        handle.set_api_names(&crate::apps::PYTHON_API);
        let url = handle
            .config()
            .map(|c| c.redacted_url())
            .map_err(|e| to_pyerr(&e))?;
        Ok(NativeClient {
            handle,
            decode,
            url,
            callback: Mutex::new(None),
        })
    }

    /// Starts a command; `future` (of `event_loop`) gets the reply or the exception. `timeout`
    /// (seconds) replaces the `command_timeout_ms` option for this call.
    #[pyo3(signature = (event_loop, future, args, timeout=None))]
    fn execute_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        args: &Bound<'_, PyTuple>,
        timeout: Option<f64>,
    ) -> PyResult<Operation> {
        let args = convert::args(args)?;
        let timeout = call_timeout(timeout)?;
        let decode = self.decode;
        let done = complete(event_loop, future, move |r| {
            outcome(r, move |py, v| Ok(convert::value(py, v, decode)?.unbind()))
        })?;
        // The core checks the command (and its sizes) before it copies the arguments.
        Ok(Operation(self.handle.execute(
            &args.slices(),
            timeout,
            done,
        )))
    }

    /// For the test suite only: an operation whose work panics on a core thread; `future` gets
    /// `InternalError`, once, and the client goes on.
    fn panic_for_test(&self, event_loop: Py<PyAny>, future: Py<PyAny>) -> PyResult<Operation> {
        let decode = self.decode;
        let done = complete(event_loop, future, move |r| {
            outcome(r, move |py, v| Ok(convert::value(py, v, decode)?.unbind()))
        })?;
        Ok(Operation(self.handle.panic_for_test(done)))
    }

    /// Runs a command and waits for its reply with the GIL released. `timeout` (seconds)
    /// replaces the `command_timeout_ms` option for this call. Signals are handled while it
    /// waits: Ctrl-C raises `KeyboardInterrupt` and cancels the command.
    #[pyo3(signature = (args, timeout=None))]
    fn execute_blocking(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let args = convert::args(args)?;
        let timeout = call_timeout(timeout)?;
        // Borrowed while the GIL is released: the caller's tuple keeps the objects alive, and
        // `bytes` are immutable (everything else was copied by `convert::args`).
        let slices = args.slices();
        let handle = &self.handle;
        let value = wait(py, |done| handle.execute_here(&slices, timeout, done, None))?;
        drop(args);
        Ok(convert::value(py, value, self.decode)?.unbind())
    }

    /// Starts commands back to back; `future` gets a list with each reply, or the exception of
    /// that command's error in its place. `timeout` (seconds) is the whole pipeline's deadline.
    #[pyo3(signature = (event_loop, future, commands, timeout=None))]
    fn pipeline_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        commands: Vec<Bound<'_, PyTuple>>,
        timeout: Option<f64>,
    ) -> PyResult<Operation> {
        crate::apps::pipeline_async(
            &self.handle,
            self.decode,
            event_loop,
            future,
            commands,
            timeout,
        )
    }

    /// Runs commands back to back and waits (GIL released) for the list of results.
    #[pyo3(signature = (commands, timeout=None))]
    fn pipeline_blocking(
        &self,
        py: Python<'_>,
        commands: Vec<Bound<'_, PyTuple>>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        crate::apps::pipeline_blocking(py, &self.handle, self.decode, commands, timeout)
    }

    /// MULTI/EXEC of `commands` after `WATCH watch...` (when not empty) on a dedicated
    /// connection to the primary; `future` gets the replies, or `None` when a watched key
    /// changed. `timeout` (seconds) is the whole transaction's deadline, until EXEC's reply.
    #[pyo3(signature = (event_loop, future, commands, watch, timeout=None))]
    fn transaction_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        commands: Vec<Bound<'_, PyTuple>>,
        watch: &Bound<'_, PyTuple>,
        timeout: Option<f64>,
    ) -> PyResult<Operation> {
        crate::apps::transaction_async(
            &self.handle,
            self.decode,
            event_loop,
            future,
            commands,
            watch,
            timeout,
        )
    }

    /// [`NativeClient::transaction_async`], waiting (GIL released, signals handled).
    #[pyo3(signature = (commands, watch, timeout=None))]
    fn transaction_blocking(
        &self,
        py: Python<'_>,
        commands: Vec<Bound<'_, PyTuple>>,
        watch: &Bound<'_, PyTuple>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        crate::apps::transaction_blocking(py, &self.handle, self.decode, commands, watch, timeout)
    }

    /// Begins a transaction on a dedicated connection to the primary; `future` gets the
    /// `NativeTransaction`. `timeout` (seconds) bounds the whole transaction, from now until
    /// its EXEC completes; each step only has the time left.
    #[pyo3(signature = (event_loop, future, timeout=None))]
    fn begin_transaction_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Operation> {
        crate::apps::begin_async(&self.handle, self.decode, event_loop, future, timeout)
    }

    /// Begins a transaction and waits for its connection; `timeout` as for
    /// [`NativeClient::begin_transaction_async`].
    #[pyo3(signature = (timeout=None))]
    fn begin_transaction_blocking(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
    ) -> PyResult<crate::apps::NativeTransaction> {
        crate::apps::begin_blocking(py, &self.handle, self.decode, timeout)
    }

    /// Completes `future` with the topology once a verified primary is known, or with the
    /// error of discovery.
    fn ready_async(&self, event_loop: Py<PyAny>, future: Py<PyAny>) -> PyResult<Operation> {
        let done = complete(event_loop, future, |r| {
            outcome(r, |py, t| Ok(convert::serialized(py, &t)?.unbind()))
        })?;
        Ok(Operation(self.handle.ready(done)))
    }

    /// Waits (GIL released, signals handled) for a verified primary; returns the topology or
    /// raises.
    fn ready_blocking(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let handle = &self.handle;
        let topology = wait(py, |done| handle.ready(done))?;
        Ok(convert::serialized(py, &topology)?.unbind())
    }

    /// Starts waiting for the node a connection of another library should go to (`primary`:
    /// writes, else reads under `read_from`); `future` gets `(host, port)`. `timeout`
    /// (seconds) replaces `command_timeout_ms`.
    #[pyo3(signature = (event_loop, future, primary, timeout=None))]
    fn route_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        primary: bool,
        timeout: Option<f64>,
    ) -> PyResult<Operation> {
        let timeout = call_timeout(timeout)?;
        let done = complete(event_loop, future, |r| {
            outcome(r, |py, a: sentinel_recovery::Address| {
                Ok((a.host, a.port).into_pyobject(py)?.into_any().unbind())
            })
        })?;
        Ok(Operation(self.handle.route(route(primary), timeout, done)))
    }

    /// Waits (GIL released, signals handled) for the node a connection of another library
    /// should go to; returns `(host, port)` or raises (`TimeoutError` naming the last discovery
    /// error, `ClosedError`, `AuthError`, ...).
    #[pyo3(signature = (primary, timeout=None))]
    fn route_blocking(
        &self,
        py: Python<'_>,
        primary: bool,
        timeout: Option<f64>,
    ) -> PyResult<(String, u16)> {
        let timeout = call_timeout(timeout)?;
        let handle = &self.handle;
        let address = wait(py, |done| handle.route(route(primary), timeout, done))?;
        Ok((address.host, address.port))
    }

    /// Whether a connection to `host:port` may still carry writes (`primary`) or reads; never
    /// waits. False once a failover starts demoting the node.
    fn is_routable(&self, host: String, port: u16, primary: bool) -> bool {
        self.handle
            .is_routable(&sentinel_recovery::Address::new(host, port), route(primary))
    }

    /// Whether a failover is demoting, or has replaced, `host:port`; never waits.
    fn is_fenced(&self, host: String, port: u16) -> bool {
        self.handle
            .is_fenced(&sentinel_recovery::Address::new(host, port))
    }

    /// A read-only 8-byte memoryview over the core's routing counter (a native-endian u64; see
    /// `Handle::routing_epoch`): it changes whenever `is_routable` / `is_fenced` may answer
    /// differently, so the redis-py adapter keeps a verdict while it reads the same instead of
    /// calling in for every command. A forked child's core uses a counter of its own: ask again
    /// after a fork.
    fn routing_epoch_view<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let epoch = self.handle.routing_epoch().map_err(|e| to_pyerr(&e))?;
        let counter = kept_for_process(epoch);
        // SAFETY: `counter` points at 8 bytes that stay allocated for the rest of the process
        // (`kept_for_process`); the view only reads them.
        unsafe {
            let view =
                pyo3::ffi::PyMemoryView_FromMemory(counter.cast_mut().cast(), 8, PY_BUF_READ);
            Bound::from_owned_ptr_or_err(py, view)
        }
    }

    /// Reports that a connection to `host:port` could not be opened or found the wrong role.
    fn report_unusable(&self, host: String, port: u16) -> PyResult<()> {
        self.handle
            .report_unusable(&sentinel_recovery::Address::new(host, port))
            .map_err(|e| to_pyerr(&e))
    }

    /// The current topology snapshot as a dict; never waits.
    fn topology(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let t = self.handle.topology().map_err(|e| to_pyerr(&e))?;
        Ok(convert::serialized(py, &t)?.unbind())
    }

    /// Closes the client; every operation in flight completes with `ClosedError`, then `future`
    /// completes. Idempotent.
    fn close_async(&self, event_loop: Py<PyAny>, future: Py<PyAny>) -> PyResult<()> {
        let done = dispatch::complete(event_loop, future, |r| outcome(r, |py, ()| Ok(py.None())))?;
        self.callback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        self.handle.close(Box::new(move || done(Ok(()))));
        Ok(())
    }

    /// Closes the client and waits (GIL released) until it is closed: every operation in flight
    /// has completed (with `ClosedError`) and no event callback runs any more. Idempotent.
    fn close_blocking(&self, py: Python<'_>) {
        let callback = self
            .callback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let handle = &self.handle;
        py.detach(|| {
            handle.close_blocking();
            if let Some(callback) = callback {
                callback.remove();
            }
        });
    }

    /// Feeds this client's events to an `asyncio.Queue` of `event_loop`; `None` is put at the
    /// end (the client closed, or the subscription was cancelled).
    fn subscribe_async(&self, event_loop: Py<PyAny>, queue: Py<PyAny>) -> PyResult<Subscription> {
        dispatch::get()?;
        let feeder = QueueFeeder(Arc::new(QueueTarget { event_loop, queue }));
        let subscription = self
            .handle
            .subscribe_events(Box::new(move |event: &Event| {
                dispatch::push_event(&feeder.0, event)
            }))
            .map_err(|e| to_pyerr(&e))?;
        Ok(Subscription(subscription))
    }

    /// A blocking iterator over this client's events.
    fn subscribe_blocking(&self) -> PyResult<EventIter> {
        let (tx, rx) = mpsc::channel::<Event>();
        // The sender goes with the handler: the core drops it at close or removal, which ends
        // the iterator.
        let subscription = self
            .handle
            .subscribe_events(Box::new(move |event: &Event| {
                let _ = tx.send(event.clone());
            }))
            .map_err(|e| to_pyerr(&e))?;
        Ok(EventIter {
            rx: Mutex::new(Some(rx)),
            subscription,
        })
    }

    /// Installs (or with `None` removes) a function called with each event as a dict, on the
    /// dispatcher thread (never on a core thread). When this returns, an earlier one is no
    /// longer called (unless this is called from inside it: then its current call finishes).
    #[pyo3(signature = (callback))]
    fn set_event_callback(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        let installed = match callback {
            None => None,
            Some(callback) => {
                dispatch::get()?;
                let feed = CallbackFeed::new(callback);
                let feeding = feed.clone();
                let subscription = self
                    .handle
                    .subscribe_events(Box::new(move |event: &Event| {
                        let _ = feeding.mailbox.push(event.clone());
                    }))
                    .map_err(|e| to_pyerr(&e))?;
                Some(Installed { feed, subscription })
            }
        };
        let old = std::mem::replace(
            &mut *self.callback.lock().unwrap_or_else(|e| e.into_inner()),
            installed,
        );
        if let Some(old) = old {
            py.detach(|| old.remove());
        }
        Ok(())
    }

    /// Asks for a discovery round now.
    fn refresh(&self) -> PyResult<()> {
        self.handle.refresh().map_err(|e| to_pyerr(&e))
    }

    /// Whether the client was closed.
    #[getter]
    fn closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// Commands waiting for a usable node.
    #[getter]
    fn queued(&self) -> usize {
        self.handle.queued()
    }

    /// What a connection opened by another library (the redis-py adapter) needs from the URL,
    /// so that the adapter parses no URL itself: the data-node credential (`username`,
    /// `password`; for sending to the node only, never for logs), `db`, `client_name`,
    /// `data_tls`, and `command_timeout` / `connect_timeout` in seconds.
    fn connection_settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let config = self.handle.config().map_err(|e| to_pyerr(&e))?;
        let settings = PyDict::new(py);
        let (username, password) = match &config.auth {
            Some(c) => (c.username.clone(), Some(c.password.expose().to_owned())),
            None => (None, None),
        };
        settings.set_item("username", username)?;
        settings.set_item("password", password)?;
        settings.set_item("db", config.db)?;
        settings.set_item("client_name", config.client_name.clone())?;
        settings.set_item("data_tls", config.data_tls)?;
        settings.set_item("command_timeout", config.command_timeout().as_secs_f64())?;
        settings.set_item("connect_timeout", config.connect_timeout().as_secs_f64())?;
        Ok(settings)
    }

    /// The URL with passwords redacted.
    #[getter]
    fn url(&self) -> String {
        self.url.clone()
    }
}

/// The handler side of an asyncio subscription: puts events into the queue through the
/// callback thread, and `None` when the core drops the handler (client closed, subscription
/// removed), which ends the iteration.
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
pub struct Subscription(EventSubscription);

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

/// A blocking iterator over events (dicts); ends when the client is closed.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct EventIter {
    rx: Mutex<Option<mpsc::Receiver<Event>>>,
    subscription: EventSubscription,
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
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

impl EventIter {
    fn ended(&self) -> bool {
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    /// Waits in short slices so Ctrl-C (signals) is noticed; `None`: ended or deadline passed.
    fn wait(&self, py: Python<'_>, deadline: Option<Instant>) -> PyResult<Option<Py<PyAny>>> {
        loop {
            let step = match deadline {
                Some(d) => d
                    .saturating_duration_since(Instant::now())
                    .min(signal_check_interval()),
                None => signal_check_interval(),
            };
            let got = py.detach(|| {
                let guard = self.rx.lock().unwrap_or_else(|e| e.into_inner());
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
                    self.rx.lock().unwrap_or_else(|e| e.into_inner()).take();
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

/// The core's route for a connection that carries writes (`primary`) or reads.
fn route(primary: bool) -> sentinel_recovery::Route {
    if primary {
        sentinel_recovery::Route::Primary
    } else {
        sentinel_recovery::Route::Read
    }
}

/// `PyBUF_READ` of CPython's `memoryobject.h` (stable ABI; pyo3 only exports it without abi3).
const PY_BUF_READ: std::ffi::c_int = 0x100;

/// The address of `counter`, kept allocated for the rest of the process: a memoryview has no
/// owner to keep it alive, and the monitor that writes it may be dropped first. Each counter is
/// kept once however often it is asked for (one per monitor the process opens).
fn kept_for_process(
    counter: Arc<std::sync::atomic::AtomicU64>,
) -> *const std::sync::atomic::AtomicU64 {
    static KEPT: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    let address = Arc::as_ptr(&counter);
    let mut kept = KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !kept.contains(&(address as usize)) {
        kept.push(address as usize);
        std::mem::forget(counter);
    }
    address
}
