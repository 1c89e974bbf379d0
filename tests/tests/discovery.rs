//! Discovery against real sentinels, and against what real sentinels can't be made to do.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use sentinel_recovery::{Address, Client, ErrorCode};
use sentinel_recovery_testkit::{
    refusing_port, sentinel_url, FakeReply, FakeSentinel, Reply, SlowDns, Topology, TopologySpec,
};

fn one_replica() -> TopologySpec {
    TopologySpec {
        replicas: 1,
        ..TopologySpec::default()
    }
}

#[test]
fn initial_discovery_finds_primary_replicas_and_sentinels() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let client = Client::connect(&topo.url()).await.unwrap();
        let t = client.topology().unwrap();
        assert_eq!(t.service, "mymaster");
        assert_eq!(t.primary, Some(addr(topo.primary())));
        assert!(t.healthy);
        let mut replicas: Vec<Address> = t.replicas.clone();
        replicas.sort();
        let mut expected: Vec<Address> = topo.replicas().iter().map(addr).collect();
        expected.sort();
        assert_eq!(replicas, expected);
        assert_eq!(t.sentinels.len(), 3);
        // All three answered; the snapshot says so once their outcomes are recorded.
        wait_topology(&client, Duration::from_secs(5), "all sentinels up", |t| {
            t.sentinels.iter().all(|s| s.up)
        })
        .await;
        client.close().await;
        assert_eq!(client.topology().unwrap_err().code(), ErrorCode::Closed);
    });
}

#[test]
fn unknown_service_is_service_unknown() {
    let topo = Topology::start(TopologySpec {
        replicas: 0,
        sentinels: 2,
        quorum: 1,
        ..TopologySpec::default()
    })
    .unwrap();
    let addrs: Vec<String> = topo.sentinels().iter().map(|s| s.addr()).collect();
    let url = sentinel_url("no-such-service", &addrs);
    let err = rt().block_on(Client::connect(&url)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ServiceUnknown, "{err}");
    assert!(err.message().contains("no-such-service"), "{err}");
}

#[test]
fn the_same_sentinel_by_name_and_by_ip_counts_once() {
    let topo = Topology::start(one_replica()).unwrap();
    let s = topo.sentinels();
    let url = format!(
        // A short backstop check: a sentinel marked down for a round is asked again soon.
        "redis+sentinel://localhost:{p0},127.0.0.1:{p0},127.0.0.1:{p1},127.0.0.1:{p2}/mymaster?check_interval_ms=500",
        p0 = s[0].port(),
        p1 = s[1].port(),
        p2 = s[2].port()
    );
    rt().block_on(async {
        let client = Client::connect(&url).await.unwrap();
        // Waits for all three to answer as well: on a busy machine one can be marked down for
        // a round before it does (a CI run under Valkey saw that snapshot). A duplicate would
        // show as a fourth entry and never satisfy the wait.
        let t = wait_topology(
            &client,
            Duration::from_secs(10),
            "three sentinels up",
            |t| t.sentinels.len() == 3 && t.sentinels.iter().all(|i| i.up),
        )
        .await;
        assert_eq!(
            t.sentinels[0].host, "localhost",
            "the configured name is kept: {t:?}"
        );
        client.close().await;
    });
}

#[test]
fn hung_and_refusing_endpoints_cost_at_most_the_one_deadline() {
    let topo = Topology::start(one_replica()).unwrap();
    let hung = [
        FakeSentinel::hanging(),
        FakeSentinel::hanging(),
        FakeSentinel::hanging(),
    ];
    let mut endpoints: Vec<String> = Vec::new();
    for (i, h) in hung.iter().enumerate() {
        endpoints.push(h.addr());
        endpoints.push(format!("127.0.0.1:{}", refusing_port()));
        if i == 1 {
            endpoints.push(topo.sentinels()[2].addr());
        }
    }
    // A connect timeout far above the round deadline: any code path that waits for a hung endpoint
    // one by one would take a multiple of it.
    let url = url_with(
        &sentinel_url("mymaster", &endpoints),
        "sentinel_timeout_ms=1000&connect_timeout_ms=20000",
    );
    rt().block_on(async {
        let started = Instant::now();
        let client = Client::connect(&url).await.unwrap();
        let took = started.elapsed();
        assert_eq!(
            client.topology().unwrap().primary,
            Some(addr(topo.primary()))
        );
        assert!(
            took < Duration::from_secs(10),
            "discovery took {took:?} with hung endpoints"
        );
        // Hung endpoints were actually asked, and are reported down.
        assert!(hung.iter().all(|h| h.connections_accepted() > 0));
        let real_port = topo.sentinels()[2].port();
        let bad: Vec<u16> = endpoints
            .iter()
            .filter_map(|e| e.rsplit_once(':')?.1.parse().ok())
            .filter(|p| *p != real_port)
            .collect();
        wait_topology(
            &client,
            Duration::from_secs(5),
            "hung and refusing endpoints marked down",
            |t| {
                let down = t
                    .sentinels
                    .iter()
                    .filter(|s| bad.contains(&s.port) && !s.up)
                    .count();
                let real_up = t.sentinels.iter().any(|s| s.port == real_port && s.up);
                down == bad.len() && real_up
            },
        )
        .await;
        client.close().await;
    });
}

