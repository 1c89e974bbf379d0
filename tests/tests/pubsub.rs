//! Pub/sub for applications on real topologies: a subscription follows a kill -9 failover, says
//! so with `subscription_lost` / `subscription_restored`, and what the gap loses is counted.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use sentinel_recovery::{Client, EventKind, Message, Subscription};
use sentinel_recovery_testkit::{Topology, TopologySpec};

const FAILOVER: Duration = Duration::from_secs(40);

/// The subscription's next message, which must come in time.
async fn next(sub: &mut Subscription) -> Message {
    tokio::time::timeout(FAILOVER, sub.next())
        .await
        .expect("a message in time")
        .expect("the subscription is open")
}

fn seq(payload: &[u8]) -> u64 {
    std::str::from_utf8(payload).unwrap().parse().unwrap()
}

#[test]
fn a_subscription_follows_a_kill_9_failover_and_counts_what_the_gap_lost() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let mut events = client.events().unwrap();
        let mut sub = client
            .subscription(&["news"], &["alerts.*"], 4096)
            .await
            .unwrap();

        // The publisher numbers its messages; `attempted` counts every PUBLISH sent (one that
        // failed may still have run), `acknowledged` those the primary answered.
        let attempted = Arc::new(AtomicU64::new(0));
        let acknowledged = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let publisher = {
            let (client, attempted, acknowledged, stop) = (
                client.clone(),
                attempted.clone(),
                acknowledged.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let n = attempted.fetch_add(1, Ordering::SeqCst);
                    if client
                        .execute(&["PUBLISH", "news", &n.to_string()])
                        .await
                        .is_ok()
                    {
                        acknowledged.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        };

        let mut received: Vec<u64> = Vec::new();
        while received.len() < 20 {
            let m = next(&mut sub).await;
            assert_eq!(m.channel, "news");
            assert_eq!(m.pattern, None);
            received.push(seq(&m.payload));
        }
        let before_kill = received.len();

        let old = addr(topo.primary());
        topo.primary().kill9();
        let lost = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::SubscriptionLost { .. })
        })
        .await;
        assert!(
            matches!(&lost.kind, EventKind::SubscriptionLost { address } if *address == old),
            "{lost:?}"
        );
        let restored = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::SubscriptionRestored { .. })
        })
        .await;
        let EventKind::SubscriptionRestored { address, gap_ms } = &restored.kind else {
            unreachable!()
        };
        assert_ne!(*address, old, "re-subscribed on another node");
        assert!(restored.at >= lost.at);
        assert!(*gap_ms > 0);
        assert_eq!(client.topology().unwrap().primary.as_ref(), Some(address));
        // Published from here on: must arrive (the subscription is back).
        let after_restore = attempted.load(Ordering::SeqCst);

        // Drain what was buffered, then wait for 20 messages published after the restore.
        let mut after = 0;
        while after < 20 {
            let m = next(&mut sub).await;
            let n = seq(&m.payload);
            received.push(n);
            if n >= after_restore {
                after += 1;
            }
        }
        stop.store(true, Ordering::SeqCst);
        publisher.await.unwrap();

        // A pattern subscription was restored too.
        client
            .execute(&["PUBLISH", "alerts.disk", "full"])
            .await
            .unwrap();
        let m = loop {
            let m = next(&mut sub).await;
            if m.channel != "news" {
                break m;
            }
            received.push(seq(&m.payload));
        };
        assert_eq!(m.channel, "alerts.disk");
        assert_eq!(m.pattern.as_deref(), Some(&b"alerts.*"[..]));
        assert_eq!(m.payload, "full");

        let attempted = attempted.load(Ordering::SeqCst);
        let acknowledged = acknowledged.load(Ordering::SeqCst);
        assert!(
            received.windows(2).all(|w| w[0] < w[1]),
            "in order, each once: {received:?}"
        );
        assert!(
            received.iter().all(|n| *n < attempted),
            "only what was published"
        );
        assert!(before_kill >= 20);
        let lost_messages = attempted - received.len() as u64;
        eprintln!(
            "pub/sub across kill -9: {attempted} published ({acknowledged} acknowledged), {} \
             received, {lost_messages} lost in a gap of {gap_ms} ms, {} dropped by the buffer",
            received.len(),
            sub.dropped()
        );
        assert_eq!(sub.dropped(), 0, "the buffer never filled");
        sub.close();
        assert!(sub.next().await.is_none(), "a closed subscription ends");
        client.close().await;
    });
}

