//! The fencing proxy against real topologies, driven by a plain RESP client that knows nothing
//! of Sentinel (the testkit's `Conn`, as any standalone Redis client would talk): failovers
//! judged by the set-full checker, and each per-connection meaning a move must keep or refuse.

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use sentinel_recovery::monitor::unix_ms;
use sentinel_recovery::{ListenAddress, Proxy, ProxyOptions};
use sentinel_recovery_testkit::security::SENTINEL_WATCHER_RULES;
use sentinel_recovery_testkit::setfull::{check, Op, Outcome};
use sentinel_recovery_testkit::{
    wait_until, AclSpec, AclUser, Conn, Reply, Topology, TopologySpec,
};

const FAILOVER: Duration = Duration::from_secs(30);
const IO: Duration = Duration::from_secs(10);

/// A topology with a proxy in front of it.
struct Rig {
    topo: Topology,
    proxy: Proxy,
}

impl Rig {
    fn start(spec: TopologySpec, url_extra: &[(&str, &str)], options: ProxyOptions) -> Rig {
        let topo = Topology::start(spec).unwrap();
        let url = topo.url_with(None, None, url_extra);
        Rig::on(topo, &url, options)
    }

    fn on(topo: Topology, url: &str, options: ProxyOptions) -> Rig {
        let proxy = rt().block_on(Proxy::start_url(url, options)).unwrap();
        Rig { topo, proxy }
    }

    fn addr(&self) -> String {
        match self.proxy.address() {
            ListenAddress::Tcp(a) => a.to_string(),
            other => panic!("not TCP: {other}"),
        }
    }

    fn conn(&self) -> Conn {
        Conn::connect(&self.addr(), IO).unwrap()
    }

    /// Starts a planned failover and waits until the proxy's client follows the new primary.
    fn fail_over(&self) -> u16 {
        let old = self.topo.primary().port();
        self.topo.sentinel_failover().unwrap();
        self.wait_switch(old)
    }

    fn wait_switch(&self, old: u16) -> u16 {
        let client = self.proxy.client().clone();
        wait_until(
            FAILOVER,
            "the proxy's client follows the new primary",
            || {
                let t = client.topology().ok()?;
                t.primary.filter(|p| p.port != old).map(|p| p.port)
            },
        )
        .unwrap()
    }

    fn node(&self, port: u16) -> &sentinel_recovery_testkit::Node {
        self.topo.node_by_port(port).unwrap()
    }

    fn close(self) {
        rt().block_on(self.proxy.close(Duration::from_secs(2)));
    }
}

fn ok(reply: Reply) -> Reply {
    assert!(!reply.is_error(), "unexpected error reply: {reply:?}");
    reply
}

fn text(reply: &Reply) -> String {
    reply.as_str().unwrap_or_else(|| format!("{reply:?}"))
}

// --- failovers judged by the checker -------------------------------------------------------

/// What a writer learned of one SADD through the proxy.
fn outcome(
    reply: &Result<Reply, sentinel_recovery_testkit::TestkitError>,
) -> (Outcome, Option<i64>, Option<String>) {
    match reply {
        Ok(Reply::Int(n)) => (Outcome::Ok, Some(*n), None),
        // Not sent, or refused by a node that is no primary: not applied.
        Ok(Reply::Error(e)) if e.starts_with("FENCED") || e.starts_with("READONLY") => {
            (Outcome::Fail, None, Some(e.clone()))
        }
        Ok(Reply::Error(e)) => (Outcome::Info, None, Some(e.clone())),
        Ok(other) => (Outcome::Info, None, Some(format!("{other:?}"))),
        Err(e) => (Outcome::Info, None, Some(e.to_string())),
    }
}

/// Writers SADD unique values through the proxy, each on its own connection (reopened when
/// it breaks), until `stop`.
fn start_writers(
    addr: &str,
    n: usize,
    stop: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Vec<Op>>> {
    (0..n)
        .map(|w| {
            let addr = addr.to_string();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut ops = Vec::new();
                let mut conn: Option<Conn> = None;
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if conn.is_none() {
                        conn = Conn::connect(&addr, IO).ok();
                        if conn.is_none() {
                            continue;
                        }
                    }
                    let v = format!("w{w}-{i}");
                    i += 1;
                    let t0 = unix_ms();
                    let reply = conn.as_mut().unwrap().call(&["SADD", "proxy-set", &v]);
                    let t1 = unix_ms();
                    if reply.is_err() {
                        conn = None;
                    }
                    let (outcome, reply, err) = outcome(&reply);
                    ops.push(Op {
                        w: format!("w{w}"),
                        v,
                        t0,
                        t1,
                        outcome,
                        reply,
                        err,
                    });
                }
                ops
            })
        })
        .collect()
}

