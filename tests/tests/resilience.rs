//! Sentinels going away and coming back, quorum loss, and changes to the sentinel and replica sets.

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::{Client, ErrorCode, EventKind};
use sentinel_recovery_testkit::{wait_until, Topology, TopologySpec};

const LONG: Duration = Duration::from_secs(40);

#[test]
fn every_sentinel_down_is_sentinels_unreachable_and_recovers_when_one_returns() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    let url = url_with(
        &topo.url(),
        "check_interval_ms=200&retry_max_ms=400&sentinel_timeout_ms=300",
    );
    rt().block_on(async {
        let client = Client::connect(&url).await.unwrap();
        let mut events = client.events().unwrap();
        let primary = addr(topo.primary());
        for s in topo.sentinels() {
            s.kill9();
        }
        let failed = wait_event(&mut events, LONG, |e| matches!(e.kind, EventKind::DiscoveryFailed { .. })).await;
        let EventKind::DiscoveryFailed { error } = &failed.kind else { unreachable!() };
        assert_eq!(error.code(), ErrorCode::SentinelsUnreachable, "{error}");
        let t = client.topology().unwrap();
        assert_eq!(t.primary, Some(primary.clone()), "the primary is kept while sentinels are away");
        assert!(!t.healthy && t.sentinels.iter().all(|s| !s.up), "{t:?}");
        topo.sentinels()[1].restart().unwrap();
        let up = wait_event(&mut events, LONG, |e| matches!(e.kind, EventKind::SentinelUp { .. })).await;
        assert!(matches!(&up.kind, EventKind::SentinelUp { sentinel } if sentinel.port == topo.sentinels()[1].port()));
        let t = wait_topology(&client, LONG, "healthy again", |t| t.healthy).await;
        assert_eq!(t.primary, Some(primary));
        client.close().await;
    });
}

#[test]
fn without_quorum_the_primary_is_kept_and_retries_back_off() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        quorum: 2,
        ..TopologySpec::default()
    })
    .unwrap();
    let url = url_with(
        &topo.url(),
        "retry_base_ms=100&retry_max_ms=1600&sentinel_timeout_ms=300",
    );
    rt().block_on(async {
        let client = Client::connect(&url).await.unwrap();
        let mut events = client.events().unwrap();
        let primary = addr(topo.primary());
        topo.sentinels()[1].kill9();
        topo.sentinels()[2].kill9();
        topo.primary().kill9();
        // One sentinel left: it can flag s_down but never reach o_down with quorum 2, so no
        // failover happens. Watch for a fixed window and count the discovery attempts.
        let window = Duration::from_secs(8);
        let started = std::time::Instant::now();
        let mut failures = Vec::new();
        while started.elapsed() < window {
            let left = window.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, events.next()).await {
                Ok(Some(e)) => match e.kind {
                    EventKind::DiscoveryFailed { error } => {
                        assert_eq!(error.code(), ErrorCode::NoHealthyPrimary, "{error}");
                        failures.push(e.at);
                    }
                    EventKind::PrimaryChanged { .. } => panic!("switched without quorum: {:?}", e),
                    _ => {}
                },
                Ok(None) => panic!("event stream ended"),
                Err(_) => break,
            }
        }
        let t = client.topology().unwrap();
        assert_eq!(t.primary, Some(primary), "primary kept");
        assert!(!t.healthy);
        // A free-running 100 ms retry would make ~80 attempts in 8 s; backoff to 1.6 s makes ~10.
        assert!(
            (3..=16).contains(&failures.len()),
            "{} attempts: {failures:?}",
            failures.len()
        );
        let gaps: Vec<u64> = failures.windows(2).map(|w| w[1] - w[0]).collect();
        let late_gaps = &gaps[gaps.len().saturating_sub(3)..];
        assert!(
            late_gaps.iter().all(|g| *g >= 500),
            "later retries are spaced out: {gaps:?}"
        );
        client.close().await;
    });
}

#[test]
fn a_sentinel_added_at_runtime_joins_the_list() {
    let mut topo = Topology::start(TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let mut events = client.events().unwrap();
        assert_eq!(client.topology().unwrap().sentinels.len(), 3);
        let added = topo.add_sentinel().unwrap().port();
        let e = wait_event(&mut events, LONG, |e| {
            matches!(e.kind, EventKind::SentinelsChanged { .. })
        })
        .await;
        let EventKind::SentinelsChanged { sentinels } = &e.kind else {
            unreachable!()
        };
        assert!(sentinels.iter().any(|s| s.port == added), "{sentinels:?}");
        let t = client.topology().unwrap();
        assert_eq!(t.sentinels.len(), 4, "{t:?}");
        client.close().await;
    });
}

#[test]
fn the_replica_list_follows_sdown_and_slave_events() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let r0 = addr(&topo.replicas()[0]);
        let r1 = addr(&topo.replicas()[1]);
        // +sdown: a dead replica leaves the list.
        topo.replicas()[0].kill9();
        wait_topology(&client, LONG, "dead replica dropped", |t| {
            !t.replicas.contains(&r0) && t.replicas.contains(&r1)
        })
        .await;
        // -sdown: back on the same port, it returns.
        topo.replicas()[0].restart().unwrap();
        wait_topology(&client, LONG, "restarted replica back", |t| {
            t.replicas.contains(&r0)
        })
        .await;
        // +slave: a replica on a new port appears; its old address goes +sdown and leaves.
        let new_port = sentinel_recovery_testkit::free_port();
        topo.replicas()[1].restart_on_port(new_port).unwrap();
        let t = wait_topology(&client, LONG, "moved replica followed", |t| {
            t.replicas.iter().any(|a| a.port == new_port) && !t.replicas.contains(&r1)
        })
        .await;
        assert!(t.replicas.contains(&r0), "{t:?}");
        wait_until(Duration::from_secs(1), "primary unchanged", || {
            (client.topology().unwrap().primary == Some(addr(topo.primary()))).then_some(())
        })
        .unwrap();
        client.close().await;
    });
}
