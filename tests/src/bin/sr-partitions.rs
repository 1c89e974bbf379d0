//! `sr-partitions SCENARIO [--url-extra K=V]... [--d-secs N] -- PROGRAM [ARGS...]`: runs one of
//! issue 28's partition scenarios (A-E, `sentinel_recovery_testkit::net::scenario`) with the given
//! writer program on both client hosts and prints the run as one JSON line (the checker's counts
//! per writer and in total, the primaries before and after, sentinel events). For
//! bench/partitions/; needs root. Exit 0 when the run completed (whatever it lost), 1 when the
//! scenario could not run, 2 on bad arguments.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sentinel_recovery_testkit::net::scenario::{run, Scenario, ScenarioSpec, WriterProgram};
use serde_json::json;

fn parse(args: &[String]) -> Result<ScenarioSpec, String> {
    let (opts, program) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => return Err("missing `-- PROGRAM [ARGS...]`".into()),
    };
    let (first, rest) = program.split_first().ok_or("missing PROGRAM after --")?;
    let writer = WriterProgram {
        program: PathBuf::from(first),
        args: rest.to_vec(),
    };
    let mut it = opts.iter();
    let scenario = it
        .next()
        .and_then(|s| Scenario::parse(s))
        .ok_or("the first argument must be a scenario, A to E")?;
    let mut spec = ScenarioSpec::new(scenario, writer);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url-extra" => {
                let (k, v) = value
                    .split_once('=')
                    .ok_or_else(|| format!("--url-extra wants KEY=VALUE, not {value:?}"))?;
                spec.url_extra.push((k.into(), v.into()));
            }
            "--d-secs" => {
                let secs: u64 = value
                    .parse()
                    .map_err(|_| format!("--d-secs wants seconds, not {value:?}"))?;
                spec.d_duration = Duration::from_secs(secs);
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(spec)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let spec = match parse(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sr-partitions: {e}\nusage: sr-partitions SCENARIO [--url-extra K=V]... [--d-secs N] -- PROGRAM [ARGS...]");
            return ExitCode::from(2);
        }
    };
    match run(&spec) {
        Ok(r) => {
            println!(
                "{}",
                json!({
                    "scenario": spec.scenario.name(),
                    "url_extra": spec.url_extra,
                    "total": r.report.total,
                    "lost_percent": r.report.total.lost_percent(),
                    "writers": r.report.writers,
                    "unexpected": r.report.unexpected,
                    "primary_before": r.primary_before,
                    "primary_after": r.primary_after,
                    "followed_after_heal_ms": r.followed_after_heal_ms,
                    "fault_to_heal_ms": r.heal_at_ms - r.fault_at_ms,
                    "sentinel_events": r.sentinel_events,
                })
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sr-partitions: scenario {}: {e}", spec.scenario.name());
            ExitCode::from(1)
        }
    }
}
