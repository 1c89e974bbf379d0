//! Non-blocking host name resolution with a stale-while-refresh cache.
//!
//! A blocking `getaddrinfo` on a runtime thread would stall every connection the runtime drives, so
//! resolution goes through hickory's async resolver (which honours `/etc/hosts`). Sentinel hosts are
//! re-resolved often and DNS can be slow exactly when failover happens, so answers are cached: an
//! expired entry is still returned at once while one background lookup refreshes it, and a failed
//! refresh keeps the last good answer.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::NetError;
use hickory_resolver::TokioResolver;
use tokio::sync::watch;

use crate::error::{Error, ErrorCode, Result};

/// Longest wait before retrying a refresh that failed (shorter when `cache_ttl` is shorter).
const FAILED_REFRESH_RETRY: Duration = Duration::from_secs(1);

/// Resolution settings.
#[derive(Clone, Debug)]
pub struct DnsOptions {
    /// Deadline for one lookup (A and AAAA together). Default 1 s.
    pub timeout: Duration,
    /// Query only this server (UDP, TCP on truncation) instead of the system's resolv.conf ones.
    /// `/etc/hosts` is still honoured. Default `None`.
    pub nameserver: Option<SocketAddr>,
    /// How long an answer is served without a refresh. Default 30 s.
    pub cache_ttl: Duration,
}

/// 1 s lookup timeout, the system's name servers, 30 s cache.
impl Default for DnsOptions {
    fn default() -> DnsOptions {
        DnsOptions {
            timeout: Duration::from_secs(1),
            nameserver: None,
            cache_ttl: Duration::from_secs(30),
        }
    }
}

/// An asynchronous, caching resolver. Cheap to clone; clones share the cache.
#[derive(Clone)]
pub struct Resolver {
    inner: Arc<Inner>,
}

struct Inner {
    hickory: TokioResolver,
    opts: DnsOptions,
    state: Mutex<State>,
}

/// A lookup result shared by everyone waiting for the same name.
type Outcome = Result<Arc<[IpAddr]>>;

#[derive(Default)]
struct State {
    cache: HashMap<String, Entry>,
    /// Lookups under way, by name; the id tells a finished lookup's entry from a newer one.
    inflight: HashMap<String, (u64, watch::Receiver<Option<Outcome>>)>,
    next_id: u64,
}

struct Entry {
    addrs: Arc<[IpAddr]>,
    /// Until then the entry is served without any lookup; after it, served while refreshing.
    refresh_at: Instant,
}

