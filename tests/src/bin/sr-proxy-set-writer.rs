//! `sr-proxy-set-writer URL ID LOG STOPFILE`: the partition scenarios' writer through the fencing
//! proxy. Starts an in-process proxy for URL on its host's loopback and adds unique values
//! `<ID>-<n>` to the set `partitions:set` over a plain RESP connection to it (as any standalone
//! client would), logging each call as one line of the set-full history
//! (`sentinel_recovery_testkit::setfull`). Stops when STOPFILE exists.

use std::fs::File;
use std::io::{LineWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sentinel_recovery::{ListenAddress, Proxy, ProxyOptions};
use sentinel_recovery_testkit::{Conn, Reply};
use serde_json::json;

/// The set every writer adds to.
const KEY: &str = "partitions:set";
/// Pause between calls, as the other writers.
const PAUSE: Duration = Duration::from_millis(10);
/// A reply's wait: longer than the proxy's hold and WAIT bounds, so a timeout here is a stall.
const IO: Duration = Duration::from_secs(30);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `fail`: known not applied (never sent, or refused by a node that is no primary); `info`:
/// may have run (UNCERTAIN, NOTREPLICATED, a broken connection).
fn judge(
    reply: &Result<Reply, sentinel_recovery_testkit::TestkitError>,
) -> (&'static str, serde_json::Value, serde_json::Value) {
    match reply {
        Ok(Reply::Int(n)) => ("ok", json!(n), json!(null)),
        Ok(Reply::Error(e)) if e.starts_with("FENCED") || e.starts_with("READONLY") => {
            ("fail", json!(null), json!(e))
        }
        Ok(Reply::Error(e)) => ("info", json!(null), json!(e)),
        Ok(other) => ("info", json!(null), json!(format!("{other:?}"))),
        Err(e) => ("info", json!(null), json!(e.to_string())),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, id, log, stop] = &args[..] else {
        eprintln!("usage: sr-proxy-set-writer URL ID LOG STOPFILE");
        std::process::exit(2);
    };
    let mut out = match File::create(log) {
        Ok(f) => LineWriter::new(f),
        Err(e) => {
            eprintln!("sr-proxy-set-writer: {log}: {e}");
            std::process::exit(1);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let proxy = loop {
        let config = sentinel_recovery::Config::from_url(url).unwrap_or_else(|e| {
            eprintln!("sr-proxy-set-writer: {e}");
            std::process::exit(2)
        });
        let started = {
            let _entered = runtime.enter();
            Proxy::open(config, ProxyOptions::default())
        };
        match started {
            Ok(p) => break p,
            Err(e) if Path::new(stop).exists() => {
                eprintln!("sr-proxy-set-writer: {e}");
                std::process::exit(1);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    let ListenAddress::Tcp(addr) = proxy.address().clone() else {
        unreachable!("the default listener is TCP")
    };
    let addr = addr.to_string();
    let mut conn: Option<Conn> = None;
    let mut n: u64 = 0;
    while !Path::new(stop).exists() {
        if conn.is_none() {
            conn = Conn::connect(&addr, IO).ok();
            if conn.is_none() {
                std::thread::sleep(PAUSE);
                continue;
            }
        }
        n += 1;
        let v = format!("{id}-{n}");
        let t0 = now_ms();
        let reply = conn
            .as_mut()
            .map(|c| c.call(&["SADD", KEY, &v]))
            .expect("connected");
        let t1 = now_ms();
        if reply.is_err() {
            conn = None;
        }
        let (outcome, reply, err) = judge(&reply);
        let line = json!({"w": id, "v": v, "t0": t0, "t1": t1, "outcome": outcome,
                          "reply": reply, "err": err});
        if writeln!(out, "{line}").is_err() {
            std::process::exit(1);
        }
        std::thread::sleep(PAUSE);
    }
    drop(conn);
    runtime.block_on(proxy.close(Duration::from_secs(1)));
}
