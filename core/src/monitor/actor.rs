//! The monitor task's state and loop.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::backoff::Backoff;
use super::promotion::{self, Announced, Promoted};
use super::subscriber::{self, Received};
use super::{Command, Fenced, Status};
use crate::config::{Address, Config};
use crate::error::Error;
use crate::node;
use crate::resp::Connection;
use crate::sentinel::discovery::Known;
use crate::sentinel::discovery::{
    self, Answer, Found, Round, RoundSettings, SentinelOutcome, SentinelTarget,
};
use crate::sentinel::events::{InstanceKind, SentinelEvent};
use crate::sentinel::replies::{self, Role};
use crate::sentinel::sentinels::SentinelList;
use crate::sync::Locked;
use crate::types::{unix_ms, Event, EventKind, Topology};

/// The reason given for events about replicas (and other sentinels' view of them).
const REPLICA_EVENT: &str = "replica event";

/// The same event published by several sentinels within this window is handled once.
const DEDUPE_WINDOW: Duration = Duration::from_secs(2);

/// How long writes stay fenced while the replica the leader promotes has not answered ROLE
/// `master`; then they resume on the old primary (the failover did not happen).
const PROMOTION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a primary replaced by a failover stays fenced: sentinels that have not heard of the
/// switch yet may still name it, and it may still answer ROLE `master` until it is reconfigured.
const RETIRED_FOR: Duration = Duration::from_secs(60);

/// The first delay between rounds that the data path asks for; doubles while reports keep coming.
const REPORT_BASE: Duration = Duration::from_millis(100);

/// A failover the leader has started: the replica it promotes, and the primary it demotes.
struct Fence {
    old: Address,
    promoting: Address,
    since: Instant,
    cancel: CancellationToken,
}

/// A primary that a failover replaced, with the config epoch it had then.
struct Retired {
    address: Address,
    epoch: u64,
    since: Instant,
}

pub(super) struct Actor {
    config: Config,
    settings: RoundSettings,
    list: SentinelList,
    links: HashMap<u64, Connection>,
    observed: HashSet<u64>,
    primary: Option<Address>,
    primary_conn: Option<Connection>,
    lost: Option<Address>,
    replicas: Vec<Address>,
    epoch: u64,
    healthy: bool,
    backoff: Backoff,
    last_error: Option<Error>,
    rounds: u64,
    /// Rounds started, for telling whether a report was already served by a newer round.
    started: u64,
    status: watch::Sender<Status>,
    events: broadcast::Sender<Event>,
    sentinel_events_tx: mpsc::UnboundedSender<Received>,
    sentinel_events_rx: Option<mpsc::UnboundedReceiver<Received>>,
    subscribers: HashMap<u64, CancellationToken>,
    recent: VecDeque<(String, Instant)>,
    fence: Option<Fence>,
    retired: Vec<Retired>,
    /// False after switching on a verified announcement, until a round confirms the primary
    /// with the sentinels' epoch, replicas and peers.
    confirmed: bool,
    promotions_tx: mpsc::UnboundedSender<Promoted>,
    promotions_rx: Option<mpsc::UnboundedReceiver<Promoted>>,
    /// Spacing of the rounds the data path asks for, so that no fault of a node can make the
    /// monitor ask the sentinels faster than this schedule.
    report_backoff: Backoff,
    report_not_before: Instant,
    deferred_report: Option<&'static str>,
    /// A reason for a round that arrived while one was running.
    deferred_trigger: Option<&'static str>,
    /// Switches adopted on a verified announcement, to tell whether one happened meanwhile.
    switches: u64,
    unpublished: Vec<Event>,
    publishing: Arc<Mutex<()>>,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl Actor {
    pub(super) fn new(
        config: Config,
        settings: RoundSettings,
        status: watch::Sender<Status>,
        events: broadcast::Sender<Event>,
        publishing: Arc<Mutex<()>>,
        cancel: CancellationToken,
        tracker: TaskTracker,
    ) -> Actor {
        let (tx, rx) = mpsc::unbounded_channel();
        let (promotions_tx, promotions_rx) = mpsc::unbounded_channel();
        Actor {
            fence: None,
            retired: Vec::new(),
            confirmed: true,
            promotions_tx,
            promotions_rx: Some(promotions_rx),
            report_backoff: Backoff::new(
                REPORT_BASE.max(Duration::from_millis(config.retry_base_ms)),
                Duration::from_millis(config.retry_max_ms).max(REPORT_BASE),
            ),
            report_not_before: Instant::now(),
            deferred_report: None,
            deferred_trigger: None,
            switches: 0,
            list: SentinelList::new(&config.sentinels),
            backoff: Backoff::new(
                Duration::from_millis(config.retry_base_ms),
                Duration::from_millis(config.retry_max_ms),
            ),
            config,
            settings,
            links: HashMap::new(),
            observed: HashSet::new(),
            primary: None,
            primary_conn: None,
            lost: None,
            replicas: Vec::new(),
            epoch: 0,
            healthy: false,
            last_error: None,
            rounds: 0,
            started: 0,
            status,
            events,
            sentinel_events_tx: tx,
            sentinel_events_rx: Some(rx),
            subscribers: HashMap::new(),
            recent: VecDeque::new(),
            unpublished: Vec::new(),
            publishing,
            cancel,
            tracker,
        }
    }

    pub(super) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let span = tracing::info_span!("monitor", service = %self.config.service);
        async move {
            let Some(mut sentinel_events) = self.sentinel_events_rx.take() else { return };
            let Some(mut promotions) = self.promotions_rx.take() else { return };
            self.ensure_subscribers();
            let mut reason = "initial discovery";
            loop {
                let cancel = self.cancel.clone();
                let next_round = tokio::select! {
                    _ = cancel.cancelled() => break,
                    next = self.round_and_apply(reason, &mut sentinel_events, &mut promotions) => next,
                };
                reason = tokio::select! {
                    _ = cancel.cancelled() => break,
                    r = self.wait_for_trigger(next_round, &mut commands, &mut sentinel_events, &mut promotions) => match r {
                        Some(r) => r,
                        None => break,
                    },
                };
                // Everything queued so far is served by the coming round; later requests are
                // replayed after it.
                while commands.try_recv().is_ok() {}
            }
            self.stop();
        }
        .instrument(span)
        .await
    }

