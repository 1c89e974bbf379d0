//! The doctor's report: every number measured, the findings drawn from them, and the verdict.
//!
//! [`Report::to_json`] gives the `--json` form. Its schema, version 1 (`"schema": 1`); times are
//! milliseconds as numbers with up to one decimal, absent values are `null`, lists may be empty:
//!
//! ```text
//! {
//!   "schema": 1,
//!   "service": "mymaster",
//!   "url": "redis+sentinel://…/mymaster",       // passwords replaced by ***
//!   "started_at_ms": 1767225600000,              // unix ms
//!   "duration_ms": 812.4,
//!   "verdict": {
//!     "status": "healthy" | "warning" | "failure",
//!     "exit_code": 0 | 1 | 2,
//!     "headline": "loop stall / TILT",           // the title of the first mode, or "healthy"
//!     "modes": ["loop_stall", ...]               // see Mode; most consequential first
//!   },
//!   "findings": [{
//!     "severity": "warning" | "failure",
//!     "mode": "service_unknown" | "loop_stall" | "name_resolution" | "quorum" | "disagreement"
//!             | "replica_not_promotable" | "sentinel_access" | "data_nodes" | "tls",
//!     "code": "sentinel_tilt",                   // stable id, see Finding::code
//!     "subject": "127.0.0.1:26379" | null,       // the endpoint concerned
//!     "message": "…",                            // with the numbers that prove it
//!     "hint": "…"                                // one line: what to do
//!   }],
//!   "sentinels": [{
//!     "address": {"host": "…", "port": 26379},
//!     "mapped": {"host", "port"} | null,         // where address_map sent the probe
//!     "source": "configured" | "learned",
//!     "reach": Reach,
//!     "auth": "none" | "ok" | "refused" | "unknown",
//!     "run_id": "…" | null,                      // SENTINEL MYID
//!     "role": "sentinel" | … | null,             // ROLE
//!     "ping": {"samples": 10, "min_ms": …, "median_ms": …, "max_ms": …} | null,
//!     "tilt": true | false | null,               // INFO sentinel: sentinel_tilt
//!     "tilt_since_seconds": 3 | null,            // sentinel_tilt_since_seconds, where reported
//!     "knows_service": true | false | null,
//!     "master": {                                // SENTINEL MASTER <service>
//!       "address": {"host", "port"}, "flags": ["master"], "config_epoch": 0, "quorum": 2,
//!       "down_after_ms": 30000, "failover_timeout_ms": 180000, "parallel_syncs": 1,
//!       "num_other_sentinels": 2, "num_slaves": 2, "failover_state": null
//!     } | null,
//!     "resolve_hostnames": true | false | null,  // SENTINEL CONFIG GET (null: not allowed)
//!     "announce_hostnames": true | false | null,
//!     "ckquorum": {"ok": true, "usable": 3, "quorum_reachable": true,
//!                  "majority_reachable": true, "message": "…"} | null,
//!     "replicas": [{"address", "flags": [], "master_link_status": "ok", "priority": 100,
//!                   "repl_offset": 1234}],       // SENTINEL REPLICAS, as this sentinel sees them
//!     "sentinels": [{"address", "flags": [], "run_id"}],   // SENTINEL SENTINELS
//!     "watch": WatchStats | null,                // with --watch
//!     "notes": ["INFO refused: NOPERM …"]        // commands that could not be asked
//!   }],
//!   "agreement": {
//!     "agree": true,
//!     "primaries": [{"address", "config_epoch", "sentinels": [address], "role": "master" | null}],
//!     "down_after_ms": [{"value": 1000, "sentinels": [address]}],
//!     "quorum": [{"value": 2, "sentinels": [address]}],
//!     "known_sentinels": [{"count": 3, "ids": ["run id or host:port"], "sentinels": [address]}]
//!   },
//!   "quorum": {
//!     "quorum": 2, "known_sentinels": 3, "majority": 2, "needed_for_failover": 2,
//!     "answering": 3, "naming_other_primary": 0, "in_tilt": 0, "able": 3, "unknown": 0,
//!     "odown_possible": true | false | null, "failover_possible": true | false | null,
//!     "ckquorum_ok": 3, "ckquorum_failed": 0,
//!     "summary": "a failover can happen now: …"
//!   },
//!   "names": [{"host": "s1.example", "ports": [26379], "reported_as": ["sentinel"],
//!              "resolve_ms": 2.1, "addresses": ["10.0.0.1"], "error": Problem | null,
//!              "role_ok": true | false | null}],     // host names only, never IP literals
//!   "data_nodes": [{
//!     "address", "mapped": {"host", "port"} | null,   // address_map's target, if any
//!     "kind": "primary" | "replica", "named_by": [address],
//!     "sentinel_flags": ["slave"], "reach": Reach, "role": "master" | "slave" | null,
//!     "replicates_from": {"host", "port"} | null, "role_ok": true | false | null,
//!     "link_status": "up" | "down" | null,           // replica's INFO master_link_status
//!     "sentinel_link_status": "ok" | "err" | null,   // as the sentinels report it
//!     "repl_offset": 1234 | null,                    // master_repl_offset / slave_repl_offset
//!     "lag_bytes": 0 | null,                         // primary offset − replica offset
//!     "priority": 100 | null,                        // replica-priority (0: never promoted)
//!     "promotable": true | false | null,
//!     "not_promotable_because": ["replica-priority 0"],
//!     "connected_replicas": 2 | null,                // primary: INFO connected_slaves
//!     "notes": []
//!   }],
//!   "timing": {"down_after_ms": 1000, "election_estimate_ms": 3000,
//!              "expected_failover_ms": 4000, "failover_timeout_ms": 3000,
//!              "watch_seconds": 5.0 | null}
//! }
//! Reach = {"ip_literal": true, "resolve_ms": 0.0 | null, "addresses": ["127.0.0.1:26379"],
//!          "tcp_connect_ms": 0.2 | null, "connect_ms": 0.9 | null,   // TCP (+TLS) + handshake
//!          "tls_days_left": 89 | null, "tls_note": "…" | null,
//!          "failed_at": "resolve" | "tcp" | "handshake" | null, "error": Problem | null}
//! Problem = {"code": "timeout" | "auth" | …, "message": "…"}   // ErrorCode names
//! WatchStats = {"seconds": 5.0, "interval_ms": 100, "samples": 50, "failed": 0,
//!               "median_rtt_ms": 0.2, "max_rtt_ms": 0.9, "max_gap_ms": 101.3,
//!               "stalls": 0, "tilt_after": false | null}
//! ```

