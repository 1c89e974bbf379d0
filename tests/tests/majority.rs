//! The sentinel-majority fence (`sentinel_majority_ms`) against real sentinels: two of three
//! sentinels stop answering (SIGSTOP: they keep their sockets and say nothing, as a partition
//! does), writes wait instead of reaching a primary the majority may be replacing, reads go on,
//! and writes resume once a majority names the primary again. Off, nothing of this happens.

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::{Client, ErrorCode, EventKind, Value};
use sentinel_recovery_testkit::{Topology, TopologySpec};

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn writes_wait_while_a_majority_of_sentinels_is_silent_and_resume_when_it_names_the_primary() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let url = url_with(&topo.url(), "sentinel_majority_ms=600");
        let client = Client::connect(&url).await.unwrap();
        let mut events = client.events().unwrap();
        client.execute(&["SET", "m:a", "1"]).await.unwrap();

        let silent = &topo.sentinels()[..2];
        for s in silent {
            s.stop();
        }
        let lost = wait_event(&mut events, WAIT, |e| {
            matches!(e.kind, EventKind::SentinelMajorityLost { .. })
        })
        .await;
        assert!(
            matches!(lost.kind, EventKind::SentinelMajorityLost { heard: 1, known: 3 }),
            "{:?}",
            lost.kind
        );
        // A write waits (here past its own deadline) and is never sent.
        let err = client
            .execute_timeout(&["SET", "m:b", "2"], Duration::from_millis(400))
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
        assert_eq!(
            topo.primary().cmd(&["EXISTS", "m:b"]).unwrap().as_int(),
            Some(0),
            "a fenced write reached the primary"
        );
        // Reads are not fenced.
        assert_eq!(
            client.execute(&["GET", "m:a"]).await.unwrap(),
            Value::Bulk("1".into())
        );
        // A write started now completes once the majority is back.
        let pending = {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .execute_timeout(&["SET", "m:c", "3"], Duration::from_secs(20))
                    .await
            })
        };
        for s in silent {
            s.cont();
        }
        let regained = wait_event(&mut events, WAIT, |e| {
            matches!(e.kind, EventKind::SentinelMajorityRegained { .. })
        })
        .await;
        let primary = addr(topo.primary());
        assert!(
            matches!(&regained.kind, EventKind::SentinelMajorityRegained { primary: p, confirmed, known: 3 } if *p == primary && *confirmed >= 2),
            "{:?}",
            regained.kind
        );
        assert!(matches!(pending.await.unwrap().unwrap(), Value::Simple(s) if s == "OK"));
        client.close().await;
    });
}

#[test]
fn without_the_option_a_silent_majority_does_not_stop_writes() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let silent = &topo.sentinels()[..2];
        for s in silent {
            s.stop();
        }
        // Well past what the fence above needed to trip.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let reply = client
            .execute_timeout(&["SET", "o:a", "1"], Duration::from_millis(400))
            .await;
        for s in silent {
            s.cont();
        }
        assert!(matches!(reply.unwrap(), Value::Simple(s) if s == "OK"));
        client.close().await;
    });
}
