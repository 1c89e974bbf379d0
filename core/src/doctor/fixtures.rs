//! Reports built by hand, for the unit tests of the pure steps.

use super::report::{Auth, MasterView, PeerView, Reach, SentinelReport, Source};
use crate::types::Address;

/// A healthy sentinel on 127.0.0.1:`port` naming 127.0.0.1:`primary` with `epoch`, knowing the
/// sentinels with run ids `peers` (its own run id is `id<port>`).
pub(super) fn sentinel(port: u16, primary: u16, epoch: u64, peers: &[&str]) -> SentinelReport {
    SentinelReport {
        address: Address::new("127.0.0.1", port),
        mapped: None,
        source: Source::Configured,
        reach: Reach {
            connect_ms: Some(1.0),
            ..Reach::default()
        },
        auth: Auth::None,
        run_id: Some(format!("id{port}")),
        role: Some("sentinel".into()),
        ping: None,
        tilt: Some(false),
        tilt_since_seconds: None,
        knows_service: Some(true),
        master: Some(MasterView {
            address: Address::new("127.0.0.1", primary),
            flags: vec!["master".into()],
            config_epoch: Some(epoch),
            quorum: Some(2),
            down_after_ms: Some(1000),
            failover_timeout_ms: Some(3000),
            parallel_syncs: Some(1),
            num_other_sentinels: Some(peers.len() as u32),
            num_slaves: Some(1),
            failover_state: None,
        }),
        resolve_hostnames: Some(false),
        announce_hostnames: Some(false),
        ckquorum: None,
        replicas: Vec::new(),
        sentinels: peers
            .iter()
            .map(|id| PeerView {
                address: Address::new("127.0.0.1", 1),
                flags: vec!["sentinel".into()],
                run_id: Some(id.to_string()),
            })
            .collect(),
        watch: None,
        notes: Vec::new(),
    }
}

/// A report over `sentinels` with the agreement, quorum, names and timing computed from them,
/// no data nodes, findings and verdict not yet assessed.
pub(super) fn report(sentinels: Vec<SentinelReport>) -> super::report::Report {
    use super::report::{Report, Status, Verdict, SCHEMA_VERSION};
    let agreement = super::agreement::compare(&sentinels);
    let primary = agreement.primaries.first().map(|c| c.address.clone());
    Report {
        schema: SCHEMA_VERSION,
        service: "mymaster".into(),
        url: "redis+sentinel://127.0.0.1:1/mymaster".into(),
        started_at_ms: 0,
        duration_ms: 0.0,
        verdict: Verdict {
            status: Status::Healthy,
            exit_code: 0,
            headline: String::new(),
            modes: Vec::new(),
        },
        findings: Vec::new(),
        quorum: super::quorum::assess(&sentinels, primary.as_ref()),
        names: super::names::collect(&sentinels, &[]),
        timing: super::timing::expected(&sentinels, None),
        agreement,
        sentinels,
        data_nodes: Vec::new(),
    }
}

/// A healthy data node on 127.0.0.1:`port`.
pub(super) fn node(kind: super::report::NodeKind, port: u16) -> super::report::NodeReport {
    use super::report::{NodeKind, NodeReport};
    let replica = kind == NodeKind::Replica;
    NodeReport {
        address: Address::new("127.0.0.1", port),
        mapped: None,
        kind,
        named_by: vec![Address::new("127.0.0.1", 1)],
        sentinel_flags: vec![if replica { "slave" } else { "master" }.into()],
        reach: Reach {
            ip_literal: true,
            resolve_ms: Some(0.0),
            connect_ms: Some(1.0),
            ..Reach::default()
        },
        role: Some(if replica { "slave" } else { "master" }.into()),
        replicates_from: replica.then(|| Address::new("127.0.0.1", 6379)),
        role_ok: Some(true),
        link_status: replica.then(|| "up".into()),
        sentinel_link_status: replica.then(|| "ok".into()),
        repl_offset: Some(100),
        lag_bytes: replica.then_some(0),
        priority: replica.then_some(100),
        promotable: replica.then_some(true),
        not_promotable_because: Vec::new(),
        connected_replicas: (!replica).then_some(1),
        notes: Vec::new(),
    }
}
