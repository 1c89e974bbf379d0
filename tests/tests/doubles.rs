//! Tests of the fault doubles: SlowDns and FakeSentinel.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::time::{Duration, Instant};

use sentinel_recovery_testkit::dns::{decode_response, encode_query};
use sentinel_recovery_testkit::{
    master_reply, refusing_port, wait_until, Conn, FakeReply, FakeSentinel, Reply, SlowDns,
};

const A: u16 = 1;
const AAAA: u16 = 28;

fn udp_ask(sock: &UdpSocket, dns: &SlowDns, id: u16, name: &str, qtype: u16) {
    sock.send_to(&encode_query(id, name, qtype), dns.addr())
        .unwrap();
}

fn udp_recv(sock: &UdpSocket) -> (u16, u8, Vec<IpAddr>, Instant) {
    let mut buf = [0u8; 1500];
    let (n, _) = sock.recv_from(&mut buf).expect("DNS answer");
    let (id, rcode, ips) = decode_response(&buf[..n]).expect("decodable answer");
    (id, rcode, ips, Instant::now())
}

#[test]
fn slow_dns_answers_fast_names_at_once_and_slow_names_late() {
    let fast_ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
    let slow_ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let dns = SlowDns::start(&[
        ("fast.test", fast_ip, Duration::ZERO),
        ("slow.test.", slow_ip, Duration::from_millis(800)),
        ("v6.test", IpAddr::V6(Ipv6Addr::LOCALHOST), Duration::ZERO),
    ])
    .unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = Instant::now();
    // slow first: its delay must not hold up the fast one
    udp_ask(&sock, &dns, 1, "slow.test", A);
    udp_ask(&sock, &dns, 2, "FAST.test", A);
    let (id, rcode, ips, at) = udp_recv(&sock);
    assert_eq!((id, rcode, ips), (2, 0, vec![fast_ip]));
    assert!(
        at - t0 < Duration::from_millis(400),
        "fast answer took {:?}",
        at - t0
    );
    let (id, rcode, ips, at) = udp_recv(&sock);
    assert_eq!((id, rcode, ips), (1, 0, vec![slow_ip]));
    assert!(
        at - t0 >= Duration::from_millis(800),
        "slow answer after {:?}",
        at - t0
    );

    // AAAA for an A-only name: empty NOERROR; unknown name: NXDOMAIN; AAAA record works
    udp_ask(&sock, &dns, 3, "fast.test", AAAA);
    let (id, rcode, ips, _) = udp_recv(&sock);
    assert_eq!((id, rcode, ips), (3, 0, vec![]));
    udp_ask(&sock, &dns, 4, "nope.test", A);
    let (id, rcode, ips, _) = udp_recv(&sock);
    assert_eq!((id, rcode, ips), (4, 3, vec![]));
    udp_ask(&sock, &dns, 5, "v6.test", AAAA);
    let (_, rcode, ips, _) = udp_recv(&sock);
    assert_eq!((rcode, ips), (0, vec![IpAddr::V6(Ipv6Addr::LOCALHOST)]));

    let log = dns.query_log();
    let names: Vec<(&str, u16)> = log.iter().map(|(n, t, _)| (n.as_str(), *t)).collect();
    assert_eq!(
        names,
        vec![
            ("slow.test", A),
            ("fast.test", A),
            ("fast.test", AAAA),
            ("nope.test", A),
            ("v6.test", AAAA)
        ]
    );

    // runtime changes
    dns.set_delay("fast.test", Duration::from_millis(300));
    let t1 = Instant::now();
    udp_ask(&sock, &dns, 6, "fast.test", A);
    let (_, _, _, at) = udp_recv(&sock);
    assert!(at - t1 >= Duration::from_millis(300));
}

#[test]
fn slow_dns_over_tcp() {
    use std::io::{Read, Write};
    let dns = SlowDns::start(&[(
        "tcp.test",
        IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)),
        Duration::from_millis(100),
    )])
    .unwrap();
    let mut s = std::net::TcpStream::connect(dns.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let q = encode_query(9, "tcp.test", A);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut msg).unwrap();
    let (id, rcode, ips) = decode_response(&msg).unwrap();
    assert_eq!(
        (id, rcode, ips),
        (9, 0, vec![IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3))])
    );
}

