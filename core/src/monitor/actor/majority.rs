//! The sentinel-majority fence (`sentinel_majority_ms`): a client that has heard fewer than a
//! majority of the sentinels it knows for longer than the bound may be on the losing side of a
//! partition, where the sentinels it cannot hear are promoting another primary. Its writes then
//! wait (within their deadlines) instead of going to a primary that may already be replaced,
//! and resume once a majority again names the primary the client uses.
//!
//! The sentinels it knows are the ones the last round's winning sentinel says make up the service
//! (itself and its `SENTINEL SENTINELS`), not every address ever learned: where sentinels come
//! back on new addresses (rebuilt hosts, pods) and the operator runs `SENTINEL RESET`, the
//! majority follows them instead of growing out of reach, while sentinels that are merely down or
//! cut off stay in that list and keep counting.
//!
//! Lost and regained are judged differently on purpose: "lost" needs only silence (any answer,
//! whatever primary it names, shows the client is not cut off), while "regained" needs a
//! majority naming the same primary, so writes do not resume toward a primary the majority has
//! already replaced.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::sentinel::discovery::{self, Answer, SentinelOutcome};
use crate::types::Address;

/// The fence's view of the sentinels.
pub(super) struct Majority {
    bound: Duration,
    /// When each sentinel last answered at all, or (never asked yet) when it was first counted:
    /// a client does not start fenced before its first answers, and a sentinel just added does
    /// not count as silent before it was asked.
    heard: HashMap<u64, Instant>,
    /// When each sentinel last named a valid primary, and which.
    named: HashMap<u64, (Instant, Address)>,
    lost: bool,
}

/// A change of the fence, for the monitor to publish as an event.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Fewer than `majority` of `known` sentinels were heard within the bound.
    Lost { heard: usize, known: usize },
    /// `confirmed` of `known` sentinels (a majority) name the primary again.
    Regained { confirmed: usize, known: usize },
}

/// More than half of `known`.
fn majority(known: usize) -> usize {
    known / 2 + 1
}

impl Majority {
    pub(super) fn new(bound: Duration) -> Majority {
        Majority {
            bound,
            heard: HashMap::new(),
            named: HashMap::new(),
            lost: false,
        }
    }

    /// How often the sentinels are asked: four times per bound, so one lost or slow answer
    /// does not trip the fence, and never more than 20 times a second.
    pub(super) fn period(&self) -> Duration {
        (self.bound / 4).max(Duration::from_millis(50))
    }

    /// How long one heartbeat waits for its answers.
    pub(super) fn deadline(&self, sentinel_timeout: Duration) -> Duration {
        sentinel_timeout.min(self.period())
    }

    pub(super) fn is_lost(&self) -> bool {
        self.lost
    }

    /// Notes what a sentinel answered (in a round or a heartbeat).
    pub(super) fn record(&mut self, outcome: &SentinelOutcome, now: Instant) {
        let Ok(answer) = &outcome.answer else { return };
        self.heard.insert(outcome.id, now);
        if let Answer::Master(info) = answer {
            if discovery::is_valid(info) {
                self.named.insert(outcome.id, (now, info.address.clone()));
            }
        }
    }

    /// Whether sentinel `id` answered within the bound before `now`.
    pub(super) fn answered_lately(&self, id: u64, now: Instant) -> bool {
        self.heard
            .get(&id)
            .is_some_and(|at| now.saturating_duration_since(*at) <= self.bound)
    }