/// What a sentinel may send instead of a proper SENTINEL MASTER reply.
fn malformed_replies() -> Vec<(&'static str, FakeReply)> {
    let master = |fields: &[(&str, &str)]| {
        FakeReply::Value(Reply::Array(
            fields
                .iter()
                .flat_map(|(k, v)| [Reply::bulk(k), Reply::bulk(v)])
                .collect(),
        ))
    };
    let port = |p: &'static str| {
        master(&[
            ("name", "mymaster"),
            ("ip", "127.0.0.1"),
            ("port", p),
            ("flags", "master"),
        ])
    };
    vec![
        ("integer instead of map", FakeReply::Value(Reply::Int(42))),
        ("simple string instead of map", FakeReply::Raw(b"+OK\r\n".to_vec())),
        ("odd-length field list", FakeReply::Value(Reply::bulk_array(&["name", "mymaster", "ip"]))),
        ("flags as array", FakeReply::Raw(b"*6\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$4\r\nport\r\n$4\r\n6379\r\n$5\r\nflags\r\n*1\r\n$6\r\nmaster\r\n".to_vec())),
        ("missing ip", master(&[("name", "mymaster"), ("port", "6379"), ("flags", "master")])),
        ("missing flags", master(&[("name", "mymaster"), ("ip", "127.0.0.1"), ("port", "6379")])),
        ("port 0", port("0")),
        ("port 65536", port("65536")),
        ("port -1", port("-1")),
        ("port x", port("x")),
        ("empty host", master(&[("name", "mymaster"), ("ip", ""), ("port", "6379"), ("flags", "master")])),
        ("huge bulk length", FakeReply::Raw(b"*2\r\n$999999999999\r\nabc".to_vec())),
        ("truncated frame then close", FakeReply::RawThenClose(b"*8\r\n$4\r\nname\r\n$8\r\nmymas".to_vec())),
        ("not RESP at all", FakeReply::Raw(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec())),
    ]
}

fn malformed_fake(reply: FakeReply) -> FakeSentinel {
    FakeSentinel::start(move |args| {
        if let Some(r) = FakeSentinel::default_reply(args) {
            return r;
        }
        let is_master = args.len() >= 2
            && args[0].eq_ignore_ascii_case(b"SENTINEL")
            && args[1].eq_ignore_ascii_case(b"MASTER");
        if is_master {
            reply.clone()
        } else {
            FakeReply::Value(Reply::Error("ERR unknown command".into()))
        }
    })
    .unwrap()
}

#[test]
fn malformed_sentinel_replies_skip_that_sentinel_without_panic() {
    let topo = Topology::start(one_replica()).unwrap();
    let real = topo.sentinels()[0].addr();
    rt().block_on(async {
        for (what, reply) in malformed_replies() {
            // Alone, the fake yields a clear error, not a panic and not a wrong primary.
            let fake = malformed_fake(reply.clone());
            let url = url_with(
                &sentinel_url("mymaster", &[fake.addr()]),
                "sentinel_timeout_ms=300",
            );
            let err = Client::connect(&url).await.unwrap_err();
            assert_eq!(err.code(), ErrorCode::SentinelsUnreachable, "{what}: {err}");
            assert!(
                fake.commands()
                    .iter()
                    .any(|c| c.len() >= 2 && c[1].eq_ignore_ascii_case("MASTER")),
                "{what}: the fake was never asked"
            );
            // Beside a real sentinel (the fake listed first), discovery goes on from the real one.
            let fake = malformed_fake(reply);
            let url = url_with(
                &sentinel_url("mymaster", &[fake.addr(), real.clone()]),
                "sentinel_timeout_ms=300",
            );
            let client = Client::connect(&url)
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                client.topology().unwrap().primary,
                Some(addr(topo.primary())),
                "{what}"
            );
            client.close().await;
        }
    });
}