    /// Waits for the next reason to run a round. `None` when every client is gone.
    async fn wait_for_trigger(
        &mut self,
        at: Instant,
        commands: &mut mpsc::UnboundedReceiver<Command>,
        sentinel_events: &mut mpsc::UnboundedReceiver<Received>,
        promotions: &mut mpsc::UnboundedReceiver<Promoted>,
    ) -> Option<&'static str> {
        if let Some(reason) = self.deferred_trigger.take() {
            let replicas_only = reason == REPLICA_EVENT && self.healthy;
            if !replicas_only || !self.refresh_replicas().await {
                return Some(reason);
            }
        }
        loop {
            let report_at = self.report_not_before;
            let deferred = self.deferred_report;
            let primary_conn = self.primary_conn.clone();
            let primary_closed = async move {
                match primary_conn {
                    Some(conn) => conn.closed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = sleep_until(at) => return Some(if self.healthy { "periodic check" } else { "retry" }),
                cmd = commands.recv() => match cmd? {
                    Command::Refresh(reason) => return Some(reason),
                    Command::Report(reason, round) => {
                        let served = self.started > round;
                        if !served && self.healthy {
                            if let Some(reason) = self.gate_report(reason) {
                                return Some(reason);
                            }
                        }
                    }
                },
                _ = sleep_until(report_at), if deferred.is_some() => {
                    self.deferred_report = None;
                    if self.healthy {
                        return deferred;
                    }
                }
                Some(promoted) = promotions.recv() => {
                    if let Some(reason) = self.on_promoted(promoted) {
                        return Some(reason);
                    }
                }
                Some(received) = sentinel_events.recv() => {
                    match self.on_sentinel_event(received) {
                        // A replica came, went or changed: one SENTINEL REPLICAS instead of a
                        // whole round, when the primary is settled; a round if that fails.
                        Some(REPLICA_EVENT) if self.healthy => {
                            let refreshed = self.refresh_replicas().await;
                            if !refreshed {
                                return Some(REPLICA_EVENT);
                            }
                        }
                        Some(REPLICA_EVENT) => {}
                        Some(reason) => return Some(reason),
                        None => {}
                    }
                }
                _ = primary_closed => {
                    self.on_primary_lost();
                    return Some("connection to primary lost");
                }
            }
        }
    }