/// Runs writers around `fault`, then judges every acknowledged write against the new primary.
fn judge_writes(rig: &Rig, fault: impl FnOnce(&Rig) -> u16) {
    let stop = Arc::new(AtomicBool::new(false));
    let writers = start_writers(&rig.addr(), 4, stop.clone());
    let client = rig.proxy.client().clone();
    let mut events = client.events().unwrap();
    wait_until(IO, "writes acknowledged before the fault", || {
        (rig.proxy.stats().commands_forwarded > 200).then_some(())
    })
    .unwrap();
    let fault_at = unix_ms();
    let new = fault(rig);
    let forwarded = rig.proxy.stats().commands_forwarded;
    wait_until(IO, "writes acknowledged after the switch", || {
        (rig.proxy.stats().commands_forwarded > forwarded + 200).then_some(())
    })
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let ops: Vec<Op> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert_eq!(client.topology().unwrap().primary.unwrap().port, new);
    let primary = rig.node(new);
    let members = match primary.cmd(&["SMEMBERS", "proxy-set"]).unwrap() {
        Reply::Array(items) => items
            .iter()
            .filter_map(Reply::as_str)
            .collect::<HashSet<_>>(),
        other => panic!("SMEMBERS: {other:?}"),
    };
    let report = check(&ops, &members, fault_at);
    report.consistent().unwrap();
    let t = &report.total;
    // When the promotion began, as the proxy's client heard it (the fence, or the switch when
    // no fence was announced). Writes acknowledged before it and not yet replicated are
    // Sentinel's asynchronous replication's to lose; none acknowledged after it may be lost.
    let mut began = None;
    while let Some(e) = events.try_next() {
        if matches!(
            e.kind,
            sentinel_recovery::EventKind::FailoverStarted { .. }
                | sentinel_recovery::EventKind::PrimaryChanged { .. }
        ) && e.at >= fault_at
        {
            began.get_or_insert(e.at);
        }
    }
    let began = began.expect("the proxy's client heard the promotion");
    let lost_after: Vec<&Op> = ops
        .iter()
        .filter(|o| o.outcome == Outcome::Ok && o.t1 >= began && !members.contains(&o.v))
        .collect();
    println!(
        "proxy writes through the fault: {t:?}; stats {:?}",
        rig.proxy.stats()
    );
    assert!(t.acknowledged > 400, "too few writes to judge: {t:?}");
    assert!(
        lost_after.is_empty(),
        "acknowledged after the promotion began, lost: {lost_after:?}"
    );
    assert_eq!(t.applied_twice, 0, "writes applied twice: {t:?}");
    assert_eq!(
        t.failed_but_present, 0,
        "a write reported not sent was applied: {t:?}"
    );
}

#[test]
fn a_planned_failover_through_the_proxy_loses_no_acknowledged_write() {
    let rig = Rig::start(TopologySpec::default(), &[], ProxyOptions::default());
    judge_writes(&rig, |rig| rig.fail_over());
    assert!(rig.proxy.stats().primary_changes >= 1);
    rig.close();
}

#[test]
fn a_kill_9_through_the_proxy_loses_no_acknowledged_write() {
    let rig = Rig::start(TopologySpec::default(), &[], ProxyOptions::default());
    judge_writes(&rig, |rig| {
        let old = rig.topo.primary().port();
        rig.topo.primary().kill9();
        rig.wait_switch(old)
    });
    rig.close();
}

#[test]
fn a_primary_paused_past_down_after_acknowledges_nothing_it_runs_after_waking() {
    let rig = Rig::start(TopologySpec::default(), &[], ProxyOptions::default());
    judge_writes(&rig, |rig| {
        let old = rig.topo.primary().port();
        rig.topo.primary().stop();
        let client = rig.proxy.client().clone();
        wait_until(FAILOVER, "the proxy fences the paused primary", || {
            let old = sentinel_recovery::Address::new("127.0.0.1", old);
            client.is_fenced(&old).then_some(())
        })
        .unwrap();
        rig.topo.primary().cont();
        rig.wait_switch(old)
    });
    rig.close();
}