use serde::Serialize;

use crate::error::Error;
use crate::types::Address;

/// The version of the JSON schema above.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything one diagnosis found. See the module documentation for the JSON form.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema: u32,
    /// The service diagnosed.
    pub service: String,
    /// The URL diagnosed, passwords replaced by `***`.
    pub url: String,
    /// When the diagnosis started, unix ms.
    pub started_at_ms: u64,
    /// How long it took.
    pub duration_ms: f64,
    /// The overall judgement.
    pub verdict: Verdict,
    /// What is wrong or at risk, most consequential first.
    pub findings: Vec<Finding>,
    /// One entry per sentinel: the configured ones, then those learned from their answers.
    pub sentinels: Vec<SentinelReport>,
    /// Whether the sentinels agree on the primary, its epoch and their settings.
    pub agreement: Agreement,
    /// Whether the sentinels that can act reach the quorum and the majority.
    pub quorum: Quorum,
    /// Every host name involved (configured or reported), with its resolution from here.
    pub names: Vec<NameReport>,
    /// The primary and replicas the sentinels report, as seen from here.
    pub data_nodes: Vec<NodeReport>,
    /// Expected failover time and the `--watch` period.
    pub timing: Timing,
}

impl Report {
    /// The `--json` form (pretty-printed). Contains no secret.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            format!("{{\"schema\":{SCHEMA_VERSION},\"error\":\"cannot encode the report: {e}\"}}")
        })
    }

    /// 0 healthy, 1 warnings, 2 failures.
    pub fn exit_code(&self) -> u8 {
        self.verdict.exit_code
    }

    /// The findings of one mode.
    pub fn findings_of(&self, mode: Mode) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.mode == mode)
    }

    /// The finding with this code about this subject (any subject when `None`).
    pub fn finding(&self, code: &str, subject: Option<&str>) -> Option<&Finding> {
        self.findings
            .iter()
            .find(|f| f.code == code && subject.is_none_or(|s| f.subject.as_deref() == Some(s)))
    }

    /// The report of the sentinel at `address` (as configured or learned).
    pub fn sentinel(&self, address: &Address) -> Option<&SentinelReport> {
        self.sentinels.iter().find(|s| s.address == *address)
    }

    /// The report of the data node at `address` (as the sentinels report it).
    pub fn data_node(&self, address: &Address) -> Option<&NodeReport> {
        self.data_nodes.iter().find(|n| n.address == *address)
    }
}

