//! Bookkeeping of the sentinels: who answered, their TILT and service state, the list's merges,
//! and one event subscription per sentinel.

use std::collections::HashSet;

use super::Actor;
use crate::monitor::backoff::Backoff;
use crate::monitor::subscriber;
use crate::sentinel::discovery::{Answer, SentinelOutcome};
use crate::types::EventKind;

impl Actor {
    /// Bookkeeping of who answered: connections kept for the next round, resolutions and run ids
    /// recorded, up/down transitions published.
    pub(super) fn record_sentinels(&mut self, outcomes: Vec<SentinelOutcome>, timed_out: Vec<u64>) {
        let now = tokio::time::Instant::now();
        for outcome in outcomes {
            if let Some(majority) = self.majority.as_mut() {
                majority.record(&outcome, now);
            }
            if let Some(resolved) = outcome.resolved {
                self.list.set_resolved(outcome.id, resolved);
            }
            if let Some(run_id) = outcome.run_id {
                self.list.set_run_id(outcome.id, run_id);
            }
            match outcome.conn {
                Some(conn) => {
                    self.links.insert(outcome.id, conn);
                }
                None => {
                    // It failed or answered garbage: broken for every monitor sharing it.
                    if let Some(conn) = self.links.remove(&outcome.id) {
                        conn.close();
                    }
                }
            }
            self.sentinel_state(outcome.id, outcome.answer.is_ok());
            if let Some((tilt, asked)) = outcome.tilt {
                self.sentinel_tilt(outcome.id, tilt, asked.into_std(), false);
            }
            match &outcome.answer {
                Ok(Answer::Unknown) => self.sentinel_knows_service(outcome.id, false),
                Ok(Answer::Master(_)) => self.sentinel_knows_service(outcome.id, true),
                Err(_) => {}
            }
        }
        for id in timed_out {
            if let Some(conn) = self.links.remove(&id) {
                conn.close();
            }
            self.sentinel_state(id, false);
        }
        self.forget_merged();
    }

    pub(super) fn sentinel_state(&mut self, id: u64, up: bool) {
        let Some(address) = self.list.get(id).map(|e| e.address.clone()) else {
            return;
        };
        let changed = self.list.set_up(id, up).is_some();
        let first = self.observed.insert(id);
        if up && changed && !first {
            tracing::info!(sentinel = %address, "sentinel up");
            self.emit(EventKind::SentinelUp { sentinel: address });
        } else if !up && (changed || first) {
            tracing::warn!(sentinel = %address, "sentinel down");
            self.emit(EventKind::SentinelDown { sentinel: address });
        }
    }

    pub(super) fn sentinel_tilt(
        &mut self,
        id: u64,
        on: bool,
        asked: std::time::Instant,
        from_event: bool,
    ) {
        let Some(address) = self.list.get(id).map(|e| e.address.clone()) else {
            return;
        };
        if self.list.set_tilt(id, on, asked, from_event).is_some() {
            tracing::warn!(sentinel = %address, on, "sentinel TILT");
            self.emit(EventKind::SentinelTilt {
                sentinel: address,
                on,
            });
        }
    }

    pub(super) fn sentinel_knows_service(&mut self, id: u64, knows: bool) {
        let Some(address) = self.list.get(id).map(|e| e.address.clone()) else {
            return;
        };
        if self.list.set_knows_service(id, knows) == Some(false) {
            tracing::warn!(sentinel = %address, service = %self.config.service, "sentinel does not know the service");
            self.emit(EventKind::SentinelServiceUnknown { sentinel: address });
        }
    }

    /// Drops connections and subscriptions of entries merged into others.
    pub(super) fn forget_merged(&mut self) {
        let live: HashSet<u64> = self.list.entries().iter().map(|e| e.id).collect();
        // Shared with other monitors: dropped, not closed (the last holder closes it).
        self.links.retain(|id, _| live.contains(id));
        self.subscribers.retain(|id, _| live.contains(id));
        self.observed.retain(|id| live.contains(id));
    }

    pub(super) fn sentinels_changed(&mut self) {
        self.forget_merged();
        self.ensure_subscribers();
        self.emit(EventKind::SentinelsChanged {
            sentinels: self.list.infos(),
        });
        self.publish();
    }

    /// One event subscription per known sentinel (none when `sentinel_events` is off).
    pub(super) fn ensure_subscribers(&mut self) {
        if !self.config.sentinel_events {
            return;
        }
        for entry in self.list.entries() {
            if self.subscribers.contains_key(&entry.id) {
                continue;
            }
            let membership = subscriber::join(
                (entry.address.clone(), self.settings.sentinel_side.clone()),
                self.settings.clone(),
                self.settings.sentinel_connect.clone(),
                Backoff::new(self.config.retry_base(), self.config.retry_max()),
                self.sentinel_events_tx.clone(),
            );
            self.subscribers.insert(entry.id, membership);
        }
    }
}
