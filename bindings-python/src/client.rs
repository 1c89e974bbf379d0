//! `NativeClient`: the core's host [`Handle`] as the Python layer's `Client` and
//! `BlockingClient` see it. This file is the class (its methods as Python sees them) and its
//! lifecycle (open, close, state); each method's work is in the module of its concern:
//! [`crate::commands`], [`crate::transactions`], [`crate::routing`], [`crate::events`].
//!
//! Each operation comes twice: `*_async` returns an awaitable (see [`crate::awaitable`]),
//! `*_blocking` waits with the GIL released (see [`crate::blocking`]).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use sentinel_recovery::host::Handle;
use sentinel_recovery::Address;

use crate::awaitable::start_close;
use crate::call::Mode;
use crate::errors::to_pyerr;
use crate::events::{self, CallbackSlot, EventIter, Subscription};
use crate::routing::{self, route};
use crate::transactions;
use crate::{commands, convert, dispatch, logging};

/// The native client. Not meant to be used directly: see `sentinel_recovery.Client` and
/// `sentinel_recovery.BlockingClient`.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct NativeClient {
    pub(crate) handle: Handle,
    pub(crate) decode: bool,
    /// The URL with passwords redacted, kept for `repr` after close.
    url: String,
    /// The `BlockingClient.on_event` function now installed.
    callback: CallbackSlot,
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
        handle.set_api_names(&transactions::PYTHON_API);
        let url = handle
            .config()
            .map(|c| c.redacted_url())
            .map_err(|e| to_pyerr(&e))?;
        Ok(NativeClient {
            handle,
            decode,
            url,
            callback: CallbackSlot::default(),
        })
    }

    /// Starts a command; awaited for the reply (or its exception). `timeout` (seconds) replaces
    /// the `command_timeout_ms` option for this call.
    #[pyo3(signature = (args, timeout=None))]
    fn execute_async(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        commands::execute(py, Mode::Await, &self.handle, self.decode, args, timeout)
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
        commands::execute(py, Mode::Block, &self.handle, self.decode, args, timeout)
    }

    /// For the test suite only: an operation whose work panics on a core thread; awaiting it
    /// raises `InternalError`, once, and the client goes on.
    fn panic_for_test(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        commands::panic_for_test(py, &self.handle, self.decode)
    }

    /// Starts commands back to back; awaited for a list with each reply, or the exception of
    /// that command's error in its place. `timeout` (seconds) is the whole pipeline's deadline.
    #[pyo3(signature = (commands, timeout=None))]
    fn pipeline_async(
        &self,
        py: Python<'_>,
        commands: Vec<Bound<'_, PyTuple>>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        commands::pipeline(
            py,
            Mode::Await,
            &self.handle,
            self.decode,
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
        commands::pipeline(
            py,
            Mode::Block,
            &self.handle,
            self.decode,
            commands,
            timeout,
        )
    }

    /// MULTI/EXEC of `commands` after `WATCH watch...` (when not empty) on a dedicated
    /// connection to the primary; awaited for the replies, or `None` when a watched key
    /// changed. `timeout` (seconds) is the whole transaction's deadline, until EXEC's reply.
    #[pyo3(signature = (commands, watch, timeout=None))]
    fn transaction_async(
        &self,
        py: Python<'_>,
        commands: Vec<Bound<'_, PyTuple>>,
        watch: &Bound<'_, PyTuple>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        transactions::transaction(
            py,
            Mode::Await,
            &self.handle,
            self.decode,
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
        transactions::transaction(
            py,
            Mode::Block,
            &self.handle,
            self.decode,
            commands,
            watch,
            timeout,
        )
    }

    /// Begins a transaction on a dedicated connection to the primary; awaited for the
    /// `NativeTransaction`. `timeout` (seconds) bounds the whole transaction, from now until
    /// its EXEC completes; each step only has the time left.
    #[pyo3(signature = (timeout=None))]
    fn begin_transaction_async(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        transactions::begin(py, Mode::Await, &self.handle, self.decode, timeout)
    }

    /// Begins a transaction and waits for its connection; `timeout` as for
    /// [`NativeClient::begin_transaction_async`].
    #[pyo3(signature = (timeout=None))]
    fn begin_transaction_blocking(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        transactions::begin(py, Mode::Block, &self.handle, self.decode, timeout)
    }

    /// Awaited for the topology once a verified primary is known, or the error of discovery.
    fn ready_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        commands::ready(py, Mode::Await, &self.handle)
    }

    /// Waits (GIL released, signals handled) for a verified primary; returns the topology or
    /// raises.
    fn ready_blocking(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        commands::ready(py, Mode::Block, &self.handle)
    }

    /// Starts waiting for the node a connection of another library should go to (`primary`:
    /// writes, else reads under `read_from`); awaited for `(host, port)`. `timeout` (seconds)
    /// replaces `command_timeout_ms`.
    #[pyo3(signature = (primary, timeout=None))]
    fn route_async(
        &self,
        py: Python<'_>,
        primary: bool,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        routing::route_to(py, Mode::Await, &self.handle, primary, timeout)
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
    ) -> PyResult<Py<PyAny>> {
        routing::route_to(py, Mode::Block, &self.handle, primary, timeout)
    }

    /// Whether a connection to `host:port` may still carry writes (`primary`) or reads; never
    /// waits. False once a failover starts demoting the node.
    fn is_routable(&self, host: String, port: u16, primary: bool) -> bool {
        self.handle
            .is_routable(&Address::new(host, port), route(primary))
    }

    /// Whether a failover is demoting, or has replaced, `host:port`; never waits.
    fn is_fenced(&self, host: String, port: u16) -> bool {
        self.handle.is_fenced(&Address::new(host, port))
    }

    /// A read-only 8-byte memoryview over the core's routing counter (a native-endian u64; see
    /// `Handle::routing_epoch`): it changes whenever `is_routable` / `is_fenced` may answer
    /// differently, so the redis-py adapter keeps a verdict while it reads the same instead of
    /// calling in for every command. A forked child's core uses a counter of its own: ask again
    /// after a fork.
    fn routing_epoch_view<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        routing::routing_epoch_view(py, &self.handle)
    }

    /// Reports that a connection to `host:port` could not be opened or found the wrong role.
    fn report_unusable(&self, host: String, port: u16) -> PyResult<()> {
        self.handle
            .report_unusable(&Address::new(host, port))
            .map_err(|e| to_pyerr(&e))
    }

    /// What a connection opened by another library (the redis-py adapter) needs from the URL,
    /// so that the adapter parses no URL itself: the data-node credential (`username`,
    /// `password`; for sending to the node only, never for logs), `db`, `client_name`,
    /// `data_tls`, and `command_timeout` / `connect_timeout` in seconds.
    fn connection_settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        routing::connection_settings(py, &self.handle)
    }

    /// The current topology snapshot as a dict; never waits.
    fn topology(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let t = self.handle.topology().map_err(|e| to_pyerr(&e))?;
        Ok(convert::serialized(py, &t)?.unbind())
    }

    /// Feeds this client's events to an `asyncio.Queue` of `event_loop`; `None` is put at the
    /// end (the client closed, or the subscription was cancelled).
    fn subscribe_async(&self, event_loop: Py<PyAny>, queue: Py<PyAny>) -> PyResult<Subscription> {
        events::subscribe_async(&self.handle, event_loop, queue)
    }

    /// A blocking iterator over this client's events.
    fn subscribe_blocking(&self) -> PyResult<EventIter> {
        events::subscribe_blocking(&self.handle)
    }

    /// Installs (or with `None` removes) a function called with each event as a dict, on the
    /// dispatcher thread (never on a core thread). When this returns, an earlier one is no
    /// longer called (unless this is called from inside it: then its current call finishes).
    #[pyo3(signature = (callback))]
    fn set_event_callback(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        self.callback.set(py, &self.handle, callback)
    }

    /// Asks for a discovery round now.
    fn refresh(&self) -> PyResult<()> {
        self.handle.refresh().map_err(|e| to_pyerr(&e))
    }

    /// Closes the client; every operation in flight completes with `ClosedError`, then the
    /// returned awaitable does. Idempotent.
    fn close_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.callback.take();
        start_close(py, |done| self.handle.close(done))
    }

    /// Closes the client and waits (GIL released) until it is closed: every operation in flight
    /// has completed (with `ClosedError`) and no event callback runs any more. Idempotent.
    fn close_blocking(&self, py: Python<'_>) {
        let callback = self.callback.take();
        let handle = &self.handle;
        py.detach(|| {
            handle.close_blocking();
            if let Some(callback) = callback {
                callback.remove();
            }
        });
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

    /// The URL with passwords redacted.
    #[getter]
    fn url(&self) -> String {
        self.url.clone()
    }
}
