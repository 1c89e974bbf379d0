//! The configuration files of data nodes and sentinels.

use std::path::Path;

/// A data node's config listening on `bind`, replicating from `primary` (`ip`, `port`) when
/// given; `extra` (TLS and ACL lines) is appended.
pub(super) fn data_conf(
    dir: &Path,
    port: u16,
    bind: &str,
    primary: Option<(&str, u16)>,
    extra: &str,
) -> String {
    let mut s = format!(
        "port {port}\nbind {bind}\nprotected-mode no\ndaemonize no\ndir \"{}\"\n\
         save \"\"\nappendonly no\nrepl-diskless-sync yes\nrepl-diskless-sync-delay 0\n\
         enable-debug-command yes\nloglevel notice\n",
        dir.display()
    );
    if let Some((ip, p)) = primary {
        s.push_str(&format!("replicaof {ip} {p}\n"));
    }
    s.push_str(extra);
    s
}

#[derive(Clone)]
pub(super) struct SentinelConf<'a> {
    pub(super) service: &'a str,
    pub(super) primary: (&'a str, u16),
    pub(super) quorum: usize,
    pub(super) down_after_ms: u64,
    pub(super) failover_timeout_ms: u64,
    pub(super) known_replicas: &'a [(String, u16)],
    /// The `bind` line's addresses.
    pub(super) bind: String,
    /// Lines after the monitor lines (TLS, ACL).
    pub(super) extra: String,
}

impl SentinelConf<'_> {
    pub(super) fn render(&self, dir: &Path, port: u16) -> String {
        let svc = self.service;
        let mut s = format!(
            "port {port}\nbind {}\nprotected-mode no\ndaemonize no\ndir \"{}\"\n\
             sentinel monitor {svc} {} {} {}\n\
             sentinel down-after-milliseconds {svc} {}\n\
             sentinel failover-timeout {svc} {}\n\
             sentinel parallel-syncs {svc} 1\n",
            self.bind,
            dir.display(),
            self.primary.0,
            self.primary.1,
            self.quorum,
            self.down_after_ms,
            self.failover_timeout_ms
        );
        for (ip, p) in self.known_replicas {
            s.push_str(&format!("sentinel known-replica {svc} {ip} {p}\n"));
        }
        s.push_str(&self.extra);
        s
    }
}

/// The default of [`super::TopologySpec::sentinel_debug`] (which says why these periods).
pub(super) fn default_sentinel_debug() -> Vec<(String, u64)> {
    [
        ("info-period", 200),
        ("ping-period", 500),
        ("ask-period", 100),
        ("publish-period", 1000),
        ("tilt-period", 5000),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `SENTINEL DEBUG <name> <value>` commands setting `pairs`.
pub(super) fn debug_commands(pairs: &[(String, u64)]) -> Vec<Vec<String>> {
    pairs
        .iter()
        .map(|(k, v)| vec!["SENTINEL".into(), "DEBUG".into(), k.clone(), v.to_string()])
        .collect()
}