/// Overall state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Nothing found.
    Healthy,
    /// Risks: the deployment works now but may not fail over as expected.
    Warning,
    /// Something that breaks failover or discovery now.
    Failure,
}

/// How bad one finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A risk.
    Warning,
    /// A failure.
    Failure,
}

/// The failure modes the doctor tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// No sentinel that answered monitors the service (a wrong service name, or the wrong
    /// sentinels).
    ServiceUnknown,
    /// Fewer sentinels can act than the quorum (no o_down) or the majority (no failover vote).
    Quorum,
    /// Sentinels name different primaries or epochs, or differ in settings or peers.
    Disagreement,
    /// The primary the sentinels name is not usable from here (unreachable, not a primary, or
    /// seen down), or a replica is unusable, misconfigured or far behind.
    DataNodes,
    /// A sentinel's event loop stalled: TILT, or connections accepted but not answered.
    LoopStall,
    /// Sentinels refuse the credentials or TLS, or cannot be reached at all.
    SentinelAccess,
    /// Names that resolve slowly, not at all, or to addresses not reachable from here.
    NameResolution,
    /// A replica that a failover would never pick (priority 0, down, link broken).
    ReplicaNotPromotable,
    /// A certificate that expired or expires soon.
    Tls,
}

impl Mode {
    /// Order in which modes are named: the one that explains the most comes first.
    pub const ORDER: [Mode; 9] = [
        Mode::ServiceUnknown,
        Mode::Quorum,
        Mode::Disagreement,
        Mode::DataNodes,
        Mode::LoopStall,
        Mode::SentinelAccess,
        Mode::NameResolution,
        Mode::ReplicaNotPromotable,
        Mode::Tls,
    ];

    /// The snake_case name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ServiceUnknown => "service_unknown",
            Mode::Quorum => "quorum",
            Mode::Disagreement => "disagreement",
            Mode::DataNodes => "data_nodes",
            Mode::LoopStall => "loop_stall",
            Mode::SentinelAccess => "sentinel_access",
            Mode::NameResolution => "name_resolution",
            Mode::ReplicaNotPromotable => "replica_not_promotable",
            Mode::Tls => "tls",
        }
    }

    /// The title used in the verdict line.
    pub fn title(self) -> &'static str {
        match self {
            Mode::ServiceUnknown => "service unknown to the sentinels",
            Mode::Quorum => "quorum or majority unreachable",
            Mode::Disagreement => "sentinels disagree",
            Mode::DataNodes => "primary or replica not usable",
            Mode::LoopStall => "loop stall / TILT",
            Mode::SentinelAccess => "sentinels unreachable or refusing access",
            Mode::NameResolution => "slow or misdirected name resolution",
            Mode::ReplicaNotPromotable => "replica not promotable",
            Mode::Tls => "TLS certificate expiring",
        }
    }

    /// The one-line hint for this mode.
    pub fn hint(self) -> &'static str {
        match self {
            Mode::ServiceUnknown => {
                "check the service name after the sentinel list in the URL (SENTINEL MASTERS \
                 lists what a sentinel monitors) and that these are the right sentinels"
            }
            Mode::Quorum => {
                "bring sentinels back, or size the quorum to what can be reached \
                 (SENTINEL SET <service> quorum N); a failover needs a majority of all known \
                 sentinels as well"
            }
            Mode::Disagreement => {
                "SENTINEL RESET <service> on the odd sentinel (or fix its config) so that all \
                 follow one primary with the same settings"
            }
            Mode::DataNodes => {
                "check the node's host, network and credentials from here, and whether a \
                 failover is under way"
            }
            Mode::LoopStall => {
                "a stalled sentinel stops acting for the TILT period: look for blocking name \
                 resolution (resolve-hostnames with a slow resolver), VM pauses, swapping or CPU \
                 starvation"
            }
            Mode::SentinelAccess => {
                "check sentinel_user / sentinel_password, the ACL of that user, TLS options and \
                 the addresses in the URL"
            }
            Mode::NameResolution => {
                "serve these names fast (local resolver, /etc/hosts) or use IPs; make announced \
                 addresses reachable (replica-announce-ip, sentinel announce-ip), or map them on \
                 the client side"
            }
            Mode::ReplicaNotPromotable => {
                "give at least one healthy replica a non-zero replica-priority and a working \
                 replication link"
            }
            Mode::Tls => "renew the certificate before it expires",
        }
    }
}

