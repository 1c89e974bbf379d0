//! From measurements to findings and a verdict. Pure: everything it judges is in the report.
//!
//! Severity: a failure breaks failover or discovery now (a sentinel that does not act, a quorum
//! or majority out of reach, sentinels naming different primaries, a primary not usable, no
//! replica to promote); a warning is a risk (slow names, one replica not promotable, differing
//! settings, a certificate expiring within 14 days).

use std::time::Duration;

use super::report::{
    Finding, Mode, NodeKind, NodeReport, Report, SentinelReport, Severity, Source, Stage, Status,
    Verdict,
};
use super::watch::STALL;
use crate::config::Address;

/// A sentinel loop that stalls this long enters TILT (`sentinel_tilt_trigger`).
const TILT_TRIGGER_MS: f64 = 2000.0;
/// PING slower than this on a warm link: the sentinel's loop is busy or stalling.
const SLOW_REPLY_MS: f64 = 1000.0;
/// A replica this far behind is reported.
const LAG_BYTES: i64 = 1 << 20;
/// A certificate expiring within this many days is reported.
const TLS_DAYS: i64 = 14;

struct Findings(Vec<Finding>);

impl Findings {
    fn add(
        &mut self,
        severity: Severity,
        mode: Mode,
        code: &str,
        subject: Option<String>,
        message: String,
    ) {
        self.0.push(Finding {
            severity,
            mode,
            code: code.to_string(),
            subject,
            message,
            hint: mode.hint().to_string(),
        });
    }

    /// The last finding added gets this hint instead of its mode's.
    fn hint(&mut self, hint: String) {
        if let Some(last) = self.0.last_mut() {
            last.hint = hint;
        }
    }
}

/// Fills in `report.findings` and `report.verdict`.
pub(super) fn assess(report: &mut Report, slow_name: Duration) {
    let mut f = Findings(Vec::new());
    let answering = report.sentinels.iter().filter(|s| s.answered());
    let nobody_knows =
        answering.clone().count() > 0 && answering.clone().all(|s| s.knows_service == Some(false));
    if nobody_knows {
        let who: Vec<String> = answering.map(|s| s.address.to_string()).collect();
        f.add(
            Severity::Failure,
            Mode::ServiceUnknown,
            "service_unknown",
            None,
            format!(
                "no sentinel that answered monitors '{}' ({} answered: {})",
                report.service,
                who.len(),
                who.join(", ")
            ),
        );
    }
    for s in &report.sentinels {
        sentinel(&mut f, s, nobody_knows);
    }
    agreement(&mut f, report);
    quorum(&mut f, report);
    for n in &report.data_nodes {
        data_node(&mut f, n);
    }
    promotable(&mut f, &report.data_nodes);
    names(&mut f, report, slow_name);
    tls(&mut f, report);
    let mut findings = f.0;
    // Failures first, then by how much a mode explains, keeping the order found within.
    findings.sort_by_key(|x| {
        (
            std::cmp::Reverse(x.severity),
            Mode::ORDER.iter().position(|m| *m == x.mode),
        )
    });
    let mut modes: Vec<Mode> = Vec::new();
    for x in &findings {
        if !modes.contains(&x.mode) {
            modes.push(x.mode);
        }
    }
    let status = match findings.first().map(|x| x.severity) {
        None => Status::Healthy,
        Some(Severity::Warning) => Status::Warning,
        Some(Severity::Failure) => Status::Failure,
    };
    report.verdict = Verdict {
        status,
        exit_code: match status {
            Status::Healthy => 0,
            Status::Warning => 1,
            Status::Failure => 2,
        },
        headline: modes.first().map_or("healthy", |m| m.title()).to_string(),
        modes,
    };
    report.findings = findings;
}