#[test]
fn fake_sentinel_runs_its_script() {
    let fake = FakeSentinel::start(|args| {
        if let Some(r) = FakeSentinel::default_reply(args) {
            return r;
        }
        match String::from_utf8_lossy(&args[0])
            .to_ascii_uppercase()
            .as_str()
        {
            "SENTINEL" => FakeReply::Value(master_reply("127.0.0.1", 6399, "master,s_down")),
            "GARBAGE" => FakeReply::Raw(b"?what\r\n".to_vec()),
            "BYE" => FakeReply::RawThenClose(b"+BYE\r\n".to_vec()),
            "SLAM" => FakeReply::Close,
            _ => FakeReply::Hang,
        }
    })
    .unwrap();
    let mut c = Conn::connect(&fake.addr(), Duration::from_secs(2)).unwrap();
    assert!(
        matches!(c.call(&["HELLO", "3"]).unwrap(), Reply::Error(e) if e.contains("unknown command"))
    );
    assert_eq!(
        c.call(&["CLIENT", "SETNAME", "x"]).unwrap(),
        Reply::Simple("OK".into())
    );
    assert_eq!(c.call(&["PING"]).unwrap(), Reply::Simple("PONG".into()));
    let m = c
        .call(&["SENTINEL", "MASTER", "mymaster"])
        .unwrap()
        .to_map()
        .unwrap();
    assert_eq!(m["port"], "6399");
    assert_eq!(m["flags"], "master,s_down");
    assert!(m.contains_key("s-down-time"));
    assert!(
        c.call(&["GARBAGE"]).is_err(),
        "malformed reply must not parse"
    );

    let mut c = Conn::connect(&fake.addr(), Duration::from_secs(2)).unwrap();
    assert_eq!(c.call(&["BYE"]).unwrap(), Reply::Simple("BYE".into()));
    assert!(c.read().is_err(), "closed after RawThenClose");
    let mut c = Conn::connect(&fake.addr(), Duration::from_secs(2)).unwrap();
    assert!(c.call(&["SLAM"]).is_err());

    // subscribe + publish
    let mut sub = Conn::connect(&fake.addr(), Duration::from_secs(2)).unwrap();
    let conf = sub.call(&["SUBSCRIBE", "+switch-master"]).unwrap();
    assert_eq!(
        conf,
        Reply::Array(vec![
            Reply::bulk("subscribe"),
            Reply::bulk("+switch-master"),
            Reply::Int(1)
        ])
    );
    assert_eq!(
        fake.publish("+switch-master", "mymaster 127.0.0.1 1 127.0.0.1 2"),
        1
    );
    assert_eq!(
        sub.read().unwrap(),
        Reply::bulk_array(&[
            "message",
            "+switch-master",
            "mymaster 127.0.0.1 1 127.0.0.1 2"
        ])
    );

    // unknown commands hang: no answer, socket open
    let mut h = Conn::connect(&fake.addr(), Duration::from_millis(300)).unwrap();
    assert!(h.call(&["WHATEVER"]).is_err(), "should time out");
    let cmds = fake.commands();
    assert_eq!(cmds[0], vec!["HELLO", "3"]);
    assert!(cmds.iter().any(|c| c[0] == "WHATEVER"));
    assert!(fake.connections_accepted() >= 5);
}

#[test]
fn hanging_fake_and_reporting_fake() {
    let hang = FakeSentinel::hanging();
    let mut c = Conn::connect(&hang.addr(), Duration::from_millis(300)).unwrap();
    let t0 = Instant::now();
    assert!(c.call(&["PING"]).is_err());
    assert!(t0.elapsed() >= Duration::from_millis(250));
    wait_until(Duration::from_secs(2), "PING logged", || {
        (hang.commands() == vec![vec!["PING".to_string()]]).then_some(())
    })
    .unwrap();
    assert_eq!(hang.connections_open(), 1);
    drop(hang);
    // dropping the fake closes its connections
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    assert!(c.read().is_err());

    let fake = FakeSentinel::reporting("mymaster", ("127.0.0.1", 7777)).unwrap();
    let mut c = Conn::connect(&fake.addr(), Duration::from_secs(2)).unwrap();
    assert_eq!(
        c.call(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"])
            .unwrap(),
        Reply::bulk_array(&["127.0.0.1", "7777"])
    );
    assert_eq!(
        c.call(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "other"])
            .unwrap(),
        Reply::Nil
    );
    assert_eq!(
        c.call(&["SENTINEL", "SENTINELS", "mymaster"]).unwrap(),
        Reply::Array(vec![])
    );
    assert!(c.call(&["SENTINEL", "MASTER", "other"]).unwrap().is_error());

    // nothing listens on a refusing port
    let p = refusing_port();
    assert!(Conn::connect(&format!("127.0.0.1:{p}"), Duration::from_secs(1)).is_err());
}
