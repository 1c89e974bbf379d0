//! The data path against real topologies: commands across failovers, demotions and kills,
//! transactions, read routing, the bounded queue and the handshake on reconnect.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use sentinel_recovery::{Client, ErrorCode, EventKind, Value};
use sentinel_recovery_testkit::{refusing_port, sentinel_url, wait_until, Topology, TopologySpec};

const LONG: Duration = Duration::from_secs(40);

/// For tests whose spawned tasks must progress while the test thread waits synchronously.
fn multi_thread_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn writes_during_a_kill_9_failover_end_in_time_and_never_run_twice() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let url = url_with(&topo.url(), "command_timeout_ms=3000");
    multi_thread_rt().block_on(async {
        let client = Client::connect(&url).await.unwrap();
        client.execute(&["SET", "counter", "0"]).await.unwrap();
        let mut events = client.events().unwrap();
        let issued = Arc::new(AtomicU64::new(0));
        let acked = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut writers = Vec::new();
        for _ in 0..8 {
            let (client, issued, acked, stop) =
                (client.clone(), issued.clone(), acked.clone(), stop.clone());
            writers.push(tokio::spawn(async move {
                let mut errors = Vec::new();
                loop {
                    issued.fetch_add(1, Ordering::SeqCst);
                    let started = std::time::Instant::now();
                    let call = client.execute(&["INCR", "counter"]);
                    // Every command ends by itself within its deadline (3 s) plus scheduling slack.
                    let result = tokio::time::timeout(Duration::from_secs(10), call)
                        .await
                        .expect("a command hung");
                    match result {
                        Ok(_) => {
                            acked.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            assert!(
                                matches!(e.code(), ErrorCode::Timeout | ErrorCode::ConnectionLost),
                                "unexpected error {e}"
                            );
                            errors.push((e.code(), started.elapsed()));
                        }
                    }
                    if stop.load(Ordering::SeqCst) {
                        return errors;
                    }
                }
            }));
        }
        wait_until_acked(&acked, 100).await;
        let old = addr(topo.primary());
        topo.primary().kill9();
        let changed = wait_event(&mut events, LONG, |e| new_primary(e).is_some()).await;
        let new = new_primary(&changed).unwrap().clone();
        let before = acked.load(Ordering::SeqCst);
        wait_until_acked(&acked, before + 200).await;
        stop.store(true, Ordering::SeqCst);
        let mut errors = Vec::new();
        for w in writers {
            errors.extend(w.await.unwrap());
        }
        // Writes now land on the new primary.
        let node = topo.node_by_port(new.port).unwrap();
        assert_eq!(node.role().as_deref(), Some("master"));
        assert_ne!(new, old);
        let final_value: u64 = node
            .cmd(&["GET", "counter"])
            .unwrap()
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let (issued, acked) = (issued.load(Ordering::SeqCst), acked.load(Ordering::SeqCst));
        // Acknowledged writes that reached the old primary after the new one's last sync can be
        // lost by Redis' asynchronous replication; the client must never add any.
        assert!(
            final_value <= issued,
            "a command ran twice: counter {final_value} > issued {issued}"
        );
        let lost_by_replication = acked.saturating_sub(final_value);
        eprintln!(
            "issued {issued}, acknowledged {acked}, counter {final_value}, errors {}",
            errors.len()
        );
        assert!(
            lost_by_replication <= 64,
            "too many acknowledged writes missing: {acked} acked, {final_value} kept"
        );
        client.close().await;
    });
}

