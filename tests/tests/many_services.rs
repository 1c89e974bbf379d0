//! Many services on one sentinel set, in one process: 50 clients, each following its own
//! primary through the same three sentinels, hold one command connection and one event
//! subscription per sentinel in all (not per service), counted with `CLIENT LIST` on each
//! sentinel; and each still follows its own service (a failover of one is seen by it alone).

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::{Client, EventKind};
use sentinel_recovery_testkit::{sentinel_url, wait_until, Topology, TopologySpec};

const SERVICES: usize = 50;
const NAME: &str = "sr-many-services";

/// Connections a sentinel has from this process's clients (they all carry `NAME`).
fn ours(sentinel: &sentinel_recovery_testkit::Node) -> usize {
    sentinel
        .client_list()
        .iter()
        .filter(|c| c.get("name").map(String::as_str) == Some(NAME))
        .count()
}

#[test]
fn fifty_services_share_one_link_and_one_subscription_per_sentinel() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    let mut services = vec![topo.service().to_string()];
    let mut primaries = Vec::new();
    for i in 1..SERVICES {
        let service = format!("svc{i}");
        primaries.push(topo.add_service(&service).unwrap());
        services.push(service);
    }
    let addrs: Vec<String> = topo.sentinels().iter().map(|s| s.client_addr()).collect();
    rt().block_on(async {
        let mut clients = Vec::new();
        for service in &services {
            let url = url_with(
                &sentinel_url(service, &addrs),
                &format!("client_name={NAME}"),
            );
            clients.push(Client::open_url(&url).unwrap());
        }
        for (client, service) in clients.iter().zip(&services) {
            let t = client.ready().await.unwrap();
            assert_eq!(t.service, *service);
        }
        assert_eq!(sentinel_recovery::monitor::live_monitors(), SERVICES);

        // One command link and one subscription per sentinel, whatever the number of services.
        for s in topo.sentinels() {
            wait_until(
                Duration::from_secs(20),
                "each sentinel to see 2 connections from this process",
                || (ours(s) == 2).then_some(()),
            )
            .unwrap_or_else(|e| panic!("{e}: sentinel {} sees {}", s.port(), ours(s)));
        }
        // Rounds of every service keep using them (a refresh of each, then count again).
        for client in &clients {
            client.refresh().unwrap();
        }
        for client in &clients {
            client.ready().await.unwrap();
        }
        let counts: Vec<usize> = topo.sentinels().iter().map(ours).collect();
        println!(
            "{SERVICES} services through {} sentinels: sentinel connections per sentinel {counts:?} \
             ({} in all; one command connection and one subscription per service and sentinel \
             would be {})",
            counts.len(),
            counts.iter().sum::<usize>(),
            2 * SERVICES * counts.len()
        );
        assert!(counts.iter().all(|n| *n == 2), "{counts:?}");

        // Each monitor keeps to its own service: a failover of the first service is seen by
        // its client, and no other client reports a primary change.
        let mut first_events = clients[0].events().unwrap();
        let mut other_events = clients[1].events().unwrap();
        let other_primary = clients[1].topology().unwrap().primary;
        let old = clients[0].topology().unwrap().primary.unwrap();
        topo.sentinel_failover().unwrap();
        let changed = wait_event(&mut first_events, Duration::from_secs(30), |e| {
            matches!(e.kind, EventKind::PrimaryChanged { .. })
        })
        .await;
        assert_eq!(changed.service, services[0]);
        assert_ne!(clients[0].topology().unwrap().primary.unwrap(), old);
        while let Ok(Some(e)) =
            tokio::time::timeout(Duration::from_millis(500), other_events.next()).await
        {
            assert!(
                !matches!(e.kind, EventKind::PrimaryChanged { .. }),
                "another service's client saw {e:?}"
            );
        }
        assert_eq!(clients[1].topology().unwrap().primary, other_primary);

        for client in clients {
            client.close().await;
        }
        for s in topo.sentinels() {
            wait_until(
                Duration::from_secs(10),
                "the sentinel connections to close with the last client",
                || (ours(s) == 0).then_some(()),
            )
            .unwrap_or_else(|e| panic!("{e}: sentinel {} sees {}", s.port(), ours(s)));
        }
    });
    drop(primaries);
}
