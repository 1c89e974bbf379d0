//! Real-server tests of Topology and Node.

use std::time::{Duration, Instant};

use sentinel_recovery_testkit::{
    master_reply, replica_reply, sentinel_reply, wait_until, Reply, ServerKind, Topology,
    TopologySpec,
};

fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn topology_starts_and_sentinels_agree() {
    let t0 = Instant::now();
    let mut topo = Topology::start(TopologySpec::default()).expect("start");
    eprintln!("start took {:?}", t0.elapsed());
    let pport = topo.primary().port();
    assert_eq!(topo.reported_primary(), Some(("127.0.0.1".into(), pport)));
    assert_eq!(topo.replicas().len(), 2);
    assert_eq!(topo.sentinels().len(), 3);
    let url = topo.url();
    assert!(url.starts_with("redis+sentinel://127.0.0.1:"), "{url}");
    assert!(url.ends_with("/mymaster"), "{url}");
    assert_eq!(url.matches(',').count(), 2, "{url}");
    assert_eq!(topo.primary().role().as_deref(), Some("master"));
    for r in topo.replicas() {
        assert_eq!(r.role().as_deref(), Some("slave"));
    }
    let s = &topo.sentinels()[0];
    assert_eq!(s.role().as_deref(), Some("sentinel"));
    assert!(s.is_sentinel() && !topo.primary().is_sentinel());
    assert!(!s.client_list().is_empty(), "CLIENT LIST on a sentinel");
    assert!(topo.node_by_port(s.port()).is_some());
    let m = s.sentinel_master("mymaster").unwrap();
    assert_eq!(m["num-other-sentinels"], "2");
    assert_eq!(m["num-slaves"], "2");
    assert_eq!(s.sentinel_replicas("mymaster").unwrap().len(), 2);
    // the fake's canned replies have the real field names, in the real order
    let keys = |r: &Reply| -> Vec<String> {
        r.as_array()
            .unwrap()
            .iter()
            .step_by(2)
            .map(|k| k.as_str().unwrap())
            .collect()
    };
    let real_master = s.cmd(&["SENTINEL", "MASTER", "mymaster"]).unwrap();
    assert_eq!(
        keys(&master_reply("127.0.0.1", 1, "master")),
        keys(&real_master)
    );
    let real_replica = s.cmd(&["SENTINEL", "REPLICAS", "mymaster"]).unwrap();
    assert_eq!(
        keys(&replica_reply("127.0.0.1", 1, "slave", 2)),
        keys(&real_replica.as_array().unwrap()[0])
    );
    let real_sentinel = s.cmd(&["SENTINEL", "SENTINELS", "mymaster"]).unwrap();
    assert_eq!(
        keys(&sentinel_reply("127.0.0.1", 1, "x")),
        keys(&real_sentinel.as_array().unwrap()[0])
    );
    // writes replicate
    topo.primary().cmd(&["SET", "k", "v"]).unwrap();
    topo.wait_replication(Duration::from_secs(10)).unwrap();
    assert_eq!(
        topo.replicas()[0]
            .cmd(&["GET", "k"])
            .unwrap()
            .as_str()
            .as_deref(),
        Some("v")
    );
    // server errors are errors
    assert!(topo.primary().cmd(&["NOSUCHCOMMAND"]).is_err());

    // a fourth sentinel becomes known to the others
    let t1 = Instant::now();
    let added = topo.add_sentinel().expect("add_sentinel").port();
    eprintln!("add_sentinel took {:?}", t1.elapsed());
    assert_eq!(topo.sentinels().len(), 4);
    assert!(topo.url().contains(&format!("127.0.0.1:{added}")));
    topo.set_down_after(1500);
    let m = topo.sentinels()[1].sentinel_master("mymaster").unwrap();
    assert_eq!(m["down-after-milliseconds"], "1500");
}

#[test]
fn kill9_primary_fails_over_to_a_replica() {
    let topo = Topology::start(TopologySpec::default()).expect("start");
    let old = topo.primary().port();
    let replica_ports: Vec<u16> = topo.replicas().iter().map(|r| r.port()).collect();
    let t0 = Instant::now();
    topo.primary().kill9();
    assert_eq!(topo.primary().pid(), None);
    let (_, new) = topo
        .wait_for_reported_primary(|a| a.1 != old, Duration::from_secs(15))
        .expect("failover");
    eprintln!(
        "kill -9 -> all sentinels report new primary: {:?}",
        t0.elapsed()
    );
    assert!(
        replica_ports.contains(&new),
        "{new} not in {replica_ports:?}"
    );
    let promoted = topo.node_by_port(new).unwrap();
    wait_until(Duration::from_secs(5), "promoted node to be master", || {
        (promoted.role().as_deref() == Some("master")).then_some(())
    })
    .unwrap();
    // the old primary comes back and is turned into a replica of the new one
    let t1 = Instant::now();
    topo.primary().restart().expect("restart old primary");
    wait_until(
        Duration::from_secs(15),
        "old primary to be reconfigured",
        || {
            let info = topo.primary().info("replication").ok()?;
            (info.get("role")? == "slave" && info.get("master_port")? == &new.to_string())
                .then_some(())
        },
    )
    .unwrap();
    eprintln!(
        "old primary reconfigured as replica after {:?}",
        t1.elapsed()
    );
}

