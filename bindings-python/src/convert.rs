//! Conversions between Python objects and the core's values. Nothing here decides behaviour.

use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyUnicodeEncodeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PySet, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use sentinel_recovery::arguments::float_text;
use sentinel_recovery::deadline::{optional_call_timeout, Unit};
use sentinel_recovery::Value;

use crate::errors;

/// Command arguments, converted by [`args`]: `bytes` are borrowed (the tuple keeps them alive and
/// they are immutable), everything else is copied once.
pub struct Args<'py> {
    parts: Vec<Part<'py>>,
}

enum Part<'py> {
    Bytes(Bound<'py, PyBytes>),
    Owned(Vec<u8>),
}

impl Args<'_> {
    /// The arguments as byte slices, for the core (which checks their sizes before copying).
    pub fn slices(&self) -> Vec<&[u8]> {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Bytes(b) => b.as_bytes(),
                Part::Owned(v) => v.as_slice(),
            })
            .collect()
    }
}

/// Command arguments: `bytes`, `bytearray`, `memoryview` as they are; `str` as UTF-8; `int` as
/// its decimal text; `float` as its shortest round-trip text (`sentinel_recovery::arguments`). Anything else
/// (including `bool` and `None`) is a `TypeError`, so a forgotten conversion never reaches the
/// server as `"None"`. The policy shared by every binding: a NaN, or a `str` holding a lone
/// surrogate, is refused with a `ConfigError` naming the argument (0 is the command's name) rather
/// than sent as `"nan"` or with U+FFFD in its place.
pub fn args<'py>(args: &Bound<'py, PyTuple>) -> PyResult<Args<'py>> {
    let mut parts = Vec::with_capacity(args.len());
    for (i, item) in args.iter().enumerate() {
        parts.push(arg(i, item)?);
    }
    Ok(Args { parts })
}

fn arg<'py>(index: usize, item: Bound<'py, PyAny>) -> PyResult<Part<'py>> {
    if let Ok(b) = item.cast::<PyBytes>() {
        return Ok(Part::Bytes(b.clone()));
    }
    let py = item.py();
    if let Ok(s) = item.cast::<PyString>() {
        return match s.to_cow() {
            Ok(text) => Ok(Part::Owned(text.into_owned().into_bytes())),
            // A Python str holds code points, not UTF-16: any surrogate in it is a lone one.
            Err(e) if e.is_instance_of::<PyUnicodeEncodeError>(py) => Err(config_error(format!(
                "argument {index} is not valid Unicode: lone surrogate"
            ))),
            Err(e) => Err(e),
        };
    }
    if item.is_instance_of::<pyo3::types::PyBool>() {
        return Err(type_error(index, &item));
    }
    if item.is_instance_of::<PyInt>() {
        if let Ok(n) = item.extract::<i128>() {
            return Ok(Part::Owned(n.to_string().into_bytes()));
        }
        // Wider than 128 bits: Python's own decimal text (int.__repr__, whatever the subclass).
        let text = py.get_type::<PyInt>().call_method1("__repr__", (&item,))?;
        return Ok(Part::Owned(
            text.cast::<PyString>()?.to_cow()?.into_owned().into_bytes(),
        ));
    }
    if let Ok(f) = item.cast::<PyFloat>() {
        return float_text(f.value(), index)
            .map(|text| Part::Owned(text.into_bytes()))
            .map_err(|e| errors::to_pyerr(&e));
    }
    if let Ok(b) = item.cast::<PyByteArray>() {
        return Ok(Part::Owned(b.to_vec()));
    }
    if item.get_type().name()?.to_cow()? == "memoryview" {
        let b = item.call_method0("tobytes")?;
        return Ok(Part::Owned(b.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    Err(type_error(index, &item))
}

fn config_error(message: String) -> PyErr {
    errors::to_pyerr(&sentinel_recovery::Error::config(message))
}

fn type_error(index: usize, item: &Bound<'_, PyAny>) -> PyErr {
    let name = item
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!(
        "argument {index}: expected bytes, str, int or float, got {name}"
    ))
}

/// A reply as Python: `None`, `int`, `float`, `bool`, `bytes` (or `str` when `decode`), `list`,
/// `dict`, `set`; a nested error reply becomes a `sentinel_recovery.ServerError` instance.
pub fn value<'py>(py: Python<'py>, v: Value, decode: bool) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Nil => py.None().into_bound(py),
        Value::Int(i) => i.into_bound_py_any(py)?,
        Value::Double(d) => d.into_bound_py_any(py)?,
        Value::Boolean(b) => b.into_bound_py_any(py)?,
        Value::BigNumber(b) => {
            let text = String::from_utf8_lossy(&b).into_owned();
            py.get_type::<PyInt>().call1((text,))?
        }
        Value::Bulk(b) => text(py, &b, decode),
        Value::Simple(s) => text(py, s.as_bytes(), decode),
        Value::Verbatim { text: t, .. } => text(py, &t, decode),
        Value::Array(items) | Value::Push(items) => list(py, items, decode)?.into_any(),
        Value::Set(items) => {
            let l = list(py, items, decode)?;
            // Elements that can't be hashed (nested lists) keep the list form.
            match PySet::new(py, l.iter()) {
                Ok(s) => s.into_any(),
                Err(_) => l.into_any(),
            }
        }
        Value::Map(pairs) => {
            let d = PyDict::new(py);
            let mut unhashable = false;
            let mut converted = Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                let k = value(py, k, decode)?;
                let v = value(py, v, decode)?;
                if !unhashable && d.set_item(&k, &v).is_err() {
                    unhashable = true;
                }
                converted.push((k, v));
            }
            if unhashable {
                let pairs: Vec<Bound<'py, PyTuple>> = converted
                    .into_iter()
                    .map(|(k, v)| PyTuple::new(py, [k, v]))
                    .collect::<PyResult<_>>()?;
                PyList::new(py, pairs)?.into_any()
            } else {
                d.into_any()
            }
        }
        Value::Error(message) => errors::server_error_object(py, &message),
    })
}

