//! The diagnosis of `sentinel-recovery doctor` as an API: the host layer's doctor operation,
//! awaited like every other call of this crate.

use std::collections::HashMap;

use sentinel_recovery::doctor::Options;
use sentinel_recovery::host;

use crate::codes::SentinelError;
use crate::completion::Completion;
use crate::model::TimeoutUnit;

/// A diagnosis: the report in the documented JSON schema, its text form and its verdict.
#[derive(uniffi::Record)]
pub struct DoctorReport {
    /// The report as JSON (schema in the Rust documentation of `sentinel_recovery::doctor`); no
    /// secret.
    pub json: String,
    /// What `sentinel-recovery doctor` prints.
    pub text: String,
    /// `"healthy"`, `"warning"` or `"failure"`.
    pub status: String,
    /// The verdict as the CLI's exit code: 0 healthy, 1 warnings, 2 failures.
    pub exit_code: u8,
}

/// Diagnoses the deployment of `url` with a client's options (the URL's query keys), on the
/// core's threads. `watch` (in `unit`; `None` for no sampling) samples a PING every 100 ms per
/// sentinel for that long; `pings` (`None` for 10) sets the PINGs per sentinel; out of range
/// (the rule every binding keeps) they fail with `config` naming the option. Fails only for an
/// unusable URL or option (`config`); everything the deployment does wrong is in the report.
/// Cancelling the call (dropping its future) stops the diagnosis.
#[uniffi::export]
pub async fn doctor(
    url: String,
    options: HashMap<String, String>,
    watch: Option<f64>,
    pings: Option<f64>,
    unit: TimeoutUnit,
) -> Result<DoctorReport, SentinelError> {
    let how = Options::from_host(watch, unit.into(), pings).map_err(|e| SentinelError::from(&e))?;
    let mut options: Vec<(String, String)> = options.into_iter().collect();
    options.sort();
    let config = host::config_from_url(&url, &options).map_err(|e| SentinelError::from(&e))?;
    let diagnosis = Completion::start(|done| host::doctor(config, how, done))
        .await
        .map_err(|e| SentinelError::from(&e))?;
    Ok(DoctorReport {
        json: diagnosis.json,
        text: diagnosis.text,
        status: diagnosis.status.to_string(),
        exit_code: diagnosis.exit_code,
    })
}
