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

/// `blocked_clients` of the primary's `INFO clients`, asked through `observer`.
async fn blocked_clients(observer: &Client) -> u64 {
    let info = observer.execute(&["INFO", "clients"]).await.unwrap();
    let text = String::from_utf8_lossy(info.as_bytes().expect("INFO answers text")).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no blocked_clients in {text:?}"))
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

        // 4. A command still on its way when its client closes holds the monitor, but the
        // monitor stops at that close all the same and is not handed to the next client (which
        // would find it already discovered: no discovery, no records of one). The observer has
        // a monitor of its own (a different connect timeout).
        let observer = Client::connect(&url_with(&topo.url(), "connect_timeout_ms=4321"))
            .await
            .unwrap();
        let client = Client::connect(&topo.url()).await.unwrap();
        let blocked = {
            let client = client.clone();
            tokio::spawn(async move {
                let args = ["BLPOP", "lifecycle:never", "0"];
                client.execute_timeout(&args, Duration::from_secs(60)).await
            })
        };
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while blocked_clients(&observer).await == 0 {
            assert!(std::time::Instant::now() < until, "BLPOP never blocked");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(sentinel_recovery::monitor::live_monitors(), 2);
        client.close().await;
        assert_eq!(
            sentinel_recovery::monitor::live_monitors(),
            1,
            "the closed client's monitor still runs while its command is on its way"
        );
        let ended = tokio::time::timeout(Duration::from_secs(10), blocked)
            .await
            .expect("the blocked command ends after close")
            .unwrap();
        assert!(
            ended.is_err(),
            "BLPOP on a closed client answered {ended:?}"
        );
        observer.close().await;
        assert_eq!(sentinel_recovery::monitor::live_monitors(), 0);
        wait_for_baseline(baseline, "tasks after a close with a command on its way");
    });
}