async fn wait_until_acked(acked: &AtomicU64, n: u64) {
    let deadline = std::time::Instant::now() + LONG;
    while acked.load(Ordering::SeqCst) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "writes stopped making progress at {}",
            acked.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn readonly_after_a_demotion_behind_the_sentinels_back_re_resolves_and_succeeds() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    let url = url_with(&topo.url(), "command_timeout_ms=30000");
    rt().block_on(async {
        let client = Client::connect(&url).await.unwrap();
        client.execute(&["SET", "k", "before"]).await.unwrap();
        let replica = &topo.replicas()[0];
        replica.replicaof_no_one();
        topo.primary().replicaof("127.0.0.1", replica.port());
        // The next write meets READONLY on the demoted node; the client asks the monitor to
        // re-resolve and succeeds once the sentinels name a primary that ROLE confirms.
        let reply = client.execute(&["SET", "k", "after"]).await.unwrap();
        assert_eq!(reply, Value::Simple("OK".into()));
        let t = client.topology().unwrap();
        let primary = topo.node_by_port(t.primary.unwrap().port).unwrap();
        assert_eq!(primary.role().as_deref(), Some("master"));
        assert_eq!(
            primary.cmd(&["GET", "k"]).unwrap().as_str().as_deref(),
            Some("after")
        );
        client.close().await;
    });
}

#[test]
fn client_kill_type_normal_is_survived_and_the_handshake_is_reapplied() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    let url = url_with(&topo.url(), "db=3&client_name=sr-kill-test");
    rt().block_on(async {
        let client = Client::connect(&url).await.unwrap();
        let mut events = client.events().unwrap();
        client.execute(&["SET", "k", "1"]).await.unwrap();
        topo.primary().client_kill_normal();
        wait_event(&mut events, LONG, |e| {
            matches!(e.kind, EventKind::ConnectionRestored { .. })
        })
        .await;
        assert_eq!(client.execute(&["INCR", "k"]).await.unwrap(), Value::Int(2));
        // The new connection selected db 3 and set the name again.
        let mut conn = topo.primary().connect(Duration::from_secs(2)).unwrap();
        conn.call(&["SELECT", "3"]).unwrap();
        assert_eq!(
            conn.call(&["GET", "k"]).unwrap().as_str().as_deref(),
            Some("2")
        );
        let named = topo
            .primary()
            .client_list()
            .into_iter()
            .filter(|c| c.get("name").map(String::as_str) == Some("sr-kill-test"))
            .count();
        assert!(named >= 1, "client name re-applied after the kill");
        client.close().await;
    });
}

#[test]
fn multi_spanning_a_failover_fails_explicitly() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let err = client.execute(&["MULTI"]).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::Config);
        assert!(err.message().contains("transaction"), "{err}");

        // A transaction on an unchanged primary works, WATCH included.
        let mut tx = client.transaction().await.unwrap();
        tx.watch(&["w"]).await.unwrap();
        tx.queue(&["SET", "w", "1"])
            .unwrap()
            .queue(&["INCR", "w"])
            .unwrap();
        let results = tx.exec().await.unwrap().unwrap();
        assert_eq!(results, vec![Value::Simple("OK".into()), Value::Int(2)]);

        let mut events = client.events().unwrap();
        let mut tx = client.transaction().await.unwrap();
        tx.queue(&["INCR", "w"]).unwrap();
        topo.sentinel_failover().unwrap();
        wait_event(&mut events, LONG, |e| new_primary(e).is_some()).await;
        let err = tx.exec().await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::ConnectionLost, "{err}");
        assert!(err.message().contains("nothing was applied"), "{err}");
        // The increment never ran anywhere.
        assert_eq!(
            client.execute(&["GET", "w"]).await.unwrap(),
            Value::Bulk("2".into())
        );
        client.close().await;
    });
}

fn last_command_of(topo: &Topology, port: u16, name: &str) -> Vec<String> {
    topo.node_by_port(port)
        .unwrap()
        .client_list()
        .into_iter()
        .filter(|c| c.get("name").map(String::as_str) == Some(name))
        .filter_map(|c| c.get("cmd").cloned())
        .collect()
}

