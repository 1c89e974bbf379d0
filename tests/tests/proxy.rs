//! The testkit's fault proxy in front of a real server: connections pass through intact, faults
//! hit only the connections it selects, a blackhole holds bytes until healed, a reset closes
//! affected connections, latency delays every chunk.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sentinel_recovery_testkit::{
    Affects, Conn, FaultProxy, Reply, TestkitError, Topology, TopologySpec,
};

const T: Duration = Duration::from_secs(5);

fn single_node() -> Topology {
    Topology::start(TopologySpec {
        replicas: 0,
        sentinels: 0,
        ..Default::default()
    })
    .expect("server")
}

fn proxy_for(topo: &Topology, affects: Affects) -> FaultProxy {
    let target: SocketAddr = ([127, 0, 0, 1], topo.primary().port()).into();
    FaultProxy::start(target, affects).expect("proxy")
}

fn conn(p: &FaultProxy) -> Conn {
    Conn::connect(&format!("127.0.0.1:{}", p.port()), T).expect("connect through the proxy")
}

/// A connection that the `FirstCommand("HELLO")` proxy classifies as a client's.
fn hello_conn(p: &FaultProxy) -> Conn {
    let mut c = conn(p);
    let r = c.call(&["HELLO", "2"]).expect("HELLO through the proxy");
    assert!(!r.is_error(), "HELLO refused: {r:?}");
    c
}

#[test]
fn forwards_commands_both_ways() {
    let topo = single_node();
    let p = proxy_for(&topo, Affects::All);
    let mut c = conn(&p);
    assert_eq!(
        c.call(&["SET", "k", "v"]).unwrap(),
        Reply::Simple("OK".into())
    );
    assert_eq!(c.call(&["GET", "k"]).unwrap(), Reply::bulk("v"));
    assert_eq!(p.open_connections(), (1, 1));
}

#[test]
fn blackhole_holds_only_affected_connections_and_delivers_after_heal() {
    let topo = single_node();
    let p = proxy_for(&topo, Affects::FirstCommand("HELLO".into()));
    let mut client = hello_conn(&p);
    let mut other = conn(&p);
    assert_eq!(other.call(&["PING"]).unwrap(), Reply::Simple("PONG".into()));

    p.set_blackhole(true);
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    client.send(&["INCR", "n"]).unwrap();
    assert!(
        client.read().is_err(),
        "a blackholed connection must not get its reply"
    );
    // Connections that did not start with HELLO are not affected.
    assert_eq!(other.call(&["PING"]).unwrap(), Reply::Simple("PONG".into()));

    p.heal();
    client.set_read_timeout(Some(T)).unwrap();
    assert_eq!(
        client.read().unwrap(),
        Reply::Int(1),
        "the held command arrives once healed"
    );
    assert_eq!(client.call(&["INCR", "n"]).unwrap(), Reply::Int(2));
}

#[test]
fn reset_closes_affected_connections_only() {
    let topo = single_node();
    let p = proxy_for(&topo, Affects::FirstCommand("HELLO".into()));
    let mut client = hello_conn(&p);
    let mut other = conn(&p);
    assert_eq!(other.call(&["PING"]).unwrap(), Reply::Simple("PONG".into()));
    assert_eq!(p.reset(), 1);
    // The client sees the reset itself (RST or EOF), not a silent connection that times out.
    match client.call(&["PING"]) {
        Err(TestkitError::Io { source, .. }) => assert!(
            !matches!(source.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "a reset connection must fail at once, not time out: {source}"
        ),
        Err(TestkitError::Protocol(_)) => {}
        other => panic!("a reset connection must fail, got {other:?}"),
    }
    assert_eq!(other.call(&["PING"]).unwrap(), Reply::Simple("PONG".into()));
    // New connections work again.
    let mut again = hello_conn(&p);
    assert_eq!(again.call(&["PING"]).unwrap(), Reply::Simple("PONG".into()));
}

#[test]
fn latency_delays_each_direction() {
    let topo = single_node();
    let p = proxy_for(&topo, Affects::All);
    let mut c = conn(&p);
    p.set_latency(Duration::from_millis(150));
    let start = Instant::now();
    assert_eq!(c.call(&["PING"]).unwrap(), Reply::Simple("PONG".into()));
    // Request and reply are each held for the latency: a lower bound, never flaky.
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
}
