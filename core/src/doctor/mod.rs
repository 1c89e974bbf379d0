//! `doctor`: diagnoses a Sentinel deployment from the client's side, in one run, with numbers.
//!
//! It tells apart the failures that make a service stop failing over or make clients flap: a
//! sentinel whose loop stalled (TILT, or connections accepted and never answered), slow or
//! misdirected name resolution, a quorum or majority out of reach, sentinels that disagree, a
//! replica that can never be promoted, sentinels that refuse our credentials or TLS. It uses the
//! core's own connections with the same URL, credentials, TLS and DNS settings as a client.
//!
//! ```no_run
//! # async fn demo() -> sentinel_recovery::Result<()> {
//! use sentinel_recovery::doctor;
//! let report = doctor::run("redis+sentinel://127.0.0.1:26379/mymaster", doctor::Options::default())
//!     .await?;
//! print!("{}", report.to_text());
//! std::process::exit(i32::from(report.exit_code()));
//! # }
//! ```
//!
//! What it does, in order, every step concurrent across endpoints and under its own deadline
//! (DNS timeout, connect timeout, reply timeout), on the core runtime:
//! 1. each configured sentinel, then each sentinel they report that is not configured: resolve
//!    (timed), bare TCP connect (timed), connect as the client does (TCP, TLS, HELLO/AUTH; timed),
//!    the certificate's expiry with TLS, 10 PINGs, `INFO sentinel`, `ROLE`, `SENTINEL MYID`,
//!    `SENTINEL MASTER`, `CKQUORUM`, `REPLICAS`, `SENTINELS`, `CONFIG GET resolve-hostnames` and
//!    `announce-hostnames`;
//! 2. agreement between their views, and quorum and majority against the sentinels able to act;
//! 3. the primary most of them name and every replica they list: reached the same way with the
//!    data-node credentials, `ROLE` and `INFO replication`; other named primaries: `ROLE`;
//! 4. with [`Options::watch`], a PING every 100 ms to every sentinel for that long;
//! 5. findings and a verdict ([`verdict`]'s rules), exit code 0 healthy, 1 warnings, 2 failures.
//!
//! The report's JSON form and every field are documented in [`report`].

mod agreement;
mod data;
mod fields;
mod findings;
#[cfg(test)]
mod fixtures;
mod names;
mod options;
mod probe;
mod quorum;
mod reach;
pub mod report;
pub mod setup;
mod text;
pub mod timing;
// Reachable, hidden from the docs, for the fuzz target of the certificate walker; not API.
#[doc(hidden)]
pub mod tls_expiry;
pub mod verdict;
pub mod watch;

use std::time::Instant;

use futures_util::future::join_all;

pub use options::{Options, MAX_PINGS, MAX_WATCH_SECONDS};
pub use report::{Finding, Mode, Report, Severity, Status};
pub use setup::Setup;

use crate::config::Config;
use crate::error::{Error, ErrorCode, Result};
use crate::types::Address;
use options::Ctx;
use probe::SentinelProbe;
use report::{Source, SCHEMA_VERSION};

/// What to diagnose: a URL, or a configuration built in code.
#[derive(Clone, Debug)]
pub enum Target {
    /// A `redis+sentinel://` URL.
    Url(String),
    /// A configuration.
    Config(Box<Config>),
}

impl From<&str> for Target {
    fn from(url: &str) -> Target {
        Target::Url(url.to_string())
    }
}

impl From<String> for Target {
    fn from(url: String) -> Target {
        Target::Url(url)
    }
}

impl From<&String> for Target {
    fn from(url: &String) -> Target {
        Target::Url(url.clone())
    }
}

impl From<Config> for Target {
    fn from(config: Config) -> Target {
        Target::Config(Box::new(config))
    }
}

impl From<&Config> for Target {
    fn from(config: &Config) -> Target {
        Target::Config(Box::new(config.clone()))
    }
}