#[test]
fn read_from_replica_subscribes_on_a_replica_and_changes_apply_at_runtime() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&url_with(
            &topo.url(),
            "read_from=replica&client_name=subscriber-on-replica",
        ))
        .await
        .unwrap();
        let mut sub = client.subscribe(&["a"]).await.unwrap();
        // The subscriber connection is on a replica: CLIENT LIST shows it subscribed there.
        let subscribed_on = |node: &sentinel_recovery_testkit::Node| {
            node.client_list().iter().any(|c| {
                c.get("name").map(String::as_str) == Some("subscriber-on-replica")
                    && c.get("sub").is_some_and(|n| n != "0")
            })
        };
        assert!(topo.replicas().iter().any(subscribed_on), "on a replica");
        assert!(!subscribed_on(topo.primary()), "not on the primary");

        let publish = |channel: &'static str, payload: &'static str| {
            let client = client.clone();
            async move {
                client
                    .execute(&["PUBLISH", channel, payload])
                    .await
                    .unwrap()
            }
        };
        // PUBLISH runs on the primary and reaches the replica's subscribers through replication.
        publish("a", "1").await;
        assert_eq!(next(&mut sub).await.payload, "1");

        sub.psubscribe(&["b.*"]).await.unwrap();
        sub.unsubscribe(&["a"]).await.unwrap();
        publish("a", "2").await;
        publish("b.x", "3").await;
        let m = next(&mut sub).await;
        assert_eq!((&m.channel[..], &m.payload[..]), (&b"b.x"[..], &b"3"[..]));
        assert_eq!(m.pattern.as_deref(), Some(&b"b.*"[..]));
        assert!(
            sub.try_next().is_none(),
            "nothing of the unsubscribed channel"
        );
        client.close().await;
        assert!(
            sub.next().await.is_none(),
            "closing the client ends its subscriptions"
        );
    });
}

#[test]
fn resp2_connections_subscribe_and_change_like_resp3_ones() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&url_with(&topo.url(), "protocol=2"))
            .await
            .unwrap();
        let mut sub = client.subscribe(&["r2"]).await.unwrap();
        client.execute(&["PUBLISH", "r2", "a"]).await.unwrap();
        assert_eq!(next(&mut sub).await.payload, "a");
        sub.psubscribe(&["r2.*"]).await.unwrap();
        sub.unsubscribe(&["r2"]).await.unwrap();
        let receivers = client.execute(&["PUBLISH", "r2", "b"]).await.unwrap();
        assert_eq!(
            receivers,
            sentinel_recovery::Value::Int(0),
            "r2 has no subscriber"
        );
        client.execute(&["PUBLISH", "r2.x", "c"]).await.unwrap();
        let m = next(&mut sub).await;
        assert_eq!(m.pattern.as_deref(), Some(&b"r2.*"[..]));
        assert_eq!(m.payload, "c");
        client.close().await;
    });
}

#[test]
fn a_manual_failover_moves_the_subscription_to_the_new_primary() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        // Named, to tell its connections from the sentinels' (subscribed to their hello channel).
        let client = Client::connect(&url_with(&topo.url(), "client_name=moving-subscriber"))
            .await
            .unwrap();
        let mut events = client.events().unwrap();
        let mut sub = client.subscribe(&["moved"]).await.unwrap();
        let old = addr(topo.primary());
        // The old primary stays up (demoted, not killed): the subscription moves because the
        // primary changed, not because its connection broke.
        topo.sentinel_failover().unwrap();
        let lost = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::SubscriptionLost { .. })
        })
        .await;
        assert!(matches!(&lost.kind, EventKind::SubscriptionLost { address } if *address == old));
        let restored = wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::SubscriptionRestored { .. })
        })
        .await;
        let EventKind::SubscriptionRestored { address, .. } = &restored.kind else {
            unreachable!()
        };
        assert_ne!(*address, old);
        assert_eq!(client.topology().unwrap().primary.as_ref(), Some(address));
        // The subscriber connection is on the new primary: PUBLISH there counts it.
        let new_primary = topo.node_by_port(address.port).unwrap();
        let subscribed_here = new_primary.client_list().iter().any(|c| {
            c.get("name").map(String::as_str) == Some("moving-subscriber")
                && c.get("sub").is_some_and(|n| n != "0")
        });
        assert!(subscribed_here, "subscribed on the new primary");
        client
            .execute(&["PUBLISH", "moved", "after"])
            .await
            .unwrap();
        assert_eq!(next(&mut sub).await.payload, "after");
        client.close().await;
    });
}
