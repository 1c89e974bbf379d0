//! Non-blocking host name resolution: the hosts file first, then DNS with a stale-while-refresh
//! cache.
//!
//! A blocking `getaddrinfo` on a runtime thread would stall every connection the runtime drives, so
//! DNS goes through hickory's async resolver. Names are looked up as glibc's `hosts: files dns`
//! does: a name the hosts file lists gets the file's addresses and no DNS query at all (also when
//! the file gives only one address family). The file is read on the caller's thread when a
//! resolver is built and re-read, on a short-lived thread of its own, when its modification time
//! changes; parsed files are shared by every resolver of the process.
//!
//! Sentinel hosts are re-resolved often and DNS can be slow exactly when failover happens, so DNS
//! answers are cached: an expired entry is still returned at once while one background lookup
//! refreshes it, and a failed refresh keeps the last good answer. AAAA records are only asked for
//! when this host has IPv6 addresses beyond loopback and link-local (as getaddrinfo's
//! `AI_ADDRCONFIG`), and once one family has answered with addresses the other gets 50 ms more,
//! not the whole timeout (RFC 8305's resolution delay).

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
};
use hickory_resolver::lookup_ip::LookupIp;
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::NetError;
use hickory_resolver::proto::rr::RecordType;
use hickory_resolver::TokioResolver;
use tokio::sync::watch;

use crate::error::{duration_text, Error, ErrorCode, Result};
use crate::sync::Locked;

/// Longest wait before retrying a refresh that failed (shorter when `cache_ttl` is shorter).
const FAILED_REFRESH_RETRY: Duration = Duration::from_secs(1);

/// Once one address family has answered with addresses, how much longer the other is awaited
/// (RFC 8305's "Resolution Delay").
const RESOLUTION_DELAY: Duration = Duration::from_millis(50);

/// Longest time between two checks of the hosts file for changes (shorter when `cache_ttl` is).
const HOSTS_RECHECK: Duration = Duration::from_secs(2);

/// A check of the hosts file still marked as under way after this long is taken as lost (its
/// thread died, or the process forked meanwhile) and another is started.
const HOSTS_CHECK_LOST: Duration = Duration::from_secs(10);

/// The environment variable that overrides the default hosts file path (tests, special setups).
pub const HOSTS_FILE_ENV: &str = "SR_HOSTS_FILE";

/// Resolution settings.
#[derive(Clone, Debug)]
pub struct DnsOptions {
    /// Deadline for one lookup (A and AAAA together). Default 1 s.
    pub timeout: Duration,
    /// Query only this server (UDP, TCP on truncation) instead of the system's resolv.conf ones.
    /// The hosts file is still consulted first. Default `None`.
    pub nameserver: Option<SocketAddr>,
    /// How long a DNS answer is served without a refresh. Default 30 s.
    pub cache_ttl: Duration,
    /// The hosts file, consulted before DNS and authoritative for the names it lists. Default
    /// `/etc/hosts`, or the path in the environment variable `SR_HOSTS_FILE` when set.
    pub hosts_file: PathBuf,
    /// Whether DNS is asked for AAAA (IPv6) records. `None` (default): when this host has an
    /// IPv6 address other than loopback and link-local, as getaddrinfo's `AI_ADDRCONFIG` decides.
    pub ipv6: Option<bool>,
}

