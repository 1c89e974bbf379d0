//! Valkey 9's coordinated failover (`SENTINEL FAILOVER <service> COORDINATED`): the leader sends
//! `FAILOVER TO <replica>` to the primary, which pauses writes, lets the replica catch up and hands
//! over. Nothing the client acknowledged may be lost, and the client must switch no later than
//! 50 ms after the first `+switch-master`.
//!
//! Servers without the argument (Redis 7.0, Valkey 8) answer the command with an arity error:
//! the test then says so and returns.

mod common;

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::history::*;
use common::*;
use sentinel_recovery::{Client, EventKind, Value};
use sentinel_recovery_testkit::{wait_until, TestkitError, Topology, TopologySpec};

/// What the sentinels answered to `SENTINEL FAILOVER <service> COORDINATED`.
enum Coordinated {
    Accepted,
    /// The server does not know the argument; the reply, for the skip message.
    Unsupported(String),
}

/// `SENTINEL FAILOVER <service> COORDINATED` on the first sentinel that answers, retried while the
/// answer is `-INPROG` or `-NOGOODSLAVE` (replicas not yet eligible). An arity or syntax error is
/// the server's way of saying it has no coordinated failover.
fn coordinated_failover(topo: &Topology) -> Result<Coordinated, TestkitError> {
    let mut last = String::from("no sentinel answered");
    let res = wait_until(
        Duration::from_secs(15),
        "SENTINEL FAILOVER COORDINATED accepted",
        || {
            for s in topo.sentinels() {
                match s.cmd(&["SENTINEL", "FAILOVER", topo.service(), "COORDINATED"]) {
                    Ok(_) => return Some(Ok(Coordinated::Accepted)),
                    Err(TestkitError::Server(e))
                        if e.contains("INPROG") || e.contains("NOGOODSLAVE") =>
                    {
                        last = e;
                        return None;
                    }
                    Err(TestkitError::Server(e))
                        if e.contains("wrong number of arguments") || e.contains("syntax") =>
                    {
                        return Some(Ok(Coordinated::Unsupported(e)));
                    }
                    Err(TestkitError::Server(e)) => return Some(Err(TestkitError::Server(e))),
                    Err(e) => last = e.to_string(),
                }
            }
            None
        },
    );
    match res {
        Ok(r) => r,
        Err(e) => Err(e.with_detail(&format!("last: {last}"))),
    }
}

/// A copy of each writer's history as it ends, for the stricter check below (`check` consumes the
/// handles it is given).
type Copies = Arc<Mutex<Vec<(String, Option<u64>)>>>;

fn keep_copies(
    writers: Vec<tokio::task::JoinHandle<Vec<Write>>>,
    copies: &Copies,
) -> Vec<tokio::task::JoinHandle<Vec<Write>>> {
    let handle = sentinel_recovery::runtime::handle().unwrap();
    writers
        .into_iter()
        .map(|w| {
            let copies = copies.clone();
            handle.spawn(async move {
                let log = w.await.unwrap();
                copies
                    .lock()
                    .unwrap()
                    .extend(log.iter().map(|w| (w.id.clone(), w.acked_at)));
                log
            })
        })
        .collect()
}

#[test]
fn a_coordinated_failover_loses_no_acknowledged_write() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let recorder = Recorder::start(&topo).await;
        let client = Client::connect(&topo.url()).await.unwrap();
        let mut events = client.events().unwrap();
        let old = addr(topo.primary());
        let stop = Arc::new(AtomicBool::new(false));
        let copies = Copies::default();
        let writers = keep_copies(start_writers(&client, stop.clone()), &copies);
        tokio::time::sleep(Duration::from_millis(300)).await;
        match coordinated_failover(&topo).unwrap() {
            Coordinated::Accepted => {}
            Coordinated::Unsupported(reply) => {
                eprintln!(
                    "skipped: the {} sentinels have no coordinated failover \
                     (SENTINEL FAILOVER {} COORDINATED: {reply})",
                    topo.spec().server.name(),
                    topo.service()
                );
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                client.close().await;
                return;
            }
        }
        let started = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::FailoverStarted { .. })
        })
        .await;
        assert!(
            matches!(&started.kind, EventKind::FailoverStarted { primary, .. } if *primary == old)
        );
        let switched_at = wait_switch(&mut events, &old).await;
        // The client adopts the promoted replica as soon as it reports master, but in this
        // failover the leader, once it sees the promotion, runs CLIENT KILL TYPE normal on the new
        // primary as well as on the old one: a command in flight on that connection then fails
        // with "may or may not have run". The writers run through that moment (their failures are
        // not acknowledgements); the commands of `write_on` that must succeed are sent once every
        // sentinel, the leader included, reports the new primary, i.e. after the leader's kill.
        let (_, new_port) = topo
            .wait_for_reported_primary(|(_, p)| *p != old.port, FAILOVER)
            .unwrap();
        write_on(&client).await;
        // The switch went through the primary (FAILOVER TO), not through REPLICAOF NO ONE sent to
        // the replica: the old primary logged the handover it coordinated.
        let old_log = std::fs::read_to_string(topo.primary().log_path()).unwrap();
        assert!(
            old_log
                .lines()
                .any(|l| l.contains("FAILOVER") && l.contains(&format!(":{new_port}"))),
            "the old primary did not log a FAILOVER to {new_port}:\n{old_log}"
        );
        check(&topo, &client, &recorder, switched_at, stop, writers).await;
        // `check` tolerates losses right at the promotion; a coordinated failover has none.
        let stored: HashSet<String> = match client.execute(&["LRANGE", "ids", "0", "-1"]).await {
            Ok(Value::Array(items)) => items
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes().unwrap()).into_owned())
                .collect(),
            other => panic!("LRANGE gave {other:?}"),
        };
        let copies = std::mem::take(&mut *copies.lock().unwrap());
        let acked = copies.iter().filter(|(_, at)| at.is_some()).count();
        let lost: Vec<&str> = copies
            .iter()
            .filter(|(id, at)| at.is_some() && !stored.contains(id))
            .map(|(id, _)| id.as_str())
            .collect();
        assert!(
            lost.is_empty(),
            "{} of {acked} acknowledged writes lost in a coordinated failover: {:?}; events: {}",
            lost.len(),
            &lost[..lost.len().min(20)],
            recorder.dump()
        );
        eprintln!(
            "coordinated failover: {acked} writes acknowledged, none lost, client switched {} ms \
             after the first +switch-master",
            switched_at as i64 - recorder.first("+switch-master").unwrap() as i64
        );
        client.close().await;
    });
}
