//! Writes through failovers, judged by a checker over the recorded history: 8 writers push unique
//! ids while the primary is failed over; afterwards every id the client acknowledged later than
//! 100 ms after the leader began promoting a replica must be on the new primary, and the client
//! must have switched no later than 50 ms after the first sentinel announced the switch.
//!
//! Sentinel events are recorded by this test's own subscriptions to every sentinel, with the
//! time each arrived, independent of the client under test.

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use sentinel_recovery::monitor::unix_ms;
use sentinel_recovery::resp::{ConnectOptions, Connection};
use sentinel_recovery::{Client, EventKind};
use sentinel_recovery_testkit::{sentinel_url, FakeSentinel, Topology, TopologySpec};

const FAILOVER: Duration = Duration::from_secs(40);
const WRITERS: usize = 8;

/// Sentinel events as this test saw them: (unix ms of arrival, channel, payload).
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<(u64, String, String)>>>);

impl Recorder {
    async fn start(topo: &Topology) -> Recorder {
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
    fn first(&self, channel: &str) -> Option<u64> {
        let log = self.0.lock().unwrap();
        log.iter()
            .filter(|(_, c, _)| c == channel)
            .map(|(t, _, _)| *t)
            .min()
    }

    fn dump(&self) -> String {
        format!("{:#?}", self.0.lock().unwrap())
    }
}

/// One write as the writer saw it.
struct Write {
    id: String,
    acked_at: Option<u64>,
}

/// Starts `WRITERS` tasks on the core runtime that RPUSH unique ids every 10 ms until `stop`.
fn start_writers(
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

/// Stops the writers and checks the history against the ids on the new primary.
async fn check(
    topo: &Topology,
    client: &Client,
    recorder: &Recorder,
    switched_at: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
    writers: Vec<tokio::task::JoinHandle<Vec<Write>>>,
) {
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut history = Vec::new();
    for w in writers {
        history.extend(w.await.unwrap());
    }
    let first_switch = recorder
        .first("+switch-master")
        .unwrap_or_else(|| panic!("no +switch-master recorded: {}", recorder.dump()));
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
}

/// The time (unix ms) of the client's `primary_changed` away from `old`.
async fn wait_switch(
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
async fn write_on(client: &Client) {
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while std::time::Instant::now() < deadline {
        client.execute(&["PING"]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn a_manual_failover_loses_no_write_acknowledged_after_the_promotion_began() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let recorder = Recorder::start(&topo).await;
        let client = Client::connect(&topo.url()).await.unwrap();
        let mut events = client.events().unwrap();
        let old = addr(topo.primary());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers = start_writers(&client, stop.clone());
        tokio::time::sleep(Duration::from_millis(300)).await;
        topo.sentinel_failover().unwrap();
        let started = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::FailoverStarted { .. })
        })
        .await;
        assert!(
            matches!(&started.kind, EventKind::FailoverStarted { primary, .. } if *primary == old)
        );
        let switched_at = wait_switch(&mut events, &old).await;
        write_on(&client).await;
        topo.wait_for_reported_primary(|(_, p)| *p != old.port, FAILOVER)
            .unwrap();
        check(&topo, &client, &recorder, switched_at, stop, writers).await;
        client.close().await;
    });
}

#[test]
fn a_primary_paused_past_down_after_loses_no_write_when_it_comes_back() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let recorder = Recorder::start(&topo).await;
        let client = Client::connect(&topo.url()).await.unwrap();
        let mut events = client.events().unwrap();
        let old = addr(topo.primary());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers = start_writers(&client, stop.clone());
        tokio::time::sleep(Duration::from_millis(300)).await;
        topo.primary().stop();
        // Continue it while the leader is promoting a replica: the queued writes reach it then.
        sentinel_recovery_testkit::wait_until(FAILOVER, "promotion started", || {
            recorder
                .first("+failover-state-send-slaveof-noone")
                .map(|_| ())
        })
        .unwrap_or_else(|e| {
            panic!(
                "{e}; recorded: {}; sentinels: {}",
                recorder.dump(),
                topo.sentinel_log_tails(30)
            )
        });
        topo.primary().cont();
        let switched_at = wait_switch(&mut events, &old).await;
        write_on(&client).await;
        topo.wait_for_reported_primary(|(_, p)| *p != old.port, FAILOVER)
            .unwrap();
        check(&topo, &client, &recorder, switched_at, stop, writers).await;
        client.close().await;
    });
}