/// 1 s lookup timeout, the system's name servers, 30 s cache, `/etc/hosts` (or `SR_HOSTS_FILE`),
/// IPv6 when configured on this host.
impl Default for DnsOptions {
    fn default() -> DnsOptions {
        let hosts_file = std::env::var_os(HOSTS_FILE_ENV)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/etc/hosts"));
        DnsOptions {
            timeout: Duration::from_secs(1),
            nameserver: None,
            cache_ttl: Duration::from_secs(30),
            hosts_file,
            ipv6: None,
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
    /// Whether AAAA records are asked for.
    ipv6: bool,
    hosts: Arc<HostsFile>,
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
    /// The resolver a client with this configuration uses (`dns_timeout_ms`, `dns_server`).
    /// Reads resolv.conf and the hosts file: call it on a host thread, never on a core worker.
    pub fn for_config(config: &crate::config::Config) -> Result<Resolver> {
        Resolver::new(DnsOptions {
            timeout: config.dns_timeout(),
            nameserver: config.dns_server,
            ..DnsOptions::default()
        })
    }

    /// Builds a resolver, reading `/etc/resolv.conf` (unless `opts.nameserver` is set) and the
    /// hosts file now, synchronously, and looking at this host's IPv6 addresses (unless
    /// `opts.ipv6` is set): call it on a host thread, never on a runtime thread. Later changes of
    /// the hosts file are picked up off the runtime threads; resolv.conf is not read again.
    ///
    /// A missing or unreadable resolv.conf or hosts file is not an error: IP literals and the
    /// other source still resolve.
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
                    tracing::warn!(error = %e, "cannot read the system DNS configuration; only the hosts file and IP addresses will resolve");
                    TokioResolver::builder_with_config(
                        ResolverConfig::from_name_servers(Vec::new()),
                        provider,
                    )
                }
            },
        };
        let options = builder.options_mut();
        options.timeout = opts.timeout;
        // Families are asked for one by one (see `Inner::lookup`); this only covers the rest.
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        // The hosts file is ours: hickory's looks each record type up on its own and asks DNS for
        // the AAAA of a name the file lists with an IPv4 address only.
        options.use_hosts_file = ResolveHosts::Never;
        // Our cache decides freshness; hickory's would hide a changed record for its TTL.
        options.positive_max_ttl = Some(Duration::ZERO);
        options.negative_max_ttl = Some(Duration::ZERO);
        let hickory = builder
            .build()
            .map_err(|e| Error::config(format!("cannot set up DNS resolution: {e}")))?;
        let ipv6 = opts.ipv6.unwrap_or_else(ipv6_configured);
        let hosts = HostsFile::shared(&opts.hosts_file);
        Ok(Resolver {
            inner: Arc::new(Inner {
                hickory,
                opts,
                ipv6,
                hosts,
                state: Mutex::new(State::default()),
            }),
        })
    }

    /// Socket addresses for `host:port`.
    ///
    /// An IP literal (also `[v6]`) is returned at once without a lookup. A name the hosts file
    /// lists gets the file's addresses (IPv4 first), with no DNS query. Otherwise a name with a
    /// fresh cache entry gets it; with an expired entry, gets it at once while one background
    /// lookup refreshes it (a failed refresh keeps the old answer). Without an entry, A (and AAAA
    /// when IPv6 is in use) are looked up (IPv4 first in the result), sharing one query with
    /// concurrent callers for the same name.
    ///
    /// Errors: [`ErrorCode::Timeout`] past `timeout`; [`ErrorCode::Config`] for an invalid name,
    /// a name that does not exist or has no addresses; [`ErrorCode::ConnectionLost`] when no
    /// name server could be asked. Messages name the host (shortened when very long). Must run
    /// inside a tokio runtime.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>> {
        if let Some(ip) = ip_literal(host) {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let key = normalize(host)?;
        let recheck = self.inner.opts.cache_ttl.min(HOSTS_RECHECK);
        if let Some(addrs) = self.inner.hosts.lookup(&key, recheck) {
            return Ok(with_port(&addrs, port));
        }
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

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("opts", &self.inner.opts)
            .field("ipv6", &self.inner.ipv6)
            .finish_non_exhaustive()
    }
}

/// Where one address family's query stands.
enum Answer {
    /// Not asked (AAAA while IPv6 is not in use).
    Skipped,
    Pending,
    Done(std::result::Result<Vec<IpAddr>, NetError>),
}

impl Answer {
    fn waiting(&self) -> bool {
        matches!(self, Answer::Pending)
    }

    fn addrs(&self) -> &[IpAddr] {
        match self {
            Answer::Done(Ok(addrs)) => addrs,
            _ => &[],
        }
    }