fn sentinel(f: &mut Findings, s: &SentinelReport, nobody_knows: bool) {
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
        return;
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
    if let Some(w) = &s.watch {
        let stall_ms = STALL.as_millis() as f64;
        if w.max_gap_ms > stall_ms || w.failed > 0 {
            let severity = if w.max_gap_ms >= TILT_TRIGGER_MS {
                Severity::Failure
            } else {
                Severity::Warning
            };
            f.add(
                severity,
                Mode::LoopStall,
                "sentinel_stall_seen",
                subject.clone(),
                format!(
                    "sentinel {who} went {} ms without answering while watched ({} stalls over \
                     {} ms, {} PINGs unanswered); a stall of {} ms or more makes a sentinel \
                     enter TILT",
                    w.max_gap_ms, w.stalls, stall_ms, w.failed, TILT_TRIGGER_MS
                ),
            );
        }
        if w.tilt_after == Some(true) && s.tilt != Some(true) {
            f.add(
                Severity::Failure,
                Mode::LoopStall,
                "sentinel_tilt",
                subject.clone(),
                format!("sentinel {who} entered TILT while it was watched"),
            );
        }
    }
}

fn agreement(f: &mut Findings, report: &Report) {
    let a = &report.agreement;
    let addresses: Vec<_> = {
        let mut v: Vec<_> = a.primaries.iter().map(|c| &c.address).collect();
        v.dedup();
        v.sort();
        v.dedup();
        v
    };
    let describe = |c: &super::report::PrimaryClaim| {
        let who: Vec<String> = c.sentinels.iter().map(|s| s.to_string()).collect();
        let role = c
            .role
            .as_ref()
            .map(|r| format!(", ROLE says {r}"))
            .unwrap_or_default();
        format!(
            "{} with epoch {} ({} sentinel(s): {}{role})",
            c.address,
            c.config_epoch.map_or("?".into(), |e| e.to_string()),
            c.sentinels.len(),
            who.join(", ")
        )
    };
    if addresses.len() > 1 {
        let claims: Vec<String> = a.primaries.iter().map(describe).collect();
        f.add(
            Severity::Failure,
            Mode::Disagreement,
            "primaries_differ",
            None,
            format!(
                "sentinels name {} different primaries: {}",
                addresses.len(),
                claims.join("; ")
            ),
        );
    } else if a.primaries.len() > 1 {
        let claims: Vec<String> = a.primaries.iter().map(describe).collect();
        f.add(
            Severity::Warning,
            Mode::Disagreement,
            "epochs_differ",
            None,
            format!(
                "sentinels give the primary different config epochs: {}",
                claims.join("; ")
            ),
        );
    }
    let values = |claims: Vec<(String, usize)>| -> String {
        claims
            .iter()
            .map(|(v, n)| format!("{v} ({n} sentinel(s))"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if a.down_after_ms.len() > 1 {
        let v = a
            .down_after_ms
            .iter()
            .map(|c| (format!("{} ms", c.value), c.sentinels.len()))
            .collect();
        f.add(
            Severity::Warning,
            Mode::Disagreement,
            "settings_differ",
            None,
            format!("sentinels differ in down-after-milliseconds: {}", values(v)),
        );
    }
    if a.quorum.len() > 1 {
        let v = a
            .quorum
            .iter()
            .map(|c| (c.value.to_string(), c.sentinels.len()))
            .collect();
        f.add(
            Severity::Warning,
            Mode::Disagreement,
            "settings_differ",
            None,
            format!("sentinels differ in quorum: {}", values(v)),
        );
    }
    if a.known_sentinels.len() > 1 {
        let v = a
            .known_sentinels
            .iter()
            .map(|c| {
                let who: Vec<String> = c.sentinels.iter().map(|s| s.to_string()).collect();
                (
                    format!("{} known by {}", c.count, who.join(", ")),
                    c.sentinels.len(),
                )
            })
            .collect();
        f.add(
            Severity::Warning,
            Mode::Disagreement,
            "known_sentinels_differ",
            None,
            format!("sentinels know different sets of sentinels: {}", values(v)),
        );
    }
}

fn quorum(f: &mut Findings, report: &Report) {
    let q = &report.quorum;
    let (Some(quorum), Some(needed)) = (q.quorum, q.needed_for_failover) else {
        return;
    };
    if q.odown_possible == Some(false) {
        f.add(
            Severity::Failure,
            Mode::Quorum,
            "quorum_unreachable",
            None,
            format!(
                "only {} sentinel(s) can act but the quorum is {quorum}: the primary can't be \
                 flagged o_down, so no failover can start ({})",
                q.able, q.summary
            ),
        );
    } else if q.failover_possible == Some(false) {
        f.add(
            Severity::Failure,
            Mode::Quorum,
            "majority_unreachable",
            None,
            format!(
                "o_down is possible but a failover needs {needed} votes (quorum {quorum}, \
                 majority {} of {} known sentinels) and only {} sentinel(s) can act ({})",
                q.majority.unwrap_or(0),
                q.known_sentinels.unwrap_or(0),
                q.able,
                q.summary
            ),
        );
    }
    // A sentinel that itself counts too few usable peers, while our own count looks fine.
    if q.failover_possible != Some(false) {
        let primary = report.agreement.primaries.first().map(|c| &c.address);
        let follows = |s: &&SentinelReport| {
            primary.is_none_or(|p| s.master.as_ref().is_some_and(|m| m.address == *p))
        };
        for s in report.sentinels.iter().filter(follows) {
            if let Some(ck) = s.ckquorum.as_ref().filter(|c| !c.ok) {
                f.add(
                    Severity::Failure,
                    Mode::Quorum,
                    "ckquorum_failed",
                    Some(s.address.to_string()),
                    format!("sentinel {}: CKQUORUM says {}", s.address, ck.message),
                );
            }
        }
    }
}

/// An announced address that does not answer from here is what `address_map` is for (NAT,
/// Docker, port forwards); a mapped one that does not answer has a wrong map entry.
/// `announce` names the server setting that chose the announced address.
fn unreachable_hint(announced: &Address, mapped: Option<&Address>, announce: &str) -> String {
    match mapped {
        Some(to) => format!(
            "address_map sends {announced} to {to}, which does not answer: fix that entry (or \
             the function) so it names an address reachable from here"
        ),
        None => format!(
            "if it is reachable from here under another address (NAT, Docker, port forward), \
             map it: address_map={announced}>HOST:PORT in the URL, or an address_map function; \
             else make it announce a reachable address ({announce})"
        ),
    }
}

fn data_node(f: &mut Findings, n: &NodeReport) {
    let who = n.address.to_string();
    let subject = Some(who.clone());
    let primary = n.kind == NodeKind::Primary;
    let what = if primary { "primary" } else { "replica" };
    if let (Some(stage), Some(error)) = (n.reach.failed_at, &n.reach.error) {
        let severity = if primary {
            Severity::Failure
        } else {
            Severity::Warning
        };
        let (mode, code, message) = match stage {
            Stage::Resolve => (
                Mode::NameResolution,
                "name_unresolved",
                format!(
                    "{what} {who}: its name does not resolve from here: {}",
                    error.message
                ),
            ),
            Stage::Tcp => (
                Mode::NameResolution,
                "address_unreachable",
                match &n.mapped {
                    Some(to) => format!(
                        "{what} {who}, mapped by address_map to {to}, is not reachable from \
                         here: {}",
                        error.message
                    ),
                    None => format!(
                        "{what} {who}, as the sentinels announce it, is not reachable from \
                         here: {}",
                        error.message
                    ),
                },
            ),
            Stage::Handshake => (
                Mode::DataNodes,
                "replica_unusable",
                format!("{what} {who}: {}", error.message),
            ),
        };
        // An unusable primary is more than a naming problem: clients can't write.
        let (mode, code) = if primary {
            (Mode::DataNodes, "primary_unreachable")
        } else {
            (mode, code)
        };
        f.add(severity, mode, code, subject.clone(), message);
        if stage == Stage::Tcp {
            f.hint(unreachable_hint(
                &n.address,
                n.mapped.as_ref(),
                "replica-announce-ip",
            ));
        }
    }
    if primary {
        if n.role_ok == Some(false) {
            f.add(
                Severity::Failure,
                Mode::DataNodes,
                "primary_not_master",
                subject.clone(),
                format!(
                    "the sentinels name {who} as primary but ROLE says {}",
                    n.role.as_deref().unwrap_or("?")
                ),
            );
        }
        for flag in ["o_down", "s_down"] {
            if n.sentinel_flags.iter().any(|x| x == flag) {
                f.add(
                    Severity::Failure,
                    Mode::DataNodes,
                    "primary_seen_down",
                    subject.clone(),
                    format!("sentinels flag the primary {who} {flag}"),
                );
                break;
            }
        }
        if n.sentinel_flags.iter().any(|x| x == "failover_in_progress") {
            f.add(
                Severity::Warning,
                Mode::DataNodes,
                "failover_in_progress",
                subject,
                format!("a failover of {who} is in progress"),
            );
        }
        return;
    }
    if n.role_ok == Some(false) {
        f.add(
            Severity::Warning,
            Mode::DataNodes,
            "replica_role_unexpected",
            subject.clone(),
            format!(
                "replica {who}: ROLE says {}{}",
                n.role.as_deref().unwrap_or("?"),
                n.replicates_from
                    .as_ref()
                    .map(|m| format!(" of {m}"))
                    .unwrap_or_default()
            ),
        );
    }
    if n.promotable == Some(false) {
        f.add(
            Severity::Warning,
            Mode::ReplicaNotPromotable,
            "replica_not_promotable",
            subject.clone(),
            format!(
                "replica {who} would never be picked by a failover: {}",
                n.not_promotable_because.join(", ")
            ),
        );
    }
    if let Some(lag) = n.lag_bytes.filter(|l| *l > LAG_BYTES) {
        f.add(
            Severity::Warning,
            Mode::DataNodes,
            "replica_lagging",
            subject,
            format!("replica {who} is {lag} bytes behind the primary"),
        );
    }
}

fn promotable(f: &mut Findings, nodes: &[NodeReport]) {
    if nodes.is_empty() {
        return;
    }
    let replicas: Vec<&NodeReport> = nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Replica)
        .collect();
    if replicas.is_empty() {
        f.add(
            Severity::Warning,
            Mode::ReplicaNotPromotable,
            "no_promotable_replica",
            None,
            "the sentinels list no replica: a failover would have nothing to promote".into(),
        );
    } else if replicas.iter().all(|n| n.promotable == Some(false)) {
        f.add(
            Severity::Failure,
            Mode::ReplicaNotPromotable,
            "no_promotable_replica",
            None,
            format!(
                "none of the {} replicas can be promoted: a failover would abort with \
                 -failover-abort-no-good-slave",
                replicas.len()
            ),
        );
    }
}

fn names(f: &mut Findings, report: &Report, slow: Duration) {
    let slow_ms = slow.as_secs_f64() * 1000.0;
    let resolving: Vec<String> = report
        .sentinels
        .iter()
        .filter(|s| s.resolve_hostnames == Some(true))
        .map(|s| s.address.to_string())
        .collect();
    for n in &report.names {
        let Some(ms) = n.resolve_ms.filter(|ms| *ms > slow_ms) else {
            continue;
        };
        let risk = if resolving.is_empty() {
            String::new()
        } else {
            format!(
                "; sentinels with resolve-hostnames yes ({}) resolve names with a blocking call \
                 on their one thread: a lookup this slow stalls their loop as long (TILT risk)",
                resolving.join(", ")
            )
        };
        f.add(
            Severity::Warning,
            Mode::NameResolution,
            "name_slow",
            Some(n.host.clone()),
            format!(
                "{} ({}) took {ms} ms to resolve from here, more than {slow_ms} ms{risk}",
                n.host,
                n.reported_as.join(", ")
            ),
        );
    }
}

fn tls(f: &mut Findings, report: &Report) {
    let reaches = report
        .sentinels
        .iter()
        .map(|s| (s.address.to_string(), &s.reach))
        .chain(
            report
                .data_nodes
                .iter()
                .map(|n| (n.address.to_string(), &n.reach)),
        );
    for (who, reach) in reaches {
        match reach.tls_days_left {
            Some(days) if days < 0 => f.add(
                Severity::Failure,
                Mode::Tls,
                "tls_expired",
                Some(who.clone()),
                format!("the certificate of {who} expired {} day(s) ago", -days),
            ),
            Some(days) if days < TLS_DAYS => f.add(
                Severity::Warning,
                Mode::Tls,
                "tls_expiring",
                Some(who.clone()),
                format!("the certificate of {who} expires in {days} day(s)"),
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{node, report, sentinel};
    use super::super::report::Problem;
    use super::*;
    use crate::config::Address;

    fn three() -> Vec<SentinelReport> {
        vec![
            sentinel(1, 6379, 0, &["id2", "id3"]),
            sentinel(2, 6379, 0, &["id1", "id3"]),
            sentinel(3, 6379, 0, &["id1", "id2"]),
        ]
    }

    fn assessed(sentinels: Vec<SentinelReport>) -> Report {
        let mut r = report(sentinels);
        assess(&mut r, Duration::from_millis(100));
        r
    }

    #[test]
    fn healthy_sentinels_give_exit_0() {
        let r = assessed(three());
        assert_eq!(r.verdict.status, Status::Healthy, "{:?}", r.findings);
        assert_eq!(
            (r.verdict.exit_code, r.verdict.headline.as_str()),
            (0, "healthy")
        );
    }

    #[test]
    fn tilt_is_a_loop_stall_failure() {
        let mut s = three();
        s[0].tilt = Some(true);
        s[0].tilt_since_seconds = Some(3);
        let r = assessed(s);
        assert_eq!(r.verdict.status, Status::Failure);
        assert_eq!(r.verdict.modes, [Mode::LoopStall]);
        assert_eq!(r.verdict.headline, "loop stall / TILT");
        let f = r.finding("sentinel_tilt", Some("127.0.0.1:1")).unwrap();
        assert!(f.message.contains("in TILT for 3 s ("), "{}", f.message);
    }

    #[test]
    fn the_quorum_is_named_before_the_stalled_sentinels_that_explain_it() {
        let mut s = three();
        for x in &mut s {
            x.master.as_mut().unwrap().quorum = Some(3);
        }
        s[2].reach.connect_ms = None;
        s[2].reach.tcp_connect_ms = Some(0.1);
        s[2].reach.failed_at = Some(Stage::Handshake);
        s[2].reach.error = Some(Problem {
            code: "timeout".into(),
            message: "connecting took longer than 1 s".into(),
        });
        s[2].knows_service = None;
        s[2].master = None;
        let r = assessed(s);
        assert_eq!(r.verdict.modes, [Mode::Quorum, Mode::LoopStall]);
        assert_eq!(r.findings[0].code, "quorum_unreachable");
        assert_eq!(r.findings[1].code, "sentinel_no_reply");
        assert_eq!(r.verdict.exit_code, 2);
    }

    #[test]
    fn a_service_no_sentinel_knows_is_one_finding() {
        let mut s = three();
        for x in &mut s {
            x.knows_service = Some(false);
            x.master = None;
        }
        let r = assessed(s);
        assert_eq!(r.verdict.modes, [Mode::ServiceUnknown]);
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        // One sentinel out of three not knowing it is a disagreement.
        let mut s = three();
        s[1].knows_service = Some(false);
        s[1].master = None;
        let r = assessed(s);
        assert!(r
            .finding("sentinel_service_unknown", Some("127.0.0.1:2"))
            .is_some());
        assert_eq!(r.verdict.modes.first(), Some(&Mode::Disagreement));
    }

    #[test]
    fn slow_names_warn_with_the_tilt_risk_when_sentinels_resolve_names() {
        let mut s = three();
        s[0].address = Address::new("slow.example", 26379);
        s[0].reach.resolve_ms = Some(250.0);
        s[0].resolve_hostnames = Some(true);
        let r = assessed(s);
        assert_eq!(r.verdict.status, Status::Warning);
        let f = r.finding("name_slow", Some("slow.example")).unwrap();
        assert!(f.message.contains("250 ms") && f.message.contains("TILT risk"));
    }

    fn with_nodes(nodes: Vec<NodeReport>) -> Report {
        let mut r = report(three());
        r.data_nodes = nodes;
        assess(&mut r, Duration::from_millis(100));
        r
    }

    #[test]
    fn an_unreachable_learned_sentinel_gets_the_address_map_hint() {
        let mut s = three();
        s[2].source = Source::Learned;
        s[2].reach.failed_at = Some(Stage::Tcp);
        s[2].reach.error = Some(Problem {
            code: "connection_lost".into(),
            message: "connection refused".into(),
        });
        let r = assessed(s.clone());
        let f = r
            .finding("sentinel_unreachable", Some("127.0.0.1:3"))
            .unwrap();
        assert!(
            f.hint.contains("address_map=127.0.0.1:3>HOST:PORT") && f.hint.contains("announce-ip"),
            "{}",
            f.hint
        );
        s[2].mapped = Some(Address::new("10.0.0.1", 26379));
        let r = assessed(s.clone());
        let f = r.finding("sentinel_unreachable", None).unwrap();
        assert!(
            f.hint.contains("sends 127.0.0.1:3 to 10.0.0.1:26379"),
            "{}",
            f.hint
        );
        // A configured sentinel keeps the access hint: the URL names it.
        s[2].source = Source::Configured;
        let r = assessed(s);
        let f = r.finding("sentinel_unreachable", None).unwrap();
        assert!(!f.hint.contains("address_map"), "{}", f.hint);
    }

    fn unreachable(n: &mut NodeReport) {
        n.reach.connect_ms = None;
        n.reach.failed_at = Some(Stage::Tcp);
        n.reach.error = Some(Problem {
            code: "connection_lost".into(),
            message: "connection refused".into(),
        });
    }

    #[test]
    fn data_nodes() {
        let healthy = with_nodes(vec![
            node(NodeKind::Primary, 6379),
            node(NodeKind::Replica, 6380),
        ]);
        assert_eq!(
            healthy.verdict.status,
            Status::Healthy,
            "{:?}",
            healthy.findings
        );

        // An unreachable primary is a failure; an unreachable replica a misdirected address.
        let mut primary = node(NodeKind::Primary, 6379);
        unreachable(&mut primary);
        let mut replica = node(NodeKind::Replica, 6380);
        unreachable(&mut replica);
        let r = with_nodes(vec![primary, replica, node(NodeKind::Replica, 6381)]);
        let f = r
            .finding("primary_unreachable", Some("127.0.0.1:6379"))
            .unwrap();
        assert_eq!((f.severity, f.mode), (Severity::Failure, Mode::DataNodes));
        let f = r
            .finding("address_unreachable", Some("127.0.0.1:6380"))
            .unwrap();
        assert_eq!(
            (f.severity, f.mode),
            (Severity::Warning, Mode::NameResolution)
        );
        assert!(
            f.hint.contains("address_map=127.0.0.1:6380>HOST:PORT"),
            "{}",
            f.hint
        );

        // No replica left to promote is a failure.
        let mut replica = node(NodeKind::Replica, 6380);
        replica.promotable = Some(false);
        replica.not_promotable_because = vec!["replica-priority 0".into()];
        let r = with_nodes(vec![node(NodeKind::Primary, 6379), replica]);
        assert_eq!(r.verdict.modes, [Mode::ReplicaNotPromotable]);
        assert_eq!(r.verdict.status, Status::Failure);
        assert!(r.finding("no_promotable_replica", None).is_some());
        assert!(r
            .finding("replica_not_promotable", Some("127.0.0.1:6380"))
            .is_some());

        // Certificates.
        let mut primary = node(NodeKind::Primary, 6379);
        primary.reach.tls_days_left = Some(3);
        let mut replica = node(NodeKind::Replica, 6380);
        replica.reach.tls_days_left = Some(-1);
        let r = with_nodes(vec![primary, replica]);
        assert!(r.finding("tls_expiring", Some("127.0.0.1:6379")).is_some());
        assert_eq!(
            r.finding("tls_expired", Some("127.0.0.1:6380"))
                .map(|f| f.severity),
            Some(Severity::Failure)
        );
    }
}
