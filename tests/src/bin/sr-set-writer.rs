//! `sr-set-writer URL ID LOG STOPFILE`: the partition scenarios' writer with sentinel-recovery's
//! Rust client. Adds unique values `<ID>-<n>` to the set `partitions:set` with SADD, one call at a
//! time, and logs each call as one line of the set-full history
//! (`sentinel_recovery_testkit::setfull`). Stops when STOPFILE exists.

use std::fs::File;
use std::io::{LineWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentinel_recovery::{Client, Value};
use serde_json::json;

/// The set every writer adds to.
const KEY: &str = "partitions:set";
/// Pause between calls: enough writes to see a cut, little load on a shared 2-core machine.
const PAUSE: Duration = Duration::from_millis(10);
/// Error codes that prove the command was not applied: refused by the server, or never sent
/// (no primary known, the queue full). Any other error may come after the command reached a
/// server: indeterminate.
const NOT_APPLIED: &[&str] = &[
    "server",
    "queue_full",
    "sentinels_unreachable",
    "service_unknown",
    "no_healthy_primary",
    "config",
    "auth",
];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, id, log, stop] = &args[..] else {
        eprintln!("usage: sr-set-writer URL ID LOG STOPFILE");
        std::process::exit(2);
    };
    let mut out = match File::create(log) {
        Ok(f) => LineWriter::new(f),
        Err(e) => {
            eprintln!("sr-set-writer: {log}: {e}");
            std::process::exit(1);
        }
    };
    // Opening fails fast when no sentinel answers; a writer started during a cut keeps trying.
    let client = loop {
        match Client::open_url(url) {
            Ok(c) => break c,
            Err(e) if Path::new(stop).exists() => {
                eprintln!("sr-set-writer: {e}");
                std::process::exit(1);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    let mut n: u64 = 0;
    while !Path::new(stop).exists() {
        n += 1;
        let v = format!("{id}-{n}");
        let t0 = now_ms();
        let result = client.execute_blocking(&["SADD", KEY, &v]);
        let t1 = now_ms();
        let (outcome, reply, err) = match result {
            Ok(Value::Int(r)) => ("ok", json!(r), json!(null)),
            Ok(other) => ("ok", json!(format!("{other:?}")), json!(null)),
            Err(e) => {
                let code = e.code().as_str();
                let outcome = if NOT_APPLIED.contains(&code) {
                    "fail"
                } else {
                    "info"
                };
                (
                    outcome,
                    json!(null),
                    json!(format!("{code}: {}", e.message())),
                )
            }
        };
        let line = json!({"w": id, "v": v, "t0": t0, "t1": t1, "outcome": outcome,
                          "reply": reply, "err": err});
        if writeln!(out, "{line}").is_err() {
            std::process::exit(1);
        }
        std::thread::sleep(PAUSE);
    }
    drop(client);
}
