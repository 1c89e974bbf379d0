//! The resolver: the hosts file first, then DNS through hickory's async resolver, with a
//! stale-while-refresh cache and the address-family rules described in the module above.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
};
use hickory_resolver::lookup_ip::LookupIp;
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::NetError;
use hickory_resolver::proto::rr::RecordType;
use hickory_resolver::TokioResolver;
use tokio::sync::watch;

use super::hosts::{HostsFile, HOSTS_FILE_ENV, HOSTS_RECHECK};
use super::name::normalize;
use crate::error::{duration_text, Error, ErrorCode, Result};
use crate::sync::Locked;

/// Longest wait before retrying a refresh that failed (shorter when `cache_ttl` is shorter).
const FAILED_REFRESH_RETRY: Duration = Duration::from_secs(1);

/// Once one address family has answered with addresses, how much longer the other is awaited
/// (RFC 8305's "Resolution Delay").
const RESOLUTION_DELAY: Duration = Duration::from_millis(50);

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
    Got(std::result::Result<Vec<IpAddr>, NetError>),
}

impl Answer {
    fn waiting(&self) -> bool {
        matches!(self, Answer::Pending)
    }

    fn addrs(&self) -> &[IpAddr] {
        match self {
            Answer::Got(Ok(addrs)) => addrs,
            _ => &[],
        }
    }

    fn error(&self) -> Option<&NetError> {
        match self {
            Answer::Got(Err(e)) => Some(e),
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
                r = &mut v4_query, if v4.waiting() => v4 = Answer::Got(r),
                r = &mut v6_query, if v6.waiting() => v6 = Answer::Got(r),
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
pub(super) fn if_inet6_has_routable(text: &str) -> bool {
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

fn with_port(addrs: &[IpAddr], port: u16) -> Vec<SocketAddr> {
    addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect()
}