fn list<'py>(py: Python<'py>, items: Vec<Value>, decode: bool) -> PyResult<Bound<'py, PyList>> {
    let items: Vec<Bound<'py, PyAny>> = items
        .into_iter()
        .map(|v| value(py, v, decode))
        .collect::<PyResult<_>>()?;
    PyList::new(py, items)
}

/// `bytes`, or `str` when `decode` and the bytes are UTF-8 (invalid UTF-8 stays `bytes` rather
/// than failing the whole reply).
fn text<'py>(py: Python<'py>, b: &[u8], decode: bool) -> Bound<'py, PyAny> {
    if decode {
        if let Ok(s) = std::str::from_utf8(b) {
            return PyString::new(py, s).into_any();
        }
    }
    PyBytes::new(py, b).into_any()
}

/// Any serializable core type (topology, event) as plain Python dicts and lists, the same shape
/// the CLI prints as JSON.
pub fn serialized<'py, T: serde::Serialize>(py: Python<'py>, t: &T) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_value(t)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    json_value(py, &json)
}

fn json_value<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => py.None().into_bound(py),
        J::Bool(b) => b.into_bound_py_any(py)?,
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_bound_py_any(py)?
            } else if let Some(u) = n.as_u64() {
                u.into_bound_py_any(py)?
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py)?
            }
        }
        J::String(s) => PyString::new(py, s).into_any(),
        J::Array(items) => {
            let items: Vec<_> = items
                .iter()
                .map(|i| json_value(py, i))
                .collect::<PyResult<_>>()?;
            PyList::new(py, items)?.into_any()
        }
        J::Object(map) => {
            let d = PyDict::new(py);
            for (k, v) in map {
                d.set_item(k, json_value(py, v)?)?;
            }
            d.into_any()
        }
    })
}

/// A call's own timeout in seconds, under the rule every language shares
/// (`sentinel_recovery::deadline`): `None` is the client's default; 0, negative, NaN, infinite
/// and too large values raise `ConfigError` naming the value.
pub fn call_timeout(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    optional_call_timeout(timeout, Unit::Seconds).map_err(|e| errors::to_pyerr(&e))
}

/// A wait in seconds (for an event, a proxy's grace) as a duration; a negative or non-finite
/// one is refused.
pub fn seconds(s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| PyValueError::new_err("timeout must be a non-negative number of seconds"))
}
