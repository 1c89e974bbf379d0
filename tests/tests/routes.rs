//! Routes for connections that another library opens (what the redis-py and ioredis adapters
//! stand on): they go where the core's own commands go, wait through a promotion, and turn
//! unroutable the moment a failover starts demoting their node.

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::{Client, ErrorCode, EventKind, Route};
use sentinel_recovery_testkit::{Topology, TopologySpec};

const FAILOVER: Duration = Duration::from_secs(30);

#[test]
fn a_route_follows_a_planned_failover_and_the_old_primary_is_fenced_at_its_start() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let old = addr(topo.primary());
        let route = client
            .route(Route::Primary, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(route, old);
        assert!(client.is_routable(&old, Route::Primary));
        assert!(!client.is_fenced(&old));
        for replica in topo.replicas() {
            assert!(!client.is_routable(&addr(replica), Route::Primary));
        }

        let mut events = client.events().unwrap();
        topo.sentinel_failover().unwrap();
        wait_event(&mut events, FAILOVER, |e| {
            matches!(e.kind, EventKind::FailoverStarted { .. })
        })
        .await;
        // From the first sign of the promotion on, the old primary takes no write.
        assert!(client.is_fenced(&old));
        assert!(!client.is_routable(&old, Route::Primary));
        let new = client.route(Route::Primary, FAILOVER).await.unwrap();
        assert_ne!(new, old);
        assert!(client.is_routable(&new, Route::Primary));
        assert_eq!(
            topo.node_by_port(new.port).unwrap().role().as_deref(),
            Some("master")
        );
        client.close().await;
    });
}

#[test]
fn a_read_route_goes_to_a_replica_under_read_from_replica() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let url = url_with(&topo.url(), "read_from=replica");
        let client = Client::connect(&url).await.unwrap();
        wait_topology(&client, FAILOVER, "replicas known", |t| {
            t.replicas.len() == 2
        })
        .await;
        let replicas: Vec<_> = topo.replicas().iter().map(addr).collect();
        let route = client
            .route(Route::Read, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(replicas.contains(&route), "{route} is not a replica");
        assert!(client.is_routable(&route, Route::Read));
        assert!(!client.is_routable(&addr(topo.primary()), Route::Read));
        client.close().await;
    });
}

#[test]
fn a_route_waits_for_a_primary_then_names_the_deadline() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let old = addr(topo.primary());
        let mut events = client.events().unwrap();
        topo.primary().kill9();
        // As an adapter does: until the core has noticed, the route is still the old primary;
        // the connection to it fails, is reported, and the route is asked again. The reports
        // make the monitor re-resolve; the route then waits through the promotion.
        let deadline = std::time::Instant::now() + FAILOVER;
        let new = loop {
            let route = client
                .route(Route::Primary, Duration::from_secs(5))
                .await
                .unwrap();
            if route != old {
                break route;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still routed to the killed primary"
            );
            client.report_unusable(&old).unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(
            topo.node_by_port(new.port).unwrap().role().as_deref(),
            Some("master")
        );
        wait_event(
            &mut events,
            FAILOVER,
            |e| matches!(&e.kind, EventKind::PrimaryChanged { new: n, .. } if *n == new),
        )
        .await;

        // Closed: no route, at once.
        client.close().await;
        let err = client
            .route(Route::Primary, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::Closed);
        assert!(!client.is_routable(&new, Route::Primary));
    });
}

#[test]
fn a_route_to_an_unknown_service_times_out_with_what_discovery_said() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let url = topo.url().replacen(topo.service(), "no-such-service", 1);
        let client = Client::open(sentinel_recovery::Config::from_url(&url).unwrap()).unwrap();
        let err = client
            .route(Route::Primary, Duration::from_millis(1500))
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
        assert!(err.to_string().contains("no usable primary"), "{err}");
        client.close().await;
    });
}
