//! Quorum and majority: can the sentinels that are able to act flag the primary `o_down`, and
//! can one of them be elected to fail over?
//!
//! The rules, as Redis and Valkey implement them (`sentinel.c`): a sentinel flags its primary
//! `o_down` when at least `quorum` sentinels, itself included, report it `s_down`. The sentinel
//! that then starts a failover needs votes from `max(quorum, voters / 2 + 1)` sentinels, where
//! `voters` is every sentinel it knows for the service plus itself, reachable or not: sentinels are
//! never forgotten, so a dead one still counts in the majority. A sentinel in TILT does not act.
//! So a quorum of 1 with two of three sentinels down still flags `o_down`, yet never fails over.
//!
//! Only sentinels that name the primary most of them name count: one that follows another
//! primary neither reports this one down nor votes for its failover (it looks masters up by
//! address), and its own numbers describe its own, different view.

use super::findings::Findings;
use super::report::{Auth, Mode, Quorum, Report, SentinelReport, Severity, Stage};
use crate::types::Address;

/// Counts the sentinels that can act for `primary` (the consensus primary; every sentinel that
/// knows the service when `None`) and compares them to the quorum and the majority. `CKQUORUM`
/// answers (each sentinel's own count of usable peers) can only make it worse: a failover needs
/// some sentinel that itself sees enough peers.
pub(super) fn assess(sentinels: &[SentinelReport], primary: Option<&Address>) -> Quorum {
    let follows = |s: &SentinelReport| {
        primary.is_none_or(|p| s.master.as_ref().is_some_and(|m| m.address == *p))
    };
    let knowing: Vec<&SentinelReport> = sentinels
        .iter()
        .filter(|s| s.answered() && s.knows_service == Some(true))
        .collect();
    let views: Vec<&SentinelReport> = knowing.iter().copied().filter(|s| follows(s)).collect();
    let naming_other_primary = (knowing.len() - views.len()) as u32;
    let answering = views.len() as u32;
    let in_tilt = views.iter().filter(|s| s.tilt == Some(true)).count() as u32;
    let able = views.iter().filter(|s| s.able()).count() as u32;
    let unknown = sentinels.iter().filter(|s| access_problem(s)).count() as u32;
    let quorum = views.iter().filter_map(|s| s.master.as_ref()?.quorum).max();
    let known_sentinels = views
        .iter()
        .filter_map(|s| Some(s.master.as_ref()?.num_other_sentinels? + 1))
        .max()
        .map(|n| n.max(answering));
    let majority = known_sentinels.map(|n| n / 2 + 1);
    let needed = match (quorum, majority) {
        (Some(q), Some(m)) => Some(q.max(m)),
        _ => None,
    };
    let ckquorum_ok = views
        .iter()
        .filter(|s| s.ckquorum.as_ref().is_some_and(|c| c.ok))
        .count() as u32;
    let ckquorum_failed = views
        .iter()
        .filter(|s| s.ckquorum.as_ref().is_some_and(|c| !c.ok))
        .count() as u32;
    let ck_all_failed = ckquorum_ok == 0 && ckquorum_failed > 0;
    let ck_quorum_seen = views
        .iter()
        .any(|s| s.ckquorum.as_ref().is_some_and(|c| c.quorum_reachable));
    // Enough sentinels able: yes. Not enough, but some we could not see might be able: unknown.
    let judge = |need: Option<u32>| -> Option<bool> {
        let need = need?;
        if able >= need {
            Some(true)
        } else if able + unknown >= need {
            None
        } else {
            Some(false)
        }
    };
    let mut odown_possible = judge(quorum);
    let mut failover_possible = judge(needed);
    if ck_all_failed {
        if !ck_quorum_seen && odown_possible == Some(true) {
            odown_possible = Some(false);
        }
        if failover_possible == Some(true) {
            failover_possible = Some(false);
        }
    }
    let mut report = Quorum {
        quorum,
        known_sentinels,
        majority,
        needed_for_failover: needed,
        answering,
        naming_other_primary,
        in_tilt,
        able,
        unknown,
        odown_possible,
        failover_possible,
        ckquorum_ok,
        ckquorum_failed,
        summary: String::new(),
    };
    report.summary = summary(&report, ck_all_failed);
    report
}

/// A sentinel whose state is hidden from us by our own access: credentials or TLS refused, or
/// an ACL that forbids asking about the service.
fn access_problem(s: &SentinelReport) -> bool {
    if s.auth == Auth::Refused {
        return true;
    }
    let tls = s.reach.failed_at == Some(Stage::Handshake)
        && s.reach.error.as_ref().is_some_and(|e| e.code == "tls");
    tls || (s.reach.connected() && s.knows_service.is_none())
}