impl Target {
    fn into_config(self) -> Result<Config> {
        let config = match self {
            Target::Url(url) => Config::from_url(&url)?,
            Target::Config(config) => *config,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Diagnoses `target` and returns the report. Fails only on what prevents a diagnosis at all (an
/// invalid URL, unreadable TLS files); every problem of the deployment is in the report.
///
/// The network work runs on the core runtime, so this can be awaited from any executor. Reading
/// the resolver configuration and TLS files happens first, on the calling thread (on a blocking
/// thread when called from a core thread).
///
/// Dropping the future cancels the diagnosis: its work on the core runtime stops and its
/// connections close (a `watch` does not sample on unseen).
pub async fn run(target: impl Into<Target>, options: Options) -> Result<Report> {
    let config = target.into().into_config()?;
    let setup = if crate::runtime::on_core_thread() {
        let c = config.clone();
        tokio::task::spawn_blocking(move || Setup::from_config(&c))
            .await
            .map_err(|_| stopped())??
    } else {
        Setup::from_config(&config)?
    };
    crate::runtime::on_core(guarded(config, setup, options)).await
}

/// [`run`], blocking the calling thread (and only it) until the report is ready. Refused on a
/// core runtime thread.
pub fn run_blocking(target: impl Into<Target>, options: Options) -> Result<Report> {
    let config = target.into().into_config()?;
    let setup = Setup::from_config(&config)?;
    match crate::runtime::block_on(guarded(config, setup, options)) {
        Ok(result) => result,
        // The task ended without an answer: the runtime was shut down meanwhile.
        Err(e) if e.code() == ErrorCode::Closed => Err(stopped()),
        Err(e) => Err(e),
    }
}

/// [`diagnose`] with a panic turned into an `internal` error.
async fn guarded(config: Config, setup: Setup, options: Options) -> Result<Report> {
    use futures_util::FutureExt;
    std::panic::AssertUnwindSafe(diagnose(config, setup, options))
        .catch_unwind()
        .await
        .map_err(|panic| Error::internal(&*panic))
}

fn stopped() -> Error {
    Error::new(
        ErrorCode::Closed,
        "the core runtime stopped before the diagnosis finished",
    )
}

/// Waves of learned sentinels followed at most.
const MAX_WAVES: usize = 4;

/// The diagnosis itself. [`run`] runs it on the core runtime; it needs a tokio runtime with
/// I/O and time enabled (connections and lookups spawn tasks on it).
pub async fn diagnose(config: Config, setup: Setup, options: Options) -> Report {
    let started = Instant::now();
    let started_at_ms = crate::monitor::unix_ms();
    let ctx = Ctx {
        setup,
        service: config.service.clone(),
        reply_timeout: options.reply_timeout.unwrap_or(config.connect_timeout()),
        options,
    };

    let mut probes: Vec<SentinelProbe> = join_all(
        config
            .sentinels
            .iter()
            .map(|a| probe::sentinel(&ctx, a.clone(), Source::Configured)),
    )
    .await;
    for _ in 0..MAX_WAVES {
        let learned = learned(&probes);
        if learned.is_empty() {
            break;
        }
        let more = join_all(
            learned
                .into_iter()
                .map(|a| probe::sentinel(&ctx, a, Source::Learned)),
        )
        .await;
        probes.extend(more);
    }

    let reports: Vec<report::SentinelReport> = probes.iter().map(|p| p.report.clone()).collect();
    let mut agreement = agreement::compare(&reports);
    let data_nodes = data::probe(&ctx, &reports, &mut agreement).await;

    let watch_seconds = ctx.options.watch.map(|d| d.as_secs_f64());
    if let Some(period) = ctx.options.watch {
        let sampled = join_all(probes.iter().map(|p| async {
            match (&p.conn, p.pings) {
                (Some(conn), true) => Some(watch::sample(conn, period, ctx.reply_timeout).await),
                _ => None,
            }
        }))
        .await;
        for (p, stats) in probes.iter_mut().zip(sampled) {
            p.report.watch = stats;
        }
    }
    for p in &probes {
        if let Some(conn) = &p.conn {
            conn.close();
        }
    }

    let sentinels: Vec<report::SentinelReport> = probes.into_iter().map(|p| p.report).collect();
    let consensus = agreement.primaries.first().map(|c| c.address.clone());
    let quorum = quorum::assess(&sentinels, consensus.as_ref());
    let names = names::collect(&sentinels, &data_nodes);
    let timing = timing::expected(&sentinels, watch_seconds);
    let mut report = Report {
        schema: SCHEMA_VERSION,
        service: config.service.clone(),
        url: config.redacted_url(),
        started_at_ms,
        duration_ms: 0.0,
        verdict: report::Verdict {
            status: Status::Healthy,
            exit_code: 0,
            headline: String::new(),
            modes: Vec::new(),
        },
        findings: Vec::new(),
        sentinels,
        agreement,
        quorum,
        names,
        data_nodes,
        timing,
    };
    verdict::assess(&mut report, ctx.options.slow_name);
    report.duration_ms = report::ms(started.elapsed());
    report
}

/// Sentinels the probed ones report that are not probed yet: not the same address, not an
/// address a probed one resolved to, not a run id already seen.
fn learned(probes: &[SentinelProbe]) -> Vec<Address> {
    let mut out: Vec<Address> = Vec::new();
    for peer in probes.iter().flat_map(|p| p.report.sentinels.iter()) {
        let known = probes.iter().any(|q| {
            q.report.address == peer.address
                || q.resolved.iter().any(|sa| {
                    sa.port() == peer.address.port
                        && peer
                            .address
                            .host
                            .trim_start_matches('[')
                            .trim_end_matches(']')
                            .parse::<std::net::IpAddr>()
                            .is_ok_and(|ip| ip == sa.ip())
                })
                || (peer.run_id.is_some() && q.report.run_id == peer.run_id)
        });
        if !known && !out.contains(&peer.address) {
            out.push(peer.address.clone());
        }
    }
    out
}
