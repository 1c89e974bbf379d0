//! Durable acknowledgements (`wait_replicas`, `wait_timeout_ms`) against a real primary and two
//! real replicas: a write succeeds only once enough replicas confirmed it, a write too few
//! confirmed fails with `not_replicated` though it ran, and reads pay nothing.

mod common;

use common::*;
use sentinel_recovery::{Client, ErrorCode, Value};
use sentinel_recovery_testkit::{Topology, TopologySpec};

/// WAIT commands the primary has run so far (`INFO commandstats`).
fn waits(topo: &Topology) -> u64 {
    topo.primary()
        .info("commandstats")
        .unwrap()
        .get("cmdstat_wait")
        .and_then(|s| s.split(',').find_map(|kv| kv.strip_prefix("calls=")))
        .map_or(0, |n| n.parse().unwrap())
}

fn ok(v: &Value) -> bool {
    matches!(v, Value::Simple(s) if s == "OK")
}

/// A topology whose replicas have caught up with the primary.
fn replicated() -> Topology {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    topo.wait_replication(std::time::Duration::from_secs(10))
        .unwrap();
    topo
}

/// Runs `n` commands at once (`command(i)` gives the i-th), each its own task, and returns their
/// results in order.
async fn all_at_once(
    client: &Client,
    n: usize,
    command: impl Fn(usize) -> Vec<String>,
) -> Vec<sentinel_recovery::Result<Value>> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let client = client.clone();
            let args = command(i);
            tokio::spawn(async move { client.execute(&args).await })
        })
        .collect();
    let mut results = Vec::with_capacity(n);
    for task in tasks {
        results.push(task.await.unwrap());
    }
    results
}

#[test]
fn a_write_is_acknowledged_once_its_replicas_confirm_it_and_reads_wait_for_nothing() {
    let topo = replicated();
    rt().block_on(async {
        let url = url_with(&topo.url(), "wait_replicas=2&wait_timeout_ms=5000");
        let client = Client::connect(&url).await.unwrap();
        // The command table is read on the first write.
        assert!(ok(&client.execute(&["SET", "d:a", "1"]).await.unwrap()));
        let before = waits(&topo);
        for _ in 0..5 {
            client.execute(&["GET", "d:a"]).await.unwrap();
        }
        assert_eq!(waits(&topo), before, "a read got a WAIT");

        assert_eq!(
            client.execute(&["INCR", "d:n"]).await.unwrap(),
            Value::Int(1)
        );
        let results = client
            .pipeline(&[
                vec!["SET", "d:b", "2"],
                vec!["GET", "d:b"],
                vec!["RPUSH", "d:l", "x"],
            ])
            .await
            .unwrap();
        assert!(ok(results[0].as_ref().unwrap()));
        assert_eq!(results[1].as_ref().unwrap(), &Value::Bulk("2".into()));
        assert_eq!(results[2].as_ref().unwrap(), &Value::Int(1));
        let mut tx = client.transaction().await.unwrap();
        tx.queue(&["SET", "d:c", "3"]).unwrap();
        let exec = tx.exec().await.unwrap().unwrap();
        assert!(ok(&exec[0]));
        // One WAIT per send that wrote: INCR, the pipeline (one after its last write), EXEC.
        assert_eq!(waits(&topo), before + 3);
        // Each replica has every acknowledged write.
        for replica in topo.replicas() {
            let got = replica.cmd(&["GET", "d:c"]).unwrap();
            assert_eq!(got.as_str().as_deref(), Some("3"), "{}", replica.addr());
        }
        client.close().await;
    });
}

#[test]
fn a_write_too_few_replicas_confirm_fails_as_not_replicated_though_it_ran() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        // Two replicas exist; three are asked for.
        let url = url_with(&topo.url(), "wait_replicas=3&wait_timeout_ms=200");
        let client = Client::connect(&url).await.unwrap();
        let err = client.execute(&["SET", "n:a", "1"]).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::NotReplicated, "{err}");
        assert!(err.message().contains("of the 3 replicas"), "{err}");
        assert!(err.message().contains("200 ms"), "{err}");
        // It ran: the primary has it (and the error said so).
        assert_eq!(
            client.execute(&["GET", "n:a"]).await.unwrap(),
            Value::Bulk("1".into())
        );
        // In a pipeline, each write fails and each read keeps its reply.
        let results = client
            .pipeline(&[vec!["SET", "n:b", "2"], vec!["GET", "n:a"]])
            .await
            .unwrap();
        assert_eq!(
            results[0].as_ref().unwrap_err().code(),
            ErrorCode::NotReplicated
        );
        assert_eq!(results[1].as_ref().unwrap(), &Value::Bulk("1".into()));
        let mut tx = client.transaction().await.unwrap();
        tx.queue(&["SET", "n:c", "3"]).unwrap();
        let err = tx.exec().await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::NotReplicated, "{err}");
        client.close().await;
    });
}

