//! Calm: no fault of a node or a reply makes the client ask the sentinels faster than its
//! backoff, a node that failed is passed over, and errors a reconnect cannot fix fail at once.
//!
//! Sentinel traffic is read off the sentinels' own `total_commands_processed`, less the rate the
//! sentinels cause among themselves (measured first, with the client idle).

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::*;
use sentinel_recovery::{Client, ErrorCode, EventKind, Value};
use sentinel_recovery_testkit::{wait_until, Topology, TopologySpec};

const LONG: Duration = Duration::from_secs(30);

fn sentinel_commands(topo: &Topology) -> u64 {
    topo.sentinels()
        .iter()
        .map(|s| {
            s.info("stats").unwrap()["total_commands_processed"]
                .parse::<u64>()
                .unwrap()
        })
        .sum()
}

/// Sentinel commands per second while `work` runs, less the idle rate measured just before.
async fn client_rate<F: std::future::Future<Output = ()>>(topo: &Topology, work: F) -> f64 {
    let idle_for = Duration::from_secs(2);
    let before = sentinel_commands(topo);
    tokio::time::sleep(idle_for).await;
    let idle = (sentinel_commands(topo) - before) as f64 / idle_for.as_secs_f64();
    let start = Instant::now();
    let before = sentinel_commands(topo);
    work.await;
    let busy = (sentinel_commands(topo) - before) as f64 / start.elapsed().as_secs_f64();
    busy - idle
}

/// Makes `replica` answer MASTERDOWN to reads while the sentinels still list it as a healthy
/// replica: stale data refused, and its primary replaced by a listener that never answers.
fn make_masterdown(replica: &sentinel_recovery_testkit::Node, blackhole: &TcpListener) {
    replica
        .cmd(&["CONFIG", "SET", "replica-serve-stale-data", "no"])
        .unwrap();
    let port = blackhole.local_addr().unwrap().port().to_string();
    replica
        .cmd(&["REPLICAOF", "127.0.0.1", port.as_str()])
        .unwrap();
    wait_until(LONG, "replica answers MASTERDOWN", || {
        match replica.cmd(&["GET", "k"]) {
            Err(e) if e.to_string().contains("MASTERDOWN") => Some(()),
            _ => None,
        }
    })
    .unwrap();
}

#[test]
fn a_masterdown_replica_keeps_the_sentinels_calm_and_reads_go_elsewhere() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let blackhole = TcpListener::bind("127.0.0.1:0").unwrap();
    rt().block_on(async {
        let prefer = Client::connect(&url_with(&topo.url(), "read_from=prefer-replica"))
            .await
            .unwrap();
        let replica_only = Client::connect(&url_with(&topo.url(), "read_from=replica"))
            .await
            .unwrap();
        prefer.execute(&["SET", "k", "v"]).await.unwrap();
        topo.wait_replication(LONG).unwrap();
        let [bad, good] = topo.replicas() else {
            panic!("two replicas")
        };
        make_masterdown(bad, &blackhole);
        // Still listed as healthy by the sentinels: the client must find out by itself.
        assert!(prefer.topology().unwrap().replicas.contains(&addr(bad)));

        let reads = |client: Client| async move {
            let until = Instant::now() + Duration::from_secs(3);
            let mut n = 0;
            while Instant::now() < until {
                let v = client.execute(&["GET", "k"]).await;
                assert_eq!(v.unwrap(), Value::Bulk("v".into()), "read {n}");
                n += 1;
            }
            assert!(n > 100, "reads kept flowing: {n}");
        };
        let rate = client_rate(&topo, reads(prefer.clone())).await;
        assert!(rate < 20.0, "prefer-replica: {rate:.1} sentinel commands/s");
        let rate = client_rate(&topo, reads(replica_only.clone())).await;
        assert!(rate < 20.0, "replica: {rate:.1} sentinel commands/s");

        // With the good replica gone too, prefer-replica reads come from the primary.
        good.kill9();
        let rate = client_rate(&topo, reads(prefer.clone())).await;
        assert!(
            rate < 20.0,
            "prefer-replica, primary only: {rate:.1} sentinel commands/s"
        );
        prefer.close().await;
        replica_only.close().await;
    });
}

