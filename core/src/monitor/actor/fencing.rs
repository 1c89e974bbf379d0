//! Fencing: the primaries writes must not go to. At promotion, writes stop going to the primary
//! being demoted while the promoted replica is watched with ROLE (the monitor adopts it the
//! moment it answers master); primaries a failover replaced stay fenced for a while; and with
//! `sentinel_majority_ms`, writes wait while fewer than a majority of the sentinels are heard.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::majority::{Change, Majority};
use super::publisher::Publisher;
use crate::config::Config;
use crate::monitor::promotion::{self, Announced, Promoted};
use crate::monitor::status::Fenced;
use crate::resp::Connection;
use crate::sentinel::discovery::{RoundSettings, SentinelOutcome};
use crate::types::Address;
use crate::types::EventKind;

/// How long writes stay fenced while the replica the leader promotes has not answered ROLE
/// `master`; then they resume on the old primary (the failover did not happen).
const PROMOTION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a primary replaced by a failover stays fenced: sentinels that have not heard of the
/// switch yet may still name it, and it may still answer ROLE `master` until it is reconfigured.
const RETIRED_FOR: Duration = Duration::from_secs(60);

/// A failover the leader has started: the replica it promotes, and the primary it demotes.
struct Fence {
    /// The primary being demoted: writes to it wait.
    old: Address,
    /// The replica being promoted, watched with ROLE.
    promoting: Address,
    /// When the demotion was first heard of: writes acknowledged after it may be lost.
    since: Instant,
    /// Stops the promotion watch when the fence is lifted.
    cancel: CancellationToken,
}

/// A primary that a failover replaced.
struct Retired {
    address: Address,
    /// Its config epoch then: a sentinel naming it with no newer epoch has not caught up.
    epoch: u64,
    /// Since when it is fenced; it stays so for [`RETIRED_FOR`].
    since: Instant,
}

/// What the end of a promotion watch asks of the monitor.
pub(super) enum WatchEnd {
    /// The node answered master: switch to it on this connection.
    Adopt(Address, Connection),
    /// Nothing to adopt; `lifted` when a fence was lifted (the status changed), and the reason
    /// for a round if one is needed.
    Settled {
        lifted: bool,
        round: Option<&'static str>,
    },
}

/// Everything that keeps writes away from a primary.
pub(super) struct Fencing {
    /// The failover in progress, if any: its old primary is fenced until the promoted replica
    /// answers master, the failover aborts or the watch gives up.
    fence: Option<Fence>,
    /// Primaries failovers replaced, fenced for [`RETIRED_FOR`]; rounds do not go back to them.
    retired: Vec<Retired>,
    /// The sentinel-majority fence, with `sentinel_majority_ms`.
    majority: Option<Majority>,
    /// When the majority fence next asks every sentinel.
    heartbeat_at: Instant,
    /// Where promotion watches report their end.
    promotions_tx: mpsc::UnboundedSender<Promoted>,
    /// The receiving end, taken by the monitor's loop when it starts.
    promotions_rx: Option<mpsc::UnboundedReceiver<Promoted>>,
}

impl Fencing {
    pub(super) fn new(config: &Config) -> Fencing {
        let (promotions_tx, promotions_rx) = mpsc::unbounded_channel();
        let now = Instant::now();
        let majority = (config.sentinel_majority_ms > 0)
            .then(|| Majority::new(Duration::from_millis(config.sentinel_majority_ms)));
        Fencing {
            heartbeat_at: now + majority.as_ref().map_or(Duration::ZERO, |m| m.period()),
            majority,
            fence: None,
            retired: Vec::new(),
            promotions_tx,
            promotions_rx: Some(promotions_rx),
        }
    }

    /// The ends of promotion watches, once.
    pub(super) fn take_promotions(&mut self) -> Option<mpsc::UnboundedReceiver<Promoted>> {
        self.promotions_rx.take()
    }