#[test]
fn read_from_replica_lands_on_replicas_and_falls_back_per_policy() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let url = url_with(
            &topo.url(),
            "read_from=replica&client_name=sr-read-replica&command_timeout_ms=1500",
        );
        let client = Client::connect(&url).await.unwrap();
        client.execute(&["SET", "r", "v"]).await.unwrap();
        topo.wait_replication(LONG).unwrap();
        for _ in 0..4 {
            assert_eq!(
                client.execute(&["GET", "r"]).await.unwrap(),
                Value::Bulk("v".into())
            );
        }
        // Both replicas served reads (round robin); the primary served none.
        for r in topo.replicas() {
            assert!(
                last_command_of(&topo, r.port(), "sr-read-replica").contains(&"get".to_string()),
                "replica {}",
                r.port()
            );
        }
        assert!(
            !last_command_of(&topo, topo.primary().port(), "sr-read-replica")
                .contains(&"get".to_string())
        );

        let url = url_with(
            &topo.url(),
            "read_from=prefer-replica&client_name=sr-read-prefer&command_timeout_ms=1500",
        );
        let prefer = Client::connect(&url).await.unwrap();
        for r in topo.replicas() {
            r.kill9();
        }
        wait_topology(&prefer, LONG, "replicas gone", |t| t.replicas.is_empty()).await;
        // prefer-replica falls back to the primary; replica-only waits and times out.
        assert_eq!(
            prefer.execute(&["GET", "r"]).await.unwrap(),
            Value::Bulk("v".into())
        );
        assert!(
            last_command_of(&topo, topo.primary().port(), "sr-read-prefer")
                .contains(&"get".to_string())
        );
        wait_topology(&client, LONG, "replicas gone", |t| t.replicas.is_empty()).await;
        let err = client.execute(&["GET", "r"]).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
        assert!(err.message().contains("replica"), "{err}");
        // Writes are unaffected by the read policy.
        client.execute(&["SET", "r", "w"]).await.unwrap();
        client.close().await;
        prefer.close().await;
    });
}

#[test]
fn a_full_queue_gives_queue_full_and_waiting_commands_time_out() {
    let url = url_with(
        &sentinel_url("mymaster", &[format!("127.0.0.1:{}", refusing_port())]),
        "queue_size=2&command_timeout_ms=800",
    );
    multi_thread_rt().block_on(async {
        let client = Client::open_url(&url).unwrap();
        let (a, b) = (client.clone(), client.clone());
        let first = tokio::spawn(async move { a.execute(&["GET", "x"]).await });
        let second = tokio::spawn(async move { b.execute(&["GET", "x"]).await });
        // Both wait (no primary); a third finds the queue full at once.
        wait_until(Duration::from_secs(5), "two commands queued", || {
            (client.queued() == 2).then_some(())
        })
        .unwrap();
        let third = client.execute(&["GET", "x"]).await.unwrap_err();
        assert_eq!(third.code(), ErrorCode::QueueFull, "{third}");
        assert!(third.message().contains("queue_size 2"), "{third}");
        for waiting in [first, second] {
            let err = waiting.await.unwrap().unwrap_err();
            assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
            assert!(
                err.message().contains("sentinels_unreachable"),
                "the timeout says why: {err}"
            );
        }
        client.close().await;
    });
}

#[test]
fn blocking_commands_do_not_stall_the_shared_connection_and_blocking_calls_work_from_threads() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    multi_thread_rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let blpop = {
            let c = client.clone();
            tokio::spawn(async move { c.execute(&["BLPOP", "queue", "2"]).await })
        };
        wait_until(
            Duration::from_secs(5),
            "BLPOP blocked on the server",
            || {
                let info = topo.primary().info("clients").ok()?;
                (info.get("blocked_clients").map(String::as_str) == Some("1")).then_some(())
            },
        )
        .unwrap();
        // While BLPOP blocks its own connection, the shared one answers.
        client.execute(&["SET", "x", "1"]).await.unwrap();
        assert!(!blpop.is_finished());
        client.execute(&["RPUSH", "queue", "job"]).await.unwrap();
        let popped = blpop.await.unwrap().unwrap();
        assert_eq!(
            popped,
            Value::Array(vec![Value::Bulk("queue".into()), Value::Bulk("job".into())])
        );

        // The blocking variant, from a plain thread.
        let c = client.clone();
        let got = std::thread::spawn(move || c.execute_blocking(&["GET", "x"]))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(got, Value::Bulk("1".into()));
        client.close().await;
        assert_eq!(
            client.execute(&["GET", "x"]).await.unwrap_err().code(),
            ErrorCode::Closed
        );
    });
}
