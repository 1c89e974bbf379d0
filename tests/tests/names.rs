//! Host names from the hosts file, on a real topology, while DNS answers nothing (issue 10, case 4).
//!
//! glibc's `hosts: files dns` never asks DNS for a name the hosts file lists, so redis-cli and the
//! sentinels work when the DNS server drops every query; the client must too, through a failover.
//!
//! The hosts file is chosen with `SR_HOSTS_FILE`, which is process-wide: keep this binary to one
//! test (or give every test the same file).

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::dns::HOSTS_FILE_ENV;
use sentinel_recovery::{Address, Client, EventKind, Value};
use sentinel_recovery_testkit::{SlowDns, Topology, TopologySpec};

const FAILOVER: Duration = Duration::from_secs(40);

/// Names only the test hosts file knows: the sentinels, in both one-name and alias lines.
const HOSTS_NAMES: [&str; 3] = [
    "sentinel-1.names.test",
    "sentinel-2.names.test",
    "sentinel-3.names.test",
];

/// A seed the hosts file does not list: it can only go to DNS, which never answers.
const DNS_ONLY: &str = "dns-only.names.test";

#[test]
fn hosts_file_names_work_and_a_kill_9_failover_is_followed_while_dns_drops_every_query() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let dns = SlowDns::start_dropping().unwrap();
    let hosts = topo.dir().join("hosts");
    std::fs::write(
        &hosts,
        format!(
            "# names for the names e2e test\n\
             127.0.0.1\tlocalhost\n\
             127.0.0.1 {} {}  # two names on one line\n\
             127.0.0.1 {}\n",
            HOSTS_NAMES[0], HOSTS_NAMES[1], HOSTS_NAMES[2]
        ),
    )
    .unwrap();
    // Every resolver the core builds from here on reads this file instead of /etc/hosts.
    std::env::set_var(HOSTS_FILE_ENV, &hosts);

    let s = topo.sentinels();
    let url = format!(
        "redis+sentinel://{}:{},{}:{},{}:{},{DNS_ONLY}:{}/mymaster?dns_server={}&dns_timeout_ms=500&command_timeout_ms=10000",
        HOSTS_NAMES[0],
        s[0].port(),
        HOSTS_NAMES[1],
        s[1].port(),
        HOSTS_NAMES[2],
        s[2].port(),
        s[0].port(),
        dns.addr()
    );
    rt().block_on(async {
        let client = Client::connect(&url).await.unwrap();
        let old = addr(topo.primary());
        assert_eq!(client.topology().unwrap().primary, Some(old.clone()));
        assert_eq!(
            client
                .execute(&["SET", "names-e2e", "before"])
                .await
                .unwrap(),
            Value::Simple("OK".into())
        );

        let mut events = client.events().unwrap();
        topo.primary().kill9();
        let changed = wait_event(&mut events, FAILOVER, |e| new_primary(e).is_some()).await;
        let EventKind::PrimaryChanged { old: from, new } = &changed.kind else {
            unreachable!()
        };
        assert_eq!(from.as_ref(), Some(&old));
        let (host, port) = topo
            .wait_for_reported_primary(|(_, p)| *p != old.port, FAILOVER)
            .unwrap();
        assert_eq!(*new, Address::new(host, port), "the sentinels' new primary");
        assert!(
            topo.replicas().iter().any(|r| addr(r) == *new),
            "a former replica was promoted"
        );
        assert_eq!(
            client
                .execute(&["SET", "names-e2e", "after"])
                .await
                .unwrap(),
            Value::Simple("OK".into()),
            "writes go to the new primary"
        );
        let promoted = topo.node_by_port(new.port).unwrap();
        assert_eq!(
            promoted
                .cmd(&["GET", "names-e2e"])
                .unwrap()
                .as_str()
                .as_deref(),
            Some("after")
        );

        // The configured names are kept and were reached through the hosts file.
        wait_topology(&client, FAILOVER, "every hosts-file sentinel up", |t| {
            HOSTS_NAMES
                .iter()
                .all(|name| t.sentinels.iter().any(|s| s.host == *name && s.up))
        })
        .await;
        client.close().await;
    });

    // The client really asked this server (for the one name only DNS could answer) ...
    assert!(
        !dns.queries_for(DNS_ONLY).is_empty(),
        "the client's resolver uses the dropping server: {:?}",
        dns.query_log()
    );
    // ... and never for a name the hosts file lists, not even an AAAA the file lacks.
    for name in HOSTS_NAMES.iter().chain(&["localhost"]) {
        assert_eq!(
            dns.queries_for(name),
            Vec::new(),
            "{name} is in the hosts file, yet DNS was asked"
        );
    }
}
