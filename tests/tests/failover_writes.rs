//! Writes through failovers, judged by a checker over the recorded history: 8 writers push unique
//! ids while the primary is failed over; afterwards every id the client acknowledged later than
//! 100 ms after the leader began promoting a replica must be on the new primary (the margin is
//! for this test's own view of the events, which may come later or sooner than the client's),
//! and the client must have switched no later than 50 ms after the first sentinel announced the
//! switch. A primary paused past down-after that wakes up during the promotion must have none
//! of the writes it runs then acknowledged.
//!
//! The recorder, writers and checker are in `common/history.rs`.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::history::*;
use common::*;
use sentinel_recovery::monitor::unix_ms;
use sentinel_recovery::{Client, EventKind};
use sentinel_recovery_testkit::{sentinel_url, FakeSentinel, Topology, TopologySpec};

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
        // The client fences the primary when the leader starts promoting a replica.
        let fenced = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::FailoverStarted { .. })
        })
        .await;
        assert!(
            matches!(&fenced.kind, EventKind::FailoverStarted { primary, .. } if *primary == old)
        );
        // It wakes up a little later, still before its demotion, and runs the writes queued in
        // its sockets: the promoted replica will never have them, so none may be acknowledged.
        // (60 ms: within the 100 ms during which such replies used to count as successes.)
        tokio::time::sleep(Duration::from_millis(60)).await;
        let continued_at = unix_ms();
        topo.primary().cont();
        let switched_at = wait_switch(&mut events, &old).await;
        write_on(&client).await;
        topo.wait_for_reported_primary(|(_, p)| *p != old.port, FAILOVER)
            .unwrap();
        let lost = check(&topo, &client, &recorder, switched_at, stop, writers).await;
        let after_waking: Vec<_> = lost.iter().filter(|(_, at)| *at >= continued_at).collect();
        assert!(
            after_waking.is_empty(),
            "writes the paused primary acknowledged after waking up, lost: {after_waking:?}"
        );
        client.close().await;
    });
}

#[test]
fn a_kill_9_is_followed_at_the_switch_even_with_hung_sentinels_in_the_list() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let hung: Vec<FakeSentinel> = (0..3).map(|_| FakeSentinel::hanging()).collect();
    let mut endpoints: Vec<String> = hung.iter().map(|h| h.addr()).collect();
    endpoints.extend(topo.sentinels().iter().map(|s| s.addr()));
    // Rounds last until the hung endpoints' deadline: long ones make sure the switch is
    // announced while a round is waiting for them.
    let url = url_with(
        &sentinel_url("mymaster", &endpoints),
        "sentinel_timeout_ms=2000",
    );
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
        // The client switches at the promotion, possibly before any sentinel announced it:
        // the checker needs the announcement.
        topo.wait_for_reported_primary(|(_, p)| *p != old.port, FAILOVER)
            .unwrap();
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
