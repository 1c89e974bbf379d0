//! The data nodes the sentinels report: the primary most of them name, every replica they list
//! for it, and the other primaries a minority names (ROLE only). Each is reached from here with
//! the data-node credentials and asked `ROLE` and `INFO replication`; the sentinels' view of each
//! replica (flags, link, priority, offset) is merged in, and promotability judged as a sentinel
//! would: priority 0, `s_down`/`o_down`, `disconnected` or a broken link rule a replica out.

use std::net::SocketAddr;

use futures_util::future::join_all;

use super::fields;
use super::findings::{unreachable_hint, Findings};
use super::options::Ctx;
use super::probe::note;
use super::reach::{self, Reached};
use super::report::{Agreement, Mode, NodeKind, NodeReport, SentinelReport, Severity, Stage};
use crate::node::parse_role;
use crate::types::Address;
use crate::types::Role;

/// One node reached and asked.
struct Asked {
    /// Where it was probed when `address_map` maps it.
    mapped: Option<Address>,
    reached: Reached,
    role: Option<Role>,
    info: Option<String>,
    notes: Vec<String>,
}

async fn ask(ctx: &Ctx, address: &Address, with_info: bool) -> Asked {
    let target = ctx.setup.address_map.apply(address);
    let reached = reach::reach(&ctx.setup.resolver, &target, &ctx.setup.data).await;
    let mut asked = Asked {
        mapped: target
            .announced
            .is_some()
            .then(|| Address::new(target.host.clone(), target.port)),
        reached,
        role: None,
        info: None,
        notes: Vec::new(),
    };
    let Some(conn) = asked.reached.conn.take() else {
        return asked;
    };
    let timeout = ctx.reply_timeout;
    let (role, info) = tokio::join!(conn.request_timeout(&["ROLE"], timeout), async {
        if with_info {
            Some(
                conn.request_timeout(&["INFO", "replication"], timeout)
                    .await,
            )
        } else {
            None
        }
    });
    match role.and_then(parse_role) {
        Ok(role) => asked.role = Some(role),
        Err(e) => asked.notes.push(note("ROLE", &e)),
    }
    match info {
        Some(Ok(v)) => asked.info = v.as_str().map(String::from),
        Some(Err(e)) => asked.notes.push(note("INFO replication", &e)),
        None => {}
    }
    conn.close();
    asked
}

fn role_name(role: &Option<Role>) -> Option<String> {
    role.as_ref().map(|r| match r {
        Role::Master => "master".to_string(),
        Role::Replica { .. } => "slave".to_string(),
        Role::Other(name) => name.clone(),
    })
}

/// Probes the data nodes; fills in `agreement.primaries[..].role` on the way.
pub(super) async fn probe(
    ctx: &Ctx,
    sentinels: &[SentinelReport],
    agreement: &mut Agreement,
) -> Vec<NodeReport> {
    let Some(primary) = agreement.primaries.first().map(|c| c.address.clone()) else {
        return Vec::new();
    };
    // The replicas of the consensus primary, as every sentinel naming it lists them.
    let naming: Vec<&SentinelReport> = sentinels
        .iter()
        .filter(|s| s.master.as_ref().is_some_and(|m| m.address == primary))
        .collect();
    let mut replicas: Vec<Address> = Vec::new();
    for s in &naming {
        for r in &s.replicas {
            if !replicas.contains(&r.address) {
                replicas.push(r.address.clone());
            }
        }
    }
    let others: Vec<Address> = agreement
        .primaries
        .iter()
        .skip(1)
        .map(|c| c.address.clone())
        .filter(|a| *a != primary)
        .collect();

    let (primary_asked, replicas_asked, others_asked) = tokio::join!(
        ask(ctx, &primary, true),
        join_all(replicas.iter().map(|a| ask(ctx, a, true))),
        join_all(others.iter().map(|a| ask(ctx, a, false))),
    );

    for claim in agreement.primaries.iter_mut() {
        if claim.address == primary {
            claim.role = role_name(&primary_asked.role);
        } else if let Some(i) = others.iter().position(|a| *a == claim.address) {
            claim.role = role_name(&others_asked[i].role);
        }
    }

    let primary_report = primary_node(&primary, &naming, primary_asked);
    let primary_offset = primary_report.repl_offset;
    let primary_ips: Vec<SocketAddr> = primary_report
        .reach
        .addresses
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect();
    let mut nodes = vec![primary_report];
    for (address, asked) in replicas.iter().zip(replicas_asked) {
        nodes.push(replica_node(
            address,
            &naming,
            asked,
            &primary,
            &primary_ips,
            primary_offset,
        ));
    }
    nodes
}

