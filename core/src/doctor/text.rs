//! The human form of a report: a short table per sentinel, the agreement, quorum, data node,
//! timing and name lines, then the verdict with its findings and a hint for each.

use std::fmt::Write;

use super::report::{
    Auth, NodeKind, NodeReport, Reach, Report, SentinelReport, Severity, Source, Stage, Status,
};

impl Report {
    /// The human-readable report (what `sentinel-recovery doctor` prints). Contains no secret.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "doctor: service '{}' via {} ({} ms)",
            self.service, self.url, self.duration_ms
        );
        for s in &self.sentinels {
            out.push('\n');
            sentinel(&mut out, s);
        }
        out.push('\n');
        agreement(&mut out, self);
        let _ = writeln!(out, "quorum      {}", self.quorum.summary);
        data_nodes(&mut out, &self.data_nodes);
        let t = &self.timing;
        match (t.expected_failover_ms, t.down_after_ms) {
            (Some(total), Some(down)) => {
                let _ = writeln!(
                    out,
                    "timing      expected failover ≈ {} (down-after {down} ms + election ≈ {} \
                     ms); failover-timeout {}",
                    seconds(total),
                    t.election_estimate_ms,
                    t.failover_timeout_ms
                        .map_or("?".to_string(), |f| format!("{f} ms"))
                );
            }
            _ => {
                let _ = writeln!(out, "timing      unknown (no sentinel view)");
            }
        }
        if self.names.is_empty() {
            let _ = writeln!(out, "names       none: every address is an IP literal");
        } else {
            for n in &self.names {
                let resolved = match (&n.resolve_ms, &n.error) {
                    (Some(ms), _) => format!("{ms} ms -> {}", n.addresses.join(", ")),
                    (None, Some(e)) => format!("FAILED: {}", e.message),
                    (None, None) => "not resolved".into(),
                };
                let role = match n.role_ok {
                    Some(true) => ", ROLE as expected",
                    Some(false) => ", ROLE NOT as expected",
                    None => "",
                };
                let _ = writeln!(
                    out,
                    "name        {} ({}): {resolved}{role}",
                    n.host,
                    n.reported_as.join(", ")
                );
            }
        }
        out.push('\n');
        verdict(&mut out, self);
        out
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn reach_line(r: &Reach) -> String {
    let mut parts = Vec::new();
    if r.ip_literal {
        parts.push("IP literal".to_string());
    } else if let Some(ms) = r.resolve_ms {
        parts.push(format!("resolve {ms} ms"));
    }
    if let Some(ms) = r.tcp_connect_ms {
        parts.push(format!("tcp {ms} ms"));
    }
    if let Some(ms) = r.connect_ms {
        parts.push(format!("connect+handshake {ms} ms"));
    }
    if let Some(days) = r.tls_days_left {
        parts.push(format!("certificate expires in {days} day(s)"));
    }
    if let Some(note) = &r.tls_note {
        parts.push(format!("certificate expiry unknown: {note}"));
    }
    if let (Some(stage), Some(e)) = (r.failed_at, &r.error) {
        let at = match stage {
            Stage::Resolve => "resolve",
            Stage::Tcp => "tcp",
            Stage::Handshake => "handshake",
        };
        parts.push(format!("FAILED at {at}: {}", e.message));
    }
    parts.join(", ")
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "?",
    }
}