impl Resolver {
    /// Builds a resolver, reading `/etc/resolv.conf` (unless `opts.nameserver` is set) and
    /// `/etc/hosts` now, synchronously: call it on a host thread, never on a runtime thread.
    /// Nothing is read from disk afterwards.
    ///
    /// A missing or unreadable resolv.conf is not an error: IP literals and `/etc/hosts` names
    /// still resolve, other names fail at lookup time.
    pub fn new(opts: DnsOptions) -> Result<Resolver> {
        let provider = TokioRuntimeProvider::default();
        let mut builder = match opts.nameserver {
            Some(server) => {
                let mut udp = ConnectionConfig::udp();
                udp.port = server.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = server.port();
                let ns = NameServerConfig::new(server.ip(), true, vec![udp, tcp]);
                TokioResolver::builder_with_config(
                    ResolverConfig::from_name_servers(vec![ns]),
                    provider,
                )
            }
            None => match TokioResolver::builder(provider.clone()) {
                Ok(builder) => builder,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the system DNS configuration; only /etc/hosts and IP addresses will resolve");
                    TokioResolver::builder_with_config(
                        ResolverConfig::from_name_servers(Vec::new()),
                        provider,
                    )
                }
            },
        };
        let options = builder.options_mut();
        options.timeout = opts.timeout;
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        options.use_hosts_file = ResolveHosts::Always;
        // Our cache decides freshness; hickory's would hide a changed record for its TTL.
        options.positive_max_ttl = Some(Duration::ZERO);
        options.negative_max_ttl = Some(Duration::ZERO);
        let hickory = builder
            .build()
            .map_err(|e| Error::config(format!("cannot set up DNS resolution: {e}")))?;
        Ok(Resolver {
            inner: Arc::new(Inner {
                hickory,
                opts,
                state: Mutex::new(State::default()),
            }),
        })
    }

    /// Socket addresses for `host:port`.
    ///
    /// An IP literal (also `[v6]`) is returned at once without a lookup. A name with a fresh cache
    /// entry gets it; with an expired entry, gets it at once while one background lookup refreshes
    /// it (a failed refresh keeps the old answer). Without an entry, A and AAAA are looked up
    /// (IPv4 first in the result), sharing one query with concurrent callers for the same name.
    ///
    /// Errors: [`ErrorCode::Timeout`] past `timeout`; [`ErrorCode::Config`] for an invalid name,
    /// a name that does not exist or has no addresses; [`ErrorCode::ConnectionLost`] when no
    /// name server could be asked. Messages name the host. Must run inside a tokio runtime.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>> {
        if let Some(ip) = ip_literal(host) {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let key = normalize(host)?;
        let mut rx = {
            let mut state = self.inner.lock();
            if let Some(entry) = state.cache.get(&key) {
                let addrs = entry.addrs.clone();
                if Instant::now() >= entry.refresh_at {
                    self.start_lookup(&mut state, &key);
                }
                return Ok(with_port(&addrs, port));
            }
            self.start_lookup(&mut state, &key)
        };
        loop {
            if let Some(outcome) = rx.borrow_and_update().clone() {
                return outcome.map(|addrs| with_port(&addrs, port));
            }
            if rx.changed().await.is_err() {
                return match rx.borrow().clone() {
                    Some(outcome) => outcome.map(|addrs| with_port(&addrs, port)),
                    None => Err(Error::new(
                        ErrorCode::ConnectionLost,
                        format!("lookup of host '{key}' was abandoned"),
                    )),
                };
            }
        }
    }

    /// Joins the lookup of `key` under way or spawns one; the task updates the cache itself, so
    /// it completes even if every caller stops waiting.
    fn start_lookup(&self, state: &mut State, key: &str) -> watch::Receiver<Option<Outcome>> {
        if let Some((_, rx)) = state.inflight.get(key) {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(None);
        let id = state.next_id;
        state.next_id += 1;
        state.inflight.insert(key.to_owned(), (id, rx.clone()));
        let guard = InflightGuard {
            inner: self.inner.clone(),
            key: key.to_owned(),
            id,
        };
        tokio::spawn(async move {
            let outcome = guard.inner.lookup(&guard.key).await;
            guard.inner.finish(&guard.key, &outcome);
            let _ = tx.send(Some(outcome));
            drop(guard);
        });
        rx
    }
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("opts", &self.inner.opts)
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere mid-update of plain maps; keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn lookup(&self, host: &str) -> Outcome {
        let timeout = self.opts.timeout;
        let lookup = match tokio::time::timeout(timeout, self.hickory.lookup_ip(host)).await {
            Err(_) => {
                return Err(Error::timeout(format!(
                    "resolving host '{host}' took longer than {timeout:?}"
                )))
            }
            Ok(Err(e)) => return Err(classify(host, &e, timeout)),
            Ok(Ok(lookup)) => lookup,
        };
        let mut addrs: Vec<IpAddr> = Vec::new();
        for ip in lookup.iter() {
            if !addrs.contains(&ip) {
                addrs.push(ip);
            }
        }
        if addrs.is_empty() {
            return Err(Error::config(format!(
                "cannot resolve host '{host}': no address records"
            )));
        }
        Ok(addrs.into())
    }

    /// Records a finished lookup; the in-flight entry goes in the same critical section so a
    /// caller sees either the lookup or its result, never neither.
    fn finish(&self, key: &str, outcome: &Outcome) {
        let now = Instant::now();
        let mut state = self.lock();
        match outcome {
            Ok(addrs) => {
                state.cache.insert(
                    key.to_owned(),
                    Entry {
                        addrs: addrs.clone(),
                        refresh_at: now + self.opts.cache_ttl,
                    },
                );
            }
            Err(e) => {
                if let Some(entry) = state.cache.get_mut(key) {
                    tracing::warn!(host = key, error = %e, "DNS refresh failed; keeping the last answer");
                    entry.refresh_at = now + self.opts.cache_ttl.min(FAILED_REFRESH_RETRY);
                }
            }
        }
        state.inflight.remove(key);
    }
}

/// Removes a lookup's in-flight entry however its task ends (cancelled by runtime shutdown too),
/// so later callers start a new lookup instead of waiting on a dead one.
struct InflightGuard {
    inner: Arc<Inner>,
    key: String,
    id: u64,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        let mut state = self.inner.lock();
        if state
            .inflight
            .get(&self.key)
            .is_some_and(|(id, _)| *id == self.id)
        {
            state.inflight.remove(&self.key);
        }
    }
}

fn classify(host: &str, err: &NetError, timeout: Duration) -> Error {
    if err.is_nx_domain() {
        Error::config(format!("cannot resolve host '{host}': no such host"))
    } else if err.is_no_records_found() {
        Error::config(format!("cannot resolve host '{host}': no address records"))
    } else if matches!(err, NetError::Timeout) {
        Error::timeout(format!(
            "resolving host '{host}' took longer than {timeout:?}"
        ))
    } else {
        Error::new(
            ErrorCode::ConnectionLost,
            format!("cannot resolve host '{host}': {err}"),
        )
    }
}

fn ip_literal(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

/// The cache key: lower case, without a trailing dot; rejects what cannot be a DNS name.
fn normalize(host: &str) -> Result<String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !valid {
        return Err(Error::config(format!("invalid host name '{host}'")));
    }
    Ok(name.to_ascii_lowercase())
}

fn with_port(addrs: &[IpAddr], port: u16) -> Vec<SocketAddr> {
    addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::net::UdpSocket;

    /// A UDP DNS server answering A queries from a table; each answer after its delay.
    /// Names not in the table get NXDOMAIN, AAAA queries for known names an empty answer.
    struct FakeDns {
        addr: SocketAddr,
        table: Arc<Mutex<HashMap<String, (Ipv4Addr, Duration)>>>,
        queries: Arc<AtomicUsize>,
        task: tokio::task::JoinHandle<()>,
    }

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
            let task = tokio::spawn({
                let (table, queries) = (table.clone(), queries.clone());
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
                task,
            }
        }

        fn set(&self, name: &str, ip: Ipv4Addr, delay: Duration) {
            self.table.lock().unwrap().insert(name.into(), (ip, delay));
        }

        fn resolver(&self, timeout: Duration, cache_ttl: Duration) -> Resolver {
            Resolver::new(DnsOptions {
                timeout,
                nameserver: Some(self.addr),
                cache_ttl,
            })
            .unwrap()
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
}
