//! Probing one sentinel: reach it, time PINGs over the warm link, then ask everything else at
//! once (`INFO sentinel`, `ROLE`, `SENTINEL MYID / MASTER / CKQUORUM / REPLICAS / SENTINELS /
//! CONFIG GET`), each under the reply deadline. A command a server refuses (an ACL without that
//! permission, an older server) becomes a note, not a failure.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::fields;
use super::findings::{unreachable_hint, Findings};
use super::options::Ctx;
use super::reach::{self, Reached};
use super::report::{
    ms, Auth, MasterView, Mode, PingStats, SentinelReport, Severity, Source, Stage,
};
use crate::error::{Error, ErrorCode};
use crate::node::parse_role;
use crate::resp::{Connection, Value};
use crate::sentinel::replies;
use crate::types::Address;
use crate::types::Role;

/// A probed sentinel, with what later steps need besides its report.
pub(super) struct SentinelProbe {
    pub report: SentinelReport,
    /// The open connection, for `--watch`.
    pub conn: Option<Connection>,
    /// What its address resolved to, to recognise it when another sentinel reports it by IP.
    pub resolved: Vec<SocketAddr>,
    /// PING is allowed (it answered one).
    pub pings: bool,
}

/// Probes the sentinel at `address`.
pub(super) async fn sentinel(ctx: &Ctx, address: Address, source: Source) -> SentinelProbe {
    // A learned sentinel is an address another sentinel reported: probed where a client would
    // connect to it.
    let target = match source {
        Source::Learned => ctx.setup.address_map.apply(&address),
        Source::Configured => address.clone(),
    };
    let Reached {
        reach,
        conn,
        resolved,
        error,
    } = reach::reach(&ctx.setup.resolver, &target, &ctx.setup.sentinel).await;
    let configured = ctx.setup.sentinel.auth.is_some();
    let auth = match (&conn, &error) {
        (Some(_), _) if configured => Auth::Ok,
        (Some(_), _) => Auth::None,
        (None, Some(e)) if e.code() == ErrorCode::Auth => Auth::Refused,
        (None, _) if configured => Auth::Unknown,
        (None, _) => Auth::None,
    };
    let mut probe = SentinelProbe {
        report: SentinelReport {
            address,
            mapped: target
                .announced
                .is_some()
                .then(|| Address::new(target.host.clone(), target.port)),
            source,
            reach,
            auth,
            run_id: None,
            role: None,
            ping: None,
            tilt: None,
            tilt_since_seconds: None,
            knows_service: None,
            master: None,
            resolve_hostnames: None,
            announce_hostnames: None,
            ckquorum: None,
            replicas: Vec::new(),
            sentinels: Vec::new(),
            watch: None,
            notes: Vec::new(),
        },
        conn: None,
        resolved,
        pings: false,
    };
    let Some(conn) = conn else {
        return probe;
    };
    let report = &mut probe.report;
    let timeout = ctx.reply_timeout;
    let (ping, refused) = ping(&conn, ctx.options.pings, timeout).await;
    probe.pings = ping.is_some();
    report.ping = ping;
    if let Some(e) = refused {
        report.notes.push(note("PING", &e));
    }

    let service = ctx.service.as_str();
    let master_cmd = ["SENTINEL", "MASTER", service];
    let ckquorum_cmd = ["SENTINEL", "CKQUORUM", service];
    let replicas_cmd = ["SENTINEL", "REPLICAS", service];
    let sentinels_cmd = ["SENTINEL", "SENTINELS", service];
    let (info, role, myid, master, ckquorum, replicas, peers, resolve, announce) = tokio::join!(
        conn.request_timeout(&["INFO", "sentinel"], timeout),
        conn.request_timeout(&["ROLE"], timeout),
        conn.request_timeout(&["SENTINEL", "MYID"], timeout),
        conn.request_timeout(&master_cmd, timeout),
        conn.request_timeout(&ckquorum_cmd, timeout),
        conn.request_timeout(&replicas_cmd, timeout),
        conn.request_timeout(&sentinels_cmd, timeout),
        conn.request_timeout(&["SENTINEL", "CONFIG", "GET", "resolve-hostnames"], timeout),
        conn.request_timeout(
            &["SENTINEL", "CONFIG", "GET", "announce-hostnames"],
            timeout
        ),
    );

    match info.map(|v| v.as_str().map(String::from)) {
        Ok(Some(text)) => {
            report.tilt = replies::info_tilt(&text);
            report.tilt_since_seconds = fields::info_num(&text, "sentinel_tilt_since_seconds");
        }
        Ok(None) => report.notes.push("INFO sentinel: not a text reply".into()),
        Err(e) => report.notes.push(note("INFO sentinel", &e)),
    }
    match role.and_then(parse_role) {
        Ok(Role::Master) => report.role = Some("master".into()),
        Ok(Role::Replica { .. }) => report.role = Some("slave".into()),
        Ok(Role::Other(name)) => report.role = Some(name),
        Err(e) => report.notes.push(note("ROLE", &e)),
    }
    match myid {
        Ok(v) => report.run_id = v.as_str().filter(|s| !s.is_empty()).map(String::from),
        Err(e) => report.notes.push(note("SENTINEL MYID", &e)),
    }
    match master {
        Ok(v) => match fields::master(v) {
            Some(view) => {
                report.knows_service = Some(true);
                report.master = Some(view);
            }
            None => report
                .notes
                .push("SENTINEL MASTER: reply without an address".into()),
        },
        Err(e) if is_unknown_master(&e) => report.knows_service = Some(false),
        Err(e) => {
            report.notes.push(note("SENTINEL MASTER", &e));
            // Where MASTER is refused, GET-MASTER-ADDR-BY-NAME still names the primary.
            let by_name = conn
                .request_timeout(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", service], timeout)
                .await
                .and_then(replies::master_addr);
            match by_name {
                Ok(Some(address)) => {
                    report.knows_service = Some(true);
                    report.master = Some(MasterView {
                        address,
                        flags: Vec::new(),
                        config_epoch: None,
                        quorum: None,
                        down_after_ms: None,
                        failover_timeout_ms: None,
                        parallel_syncs: None,
                        num_other_sentinels: None,
                        num_slaves: None,
                        failover_state: None,
                    });
                }
                Ok(None) => report.knows_service = Some(false),
                Err(e) => report
                    .notes
                    .push(note("SENTINEL GET-MASTER-ADDR-BY-NAME", &e)),
            }
        }
    }
    match &ckquorum {
        Err(e) if e.server_code() != Some("NOQUORUM") && !is_unknown_master(e) => {
            report.notes.push(note("SENTINEL CKQUORUM", e))
        }
        _ => {}
    }
    report.ckquorum = fields::ckquorum(ckquorum);
    match replicas {
        Ok(v) => report.replicas = fields::replicas(v),
        Err(e) if is_unknown_master(&e) => {}
        Err(e) => report.notes.push(note("SENTINEL REPLICAS", &e)),
    }
    match peers {
        Ok(v) => report.sentinels = fields::peers(v),
        Err(e) if is_unknown_master(&e) => {}
        Err(e) => report.notes.push(note("SENTINEL SENTINELS", &e)),
    }
    match resolve {
        Ok(v) => report.resolve_hostnames = fields::config_flag(v, "resolve-hostnames"),
        Err(e) => report
            .notes
            .push(note("SENTINEL CONFIG GET resolve-hostnames", &e)),
    }
    match announce {
        Ok(v) => report.announce_hostnames = fields::config_flag(v, "announce-hostnames"),
        Err(e) => report
            .notes
            .push(note("SENTINEL CONFIG GET announce-hostnames", &e)),
    }
    probe.conn = Some(conn);
    probe
}

/// `ERR No such master with that name` (Valkey: `primary`).
fn is_unknown_master(e: &Error) -> bool {
    let text = e.message().to_ascii_lowercase();
    text.contains("no such master") || text.contains("no such primary")
}

/// `"<command>: <why>"` for a report's notes.
pub(super) fn note(command: &str, e: &Error) -> String {
    format!("{command}: {}", e.message())
}

/// `count` PINGs one after another; stops at the first failure, which is returned.
pub(super) async fn ping(
    conn: &Connection,
    count: u32,
    timeout: Duration,
) -> (Option<PingStats>, Option<Error>) {
    let mut rtts = Vec::with_capacity(count as usize);
    let mut failure = None;
    for _ in 0..count {
        let sent = Instant::now();
        match conn.request_timeout(&["PING"], timeout).await {
            Ok(Value::Simple(_) | Value::Bulk(_)) => rtts.push(sent.elapsed()),
            Ok(other) => {
                failure = Some(Error::protocol(format!("PING answered {other:?}")));
                break;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    (stats(&mut rtts), failure)
}

/// Min, median and max of round trips; `None` for none.
pub(super) fn stats(rtts: &mut [Duration]) -> Option<PingStats> {
    rtts.sort();
    let n = rtts.len();
    let (first, last) = (rtts.first()?, rtts.last()?);
    let median = if n % 2 == 1 {
        rtts[n / 2]
    } else {
        (rtts[n / 2 - 1] + rtts[n / 2]) / 2
    };
    Some(PingStats {
        samples: n as u32,
        min_ms: ms(*first),
        median_ms: ms(median),
        max_ms: ms(*last),
    })
}

/// PING slower than this on a warm link: the sentinel's loop is busy or stalling.
const SLOW_REPLY_MS: f64 = 1000.0;

/// The findings about one sentinel from its probe; `false` when it could not be reached (nothing
/// else about it can be judged then).
pub(super) fn judge(f: &mut Findings, s: &SentinelReport, nobody_knows: bool) -> bool {
    let who = s.address.to_string();
    let subject = Some(who.clone());
    if let (Some(stage), Some(error)) = (s.reach.failed_at, &s.reach.error) {
        let (severity, mode, code, message) = match stage {
            Stage::Resolve => (
                Severity::Failure,
                Mode::NameResolution,
                "name_unresolved",
                format!(
                    "sentinel {who}: its name does not resolve from here: {}",
                    error.message
                ),
            ),
            Stage::Tcp => (
                Severity::Failure,
                Mode::SentinelAccess,
                "sentinel_unreachable",
                format!("sentinel {who} is not reachable: {}", error.message),
            ),
            Stage::Handshake => match error.code.as_str() {
                "auth" => (
                    Severity::Failure,
                    Mode::SentinelAccess,
                    "sentinel_auth_refused",
                    format!(
                        "sentinel {who} refused the sentinel credentials: {}",
                        error.message
                    ),
                ),
                "tls" => (
                    Severity::Failure,
                    Mode::SentinelAccess,
                    "sentinel_tls_failed",
                    format!("sentinel {who}: {}", error.message),
                ),
                "timeout" => (
                    Severity::Failure,
                    Mode::LoopStall,
                    "sentinel_no_reply",
                    format!(
                        "sentinel {who} accepted a TCP connection in {} ms but did not answer \
                         the handshake: {} (a stopped or stalled process)",
                        s.reach.tcp_connect_ms.unwrap_or(0.0),
                        error.message
                    ),
                ),
                _ => (
                    Severity::Failure,
                    Mode::SentinelAccess,
                    "sentinel_unreachable",
                    format!("sentinel {who}: {}", error.message),
                ),
            },
        };
        f.add(severity, mode, code, subject, message);
        // A learned sentinel is an address another sentinel announced: NAT and Docker again.
        if stage == Stage::Tcp && s.source == Source::Learned {
            f.hint(unreachable_hint(
                &s.address,
                s.mapped.as_ref(),
                "sentinel announce-ip / announce-port",
            ));
        }
        return false;
    }
    if s.knows_service == Some(false) && !nobody_knows {
        f.add(
            Severity::Failure,
            Mode::Disagreement,
            "sentinel_service_unknown",
            subject.clone(),
            format!("sentinel {who} does not monitor the service"),
        );
    }
    if s.tilt == Some(true) {
        let (since, info) = match s.tilt_since_seconds {
            Some(n) if n >= 0 => (
                format!(" for {n} s"),
                format!("sentinel_tilt:1, sentinel_tilt_since_seconds:{n}"),
            ),
            _ => (String::new(), "sentinel_tilt:1".to_string()),
        };
        f.add(
            Severity::Failure,
            Mode::LoopStall,
            "sentinel_tilt",
            subject.clone(),
            format!(
                "sentinel {who} is in TILT{since} (INFO sentinel: {info}): its timer \
                 stalled for 2 s or more, and it does not act until TILT ends"
            ),
        );
    }
    if let Some(p) = &s.ping {
        if p.max_ms > SLOW_REPLY_MS {
            f.add(
                Severity::Warning,
                Mode::LoopStall,
                "sentinel_slow_replies",
                subject.clone(),
                format!(
                    "sentinel {who} answered PING in up to {} ms (median {} ms) on a warm link",
                    p.max_ms, p.median_ms
                ),
            );
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_statistics() {
        let mut rtts: Vec<Duration> = [5, 1, 3, 2]
            .iter()
            .map(|m| Duration::from_millis(*m))
            .collect();
        let s = stats(&mut rtts).unwrap();
        assert_eq!(
            (s.samples, s.min_ms, s.median_ms, s.max_ms),
            (4, 1.0, 2.5, 5.0)
        );
        let mut odd = vec![Duration::from_millis(7)];
        assert_eq!(stats(&mut odd).unwrap().median_ms, 7.0);
        assert!(stats(&mut []).is_none());
    }

    #[test]
    fn unknown_master_replies() {
        assert!(is_unknown_master(&Error::server(
            "ERR No such master with that name"
        )));
        assert!(is_unknown_master(&Error::server(
            "ERR No such primary with that name"
        )));
        assert!(!is_unknown_master(&Error::server("NOPERM no")));
    }
}
