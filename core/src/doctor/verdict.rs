//! From measurements to findings and a verdict. Pure: everything it judges is in the report. Each
//! rule sits next to the probe whose measurements it judges; this module runs them in order and
//! draws the verdict.
//!
//! Severity: a failure breaks failover or discovery now (a sentinel that does not act, a quorum
//! or majority out of reach, sentinels naming different primaries, a primary not usable, no
//! replica to promote); a warning is a risk (slow names, one replica not promotable, differing
//! settings, a certificate expiring within 14 days).

use std::time::Duration;

use super::findings::Findings;
use super::report::{Mode, Report, Severity, Status, Verdict};
use super::{agreement, data, names, probe, quorum, tls_expiry, watch};

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
        if probe::judge(&mut f, s, nobody_knows) {
            watch::judge(&mut f, s);
        }
    }
    agreement::judge(&mut f, report);
    quorum::judge(&mut f, report);
    for n in &report.data_nodes {
        data::judge_node(&mut f, n);
    }
    data::judge_promotable(&mut f, &report.data_nodes);
    names::judge(&mut f, report, slow_name);
    tls_expiry::judge(&mut f, report);
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::{node, report, sentinel};
    use super::super::report::{NodeKind, NodeReport, Problem, SentinelReport, Source, Stage};
    use super::*;
    use crate::types::Address;

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
