//! Core errors as Python exceptions: the classes live in Python (`sentinel_recovery._errors`);
//! the native module only calls the factory registered at import with the stable code.

use std::sync::OnceLock;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use sentinel_recovery::Error;

/// `sentinel_recovery._errors.make_error(code, message, server_code)`, set once at import.
static FACTORY: OnceLock<Py<PyAny>> = OnceLock::new();

/// Registers the Python function that builds an exception instance from a code and a message.
pub fn set_factory(factory: Py<PyAny>) {
    // A second import of the module in the same process keeps the first factory.
    let _ = FACTORY.set(factory);
}

/// The exception instance for `error` (the matching subclass of `sentinel_recovery.Error`).
pub fn error_object<'py>(py: Python<'py>, error: &Error) -> Bound<'py, PyAny> {
    build(
        py,
        error.code().as_str(),
        error.message(),
        error.server_code(),
    )
}

/// An exception instance for a server error reply nested in an aggregate reply.
pub fn server_error_object<'py>(py: Python<'py>, reply: &str) -> Bound<'py, PyAny> {
    error_object(py, &Error::server(reply))
}

fn build<'py>(
    py: Python<'py>,
    code: &str,
    message: &str,
    server_code: Option<&str>,
) -> Bound<'py, PyAny> {
    let made = FACTORY
        .get()
        .ok_or_else(|| PyRuntimeError::new_err("sentinel_recovery error classes not registered"))
        .and_then(|f| f.bind(py).call1((code, message, server_code)));
    match made {
        Ok(obj) => obj,
        Err(e) => e.into_value(py).into_bound(py).into_any(),
    }
}

/// `error` as a `PyErr` to raise.
pub fn to_pyerr(error: &Error) -> PyErr {
    Python::attach(|py| PyErr::from_value(error_object(py, error)))
}
