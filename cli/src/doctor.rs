//! `sentinel-recovery doctor URL [--json] [--watch SECONDS]`: diagnoses the deployment and exits
//! 0 when healthy, 1 with warnings, 2 with failures (or when the URL itself is unusable).

use std::process::ExitCode;
use std::time::Duration;

use sentinel_recovery::doctor::{self, Options};

pub const HELP: &str = "\
usage: sentinel-recovery doctor URL [--json] [--watch SECONDS]

Diagnoses a Sentinel deployment from here, with the same URL, credentials, TLS and DNS settings
as a client: per sentinel how its name resolved and in how long, TCP and handshake time, auth,
PING round trips, TILT, its view of the service (primary, flags, epoch, quorum, down-after,
failover-timeout, parallel-syncs, peers, replicas), resolve/announce-hostnames and CKQUORUM;
whether the sentinels agree; whether the ones able to act reach the quorum (o_down) and the
majority (failover vote); every host name and its resolution time; the primary's ROLE, each
replica's link, lag, priority and reachability; the expected failover time; certificate expiry.

  --json           print the report as JSON (schema below) instead of text
  --watch SECONDS  also PING every sentinel every 100 ms for SECONDS and report the longest gap
                   without a reply (a loop stall seen from outside; 2 s or more means TILT)

Exit status: 0 healthy, 1 warnings, 2 failures (also for an unusable URL).

The verdict names the failure mode: service unknown to the sentinels, quorum or majority
unreachable, sentinels disagree, primary or
replica not usable, loop stall / TILT, sentinels unreachable or refusing access, slow or
misdirected name resolution, replica not promotable, TLS certificate expiring; or healthy.

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

/// Longest `--watch`.
const MAX_WATCH_SECONDS: f64 = 3600.0;

struct Args {
    url: String,
    json: bool,
    watch: Option<Duration>,
}

fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut url = None;
    let mut json = false;
    let mut watch = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let value = match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--json" => {
                json = true;
                continue;
            }
            "--watch" => Some(
                it.next()
                    .ok_or("doctor: --watch needs a number of seconds")?
                    .as_str(),
            ),
            other => other.strip_prefix("--watch="),
        };
        match value {
            Some(seconds) => {
                let n: f64 = seconds
                    .parse()
                    .ok()
                    .filter(|n: &f64| *n > 0.0 && *n <= MAX_WATCH_SECONDS)
                    .ok_or_else(|| {
                        format!(
                            "doctor: --watch takes seconds in (0, {MAX_WATCH_SECONDS}], not \
                             '{seconds}'"
                        )
                    })?;
                watch = Some(Duration::from_secs_f64(n));
            }
            None if arg.starts_with('-') => return Err(format!("doctor: unknown option '{arg}'")),
            None if url.is_none() => url = Some(arg.clone()),
            None => return Err("doctor: give one URL".into()),
        }
    }
    let url = url.ok_or("doctor: no URL given")?;
    Ok(Some(Args { url, json, watch }))
}

pub fn main(args: &[String]) -> ExitCode {
    let args = match parse(args) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("sentinel-recovery: {message}\n\n{HELP}");
            return ExitCode::from(2);
        }
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments() {
        let a = parse(&args(&["redis+sentinel://h/s", "--json", "--watch", "2.5"]))
            .unwrap()
            .unwrap();
        assert_eq!(a.url, "redis+sentinel://h/s");
        assert!(a.json);
        assert_eq!(a.watch, Some(Duration::from_millis(2500)));
        let a = parse(&args(&["--watch=1", "u"])).unwrap().unwrap();
        assert_eq!((a.url.as_str(), a.json), ("u", false));
        assert!(parse(&args(&["--help"])).unwrap().is_none());
        assert!(parse(&args(&[])).is_err());
        assert!(parse(&args(&["u", "--watch"])).is_err());
        assert!(parse(&args(&["u", "--watch", "0"])).is_err());
        assert!(parse(&args(&["u", "--watch", "x"])).is_err());
        assert!(parse(&args(&["u", "v"])).is_err());
        assert!(parse(&args(&["u", "--colour"])).is_err());
    }
}