    /// A failover replaces `old` by `promoting` (the leader started promoting it, or a sentinel
    /// announced the switch): when `old` is `primary` and no fence waits for `promoting` yet,
    /// fences `primary` and returns the token for the promotion watch to run under.
    pub(super) fn raise(
        &mut self,
        primary: &Address,
        old: Option<&Address>,
        promoting: &Address,
        announced: Announced,
        parent: &CancellationToken,
    ) -> Option<CancellationToken> {
        if old != Some(primary) || promoting == primary || self.is_promoting(promoting) {
            return None;
        }
        let since = self.fence.as_ref().map_or_else(Instant::now, |f| f.since);
        self.lift();
        let cancel = parent.child_token();
        tracing::info!(primary = %primary, promoting = %promoting, ?announced, "failover: writes fenced");
        self.fence = Some(Fence {
            old: primary.clone(),
            promoting: promoting.clone(),
            since,
            cancel: cancel.clone(),
        });
        Some(cancel)
    }

    /// Ends the failover in progress (its watch stops); writes go to the primary again.
    pub(super) fn lift(&mut self) {
        if let Some(fence) = self.fence.take() {
            fence.cancel.cancel();
        }
    }

    pub(super) fn is_raised(&self) -> bool {
        self.fence.is_some()
    }

    /// Whether the failover in progress demotes `address`.
    pub(super) fn is_demoting(&self, address: &Address) -> bool {
        self.fence.as_ref().is_some_and(|f| f.old == *address)
    }

    /// Whether the failover in progress promotes `address`.
    pub(super) fn is_promoting(&self, address: &Address) -> bool {
        self.fence.as_ref().is_some_and(|f| f.promoting == *address)
    }

    /// Since when `old` is known to be demoted: the start of its fence, or now.
    pub(super) fn demoted_since(&self, old: Option<&Address>) -> Instant {
        match &self.fence {
            Some(f) if Some(&f.old) == old => f.since,
            _ => Instant::now(),
        }
    }

    /// The primary changed from `old` (at config `epoch`) to `new`: the failover is over, `old`
    /// stays fenced from `since`, and `new` is not fenced any more.
    pub(super) fn replaced(
        &mut self,
        old: Option<&Address>,
        new: &Address,
        epoch: u64,
        since: Instant,
    ) {
        self.lift();
        if let Some(old) = old {
            self.retired.retain(|r| r.address != *old);
            self.retired.push(Retired {
                address: old.clone(),
                epoch,
                since,
            });
        }
        self.retired.retain(|r| r.address != *new);
    }

    /// The replaced primaries still fenced, with their epochs, for a round to judge stale
    /// answers by; those fenced long enough are forgotten.
    pub(super) fn retired_for_round(&mut self) -> Vec<(Address, u64)> {
        let now = Instant::now();
        self.retired
            .retain(|r| now.duration_since(r.since) < RETIRED_FOR);
        self.retired
            .iter()
            .map(|r| (r.address.clone(), r.epoch))
            .collect()
    }

    /// Every primary writes must not go to now, for the status.
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

    /// Verifies `address` with ROLE in the background; the end comes back on the promotions
    /// channel.
    pub(super) fn watch(
        &self,
        tracker: &TaskTracker,
        settings: &RoundSettings,
        address: Address,
        announced: Announced,
        cancel: CancellationToken,
    ) {
        let until = Instant::now()
            + match announced {
                Announced::Promotion => PROMOTION_TIMEOUT,
                Announced::Switch => settings.deadline.max(Duration::from_secs(1)),
            };
        tracker.spawn(promotion::watch(
            settings.clone(),
            address,
            announced,
            until,
            cancel,
            self.promotions_tx.clone(),
        ));
    }

