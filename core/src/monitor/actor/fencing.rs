//! Fencing at promotion: writes stop going to a primary being demoted, the promoted replica is
//! watched with ROLE and adopted the moment it answers master; replaced primaries stay fenced.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::fence::{Fence, Retired, PROMOTION_TIMEOUT};
use super::Actor;
use crate::config::Address;
use crate::monitor::promotion;
use crate::monitor::promotion::{Announced, Promoted};
use crate::monitor::status::Fenced;
use crate::resp::Connection;
use crate::types::EventKind;

impl Actor {
    /// A failover replaces `old` by `promoting` (the leader started promoting it, or a sentinel
    /// announced the switch): writes to the old primary stop (they wait within their deadlines)
    /// until `promoting` answers ROLE master, the failover aborts, or the watch gives up.
    pub(super) fn start_fence(
        &mut self,
        promoting: Address,
        old: Option<Address>,
        announced: Announced,
    ) {
        let Some(primary) = self.primary.clone() else {
            return;
        };
        if old.as_ref() != Some(&primary) || promoting == primary {
            return;
        }
        if self
            .fence
            .as_ref()
            .is_some_and(|f| f.promoting == promoting)
        {
            return;
        }
        let since = self.fence.as_ref().map_or_else(Instant::now, |f| f.since);
        self.lift_fence();
        let cancel = self.cancel.child_token();
        tracing::info!(primary = %primary, promoting = %promoting, ?announced, "failover: writes fenced");
        self.fence = Some(Fence {
            old: primary.clone(),
            promoting: promoting.clone(),
            since,
            cancel: cancel.clone(),
        });
        if announced == Announced::Promotion {
            self.emit(EventKind::FailoverStarted {
                primary,
                promoting: promoting.clone(),
            });
        }
        self.publish();
        self.watch_promotion(promoting, announced, cancel);
    }

    pub(super) fn lift_fence(&mut self) {
        if let Some(fence) = self.fence.take() {
            fence.cancel.cancel();
        }
    }

    /// Verifies `address` with ROLE in the background; [`Actor::on_promoted`] adopts it.
    pub(super) fn watch_promotion(
        &mut self,
        address: Address,
        announced: Announced,
        cancel: CancellationToken,
    ) {
        let until = Instant::now()
            + match announced {
                Announced::Promotion => PROMOTION_TIMEOUT,
                Announced::Switch => self.settings.deadline.max(Duration::from_secs(1)),
            };
        self.tracker.spawn(promotion::watch(
            self.settings.clone(),
            address,
            announced,
            until,
            cancel,
            self.promotions_tx.clone(),
        ));
    }

    /// The end of a promotion watch: switch to the node if it answered master; otherwise lift
    /// the fence (the failover did not happen in time) or fall back to a round.
    pub(super) fn on_promoted(&mut self, promoted: Promoted) -> Option<&'static str> {
        let Promoted {
            address,
            announced,
            outcome,
        } = promoted;
        let fenced_for = self.fence.as_ref().is_some_and(|f| f.promoting == address);
        match outcome {
            Ok(conn) if self.primary.as_ref() == Some(&address) => {
                conn.close();
                if fenced_for {
                    self.lift_fence();
                    self.publish();
                }
                None
            }
            Ok(conn) => {
                if !fenced_for && self.fence.is_some() {
                    // A fence lifted meanwhile (abort): the failover is not ours to follow.
                    conn.close();
                    return None;
                }
                self.adopt(address, conn);
                None
            }
            Err(e) if announced == Announced::Promotion => {
                if fenced_for {
                    tracing::warn!(promoting = %address, error = %e, "promotion not seen in time; writes resume");
                    self.lift_fence();
                    self.publish();
                    return Some("promotion not seen in time");
                }
                None
            }
            Err(e) => {
                tracing::info!(announced = %address, error = %e, "announced primary not verified; asking the sentinels");
                if fenced_for {
                    self.lift_fence();
                    self.publish();
                }
                (self.primary.as_ref() != Some(&address)).then_some("+switch-master")
            }
        }
    }

    /// Switches to a ROLE-verified primary that the sentinels announced (or are promoting).
    pub(super) fn adopt(&mut self, new: Address, conn: Connection) {
        let old = self.primary.replace(new.clone());
        if let Some(previous) = self.primary_conn.replace(conn) {
            previous.close();
        }
        let since = match &self.fence {
            Some(f) if Some(&f.old) == old.as_ref() => f.since,
            _ => Instant::now(),
        };
        self.lift_fence();
        if let Some(old) = &old {
            self.retire(old.clone(), since);
        }
        self.retired.retain(|r| r.address != new);
        tracing::info!(old = ?old.as_ref().map(|a| a.to_string()), new = %new, "primary changed (verified announcement)");
        self.emit(EventKind::PrimaryChanged {
            old,
            new: new.clone(),
        });
        if self.lost.take().is_some() {
            self.emit(EventKind::ConnectionRestored {
                address: new.clone(),
            });
        }
        self.healthy = true;
        self.confirmed = false;
        self.switches += 1;
        // Counts as a round for the data path: commands waiting for a newer view than the one
        // that failed them go on now.
        self.started += 1;
        self.rounds += 1;
        self.backoff.reset();
        self.last_error = None;
        if self.replicas.contains(&new) {
            self.replicas.retain(|a| *a != new);
            self.emit(EventKind::ReplicasChanged {
                replicas: self.replicas.clone(),
            });
        }
        self.publish();
    }

    pub(super) fn retire(&mut self, address: Address, since: Instant) {
        self.retired.retain(|r| r.address != address);
        self.retired.push(Retired {
            address,
            epoch: self.epoch,
            since,
        });
    }

    pub(super) fn fenced(&self) -> Vec<Fenced> {
        let fence = self.fence.iter().map(|f| Fenced {
            address: f.old.clone(),
            since: f.since,
        });
        let retired = self.retired.iter().map(|r| Fenced {
            address: r.address.clone(),
            since: r.since,
        });
        fence.chain(retired).collect()
    }
}