// --- per-connection meanings across a move -------------------------------------------------

#[test]
fn state_moves_with_the_session_and_transactions_do_not() {
    let rig = Rig::start(TopologySpec::default(), &[], ProxyOptions::default());
    // SELECT and CLIENT SETNAME survive; a MULTI open at the move ends with EXECABORT.
    let mut state = rig.conn();
    ok(state.call(&["SELECT", "3"]).unwrap());
    ok(state.call(&["CLIENT", "SETNAME", "app-1"]).unwrap());
    ok(state.call(&["SET", "in-db-3", "v"]).unwrap());
    let mut multi = rig.conn();
    ok(multi.call(&["MULTI"]).unwrap());
    assert_eq!(text(&multi.call(&["SET", "m", "1"]).unwrap()), "QUEUED");
    // A WATCH that spans the move makes EXEC fail as a changed key would.
    let mut watch = rig.conn();
    ok(watch.call(&["WATCH", "w"]).unwrap());
    // A blocking pop in flight during the failover gets an answer, and the session goes on.
    let mut blocked = rig.conn();
    blocked.send(&["BLPOP", "never", "30"]).unwrap();
    rig.topo.wait_replication(IO).unwrap();

    let new = rig.fail_over();

    assert_eq!(text(&state.call(&["CLIENT", "GETNAME"]).unwrap()), "app-1");
    assert_eq!(text(&state.call(&["GET", "in-db-3"]).unwrap()), "v");
    let info = text(&state.call(&["CLIENT", "INFO"]).unwrap());
    assert!(
        info.contains(" db=3 ") && info.contains(&format!("laddr=127.0.0.1:{new}")),
        "{info}"
    );

    let queued = multi.call(&["SET", "m2", "2"]).unwrap();
    assert!(
        matches!(&queued, Reply::Error(e) if e.starts_with("EXECABORT")),
        "{queued:?}"
    );
    let exec = multi.call(&["EXEC"]).unwrap();
    assert!(
        matches!(&exec, Reply::Error(e) if e.starts_with("EXECABORT")),
        "{exec:?}"
    );
    assert_eq!(
        rig.node(new).cmd(&["EXISTS", "m"]).unwrap().as_int(),
        Some(0)
    );
    // The connection is usable again, on the new primary.
    ok(multi.call(&["SET", "after", "1"]).unwrap());

    ok(watch.call(&["MULTI"]).unwrap());
    assert_eq!(text(&watch.call(&["SET", "w", "1"]).unwrap()), "QUEUED");
    assert_eq!(watch.call(&["EXEC"]).unwrap(), Reply::Nil);
    assert_eq!(
        rig.node(new).cmd(&["EXISTS", "w"]).unwrap().as_int(),
        Some(0)
    );

    // The demoted primary unblocks its blocked clients with an error; never a success.
    let popped = blocked.read().unwrap();
    assert!(popped.is_error() || popped == Reply::Nil, "{popped:?}");
    ok(blocked.call(&["SET", "after-blpop", "1"]).unwrap());
    assert_eq!(
        rig.node(new)
            .cmd(&["EXISTS", "after-blpop"])
            .unwrap()
            .as_int(),
        Some(1)
    );
    assert!(rig.proxy.stats().moves >= 3);
    rig.close();
}

#[test]
fn subscriptions_follow_the_primary_and_a_blocking_pop_times_out_as_asked() {
    let rig = Rig::start(TopologySpec::default(), &[], ProxyOptions::default());
    let mut sub = rig.conn();
    sub.send(&["SUBSCRIBE", "news"]).unwrap();
    let confirm = sub.read().unwrap();
    assert_eq!(text(&confirm.as_array().unwrap()[0]), "subscribe");
    let new = rig.fail_over();
    // Published on the new primary until one arrives: the session re-subscribed there.
    let mut publisher = rig.node(new).connect(IO).unwrap();
    sub.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let message = wait_until(IO, "a message published on the new primary", || {
        publisher.call(&["PUBLISH", "news", "hello"]).ok()?;
        sub.read().ok()
    })
    .unwrap();
    let parts = message.as_array().unwrap();
    assert_eq!(
        (text(&parts[0]), text(&parts[2])),
        ("message".into(), "hello".into())
    );
    // No second confirmation reached the client: the replay's were swallowed.
    assert_ne!(text(&parts[0]), "subscribe");

    let mut pop = rig.conn();
    assert_eq!(pop.call(&["BLPOP", "empty", "0.2"]).unwrap(), Reply::Nil);
    rig.close();
}