#[test]
fn replicas_that_stop_answering_turn_writes_into_not_replicated_until_they_are_back() {
    let topo = replicated();
    rt().block_on(async {
        let url = url_with(&topo.url(), "wait_replicas=1&wait_timeout_ms=300");
        let client = Client::connect(&url).await.unwrap();
        assert!(ok(&client.execute(&["SET", "p:a", "1"]).await.unwrap()));
        for replica in topo.replicas() {
            replica.stop();
        }
        let err = client.execute(&["SET", "p:b", "2"]).await.unwrap_err();
        for replica in topo.replicas() {
            replica.cont();
        }
        assert_eq!(err.code(), ErrorCode::NotReplicated, "{err}");
        assert!(err.message().contains("0 of the 1 replicas"), "{err}");
        // Back: the next write is confirmed again (the replicas catch up within the timeout).
        let mut last = None;
        for _ in 0..50 {
            match client.execute(&["SET", "p:c", "3"]).await {
                Ok(v) => {
                    last = Some(Ok(v));
                    break;
                }
                Err(e) => last = Some(Err(e)),
            }
        }
        assert!(ok(&last.unwrap().unwrap()));
        client.close().await;
    });
}

/// Group commit: writes in flight together on one connection share one WAIT sent after the last
/// of them, so 64 at once need far fewer than 64; each is acknowledged only once its replicas
/// have it (both replicas hold every acknowledged write).
#[test]
fn writes_in_flight_together_share_a_wait_and_each_is_confirmed() {
    let topo = replicated();
    rt().block_on(async {
        let url = url_with(&topo.url(), "wait_replicas=2&wait_timeout_ms=5000");
        let client = Client::connect(&url).await.unwrap();
        // The command table is read on the first write.
        assert!(ok(&client.execute(&["SET", "g:first", "1"]).await.unwrap()));
        let before = waits(&topo);
        let results = all_at_once(&client, 64, |i| {
            vec!["SET".into(), format!("g:{i}"), "v".into()]
        })
        .await;
        for (i, r) in results.iter().enumerate() {
            assert!(ok(r.as_ref().unwrap()), "write {i}: {r:?}");
        }
        let used = waits(&topo) - before;
        assert!(
            (1..64).contains(&used),
            "{used} WAITs for 64 writes in flight together"
        );
        for replica in topo.replicas() {
            for i in 0..64 {
                let got = replica.cmd(&["GET", &format!("g:{i}")]).unwrap();
                assert_eq!(
                    got.as_str().as_deref(),
                    Some("v"),
                    "{} g:{i}",
                    replica.addr()
                );
            }
        }
        client.close().await;
    });
}

/// A WAIT that counts fewer replicas than asked fails every write it covered as
/// `not_replicated`, never a success, and each of them ran (nothing is sent twice).
#[test]
fn a_short_wait_fails_every_write_it_covered() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        // Two replicas exist; three are asked for.
        let url = url_with(&topo.url(), "wait_replicas=3&wait_timeout_ms=200");
        let client = Client::connect(&url).await.unwrap();
        let _ = client.execute(&["SET", "s:first", "1"]).await;
        let results = all_at_once(&client, 64, |i| vec!["INCR".into(), format!("s:{i}")]).await;
        for (i, r) in results.into_iter().enumerate() {
            let err = r.expect_err("a write its WAIT did not confirm succeeded");
            assert_eq!(err.code(), ErrorCode::NotReplicated, "write {i}: {err}");
        }
        for i in 0..64 {
            assert_eq!(
                client.execute(&["GET", &format!("s:{i}")]).await.unwrap(),
                Value::Bulk("1".into()),
                "s:{i} ran exactly once"
            );
        }
        client.close().await;
    });
}

/// Over RESP3 the server's command table is read too (Redis sends COMMAND's key specs as sets of
/// maps, which the decoder once refused, leaving the table empty): a read-only command that only
/// the table knows as one (`OBJECT ENCODING`) gets no WAIT, a write does.
#[test]
fn over_resp3_the_command_table_is_read_and_spares_reads_their_wait() {
    let topo = replicated();
    rt().block_on(async {
        let url = url_with(
            &topo.url(),
            "protocol=3&wait_replicas=1&wait_timeout_ms=5000",
        );
        let client = Client::connect(&url).await.unwrap();
        // The command table is read on the first write.
        assert!(ok(&client.execute(&["SET", "t:a", "1"]).await.unwrap()));
        let before = waits(&topo);
        client
            .execute(&["OBJECT", "ENCODING", "t:a"])
            .await
            .unwrap();
        assert_eq!(waits(&topo), before, "OBJECT ENCODING got a WAIT");
        assert!(ok(&client.execute(&["SET", "t:b", "2"]).await.unwrap()));
        assert_eq!(waits(&topo), before + 1);
        client.close().await;
    });
}