fn summary(q: &Quorum, ck_all_failed: bool) -> String {
    let (Some(quorum), Some(known), Some(majority), Some(needed)) = (
        q.quorum,
        q.known_sentinels,
        q.majority,
        q.needed_for_failover,
    ) else {
        return "unknown: no sentinel answered with its view of the service".into();
    };
    let able = q.able;
    let counts = format!(
        "{able} of {known} known sentinels can act ({} answering, {} in TILT{}); quorum \
         {quorum}, majority {majority}",
        q.answering,
        q.in_tilt,
        if q.naming_other_primary > 0 {
            format!(
                ", {} more following another primary",
                q.naming_other_primary
            )
        } else {
            String::new()
        }
    );
    match (q.odown_possible, q.failover_possible) {
        (_, Some(true)) => format!("a failover can happen now: {counts}"),
        (Some(false), _) if ck_all_failed && able >= quorum => {
            format!("a failover cannot happen now: every CKQUORUM answer says NOQUORUM; {counts}")
        }
        (Some(false), _) => format!(
            "a failover cannot happen now: {able} < quorum {quorum}, the primary can't even be \
             flagged o_down; {counts}"
        ),
        (Some(true), Some(false)) if ck_all_failed && able >= needed => format!(
            "a failover cannot happen now: o_down is possible, but every CKQUORUM answer says \
             NOQUORUM; {counts}"
        ),
        (Some(true), Some(false)) => format!(
            "a failover cannot happen now: o_down is possible ({able} >= quorum {quorum}) but \
             the leader needs {needed} votes (majority of {known} known sentinels); {counts}"
        ),
        _ => format!(
            "unknown: {} sentinel(s) could not be asked (credentials, TLS or ACL); {counts}",
            q.unknown
        ),
    }
}

pub(super) fn judge(f: &mut Findings, report: &Report) {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::sentinel;
    use super::super::report::{CkQuorum, Problem};
    use super::*;

    fn three(quorum: u32) -> Vec<SentinelReport> {
        let mut s = vec![
            sentinel(1, 6379, 0, &["id2", "id3"]),
            sentinel(2, 6379, 0, &["id1", "id3"]),
            sentinel(3, 6379, 0, &["id1", "id2"]),
        ];
        for x in &mut s {
            x.master.as_mut().unwrap().quorum = Some(quorum);
        }
        s
    }

    fn stopped(s: &mut SentinelReport) {
        s.reach.connect_ms = None;
        s.reach.failed_at = Some(Stage::Handshake);
        s.reach.error = Some(Problem {
            code: "timeout".into(),
            message: "no reply".into(),
        });
        s.knows_service = None;
        s.master = None;
    }

    #[test]
    fn all_up() {
        let q = assess(&three(2), None);
        assert_eq!(
            (q.able, q.known_sentinels, q.majority),
            (3, Some(3), Some(2))
        );
        assert_eq!(
            (q.odown_possible, q.failover_possible),
            (Some(true), Some(true))
        );
        assert!(
            q.summary.starts_with("a failover can happen now"),
            "{}",
            q.summary
        );
    }

    #[test]
    fn quorum_three_with_one_or_two_stopped() {
        let mut s = three(3);
        stopped(&mut s[2]);
        let q = assess(&s, None);
        assert_eq!((q.able, q.quorum, q.majority), (2, Some(3), Some(2)));
        assert_eq!(
            (q.odown_possible, q.failover_possible),
            (Some(false), Some(false))
        );
        assert!(
            q.summary.contains("can't even be flagged o_down"),
            "{}",
            q.summary
        );
        stopped(&mut s[1]);
        let q = assess(&s, None);
        assert_eq!(q.able, 1);
        assert_eq!(q.failover_possible, Some(false));
    }

    #[test]
    fn quorum_one_with_two_stopped_flags_odown_but_cannot_elect() {
        let mut s = three(1);
        stopped(&mut s[1]);
        stopped(&mut s[2]);
        let q = assess(&s, None);
        assert_eq!((q.able, q.needed_for_failover), (1, Some(2)));
        assert_eq!(
            (q.odown_possible, q.failover_possible),
            (Some(true), Some(false))
        );
        assert!(q.summary.contains("needs 2 votes"), "{}", q.summary);
    }

    #[test]
    fn a_sentinel_following_another_primary_does_not_count() {
        let mut s = three(2);
        s.push(sentinel(4, 6380, 0, &[]));
        s[3].ckquorum = Some(CkQuorum {
            ok: false,
            usable: Some(1),
            quorum_reachable: false,
            majority_reachable: false,
            message: "NOQUORUM 1 usable Sentinels".into(),
        });
        let primary = Address::new("127.0.0.1", 6379);
        let q = assess(&s, Some(&primary));
        assert_eq!(
            (
                q.answering,
                q.naming_other_primary,
                q.able,
                q.known_sentinels
            ),
            (3, 1, 3, Some(3))
        );
        assert_eq!((q.ckquorum_failed, q.failover_possible), (0, Some(true)));
    }

    #[test]
    fn tilt_counts_as_not_able_and_refused_auth_as_unknown() {
        let mut s = three(2);
        s[0].tilt = Some(true);
        s[1].tilt = Some(true);
        let q = assess(&s, None);
        assert_eq!((q.answering, q.in_tilt, q.able), (3, 2, 1));
        assert_eq!(q.odown_possible, Some(false));
        let mut s = three(2);
        for x in &mut s[1..] {
            stopped(x);
            x.auth = Auth::Refused;
        }
        let q = assess(&s, None);
        assert_eq!((q.able, q.unknown), (1, 2));
        assert_eq!(q.failover_possible, None);
        assert!(q.summary.starts_with("unknown"), "{}", q.summary);
    }

    #[test]
    fn ckquorum_failures_override_our_count() {
        let mut s = three(2);
        for x in &mut s {
            x.ckquorum = Some(CkQuorum {
                ok: false,
                usable: Some(1),
                quorum_reachable: false,
                majority_reachable: false,
                message: "NOQUORUM 1 usable Sentinels".into(),
            });
        }
        let q = assess(&s, None);
        assert_eq!(q.ckquorum_failed, 3);
        assert_eq!(q.failover_possible, Some(false));
        assert!(q.summary.contains("CKQUORUM"), "{}", q.summary);
    }
}