fn sentinel(out: &mut String, s: &SentinelReport) {
    let source = match s.source {
        Source::Configured => "configured",
        Source::Learned => "learned",
    };
    let _ = writeln!(out, "sentinel {} ({source})", s.address);
    let auth = match s.auth {
        Auth::None => "none configured",
        Auth::Ok => "accepted",
        Auth::Refused => "REFUSED",
        Auth::Unknown => "not reached",
    };
    let _ = writeln!(out, "  reach     {}", reach_line(&s.reach));
    let _ = writeln!(out, "  auth      {auth}");
    if !s.reach.connected() {
        return;
    }
    if let Some(p) = &s.ping {
        let _ = writeln!(
            out,
            "  ping      median {} ms, max {} ms ({} PINGs)",
            p.median_ms, p.max_ms, p.samples
        );
    }
    let tilt = match (s.tilt, s.tilt_since_seconds) {
        (Some(true), Some(n)) if n >= 0 => format!("YES, for {n} s"),
        (Some(true), _) => "YES".to_string(),
        (Some(false), _) => "no".to_string(),
        (None, _) => "?".to_string(),
    };
    let _ = writeln!(out, "  tilt      {tilt}");
    match (&s.master, s.knows_service) {
        (Some(m), _) => {
            let num = |v: Option<u32>| v.map_or("?".to_string(), |n| n.to_string());
            let num64 = |v: Option<u64>| v.map_or("?".to_string(), |n| n.to_string());
            let _ = writeln!(
                out,
                "  primary   {} flags={} epoch={} quorum={}",
                m.address,
                if m.flags.is_empty() {
                    "?".to_string()
                } else {
                    m.flags.join(",")
                },
                num64(m.config_epoch),
                num(m.quorum)
            );
            let _ = writeln!(
                out,
                "  settings  down-after={} ms failover-timeout={} ms parallel-syncs={} \
                 other-sentinels={} replicas={}",
                num64(m.down_after_ms),
                num64(m.failover_timeout_ms),
                num(m.parallel_syncs),
                num(m.num_other_sentinels),
                num(m.num_slaves)
            );
        }
        (None, Some(false)) => {
            let _ = writeln!(out, "  primary   UNKNOWN SERVICE");
        }
        (None, _) => {}
    }
    let _ = writeln!(
        out,
        "  hostnames resolve={} announce={}",
        yes_no(s.resolve_hostnames),
        yes_no(s.announce_hostnames)
    );
    if let Some(ck) = &s.ckquorum {
        let _ = writeln!(
            out,
            "  ckquorum  {} ({} usable)",
            if ck.ok { "OK" } else { "NOQUORUM" },
            ck.usable.map_or("?".to_string(), |n| n.to_string())
        );
    }
    if let Some(w) = &s.watch {
        let _ = writeln!(
            out,
            "  watch     {} PINGs in {} s: max gap {} ms, max rtt {} ms, {} stalls > 500 ms, \
             {} unanswered",
            w.samples,
            w.seconds,
            w.max_gap_ms,
            w.max_rtt_ms.map_or("?".to_string(), |m| m.to_string()),
            w.stalls,
            w.failed
        );
    }
    for n in &s.notes {
        let _ = writeln!(out, "  note      {n}");
    }
}

fn agreement(out: &mut String, r: &Report) {
    let a = &r.agreement;
    match a.primaries.as_slice() {
        [] => {
            let _ = writeln!(out, "agreement   no sentinel named a primary");
        }
        [one] if a.agree => {
            let _ = writeln!(
                out,
                "agreement   {} sentinel(s) name {} (epoch {}); down-after, quorum and known \
                 sentinels agree",
                one.sentinels.len(),
                one.address,
                one.config_epoch.map_or("?".into(), |e| e.to_string())
            );
        }
        claims => {
            for c in claims {
                let who: Vec<String> = c.sentinels.iter().map(|s| s.to_string()).collect();
                let _ = writeln!(
                    out,
                    "agreement   {} (epoch {}{}) named by {}",
                    c.address,
                    c.config_epoch.map_or("?".into(), |e| e.to_string()),
                    c.role
                        .as_ref()
                        .map(|r| format!(", ROLE {r}"))
                        .unwrap_or_default(),
                    who.join(", ")
                );
            }
            if a.down_after_ms.len() > 1 || a.quorum.len() > 1 || a.known_sentinels.len() > 1 {
                let _ = writeln!(
                    out,
                    "agreement   settings or known sentinels differ (see findings)"
                );
            }
        }
    }
}