    /// Judges the fence over the sentinels `known` now, for the primary the client uses.
    pub(super) fn evaluate(
        &mut self,
        known: &[u64],
        primary: Option<&Address>,
        now: Instant,
    ) -> Option<Change> {
        let fresh = |at: &Instant| now.saturating_duration_since(*at) <= self.bound;
        if known.is_empty() {
            return None;
        }
        for id in known {
            self.heard.entry(*id).or_insert(now);
        }
        let needed = majority(known.len());
        if !self.lost {
            let heard = known
                .iter()
                .filter(|id| self.heard.get(id).is_some_and(fresh))
                .count();
            if heard < needed {
                self.lost = true;
                return Some(Change::Lost {
                    heard,
                    known: known.len(),
                });
            }
            return None;
        }
        let primary = primary?;
        let confirmed = known
            .iter()
            .filter(|id| {
                self.named
                    .get(id)
                    .is_some_and(|(at, named)| fresh(at) && named == primary)
            })
            .count();
        if confirmed >= needed {
            self.lost = false;
            return Some(Change::Regained {
                confirmed,
                known: known.len(),
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Result};
    use crate::sentinel::replies::{Flags, InstanceInfo};

    fn outcome(id: u64, answer: Result<Answer>) -> SentinelOutcome {
        SentinelOutcome {
            id,
            conn: None,
            resolved: None,
            run_id: None,
            tilt: None,
            answer,
        }
    }

    fn names(id: u64, port: u16) -> SentinelOutcome {
        outcome(
            id,
            Ok(Answer::Master(InstanceInfo {
                address: Address::new("127.0.0.1", port),
                flags: Flags::default().with("master"),
                run_id: None,
                config_epoch: 1,
            })),
        )
    }

    #[test]
    fn silence_from_a_majority_fences_and_a_majority_naming_the_primary_lifts_it() {
        let t0 = Instant::now();
        let bound = Duration::from_millis(1000);
        let mut m = Majority::new(bound);
        let known = [1, 2, 3];
        let primary = Address::new("127.0.0.1", 6379);
        // Not heard yet, but within the bound of being first counted: not fenced.
        assert_eq!(m.evaluate(&known, Some(&primary), t0), None);
        assert_eq!(m.evaluate(&known, Some(&primary), t0 + bound / 2), None);
        m.record(&names(1, 6379), t0 + bound / 2);
        // Past the bound only sentinel 1 was heard: 1 of 3.
        let later = t0 + bound + Duration::from_millis(100);
        assert_eq!(
            m.evaluate(&known, Some(&primary), later),
            Some(Change::Lost { heard: 1, known: 3 })
        );
        assert!(m.is_lost());
        // A second sentinel answers, but names another primary: still fenced.
        m.record(&names(2, 6380), later);
        m.record(&names(1, 6379), later);
        assert_eq!(m.evaluate(&known, Some(&primary), later), None);
        // It names ours again: 2 of 3 confirm it.
        m.record(&names(2, 6379), later);
        assert_eq!(
            m.evaluate(&known, Some(&primary), later),
            Some(Change::Regained {
                confirmed: 2,
                known: 3
            })
        );
        assert!(!m.is_lost());
    }

    #[test]
    fn any_answer_counts_as_heard_and_errors_do_not() {
        let t0 = Instant::now();
        let bound = Duration::from_millis(400);
        let mut m = Majority::new(bound);
        let known = [1, 2, 3, 4];
        assert_eq!(m.evaluate(&known, None, t0), None);
        let at = t0 + Duration::from_millis(500);
        m.record(&outcome(1, Ok(Answer::Unknown)), at);
        m.record(&names(2, 1), at);
        m.record(&outcome(3, Err(Error::timeout("no answer"))), at);
        // 2 of 4 heard: a majority of 4 is 3.
        assert_eq!(
            m.evaluate(&known, None, at),
            Some(Change::Lost { heard: 2, known: 4 })
        );
        // No primary known: nothing can confirm it.
        m.record(&names(3, 1), at);
        m.record(&names(4, 1), at);
        assert_eq!(m.evaluate(&known, None, at), None);
        assert!(m.period() >= Duration::from_millis(50));
        assert_eq!(
            m.deadline(Duration::from_millis(500)),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn a_sentinel_that_joins_is_not_silent_before_it_could_be_asked() {
        let t0 = Instant::now();
        let bound = Duration::from_millis(400);
        let mut m = Majority::new(bound);
        for id in [1, 2, 3] {
            m.record(&names(id, 1), t0);
        }
        assert_eq!(m.evaluate(&[1, 2, 3], None, t0), None);
        // Long after the start, sentinel 3 is replaced by 4; both are counted for a while (as
        // the rounds' views do). 4 was never asked: it is not silent yet.
        let at = t0 + Duration::from_millis(1000);
        m.record(&names(1, 1), at);
        m.record(&names(2, 1), at);
        assert_eq!(m.evaluate(&[1, 2, 3, 4], None, at), None);
        // 4 answers before a bound has passed since it was first counted: never fenced.
        let later = at + Duration::from_millis(350);
        m.record(&names(1, 1), later);
        m.record(&names(2, 1), later);
        m.record(&names(4, 1), later);
        assert_eq!(m.evaluate(&[1, 2, 3, 4], None, later), None);
        // One of the four silent past the bound: 3 of 4 is still a majority.
        assert!(!m.is_lost());
    }
}
