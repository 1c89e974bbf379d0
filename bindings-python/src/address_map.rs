//! `address_map`'s function form in Python: a callable `(address) -> address | None`, like
//! ioredis' `natMap`.
//!
//! The core asks it on a core thread for every address a sentinel reports, so this is the one
//! place a core thread takes the GIL: for the duration of the call. The callable must be quick
//! (a dict lookup) and must not block. An exception in it, or an answer that is not an address,
//! is logged (logger `sentinel_recovery`) and the reported address is used.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use sentinel_recovery::config::AddressMapFn;
use sentinel_recovery::Address;

/// The core's form of a Python callable.
pub fn map_fn(callable: Py<PyAny>) -> Arc<AddressMapFn> {
    Arc::new(move |reported: &Address| {
        Python::attach(|py| match call(py, &callable, reported) {
            Ok(mapped) => mapped,
            Err(e) => {
                tracing::warn!(address = %reported, error = %e,
                    "address_map function raised; using the reported address");
                None
            }
        })
    })
}

fn call(py: Python<'_>, callable: &Py<PyAny>, reported: &Address) -> PyResult<Option<Address>> {
    let arg = PyDict::new(py);
    arg.set_item("host", &reported.host)?;
    arg.set_item("port", reported.port)?;
    let answer = callable.call1(py, (arg,))?.into_bound(py);
    if answer.is_none() {
        return Ok(None);
    }
    let (host, port): (String, u16) = if let Ok(d) = answer.cast::<PyDict>() {
        let host = d.get_item("host")?;
        let port = d.get_item("port")?;
        match (host, port) {
            (Some(h), Some(p)) => (h.extract()?, p.extract()?),
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "the returned dict needs 'host' and 'port'",
                ))
            }
        }
    } else if let Ok(t) = answer.cast::<PyTuple>() {
        t.extract()?
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "return None, {'host': ..., 'port': ...} or (host, port)",
        ));
    };
    Ok(Some(Address::new(host, port)))
}
