//! `address_map` on real topologies: replicas announce an address the client must not use, the
//! client maps it, and follows the mapped topology through a kill -9 failover.
//!
//! On one loopback every address a sentinel can reach, the client can reach too, so "not
//! reachable from the client" can't be made real for a failover: the sentinels must reach the
//! replicas they promote. What the test makes sure of instead is that the client never uses the
//! announced address: replicas announce `127.0.0.99` (on this Linux the whole 127/8 routes to
//! loopback, so a connect there only fails because nothing is bound to it; the test checks that
//! first), the data nodes then also bind `127.0.0.99` so the sentinels can work, and the client
//! maps `127.0.0.99:P` to `127.0.0.1:P`. Each server reports the local address of every client
//! connection (`CLIENT LIST` `laddr`), which shows which of the two addresses our client used.

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::{Address, Client, Config, EventKind};
use sentinel_recovery_testkit::{wait_until, Node, Topology, TopologySpec};

const FAILOVER: Duration = Duration::from_secs(40);
const SETTLE: Duration = Duration::from_secs(30);
const ANNOUNCED_IP: &str = "127.0.0.99";

fn announced(node: &Node) -> Address {
    Address::new(ANNOUNCED_IP, node.port())
}

/// The replicas announce 127.0.0.99 (the testkit checks that nothing answered there before the
/// data nodes bind it too).
fn announce_replicas_at_127_0_0_99(topo: &Topology) {
    topo.announce_replicas_at(ANNOUNCED_IP).unwrap();
}

/// The local address (`laddr`) of each connection named `name` on `node`.
fn local_addresses(node: &Node, name: &str) -> Vec<String> {
    node.client_list()
        .into_iter()
        .filter(|c| c.get("name").map(String::as_str) == Some(name))
        .filter_map(|c| c.get("laddr").cloned())
        .collect()
}

#[test]
fn a_mapped_topology_is_followed_through_a_kill_9_failover() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    announce_replicas_at_127_0_0_99(&topo);
    let map: Vec<String> = topo
        .replicas()
        .iter()
        .map(|r| format!("{}>{}", announced(r), addr(r)))
        .collect();
    let url = url_with(
        &topo.url(),
        &format!("client_name=mapped&address_map={}", map.join(",")),
    );
    rt().block_on(async {
        let client = Client::connect(&url).await.unwrap();
        let mut events = client.events().unwrap();
        let t = wait_topology(&client, SETTLE, "replicas mapped", |t| {
            t.replicas.len() == topo.replicas().len()
        })
        .await;
        for replica in topo.replicas() {
            let listed = t.replicas.iter().find(|a| **a == addr(replica));
            let listed = listed.unwrap_or_else(|| panic!("{} listed: {t:#?}", addr(replica)));
            assert_eq!(listed.announced.as_deref(), Some(&announced(replica)));
        }
        assert!(t.primary.as_ref().unwrap().announced.is_none());

        let old = addr(topo.primary());
        topo.primary().kill9();
        let changed = wait_event(&mut events, FAILOVER, |e| new_primary(e).is_some()).await;
        let EventKind::PrimaryChanged { old: from, new } = &changed.kind else {
            unreachable!()
        };
        assert_eq!(from.as_ref(), Some(&old));
        let promoted = topo
            .replicas()
            .iter()
            .find(|r| addr(r) == *new)
            .unwrap_or_else(|| panic!("a replica was promoted under its mapped address: {new:?}"));
        assert_eq!(new.announced.as_deref(), Some(&announced(promoted)));
        // What the sentinels report is the announced address; the client went to the mapped one.
        let (host, port) = topo
            .wait_for_reported_primary(|(_, p)| *p == promoted.port(), FAILOVER)
            .unwrap();
        assert_eq!((host.as_str(), port), (ANNOUNCED_IP, promoted.port()));

        client.execute(&["SET", "mapped", "1"]).await.unwrap();
        let t = client.topology().unwrap();
        assert_eq!(t.primary.as_ref(), Some(new));
        assert_eq!(
            t.primary.as_ref().unwrap().announced.as_deref(),
            Some(&announced(promoted))
        );
        let laddrs = local_addresses(promoted, "mapped");
        assert!(
            !laddrs.is_empty(),
            "the client has connections on the new primary"
        );
        assert!(
            laddrs.iter().all(|a| a.starts_with("127.0.0.1:")),
            "every connection went to the mapped address, none to the announced one: {laddrs:?}"
        );
        assert_eq!(
            promoted
                .cmd(&["GET", "mapped"])
                .unwrap()
                .as_str()
                .as_deref(),
            Some("1")
        );
        client.close().await;
    });
}

