//! The [`Config`] itself: every setting with its default, and the durations derived from them.

use std::path::PathBuf;
use std::time::Duration;

use super::address_map::AddressMap;
use crate::types::{Address, Credentials, Protocol};

/// Which node commands are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadFrom {
    /// Everything goes to the primary.
    #[default]
    Primary,
    /// Reads go to a replica when one is healthy, else to the primary.
    PreferReplica,
    /// Reads go to replicas only.
    Replica,
}

/// Everything needed to follow one service: parsed from the URL, then adjusted key by key.
///
/// `Debug` is safe to log: passwords print as `***`. [`Config::redacted_url`] gives the URL form
/// without secrets.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// Configured sentinels, in order; host names are kept and re-resolved, never replaced by IPs.
    pub sentinels: Vec<Address>,
    /// The service (master name) the sentinels monitor.
    pub service: String,
    /// Credentials for data nodes (primary and replicas): the URL's userinfo.
    pub auth: Option<Credentials>,
    /// Credentials for sentinels (`sentinel_user`, `sentinel_password`).
    pub sentinel_auth: Option<Credentials>,
    /// Database index selected on data nodes.
    pub db: i64,
    /// `CLIENT SETNAME` value on every connection.
    pub client_name: Option<String>,
    /// RESP version to ask for first.
    pub protocol: Protocol,
    /// TCP connect plus handshake deadline.
    pub connect_timeout_ms: u64,
    /// Deadline of one command on the data path.
    pub command_timeout_ms: u64,
    /// Deadline of one discovery round across all sentinels.
    pub sentinel_timeout_ms: u64,
    /// Node to read from.
    pub read_from: ReadFrom,
    /// Interval of the backstop check while everything is healthy.
    pub check_interval_ms: u64,
    /// First retry delay after a failed discovery; doubles per failure.
    pub retry_base_ms: u64,
    /// Cap of the retry delay.
    pub retry_max_ms: u64,
    /// Per-lookup DNS deadline.
    pub dns_timeout_ms: u64,
    /// A DNS server to use instead of the system's (tests, special setups).
    pub dns_server: Option<std::net::SocketAddr>,
    /// Commands allowed to wait for a primary at once; more fail with `queue_full`.
    pub queue_size: usize,
    /// Durable acknowledgements (`wait_replicas`, 0 = off): every write is followed on its
    /// connection by `WAIT wait_replicas wait_timeout_ms`, and succeeds only when that many
    /// replicas confirmed it; else it fails with `not_replicated` (it ran on the primary, and a
    /// failover may lose it).
    pub wait_replicas: u32,
    /// How long each write's `WAIT` may wait for its replicas (`wait_timeout_ms`, default 1000).
    pub wait_timeout_ms: u64,
    /// The sentinel-majority fence (`sentinel_majority_ms`, 0 = off): when fewer than a majority
    /// of the known sentinels answered within this many milliseconds, writes wait (within their
    /// deadlines) until a majority names the client's primary again. The monitor then asks
    /// every sentinel four times per bound.
    pub sentinel_majority_ms: u64,
    /// Subscribe to sentinel events (`sentinel_events`, on by default). Off, changes are learnt
    /// only from discovery rounds (the periodic check and the data path's reports): for one-shot
    /// tools such as `exec`, which would otherwise open and drop a subscription per sentinel.
    pub sentinel_events: bool,
    /// TLS to sentinels (`sentinel_tls`; `tls` and the `rediss+sentinel://` scheme set it too).
    pub sentinel_tls: bool,
    /// TLS to data nodes, primary and replicas (`data_tls`; `tls` and `rediss+sentinel://` set it
    /// too). Independent of [`Config::sentinel_tls`]: sentinels and data nodes are often set up
    /// separately.
    pub data_tls: bool,
    /// PEM file of the CA certificates that sign the servers' certificates (`tls_ca_file`); the
    /// system's roots when unset. Used for data nodes, and for sentinels unless
    /// [`Config::sentinel_tls_ca_file`] is set.
    pub tls_ca_file: Option<PathBuf>,
    /// PEM file of the client certificate chain for mutual TLS (`tls_cert_file`), with
    /// [`Config::tls_key_file`]. Used for data nodes, and for sentinels unless
    /// [`Config::sentinel_tls_cert_file`] is set.
    pub tls_cert_file: Option<PathBuf>,
    /// PEM file of the client certificate's private key (`tls_key_file`). Only the path is kept;
    /// the file is read when a client is opened and its contents never appear in errors or logs.
    pub tls_key_file: Option<PathBuf>,
    /// CA file for sentinels only (`sentinel_tls_ca_file`); defaults to [`Config::tls_ca_file`].
    pub sentinel_tls_ca_file: Option<PathBuf>,
    /// Client certificate for sentinels only (`sentinel_tls_cert_file`); defaults to
    /// [`Config::tls_cert_file`].
    pub sentinel_tls_cert_file: Option<PathBuf>,
    /// Client key for sentinels only (`sentinel_tls_key_file`); defaults to
    /// [`Config::tls_key_file`].
    pub sentinel_tls_key_file: Option<PathBuf>,
    /// Skip server certificate verification on both sides (`tls_insecure`): the connection is
    /// encrypted but the server is not authenticated. Off unless asked for explicitly.
    pub tls_insecure: bool,
    /// Verify every server's certificate against this name (`tls_server_name`) instead of the host
    /// connected to (the configured sentinel host, or the host or IP a sentinel reported for a
    /// data node).
    pub tls_server_name: Option<String>,
    /// Where to connect instead of an address a sentinel reports (`address_map`, NAT and Docker
    /// setups): fixed entries from the URL or [`Config::set`], and an optional function
    /// ([`Config::set_address_map_fn`]). Configured sentinels are never mapped.
    pub address_map: AddressMap,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            sentinels: Vec::new(),
            service: String::new(),
            auth: None,
            sentinel_auth: None,
            db: 0,
            client_name: None,
            protocol: Protocol::Resp3,
            connect_timeout_ms: 2000,
            command_timeout_ms: 5000,
            sentinel_timeout_ms: 500,
            read_from: ReadFrom::Primary,
            check_interval_ms: 5000,
            retry_base_ms: 100,
            retry_max_ms: 5000,
            dns_timeout_ms: 1000,
            dns_server: None,
            queue_size: 4096,
            wait_replicas: 0,
            wait_timeout_ms: 1000,
            sentinel_majority_ms: 0,
            sentinel_events: true,
            sentinel_tls: false,
            data_tls: false,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            sentinel_tls_ca_file: None,
            sentinel_tls_cert_file: None,
            sentinel_tls_key_file: None,
            tls_insecure: false,
            tls_server_name: None,
            address_map: AddressMap::default(),
        }
    }
}

