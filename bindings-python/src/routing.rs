//! What the redis-py adapter asks a `NativeClient` for its own connections: where to connect
//! (`route_*`), whether a connection may still be used (`is_routable`, `is_fenced`, the routing
//! epoch), the report of an unusable node, and the connection settings of the URL.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use sentinel_recovery::host::Handle;
use sentinel_recovery::{Address, Route};

use crate::call::{call, Mode};
use crate::convert::call_timeout;
use crate::errors::to_pyerr;

/// The core's route for a connection that carries writes (`primary`) or reads.
pub(crate) fn route(primary: bool) -> Route {
    if primary {
        Route::Primary
    } else {
        Route::Read
    }
}

/// Waits for the node a connection of another library should go to: `(host, port)`.
pub(crate) fn route_to(
    py: Python<'_>,
    mode: Mode,
    handle: &Handle,
    primary: bool,
    timeout: Option<f64>,
) -> PyResult<Py<PyAny>> {
    let timeout = call_timeout(timeout)?;
    call(
        py,
        mode,
        |py, a: Address| Ok((a.host, a.port).into_pyobject(py)?.into_any().unbind()),
        |done| handle.route(route(primary), timeout, done),
    )
}

/// `PyBUF_READ` of CPython's `memoryobject.h` (stable ABI; pyo3 only exports it without abi3).
const PY_BUF_READ: std::ffi::c_int = 0x100;

/// A read-only 8-byte memoryview over the core's routing counter (see `Handle::routing_epoch`).
pub(crate) fn routing_epoch_view<'py>(
    py: Python<'py>,
    handle: &Handle,
) -> PyResult<Bound<'py, PyAny>> {
    let epoch = handle.routing_epoch().map_err(|e| to_pyerr(&e))?;
    let counter = kept_for_process(epoch);
    // SAFETY: `counter` points at 8 bytes that stay allocated for the rest of the process
    // (`kept_for_process`); the view only reads them.
    unsafe {
        let view = pyo3::ffi::PyMemoryView_FromMemory(counter.cast_mut().cast(), 8, PY_BUF_READ);
        Bound::from_owned_ptr_or_err(py, view)
    }
}

/// The address of `counter`, kept allocated for the rest of the process: a memoryview has no
/// owner to keep it alive, and the monitor that writes it may be dropped first. Each counter is
/// kept once however often it is asked for (one per monitor the process opens).
fn kept_for_process(counter: Arc<AtomicU64>) -> *const AtomicU64 {
    static KEPT: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    let address = Arc::as_ptr(&counter);
    let mut kept = KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !kept.contains(&(address as usize)) {
        kept.push(address as usize);
        std::mem::forget(counter);
    }
    address
}

/// The data-node credential, `db`, `client_name`, `data_tls` and the timeouts in seconds.
pub(crate) fn connection_settings<'py>(
    py: Python<'py>,
    handle: &Handle,
) -> PyResult<Bound<'py, PyDict>> {
    let config = handle.config().map_err(|e| to_pyerr(&e))?;
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
