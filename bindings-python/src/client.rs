//! `NativeClient`: the core `Client` as seen by the Python layer (`sentinel_recovery.Client` and
//! `BlockingClient` wrap it). Async operations take an event loop and a future and complete it
//! through the dispatcher; blocking ones release the GIL while they wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use sentinel_recovery::{runtime, Client, Config, Event};

use crate::dispatch::{self, Dispatcher, Job, Outcome, QueueTarget, Registration};
use crate::errors::to_pyerr;
use crate::{convert, logging};

/// The native client. Not meant to be used directly: see `sentinel_recovery.Client` and
/// `sentinel_recovery.BlockingClient`.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct NativeClient {
    client: Client,
    decode: bool,
    // No dispatcher here: each operation takes the one of the calling process (`dispatch::get`),
    // so a client inherited across fork() completes its futures through the child's dispatcher,
    // not through the parent's, whose thread does not exist in the child.
    callback: Mutex<Option<Arc<Registration>>>,
}

/// Completes an asyncio future from a core task; if the task is dropped before it finishes (a
/// panic, or the runtime stopping) the future still gets a `closed` error.
struct Completion {
    dispatcher: Arc<Dispatcher>,
    target: Option<(Py<PyAny>, Py<PyAny>)>,
}

impl Completion {
    fn finish(mut self, outcome: Outcome) {
        if let Some((event_loop, future)) = self.target.take() {
            self.dispatcher.push(Job::Future {
                event_loop,
                future,
                outcome,
            });
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some((event_loop, future)) = self.target.take() {
            self.dispatcher.push(Job::Future {
                event_loop,
                future,
                outcome: Outcome::Unit(Err(sentinel_recovery::Error::new(
                    sentinel_recovery::ErrorCode::Closed,
                    "the operation was abandoned (client closed or core stopped)",
                ))),
            });
        }
    }
}

fn core_handle() -> PyResult<tokio::runtime::Handle> {
    runtime::handle().map_err(|e| to_pyerr(&e))
}

#[pymethods]
impl NativeClient {
    /// Parses `url`, applies `options` (key, value-as-string pairs, through the core's
    /// `Config::set`) and opens the client, returning at once (discovery runs on core threads).
    #[staticmethod]
    #[pyo3(signature = (url, options, decode))]
    fn open(
        py: Python<'_>,
        url: &str,
        options: Vec<(String, String)>,
        decode: bool,
    ) -> PyResult<NativeClient> {
        logging::refresh_threshold(py);
        let mut config = Config::from_url(url).map_err(|e| to_pyerr(&e))?;
        for (key, value) in &options {
            config.set(key, value).map_err(|e| to_pyerr(&e))?;
        }
        dispatch::get()?; // started now, so a failure to start it shows here
        let client = Client::open(config).map_err(|e| to_pyerr(&e))?;
        Ok(NativeClient {
            client,
            decode,
            callback: Mutex::new(None),
        })
    }