impl Config {
    /// Sets the function form of `address_map`, like ioredis' `natMap`: asked for every address a
    /// sentinel reports that no fixed entry maps; `Some(address)` connects there instead, `None`
    /// uses the reported address. It runs on a core thread, so it must be quick and never block;
    /// a panic in it is caught and logged, and the reported address is used.
    pub fn set_address_map_fn(
        &mut self,
        function: impl Fn(&Address) -> Option<Address> + Send + Sync + 'static,
    ) {
        self.address_map
            .set_function(Some(std::sync::Arc::new(function)));
    }
}

/// The configuration's durations, converted once here (the fields keep milliseconds, the form of
/// the URL and of every binding's options).
impl Config {
    /// `connect_timeout_ms`: TCP connect plus handshake.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    /// `command_timeout_ms`: the default deadline of a command (and of waiting for a primary).
    pub fn command_timeout(&self) -> Duration {
        Duration::from_millis(self.command_timeout_ms)
    }

    /// `sentinel_timeout_ms`: one deadline for a whole discovery round.
    pub fn sentinel_timeout(&self) -> Duration {
        Duration::from_millis(self.sentinel_timeout_ms)
    }

    /// `check_interval_ms`: the backstop check while everything is healthy.
    pub fn check_interval(&self) -> Duration {
        Duration::from_millis(self.check_interval_ms)
    }

    /// `retry_base_ms`: the first retry delay after a failed discovery.
    pub fn retry_base(&self) -> Duration {
        Duration::from_millis(self.retry_base_ms)
    }

    /// `retry_max_ms`: the cap of the retry delay.
    pub fn retry_max(&self) -> Duration {
        Duration::from_millis(self.retry_max_ms)
    }

    /// `dns_timeout_ms`: one name lookup.
    pub fn dns_timeout(&self) -> Duration {
        Duration::from_millis(self.dns_timeout_ms)
    }
}
