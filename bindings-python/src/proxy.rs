//! `NativeProxy`: the core's fencing proxy ([`HostProxy`]) as the Python layer's
//! `sentinel_recovery.Proxy` wraps it.
//!
//! Starting converts the options to `(key, text)` pairs and returns once the proxy listens
//! (discovery runs on core threads). Every behaviour (which key goes to the proxy and which to the
//! client, the option rules and their errors, the fence, the close with its grace) is the core's.
//! Closing uses the core's callback form: `close_async` returns an awaitable like the client's
//! close ([`crate::awaitable::start_close`]); `close_blocking` waits for the same callback with
//! the GIL released, handling signals.

use std::sync::mpsc;
use std::time::Duration;

use pyo3::prelude::*;
use sentinel_recovery::host::HostProxy;

use crate::awaitable::start_close;
use crate::blocking::SIGNAL_CHECK_INTERVAL;
use crate::convert::{self, seconds};
use crate::errors::to_pyerr;
use crate::{dispatch, logging};

/// The native proxy. Not meant to be used directly: see `sentinel_recovery.Proxy`.
#[pyclass(frozen, module = "sentinel_recovery._native")]
pub struct NativeProxy {
    proxy: HostProxy,
}

impl NativeProxy {
    fn grace(grace: Option<f64>) -> PyResult<Option<Duration>> {
        grace.map(seconds).transpose()
    }
}

#[pymethods]
impl NativeProxy {
    /// Parses `url`, applies `options` (key, value-as-string pairs: a proxy key to the proxy, any
    /// other to the client, as the URL's query) and starts the proxy; returns once it accepts
    /// connections, without waiting for discovery. Raises `ConfigError` naming a bad key.
    #[staticmethod]
    fn start(py: Python<'_>, url: &str, options: Vec<(String, String)>) -> PyResult<NativeProxy> {
        logging::refresh_threshold(py);
        dispatch::get()?; // started now, so a failure to start it shows here
        let url = url.to_owned();
        let proxy = py
            .detach(move || HostProxy::start(&url, &options))
            .map_err(|e| to_pyerr(&e))?;
        Ok(NativeProxy { proxy })
    }

    /// Where the proxy listens: `IP:PORT` or `unix:PATH`.
    #[getter]
    fn address(&self) -> String {
        self.proxy.address().to_string()
    }

    /// The listening IP (without brackets for IPv6), or `None` on a Unix socket.
    #[getter]
    fn host(&self) -> Option<String> {
        self.proxy.address().host()
    }

    /// The listening port, or `None` on a Unix socket.
    #[getter]
    fn port(&self) -> Option<u16> {
        self.proxy.address().port()
    }

    /// The Unix socket's path, or `None` on TCP.
    #[getter]
    fn path(&self) -> Option<std::ffi::OsString> {
        self.proxy
            .address()
            .path()
            .map(|p| p.as_os_str().to_owned())
    }

    /// The proxy's counters as a dict; `ClosedError` once closed.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let stats = self.proxy.stats().map_err(|e| to_pyerr(&e))?;
        Ok(convert::serialized(py, &stats)?.unbind())
    }

    /// Whether the proxy was closed (or is closing).
    #[getter]
    fn closed(&self) -> bool {
        self.proxy.stats().is_err()
    }

    /// Closes the proxy (stops accepting, lets replies in flight finish within `grace` seconds,
    /// default 5, then closes every session and the proxy's client); awaited for `None` when
    /// that is done. Idempotent.
    #[pyo3(signature = (grace=None))]
    fn close_async(&self, py: Python<'_>, grace: Option<f64>) -> PyResult<Py<PyAny>> {
        let grace = Self::grace(grace)?;
        start_close(py, |done| self.proxy.close(grace, done))
    }

    /// Closes the proxy and waits (GIL released) until it is closed. Signals are handled while
    /// it waits: Ctrl-C raises `KeyboardInterrupt` and the close goes on in the background.
    /// Refused on a core thread (it would wait for itself). Idempotent.
    #[pyo3(signature = (grace=None))]
    fn close_blocking(&self, py: Python<'_>, grace: Option<f64>) -> PyResult<()> {
        let grace = Self::grace(grace)?;
        sentinel_recovery::runtime::refuse_blocking_on_core_thread().map_err(|e| to_pyerr(&e))?;
        let (tx, rx) = mpsc::channel::<()>();
        self.proxy.close(
            grace,
            Box::new(move || {
                let _ = tx.send(());
            }),
        );
        // A Mutex only because a receiver borrowed by the GIL-free closure must be Sync.
        let rx = std::sync::Mutex::new(rx);
        loop {
            let got = py.detach(|| {
                rx.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .recv_timeout(SIGNAL_CHECK_INTERVAL)
            });
            match got {
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                Err(mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            }
        }
    }
}