#[test]
fn a_kill_9_is_followed_at_the_switch_even_with_hung_sentinels_in_the_list() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let hung: Vec<FakeSentinel> = (0..3).map(|_| FakeSentinel::hanging()).collect();
    let mut endpoints: Vec<String> = hung.iter().map(|h| h.addr()).collect();
    endpoints.extend(topo.sentinels().iter().map(|s| s.addr()));
    let url = sentinel_url("mymaster", &endpoints);
    rt().block_on(async {
        let recorder = Recorder::start(&topo).await;
        let client = Client::connect(&url).await.unwrap();
        let mut events = client.events().unwrap();
        let old = addr(topo.primary());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers = start_writers(&client, stop.clone());
        tokio::time::sleep(Duration::from_millis(300)).await;
        topo.primary().kill9();
        let switched_at = wait_switch(&mut events, &old).await;
        write_on(&client).await;
        check(&topo, &client, &recorder, switched_at, stop, writers).await;
        client.close().await;
    });
}

#[test]
fn an_aborted_failover_resumes_on_the_old_primary_with_nothing_lost() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let recorder = Recorder::start(&topo).await;
        let client = Client::connect(&url_with(&topo.url(), "command_timeout_ms=15000"))
            .await
            .unwrap();
        let mut events = client.events().unwrap();
        let old = addr(topo.primary());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers = start_writers(&client, stop.clone());
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The leader picks a replica and sends it SLAVEOF NO ONE, which a paused replica never
        // processes: the promotion times out (failover-timeout) and the failover is aborted.
        topo.sentinel_failover().unwrap();
        for r in topo.replicas() {
            r.stop();
        }
        let started = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::FailoverStarted { .. })
        })
        .await;
        assert!(
            matches!(&started.kind, EventKind::FailoverStarted { primary, .. } if *primary == old)
        );
        sentinel_recovery_testkit::wait_until(FAILOVER, "failover aborted", || {
            recorder.first("-failover-abort-slave-timeout").map(|_| ())
        })
        .unwrap_or_else(|e| panic!("{e}; recorded: {}", recorder.dump()));
        // Writes flow again, to the old primary, before the replicas come back.
        let mut resumed = client.events().unwrap();
        client
            .execute(&["RPUSH", "ids", "after-abort"])
            .await
            .unwrap();
        for r in topo.replicas() {
            r.cont();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut history = Vec::new();
        for w in writers {
            history.extend(w.await.unwrap());
        }
        while let Some(e) = resumed.try_next() {
            assert!(
                !matches!(e.kind, EventKind::PrimaryChanged { .. }),
                "no switch after the abort: {e:?}"
            );
        }
        assert_eq!(client.topology().unwrap().primary, Some(old.clone()));
        let stored: HashSet<String> = match topo.primary().cmd(&["LRANGE", "ids", "0", "-1"]) {
            Ok(sentinel_recovery_testkit::Reply::Array(items)) => items
                .into_iter()
                .map(|item| match item {
                    sentinel_recovery_testkit::Reply::Bulk(b) => {
                        String::from_utf8_lossy(&b).into_owned()
                    }
                    other => panic!("LRANGE item {other:?}"),
                })
                .collect(),
            other => panic!("LRANGE on the old primary: {other:?}"),
        };
        let acked: Vec<&Write> = history.iter().filter(|w| w.acked_at.is_some()).collect();
        let lost: Vec<&str> = acked
            .iter()
            .filter(|w| !stored.contains(&w.id))
            .map(|w| w.id.as_str())
            .collect();
        assert!(acked.len() > 50, "writes made progress: {}", acked.len());
        assert!(
            lost.is_empty(),
            "{} acknowledged writes lost: {:?}",
            lost.len(),
            lost
        );
        client.close().await;
    });
}
