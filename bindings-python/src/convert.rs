//! Conversions between Python objects and the core's values. Nothing here decides behaviour.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PySet, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use sentinel_recovery::Value;

use crate::errors;

/// Command arguments: `bytes`, `bytearray`, `memoryview` and `str` (UTF-8) as they are; `int` and
/// `float` as their decimal text. Anything else (including `bool` and `None`) is a `TypeError`,
/// so a forgotten conversion never reaches the server as `"None"`.
pub fn args(args: &Bound<'_, PyTuple>) -> PyResult<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(args.len());
    for (i, item) in args.iter().enumerate() {
        out.push(arg(i, &item)?);
    }
    Ok(out)
}

fn arg(index: usize, item: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = item.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = item.cast::<PyString>() {
        return Ok(s.to_cow()?.into_owned().into_bytes());
    }
    if item.is_instance_of::<pyo3::types::PyBool>() {
        return Err(type_error(index, item));
    }
    if item.is_instance_of::<PyInt>() {
        let n: i128 = item.extract()?;
        return Ok(n.to_string().into_bytes());
    }
    if let Ok(f) = item.cast::<PyFloat>() {
        return Ok(f.str()?.to_cow()?.into_owned().into_bytes());
    }
    if let Ok(b) = item.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if item.get_type().name()?.to_cow()? == "memoryview" {
        let b = item.call_method0("tobytes")?;
        return Ok(b.cast::<PyBytes>()?.as_bytes().to_vec());
    }
    Err(type_error(index, item))
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
