//! What the driver records besides the writers' own logs: every sentinel's event stream
//! (`PSUBSCRIBE *`, reconnecting while a sentinel is down) and, once a second, each sentinel's
//! total command count (`INFO stats` total_commands_processed) and client connections by name (`CLIENT LIST`), and
//! each writer process's file descriptors, threads and RSS (from /proc).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use sentinel_recovery_testkit::{Conn, FaultProxy, Reply, TestkitError};
use serde_json::{json, Map, Value};

use crate::jsonl::{now_ms, Sink};

/// Where the recorders reach a sentinel: its port on 127.0.0.1, inside its namespace on the
/// netns LAN (so a partition never cuts the recording).
#[derive(Debug, Clone)]
pub struct SentinelAt {
    /// The sentinel's port (also its id in the records).
    pub port: u16,
    /// Its namespace, `None` on loopback.
    pub netns: Option<String>,
}

impl SentinelAt {
    fn connect(&self, timeout: Duration) -> Result<Conn, TestkitError> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        let stream = sentinel_recovery_testkit::net::dial(self.netns.as_deref(), addr, timeout)
            .map_err(|source| TestkitError::Io {
                context: format!("connecting to sentinel {addr}"),
                source,
            })?;
        stream.set_nodelay(true).ok();
        Conn::from_stream(stream, timeout)
    }
}

/// Background threads that stop (and are joined) when dropped.
pub struct Recorders {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Recorders {
    /// Starts one event recorder per sentinel into `events`, and the once-a-second sampler
    /// of `sentinels`, of the proxies' open connections and of the processes `pids()` returns
    /// into `samples`.
    pub fn start(
        sentinels: Vec<SentinelAt>,
        proxies: Vec<Arc<FaultProxy>>,
        events: Sink,
        samples: Sink,
        pids: impl Fn() -> Vec<(String, u32)> + Send + 'static,
    ) -> Recorders {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for at in sentinels.iter().cloned() {
            let (stop, sink) = (stop.clone(), events.clone());
            threads.push(thread::spawn(move || record_events(at, sink, stop)));
        }
        let s = stop.clone();
        threads.push(thread::spawn(move || {
            sample(sentinels, proxies, samples, pids, s)
        }));
        Recorders { stop, threads }
    }
}

impl Drop for Recorders {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn record_events(at: SentinelAt, sink: Sink, stop: Arc<AtomicBool>) {
    let port = at.port;
    while !stop.load(Ordering::SeqCst) {
        let Ok(mut conn) = at.connect(Duration::from_millis(500)) else {
            thread::sleep(Duration::from_millis(200));
            continue;
        };
        if conn.send(&["PSUBSCRIBE", "*"]).is_err() {
            continue;
        }
        sink.put(
            &json!({"t": now_ms(), "sentinel": port, "channel": "recorder",
                         "data": "subscribed"}),
        );
        while !stop.load(Ordering::SeqCst) {
            match conn.read() {
                Ok(Reply::Array(parts)) if parts.len() == 4 => {
                    let channel = parts[2].as_str().unwrap_or_default();
                    let data = parts[3].as_str().unwrap_or_default();
                    if channel != "__sentinel__:hello" {
                        sink.put(&json!({"t": now_ms(), "sentinel": port,
                                         "channel": channel, "data": data}));
                    }
                }
                Ok(_) => {}
                // Idle (the read timeout) or a SIGSTOPped sentinel: keep listening.
                Err(sentinel_recovery_testkit::TestkitError::Io { source, .. })
                    if matches!(
                        source.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
    }
}

fn sample(
    sentinels: Vec<SentinelAt>,
    proxies: Vec<Arc<FaultProxy>>,
    sink: Sink,
    pids: impl Fn() -> Vec<(String, u32)>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::SeqCst) {
        let t = now_ms();
        for at in &sentinels {
            if let Some(rec) = sample_sentinel(at) {
                let mut rec = rec;
                rec.insert("t".into(), json!(t));
                rec.insert("sentinel".into(), json!(at.port));
                sink.put(&Value::Object(rec));
            }
        }
        for p in &proxies {
            let (affected, total) = p.open_connections();
            sink.put(&json!({"t": t, "proxy": p.port(), "client_conns": affected,
                             "conns": total, "accepted": p.accepted()}));
        }
        for (id, pid) in pids() {
            if let Some((fds, threads, rss_kb)) = proc_resources(pid) {
                sink.put(&json!({"t": t, "writer": id, "pid": pid, "fds": fds,
                                 "threads": threads, "rss_kb": rss_kb}));
            }
        }
        let next = t + 1000;
        while now_ms() < next && !stop.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `{"calls": total commands processed so far, "clients": {name: connections}, "conns":
/// [[id, name, tot-cmds]]}`, or `None` when the
/// sentinel does not answer within 300 ms.
fn sample_sentinel(at: &SentinelAt) -> Option<Map<String, Value>> {
    let mut conn = at.connect(Duration::from_millis(300)).ok()?;
    // Sentinels have no `INFO commandstats` section; `stats` has the total.
    let stats = conn.call(&["INFO", "stats"]).ok()?.as_str()?;
    let calls: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))?
        .trim()
        .parse()
        .ok()?;
    let list = conn.call(&["CLIENT", "LIST"]).ok()?.as_str()?;
    let mut clients = Map::new();
    // [id, name, tot-cmds]: per-connection command counts where the server has them (Valkey 8+).
    let mut conns = Vec::new();
    for line in list.lines() {
        let field = |key: &str| line.split(' ').find_map(|kv| kv.strip_prefix(key));
        let name = field("name=")
            .filter(|n| !n.is_empty())
            .unwrap_or("(unnamed)");
        let n = clients.get(name).and_then(Value::as_u64).unwrap_or(0);
        clients.insert(name.to_string(), json!(n + 1));
        if let (Some(id), Some(cmds)) = (field("id="), field("tot-cmds=")) {
            conns.push(json!([
                id.parse::<u64>().ok(),
                name,
                cmds.parse::<u64>().ok()
            ]));
        }
    }
    let mut m = Map::new();
    m.insert("calls".into(), json!(calls));
    m.insert("clients".into(), Value::Object(clients));
    m.insert("conns".into(), Value::Array(conns));
    Some(m)
}

/// (open file descriptors, threads, RSS in kB) of a live process.
pub fn proc_resources(pid: u32) -> Option<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some((fds, field("Threads:")?, field("VmRSS:")?))
}
