//! What the client cannot see it says so, by name: a sentinel in TILT, a sentinel that does not
//! know the service, a primary the sentinels call healthy that this client cannot reach, a
//! replica that does not answer from here.

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::{Client, ErrorCode, EventKind};
use sentinel_recovery_testkit::{sentinel_url, FakeSentinel, Topology, TopologySpec};

const LONG: Duration = Duration::from_secs(30);

#[test]
fn a_sentinel_in_tilt_is_shown_and_announced() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        // Rounds every 200 ms, so the sentinel is seen up again soon after it resumes (a round
        // during the stop marks it down), well within its TILT period.
        let client = Client::connect(&url_with(&topo.url(), "check_interval_ms=200"))
            .await
            .unwrap();
        let mut events = client.events().unwrap();
        let sentinel = addr(&topo.sentinels()[0]);
        // A sentinel whose timer was held up for more than 2 s enters TILT when it resumes.
        topo.sentinels()[0].stop();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        topo.sentinels()[0].cont();
        let entered = wait_event(&mut events, LONG, |e| {
            matches!(&e.kind, EventKind::SentinelTilt { sentinel: s, on: true } if *s == sentinel)
        })
        .await;
        assert_eq!(entered.kind.name(), "sentinel_tilt");
        wait_topology(&client, LONG, "reachable and in TILT", |t| {
            t.sentinels
                .iter()
                .any(|s| s.port == sentinel.port && s.tilt && s.up)
        })
        .await;
        // TILT ends after tilt-period (5 s in the testkit) of a normal timer.
        wait_event(&mut events, LONG, |e| {
            matches!(&e.kind, EventKind::SentinelTilt { sentinel: s, on: false } if *s == sentinel)
        })
        .await;
        client.close().await;
    });
}

#[test]
fn a_sentinel_that_no_longer_knows_the_service_is_shown_and_announced() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let mut events = client.events().unwrap();
        let gone = &topo.sentinels()[2];
        gone.cmd(&["SENTINEL", "REMOVE", "mymaster"]).unwrap();
        let sentinel = addr(gone);
        // Ask until that sentinel has answered a round (any sentinel may answer first).
        let event = async {
            loop {
                client.refresh().unwrap();
                match tokio::time::timeout(Duration::from_millis(500), events.next()).await {
                    Ok(Some(e)) if matches!(&e.kind, EventKind::SentinelServiceUnknown { sentinel: s } if *s == sentinel) => {
                        return e
                    }
                    Ok(None) => panic!("event stream ended"),
                    _ => {}
                }
            }
        };
        tokio::time::timeout(LONG, event).await.unwrap();
        let t = client.topology().unwrap();
        let shown = t
            .sentinels
            .iter()
            .find(|s| s.port == sentinel.port)
            .unwrap();
        assert!(shown.up && !shown.knows_service, "{t:#?}");
        assert!(t.healthy, "the others still know it: {t:#?}");
        client.close().await;
    });
}

#[test]
fn a_healthy_primary_that_is_unreachable_from_here_is_named_as_such() {
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let fake = FakeSentinel::reporting("mymaster", ("127.0.0.1", refused)).unwrap();
    let url = url_with(
        &sentinel_url("mymaster", &[fake.addr()]),
        "command_timeout_ms=500",
    );
    rt().block_on(async {
        let err = Client::connect(&url).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::NoHealthyPrimary, "{err}");
        let expected =
            format!("primary 127.0.0.1:{refused} reported healthy by the sentinels but unreachable from here");
        assert!(err.message().contains(&expected), "{err}");
    });
}

#[test]
fn a_replica_that_does_not_answer_from_here_is_not_listed() {
    let topo = Topology::start(TopologySpec {
        // The sentinels keep calling it healthy for the whole test.
        down_after_ms: 30_000,
        ..TopologySpec::default()
    })
    .unwrap();
    let silent = &topo.replicas()[0];
    silent.stop();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let t = client.topology().unwrap();
        assert!(
            !t.replicas.contains(&addr(silent)),
            "a replica that does not answer is not listed: {t:#?}"
        );
        assert!(t.replicas.contains(&addr(&topo.replicas()[1])), "{t:#?}");
        let reported = topo.sentinels()[0]
            .sentinel_replicas("mymaster")
            .unwrap()
            .iter()
            .filter(|r| r.get("port").map(String::as_str) == Some(&silent.port().to_string()))
            .all(|r| !r.get("flags").is_some_and(|f| f.contains("s_down")));
        assert!(reported, "the sentinels still report it healthy");
        silent.cont();
        wait_topology(&client, LONG, "listed once it answers", |t| {
            t.replicas.contains(&addr(silent))
        })
        .await;
        client.close().await;
    });
}