    /// Lets a round the data path asked for start now, or defers it to the report schedule:
    /// however fast commands fail, rounds they cause follow a backoff that resets only after a
    /// quiet period.
    fn gate_report(&mut self, reason: &'static str) -> Option<&'static str> {
        let now = Instant::now();
        let quiet =
            Duration::from_millis(self.config.check_interval_ms).max(Duration::from_secs(1));
        if now > self.report_not_before + quiet {
            self.report_backoff.reset();
        }
        if now >= self.report_not_before {
            self.report_not_before = now + self.report_backoff.next_delay();
            self.deferred_report = None;
            Some(reason)
        } else {
            self.deferred_report = Some(reason);
            None
        }
    }

    /// Applies what an event says at once where that is safe, and tells whether it calls for a
    /// round. Duplicates (the same text from several sentinels) are dropped.
    fn on_sentinel_event(&mut self, received: Received) -> Option<&'static str> {
        let Received { from, raw, event } = received;
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
        if event.service().is_some_and(|s| s != self.config.service) {
            return None;
        }
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

    /// A failover replaces `old` by `promoting` (the leader started promoting it, or a sentinel
    /// announced the switch): writes to the old primary stop (they wait within their deadlines)
    /// until `promoting` answers ROLE master, the failover aborts, or the watch gives up.
    fn start_fence(&mut self, promoting: Address, old: Option<Address>, announced: Announced) {
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

    fn lift_fence(&mut self) {
        if let Some(fence) = self.fence.take() {
            fence.cancel.cancel();
        }
    }

    /// Verifies `address` with ROLE in the background; [`Actor::on_promoted`] adopts it.
    fn watch_promotion(
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
    fn on_promoted(&mut self, promoted: Promoted) -> Option<&'static str> {
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
    fn adopt(&mut self, new: Address, conn: Connection) {
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

    fn retire(&mut self, address: Address, since: Instant) {
        self.retired.retain(|r| r.address != address);
        self.retired.push(Retired {
            address,
            epoch: self.epoch,
            since,
        });
    }

    fn on_primary_lost(&mut self) {
        self.primary_conn = None;
        if let Some(address) = self.primary.clone() {
            tracing::warn!(primary = %address, "connection to primary lost");
            self.lost = Some(address.clone());
            self.emit(EventKind::ConnectionLost { address });
            self.publish();
        }
    }

    /// Runs `work` (a round, or its stragglers) while sentinel events and promotion watches are
    /// handled as they arrive: a `+switch-master` or a promotion must not wait for a round that
    /// is waiting for sentinels that never answer. Reasons for a new round are kept for after it.
    /// `None` when a verified switch was adopted meanwhile: `work`, older than that, is dropped.
    async fn listening<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
        sentinel_events: &mut mpsc::UnboundedReceiver<Received>,
        promotions: &mut mpsc::UnboundedReceiver<Promoted>,
    ) -> Option<T> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                out = &mut work => return Some(out),
                Some(received) = sentinel_events.recv() => {
                    if let Some(reason) = self.on_sentinel_event(received) {
                        self.deferred_trigger.get_or_insert(reason);
                    }
                }
                Some(promoted) = promotions.recv() => {
                    let switches = self.switches;
                    if let Some(reason) = self.on_promoted(promoted) {
                        self.deferred_trigger.get_or_insert(reason);
                    }
                    if self.switches != switches {
                        return None;
                    }
                }
            }
        }
    }

