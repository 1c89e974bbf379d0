//! `doctor`: the host layer's diagnosis for `sentinel_recovery.doctor()` (asyncio) and
//! `doctor_blocking()`. A report reaches Python as `(json, text, status, exit_code)`; the Python
//! layer parses the JSON into its typed `DoctorReport`.

use pyo3::prelude::*;
use sentinel_recovery::deadline::Unit;
use sentinel_recovery::host::{self, Diagnosis};
use sentinel_recovery::Config;

use crate::call::{call, Mode};
use crate::errors::to_pyerr;
use crate::{address_map, logging};

fn prepare(
    py: Python<'_>,
    url: &str,
    options: Vec<(String, String)>,
    watch: Option<f64>,
    pings: Option<f64>,
    map: Option<Py<PyAny>>,
) -> PyResult<(Config, sentinel_recovery::doctor::Options)> {
    logging::refresh_threshold(py);
    let mut config = host::config_from_url(url, &options).map_err(|e| to_pyerr(&e))?;
    if let Some(map) = map {
        config
            .address_map
            .set_function(Some(address_map::map_fn(map)));
    }
    let how = sentinel_recovery::doctor::Options::from_host(watch, Unit::Seconds, pings)
        .map_err(|e| to_pyerr(&e))?;
    Ok((config, how))
}

/// Starts a diagnosis; awaited for `(json, text, status, exit_code)` or the exception that
/// prevented a diagnosis.
#[pyfunction]
#[pyo3(signature = (url, options, watch=None, pings=None, address_map=None))]
pub fn doctor_async(
    py: Python<'_>,
    url: &str,
    options: Vec<(String, String)>,
    watch: Option<f64>,
    pings: Option<f64>,
    address_map: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let (config, how) = prepare(py, url, options, watch, pings, address_map)?;
    diagnose(py, Mode::Await, config, how)
}

/// Diagnoses and waits with the GIL released (signals handled); returns `(json, text, status,
/// exit_code)`.
#[pyfunction]
#[pyo3(signature = (url, options, watch=None, pings=None, address_map=None))]
pub fn doctor_blocking(
    py: Python<'_>,
    url: &str,
    options: Vec<(String, String)>,
    watch: Option<f64>,
    pings: Option<f64>,
    address_map: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let (config, how) = prepare(py, url, options, watch, pings, address_map)?;
    diagnose(py, Mode::Block, config, how)
}

fn diagnose(
    py: Python<'_>,
    mode: Mode,
    config: Config,
    how: sentinel_recovery::doctor::Options,
) -> PyResult<Py<PyAny>> {
    call(
        py,
        mode,
        |py, d: Diagnosis| {
            Ok((d.json, d.text, d.status, d.exit_code)
                .into_pyobject(py)?
                .into_any()
                .unbind())
        },
        |done| host::doctor(config, how, done),
    )
}