#[test]
fn a_handshake_error_fails_commands_at_once_with_the_servers_error() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&url_with(&topo.url(), "db=99999&command_timeout_ms=5000"))
            .await
            .unwrap();
        let mut rate_ok = false;
        let rate = client_rate(&topo, async {
            let started = Instant::now();
            let err = client.execute(&["SET", "a", "b"]).await.unwrap_err();
            assert_eq!(err.code(), ErrorCode::Server, "{err}");
            assert!(err.message().contains("DB index is out of range"), "{err}");
            assert!(
                started.elapsed() < Duration::from_secs(4),
                "failed at once, not at the deadline: {:?}",
                started.elapsed()
            );
            // Again: still the server's error, no reconnect storm in between.
            for _ in 0..50 {
                let err = client.execute(&["GET", "a"]).await.unwrap_err();
                assert_eq!(err.code(), ErrorCode::Server, "{err}");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            rate_ok = true;
        })
        .await;
        assert!(rate_ok);
        assert!(rate < 20.0, "{rate:.1} sentinel commands/s");
        client.close().await;
    });
}

#[test]
fn replicas_changed_fires_for_set_changes_only() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&url_with(&topo.url(), "check_interval_ms=100"))
            .await
            .unwrap();
        wait_topology(&client, LONG, "both replicas listed", |t| {
            t.replicas.len() == 2
        })
        .await;
        let mut events = client.events().unwrap();
        // Many rounds, answered by whichever sentinel is first, each with its own order.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mut changes = Vec::new();
        while let Some(e) = events.try_next() {
            if matches!(e.kind, EventKind::ReplicasChanged { .. }) {
                changes.push(e);
            }
        }
        assert!(changes.is_empty(), "no replica came or went: {changes:#?}");
        client.close().await;
    });
}

#[test]
fn connect_during_a_failover_waits_for_the_new_primary() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let old = addr(topo.primary());
    topo.primary().kill9();
    std::thread::sleep(Duration::from_millis(300));
    rt().block_on(async {
        let client = Client::connect(&url_with(&topo.url(), "command_timeout_ms=20000"))
            .await
            .unwrap();
        let primary = client.topology().unwrap().primary.unwrap();
        assert_ne!(primary, old, "the new primary, not the dead one");
        client.execute(&["SET", "after", "failover"]).await.unwrap();
        client.close().await;
    });
}

#[test]
fn a_one_shot_client_asks_one_round_and_subscribes_to_nothing() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let ours = |topo: &Topology| -> Vec<std::collections::HashMap<String, String>> {
        topo.sentinels()
            .iter()
            .flat_map(|s| s.client_list())
            .filter(|c| c.get("name").map(String::as_str) == Some("sr-oneshot"))
            .collect()
    };
    let subscribers = |topo: &Topology| -> usize {
        topo.sentinels()
            .iter()
            .map(|s| {
                s.client_list()
                    .iter()
                    .filter(|c| c.get("name").map(String::as_str) == Some("sr-oneshot"))
                    .filter(|c| c.get("sub").map(String::as_str) != Some("0"))
                    .count()
            })
            .sum()
    };
    rt().block_on(async {
        let client = Client::connect(&url_with(
            &topo.url(),
            "sentinel_events=false&client_name=sr-oneshot",
        ))
        .await
        .unwrap();
        client.execute(&["SET", "k", "v"]).await.unwrap();
        assert_eq!(subscribers(&topo), 0, "no event subscription");
        let open = ours(&topo);
        assert_eq!(open.len(), 3, "one connection per sentinel: {open:#?}");
        client.close().await;
    });
}