    /// Runs one round and applies it; returns when the next scheduled round is due.
    async fn round_and_apply(
        &mut self,
        reason: &'static str,
        sentinel_events: &mut mpsc::UnboundedReceiver<Received>,
        promotions: &mut mpsc::UnboundedReceiver<Promoted>,
    ) -> Instant {
        let targets: Vec<SentinelTarget> = self
            .list
            .ask_order()
            .into_iter()
            .filter_map(|id| {
                let entry = self.list.get(id)?;
                Some(SentinelTarget {
                    id,
                    address: entry.address.clone(),
                    conn: self.links.get(&id).cloned(),
                    reported_down: entry.reported_down,
                })
            })
            .collect();
        let now = Instant::now();
        self.retired
            .retain(|r| now.duration_since(r.since) < RETIRED_FOR);
        let known = Known {
            current: self.primary.clone().zip(self.primary_conn.clone()),
            epoch: self.epoch,
            retired: self
                .retired
                .iter()
                .map(|r| (r.address.clone(), r.epoch))
                .collect(),
        };
        let started = Instant::now();
        self.started += 1;
        let settings = self.settings.clone();
        let round = discovery::run(&settings, targets, known);
        let Some(Round {
            mut outcomes,
            mut stragglers,
            result,
        }) = self.listening(round, sentinel_events, promotions).await
        else {
            tracing::debug!(reason, "round dropped: a verified switch came first");
            return Instant::now() + Duration::from_millis(self.config.check_interval_ms);
        };
        self.rounds += 1;
        // Most of the others answered while the winner was verified; record them before the
        // snapshot is published so it shows them up.
        outcomes.extend(stragglers.take_finished());
        self.record_sentinels(outcomes, Vec::new());
        let next = self.apply(result).await;
        let finished = self
            .listening(stragglers.finish(), sentinel_events, promotions)
            .await;
        if let Some((late, timed_out)) = finished {
            if !late.is_empty() || !timed_out.is_empty() {
                self.record_sentinels(late, timed_out);
                self.publish();
            }
        }
        tracing::debug!(
            reason,
            elapsed_ms = started.elapsed().as_millis() as u64,
            healthy = self.healthy,
            "round finished"
        );
        next
    }

