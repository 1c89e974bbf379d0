//! Host names: every name configured or reported (sentinels, primary, replicas), how long it took
//! to resolve from here and whether its addresses answered ROLE as the role it is reported with.
//! IP literals are left out: they involve no resolver.

use std::time::Duration;

use super::findings::Findings;
use super::report::{
    Mode, NameReport, NodeKind, NodeReport, Reach, Report, SentinelReport, Severity,
};

struct Use<'a> {
    host: &'a str,
    port: u16,
    as_what: &'static str,
    reach: &'a Reach,
    role_ok: Option<bool>,
}

/// Collects the names, one entry per host.
pub(super) fn collect(sentinels: &[SentinelReport], nodes: &[NodeReport]) -> Vec<NameReport> {
    let uses = sentinels
        .iter()
        .map(|s| Use {
            host: &s.address.host,
            port: s.address.port,
            as_what: "sentinel",
            reach: &s.reach,
            role_ok: s.role.as_ref().map(|r| r == "sentinel"),
        })
        .chain(nodes.iter().map(|n| Use {
            host: &n.address.host,
            port: n.address.port,
            as_what: match n.kind {
                NodeKind::Primary => "primary",
                NodeKind::Replica => "replica",
            },
            reach: &n.reach,
            role_ok: n.role_ok,
        }));
    let mut names: Vec<NameReport> = Vec::new();
    for u in uses.filter(|u| !u.reach.ip_literal) {
        let i = match names.iter().position(|n| n.host == u.host) {
            Some(i) => i,
            None => {
                names.push(NameReport {
                    host: u.host.to_string(),
                    ports: Vec::new(),
                    reported_as: Vec::new(),
                    resolve_ms: None,
                    addresses: Vec::new(),
                    error: None,
                    role_ok: None,
                });
                names.len() - 1
            }
        };
        let name = &mut names[i];
        if !name.ports.contains(&u.port) {
            name.ports.push(u.port);
        }
        if !name.reported_as.iter().any(|r| r == u.as_what) {
            name.reported_as.push(u.as_what.to_string());
        }
        // The slowest lookup is the one that matters (later ones may be cache hits).
        if let Some(ms) = u.reach.resolve_ms {
            name.resolve_ms = Some(name.resolve_ms.map_or(ms, |m: f64| m.max(ms)));
        }
        for a in &u.reach.addresses {
            let ip = a.rsplit_once(':').map_or(a.as_str(), |(ip, _)| ip);
            let ip = ip.trim_start_matches('[').trim_end_matches(']');
            if !name.addresses.iter().any(|x| x == ip) {
                name.addresses.push(ip.to_string());
            }
        }
        if u.reach.resolve_ms.is_none() && name.error.is_none() {
            name.error = u.reach.error.clone();
        }
        name.role_ok = match (name.role_ok, u.role_ok) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), _) | (_, Some(true)) => Some(true),
            _ => None,
        };
    }
    names
}

pub(super) fn judge(f: &mut Findings, report: &Report, slow: Duration) {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::sentinel;
    use super::*;
    use crate::types::Address;

    #[test]
    fn names_are_grouped_and_ip_literals_left_out() {
        let mut a = sentinel(1, 6379, 0, &[]);
        a.address = Address::new("s.example", 26379);
        a.reach.ip_literal = false;
        a.reach.resolve_ms = Some(3001.5);
        a.reach.addresses = vec!["127.0.0.1:26379".into()];
        let mut b = sentinel(2, 6379, 0, &[]);
        b.address = Address::new("s.example", 26380);
        b.reach.ip_literal = false;
        b.reach.resolve_ms = Some(0.1);
        b.reach.addresses = vec!["127.0.0.1:26380".into()];
        let mut c = sentinel(3, 6379, 0, &[]);
        c.reach.ip_literal = true;
        let names = collect(&[a, b, c], &[]);
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].ports, [26379, 26380]);
        assert_eq!(names[0].resolve_ms, Some(3001.5));
        assert_eq!(names[0].addresses, ["127.0.0.1"]);
        assert_eq!(names[0].role_ok, Some(true));
    }
}
