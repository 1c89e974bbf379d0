//! `sr-demo URL` (what `make demo` runs): writes continuously through a `Client`, kills the
//! primary with kill -9 (loopback topologies only), and prints the timeline of the failover as the
//! sentinels and the client saw it, with the window in which writes were refused.
//!
//! A testkit tool, not part of the product: the sentinels' own events are read with the
//! testkit's plain RESP client on threads of this program, independent of the client it shows.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sentinel_recovery::{Client, EventKind};
use sentinel_recovery_testkit::{Conn, Reply};

/// One line of the timeline, in ms since the kill.
struct Mark {
    at: Instant,
    what: String,
}

#[derive(Default)]
struct Writes {
    ok: u64,
    failed: u64,
    /// (when, ok, error text)
    log: Vec<(Instant, bool, String)>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match demo(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn demo(args: &[String]) -> Result<(), String> {
    let [url] = args else {
        return Err("demo: usage: sr-demo URL (a loopback topology: the primary is killed)".into());
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(run(url))
}

async fn run(url: &str) -> Result<(), String> {
    let url = if url.contains('?') {
        format!("{url}&command_timeout_ms=1000")
    } else {
        format!("{url}?command_timeout_ms=1000")
    };
    let client = Client::connect(&url).await.map_err(|e| e.to_string())?;
    let topology = client.topology().map_err(|e| e.to_string())?;
    let primary = topology.primary.clone().ok_or("demo: no primary")?;
    if !matches!(primary.host.as_str(), "127.0.0.1" | "localhost" | "::1") {
        return Err(format!(
            "demo: the primary {primary} is not on loopback; refusing to kill it"
        ));
    }
    println!(
        "primary {primary}, replicas {}, sentinels {}",
        topology.replicas.len(),
        topology.sentinels.len()
    );
    let marks: Arc<Mutex<Vec<Mark>>> = Arc::default();

    // Sentinel events as the sentinels publish them (each sentinel publishes its own; the first
    // to publish an event dates it), for the timeline. The threads end with the process.
    let master_text = format!("master {} ", topology.service);
    for sentinel in &client.config().sentinels {
        let addr = sentinel.to_string();
        let (marks, master_text) = (marks.clone(), master_text.clone());
        // A blocking subscription on a thread of its own: the demo's runtime is never blocked.
        std::thread::spawn(move || {
            let Ok(mut conn) = Conn::connect(&addr, Duration::from_secs(2)) else {
                return;
            };
            let channels = [
                "SUBSCRIBE",
                "+sdown",
                "+odown",
                "+switch-master",
                "+failover-end",
            ];
            if conn.send(&channels).is_err() || conn.set_read_timeout(None).is_err() {
                return;
            }
            while let Ok(reply) = conn.read() {
                let Some([Reply::Bulk(kind), Reply::Bulk(channel), Reply::Bulk(payload)]) =
                    reply.as_array()
                else {
                    continue;
                };
                if kind.as_slice() != b"message" {
                    continue;
                }
                let channel = String::from_utf8_lossy(channel).into_owned();
                let payload = String::from_utf8_lossy(payload).into_owned();
                if channel != "+switch-master" && !payload.starts_with(&master_text) {
                    continue;
                }
                let what = format!("sentinel {channel} {payload}");
                let mut marks = marks.lock().unwrap_or_else(|e| e.into_inner());
                let first_of_its_kind = !marks
                    .iter()
                    .any(|m| m.what.split(' ').nth(1) == Some(channel.as_str()));
                if first_of_its_kind {
                    marks.push(Mark {
                        at: Instant::now(),
                        what,
                    });
                }
            }
        });
    }
    let mut events = client.events().map_err(|e| e.to_string())?;
    let event_marks = marks.clone();
    let switched_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let switched = switched_at.clone();
    tokio::spawn(async move {
        while let Some(e) = events.next().await {
            if matches!(e.kind, EventKind::PrimaryChanged { .. }) {
                *switched.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            }
            let what = match &e.kind {
                EventKind::PrimaryChanged { old, new } => format!(
                    "client primary_changed {} -> {new}",
                    old.as_ref().map(|a| a.to_string()).unwrap_or_default()
                ),
                EventKind::ConnectionLost { address } => {
                    format!("client connection_lost {address}")
                }
                EventKind::FailoverStarted { promoting, .. } => {
                    format!("client failover_started (writes wait) promoting {promoting}")
                }
                _ => continue,
            };
            event_marks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Mark {
                    at: Instant::now(),
                    what,
                });
        }
    });

    // A writer: one INCR every 10 ms, each with a 1 s deadline.
    let writes: Arc<Mutex<Writes>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (client, writes, stop) = (client.clone(), writes.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let result = client.execute(&["INCR", "demo:counter"]).await;
                let text = result
                    .as_ref()
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                {
                    let mut w = writes.lock().unwrap_or_else(|e| e.into_inner());
                    match result {
                        Ok(_) => w.ok += 1,
                        Err(_) => w.failed += 1,
                    }
                    w.log.push((Instant::now(), text.is_empty(), text));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;

    let info = client
        .execute(&["INFO", "server"])
        .await
        .map_err(|e| e.to_string())?;
    let info = info.as_str().map(str::to_owned).unwrap_or_default();
    let pid: i32 = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .ok_or("demo: no process_id in INFO server")?;
    let killed = Instant::now();
    // SAFETY: kill(2) with a pid the primary reported about itself, on this machine's loopback.
    if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
        return Err(format!(
            "demo: kill -9 {pid} failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    println!("kill -9 {pid} (the primary, {primary}); writing an INCR every 10 ms meanwhile ...");

    // Until a write succeeds on the new primary, then one more second of writes.
    let deadline = killed + Duration::from_secs(60);
    let recovered = loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let switched = *switched_at.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(switched) = switched {
            let w = writes.lock().unwrap_or_else(|e| e.into_inner());
            let first_ok_after = w
                .log
                .iter()
                .find(|(at, ok, _)| *ok && *at > switched)
                .map(|(at, _, _)| *at);
            if let Some(at) = first_ok_after {
                break Some(at);
            }
        }
        if Instant::now() > deadline {
            break None;
        }
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = writer.await;
    let final_primary = client.topology().map_err(|e| e.to_string())?.primary;
    let counter = client
        .execute(&["GET", "demo:counter"])
        .await
        .ok()
        .and_then(|v| v.as_int());
    client.close().await;

    let w = writes.lock().unwrap_or_else(|e| e.into_inner());
    let mut lines: Vec<(Instant, String)> = marks
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(..)
        .map(|m| (m.at, m.what))
        .collect();
    lines.push((killed, format!("kill -9 of the primary {primary}")));
    let failures: Vec<&(Instant, bool, String)> = w
        .log
        .iter()
        .filter(|(at, ok, _)| !ok && *at >= killed)
        .collect();
    if let Some((at, _, e)) = failures.first() {
        lines.push((*at, format!("first refused write: {e}")));
    }
    if let Some(at) = recovered {
        lines.push((
            at,
            format!(
                "first successful write on the new primary {}",
                final_primary
                    .as_ref()
                    .map(|a| a.to_string())
                    .unwrap_or_default()
            ),
        ));
    }
    lines.sort_by_key(|(at, _)| *at);
    println!("\ntimeline (ms after the kill):");
    for (at, what) in &lines {
        let ms = at.saturating_duration_since(killed).as_millis();
        println!("  {ms:>6}  {what}");
    }
    let last_ok_before = w
        .log
        .iter()
        .filter(|(at, ok, _)| *ok && *at <= killed)
        .map(|(at, _, _)| *at)
        .next_back();
    println!();
    match (last_ok_before, recovered) {
        (Some(before), Some(after)) => println!(
            "writes were refused for {} ms (last success before the kill to first success after it); failed: {}, succeeded: {}",
            after.duration_since(before).as_millis(),
            failures.len(),
            w.ok
        ),
        _ => println!("no recovery within 60 s"),
    }
    if let Some(counter) = counter {
        println!("counter on the new primary: {counter}; acknowledged increments: {} (async replication may lose the last ones before the kill; no increment ran twice)", w.ok);
    }
    match recovered {
        Some(_) => Ok(()),
        None => Err("demo: the client did not recover within 60 s".into()),
    }
}
