//! `sentinel-recovery doctor URL [--json] [--watch SECONDS]`: diagnoses the deployment and exits
//! 0 when healthy, 1 with warnings, 2 with failures (or when the URL itself is unusable).

use std::process::ExitCode;
use std::time::Duration;

use sentinel_recovery::deadline::Unit;
use sentinel_recovery::doctor::{self, Options};

/// What the doctor looks at and how it reports (`doctor --help`).
pub const ABOUT: &str = "\
Diagnoses a Sentinel deployment from here, with the same URL, credentials, TLS and DNS settings
as a client: per sentinel how its name resolved and in how long, TCP and handshake time, auth,
PING round trips, TILT, its view of the service (primary, flags, epoch, quorum, down-after,
failover-timeout, parallel-syncs, peers, replicas), resolve/announce-hostnames and CKQUORUM;
whether the sentinels agree; whether the ones able to act reach the quorum (o_down) and the
majority (failover vote); every host name and its resolution time; the primary's ROLE, each
replica's link, lag, priority and reachability; the expected failover time; certificate expiry.

Exit status: 0 healthy, 1 warnings, 2 failures (also for an unusable URL).

The verdict names the failure mode: service unknown to the sentinels, quorum or majority
unreachable, sentinels disagree, primary or replica not usable, loop stall / TILT, sentinels
unreachable or refusing access, slow or misdirected name resolution, replica not promotable, TLS
certificate expiring; or healthy.";

/// The JSON output's schema (`doctor --help`).
pub const SCHEMA: &str = "\
JSON schema (version 1; times in ms, absent values null):
  schema, service, url (passwords as ***), started_at_ms, duration_ms
  verdict   {status: healthy|warning|failure, exit_code, headline, modes: [mode]}
  findings  [{severity: warning|failure, mode, code, subject, message, hint}]
            mode: service_unknown|quorum|disagreement|data_nodes|loop_stall|sentinel_access|
                  name_resolution|replica_not_promotable|tls
  sentinels [{address: {host, port}, source: configured|learned, reach, auth: none|ok|refused|
              unknown, run_id, role, ping: {samples, min_ms, median_ms, max_ms}, tilt,
              tilt_since_seconds, knows_service, master: {address, flags, config_epoch, quorum,
              down_after_ms, failover_timeout_ms, parallel_syncs, num_other_sentinels,
              num_slaves, failover_state}, resolve_hostnames, announce_hostnames,
              ckquorum: {ok, usable, quorum_reachable, majority_reachable, message},
              replicas: [{address, flags, master_link_status, priority, repl_offset}],
              sentinels: [{address, flags, run_id}], watch, notes: [text]}]
  reach     {ip_literal, resolve_ms, addresses, tcp_connect_ms, connect_ms, tls_days_left,
             tls_note, failed_at: resolve|tcp|handshake, error: {code, message}}
  watch     {seconds, interval_ms, samples, failed, median_rtt_ms, max_rtt_ms, max_gap_ms,
             stalls, tilt_after}
  agreement {agree, primaries: [{address, config_epoch, sentinels, role}],
             down_after_ms: [{value, sentinels}], quorum: [{value, sentinels}],
             known_sentinels: [{count, ids, sentinels}]}
  quorum    {quorum, known_sentinels, majority, needed_for_failover, answering,
             naming_other_primary, in_tilt, able, unknown, odown_possible, failover_possible, ckquorum_ok, ckquorum_failed, summary}
  names     [{host, ports, reported_as, resolve_ms, addresses, error, role_ok}]
  data_nodes [{address, kind: primary|replica, named_by, sentinel_flags, reach, role,
             replicates_from, role_ok, link_status, sentinel_link_status, repl_offset,
             lag_bytes, priority, promotable, not_promotable_because, connected_replicas, notes}]
  timing    {down_after_ms, election_estimate_ms, expected_failover_ms, failover_timeout_ms,
             watch_seconds}
The full description is in the Rust documentation of sentinel_recovery::doctor::report.";

/// `doctor URL [--json] [--watch SECONDS]`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The service's URL
    pub url: String,
    /// Print the report as JSON (schema below) instead of text
    #[arg(long)]
    pub json: bool,
    /// Also PING every sentinel every 100 ms for SECONDS and report the longest gap without a
    /// reply (a loop stall seen from outside; 2 s or more means TILT)
    #[arg(long, value_name = "SECONDS", value_parser = watch_seconds)]
    pub watch: Option<Duration>,
}

/// `--watch` under the rule every binding keeps for the doctor's `watch`.
fn watch_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("takes a number of seconds, not {text:?}"))?;
    let options = Options::from_host(Some(seconds), Unit::Seconds, None)
        .map_err(|e| e.message().to_string())?;
    options
        .watch
        .ok_or_else(|| format!("takes a number of seconds, not {text:?}"))
}

pub fn main(args: Args) -> ExitCode {
    if let Some(period) = args.watch {
        eprintln!(
            "doctor: probing, then watching every sentinel for {:.1} s ...",
            period.as_secs_f64()
        );
    }
    let options = Options {
        watch: args.watch,
        ..Options::default()
    };
    match doctor::run_blocking(args.url.as_str(), options) {
        Ok(report) => {
            if args.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_text());
            }
            ExitCode::from(report.exit_code())
        }
        Err(e) => {
            eprintln!("sentinel-recovery: doctor: {e}");
            ExitCode::from(2)
        }
    }
}