/// The overall judgement.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// Healthy, warning or failure.
    pub status: Status,
    /// 0 healthy, 1 warnings, 2 failures.
    pub exit_code: u8,
    /// The title of the most consequential mode found, or `healthy`.
    pub headline: String,
    /// Every mode found, most consequential first (failures before warnings).
    pub modes: Vec<Mode>,
}

/// One thing wrong or at risk, with the numbers that show it.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// Warning or failure.
    pub severity: Severity,
    /// The failure mode it belongs to.
    pub mode: Mode,
    /// A stable identifier: `sentinel_tilt`, `sentinel_no_reply`, `sentinel_slow_replies`,
    /// `sentinel_stall_seen`, `sentinel_auth_refused`, `sentinel_tls_failed`,
    /// `sentinel_unreachable`, `service_unknown`, `sentinel_service_unknown`, `primaries_differ`,
    /// `epochs_differ`,
    /// `settings_differ`, `known_sentinels_differ`, `quorum_unreachable`,
    /// `majority_unreachable`, `ckquorum_failed`, `primary_unreachable`, `primary_not_master`,
    /// `primary_seen_down`, `failover_in_progress`, `replica_unusable`,
    /// `replica_role_unexpected`, `replica_lagging`, `name_slow`, `name_unresolved`,
    /// `address_unreachable`, `replica_not_promotable`, `no_promotable_replica`, `tls_expiring`,
    /// `tls_expired`.
    pub code: String,
    /// The endpoint concerned (`host:port`), if one.
    pub subject: Option<String>,
    /// What was found, with numbers.
    pub message: String,
    /// One line: what to do about it.
    pub hint: String,
}

/// An error as the report shows it: its stable code and message (never a secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The [`ErrorCode`](crate::ErrorCode) name.
    pub code: String,
    /// The message.
    pub message: String,
}

impl From<&Error> for Problem {
    fn from(e: &Error) -> Problem {
        Problem {
            code: e.code().as_str().to_string(),
            message: e.message().to_string(),
        }
    }
}

/// Where reaching an endpoint failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Name resolution.
    Resolve,
    /// The TCP connect (refused, unreachable, no answer).
    Tcp,
    /// TLS or the RESP handshake (auth, HELLO) after TCP connected.
    Handshake,
}

/// How an endpoint was reached from here.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Reach {
    /// The host is an IP literal (no resolution).
    pub ip_literal: bool,
    /// Resolution time; 0 for IP literals, `None` when it failed.
    pub resolve_ms: Option<f64>,
    /// The socket addresses it resolved to.
    pub addresses: Vec<String>,
    /// A bare TCP connect to the first address.
    pub tcp_connect_ms: Option<f64>,
    /// The full connect as the client does it: TCP, TLS, HELLO/AUTH and SETNAME.
    pub connect_ms: Option<f64>,
    /// Days until the server certificate expires (negative: expired), TLS only.
    pub tls_days_left: Option<i64>,
    /// Why the certificate expiry is not known, when TLS is on and it is not.
    pub tls_note: Option<String>,
    /// Where it failed, if it did.
    pub failed_at: Option<Stage>,
    /// Why it failed.
    pub error: Option<Problem>,
}