    /// Bookkeeping of who answered: connections kept for the next round, resolutions and run ids
    /// recorded, up/down transitions published.
    fn record_sentinels(&mut self, outcomes: Vec<SentinelOutcome>, timed_out: Vec<u64>) {
        for outcome in outcomes {
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

    async fn apply(&mut self, result: crate::Result<Found>) -> Instant {
        match result {
            Ok(found) => {
                self.on_found(found).await;
                self.publish();
                Instant::now() + Duration::from_millis(self.config.check_interval_ms)
            }
            Err(error) => {
                self.healthy = false;
                let delay = self.backoff.next_delay();
                tracing::warn!(error = %error, retry_in_ms = delay.as_millis() as u64, "discovery failed");
                self.last_error = Some(error.clone());
                self.emit(EventKind::DiscoveryFailed { error });
                self.publish();
                Instant::now() + delay
            }
        }
    }

    async fn on_found(&mut self, found: Found) {
        let Found {
            primary,
            primary_conn,
            replicas,
            sentinels,
            ..
        } = found;
        let new = primary.address.clone();
        if self.primary.as_ref() != Some(&new) {
            let old = self.primary.replace(new.clone());
            if let Some(conn) = self.primary_conn.take() {
                conn.close();
            }
            self.lift_fence();
            if let Some(old) = &old {
                self.retire(old.clone(), Instant::now());
            }
            self.retired.retain(|r| r.address != new);
            tracing::info!(old = ?old.as_ref().map(|a| a.to_string()), new = %new, "primary changed");
            self.emit(EventKind::PrimaryChanged {
                old,
                new: new.clone(),
            });
        }
        self.primary_conn = Some(primary_conn);
        if self.lost.take().is_some() {
            self.emit(EventKind::ConnectionRestored {
                address: new.clone(),
            });
        }
        // A round that kept the current primary because every sentinel still named the one it
        // replaced has confirmed nothing.
        self.confirmed = replicas.is_some() || sentinels.is_some();
        self.epoch = primary.config_epoch;
        self.healthy = true;
        self.backoff.reset();
        self.last_error = None;

        if let Some(reported) = replicas {
            let next = self.merge_replicas(&new, reported).await;
            if next != self.replicas {
                self.replicas = next;
                tracing::info!(replicas = ?self.replicas.iter().map(|a| a.to_string()).collect::<Vec<_>>(), "replicas changed");
                self.emit(EventKind::ReplicasChanged {
                    replicas: self.replicas.clone(),
                });
            }
        } else if self.replicas.contains(&new) {
            self.replicas.retain(|a| *a != new);
            self.emit(EventKind::ReplicasChanged {
                replicas: self.replicas.clone(),
            });
        }

        if let Some(peers) = sentinels {
            let mut learned = false;
            for peer in peers {
                learned |= self
                    .list
                    .learn(peer.address, peer.run_id, peer.flags.is_unhealthy());
            }
            if learned {
                self.sentinels_changed();
            }
        }
    }

    /// Re-reads the replica list from one sentinel that answered in the last round. Returns
    /// false when no sentinel could be asked, so the caller falls back to a full round.
    async fn refresh_replicas(&mut self) -> bool {
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
    async fn merge_replicas(
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

    async fn is_live_replica(&self, address: &Address) -> bool {
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
            .and_then(replies::role);
        conn.close();
        matches!(role, Ok(Role::Replica { .. }))
    }

    fn sentinel_state(&mut self, id: u64, up: bool) {
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

    fn sentinel_tilt(&mut self, id: u64, on: bool, asked: std::time::Instant, from_event: bool) {
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

    fn sentinel_knows_service(&mut self, id: u64, knows: bool) {
        let Some(address) = self.list.get(id).map(|e| e.address.clone()) else {
            return;
        };
        if self.list.set_knows_service(id, knows) == Some(false) {
            tracing::warn!(sentinel = %address, service = %self.config.service, "sentinel does not know the service");
            self.emit(EventKind::SentinelServiceUnknown { sentinel: address });
        }
    }

    /// Drops connections and subscriptions of entries merged into others.
    fn forget_merged(&mut self) {
        let live: HashSet<u64> = self.list.entries().iter().map(|e| e.id).collect();
        self.links.retain(|id, conn| {
            let keep = live.contains(id);
            if !keep {
                conn.close();
            }
            keep
        });
        self.subscribers.retain(|id, token| {
            let keep = live.contains(id);
            if !keep {
                token.cancel();
            }
            keep
        });
        self.observed.retain(|id| live.contains(id));
    }

    fn sentinels_changed(&mut self) {
        self.forget_merged();
        self.ensure_subscribers();
        self.emit(EventKind::SentinelsChanged {
            sentinels: self.list.infos(),
        });
        self.publish();
    }

    /// One event subscription per known sentinel (none when `sentinel_events` is off).
    fn ensure_subscribers(&mut self) {
        if !self.config.sentinel_events {
            return;
        }
        for entry in self.list.entries() {
            if self.subscribers.contains_key(&entry.id) {
                continue;
            }
            let token = self.cancel.child_token();
            self.subscribers.insert(entry.id, token.clone());
            self.tracker.spawn(subscriber::run(
                entry.address.clone(),
                self.settings.clone(),
                self.settings.sentinel_connect.clone(),
                Backoff::new(
                    Duration::from_millis(self.config.retry_base_ms),
                    Duration::from_millis(self.config.retry_max_ms),
                ),
                self.sentinel_events_tx.clone(),
                token,
            ));
        }
    }

    fn publish(&mut self) {
        let topology = Topology {
            service: self.config.service.clone(),
            primary: self.primary.clone(),
            replicas: self.replicas.clone(),
            sentinels: self.list.infos(),
            epoch: self.epoch,
            healthy: self.healthy,
        };
        // Snapshot and events go out under the lock that new subscribers take, so a subscriber
        // either gets these events or a snapshot that already contains them, never neither.
        let _guard = self.publishing.locked();
        self.status.send_replace(Status {
            topology: Arc::new(topology),
            last_error: self.last_error.clone(),
            rounds: self.rounds,
            fenced: Arc::new(self.fenced()),
        });
        for event in self.unpublished.drain(..) {
            let _ = self.events.send(event);
        }
    }

    fn fenced(&self) -> Vec<Fenced> {
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

    /// Queues an event; [`Actor::publish`] sends it once the snapshot shows the change, so a
    /// host that reads the topology on an event never sees the state from before it.
    fn emit(&mut self, kind: EventKind) {
        self.unpublished.push(Event {
            kind,
            service: self.config.service.clone(),
            at: unix_ms(),
        });
    }

    fn stop(&mut self) {
        self.lift_fence();
        for token in self.subscribers.values() {
            token.cancel();
        }
        for conn in self.links.values() {
            conn.close();
        }
        if let Some(conn) = self.primary_conn.take() {
            conn.close();
        }
    }
}