    /// The end of a promotion watch: adopt the node if it answered master; otherwise lift the
    /// fence it was watched for (the failover did not happen in time) or fall back to a round.
    pub(super) fn watch_ended(
        &mut self,
        promoted: Promoted,
        primary: Option<&Address>,
    ) -> WatchEnd {
        let Promoted {
            address,
            announced,
            outcome,
        } = promoted;
        let fenced_for = self.is_promoting(&address);
        let is_primary = primary == Some(&address);
        match outcome {
            Ok(conn) if is_primary => {
                conn.close();
                self.settle(fenced_for, None)
            }
            Ok(conn) if !fenced_for && self.is_raised() => {
                // A fence lifted meanwhile (abort): the failover is not ours to follow.
                conn.close();
                self.settle(false, None)
            }
            Ok(conn) => WatchEnd::Adopt(address, conn),
            Err(_) if announced == Announced::Promotion && !fenced_for => self.settle(false, None),
            Err(e) if announced == Announced::Promotion => {
                tracing::warn!(promoting = %address, error = %e, "promotion not seen in time; writes resume");
                self.settle(true, Some("promotion not seen in time"))
            }
            Err(e) => {
                tracing::info!(announced = %address, error = %e, "announced primary not verified; asking the sentinels");
                self.settle(fenced_for, (!is_primary).then_some("+switch-master"))
            }
        }
    }

    /// Lifts the fence when `lift`; a round for `round` if given.
    fn settle(&mut self, lift: bool, round: Option<&'static str>) -> WatchEnd {
        if lift {
            self.lift();
        }
        WatchEnd::Settled {
            lifted: lift,
            round,
        }
    }

    /// Notes who answered, for the majority fence.
    pub(super) fn heard(&mut self, outcomes: &[SentinelOutcome], now: Instant) {
        if let Some(majority) = self.majority.as_mut() {
            for outcome in outcomes {
                majority.record(outcome, now);
            }
        }
    }

    pub(super) fn majority_lost(&self) -> bool {
        self.majority.as_ref().is_some_and(|m| m.is_lost())
    }

    /// When the majority fence next asks every sentinel; never without the fence.
    pub(super) fn next_heartbeat(&self) -> Option<Instant> {
        self.majority.as_ref().map(|_| self.heartbeat_at)
    }

    /// How long a heartbeat waits for answers; `None` without the fence.
    pub(super) fn heartbeat_deadline(&self, sentinel_timeout: Duration) -> Option<Duration> {
        Some(self.majority.as_ref()?.deadline(sentinel_timeout))
    }

    /// A heartbeat is over: the next one is a period from now.
    pub(super) fn heartbeat_done(&mut self) {
        if let Some(majority) = &self.majority {
            self.heartbeat_at = Instant::now() + majority.period();
        }
    }

    /// Whether sentinel `id` answered within the majority fence's bound (never without the
    /// fence).
    pub(super) fn answered_lately(&self, id: u64) -> bool {
        self.majority
            .as_ref()
            .is_some_and(|m| m.answered_lately(id, Instant::now()))
    }

    /// Judges the sentinel-majority fence over the sentinels `known` now, for `primary`; true
    /// (and the event queued) when it changed.
    pub(super) fn judge_majority(
        &mut self,
        known: &[u64],
        primary: Option<&Address>,
        publisher: &mut Publisher,
    ) -> bool {
        let Some(majority) = self.majority.as_mut() else {
            return false;
        };
        match majority.evaluate(known, primary, Instant::now()) {
            Some(Change::Lost { heard, known }) => {
                tracing::warn!(
                    heard,
                    known,
                    "fewer than a majority of the sentinels answered in time: writes wait"
                );
                publisher.emit(EventKind::SentinelMajorityLost { heard, known });
                true
            }
            Some(Change::Regained { confirmed, known }) => {
                let Some(primary) = primary.cloned() else {
                    return false;
                };
                tracing::info!(confirmed, known, primary = %primary, "a majority of the sentinels name the primary again: writes resume");
                publisher.emit(EventKind::SentinelMajorityRegained {
                    primary,
                    confirmed,
                    known,
                });
                true
            }
            None => false,
        }
    }
}
