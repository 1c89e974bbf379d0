//! Following primary changes on real topologies: crashes, manual failovers, stops, stale sentinels.

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::{Address, Client, ErrorCode, EventKind};
use sentinel_recovery_testkit::{sentinel_url, Topology, TopologySpec};

const FAILOVER: Duration = Duration::from_secs(40);

/// The reported primary once the sentinels agree it moved away from `old`.
fn reported_new_primary(topo: &Topology, old: &Address) -> Address {
    let (host, port) = topo
        .wait_for_reported_primary(|(_, p)| *p != old.port, FAILOVER)
        .unwrap();
    Address::new(host, port)
}

#[test]
fn kill_9_of_the_primary_is_followed_to_the_reported_primary() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let mut events = client.events().unwrap();
        let old = addr(topo.primary());
        topo.primary().kill9();
        let lost = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::ConnectionLost { .. })
        })
        .await;
        assert!(matches!(&lost.kind, EventKind::ConnectionLost { address } if *address == old));
        let changed = wait_event(&mut events, FAILOVER, |e| new_primary(e).is_some()).await;
        let EventKind::PrimaryChanged { old: from, new } = &changed.kind else {
            unreachable!()
        };
        assert_eq!(from.as_ref(), Some(&old));
        assert_eq!(*new, reported_new_primary(&topo, &old));
        assert!(
            topo.replicas().iter().any(|r| addr(r) == *new),
            "a former replica was promoted"
        );
        assert_eq!(changed.service, "mymaster");
        let t = client.topology().unwrap();
        assert_eq!(t.primary.as_ref(), Some(new));
        assert!(t.healthy);
        assert!(
            !t.replicas.contains(new),
            "the new primary is not listed as a replica: {t:?}"
        );
        client.close().await;
    });
}

#[test]
fn sentinel_failover_is_followed_and_the_old_primary_rejoins_as_replica() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let mut events = client.events().unwrap();
        let old = addr(topo.primary());
        topo.sentinel_failover().unwrap();
        let changed = wait_event(&mut events, FAILOVER, |e| new_primary(e).is_some()).await;
        let new = new_primary(&changed).unwrap().clone();
        assert_ne!(new, old);
        assert_eq!(new, reported_new_primary(&topo, &old));
        // The demoted primary comes back as a replica of the new one (+convert-to-slave / +slave).
        wait_topology(&client, FAILOVER, "old primary listed as replica", |t| {
            t.replicas.contains(&old)
        })
        .await;
        let t = client.topology().unwrap();
        assert!(t.epoch >= 1, "the failover raised the config epoch: {t:?}");
        client.close().await;
    });
}

#[test]
fn a_sigstopped_primary_is_followed_after_the_failover() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let mut events = client.events().unwrap();
        let old = addr(topo.primary());
        topo.primary().stop();
        let changed = wait_event(&mut events, FAILOVER, |e| new_primary(e).is_some()).await;
        let new = new_primary(&changed).unwrap().clone();
        assert_eq!(new, reported_new_primary(&topo, &old));
        topo.primary().cont();
        // Once resumed, the old primary is demoted by the sentinels; the client stays on the new one.
        wait_topology(
            &client,
            FAILOVER,
            "resumed primary listed as replica",
            |t| t.replicas.contains(&old),
        )
        .await;
        assert_eq!(client.topology().unwrap().primary, Some(new));
        client.close().await;
    });
}

#[test]
fn a_stale_sentinel_never_makes_the_client_switch_to_a_replica() {
    let mut topo = Topology::start(TopologySpec::default()).unwrap();
    let old = addr(topo.primary());
    topo.sentinel_failover().unwrap();
    let new = reported_new_primary(&topo, &old);
    sentinel_recovery_testkit::wait_until(FAILOVER, "old primary demoted", || {
        (topo.primary().role().as_deref() == Some("slave")).then_some(())
    })
    .unwrap();
    // Silence the up-to-date sentinels, so the restarted one can't hear their newer epoch yet.
    for s in topo.sentinels() {
        s.stop();
    }
    let stale = topo
        .start_stale_sentinel(("127.0.0.1", old.port), &[])
        .unwrap()
        .addr();
    let stale_node = topo.stale_sentinels()[0].port();
    let mut endpoints = vec![stale.clone()];
    endpoints.extend(topo.sentinels().iter().map(|s| s.addr()));
    let url = url_with(
        &sentinel_url("mymaster", &endpoints),
        "sentinel_timeout_ms=500&retry_max_ms=500",
    );
    rt().block_on(async {
        let client = Client::open_url(&url).unwrap();
        let mut events = client.events().unwrap();
        // The first round's verdict, as its event tells it.
        let failed = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::DiscoveryFailed { .. })
        })
        .await;
        let EventKind::DiscoveryFailed { error: err } = failed.kind else {
            unreachable!()
        };
        assert_eq!(err.code(), ErrorCode::NoHealthyPrimary, "{err}");
        assert!(err.message().contains("stale"), "{err}");
        // The stale answer was really in effect: the sentinel still names the old primary.
        let believed = topo.stale_sentinels()[0]
            .get_master_addr("mymaster")
            .unwrap();
        assert_eq!(
            believed,
            Some(("127.0.0.1".to_string(), old.port)),
            "sentinel {stale_node} is stale"
        );
        assert_eq!(client.topology().unwrap().primary, None);
        for s in topo.sentinels() {
            s.cont();
        }
        let changed = wait_event(&mut events, FAILOVER, |e| new_primary(e).is_some()).await;
        assert_eq!(
            new_primary(&changed),
            Some(&new),
            "only the real primary is ever taken"
        );
        client.close().await;
    });
}
