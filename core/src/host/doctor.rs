//! The doctor as a host operation: what `sr_doctor`, Python's and Node's `doctor()` and .NET's
//! `SentinelDoctor.RunAsync` stand on, with the same guarantees as every [`super::Handle`]
//! operation (the completion runs exactly once, on a core thread; a panic is `internal`; the
//! core runtime stopping first is `closed`; [`Operation::cancel`] completes it with `closed`).

use std::sync::Arc;

use super::guard::guarded;
use super::inflight::{Done, Operation, Registry};
use super::wait;
use crate::config::Config;
use crate::doctor::{self, Report, Setup, Status};
use crate::error::{Error, Result};

/// A finished diagnosis in the forms a binding hands to its host.
#[derive(Clone, Debug)]
pub struct Diagnosis {
    /// The report as JSON, in the schema documented in [`crate::doctor::report`]. No secret.
    pub json: String,
    /// The human form (what `sentinel-recovery doctor` prints).
    pub text: String,
    /// The verdict: `"healthy"`, `"warning"` or `"failure"`.
    pub status: &'static str,
    /// The verdict as the CLI's exit code: 0 healthy, 1 warnings, 2 failures.
    pub exit_code: u8,
}

impl From<&Report> for Diagnosis {
    fn from(report: &Report) -> Diagnosis {
        Diagnosis {
            json: report.to_json(),
            text: report.to_text(),
            status: match report.verdict.status {
                Status::Healthy => "healthy",
                Status::Warning => "warning",
                Status::Failure => "failure",
            },
            exit_code: report.exit_code(),
        }
    }
}

/// The configuration of `url` with `options` applied, each through [`Config::set`] (what
/// [`super::Handle::open_url`] opens), checked as a whole.
pub fn config_from_url<K: AsRef<str>, V: AsRef<str>>(
    url: &str,
    options: &[(K, V)],
) -> Result<Config> {
    guarded(|| {
        let mut config = Config::from_url(url)?;
        for (key, value) in options {
            config.set(key.as_ref(), value.as_ref())?;
        }
        config.validate()?;
        Ok(config)
    })
}

/// Diagnoses the deployment `config` describes (see [`crate::doctor`]) and completes `done` with
/// the report. Returns at once: reading the resolver configuration and TLS files happens on a
/// blocking-pool thread, the probing on core threads. Fails only on what prevents a diagnosis
/// (an invalid configuration, unreadable TLS files); every problem of the deployment is in the
/// report.
pub fn doctor(config: Config, options: doctor::Options, done: Done<Diagnosis>) -> Operation {
    let registry = Arc::new(Registry::default());
    let work = async move {
        config.validate()?;
        let for_setup = config.clone();
        let setup = tokio::task::spawn_blocking(move || Setup::from_config(&for_setup))
            .await
            .map_err(|e| match e.try_into_panic() {
                Ok(panic) => Error::internal(&*panic),
                Err(_) => Error::closed(),
            })??;
        let report = doctor::diagnose(config, setup, options).await;
        Ok(Diagnosis::from(&report))
    };
    registry.spawn(work, done)
}

/// [`doctor()`] for host threads: blocks the calling thread (and only it) until the report is
/// ready. Refused (`config`) on a core thread.
pub fn doctor_blocking(config: Config, options: doctor::Options) -> Result<Diagnosis> {
    wait::block(|done| doctor(config, options, done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    fn nothing_listens() -> String {
        // A port that was free a moment ago: connects are refused at once.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("redis+sentinel://127.0.0.1:{port}/svc")
    }

    fn quick() -> doctor::Options {
        doctor::Options {
            reply_timeout: Some(Duration::from_millis(300)),
            ..doctor::Options::default()
        }
    }

    #[test]
    fn an_unreachable_sentinel_is_a_failure_report_in_both_forms() {
        let config = config_from_url(&nothing_listens(), &[("connect_timeout_ms", "300")]).unwrap();
        let blocking = doctor_blocking(config.clone(), quick()).unwrap();
        assert_eq!((blocking.status, blocking.exit_code), ("failure", 2));
        let json: serde_json::Value = serde_json::from_str(&blocking.json).unwrap();
        assert_eq!(json["schema"], 1);
        assert_eq!(json["verdict"]["exit_code"], 2);
        assert!(blocking.text.contains("svc"));

        let (tx, rx) = std::sync::mpsc::channel();
        let _op = doctor(
            config,
            quick(),
            Box::new(move |r| {
                tx.send((r.map(|d| d.exit_code), crate::runtime::on_core_thread()))
                    .unwrap()
            }),
        );
        let (result, on_core) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(result.unwrap(), 2);
        assert!(on_core, "completions run on a core thread");
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "once");
    }

    #[test]
    fn bad_options_are_config_errors_naming_the_key() {
        let e =
            config_from_url("redis+sentinel://127.0.0.1/svc", &[("address_map", "x")]).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.message().contains("address_map entry #1"), "{e}");
    }

    #[test]
    fn a_missing_tls_file_fails_the_operation_once_with_its_error() {
        let config = config_from_url(
            &nothing_listens().replace("redis+", "rediss+"),
            &[("tls_ca_file", "/nonexistent/ca.pem")],
        )
        .unwrap();
        let e = doctor_blocking(config, quick()).unwrap_err();
        assert!(e.message().contains("/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn cancel_completes_with_closed() {
        // Accepts connections (the kernel does) and never answers: the diagnosis waits for the
        // handshake's deadline, long after the cancel.
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "redis+sentinel://127.0.0.1:{}/svc",
            silent.local_addr().unwrap().port()
        );
        let config = config_from_url(&url, &[("connect_timeout_ms", "20000")]).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let op = doctor(
            config,
            quick(),
            Box::new(move |r| tx.send(r.map(|d| d.exit_code)).unwrap()),
        );
        op.cancel();
        let r = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(r.unwrap_err().code(), crate::ErrorCode::Closed);
    }
}
