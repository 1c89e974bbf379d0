//! Whether the sentinels that answered agree: on the primary and its config epoch, on
//! `down-after-milliseconds` and the quorum, and on the set of sentinels they know.

use super::findings::Findings;
use super::report::{
    Agreement, Claim, KnownClaim, Mode, PrimaryClaim, Report, SentinelReport, Severity,
};

/// Groups the sentinels' views. Only sentinels that monitor the service take part.
pub(super) fn compare(sentinels: &[SentinelReport]) -> Agreement {
    let views: Vec<&SentinelReport> = sentinels
        .iter()
        .filter(|s| s.knows_service == Some(true) && s.master.is_some())
        .collect();

    let mut primaries: Vec<PrimaryClaim> = Vec::new();
    for s in &views {
        let Some(m) = &s.master else { continue };
        match primaries
            .iter_mut()
            .find(|c| c.address == m.address && c.config_epoch == m.config_epoch)
        {
            Some(claim) => claim.sentinels.push(s.address.clone()),
            None => primaries.push(PrimaryClaim {
                address: m.address.clone(),
                config_epoch: m.config_epoch,
                sentinels: vec![s.address.clone()],
                role: None,
            }),
        }
    }
    // Most sentinels first; among equals, the newest epoch.
    primaries.sort_by(|a, b| {
        b.sentinels
            .len()
            .cmp(&a.sentinels.len())
            .then(b.config_epoch.cmp(&a.config_epoch))
    });

    let down_after_ms = group(&views, |s| s.master.as_ref()?.down_after_ms);
    let quorum = group(&views, |s| s.master.as_ref()?.quorum);
    let known_sentinels = known_sets(&views);
    let agree = primaries.len() <= 1
        && down_after_ms.len() <= 1
        && quorum.len() <= 1
        && known_sentinels.len() <= 1;
    Agreement {
        agree,
        primaries,
        down_after_ms,
        quorum,
        known_sentinels,
    }
}

fn group<T: PartialEq + Copy>(
    views: &[&SentinelReport],
    value: impl Fn(&SentinelReport) -> Option<T>,
) -> Vec<Claim<T>> {
    let mut claims: Vec<Claim<T>> = Vec::new();
    for s in views {
        let Some(v) = value(s) else { continue };
        match claims.iter_mut().find(|c| c.value == v) {
            Some(c) => c.sentinels.push(s.address.clone()),
            None => claims.push(Claim {
                value: v,
                sentinels: vec![s.address.clone()],
            }),
        }
    }
    claims.sort_by_key(|c| std::cmp::Reverse(c.sentinels.len()));
    claims
}

/// The set each sentinel knows (itself included). Compared by run id when every sentinel gave its
/// own and every entry has one; otherwise only the sizes are compared (a sentinel may be listed
/// by an address that differs from the one configured here).
fn known_sets(views: &[&SentinelReport]) -> Vec<KnownClaim> {
    let by_id = views
        .iter()
        .all(|s| s.run_id.is_some() && s.sentinels.iter().all(|p| p.run_id.is_some()));
    let mut claims: Vec<KnownClaim> = Vec::new();
    for s in views {
        let count = s
            .master
            .as_ref()
            .and_then(|m| m.num_other_sentinels)
            .map(|n| n + 1)
            .unwrap_or(s.sentinels.len() as u32 + 1);
        let ids = if by_id {
            let mut ids: Vec<String> = s
                .sentinels
                .iter()
                .filter_map(|p| p.run_id.clone())
                .chain(s.run_id.clone())
                .collect();
            ids.sort();
            ids.dedup();
            ids
        } else {
            Vec::new()
        };
        match claims.iter_mut().find(|c| c.count == count && c.ids == ids) {
            Some(c) => c.sentinels.push(s.address.clone()),
            None => claims.push(KnownClaim {
                count,
                ids,
                sentinels: vec![s.address.clone()],
            }),
        }
    }
    claims.sort_by_key(|c| std::cmp::Reverse(c.sentinels.len()));
    claims
}

pub(super) fn judge(f: &mut Findings, report: &Report) {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::sentinel;
    use super::super::report::PeerView;
    use super::*;
    use crate::types::Address;

    #[test]
    fn agreeing_sentinels() {
        let s = [
            sentinel(1, 6379, 0, &["id2", "id3"]),
            sentinel(2, 6379, 0, &["id1", "id3"]),
            sentinel(3, 6379, 0, &["id1", "id2"]),
        ];
        let a = compare(&s);
        assert!(a.agree, "{a:?}");
        assert_eq!(a.primaries[0].sentinels.len(), 3);
        assert_eq!(a.known_sentinels[0].count, 3);
        assert_eq!(a.primaries[0].address, Address::new("127.0.0.1", 6379));
    }

    #[test]
    fn a_stale_sentinel_is_in_the_minority() {
        let mut s = vec![
            sentinel(1, 6379, 1, &["id2", "id3"]),
            sentinel(2, 6379, 1, &["id1", "id3"]),
            sentinel(3, 6380, 0, &["id1"]),
        ];
        s[2].master.as_mut().unwrap().down_after_ms = Some(5000);
        let a = compare(&s);
        assert!(!a.agree);
        assert_eq!(a.primaries.len(), 2);
        assert_eq!(a.primaries[0].address.port, 6379);
        assert_eq!(a.primaries[1].sentinels, [Address::new("127.0.0.1", 3)]);
        assert_eq!(a.down_after_ms.len(), 2);
        assert_eq!(a.known_sentinels.len(), 2);
        // A sentinel without a run id makes the sets compared by size only.
        s[2].run_id = None;
        s[2].sentinels.push(PeerView {
            address: Address::new("127.0.0.1", 2),
            flags: vec![],
            run_id: None,
        });
        s[2].master.as_mut().unwrap().num_other_sentinels = Some(2);
        let a = compare(&s);
        assert_eq!(a.known_sentinels.len(), 1, "{:?}", a.known_sentinels);
        assert!(a.known_sentinels[0].ids.is_empty());
    }
}