#[test]
fn slow_dns_names_do_not_stall_the_runtime_and_fast_names_answer() {
    let topo = Topology::start(one_replica()).unwrap();
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let dns = SlowDns::start(&[
        ("slow-a.sr.test", lo, Duration::from_secs(3)),
        ("slow-b.sr.test", lo, Duration::from_secs(3)),
        ("fast.sr.test", lo, Duration::ZERO),
    ])
    .unwrap();
    let s = topo.sentinels();
    let url = format!(
        "redis+sentinel://slow-a.sr.test:{},slow-b.sr.test:{},fast.sr.test:{}/mymaster?dns_server={}",
        s[0].port(),
        s[1].port(),
        s[2].port(),
        dns.addr()
    );
    // A task on the core runtime that should tick every 10 ms; its worst lateness shows whether
    // anything blocked a core thread while the slow lookups were pending.
    let worst_ms = Arc::new(AtomicU64::new(0));
    let ticker = {
        let worst = worst_ms.clone();
        sentinel_recovery::runtime::handle()
            .unwrap()
            .spawn(async move {
                loop {
                    let due = Instant::now() + Duration::from_millis(10);
                    tokio::time::sleep_until(due.into()).await;
                    let late = Instant::now().saturating_duration_since(due).as_millis() as u64;
                    worst.fetch_max(late, Ordering::Relaxed);
                }
            })
    };
    rt().block_on(async {
        let client = Client::connect(&url).await.unwrap();
        assert_eq!(
            client.topology().unwrap().primary,
            Some(addr(topo.primary()))
        );
        // Keep the monitor working past the 3 s answers, with rounds every 200 ms.
        let client2 = Client::connect(&format!("{url}&check_interval_ms=200"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(4)).await;
        let log = dns.query_log();
        assert!(
            log.iter().any(|(name, _, _)| name == "slow-a.sr.test"),
            "slow names were looked up: {log:?}"
        );
        assert!(log.iter().any(|(name, _, _)| name == "fast.sr.test"));
        let t = client2.topology().unwrap();
        assert!(t.healthy, "{t:?}");
        assert_eq!(t.sentinels[0].host, "slow-a.sr.test", "names are kept");
        client.close().await;
        client2.close().await;
    });
    ticker.abort();
    let worst = worst_ms.load(Ordering::Relaxed);
    assert!(
        worst < 250,
        "a core-runtime tick was {worst} ms late while DNS took 3 s"
    );
}

#[test]
fn sixty_four_clients_share_one_monitor() {
    let topo = Topology::start(one_replica()).unwrap();
    let url = url_with(&topo.url(), "client_name=sr-share-test");
    let ours = |topo: &Topology| -> usize {
        topo.sentinels()
            .iter()
            .map(|s| {
                s.client_list()
                    .iter()
                    .filter(|c| c.get("name").map(String::as_str) == Some("sr-share-test"))
                    .count()
            })
            .sum()
    };
    rt().block_on(async {
        let first = Client::connect(&url).await.unwrap();
        // Command link and event subscription per sentinel.
        let settled = sentinel_recovery_testkit::wait_until(
            Duration::from_secs(10),
            "one monitor's connections",
            || {
                let n = ours(&topo);
                (n == 2 * topo.sentinels().len()).then_some(n)
            },
        )
        .unwrap();
        let mut clients = vec![first];
        for _ in 0..63 {
            clients.push(Client::connect(&url).await.unwrap());
        }
        for c in &clients {
            assert_eq!(c.topology().unwrap().primary, Some(addr(topo.primary())));
        }
        assert_eq!(
            ours(&topo),
            settled,
            "sentinel connections do not grow with clients"
        );
        // Closing all but one keeps the monitor; closing the last one ends its connections.
        let last = clients.pop().unwrap();
        for c in clients {
            c.close().await;
        }
        assert_eq!(ours(&topo), settled);
        assert!(last.topology().unwrap().healthy);
        last.close().await;
        sentinel_recovery_testkit::wait_until(
            Duration::from_secs(10),
            "connections closed",
            || (ours(&topo) == 0).then_some(()),
        )
        .unwrap();
    });
}