impl Reach {
    /// Whether a connection was made.
    pub fn connected(&self) -> bool {
        self.connect_ms.is_some()
    }
}

/// Whether the credentials were accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Auth {
    /// No credentials configured for this side.
    None,
    /// Credentials accepted.
    Ok,
    /// Credentials refused.
    Refused,
    /// The handshake did not get that far.
    Unknown,
}

/// Whether a sentinel was in the URL or learned from another's `SENTINEL SENTINELS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// In the URL.
    Configured,
    /// Reported by another sentinel.
    Learned,
}

/// PING round trips over a warm connection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PingStats {
    /// PINGs answered.
    pub samples: u32,
    /// Fastest.
    pub min_ms: f64,
    /// Median.
    pub median_ms: f64,
    /// Slowest.
    pub max_ms: f64,
}

/// A sentinel's `SENTINEL MASTER` entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MasterView {
    /// The primary's announced address.
    pub address: Address,
    /// `flags`.
    pub flags: Vec<String>,
    /// `config-epoch`.
    pub config_epoch: Option<u64>,
    /// `quorum`.
    pub quorum: Option<u32>,
    /// `down-after-milliseconds`.
    pub down_after_ms: Option<u64>,
    /// `failover-timeout`.
    pub failover_timeout_ms: Option<u64>,
    /// `parallel-syncs`.
    pub parallel_syncs: Option<u32>,
    /// `num-other-sentinels`.
    pub num_other_sentinels: Option<u32>,
    /// `num-slaves`.
    pub num_slaves: Option<u32>,
    /// `failover-state`, while a failover runs.
    pub failover_state: Option<String>,
}

impl MasterView {
    /// Whether `flags` contains `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// `SENTINEL CKQUORUM`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CkQuorum {
    /// `+OK`.
    pub ok: bool,
    /// The number of usable sentinels it counted (itself included).
    pub usable: Option<u32>,
    /// Enough usable sentinels for the quorum.
    pub quorum_reachable: bool,
    /// Enough usable sentinels for a majority (failover authorisation).
    pub majority_reachable: bool,
    /// The reply text.
    pub message: String,
}

/// A replica as one sentinel reports it (`SENTINEL REPLICAS`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReplicaView {
    /// Announced address.
    pub address: Address,
    /// `flags`.
    pub flags: Vec<String>,
    /// `master-link-status` (`ok` / `err`).
    pub master_link_status: Option<String>,
    /// `slave-priority`.
    pub priority: Option<i64>,
    /// `slave-repl-offset`.
    pub repl_offset: Option<i64>,
}

/// Another sentinel as one sentinel reports it (`SENTINEL SENTINELS`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PeerView {
    /// Announced address.
    pub address: Address,
    /// `flags`.
    pub flags: Vec<String>,
    /// `runid`.
    pub run_id: Option<String>,
}

/// PINGs every `interval_ms` for `seconds` (`--watch`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WatchStats {
    /// How long it sampled.
    pub seconds: f64,
    /// The sampling interval.
    pub interval_ms: u64,
    /// PINGs answered.
    pub samples: u32,
    /// PINGs that failed or were still unanswered at the end.
    pub failed: u32,
    /// Median round trip.
    pub median_rtt_ms: Option<f64>,
    /// Longest round trip.
    pub max_rtt_ms: Option<f64>,
    /// Longest time without a reply (between two replies, from the start to the first, or
    /// from the last to the end).
    pub max_gap_ms: f64,
    /// Gaps longer than 500 ms.
    pub stalls: u32,
    /// `sentinel_tilt` asked again after sampling.
    pub tilt_after: Option<bool>,
}

