//! The resolver against a scripted UDP DNS server. The server is here rather than the testkit's
//! `SlowDns`: the core cannot use the testkit (the testkit depends on the core), and moving these
//! tests to tests/ would need a `SlowDns` that drops AAAA queries alone, which it cannot.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

use super::resolver::*;
use crate::error::{Error, ErrorCode};

/// A UDP DNS server answering A queries from a table; each answer after its delay.
/// Names not in the table get NXDOMAIN, AAAA queries for known names an empty answer.
/// Every query is logged; [`FakeDns::drop_queries`] makes it answer none, or no AAAA.
struct FakeDns {
    addr: SocketAddr,
    table: Arc<Mutex<HashMap<String, (Ipv4Addr, Duration)>>>,
    queries: Arc<AtomicUsize>,
    log: Arc<Mutex<Vec<(String, u16)>>>,
    dropping: Arc<Mutex<Dropping>>,
    task: tokio::task::JoinHandle<()>,
}

/// Which queries the fake server leaves unanswered.
#[derive(Clone, Copy, PartialEq)]
enum Dropping {
    Nothing,
    Aaaa,
    Everything,
}

const AAAA: u16 = 28;

impl Drop for FakeDns {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeDns {
    async fn start(entries: &[(&str, Ipv4Addr, Duration)]) -> FakeDns {
        let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let addr = socket.local_addr().unwrap();
        let table: HashMap<_, _> = entries
            .iter()
            .map(|(n, ip, d)| (n.to_string(), (*ip, *d)))
            .collect();
        let table = Arc::new(Mutex::new(table));
        let queries = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let dropping = Arc::new(Mutex::new(Dropping::Nothing));
        let task = tokio::spawn({
            let (table, queries) = (table.clone(), queries.clone());
            let (log, dropping) = (log.clone(), dropping.clone());
            async move {
                let mut buf = [0u8; 1500];
                loop {
                    let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                        return;
                    };
                    queries.fetch_add(1, Ordering::SeqCst);
                    let Some((name, qtype, question_end)) = parse_query(&buf[..n]) else {
                        continue;
                    };
                    log.lock().unwrap().push((name.clone(), qtype));
                    match *dropping.lock().unwrap() {
                        Dropping::Everything => continue,
                        Dropping::Aaaa if qtype == AAAA => continue,
                        _ => {}
                    }
                    let found = table.lock().unwrap().get(&name).copied();
                    let reply = answer(&buf[..question_end], qtype, found.map(|f| f.0));
                    let delay = found.map(|f| f.1).unwrap_or_default();
                    let socket = socket.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = socket.send_to(&reply, from).await;
                    });
                }
            }
        });
        FakeDns {
            addr,
            table,
            queries,
            log,
            dropping,
            task,
        }
    }

    fn drop_queries(&self, which: Dropping) {
        *self.dropping.lock().unwrap() = which;
    }

    /// The queries received for `name`, as qtypes.
    fn asked(&self, name: &str) -> Vec<u16> {
        let log = self.log.lock().unwrap();
        log.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, t)| *t)
            .collect()
    }

    fn set(&self, name: &str, ip: Ipv4Addr, delay: Duration) {
        self.table.lock().unwrap().insert(name.into(), (ip, delay));
    }

    /// A resolver asking this server, with the system's hosts file and IPv6 on.
    fn resolver(&self, timeout: Duration, cache_ttl: Duration) -> Resolver {
        self.resolver_with(timeout, cache_ttl, Path::new("/etc/hosts"), true)
    }

    fn resolver_with(
        &self,
        timeout: Duration,
        cache_ttl: Duration,
        hosts_file: &Path,
        ipv6: bool,
    ) -> Resolver {
        Resolver::new(DnsOptions {
            timeout,
            nameserver: Some(self.addr),
            cache_ttl,
            hosts_file: hosts_file.to_owned(),
            ipv6: Some(ipv6),
        })
        .unwrap()
    }
}

/// A hosts file in the temp dir, removed when dropped.
struct TempHosts(PathBuf);

