//! The Rust writer (`sr-soak writer URL ID LOG STOPFILE READS`), a separate process like the
//! Python, Node and C writers in `tests/soak/`, with the same loop and log format: per round an
//! `RPUSH soak:l:<id> <seq>` (unique values), an `INCR soak:c:<id>` (per-writer counter) and,
//! when READS is 1, a `GET soak:c:<id>`; one JSON line per call with its outcome and its start
//! and end in unix ms. Stops when STOPFILE exists.

use std::path::Path;
use std::time::Duration;

use sentinel_recovery::{Client, Value};
use serde_json::json;

use crate::jsonl::{now_ms, Sink};

/// Pause between rounds, the same in every language: load enough to see every fault, little
/// enough for a 2-core machine that also runs the servers.
const ROUND_PAUSE: Duration = Duration::from_millis(20);

/// Runs the writer with `args` = URL ID LOG STOPFILE READS; returns the process exit code.
pub fn main(args: &[String]) -> i32 {
    let [url, id, log, stop, reads] = args else {
        eprintln!("usage: sr-soak writer URL ID LOG STOPFILE READS(0|1)");
        return 2;
    };
    let sink = match Sink::create(Path::new(log)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sr-soak writer: {log}: {e}");
            return 1;
        }
    };
    let client = match Client::open_url(url) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sr-soak writer: {e}");
            return 1;
        }
    };
    let list = format!("soak:l:{id}");
    let counter = format!("soak:c:{id}");
    let mut seq: u64 = 0;
    while !Path::new(stop).exists() {
        seq += 1;
        let v = seq.to_string();
        call(
            &client,
            &sink,
            id,
            "rpush",
            Some(seq),
            &["RPUSH", &list, &v],
        );
        call(&client, &sink, id, "incr", None, &["INCR", &counter]);
        if reads == "1" {
            call(&client, &sink, id, "get", None, &["GET", &counter]);
        }
        std::thread::sleep(ROUND_PAUSE);
    }
    // Dropping the client closes it (in-flight calls complete with `closed`).
    drop(client);
    0
}

fn call(client: &Client, sink: &Sink, id: &str, op: &str, v: Option<u64>, args: &[&str]) {
    let t0 = now_ms();
    let result = client.execute_blocking(args);
    let t1 = now_ms();
    let (ok, reply, err) = match result {
        Ok(Value::Int(n)) => (true, json!(n), json!(null)),
        Ok(Value::Bulk(b)) => (true, json!(String::from_utf8_lossy(&b)), json!(null)),
        Ok(Value::Nil) => (true, json!(null), json!(null)),
        Ok(other) => (true, json!(format!("{other:?}")), json!(null)),
        Err(e) => (
            false,
            json!(null),
            json!(format!("{}: {}", e.code().as_str(), e.message())),
        ),
    };
    sink.put(
        &json!({"w": id, "op": op, "v": v, "t0": t0, "t1": t1, "ok": ok,
                     "reply": reply, "err": err}),
    );
}