/// One sentinel as seen from here.
#[derive(Clone, Debug, Serialize)]
pub struct SentinelReport {
    /// As configured, or as another sentinel reported it.
    pub address: Address,
    /// Where it was probed instead, when the client's `address_map` maps a learned sentinel's
    /// address (configured sentinels are never mapped); `None` when probed as given.
    pub mapped: Option<Address>,
    /// Configured or learned.
    pub source: Source,
    /// Resolution and connection.
    pub reach: Reach,
    /// Whether the sentinel credentials were accepted.
    pub auth: Auth,
    /// `SENTINEL MYID`.
    pub run_id: Option<String>,
    /// First element of `ROLE`.
    pub role: Option<String>,
    /// PINGs over the warm connection.
    pub ping: Option<PingStats>,
    /// `sentinel_tilt` of `INFO sentinel`.
    pub tilt: Option<bool>,
    /// `sentinel_tilt_since_seconds`, where the server reports it (-1 when not in TILT).
    pub tilt_since_seconds: Option<i64>,
    /// Whether it monitors the service.
    pub knows_service: Option<bool>,
    /// Its `SENTINEL MASTER` view.
    pub master: Option<MasterView>,
    /// `SENTINEL CONFIG GET resolve-hostnames`.
    pub resolve_hostnames: Option<bool>,
    /// `SENTINEL CONFIG GET announce-hostnames`.
    pub announce_hostnames: Option<bool>,
    /// `SENTINEL CKQUORUM`.
    pub ckquorum: Option<CkQuorum>,
    /// Its `SENTINEL REPLICAS` view.
    pub replicas: Vec<ReplicaView>,
    /// Its `SENTINEL SENTINELS` view.
    pub sentinels: Vec<PeerView>,
    /// `--watch` sampling.
    pub watch: Option<WatchStats>,
    /// Commands that failed or were refused, and why.
    pub notes: Vec<String>,
}

impl SentinelReport {
    /// Answered the handshake and `SENTINEL MASTER` (known service or not).
    pub fn answered(&self) -> bool {
        self.reach.connected() && self.knows_service.is_some()
    }

    /// Answered, monitors the service and is not in TILT: it can vote and act.
    pub fn able(&self) -> bool {
        self.answered() && self.knows_service == Some(true) && self.tilt != Some(true)
    }
}

/// Sentinels holding one value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Claim<T> {
    /// The value.
    pub value: T,
    /// The sentinels that report it.
    pub sentinels: Vec<Address>,
}

/// Sentinels naming one primary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PrimaryClaim {
    /// The primary they name.
    pub address: Address,
    /// The config epoch they give it.
    pub config_epoch: Option<u64>,
    /// Who names it.
    pub sentinels: Vec<Address>,
    /// What `ROLE` says from here (filled after the data nodes are probed).
    pub role: Option<String>,
}

/// Sentinels that know the same set of sentinels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KnownClaim {
    /// The size of the set (itself included).
    pub count: u32,
    /// Run ids (or `host:port` where a run id is missing), sorted; empty when not comparable.
    pub ids: Vec<String>,
    /// Who knows this set.
    pub sentinels: Vec<Address>,
}

/// Whether the sentinels that answered agree.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Agreement {
    /// One primary and epoch, one down-after, one quorum, one set of sentinels.
    pub agree: bool,
    /// Distinct (primary, epoch) pairs, most sentinels first.
    pub primaries: Vec<PrimaryClaim>,
    /// Distinct `down-after-milliseconds`.
    pub down_after_ms: Vec<Claim<u64>>,
    /// Distinct quorums.
    pub quorum: Vec<Claim<u32>>,
    /// Distinct sets of known sentinels.
    pub known_sentinels: Vec<KnownClaim>,
}