impl TempHosts {
    fn new(text: &str) -> TempHosts {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "sr-dns-test-{}-{}.hosts",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::write(&path, text).unwrap();
        TempHosts(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    /// Replaces the file the way editors and config tools do: a new file renamed over it.
    fn replace(&self, text: &str) {
        let tmp = self.0.with_extension("new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.0).unwrap();
    }
}

impl Drop for TempHosts {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// (lower-case name without the final dot, qtype, end offset of the question).
fn parse_query(msg: &[u8]) -> Option<(String, u16, usize)> {
    let mut pos = 12;
    let mut labels = Vec::new();
    loop {
        let len = *msg.get(pos)? as usize;
        pos += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(msg.get(pos..pos + len)?).to_lowercase());
        pos += len;
    }
    let qtype = u16::from_be_bytes([*msg.get(pos)?, *msg.get(pos + 1)?]);
    Some((labels.join("."), qtype, pos + 4))
}

/// The response to `query` (header + question): one A record, an empty answer, or NXDOMAIN.
fn answer(query: &[u8], qtype: u16, ip: Option<Ipv4Addr>) -> Vec<u8> {
    let records = match (ip, qtype) {
        (Some(ip), 1) => vec![ip],
        _ => vec![],
    };
    let mut out = Vec::new();
    out.extend_from_slice(&query[..2]); // id
    out.push(0x81); // QR, RD
    out.push(if ip.is_some() { 0x80 } else { 0x83 }); // RA, NOERROR / NXDOMAIN
    out.extend_from_slice(&[0, 1]); // one question
    out.extend_from_slice(&(records.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]); // no authority, no additional
    out.extend_from_slice(&query[12..]);
    for ip in records {
        out.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]); // name pointer, A, IN
        out.extend_from_slice(&60u32.to_be_bytes());
        out.extend_from_slice(&[0, 4]);
        out.extend_from_slice(&ip.octets());
    }
    out
}

fn ip(a: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, a)
}