    fn error(&self) -> Option<&NetError> {
        match self {
            Answer::Done(Err(e)) => Some(e),
            _ => None,
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere mid-update of plain maps; keep serving.
        self.state.locked()
    }

    /// Addresses of one family from DNS.
    async fn family(
        &self,
        host: &str,
        record_type: RecordType,
    ) -> std::result::Result<Vec<IpAddr>, NetError> {
        let lookup = self.hickory.lookup(host, record_type).await?;
        let want_v4 = record_type == RecordType::A;
        Ok(LookupIp::from(lookup)
            .iter()
            .filter(|ip| ip.is_ipv4() == want_v4)
            .collect())
    }

    /// Asks DNS for A and (when IPv6 is in use) AAAA at once. Returns when both answered, when
    /// one answered with addresses and the other did not follow within [`RESOLUTION_DELAY`],
    /// when the name turned out not to exist, or at the deadline.
    async fn lookup(&self, host: &str) -> Outcome {
        let timeout = self.opts.timeout;
        let mut until = tokio::time::Instant::now() + timeout;
        let mut v4_query = pin!(self.family(host, RecordType::A));
        let mut v6_query = pin!(self.family(host, RecordType::AAAA));
        let mut v4 = Answer::Pending;
        let mut v6 = if self.ipv6 {
            Answer::Pending
        } else {
            Answer::Skipped
        };
        while v4.waiting() || v6.waiting() {
            tokio::select! {
                r = &mut v4_query, if v4.waiting() => v4 = Answer::Done(r),
                r = &mut v6_query, if v6.waiting() => v6 = Answer::Done(r),
                _ = tokio::time::sleep_until(until) => break,
            }
            if [&v4, &v6]
                .iter()
                .any(|a| a.error().is_some_and(NetError::is_nx_domain))
            {
                break;
            }
            if !v4.addrs().is_empty() || !v6.addrs().is_empty() {
                until = until.min(tokio::time::Instant::now() + RESOLUTION_DELAY);
            }
        }
        let mut addrs: Vec<IpAddr> = Vec::new();
        for ip in v4.addrs().iter().chain(v6.addrs()) {
            if !addrs.contains(ip) {
                addrs.push(*ip);
            }
        }
        if !addrs.is_empty() {
            return Ok(addrs.into());
        }
        let errors: Vec<&NetError> = [&v4, &v6].iter().filter_map(|a| a.error()).collect();
        if errors.iter().any(|e| e.is_nx_domain()) {
            return Err(Error::config(format!(
                "cannot resolve host '{host}': no such host"
            )));
        }
        if v4.waiting() || v6.waiting() {
            return Err(Error::timeout(format!(
                "resolving host '{host}' took longer than {}",
                duration_text(timeout)
            )));
        }
        match errors.iter().find(|e| !e.is_no_records_found()) {
            Some(e) => Err(classify(host, e, timeout)),
            None => Err(Error::config(format!(
                "cannot resolve host '{host}': no address records"
            ))),
        }
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

// ---------------------------------------------------------------------------------------------
// The hosts file

/// Names (lower case, no final dot) to their addresses, IPv4 first, each family in file order.
type HostsTable = HashMap<String, Arc<[IpAddr]>>;

/// What tells one version of the file from another without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

/// One hosts file, parsed, shared by every resolver of the process that uses its path.
struct HostsFile {
    path: PathBuf,
    state: Mutex<HostsState>,
}

struct HostsState {
    names: Arc<HostsTable>,
    /// `None` while the file is missing or unreadable.
    stamp: Option<Stamp>,
    checked_at: Instant,
    /// Set while a background check runs.
    checking_since: Option<Instant>,
}

impl HostsFile {
    /// The shared entry for `path`, brought up to date now, on the calling (host) thread.
    fn shared(path: &Path) -> Arc<HostsFile> {
        static FILES: OnceLock<Mutex<HashMap<PathBuf, Arc<HostsFile>>>> = OnceLock::new();
        let file = FILES
            .get_or_init(Default::default)
            .locked()
            .entry(path.to_owned())
            .or_insert_with(|| {
                Arc::new(HostsFile {
                    path: path.to_owned(),
                    state: Mutex::new(HostsState {
                        names: Arc::default(),
                        stamp: None,
                        checked_at: Instant::now(),
                        checking_since: None,
                    }),
                })
            })
            .clone();
        file.refresh();
        file
    }

    fn lock(&self) -> MutexGuard<'_, HostsState> {
        self.state.locked()
    }

    /// The file's addresses for `name` (normalized). Never touches the disk: when the last check
    /// is older than `recheck`, one background thread looks for a change while this call answers
    /// from what was read before.
    fn lookup(self: &Arc<Self>, name: &str, recheck: Duration) -> Option<Arc<[IpAddr]>> {
        let mut state = self.lock();
        let now = Instant::now();
        let check_running = state
            .checking_since
            .is_some_and(|since| now.duration_since(since) < HOSTS_CHECK_LOST);
        if !check_running && now.duration_since(state.checked_at) >= recheck {
            state.checking_since = Some(now);
            let file = self.clone();
            let spawned = std::thread::Builder::new()
                .name("sr-hosts".into())
                .spawn(move || file.refresh());
            if let Err(e) = spawned {
                tracing::debug!(error = %e, "cannot start the hosts file check; trying later");
                state.checking_since = None;
                state.checked_at = now;
            }
        }
        state.names.get(name).cloned()
    }

    /// Blocking: looks at the file's metadata and re-reads it when it changed. Only on a host
    /// thread or the check's own thread.
    fn refresh(&self) {
        let stamp = file_stamp(&self.path);
        let unchanged = self.lock().stamp == stamp && stamp.is_some();
        let names = if unchanged {
            None
        } else {
            match std::fs::read(&self.path) {
                Ok(bytes) => Some(parse_hosts(&String::from_utf8_lossy(&bytes))),
                Err(e) => {
                    tracing::debug!(path = %self.path.display(), error = %e, "hosts file not read; names go to DNS");
                    Some(HostsTable::new())
                }
            }
        };
        let mut state = self.lock();
        if let Some(names) = names {
            state.names = Arc::new(names);
            state.stamp = stamp;
        }
        state.checked_at = Instant::now();
        state.checking_since = None;
    }
}

fn file_stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode,
    })
}