    /// Starts a command; `future` (of `event_loop`) gets the reply or the exception.
    fn execute_async(
        &self,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<()> {
        let args = convert::args(args)?;
        let decode = self.decode;
        let completion = Completion {
            dispatcher: dispatch::get()?,
            target: Some((event_loop, future)),
        };
        // The core checks the command (and its sizes) before it copies the arguments.
        self.client
            .execute_with_callback(&args.slices(), move |result| {
                completion.finish(Outcome::Reply(result, decode));
            });
        Ok(())
    }

    /// Runs a command and waits for its reply with the GIL released. `timeout` (seconds)
    /// replaces the `command_timeout_ms` option for this call. Signals are handled while it
    /// waits: Ctrl-C raises `KeyboardInterrupt` and abandons the command.
    #[pyo3(signature = (args, timeout=None))]
    fn execute_blocking(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let args = convert::args(args)?;
        let timeout = timeout.map(seconds).transpose()?;
        let owned: Vec<Vec<u8>> = args.slices().into_iter().map(<[u8]>::to_vec).collect();
        drop(args);
        let client = self.client.clone();
        let value = wait_interruptibly(py, async move {
            match timeout {
                Some(t) => client.execute_timeout(&owned, t).await,
                None => client.execute(&owned).await,
            }
        })?;
        Ok(convert::value(py, value, self.decode)?.unbind())
    }

    /// Completes `future` with the topology once the first discovery round is done, or with its
    /// error.
    fn ready_async(&self, event_loop: Py<PyAny>, future: Py<PyAny>) -> PyResult<()> {
        let handle = core_handle()?;
        let client = self.client.clone();
        let completion = Completion {
            dispatcher: dispatch::get()?,
            target: Some((event_loop, future)),
        };
        handle.spawn(async move {
            let result = client.ready().await;
            completion.finish(Outcome::Topology(result));
        });
        Ok(())
    }

    /// Waits (GIL released, signals handled) for the first discovery round; returns the
    /// topology or raises.
    fn ready_blocking(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let client = self.client.clone();
        let topology = wait_interruptibly(py, async move { client.ready().await })?;
        Ok(convert::serialized(py, &topology)?.unbind())
    }

    /// The current topology snapshot as a dict; never waits.
    fn topology(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let t = self.client.topology().map_err(|e| to_pyerr(&e))?;
        Ok(convert::serialized(py, &t)?.unbind())
    }

    /// Closes the client; `future` completes when the core has closed it. No event callback
    /// runs after this call returns.
    fn close_async(
        &self,
        py: Python<'_>,
        event_loop: Py<PyAny>,
        future: Py<PyAny>,
    ) -> PyResult<()> {
        self.stop_callback(py);
        let handle = core_handle()?;
        let client = self.client.clone();
        let completion = Completion {
            dispatcher: dispatch::get()?,
            target: Some((event_loop, future)),
        };
        handle.spawn(async move {
            client.close().await;
            completion.finish(Outcome::Unit(Ok(())));
        });
        Ok(())
    }

    /// Closes the client and waits (GIL released) until it is closed. Idempotent.
    fn close_blocking(&self, py: Python<'_>) -> PyResult<()> {
        self.stop_callback(py);
        let client = self.client.clone();
        py.detach(|| runtime::block_on(async move { client.close().await }))
            .map_err(|e| to_pyerr(&e))
    }

    /// Subscribes an `asyncio.Queue` of `event_loop` to this client's events; `None` is put at
    /// the end of the stream (client closed).
    fn subscribe_async(&self, event_loop: Py<PyAny>, queue: Py<PyAny>) -> PyResult<Subscription> {
        let mut stream = self.client.events().map_err(|e| to_pyerr(&e))?;
        let handle = core_handle()?;
        let target = Arc::new(QueueTarget {
            event_loop,
            queue,
            active: AtomicBool::new(true),
        });
        let dispatcher = dispatch::get()?;
        let feeding = target.clone();
        let task = handle.spawn(async move {
            loop {
                let event = stream.next().await;
                if !feeding.active.load(Ordering::Acquire) {
                    break;
                }
                let end = event.is_none();
                dispatcher.push(Job::QueueEvent {
                    target: feeding.clone(),
                    event,
                });
                if end {
                    break;
                }
            }
        });
        Ok(Subscription {
            target,
            task: task.abort_handle(),
        })
    }

    /// A blocking iterator over this client's events.
    fn subscribe_blocking(&self) -> PyResult<EventIter> {
        let mut stream = self.client.events().map_err(|e| to_pyerr(&e))?;
        let handle = core_handle()?;
        let (tx, rx) = mpsc::channel::<Event>();
        let task = handle.spawn(async move {
            while let Some(event) = stream.next().await {
                if tx.send(event).is_err() {
                    break;
                }
            }
        });
        Ok(EventIter {
            rx: Mutex::new(Some(rx)),
            task: task.abort_handle(),
        })
    }

    /// Installs (or with `None` removes) a function called with each event as a dict, on the
    /// dispatcher thread (never on a core thread). When this returns, an earlier one is no
    /// longer called.
    #[pyo3(signature = (callback))]
    fn set_event_callback(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        let registration = callback.map(|cb| Arc::new(Registration::new(cb)));
        dispatch::get()?;
        let core_cb = registration.clone().map(|reg| {
            // The dispatcher of the process the event happens in (see `NativeClient`).
            Box::new(move |event: &Event| {
                if let Ok(dispatcher) = dispatch::get() {
                    dispatcher.push(Job::Callback {
                        registration: reg.clone(),
                        event: event.clone(),
                    })
                }
            }) as sentinel_recovery::EventCallback
        });
        let client = &self.client;
        py.detach(|| client.set_event_callback(core_cb))
            .map_err(|e| to_pyerr(&e))?;
        let old = std::mem::replace(
            &mut *self.callback.lock().unwrap_or_else(|e| e.into_inner()),
            registration,
        );
        if let Some(old) = old {
            old.deactivate(py);
        }
        Ok(())
    }

    /// Asks for a discovery round now.
    fn refresh(&self) -> PyResult<()> {
        self.client.refresh().map_err(|e| to_pyerr(&e))
    }

    /// Whether the client was closed.
    #[getter]
    fn closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Commands waiting for a usable node.
    #[getter]
    fn queued(&self) -> usize {
        self.client.queued()
    }

    /// The URL with passwords redacted.
    #[getter]
    fn url(&self) -> String {
        self.client.config().redacted_url()
    }
}

impl NativeClient {
    fn stop_callback(&self, py: Python<'_>) {
        let old = self
            .callback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(old) = old {
            let client = &self.client;
            let _ = py.detach(|| client.set_event_callback(None));
            old.deactivate(py);
        }
    }
}

/// How often a blocking wait wakes up to run Python's signal handlers (Ctrl-C).
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// Runs `work` on the core runtime and waits for its result with the GIL released, waking every
/// [`SIGNAL_CHECK_INTERVAL`] to run `Python::check_signals`. When a handler raises (Ctrl-C:
/// `KeyboardInterrupt`) the task is aborted, which drops the work in progress, and the exception
/// propagates. Refused on a core thread, as `runtime::block_on` is.
fn wait_interruptibly<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = sentinel_recovery::Result<T>> + Send + 'static,
{
    if runtime::on_core_thread() {
        return Err(to_pyerr(&sentinel_recovery::Error::config(
            "a blocking call was made on a core runtime thread; use the async API there",
        )));
    }
    let handle = core_handle()?;
    let (tx, rx) = mpsc::sync_channel(1);
    let task = handle.spawn(async move {
        let _ = tx.send(work.await);
    });
    // Aborts the task on every way out but a received result: a raised signal, or a panic.
    struct AbortOnDrop(Option<tokio::task::AbortHandle>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            if let Some(task) = self.0.take() {
                task.abort();
            }
        }
    }
    let mut guard = AbortOnDrop(Some(task.abort_handle()));
    drop(task);
    let mut rx = rx;
    loop {
        // The receiver goes into the GIL-free closure and back (it is Send, not Sync).
        let (got, back) = py.detach(move || (rx.recv_timeout(SIGNAL_CHECK_INTERVAL), rx));
        rx = back;
        match got {
            Ok(result) => {
                guard.0 = None;
                return result.map_err(|e| to_pyerr(&e));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(to_pyerr(&sentinel_recovery::Error::new(
                    sentinel_recovery::ErrorCode::Closed,
                    "the operation was abandoned (client closed or core stopped)",
                )))
            }
        }
    }
}

fn seconds(s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| {
        pyo3::exceptions::PyValueError::new_err("timeout must be a non-negative number of seconds")
    })
}

/// An asyncio event subscription; `cancel()` stops it.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct Subscription {
    target: Arc<QueueTarget>,
    task: tokio::task::AbortHandle,
}

#[pymethods]
impl Subscription {
    /// Stops the subscription: nothing more is put into its queue.
    fn cancel(&self) {
        self.target.active.store(false, Ordering::Release);
        self.task.abort();
    }
}

/// A blocking iterator over events (dicts); ends when the client is closed.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct EventIter {
    rx: Mutex<Option<mpsc::Receiver<Event>>>,
    task: tokio::task::AbortHandle,
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
        self.task.abort();
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
            let slice = Duration::from_millis(100);
            let step = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(slice),
                None => slice,
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
