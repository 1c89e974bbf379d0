//! Sentinel events: what each one means for the monitor, applied at once where that is safe.

use tokio::time::Instant;

use super::{Actor, DEDUPE_WINDOW, REPLICA_EVENT};
use crate::config::Address;
use crate::monitor::promotion::Announced;
use crate::monitor::subscriber::Received;
use crate::sentinel::events::{InstanceKind, SentinelEvent};

impl Actor {
    /// Applies what an event says at once where that is safe, and tells whether it calls for a
    /// round. Duplicates (the same text from several sentinels) are dropped.
    pub(super) fn on_sentinel_event(&mut self, received: Received) -> Option<&'static str> {
        let Received { from, raw, event } = received;
        // The subscription is shared with the monitors of other services on these sentinels.
        if event.service().is_some_and(|s| s != self.config.service) {
            return None;
        }
        // Several sentinels publish the same fact, sometimes with different trailing text
        // (`#quorum 2/2` and `#quorum 3/2`): the key leaves that text out.
        let key = match &event {
            SentinelEvent::Instance { event, instance } => {
                format!(
                    "{event} {:?} {} {}",
                    instance.kind, instance.name, instance.address
                )
            }
            // About the sentinel itself: the same text from two sentinels is two facts.
            SentinelEvent::Tilt { .. } => format!("{from} {raw}"),
            _ => raw.clone(),
        };
        let now = Instant::now();
        while self
            .recent
            .front()
            .is_some_and(|(_, t)| now.duration_since(*t) > DEDUPE_WINDOW)
        {
            self.recent.pop_front();
        }
        if self.recent.iter().any(|(r, _)| *r == key) {
            return None;
        }
        self.recent.push_back((key, now));
        tracing::debug!(event = %raw, "sentinel event");
        let is_primary = |a: &Address| self.primary.as_ref() == Some(a);
        match event {
            SentinelEvent::SwitchMaster { new, .. } => {
                if is_primary(&new) && self.healthy {
                    // A sentinel caught up with a switch made on an announcement: one round
                    // now reads the new epoch, replicas and peers from the sentinels.
                    return (!self.confirmed).then_some("+switch-master");
                }
                // The announced address is verified with ROLE and adopted as soon as it answers
                // master (a round now could still hear the old primary from sentinels that have
                // not switched yet); meanwhile no write goes to the old one.
                match self.primary.clone() {
                    Some(primary) if primary != new => {
                        self.start_fence(new, Some(primary), Announced::Switch)
                    }
                    _ => self.watch_promotion(new, Announced::Switch, self.cancel.child_token()),
                }
                None
            }
            SentinelEvent::Instance { event, instance }
                if event == "+failover-state-send-slaveof-noone" =>
            {
                self.start_fence(instance.address, instance.master, Announced::Promotion);
                None
            }
            SentinelEvent::Instance { event, instance }
                if event == "-failover-abort-slave-timeout"
                    || event == "-failover-abort-no-good-slave" =>
            {
                let ours = self
                    .fence
                    .as_ref()
                    .is_some_and(|f| f.old == instance.address);
                if ours {
                    tracing::warn!(primary = %instance.address, event = %event, "failover aborted; writes resume");
                    self.lift_fence();
                    self.publish();
                }
                ours.then_some("failover aborted")
            }
            SentinelEvent::Instance { event, .. } if event == "-failover-abort-not-elected" => None,
            SentinelEvent::Instance { event, instance } if event == "+sentinel" => {
                if self
                    .list
                    .learn(instance.address.clone(), Some(instance.name.clone()), false)
                {
                    tracing::info!(sentinel = %instance.address, "sentinel learned from +sentinel");
                    self.sentinels_changed();
                }
                None
            }
            // About the master itself, only what can change the answer: going down while we think
            // it healthy, coming back while we don't. Confirmations of a state already known (a
            // second +odown, -odown after the switch, +failover-end for a primary already left)
            // would each cost a round and tell nothing new; the retry schedule covers the rest.
            SentinelEvent::Instance { event, instance }
                if instance.kind == InstanceKind::Master =>
            {
                match event.as_str() {
                    "+sdown" | "+odown" => (self.healthy && is_primary(&instance.address))
                        .then_some("primary reported down"),
                    "-sdown" | "-odown" => (!self.healthy).then_some("primary reported up"),
                    "+failover-end" => is_primary(&instance.address).then_some("+failover-end"),
                    _ => Some("sentinel event"),
                }
            }
            SentinelEvent::Instance { .. } => Some(REPLICA_EVENT),
            SentinelEvent::Tilt { entered } => {
                if let Some(id) = self.list.find(&from) {
                    self.sentinel_tilt(id, entered, Instant::now().into_std(), true);
                    self.publish();
                }
                None
            }
        }
    }
}