#[test]
fn manual_failover_stop_cont_and_sentinel_restart() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        ..Default::default()
    })
    .expect("start");
    let old = topo.primary().port();
    let rport = topo.replicas()[0].port();
    let t0 = Instant::now();
    topo.sentinel_failover().expect("SENTINEL FAILOVER");
    topo.wait_for_reported_primary(|a| a.1 == rport, Duration::from_secs(15))
        .expect("manual failover");
    eprintln!(
        "SENTINEL FAILOVER -> new primary reported: {:?}",
        t0.elapsed()
    );
    assert_eq!(topo.current_primary().map(|n| n.port()), Some(rport));

    // a SIGSTOPped sentinel is skipped by the waits and answers again after SIGCONT
    let s0 = &topo.sentinels()[0];
    s0.stop();
    assert!(s0.is_stopped());
    assert!(s0
        .cmd_with_timeout(&["PING"], Duration::from_millis(300))
        .is_err());
    topo.wait_for_reported_primary(|a| a.1 == rport, Duration::from_secs(5))
        .unwrap();
    s0.cont();
    assert_eq!(s0.cmd(&["PING"]).unwrap().as_str().as_deref(), Some("PONG"));

    // a restarted sentinel keeps its (rewritten) state
    let s1 = &topo.sentinels()[1];
    let pid_before = s1.pid().unwrap();
    s1.restart().expect("restart sentinel");
    assert_ne!(s1.pid(), Some(pid_before));
    assert!(!pid_alive(pid_before));
    assert_eq!(
        s1.get_master_addr("mymaster").unwrap(),
        Some(("127.0.0.1".into(), rport))
    );
    // and one on a new port too
    let s2 = &topo.sentinels()[2];
    let new_port = sentinel_recovery_testkit::free_port();
    s2.restart_on_port(new_port).expect("restart on new port");
    assert_eq!(s2.port(), new_port);
    assert_eq!(
        s2.get_master_addr("mymaster").unwrap(),
        Some(("127.0.0.1".into(), rport))
    );
    assert!(topo.url().contains(&format!(":{new_port}")));
    let _ = old;
}

#[test]
fn node_faults_on_data_nodes() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        sentinels: 1,
        quorum: 1,
        ..Default::default()
    })
    .expect("start");
    let p = topo.primary();
    // DEBUG SLEEP returns at once for the caller; the server is busy meanwhile
    let t0 = Instant::now();
    p.debug_sleep(1.0);
    assert!(t0.elapsed() < Duration::from_millis(500));
    assert!(p
        .cmd_with_timeout(&["PING"], Duration::from_millis(300))
        .is_err());
    wait_until(Duration::from_secs(5), "primary awake", || {
        p.cmd_with_timeout(&["PING"], Duration::from_millis(300))
            .ok()
    })
    .unwrap();
    // CLIENT KILL TYPE normal drops other clients
    let mut c = p.connect(Duration::from_secs(2)).unwrap();
    assert!(c.call(&["PING"]).is_ok());
    p.client_kill_normal();
    assert!(c.call(&["PING"]).is_err(), "connection should be killed");
    // REPLICAOF moves a replica
    let r = &topo.replicas()[0];
    r.replicaof_no_one();
    assert_eq!(r.role().as_deref(), Some("master"));
    r.replicaof("127.0.0.1", p.port());
    assert_eq!(r.role().as_deref(), Some("slave"));
}

#[test]
fn drop_kills_every_process_and_removes_the_dir() {
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        sentinels: 1,
        quorum: 1,
        ..Default::default()
    })
    .expect("start");
    let pids: Vec<u32> = topo
        .data_nodes()
        .into_iter()
        .chain(topo.sentinels().iter())
        .filter_map(|n| n.pid())
        .collect();
    let dir = topo.dir().to_path_buf();
    assert_eq!(pids.len(), 3);
    assert!(pids.iter().all(|&p| pid_alive(p)));
    assert!(dir.is_dir());
    // dropped during a panic
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _t = topo;
        panic!("test failure inside a topology");
    }));
    assert!(r.is_err());
    assert!(pids.iter().all(|&p| !pid_alive(p)), "some pid survived");
    assert!(!dir.exists(), "{} still exists", dir.display());
}

#[test]
fn stale_sentinel_reports_old_primary() {
    let mut topo = Topology::start(TopologySpec {
        replicas: 1,
        sentinels: 1,
        quorum: 1,
        ..Default::default()
    })
    .expect("start");
    let dead = sentinel_recovery_testkit::refusing_port();
    let stale_port = topo
        .start_stale_sentinel(("127.0.0.1", dead), &[])
        .expect("stale sentinel")
        .port();
    let stale = topo.node_by_port(stale_port).unwrap();
    assert_eq!(
        stale.get_master_addr("mymaster").unwrap(),
        Some(("127.0.0.1".into(), dead))
    );
    assert_eq!(topo.stale_sentinels().len(), 1);
    assert!(!topo.url().contains(&stale.port().to_string()));
}

#[test]
fn valkey_topology_if_available() {
    if let Err(e) = ServerKind::Valkey.binary() {
        eprintln!("skipping: {e}");
        return;
    }
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        sentinels: 2,
        quorum: 1,
        server: ServerKind::Valkey,
        ..Default::default()
    })
    .expect("valkey start");
    let info = topo.primary().info("server").unwrap();
    assert!(info.contains_key("valkey_version"), "{info:?}");
    assert_eq!(
        topo.reported_primary(),
        Some(("127.0.0.1".into(), topo.primary().port()))
    );
    let old = topo.primary().port();
    topo.primary().kill9();
    let (_, new) = topo
        .wait_for_reported_primary(|a| a.1 != old, Duration::from_secs(15))
        .expect("valkey failover");
    assert_eq!(new, topo.replicas()[0].port());
}
