//! The replica list: what the sentinels report, kept as a sorted set, listed once a replica
//! answers from here, and not retired on a partial view.

use std::time::Duration;

use super::Actor;
use crate::config::Address;
use crate::node;
use crate::node::parse_role;
use crate::sentinel::replies;
use crate::types::EventKind;
use crate::types::Role;

impl Actor {
    /// Re-reads the replica list from one sentinel that answered in the last round. Returns
    /// false when no sentinel could be asked, so the caller falls back to a full round.
    pub(super) async fn refresh_replicas(&mut self) -> bool {
        let Some(primary) = self.primary.clone() else {
            return false;
        };
        let Some(conn) = self.links.values().find(|c| !c.is_closed()).cloned() else {
            return false;
        };
        let reply = conn
            .request_timeout(
                &["SENTINEL", "REPLICAS", self.config.service.as_str()],
                self.settings.deadline,
            )
            .await
            .and_then(|v| replies::instances(v, "SENTINEL REPLICAS"));
        let Ok(reported) = reply else { return false };
        let next = self.merge_replicas(&primary, reported).await;
        if next != self.replicas {
            self.replicas = next;
            tracing::info!(replicas = ?self.replicas.iter().map(|a| a.to_string()).collect::<Vec<_>>(), "replicas changed");
            self.emit(EventKind::ReplicasChanged {
                replicas: self.replicas.clone(),
            });
            self.publish();
        }
        true
    }

    /// Healthy replicas as reported, plus earlier replicas that the report does not show as down
    /// (absent, or only `disconnected` because the sentinel has just created its entry) but that
    /// still answer ROLE as replicas: a partial view must not retire a live node.
    pub(super) async fn merge_replicas(
        &self,
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
        let (mut next, new): (Vec<Address>, Vec<Address>) = healthy
            .iter()
            .cloned()
            .partition(|a| self.replicas.contains(a));
        let probes = new.into_iter().map(|address| async move {
            let live = self.is_live_replica(&address).await;
            (address, live)
        });
        for (address, live) in futures_util::future::join_all(probes).await {
            if live {
                next.push(address);
            } else {
                tracing::info!(replica = %address, "reported healthy but unreachable from here; not listed");
            }
        }
        let next_healthy = healthy;
        let uncertain: Vec<Address> = self
            .replicas
            .iter()
            .filter(|a| *a != primary && !next_healthy.contains(a))
            .filter(|a| {
                !reported
                    .iter()
                    .any(|r| r.address == **a && r.flags.is_down())
            })
            .cloned()
            .collect();
        let probes = uncertain.into_iter().map(|address| async move {
            let live = self.is_live_replica(&address).await;
            (address, live)
        });
        for (address, live) in futures_util::future::join_all(probes).await {
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

    pub(super) async fn is_live_replica(&self, address: &Address) -> bool {
        // Bounded like a sentinel answer: a blackholed replica must not hold up the round.
        let limit = self
            .settings
            .data_connect
            .connect_timeout
            .min(self.settings.deadline.max(Duration::from_millis(200)));
        let connected = tokio::time::timeout(
            limit,
            node::connect(
                &self.settings.resolver,
                address,
                &self.settings.data_connect,
            ),
        )
        .await;
        let Ok(Ok((conn, _))) = connected else {
            return false;
        };
        let role = conn
            .request_timeout(&["ROLE"], self.settings.data_connect.connect_timeout)
            .await
            .and_then(parse_role);
        conn.close();
        matches!(role, Ok(Role::Replica { .. }))
    }
}
