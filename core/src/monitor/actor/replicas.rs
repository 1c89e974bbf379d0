//! The replica list: what the sentinels report, kept as a sorted set, listed once a replica
//! answers from here, and not retired on a partial view.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::node;
use crate::sentinel::discovery::RoundSettings;
use crate::sentinel::links::Link;
use crate::sentinel::replies;
use crate::types::Address;
use crate::types::Role;

/// The service's replicas as the sentinel on `link` reports them.
pub(super) async fn ask(
    link: &Arc<Link>,
    settings: &RoundSettings,
) -> Result<Vec<replies::InstanceInfo>> {
    link.request_timeout(
        &["SENTINEL", "REPLICAS", settings.service.as_str()],
        settings.deadline,
    )
    .await
    .and_then(|v| replies::instances(v, "SENTINEL REPLICAS"))
}

/// Healthy replicas as reported, plus earlier replicas that the report does not show as down
/// (absent, or only `disconnected` because the sentinel has just created its entry) but that
/// still answer ROLE as replicas: a partial view must not retire a live node.
pub(super) async fn merge(
    settings: &RoundSettings,
    current: &[Address],
    primary: &Address,
    reported: Vec<replies::InstanceInfo>,
) -> Vec<Address> {
    let healthy: Vec<Address> = reported
        .iter()
        .filter(|r| !r.flags.is_unhealthy() && r.address != *primary)
        .map(|r| r.address.clone())
        .collect();
    // A replica reported healthy is listed once it answers from here: the sentinels may
    // reach it where this client cannot (NAT, an address only valid inside their network).
    let (mut next, new): (Vec<Address>, Vec<Address>) =
        healthy.iter().cloned().partition(|a| current.contains(a));
    for (address, live) in probe(settings, new).await {
        if live {
            next.push(address);
        } else {
            tracing::info!(replica = %address, "reported healthy but unreachable from here; not listed");
        }
    }
    let next_healthy = healthy;
    let uncertain: Vec<Address> = current
        .iter()
        .filter(|a| *a != primary && !next_healthy.contains(a))
        .filter(|a| {
            !reported
                .iter()
                .any(|r| r.address == **a && r.flags.is_down())
        })
        .cloned()
        .collect();
    for (address, live) in probe(settings, uncertain).await {
        if live {
            tracing::debug!(replica = %address, "kept: not reported healthy, but live");
            next.push(address);
        }
    }
    // A set, kept sorted: sentinels list replicas in orders of their own, and an order is
    // not a change.
    next.sort();
    next.dedup();
    next
}

/// Each of `addresses` with whether it answers ROLE as a replica, asked all at once.
async fn probe(settings: &RoundSettings, addresses: Vec<Address>) -> Vec<(Address, bool)> {
    let probes = addresses.into_iter().map(|address| async move {
        let live = is_live_replica(settings, &address).await;
        (address, live)
    });
    futures_util::future::join_all(probes).await
}

async fn is_live_replica(settings: &RoundSettings, address: &Address) -> bool {
    // Bounded like a sentinel answer: a blackholed replica must not hold up the round.
    let limit = settings
        .data_connect
        .connect_timeout
        .min(settings.deadline.max(Duration::from_millis(200)));
    let connected = tokio::time::timeout(
        limit,
        node::connect(&settings.resolver, address, &settings.data_connect),
    )
    .await;
    let Ok(Ok((conn, _))) = connected else {
        return false;
    };
    let role = conn
        .request_timeout(&["ROLE"], settings.data_connect.connect_timeout)
        .await
        .and_then(node::parse_role);
    conn.close();
    matches!(role, Ok(Role::Replica { .. }))
}