#[test]
fn hello_3_and_inline_commands_pass_through() {
    let rig = Rig::start(TopologySpec::default(), &[], ProxyOptions::default());
    let mut s = TcpStream::connect(rig.addr()).unwrap();
    s.set_read_timeout(Some(IO)).unwrap();
    s.write_all(b"HELLO 3\r\nSET k \"a b\"\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"$3\r\na b\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with('%'), "HELLO 3 answers a map: {got}");
    assert!(got.contains("+OK\r\n$3\r\na b\r\n"), "{got}");
    rig.close();
}

// --- authentication ------------------------------------------------------------------------

const APP_PW: &str = "app-Pw-7";
const WATCHER_PW: &str = "w4tcher-Pw";
const DATA_RULES: &str = "~* resetchannels &* -@all +@read +@write +@connection +@pubsub +@transaction +role +info +command +acl|whoami";

#[test]
fn clients_authenticate_themselves_through_the_proxy_and_stay_authenticated_after_a_move() {
    let spec = TopologySpec {
        acl: Some(AclSpec {
            data_users: vec![AclUser::new("app", APP_PW, DATA_RULES)],
            sentinel_users: vec![AclUser::new("watcher", WATCHER_PW, SENTINEL_WATCHER_RULES)],
        }),
        ..TopologySpec::default()
    };
    let topo = Topology::start(spec).unwrap();
    let url = topo.url_with(Some(("app", APP_PW)), Some(("watcher", WATCHER_PW)), &[]);
    let rig = Rig::on(topo, &url, ProxyOptions::default());
    // The URL's credentials are the core's own, never lent to a local client.
    let mut anonymous = rig.conn();
    let refused = anonymous.call(&["GET", "k"]).unwrap();
    assert!(
        matches!(&refused, Reply::Error(e) if e.starts_with("NOAUTH")),
        "{refused:?}"
    );
    let wrong = anonymous.call(&["AUTH", "app", "wrong"]).unwrap();
    assert!(
        matches!(&wrong, Reply::Error(e) if e.starts_with("WRONGPASS")),
        "{wrong:?}"
    );
    let mut app = rig.conn();
    ok(app.call(&["AUTH", "app", APP_PW]).unwrap());
    ok(app.call(&["SET", "k", "1"]).unwrap());
    rig.fail_over();
    let whoami = app.call(&["ACL", "WHOAMI"]).unwrap();
    assert_eq!(text(&whoami), "app");
    ok(app.call(&["SET", "k", "2"]).unwrap());
    let still = anonymous.call(&["GET", "k"]).unwrap();
    assert!(
        matches!(&still, Reply::Error(e) if e.starts_with("NOAUTH")),
        "{still:?}"
    );
    // Lent only when asked: then a local client without AUTH acts as the URL's user.
    let lending = ProxyOptions {
        lend_credentials: true,
        ..ProxyOptions::default()
    };
    let lender = rt().block_on(Proxy::start_url(&url, lending)).unwrap();
    let ListenAddress::Tcp(at) = lender.address().clone() else {
        unreachable!()
    };
    let mut lent = Conn::connect(&at.to_string(), IO).unwrap();
    assert_eq!(text(&lent.call(&["GET", "k"]).unwrap()), "2");
    assert_eq!(text(&lent.call(&["ACL", "WHOAMI"]).unwrap()), "app");
    rt().block_on(lender.close(Duration::from_secs(1)));
    rig.close();
}

// --- durable acknowledgements ----------------------------------------------------------------

