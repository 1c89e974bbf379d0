//! The network-namespace layer (issue 28): LAN hosts reach each other on 127.x addresses, a cut
//! is silent and two-way, heal restores it, and every namespace is deleted on drop, on a panic
//! mid-setup, and when a dead run left some behind. Needs root: skips with a message otherwise.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use sentinel_recovery_testkit::net::{
    dial, in_netns, namespaces_named, netns_available, Host, Lan, NetSpec, NetTopology,
};

fn skip_without_netns() -> bool {
    match netns_available() {
        Ok(()) => false,
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            true
        }
    }
}

/// A listener on `ip:port` inside `netns` that answers every connection with "hi".
fn greeter(netns: &str, addr: SocketAddr) -> TcpListener {
    let l = in_netns(netns, move || TcpListener::bind(addr))
        .unwrap()
        .unwrap();
    let served = l.try_clone().unwrap();
    std::thread::spawn(move || {
        for mut c in served.incoming().flatten() {
            let _ = c.write_all(b"hi");
        }
    });
    l
}

fn greet(netns: &str, addr: SocketAddr, timeout: Duration) -> Result<String, std::io::Error> {
    let mut s = dial(Some(netns), addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    let mut buf = [0u8; 2];
    s.read_exact(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn lan_hosts_talk_cuts_are_silent_and_heal() {
    if skip_without_netns() {
        return;
    }
    let mut lan = Lan::create().unwrap();
    let prefix = lan.prefix().to_string();
    let (a, b, c) = (
        lan.add_host("a").unwrap(),
        lan.add_host("b").unwrap(),
        lan.add_host("c").unwrap(),
    );
    let ip = |i: usize| lan.host(i).ip();
    assert!(ip(a).is_loopback() && ip(a) != ip(b), "{} {}", ip(a), ip(b));
    let at_b = SocketAddr::from((ip(b), 7000));
    let _l = greeter(lan.host(b).netns(), at_b);
    let ns_a = lan.host(a).netns().to_string();
    assert_eq!(greet(&ns_a, at_b, Duration::from_secs(2)).unwrap(), "hi");

    let mut cuts = sentinel_recovery_testkit::net::Cuts::default();
    cuts.cut(&lan, &[a], &[b]).unwrap();
    assert!(cuts.is_cut(a, b) && cuts.is_cut(b, a));
    // Silent: no refusal, no reset, the connect just gets no answer.
    let t0 = Instant::now();
    let err = greet(&ns_a, at_b, Duration::from_millis(700)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
    assert!(t0.elapsed() >= Duration::from_millis(600));
    // Only a and b are cut: c still reaches b.
    assert_eq!(
        greet(lan.host(c).netns(), at_b, Duration::from_secs(2)).unwrap(),
        "hi"
    );
    // And the other direction is cut too.
    let at_a = SocketAddr::from((ip(a), 7001));
    let _la = greeter(&ns_a, at_a);
    assert!(greet(lan.host(b).netns(), at_a, Duration::from_millis(500)).is_err());

    cuts.heal(&lan).unwrap();
    assert!(cuts.active().is_empty());
    assert_eq!(greet(&ns_a, at_b, Duration::from_secs(2)).unwrap(), "hi");
    assert_eq!(namespaces_named(&prefix).len(), 4, "hub + 3 hosts");
    drop(lan);
    assert_eq!(namespaces_named(&prefix), Vec::<String>::new());
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn a_panic_mid_setup_deletes_what_was_created() {
    if skip_without_netns() {
        return;
    }
    let mut prefix = String::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut lan = Lan::create().unwrap();
        prefix = lan.prefix().to_string();
        lan.add_host("one").unwrap();
        // A name `ip netns add` refuses: setup fails half-way.
        lan.add_host("bad/name").unwrap();
    }));
    assert!(r.is_err());
    assert!(!prefix.is_empty());
    assert_eq!(namespaces_named(&prefix), Vec::<String>::new());
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn namespaces_of_dead_runs_are_removed_and_live_ones_kept() {
    if skip_without_netns() {
        return;
    }
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let stale = format!("srnet-{dead_pid}-9-stale");
    let status = std::process::Command::new("ip")
        .args(["netns", "add", &stale])
        .status()
        .unwrap();
    assert!(status.success());
    let lan = Lan::create().unwrap();
    let own = lan.prefix().to_string();
    assert_eq!(
        namespaces_named(&stale),
        Vec::<String>::new(),
        "stale one left"
    );
    // Ours (a live owner) survived the cleanup.
    assert_eq!(namespaces_named(&own).len(), 1);
    drop(lan);
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn net_topology_runs_nodes_on_their_hosts_and_partitions_them() {
    if skip_without_netns() {
        return;
    }
    let net = NetTopology::start(NetSpec::default()).unwrap();
    let prefix = net.lan().prefix().to_string();
    let t = net.topology();
    let pip = net.ip(Host::Primary).unwrap();
    assert_eq!(t.primary().ip(), pip);
    // The sentinels know the primary and each other at their LAN addresses.
    assert_eq!(
        t.reported_primary(),
        Some((pip.clone(), t.primary().port()))
    );
    let others = t.sentinels()[0].sentinel_sentinels("mymaster").unwrap();
    let mut ips: Vec<String> = others.iter().map(|s| s["ip"].clone()).collect();
    ips.sort();
    let mut want = vec![
        net.ip(Host::Sentinel(2)).unwrap(),
        net.ip(Host::Sentinel(3)).unwrap(),
    ];
    want.sort();
    assert_eq!(ips, want);
    let url = net.url(&[("wait_replicas", "1")]);
    assert!(url.contains(&net.ip(Host::Sentinel(1)).unwrap()), "{url}");
    assert!(url.ends_with("/mymaster?wait_replicas=1"), "{url}");

    // A client process on client-1 reaches the primary ...
    let ping = |host: Host| {
        net.command_on(host, "redis-cli")
            .unwrap()
            .args(["-h", &pip, "-p", &t.primary().port().to_string(), "PING"])
            .output()
            .unwrap()
    };
    let out = ping(Host::Client(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "PONG");
    // ... and not once cut from it, while client-2 still does.
    net.partition(&[vec![Host::Primary], vec![Host::Client(1)]])
        .unwrap();
    let pong = |host: Host| {
        let port = t.primary().port();
        let addr: SocketAddr = format!("{pip}:{port}").parse().unwrap();
        let ns = net.netns(host).unwrap();
        dial(Some(&ns), addr, Duration::from_millis(600)).is_ok()
    };
    assert!(!pong(Host::Client(1)));
    assert!(pong(Host::Client(2)));
    // The testkit's own commands are never cut.
    assert_eq!(t.primary().role().as_deref(), Some("master"));
    net.heal().unwrap();
    assert!(pong(Host::Client(1)));
    drop(net);
    assert_eq!(namespaces_named(&prefix), Vec::<String>::new());
}