/// Parses hosts(5) text: `address name [alias...]` per line, `#` to the end of a line is a
/// comment. Lines whose address does not parse (or has a `%zone`) are skipped, as are names that
/// could never be looked up.
fn parse_hosts(text: &str) -> HostsTable {
    let mut v4: HashMap<String, Vec<IpAddr>> = HashMap::new();
    let mut v6: HashMap<String, Vec<IpAddr>> = HashMap::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_ascii_whitespace();
        let Some(Ok(ip)) = fields.next().map(str::parse::<IpAddr>) else {
            continue;
        };
        for name in fields {
            let Ok(name) = normalize(name) else { continue };
            let list = match ip {
                IpAddr::V4(_) => v4.entry(name).or_default(),
                IpAddr::V6(_) => v6.entry(name).or_default(),
            };
            if !list.contains(&ip) {
                list.push(ip);
            }
        }
    }
    for (name, ips) in v6 {
        v4.entry(name).or_default().extend(ips);
    }
    v4.into_iter()
        .map(|(name, ips)| (name, ips.into()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Whether this host has an IPv6 address other than loopback and link-local (Linux:
/// `/proc/net/if_inet6`; elsewhere assumed). Blocking file I/O: host threads only.
fn ipv6_configured() -> bool {
    if !cfg!(target_os = "linux") {
        return true;
    }
    // Missing when the kernel has IPv6 off.
    std::fs::read_to_string("/proc/net/if_inet6")
        .map(|text| if_inet6_has_routable(&text))
        .unwrap_or(false)
}

/// Whether a `/proc/net/if_inet6` text lists an address other than loopback and link-local.
fn if_inet6_has_routable(text: &str) -> bool {
    text.lines()
        .filter_map(|line| line.split_ascii_whitespace().next())
        .filter_map(|hex| u128::from_str_radix(hex, 16).ok())
        .map(Ipv6Addr::from)
        .any(|ip| !ip.is_loopback() && !ip.is_unspecified() && ip.segments()[0] & 0xffc0 != 0xfe80)
}

fn classify(host: &str, err: &NetError, timeout: Duration) -> Error {
    if err.is_nx_domain() {
        Error::config(format!("cannot resolve host '{host}': no such host"))
    } else if err.is_no_records_found() {
        Error::config(format!("cannot resolve host '{host}': no address records"))
    } else if matches!(err, NetError::Timeout) {
        Error::timeout(format!(
            "resolving host '{host}' took longer than {}",
            duration_text(timeout)
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

/// The cache key: lower case, without a trailing dot; rejects what cannot be a DNS name, with a
/// message that shows at most the start of a long name.
fn normalize(host: &str) -> Result<String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    match crate::config::host_name_problem(name) {
        Some(problem) => Err(Error::config(format!("invalid host name: {problem}"))),
        None => Ok(name.to_ascii_lowercase()),
    }
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
        // The whole lookup used to time out waiting for the AAAA answer.
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
    fn hosts_text_is_parsed_like_glibc() {
        let table = parse_hosts(
            "127.0.0.1 localhost\n\
             ::1 localhost ip6-localhost # comment\n\
             10.0.0.1 a.test A.TEST.\n\
             fe80::1%eth0 zoned.test\n\
             # 10.0.0.2 commented.test\n\
             10.0.0.3\n\
             10.0.0.4 a.test\n",
        );
        let get = |n: &str| table.get(n).map(|a| a.to_vec());
        assert_eq!(
            get("localhost"),
            Some(vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()])
        );
        assert_eq!(
            get("a.test"),
            Some(vec![
                "10.0.0.1".parse().unwrap(),
                "10.0.0.4".parse().unwrap()
            ])
        );
        assert_eq!(get("ip6-localhost"), Some(vec!["::1".parse().unwrap()]));
        assert_eq!(get("zoned.test"), None);
        assert_eq!(get("commented.test"), None);
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
}