#[test]
fn the_function_form_maps_what_sentinels_report_and_a_panic_in_it_falls_back() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    let primary = topo.primary().port();
    let replica = topo.replicas()[0].port();
    let mut config = Config::from_url(&url_with(&topo.url(), "client_name=mapfn")).unwrap();
    // The primary goes through the name `localhost`; asking about the replica panics, which must
    // leave it as reported.
    config.set_address_map_fn(move |a: &Address| {
        if a.port == replica {
            panic!("a bug in the application's map");
        }
        (a.port == primary).then(|| Address::new("localhost", a.port))
    });
    rt().block_on(async {
        let client = Client::connect_with(config).await.unwrap();
        client.execute(&["SET", "k", "v"]).await.unwrap();
        let t = wait_topology(&client, SETTLE, "replica listed", |t| {
            !t.replicas.is_empty()
        })
        .await;
        let p = t.primary.clone().unwrap();
        assert_eq!((p.host.as_str(), p.port), ("localhost", primary));
        assert_eq!(
            p.announced.as_deref(),
            Some(&Address::new("127.0.0.1", primary))
        );
        assert_eq!(t.replicas, [Address::new("127.0.0.1", replica)]);
        assert!(t.replicas[0].announced.is_none());
        client.close().await;
    });
}

#[test]
fn the_doctor_hints_at_address_map_and_probes_where_the_map_points() {
    use sentinel_recovery::doctor::{self, report::Stage, Options};
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    let replica = &topo.replicas()[0];
    // Here nothing binds 127.0.0.99: the announced address really is unreachable.
    replica
        .cmd(&["CONFIG", "SET", "replica-announce-ip", ANNOUNCED_IP])
        .unwrap();
    replica.cmd(&["CLIENT", "KILL", "TYPE", "master"]).unwrap();
    let unreachable = announced(replica);
    wait_until(SETTLE, "a sentinel to list the announced address", || {
        topo.sentinels()
            .iter()
            .any(|s| {
                s.sentinel_replicas(topo.service()).is_ok_and(|list| {
                    list.iter()
                        .any(|r| r.get("ip").map(String::as_str) == Some(ANNOUNCED_IP))
                })
            })
            .then_some(())
    })
    .unwrap();

    let report = doctor::run_blocking(topo.url(), Options::default()).unwrap();
    let f = report
        .finding("address_unreachable", Some(&unreachable.to_string()))
        .unwrap_or_else(|| panic!("a finding\n{}", report.to_text()));
    let expected = format!("address_map={unreachable}>HOST:PORT");
    assert!(f.hint.contains(&expected), "{}", f.hint);

    let mapped = url_with(
        &topo.url(),
        &format!("address_map={unreachable}>{}", addr(replica)),
    );
    let report = doctor::run_blocking(&mapped, Options::default()).unwrap();
    let node = report
        .data_node(&unreachable)
        .unwrap_or_else(|| panic!("the announced replica\n{}", report.to_text()));
    assert_eq!(
        node.mapped.as_ref(),
        Some(&addr(replica)),
        "{}",
        report.to_text()
    );
    assert_eq!(node.reach.failed_at, None::<Stage>, "{}", report.to_text());
    assert_eq!(node.role.as_deref(), Some("slave"), "{}", report.to_text());
    assert!(
        report.finding("address_unreachable", None).is_none(),
        "{}",
        report.to_text()
    );
    assert!(report.to_json().contains("\"mapped\""));
}
