//! The diagnosis of `sentinel-recovery doctor` as an API: the host layer's doctor operation,
//! awaited like every other call of this crate.

use std::collections::HashMap;

use sentinel_recovery::doctor::Options;
use sentinel_recovery::host;

use crate::codes::SentinelError;
use crate::completion::Completion;

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
/// core's threads. Fails only for an unusable URL or option (`config`); everything the
/// deployment does wrong is in the report.
#[uniffi::export]
pub async fn doctor(
    url: String,
    options: HashMap<String, String>,
) -> Result<DoctorReport, SentinelError> {
    let mut options: Vec<(String, String)> = options.into_iter().collect();
    options.sort();
    let config = host::config_from_url(&url, &options).map_err(|e| SentinelError::from(&e))?;
    let diagnosis = Completion::start(|done| host::doctor(config, Options::default(), done))
        .await
        .map_err(|e| SentinelError::from(&e))?;
    Ok(DoctorReport {
        json: diagnosis.json,
        text: diagnosis.text,
        status: diagnosis.status.to_string(),
        exit_code: diagnosis.exit_code,
    })
}