#[test]
fn with_wait_replicas_a_write_no_replica_confirmed_is_not_a_success() {
    let rig = Rig::start(
        TopologySpec::default(),
        &[("wait_replicas", "2"), ("wait_timeout_ms", "300")],
        ProxyOptions::default(),
    );
    let mut c = rig.conn();
    // A pipeline of writes and reads: one WAIT confirms the batch; replies keep their order.
    for args in [&["SET", "a", "1"][..], &["GET", "a"], &["INCR", "n"]] {
        c.send(args).unwrap();
    }
    assert_eq!(text(&ok(c.read().unwrap())), "OK");
    assert_eq!(text(&ok(c.read().unwrap())), "1");
    assert_eq!(ok(c.read().unwrap()).as_int(), Some(1));
    for replica in rig.topo.replicas() {
        replica.stop();
    }
    let write = c.call(&["SET", "b", "1"]).unwrap();
    assert!(
        matches!(&write, Reply::Error(e) if e.starts_with("NOTREPLICATED") && e.contains("not_replicated")),
        "{write:?}"
    );
    // Reads are not held for replicas.
    assert_eq!(text(&c.call(&["GET", "a"]).unwrap()), "1");
    // Not only those on the core's hand list: ECHO is a read by the server's own command table,
    // which the proxy reads once (until then every command the list does not know counts as a
    // write and would be answered NOTREPLICATED here).
    wait_until(
        IO,
        "ECHO judged a read by the server's command table",
        || (text(&c.call(&["ECHO", "hi"]).unwrap()) == "hi").then_some(()),
    )
    .unwrap();
    for replica in rig.topo.replicas() {
        replica.cont();
    }
    assert!(rig.proxy.stats().not_replicated >= 1);
    rig.close();
}

// --- limits and bad input --------------------------------------------------------------------

#[test]
fn limits_and_malformed_input_close_only_the_offending_session() {
    let options = ProxyOptions {
        max_clients: 3,
        max_request_bytes: 64 * 1024,
        idle_timeout: Some(Duration::from_millis(300)),
        ..ProxyOptions::default()
    };
    let rig = Rig::start(TopologySpec::default(), &[], options);
    let mut good = rig.conn();
    ok(good.call(&["SET", "k", "v"]).unwrap());

    let mut bad = TcpStream::connect(rig.addr()).unwrap();
    bad.set_read_timeout(Some(IO)).unwrap();
    // What came before the malformed request is answered first, as Redis does.
    bad.write_all(b"PING\r\n*1\r\n:12\r\n").unwrap();
    let mut reply = String::new();
    bad.read_to_string(&mut reply).unwrap();
    assert_eq!(
        reply,
        "+PONG\r\n-ERR Protocol error: expected '$', got ':'\r\n"
    );

    let mut big = TcpStream::connect(rig.addr()).unwrap();
    big.set_read_timeout(Some(IO)).unwrap();
    big.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n")
        .unwrap();
    let mut reply = String::new();
    big.read_to_string(&mut reply).unwrap();
    assert!(
        reply.starts_with("-ERR Protocol error: invalid bulk length"),
        "{reply}"
    );
    assert_eq!(text(&good.call(&["GET", "k"]).unwrap()), "v");

    // Three sessions at most: the fourth gets Redis' own refusal.
    let _second = rig.conn();
    let _third = rig.conn();
    wait_until(IO, "three sessions open", || {
        (rig.proxy.stats().sessions_open == 3).then_some(())
    })
    .unwrap();
    let mut fourth = TcpStream::connect(rig.addr()).unwrap();
    fourth.set_read_timeout(Some(IO)).unwrap();
    let mut reply = String::new();
    fourth.read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "-ERR max number of clients reached\r\n");

    // Idle sessions are closed after the idle timeout; a busy one is not.
    wait_until(IO, "idle sessions closed", || {
        (rig.proxy.stats().sessions_open == 0).then_some(())
    })
    .unwrap();
    assert!(good.call(&["PING"]).is_err(), "the idle session was closed");
    let stats = rig.proxy.stats();
    assert_eq!((stats.malformed_requests, stats.sessions_refused), (2, 1));
    rig.close();
}

#[test]
fn a_unix_socket_listener_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let path = dir.join("proxy.sock");
    let options = ProxyOptions {
        listen: ListenAddress::Unix(path.clone()),
        ..ProxyOptions::default()
    };
    let rig = Rig::start(TopologySpec::default(), &[], options);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(IO)).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"+PONG\r\n");
    rig.close();
    assert!(!path.exists(), "the socket file is removed at close");
    let _ = std::fs::remove_dir_all(dir);
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "sr-proxy-test-{}-{}",
        std::process::id(),
        unix_ms()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// --- TLS upstreams and read listeners ------------------------------------------------------