/// Quorum and majority against the sentinels that can act.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Quorum {
    /// The quorum (the largest one reported, when they differ).
    pub quorum: Option<u32>,
    /// Sentinels known to the sentinels (`num-other-sentinels` + 1, the largest reported).
    pub known_sentinels: Option<u32>,
    /// `known_sentinels / 2 + 1`: votes needed to authorise a failover.
    pub majority: Option<u32>,
    /// `max(quorum, majority)`: the leader needs that many votes.
    pub needed_for_failover: Option<u32>,
    /// Sentinels that answered from here and name the primary most of them name.
    pub answering: u32,
    /// Sentinels that answered but name another primary: they do not vote for this one.
    pub naming_other_primary: u32,
    /// Of those, in TILT.
    pub in_tilt: u32,
    /// Answering, monitoring the service, not in TILT.
    pub able: u32,
    /// Known sentinels whose state is unknown from here (refused our credentials or TLS).
    pub unknown: u32,
    /// Whether the able sentinels reach the quorum (the primary can be flagged o_down).
    pub odown_possible: Option<bool>,
    /// Whether they also reach the majority (a leader can be elected to fail over).
    pub failover_possible: Option<bool>,
    /// CKQUORUM answers `OK`.
    pub ckquorum_ok: u32,
    /// CKQUORUM answers `NOQUORUM` (or another error).
    pub ckquorum_failed: u32,
    /// "a failover can happen now" / "a failover cannot happen now: …".
    pub summary: String,
}

/// One host name and how it resolves from here.
#[derive(Clone, Debug, Serialize)]
pub struct NameReport {
    /// The name.
    pub host: String,
    /// Ports it is used with.
    pub ports: Vec<u16>,
    /// `sentinel`, `primary`, `replica`.
    pub reported_as: Vec<String>,
    /// Resolution time from here.
    pub resolve_ms: Option<f64>,
    /// What it resolved to.
    pub addresses: Vec<String>,
    /// Why it did not resolve.
    pub error: Option<Problem>,
    /// Whether every address answered ROLE as the role it is reported with.
    pub role_ok: Option<bool>,
}

/// Primary or replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// The primary the sentinels name.
    Primary,
    /// A replica the sentinels list.
    Replica,
}

/// One data node as seen from here and by the sentinels.
#[derive(Clone, Debug, Serialize)]
pub struct NodeReport {
    /// As the sentinels report it.
    pub address: Address,
    /// Where it was probed instead, when the client's `address_map` maps `address`; `None`
    /// when probed as reported.
    pub mapped: Option<Address>,
    /// Primary or replica.
    pub kind: NodeKind,
    /// The sentinels that report it.
    pub named_by: Vec<Address>,
    /// The union of the flags they give it.
    pub sentinel_flags: Vec<String>,
    /// Resolution and connection from here.
    pub reach: Reach,
    /// First element of `ROLE`.
    pub role: Option<String>,
    /// For a replica: the primary it replicates from (ROLE).
    pub replicates_from: Option<Address>,
    /// ROLE matches the kind (and a replica follows the named primary).
    pub role_ok: Option<bool>,
    /// `master_link_status` of its `INFO replication`.
    pub link_status: Option<String>,
    /// `master-link-status` as the sentinels report it (`err` if any says so).
    pub sentinel_link_status: Option<String>,
    /// `master_repl_offset` (primary) or `slave_repl_offset` (replica).
    pub repl_offset: Option<i64>,
    /// Primary offset minus replica offset.
    pub lag_bytes: Option<i64>,
    /// `replica-priority` (INFO `slave_priority`, else the sentinels' `slave-priority`).
    pub priority: Option<i64>,
    /// Whether a failover could pick it.
    pub promotable: Option<bool>,
    /// Why not.
    pub not_promotable_because: Vec<String>,
    /// Primary: `connected_slaves`.
    pub connected_replicas: Option<u32>,
    /// Commands that failed or were refused.
    pub notes: Vec<String>,
}

/// Expected failover time, and the watch period.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timing {
    /// `down-after-milliseconds` (the largest reported).
    pub down_after_ms: Option<u64>,
    /// Time from s_down to a promoted replica, estimated: the o_down agreement, the failover
    /// start desync, the vote and the promotion, with the default sentinel periods.
    pub election_estimate_ms: u64,
    /// `down_after_ms + election_estimate_ms`.
    pub expected_failover_ms: Option<u64>,
    /// `failover-timeout` (the largest reported): a failed attempt is retried after twice that.
    pub failover_timeout_ms: Option<u64>,
    /// The `--watch` period, if any.
    pub watch_seconds: Option<f64>,
}

/// Milliseconds with one decimal, for the report.
pub(crate) fn ms(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}
