//! URL and options: the one way every language describes what to follow.

use std::path::PathBuf;
use std::time::Duration;

pub use crate::types::{Address, Credentials, Protocol, Secret};

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

/// The default sentinel port when a seed gives none.
pub const DEFAULT_SENTINEL_PORT: u16 = 26379;

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

mod address_map;
mod options;
mod url;
mod validate;

pub use address_map::{AddressMap, AddressMapFn};
pub(crate) use validate::{host_name_problem, parse_server_name, shorten};

use crate::error::Error;

impl Config {
    /// The URL form of this configuration with passwords replaced by `***`.
    pub fn redacted_url(&self) -> String {
        let user = match &self.auth {
            Some(Credentials {
                username: Some(u), ..
            }) => format!("{}:***@", url::encode(u)),
            Some(_) => ":***@".to_string(),
            None => String::new(),
        };
        let hosts: Vec<String> = self.sentinels.iter().map(|a| a.to_string()).collect();
        let scheme = if self.sentinel_tls && self.data_tls {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        format!(
            "{scheme}://{user}{}/{}",
            hosts.join(","),
            url::encode(&self.service)
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(url: &str) -> String {
        let e = Config::from_url(url).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config, "{url}");
        e.message().to_string()
    }

    #[test]
    fn full_url() {
        let c = Config::from_url(
            "redis+sentinel://app:s%40cret@s1.example,10.0.0.2:26380,[::1]:26381/cache?db=2&client_name=svc&protocol=2\
             &sentinel_user=watcher&sentinel_password=pw&connect_timeout_ms=300&read_from=prefer-replica",
        )
        .unwrap();
        assert_eq!(
            c.sentinels,
            [
                Address::new("s1.example", 26379),
                Address::new("10.0.0.2", 26380),
                Address::new("::1", 26381)
            ]
        );
        assert_eq!(c.service, "cache");
        let auth = c.auth.as_ref().unwrap();
        assert_eq!(auth.username.as_deref(), Some("app"));
        assert_eq!(auth.password.expose(), "s@cret");
        let sauth = c.sentinel_auth.as_ref().unwrap();
        assert_eq!(
            (sauth.username.as_deref(), sauth.password.expose()),
            (Some("watcher"), "pw")
        );
        assert_eq!(
            (c.db, c.protocol, c.connect_timeout_ms),
            (2, Protocol::Resp2, 300)
        );
        assert_eq!(c.client_name.as_deref(), Some("svc"));
        assert_eq!(c.read_from, ReadFrom::PreferReplica);
    }

    #[test]
    fn synonyms_defaults_and_lone_password() {
        let c = Config::from_url("valkey+sentinel://secret@localhost/svc").unwrap();
        assert_eq!(c.sentinels, [Address::new("localhost", 26379)]);
        let auth = c.auth.unwrap();
        assert_eq!((auth.username, auth.password.expose()), (None, "secret"));
        let c = Config::from_url("redis+sentinel://:pw@h:1/s").unwrap();
        assert_eq!(c.auth.unwrap().username, None);
        assert_eq!(c.sentinel_timeout_ms, Config::default().sentinel_timeout_ms);
    }

    #[test]
    fn errors_name_the_bad_part() {
        assert!(err("redis://h/s").contains("unknown scheme 'redis'"));
        assert!(err("h:26379/s").contains("redis+sentinel://"));
        assert!(err("redis+sentinel://h/s?tls=maybe").contains("option tls must be"));
        assert!(err("redis+sentinel://h/s?tls_ca_file=/ca.pem").contains("tls_ca_file"));
        assert!(
            err("redis+sentinel://h/s?data_tls=1&sentinel_tls_ca_file=/ca.pem")
                .contains("sentinel_tls_ca_file")
        );
        assert!(err("rediss+sentinel://h/s?tls_server_name=a%20b").contains("tls_server_name"));
        assert!(err("redis+sentinel://h").contains("/service"));
        assert!(err("redis+sentinel://h/").contains("service name is empty"));
        assert!(err("redis+sentinel:///s").contains("sentinel #1"));
        assert!(err("redis+sentinel://a,,b/s").contains("sentinel #2"));
        assert!(err("redis+sentinel://h:0/s").contains("port '0'"));
        assert!(err("redis+sentinel://h:65536/s").contains("port '65536'"));
        assert!(err("redis+sentinel://h:x/s").contains("port 'x'"));
        assert!(err("redis+sentinel://h:-1/s").contains("port '-1'"));
        assert!(err("redis+sentinel://::1/s").contains("brackets"));
        assert!(err("redis+sentinel://[zz]:1/s").contains("not an IPv6"));
        assert!(err("redis+sentinel://h%20x/s").contains("not a valid host"));
        assert!(err("redis+sentinel://h/s?db=x").contains("option db"));
        assert!(err("redis+sentinel://h/s?db=-1").contains("option db"));
        assert!(err("redis+sentinel://h/s?protocol=4").contains("option protocol"));
        assert!(err("redis+sentinel://h/s?read_from=any").contains("option read_from"));
        assert!(err("redis+sentinel://h/s?colour=blue").contains("unknown option 'colour'"));
        assert!(
            err("redis+sentinel://h/s?retry_base_ms=500&retry_max_ms=100")
                .contains("retry_base_ms")
        );
        assert!(err("redis+sentinel://h/s?dns_server=nope").contains("dns_server"));
    }

    #[test]
    fn secrets_never_show() {
        let url = "redis+sentinel://app:hunter2@h/s?sentinel_password=swordfish&db=nope";
        let e = Config::from_url(url).unwrap_err();
        assert!(!e.to_string().contains("hunter2") && !e.to_string().contains("swordfish"));
        let c = Config::from_url("redis+sentinel://app:hunter2@h/s?sentinel_password=swordfish")
            .unwrap();
        let shown = format!("{c:?} {}", c.redacted_url());
        assert!(
            !shown.contains("hunter2") && !shown.contains("swordfish"),
            "{shown}"
        );
        assert!(c
            .redacted_url()
            .starts_with("redis+sentinel://app:***@h:26379/s"));
    }

    /// Fuzzing found (fuzz/ config_url, crash-1a297a84…): a user name holding `@` (written
    /// `%40`) came back raw in the redacted URL, which then no longer parsed to the same user.
    #[test]
    fn redacted_url_parses_back_to_the_same_user_and_service() {
        let c = Config::from_url("redis+sentinel://a%40b%25c:pw@h/svc%2Fx%3Fy").unwrap();
        let shown = c.redacted_url();
        assert_eq!(shown, "redis+sentinel://a%40b%25c:***@h:26379/svc%2Fx%3Fy");
        let back = Config::from_url(&shown).unwrap();
        let user = |c: &Config| c.auth.as_ref().and_then(|a| a.username.clone());
        assert_eq!(user(&back), user(&c));
        assert_eq!(back.service, c.service);
    }

    /// Fuzzing found (fuzz/ config_url, corpus crash-b286fd2e…, crash-6635cd40…): a password with
    /// a raw '/' ends the authority early, so its start was read as a sentinel: shown in the error
    /// ("port 'G' of 'n'"), or, digits only, taken as a port and the rest as the service.
    #[test]
    fn a_raw_slash_in_a_password_is_refused_without_showing_it() {
        for url in [
            "redis+sentinel://n:G/@/?=&db=",
            "valkeys+sentinel://q:1/!!))9G@/?",
            "redis+sentinel://app:c2VjcmV0/K3Bhc3M=@h/s",
            "redis+sentinel://app:12/34@h:26379/s",
            "redis+sentinel://:abc/def@h/s?db=1",
        ] {
            let m = err(url);
            assert!(m.contains("%2F"), "{url}: {m}");
            for part in ["G", "9G", "c2VjcmV0", "K3Bhc3M", "12", "34", "abc", "def"] {
                assert!(!m.contains(part), "{url}: {m}");
            }
        }
        // Written as %2F it is read whole; an '@' in the service is written %40.
        let c = Config::from_url("redis+sentinel://app:c2VjcmV0%2FK3Bhc3M=@h/s").unwrap();
        assert_eq!(c.auth.unwrap().password.expose(), "c2VjcmV0/K3Bhc3M=");
        assert_eq!(
            Config::from_url("redis+sentinel://h/a%40b")
                .unwrap()
                .service,
            "a@b"
        );
        assert!(err("redis+sentinel://h/a@b").contains("%40"));
        // '@' in a query value stays fine.
        let c = Config::from_url("redis+sentinel://h/s?sentinel_password=a@b/c").unwrap();
        assert_eq!(c.sentinel_auth.unwrap().password.expose(), "a@b/c");
    }

    /// Fuzzing found (fuzz/ config_url, corpus crash-2effb252…): `validate` let a hand-built
    /// config through with a sentinel on port 0, which the URL form refuses.
    #[test]
    fn validate_refuses_port_zero_like_the_url() {
        let mut c = Config::from_url("redis+sentinel://h/s").unwrap();
        c.sentinels.push(Address::new("-", 0));
        let e = c.validate().unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.message().starts_with("sentinel #2: port 0"), "{e}");
    }

    #[test]
    fn tls_keys() {
        let c = Config::from_url("rediss+sentinel://h/s").unwrap();
        assert!(c.sentinel_tls && c.data_tls && !c.tls_insecure);
        assert!(c.redacted_url().starts_with("rediss+sentinel://"));
        let c = Config::from_url(
            "redis+sentinel://h/s?sentinel_tls=true&tls_ca_file=/ca.pem&sentinel_tls_ca_file=/s.pem\
             &tls_cert_file=/c.pem&tls_key_file=/k.pem&tls_insecure=1&tls_server_name=cache.internal",
        )
        .unwrap();
        assert!(c.sentinel_tls && !c.data_tls && c.tls_insecure);
        assert_eq!(c.tls_ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(c.sentinel_tls_ca_file, Some(PathBuf::from("/s.pem")));
        assert_eq!(c.tls_server_name.as_deref(), Some("cache.internal"));
        let mut c = Config::from_url("rediss+sentinel://h/s?tls=false").unwrap();
        assert!(!c.sentinel_tls && !c.data_tls);
        c.set("data_tls", "yes").unwrap();
        assert!(c.data_tls && !c.sentinel_tls);
        c.set("tls_server_name", "10.0.0.1").unwrap();
        c.set("tls_server_name", "").unwrap();
        assert_eq!(c.tls_server_name, None);
        assert!(Config::from_url("valkeys+sentinel://h/s").unwrap().data_tls);
    }

    #[test]
    fn set_is_the_one_way_options_apply() {
        let mut c = Config::from_url("redis+sentinel://h/s").unwrap();
        c.set("password", "pw").unwrap();
        c.set("username", "u").unwrap();
        let auth = c.auth.clone().unwrap();
        assert_eq!(
            (auth.username.as_deref(), auth.password.expose()),
            (Some("u"), "pw")
        );
        assert!(c.set("check_interval_ms", "5").is_err());
        assert!(c.set("client_name", "has space").is_err());
        c.set("dns_server", "127.0.0.1:5353").unwrap();
        assert_eq!(c.dns_server, Some("127.0.0.1:5353".parse().unwrap()));
    }

    #[test]
    fn overlong_host_names_are_refused_up_front_without_being_echoed() {
        // Failure messages show the start only: a whole 2 MB name is what this guards against.
        let start = |m: &str| m.chars().take(300).collect::<String>();
        let huge = "a".repeat(2_000_000);
        let m = err(&format!(
            "redis+sentinel://ok.example,{huge}.example:26379/s"
        ));
        assert!(m.starts_with("sentinel #2: "), "{}", start(&m));
        assert!(m.contains("2000008 characters"), "{}", start(&m));
        assert!(m.contains("more than the 253 allowed"), "{}", start(&m));
        assert!(m.contains("aaaa…"), "{}", start(&m));
        assert!(m.len() < 200, "{}", start(&m));

        let label = "b".repeat(64);
        let m = err(&format!("redis+sentinel://x.{label}.example/s"));
        assert!(m.starts_with("sentinel #1: "), "{m}");
        assert!(m.contains("label #2"), "{m}");
        assert!(
            m.contains("64 characters long, more than the 63 allowed"),
            "{m}"
        );
        assert!(err("redis+sentinel://a..b/s").contains("empty label"));
        assert!(err("redis+sentinel://.a/s").contains("empty label"));
        let m = err(&format!("redis+sentinel://h:{huge}/s"));
        assert!(m.contains("port 'aaaa") && m.len() < 200, "{}", start(&m));

        // Longest allowed: 253 characters, labels of 63; a final dot does not count.
        let longest = [
            &"c".repeat(63)[..],
            &"d".repeat(63),
            &"e".repeat(63),
            &"f".repeat(61),
        ]
        .join(".");
        assert_eq!(longest.len(), 253);
        let c =
            Config::from_url(&format!("redis+sentinel://{longest}.:1,[::1],10.0.0.1/s")).unwrap();
        assert_eq!(c.sentinels[0].host.len(), 254);

        // Options objects and hand-built configs get the same check.
        let mut c = Config::from_url("redis+sentinel://h/s").unwrap();
        let e = c.set("tls_server_name", &huge).unwrap_err();
        assert!(
            e.message().starts_with("option tls_server_name: "),
            "{}",
            start(e.message())
        );
        assert!(e.message().contains("2000000 characters") && e.message().len() < 200);
        c.sentinels
            .push(Address::new(format!("{label}.example"), 1));
        let e = c.validate().unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.message().starts_with("sentinel #2: label #1"), "{e}");
    }

    #[test]
    fn shorten_cuts_at_a_character_boundary() {
        assert_eq!(shorten("short"), "short");
        let long = "é".repeat(100);
        let shown = shorten(&long);
        assert_eq!(shown.chars().count(), 65);
        assert!(shown.ends_with('…'));
    }
}