fn data_nodes(out: &mut String, nodes: &[NodeReport]) {
    for n in nodes {
        let mut parts = Vec::new();
        if let Some(role) = &n.role {
            parts.push(format!("ROLE {role}"));
        }
        match n.kind {
            NodeKind::Primary => {
                if let Some(o) = n.repl_offset {
                    parts.push(format!("offset {o}"));
                }
                if let Some(c) = n.connected_replicas {
                    parts.push(format!("{c} replica(s) connected"));
                }
            }
            NodeKind::Replica => {
                if let Some(link) = n.link_status.as_ref().or(n.sentinel_link_status.as_ref()) {
                    parts.push(format!("link {link}"));
                }
                if let Some(lag) = n.lag_bytes {
                    parts.push(format!("lag {lag} B"));
                }
                if let Some(p) = n.priority {
                    parts.push(format!("priority {p}"));
                }
                match n.promotable {
                    Some(true) => parts.push("promotable".into()),
                    Some(false) => parts.push(format!(
                        "NOT promotable ({})",
                        n.not_promotable_because.join(", ")
                    )),
                    None => {}
                }
            }
        }
        if n.reach.failed_at.is_some() || n.reach.connect_ms.is_none() {
            parts.push(reach_line(&n.reach));
        } else if let Some(ms) = n.reach.connect_ms {
            parts.push(format!("connect {ms} ms"));
        }
        let kind = match n.kind {
            NodeKind::Primary => "primary",
            NodeKind::Replica => "replica",
        };
        let shown = match &n.mapped {
            Some(to) => format!("{} (address_map -> {to})", n.address),
            None => n.address.to_string(),
        };
        let _ = writeln!(out, "{kind:<11} {shown}: {}", parts.join(", "));
    }
}

fn verdict(out: &mut String, r: &Report) {
    let status = match r.verdict.status {
        Status::Healthy => "HEALTHY",
        Status::Warning => "WARNING",
        Status::Failure => "FAILURE",
    };
    let _ = writeln!(out, "verdict: {status} — {}", r.verdict.headline);
    let mut last_hint = None;
    for f in &r.findings {
        let mark = match f.severity {
            Severity::Failure => "✗",
            Severity::Warning => "!",
        };
        let _ = writeln!(out, "  {mark} [{}] {}", f.mode.name(), f.message);
        if last_hint != Some(&f.hint) {
            let _ = writeln!(out, "    hint: {}", f.hint);
            last_hint = Some(&f.hint);
        }
    }
    if r.findings.is_empty() {
        let _ = writeln!(out, "  nothing to fix");
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{report, sentinel};
    use super::super::report::Problem;

    #[test]
    fn text_has_a_table_per_sentinel_and_the_verdict() {
        let mut s = vec![
            sentinel(1, 6379, 0, &["id2"]),
            sentinel(2, 6379, 0, &["id1"]),
        ];
        s[1].reach.connect_ms = None;
        s[1].reach.failed_at = Some(super::Stage::Handshake);
        s[1].reach.error = Some(Problem {
            code: "auth".into(),
            message: "WRONGPASS invalid username-password pair".into(),
        });
        s[1].auth = super::Auth::Refused;
        s[1].knows_service = None;
        s[1].master = None;
        let mut r = report(s);
        super::super::verdict::assess(&mut r, std::time::Duration::from_millis(100));
        let text = r.to_text();
        assert!(text.contains("sentinel 127.0.0.1:1 (configured)"), "{text}");
        assert!(text.contains("  primary   127.0.0.1:6379 flags=master epoch=0 quorum=2"));
        assert!(text.contains("FAILED at handshake: WRONGPASS"), "{text}");
        assert!(text.contains("  auth      REFUSED"), "{text}");
        assert!(
            text.contains("verdict: FAILURE — sentinels unreachable or refusing access"),
            "{text}"
        );
        assert!(text.contains("    hint: check sentinel_user"), "{text}");
        // Nothing answered at all: still a report.
        let empty = report(Vec::new()).to_text();
        assert!(empty.contains("no sentinel named a primary"), "{empty}");
    }
}