fn blank(address: &Address, kind: NodeKind, asked: &mut Asked) -> NodeReport {
    NodeReport {
        address: address.clone(),
        mapped: asked.mapped.take(),
        kind,
        named_by: Vec::new(),
        sentinel_flags: Vec::new(),
        reach: std::mem::take(&mut asked.reached.reach),
        role: role_name(&asked.role),
        replicates_from: None,
        role_ok: None,
        link_status: None,
        sentinel_link_status: None,
        repl_offset: None,
        lag_bytes: None,
        priority: None,
        promotable: None,
        not_promotable_because: Vec::new(),
        connected_replicas: None,
        notes: std::mem::take(&mut asked.notes),
    }
}

fn primary_node(address: &Address, naming: &[&SentinelReport], mut asked: Asked) -> NodeReport {
    let mut node = blank(address, NodeKind::Primary, &mut asked);
    node.named_by = naming.iter().map(|s| s.address.clone()).collect();
    for s in naming {
        for flag in s.master.iter().flat_map(|m| m.flags.iter()) {
            if !node.sentinel_flags.contains(flag) {
                node.sentinel_flags.push(flag.clone());
            }
        }
    }
    node.role_ok = asked.role.as_ref().map(|r| *r == Role::Master);
    if let Some(info) = &asked.info {
        node.repl_offset = fields::info_num(info, "master_repl_offset");
        node.connected_replicas = fields::info_num(info, "connected_slaves");
    }
    node
}

fn replica_node(
    address: &Address,
    naming: &[&SentinelReport],
    mut asked: Asked,
    primary: &Address,
    primary_ips: &[SocketAddr],
    primary_offset: Option<i64>,
) -> NodeReport {
    let mut node = blank(address, NodeKind::Replica, &mut asked);
    let mut sentinel_priority: Option<i64> = None;
    let mut sentinel_offset: Option<i64> = None;
    for s in naming {
        let Some(view) = s.replicas.iter().find(|r| r.address == *address) else {
            continue;
        };
        node.named_by.push(s.address.clone());
        for flag in &view.flags {
            if !node.sentinel_flags.contains(flag) {
                node.sentinel_flags.push(flag.clone());
            }
        }
        match view.master_link_status.as_deref() {
            Some("ok") if node.sentinel_link_status.is_none() => {
                node.sentinel_link_status = Some("ok".into())
            }
            Some(status) if status != "ok" => node.sentinel_link_status = Some(status.into()),
            _ => {}
        }
        if let Some(p) = view.priority {
            sentinel_priority = Some(sentinel_priority.map_or(p, |q: i64| q.min(p)));
        }
        if let Some(o) = view.repl_offset {
            sentinel_offset = Some(sentinel_offset.map_or(o, |q: i64| q.max(o)));
        }
    }
    if let Some(Role::Replica { master }) = &asked.role {
        node.replicates_from = master.clone();
        node.role_ok = Some(master.as_ref().is_some_and(|m| {
            m.port == primary.port
                && (m.host == primary.host
                    || primary_ips.iter().any(|ip| ip.ip().to_string() == m.host))
        }));
    } else if asked.role.is_some() {
        node.role_ok = Some(false);
    }
    let mut info_priority = None;
    if let Some(info) = &asked.info {
        node.link_status = fields::info_field(info, "master_link_status").map(String::from);
        node.repl_offset = fields::info_num(info, "slave_repl_offset");
        info_priority = fields::info_num::<i64>(info, "slave_priority")
            .or_else(|| fields::info_num(info, "replica_priority"));
    }
    node.priority = info_priority.or(sentinel_priority);
    let offset = node.repl_offset.or(sentinel_offset);
    if node.repl_offset.is_none() {
        node.repl_offset = sentinel_offset;
    }
    node.lag_bytes = match (primary_offset, offset) {
        (Some(p), Some(r)) => Some((p - r).max(0)),
        _ => None,
    };

    let mut why = Vec::new();
    // The sentinels decide with the priority they read from the replica's INFO.
    let decisive_priority = sentinel_priority.or(info_priority);
    if decisive_priority == Some(0) {
        why.push("replica-priority 0".to_string());
    }
    for flag in ["s_down", "o_down", "disconnected"] {
        if node.sentinel_flags.iter().any(|f| f == flag) {
            why.push(format!("sentinels flag it {flag}"));
        }
    }
    if node
        .sentinel_link_status
        .as_deref()
        .is_some_and(|s| s != "ok")
        || node.link_status.as_deref().is_some_and(|s| s != "up")
    {
        why.push("replication link down".to_string());
    }
    node.promotable = Some(why.is_empty());
    node.not_promotable_because = why;
    node
}

/// A replica this far behind is reported.
const LAG_BYTES: i64 = 1 << 20;

pub(super) fn judge_node(f: &mut Findings, n: &NodeReport) {
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

pub(super) fn judge_promotable(f: &mut Findings, nodes: &[NodeReport]) {
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
