//! Histories of writes through failovers and the checker that judges them: writers push unique
//! ids while a fault happens; sentinel events are recorded by the test's own subscriptions to
//! every sentinel, with the time each arrived, independent of the client under test.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use sentinel_recovery::monitor::unix_ms;
use sentinel_recovery::resp::{ConnectOptions, Connection};
use sentinel_recovery::{Client, EventKind};
use sentinel_recovery_testkit::Topology;

pub const FAILOVER: Duration = Duration::from_secs(40);
pub const WRITERS: usize = 8;

/// Sentinel events as this test saw them: (unix ms of arrival, channel, payload).
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<(u64, String, String)>>>);

impl Recorder {
    pub async fn start(topo: &Topology) -> Recorder {
        let recorder = Recorder::default();
        let channels = [
            "+switch-master",
            "+failover-state-send-slaveof-noone",
            "-failover-abort-slave-timeout",
            "-failover-abort-no-good-slave",
        ];
        // On the core runtime: this test's own runtime is blocked while it polls the testkit.
        let handle = sentinel_recovery::runtime::handle().unwrap();
        for s in topo.sentinels() {
            let addr: SocketAddr = s.addr().parse().unwrap();
            let log = recorder.0.clone();
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            handle.spawn(async move {
                let conn = Connection::connect(addr, &ConnectOptions::default())
                    .await
                    .unwrap();
                let mut sub = conn
                    .subscribe(&channels, Duration::from_secs(5))
                    .await
                    .unwrap();
                let _ = ready_tx.send(());
                while let Some((channel, payload)) = sub.next().await {
                    log.lock().unwrap().push((
                        unix_ms(),
                        String::from_utf8_lossy(&channel).into_owned(),
                        String::from_utf8_lossy(&payload).into_owned(),
                    ));
                }
            });
            ready_rx.await.expect("subscribed to sentinel events");
        }
        recorder
    }

    /// Arrival time of the first event on `channel`.
    pub fn first(&self, channel: &str) -> Option<u64> {
        let log = self.0.lock().unwrap();
        log.iter()
            .filter(|(_, c, _)| c == channel)
            .map(|(t, _, _)| *t)
            .min()
    }

    pub fn dump(&self) -> String {
        format!("{:#?}", self.0.lock().unwrap())
    }
}

/// One write as the writer saw it.
pub struct Write {
    /// The unique id pushed.
    pub id: String,
    /// Unix ms of the acknowledgement, `None` when the write failed.
    pub acked_at: Option<u64>,
}

/// Starts `WRITERS` tasks on the core runtime that RPUSH unique ids every 10 ms until `stop`.
pub fn start_writers(
    client: &Client,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<Write>>> {
    let handle = sentinel_recovery::runtime::handle().unwrap();
    (0..WRITERS)
        .map(|w| {
            let client = client.clone();
            let stop = stop.clone();
            handle.spawn(async move {
                let mut log = Vec::new();
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let id = format!("{w}:{n}");
                    n += 1;
                    let r = client.execute(&["RPUSH", "ids", id.as_str()]).await;
                    log.push(Write {
                        id,
                        acked_at: r.is_ok().then(unix_ms),
                    });
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                log
            })
        })
        .collect()
}

/// Stops the writers and checks the history against the ids on the new primary. Returns the
/// acknowledged writes that were lost (id, acknowledged at, unix ms), for checks of their own.
pub async fn check(
    topo: &Topology,
    client: &Client,
    recorder: &Recorder,
    switched_at: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
    writers: Vec<tokio::task::JoinHandle<Vec<Write>>>,
) -> Vec<(String, u64)> {
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut history = Vec::new();
    for w in writers {
        history.extend(w.await.unwrap());
    }
    // The client may switch at the promotion, before any sentinel announces it.
    let first_switch =
        sentinel_recovery_testkit::wait_until(FAILOVER, "+switch-master recorded", || {
            recorder.first("+switch-master")
        })
        .unwrap_or_else(|e| panic!("{e}: {}", recorder.dump()));
    assert!(
        switched_at <= first_switch + 50,
        "client switched {} ms after the first +switch-master; events: {}",
        switched_at as i64 - first_switch as i64,
        recorder.dump()
    );
    // The truth is the list on the primary the sentinels now report.
    let stored: HashSet<String> = match client.execute(&["LRANGE", "ids", "0", "-1"]).await.unwrap()
    {
        sentinel_recovery::Value::Array(items) => items
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes().unwrap()).into_owned())
            .collect(),
        other => panic!("LRANGE gave {other:?}"),
    };
    let (host, port) = topo.reported_primary().unwrap();
    assert_eq!(
        client.topology().unwrap().primary,
        Some(sentinel_recovery::Address::new(host, port)),
        "the client follows the primary the sentinels report"
    );
    let fence_from = recorder
        .first("+failover-state-send-slaveof-noone")
        .unwrap_or(first_switch);
    let acked: Vec<&Write> = history.iter().filter(|w| w.acked_at.is_some()).collect();
    let lost: Vec<(&str, i64)> = acked
        .iter()
        .filter(|w| !stored.contains(&w.id))
        .map(|w| {
            (
                w.id.as_str(),
                w.acked_at.unwrap() as i64 - fence_from as i64,
            )
        })
        .collect();
    let lost_late: Vec<&(&str, i64)> = lost.iter().filter(|(_, dt)| *dt > 100).collect();
    assert!(
        acked.len() > 100,
        "the writers made progress: {} acknowledged",
        acked.len()
    );
    assert!(
        lost_late.is_empty(),
        "{} acknowledged writes lost that were acknowledged more than 100 ms after the \
         promotion began (of {} lost, {} acknowledged): {:?}",
        lost_late.len(),
        lost.len(),
        acked.len(),
        &lost_late[..lost_late.len().min(20)]
    );
    acked
        .iter()
        .filter(|w| !stored.contains(&w.id))
        .map(|w| (w.id.clone(), w.acked_at.unwrap_or_default()))
        .collect()
}

/// The time (unix ms) of the client's `primary_changed` away from `old`.
pub async fn wait_switch(
    events: &mut sentinel_recovery::EventStream,
    old: &sentinel_recovery::Address,
) -> u64 {
    let e = wait_event(
        events,
        FAILOVER,
        |e| matches!(&e.kind, EventKind::PrimaryChanged { new, .. } if new != old),
    )
    .await;
    e.at
}

/// Keeps writing for a moment after the switch, so writes to the new primary are checked too.
pub async fn write_on(client: &Client) {
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while std::time::Instant::now() < deadline {
        client.execute(&["PING"]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