#[test]
fn builds_outside_a_runtime() {
    // The monitor builds it on a host thread with no runtime around.
    let resolver = Resolver::new(DnsOptions::default()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addrs = rt.block_on(resolver.resolve("127.0.0.1", 1)).unwrap();
    assert_eq!(addrs, vec!["127.0.0.1:1".parse().unwrap()]);
}

#[tokio::test]
async fn ip_literals_need_no_server() {
    let dns = FakeDns::start(&[]).await;
    let r = dns.resolver(Duration::from_millis(200), Duration::from_secs(30));
    assert_eq!(
        r.resolve("10.1.2.3", 26379).await.unwrap(),
        vec!["10.1.2.3:26379".parse().unwrap()]
    );
    assert_eq!(
        r.resolve("::1", 7).await.unwrap(),
        vec!["[::1]:7".parse().unwrap()]
    );
    assert_eq!(
        r.resolve("[fe80::1]", 7).await.unwrap(),
        vec!["[fe80::1]:7".parse().unwrap()]
    );
    assert_eq!(dns.queries.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn resolves_and_caches() {
    let dns = FakeDns::start(&[("fast.test", ip(1), Duration::ZERO)]).await;
    let r = dns.resolver(Duration::from_millis(500), Duration::from_secs(30));
    let addrs = r.resolve("fast.test", 6379).await.unwrap();
    assert_eq!(addrs, vec![SocketAddr::new(ip(1).into(), 6379)]);
    let after_first = dns.queries.load(Ordering::SeqCst);
    assert!(after_first >= 1);
    // Served from the cache, whatever the case and port.
    let addrs = r.resolve("FAST.test.", 1).await.unwrap();
    assert_eq!(addrs, vec![SocketAddr::new(ip(1).into(), 1)]);
    assert_eq!(dns.queries.load(Ordering::SeqCst), after_first);
}

#[tokio::test]
async fn slow_lookup_times_out_quickly() {
    let dns = FakeDns::start(&[("slow.test", ip(2), Duration::from_secs(3))]).await;
    let r = dns.resolver(Duration::from_millis(200), Duration::from_secs(30));
    let started = Instant::now();
    let err = r.resolve("slow.test", 1).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
    assert!(err.message().contains("slow.test"), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn unknown_names_are_config_errors() {
    let dns = FakeDns::start(&[]).await;
    let r = dns.resolver(Duration::from_millis(500), Duration::from_secs(30));
    let err = r.resolve("nope.test", 1).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Config, "{err}");
    assert!(err.message().contains("nope.test"), "{err}");
    let err = r.resolve("bad host!", 1).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Config, "{err}");
}

#[tokio::test]
async fn concurrent_lookups_share_one_query() {
    let dns = FakeDns::start(&[("shared.test", ip(3), Duration::from_millis(100))]).await;
    let r = dns.resolver(Duration::from_secs(1), Duration::from_secs(30));
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let r = r.clone();
            tokio::spawn(async move { r.resolve("shared.test", 1).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(
            t.await.unwrap().unwrap(),
            vec![SocketAddr::new(ip(3).into(), 1)]
        );
    }
    // One A and one AAAA query (a retry could add one more, never twenty).
    assert!(dns.queries.load(Ordering::SeqCst) <= 3);
}

#[tokio::test]
async fn stale_answer_is_served_while_the_refresh_is_slow() {
    let dns = FakeDns::start(&[("moving.test", ip(4), Duration::ZERO)]).await;
    let r = dns.resolver(Duration::from_secs(1), Duration::from_millis(100));
    let first = r.resolve("moving.test", 1).await.unwrap();
    assert_eq!(first, vec![SocketAddr::new(ip(4).into(), 1)]);

    dns.set("moving.test", ip(5), Duration::from_millis(400));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = Instant::now();
    let stale = r.resolve("moving.test", 1).await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(50));
    assert_eq!(stale, first, "expired entry served at once");
    // Still the old answer while the single refresh is under way.
    let queries = dns.queries.load(Ordering::SeqCst);
    assert_eq!(r.resolve("moving.test", 1).await.unwrap(), first);
    assert_eq!(dns.queries.load(Ordering::SeqCst), queries);

    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        r.resolve("moving.test", 1).await.unwrap(),
        vec![SocketAddr::new(ip(5).into(), 1)]
    );
}

#[tokio::test]
async fn failed_refresh_keeps_the_last_answer() {
    let dns = FakeDns::start(&[("flaky.test", ip(6), Duration::ZERO)]).await;
    let r = dns.resolver(Duration::from_millis(100), Duration::from_millis(50));
    let good = r.resolve("flaky.test", 1).await.unwrap();
    dns.set("flaky.test", ip(7), Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(r.resolve("flaky.test", 1).await.unwrap(), good);
    tokio::time::sleep(Duration::from_millis(300)).await; // refresh timed out meanwhile
    assert_eq!(r.resolve("flaky.test", 1).await.unwrap(), good);
}

#[tokio::test]
async fn localhost_comes_from_hosts_without_queries() {
    let dns = FakeDns::start(&[]).await;
    let r = dns.resolver(Duration::from_millis(500), Duration::from_secs(30));
    let addrs = r.resolve("localhost", 26379).await.unwrap();
    assert!(
        addrs.contains(&"127.0.0.1:26379".parse().unwrap()),
        "{addrs:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(dns.queries.load(Ordering::SeqCst), 0);
}

fn sa(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().unwrap(), port)
}

#[tokio::test]
async fn hosts_file_names_resolve_while_dns_drops_every_query() {
    let dns = FakeDns::start(&[]).await;
    dns.drop_queries(Dropping::Everything);
    let hosts = TempHosts::new(
        "# test hosts\n\
         10.0.0.1\tsentinel-a.hosts.test sentinel-b.hosts.test # two names\n\
         10.0.0.2 Both.hosts.test\n\
         fd00::5 both.hosts.test\n\
         fd00::6 v6only.hosts.test\n\
         not-an-address ignored.hosts.test\n",
    );
    let r = dns.resolver_with(
        Duration::from_millis(300),
        Duration::from_millis(10),
        hosts.path(),
        true,
    );
    for _ in 0..3 {
        assert_eq!(
            r.resolve("sentinel-a.hosts.test", 26379).await.unwrap(),
            vec![sa("10.0.0.1", 26379)],
            "a name listed with IPv4 only gets it, without waiting for an AAAA"
        );
        assert_eq!(
            r.resolve("SENTINEL-B.hosts.test.", 1).await.unwrap(),
            vec![sa("10.0.0.1", 1)]
        );
        assert_eq!(
            r.resolve("both.hosts.test", 2).await.unwrap(),
            vec![sa("10.0.0.2", 2), sa("fd00::5", 2)]
        );
        assert_eq!(
            r.resolve("v6only.hosts.test", 3).await.unwrap(),
            vec![sa("fd00::6", 3)]
        );
        tokio::time::sleep(Duration::from_millis(20)).await; // past cache_ttl
    }
    // The server is really asked for other names, and leaves them unanswered.
    let err = r.resolve("dns-only.hosts.test", 1).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
    assert!(err.message().ends_with("took longer than 300 ms"), "{err}");
    assert!(!dns.asked("dns-only.hosts.test").is_empty());
    let err = r.resolve("ignored.hosts.test", 1).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout, "{err}");
    for name in [
        "sentinel-a.hosts.test",
        "sentinel-b.hosts.test",
        "both.hosts.test",
        "v6only.hosts.test",
    ] {
        assert_eq!(dns.asked(name), Vec::<u16>::new(), "{name} went to DNS");
    }
}

#[tokio::test]
async fn the_hosts_file_is_authoritative_for_the_names_it_lists() {
    // The DNS knows another address and answers AAAA queries with NXDOMAIN-free empty
    // answers; a name in the hosts file must not cause a single query anyway.
    let dns = FakeDns::start(&[("listed.hosts.test", ip(9), Duration::ZERO)]).await;
    let hosts = TempHosts::new("10.0.0.1 listed.hosts.test\n");
    let r = dns.resolver_with(
        Duration::from_millis(500),
        Duration::from_millis(1),
        hosts.path(),
        true,
    );
    for _ in 0..7 {
        assert_eq!(
            r.resolve("listed.hosts.test", 1).await.unwrap(),
            vec![sa("10.0.0.1", 1)]
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(dns.asked("listed.hosts.test"), Vec::<u16>::new());
    assert_eq!(dns.queries.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_changed_hosts_file_is_picked_up() {
    let dns = FakeDns::start(&[("moved.hosts.test", ip(9), Duration::ZERO)]).await;
    let hosts = TempHosts::new("10.0.0.1 moved.hosts.test\n");
    let r = dns.resolver_with(
        Duration::from_millis(500),
        Duration::from_millis(50),
        hosts.path(),
        false,
    );
    assert_eq!(
        r.resolve("moved.hosts.test", 1).await.unwrap(),
        vec![sa("10.0.0.1", 1)]
    );
    hosts.replace("10.0.0.22 moved.hosts.test\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = r.resolve("moved.hosts.test", 1).await.unwrap();
        if now == vec![sa("10.0.0.22", 1)] {
            break;
        }
        assert_eq!(now, vec![sa("10.0.0.1", 1)], "old or new, nothing else");
        assert!(
            Instant::now() < deadline,
            "the new hosts file was never read"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(dns.queries.load(Ordering::SeqCst), 0);
    // Once the file no longer lists the name, DNS is asked.
    hosts.replace("10.0.0.22 other.hosts.test\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while r.resolve("moved.hosts.test", 1).await.unwrap() != vec![sa("10.0.0.9", 1)] {
        assert!(Instant::now() < deadline, "the name never went to DNS");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        dns.asked("moved.hosts.test"),
        vec![1],
        "A only: IPv6 is off"
    );
}

#[tokio::test]
async fn no_aaaa_query_when_ipv6_is_not_in_use() {
    let dns = FakeDns::start(&[("v4.test", ip(1), Duration::ZERO)]).await;
    dns.drop_queries(Dropping::Aaaa);
    let hosts = TempHosts::new("");
    let r = dns.resolver_with(
        Duration::from_millis(500),
        Duration::from_secs(30),
        hosts.path(),
        false,
    );
    assert_eq!(
        r.resolve("v4.test", 1).await.unwrap(),
        vec![sa("10.0.0.1", 1)]
    );
    assert!(
        !dns.asked("v4.test").contains(&AAAA),
        "{:?}",
        dns.asked("v4.test")
    );
}

#[tokio::test]
async fn an_unanswered_aaaa_does_not_hold_up_the_a_answer() {
    let dns = FakeDns::start(&[("v4.test", ip(1), Duration::ZERO)]).await;
    dns.drop_queries(Dropping::Aaaa);
    let hosts = TempHosts::new("");
    let r = dns.resolver_with(
        Duration::from_millis(500),
        Duration::from_secs(30),
        hosts.path(),
        true,
    );
    // The A answer is enough: the lookup must not wait out its deadline for the AAAA one.
    assert_eq!(
        r.resolve("v4.test", 1).await.unwrap(),
        vec![sa("10.0.0.1", 1)]
    );
    assert!(
        dns.asked("v4.test").contains(&AAAA),
        "IPv6 is on: AAAA asked"
    );
}

#[tokio::test]
async fn long_names_are_refused_without_being_echoed() {
    let dns = FakeDns::start(&[]).await;
    let r = dns.resolver(Duration::from_millis(200), Duration::from_secs(30));
    // Failure messages show the start only: a whole 2 MB name is what this guards against.
    let start = |e: &Error| e.message().chars().take(300).collect::<String>();
    let huge = format!("{}.test", "a".repeat(2_000_000));
    let err = r.resolve(&huge, 1).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Config, "{}", start(&err));
    assert!(
        err.message().contains("2000005 characters"),
        "{}",
        start(&err)
    );
    assert!(err.message().len() < 250, "{}", start(&err));
    let label = format!("{}.test", "b".repeat(64));
    let err = r.resolve(&label, 1).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Config, "{err}");
    assert!(err.message().contains("64 characters"), "{err}");
    assert_eq!(dns.queries.load(Ordering::SeqCst), 0);
}

#[test]
fn ipv6_counts_only_beyond_loopback_and_link_local() {
    let lo = "00000000000000000000000000000001 01 80 10 80       lo\n";
    let link = "fe8000000000000000fc00fffe000001 02 40 20 80     eth0\n";
    let global = "fd000000000000000000000000000002 02 40 00 80     eth0\n";
    assert!(!if_inet6_has_routable(""));
    assert!(!if_inet6_has_routable(&format!("{lo}{link}")));
    assert!(if_inet6_has_routable(&format!("{lo}{link}{global}")));
}
