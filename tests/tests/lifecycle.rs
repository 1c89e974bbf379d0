//! Closing is clean: no core task keeps running and no event arrives after `close` returns, also
//! when a discovery round or a switch is in flight. One test, because it counts every task alive
//! on the process-wide runtime.

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::{Client, EventKind};
use sentinel_recovery_testkit::{sentinel_url, wait_until, FakeSentinel, Topology, TopologySpec};

fn alive_tasks() -> usize {
    sentinel_recovery::runtime::handle()
        .unwrap()
        .metrics()
        .num_alive_tasks()
}

fn wait_for_baseline(baseline: usize, what: &str) {
    wait_until(Duration::from_secs(10), what, || {
        (alive_tasks() <= baseline).then_some(())
    })
    .unwrap_or_else(|e| {
        panic!("{e}: {} tasks alive, {baseline} before", alive_tasks());
    });
}

#[test]
fn close_is_clean_during_discovery_and_during_a_switch() {
    let baseline = alive_tasks();
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        // 1. Close while a round is stuck waiting on sentinels that never answer.
        let hung = FakeSentinel::hanging();
        let url = url_with(
            &sentinel_url("mymaster", &[hung.addr()]),
            "sentinel_timeout_ms=60000&connect_timeout_ms=60000",
        );
        let client = Client::open_url(&url).unwrap();
        let mut events = client.events().unwrap();
        wait_until(Duration::from_secs(10), "round under way", || {
            (hung.connections_accepted() > 0).then_some(())
        })
        .unwrap();
        tokio::time::timeout(Duration::from_secs(5), client.close())
            .await
            .expect("close returns promptly");
        assert!(events.next().await.is_none(), "no event after close");
        wait_for_baseline(baseline, "tasks after closing mid-discovery");
        assert_eq!(sentinel_recovery::monitor::live_monitors(), 0);

        // 2. Close in the middle of a failover: rounds and retries are running.
        let client = Client::connect(&url_with(&topo.url(), "retry_base_ms=10"))
            .await
            .unwrap();
        let mut events = client.events().unwrap();
        topo.primary().kill9();
        wait_event(&mut events, Duration::from_secs(20), |e| {
            matches!(e.kind, EventKind::DiscoveryFailed { .. })
        })
        .await;
        client.close().await;
        assert!(events.next().await.is_none(), "no event after close");
        assert!(events.try_next().is_none());
        wait_for_baseline(baseline, "tasks after closing mid-switch");

        // 3. A client opened again afterwards works (a fresh monitor) once the failover is done.
        let client = Client::open_url(&topo.url()).unwrap();
        let t = wait_topology(&client, Duration::from_secs(40), "new primary", |t| {
            t.healthy && t.primary != Some(addr(topo.primary()))
        })
        .await;
        assert!(t.primary.is_some());
        client.close().await;
        client.close().await; // idempotent
        wait_for_baseline(baseline, "tasks after the last close");
    });
}