#[test]
fn upstreams_use_tls_where_the_url_says_so() {
    let spec = TopologySpec {
        tls: Some(sentinel_recovery_testkit::TlsSpec::default()),
        ..TopologySpec::default()
    };
    let rig = Rig::start(spec, &[], ProxyOptions::default());
    let mut c = rig.conn();
    ok(c.call(&["SET", "k", "over-tls"]).unwrap());
    let info = text(&c.call(&["CLIENT", "INFO"]).unwrap());
    let tls_port = rig.topo.primary().tls_port().unwrap();
    assert!(
        info.contains(&format!("laddr=127.0.0.1:{tls_port}")),
        "{info}"
    );
    rig.close();
}

#[test]
fn a_read_listener_sends_sessions_to_replicas() {
    let options = ProxyOptions {
        route: sentinel_recovery::Route::Read,
        ..ProxyOptions::default()
    };
    let rig = Rig::start(
        TopologySpec::default(),
        &[("read_from", "replica")],
        options,
    );
    let mut c = rig.conn();
    let info = text(&c.call(&["CLIENT", "INFO"]).unwrap());
    let replicas: Vec<u16> = rig.topo.replicas().iter().map(|r| r.port()).collect();
    assert!(
        replicas
            .iter()
            .any(|p| info.contains(&format!("laddr=127.0.0.1:{p}"))),
        "{info} not on a replica {replicas:?}"
    );
    let write = c.call(&["SET", "k", "v"]).unwrap();
    assert!(
        matches!(&write, Reply::Error(e) if e.starts_with("READONLY")),
        "{write:?}"
    );
    rig.close();
}

#[test]
fn a_subscriber_that_quits_ends_its_session() {
    let rig = Rig::start(TopologySpec::default(), &[], ProxyOptions::default());
    for _ in 0..5 {
        let mut sub = rig.conn();
        sub.send(&["SUBSCRIBE", "x"]).unwrap();
        sub.read().unwrap();
        // QUIT at once after the confirmation: the server closes; the session must not
        // reconnect to re-subscribe.
        assert_eq!(text(&sub.call(&["QUIT"]).unwrap()), "OK");
    }
    wait_until(IO, "every session ended", || {
        (rig.proxy.stats().sessions_open == 0).then_some(())
    })
    .unwrap();
    rig.close();
}

#[test]
fn tracking_and_monitor_sessions_are_closed_at_a_move_and_patterns_follow() {
    let rig = Rig::start(TopologySpec::default(), &[], ProxyOptions::default());
    let mut tracking = rig.conn();
    ok(tracking.call(&["CLIENT", "TRACKING", "ON"]).unwrap());
    let mut monitor = rig.conn();
    assert_eq!(text(&monitor.call(&["MONITOR"]).unwrap()), "OK");
    let mut patterns = rig.conn();
    patterns.send(&["PSUBSCRIBE", "news.*"]).unwrap();
    assert_eq!(
        text(&patterns.read().unwrap().as_array().unwrap()[0]),
        "psubscribe"
    );

    let new = rig.fail_over();

    // Their state cannot follow: the connections are closed, as a server restart would.
    assert!(
        tracking.call(&["GET", "k"]).is_err(),
        "a tracking session outlived the move"
    );
    monitor.set_read_timeout(Some(IO)).unwrap();
    let ended = (0..10_000).find(|_| monitor.read().is_err());
    assert!(ended.is_some(), "the MONITOR session outlived the move");
    // Patterns are subscribed again on the new primary.
    let mut publisher = rig.node(new).connect(IO).unwrap();
    patterns
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let message = wait_until(IO, "a pattern message from the new primary", || {
        publisher.call(&["PUBLISH", "news.a", "hi"]).ok()?;
        patterns.read().ok()
    })
    .unwrap();
    let parts = message.as_array().unwrap();
    assert_eq!(
        (text(&parts[0]), text(&parts[3])),
        ("pmessage".into(), "hi".into())
    );
    assert!(rig.proxy.stats().sessions_closed_at_move >= 2);
    rig.close();
}
