//! The monitor task: its loop, and the steps that take more than one of its parts. Each part
//! owns its state and the logic on it: the sentinels, the primary and its replicas, fencing,
//! the round schedule, and the publisher of the status and events.

mod events;
mod fencing;
mod majority;
mod primary;
mod publisher;
mod replicas;
mod schedule;
mod sentinels;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::command::Command;
use super::promotion::{Announced, Promoted};
use super::sentinel_feed::Received;
use super::status::{Publishing, Status};
use crate::config::Config;
use crate::resp::Connection;
use crate::sentinel::discovery::{
    self, Found, Known, Round, RoundSettings, SentinelOutcome, SentinelTarget,
};
use crate::types::Address;
use crate::types::{Event, EventKind, Topology};
use events::{Meaning, REPLICA_EVENT};
use fencing::{Fencing, WatchEnd};
use primary::Primary;
use publisher::Publisher;
use schedule::Schedule;
use sentinels::Sentinels;

/// One service's monitor: what it was started with, and its parts.
pub(super) struct Actor {
    /// The options it was started with.
    config: Config,
    /// What rounds, watches and subscriptions connect with.
    settings: RoundSettings,
    /// Stops the loop and, through child tokens, every watch it started.
    cancel: CancellationToken,
    /// The monitor's tasks (this one and its promotion watches), so a close waits for them all.
    tracker: TaskTracker,
    /// The sentinels, their connections and event subscriptions.
    sentinels: Sentinels,
    /// The primary, its connection and its replicas.
    primary: Primary,
    /// The primaries writes must not go to.
    fencing: Fencing,
    /// When rounds run, and how many have.
    schedule: Schedule,
    /// The status and events for the handles.
    publisher: Publisher,
}

impl Actor {
    pub(super) fn new(
        config: Config,
        settings: RoundSettings,
        status: watch::Sender<Status>,
        events: broadcast::Sender<Event>,
        publishing: Arc<Publishing>,
        cancel: CancellationToken,
        tracker: TaskTracker,
    ) -> Actor {
        Actor {
            sentinels: Sentinels::new(&config),
            primary: Primary::new(),
            fencing: Fencing::new(&config),
            schedule: Schedule::new(&config),
            publisher: Publisher::new(config.service.clone(), status, events, publishing),
            config,
            settings,
            cancel,
            tracker,
        }
    }

    pub(super) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let span = tracing::info_span!("monitor", service = %self.config.service);
        async move {
            let Some(mut sentinel_events) = self.sentinels.take_events() else { return };
            let Some(mut promotions) = self.fencing.take_promotions() else { return };
            self.sentinels.subscribe_all(&self.settings);
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
        if let Some(reason) = self.schedule.take_deferred() {
            let replicas_only = reason == REPLICA_EVENT && self.primary.healthy;
            if !replicas_only || !self.refresh_replicas().await {
                return Some(reason);
            }
        }
        loop {
            let deferred = self.schedule.deferred_report();
            let primary_conn = self.primary.conn();
            let primary_closed = async move {
                match primary_conn {
                    Some(conn) => conn.closed().await,
                    None => std::future::pending().await,
                }
            };
            let heartbeat_at = self.fencing.next_heartbeat();
            tokio::select! {
                _ = sleep_until(at) => return Some(if self.primary.healthy { "periodic check" } else { "retry" }),
                _ = sleep_until_some(heartbeat_at) => {
                    self.heartbeat(sentinel_events, promotions).await;
                    if let Some(reason) = self.schedule.take_deferred() {
                        return Some(reason);
                    }
                }
                cmd = commands.recv() => match cmd? {
                    Command::Refresh(reason) => return Some(reason),
                    Command::Report(reason, round) => {
                        if !self.schedule.served(round) && self.primary.healthy {
                            let quiet = self.config.check_interval().max(Duration::from_secs(1));
                            if let Some(reason) = self.schedule.gate_report(reason, quiet) {
                                return Some(reason);
                            }
                        }
                    }
                },
                _ = sleep_until_some(deferred.map(|(at, _)| at)) => {
                    self.schedule.clear_deferred_report();
                    if self.primary.healthy {
                        return deferred.map(|(_, reason)| reason);
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
                        Some(REPLICA_EVENT) if self.primary.healthy => {
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
                    if self.primary.connection_lost(&mut self.publisher) {
                        self.publish();
                    }
                    return Some("connection to primary lost");
                }
            }
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
                        self.schedule.defer(reason);
                    }
                }
                Some(promoted) = promotions.recv() => {
                    let switches = self.primary.switches;
                    if let Some(reason) = self.on_promoted(promoted) {
                        self.schedule.defer(reason);
                    }
                    if self.primary.switches != switches {
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
        let targets = self.sentinels.targets();
        let known = Known {
            current: self.primary.address.clone().zip(self.primary.conn()),
            epoch: self.primary.epoch,
            retired: self.fencing.retired_for_round(),
        };
        let started = Instant::now();
        self.schedule.round_started();
        let settings = self.settings.clone();
        let round = discovery::run(&settings, targets, known);
        let Some(Round {
            mut outcomes,
            mut stragglers,
            result,
        }) = self.listening(round, sentinel_events, promotions).await
        else {
            tracing::debug!(reason, "round dropped: a verified switch came first");
            return Instant::now() + self.config.check_interval();
        };
        self.schedule.round_finished();
        // Most of the others answered while the winner was verified; record them before the
        // snapshot is published so it shows them up.
        outcomes.extend(stragglers.take_finished());
        self.record_sentinels(outcomes, Vec::new());
        let next = self.apply(result).await;
        if self.check_majority() {
            self.publish();
        }
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
            healthy = self.primary.healthy,
            "round finished"
        );
        next
    }

    async fn apply(&mut self, result: crate::Result<Found>) -> Instant {
        match result {
            Ok(found) => {
                self.on_found(found).await;
                self.publish();
                Instant::now() + self.config.check_interval()
            }
            Err(error) => {
                self.primary.not_found();
                let delay = self.schedule.failed(error.clone());
                self.publisher.emit(EventKind::DiscoveryFailed { error });
                self.publish();
                Instant::now() + delay
            }
        }
    }

    async fn on_found(&mut self, found: Found) {
        let Found {
            sentinel_id,
            primary,
            primary_conn,
            replicas,
            sentinels,
        } = found;
        let new = primary.address.clone();
        if !self.primary.is(&new) {
            let old = self.primary.replace(new.clone(), None);
            self.fencing
                .replaced(old.as_ref(), &new, self.primary.epoch, Instant::now());
            tracing::info!(old = ?old.as_ref().map(|a| a.to_string()), new = %new, "primary changed");
            self.publisher.emit(EventKind::PrimaryChanged {
                old,
                new: new.clone(),
            });
        }
        // A round that kept the current primary because every sentinel still named the one it
        // replaced has confirmed nothing.
        let confirmed = replicas.is_some() || sentinels.is_some();
        self.primary.found(
            primary_conn,
            primary.config_epoch,
            confirmed,
            &mut self.publisher,
        );
        self.schedule.succeeded();

        if let Some(reported) = replicas {
            let next =
                replicas::merge(&self.settings, &self.primary.replicas, &new, reported).await;
            self.primary.set_replicas(next, &mut self.publisher);
        } else {
            self.primary.drop_primary_from_replicas(&mut self.publisher);
        }

        if let Some(peers) = sentinels {
            let (learned, peers) = self.sentinels.learn_peers(peers);
            let fencing = &self.fencing;
            self.sentinels
                .adopt_view(sentinel_id, peers, |id| fencing.answered_lately(id));
            if learned {
                self.sentinels_changed();
            }
        }
    }

    /// Re-reads the replica list from one sentinel that answered in the last round. Returns
    /// false when no sentinel could be asked, so the caller falls back to a full round.
    async fn refresh_replicas(&mut self) -> bool {
        let Some(primary) = self.primary.address.clone() else {
            return false;
        };
        let Some(link) = self.sentinels.open_link() else {
            return false;
        };
        let Ok(reported) = replicas::ask(&link, &self.settings).await else {
            return false;
        };
        let next =
            replicas::merge(&self.settings, &self.primary.replicas, &primary, reported).await;
        if self.primary.set_replicas(next, &mut self.publisher) {
            self.publish();
        }
        true
    }

    /// Asks every known sentinel for the service's master entry (the sentinel-majority fence's
    /// heartbeat), records who answered, and publishes when the fence changes. Sentinel events
    /// and promotions are handled while it waits; a reason for a round they give is deferred.
    async fn heartbeat(
        &mut self,
        sentinel_events: &mut mpsc::UnboundedReceiver<Received>,
        promotions: &mut mpsc::UnboundedReceiver<Promoted>,
    ) {
        let Some(deadline) = self
            .fencing
            .heartbeat_deadline(self.config.sentinel_timeout())
        else {
            return;
        };
        // Every sentinel at once: a heartbeat does not stagger those reported down.
        let targets: Vec<SentinelTarget> = self
            .sentinels
            .targets()
            .into_iter()
            .map(|t| SentinelTarget {
                reported_down: false,
                ..t
            })
            .collect();
        let settings = self.settings.clone();
        let asked = discovery::ask_each(&settings, targets, deadline);
        if let Some((outcomes, timed_out)) =
            self.listening(asked, sentinel_events, promotions).await
        {
            self.record_sentinels(outcomes, timed_out);
        }
        self.fencing.heartbeat_done();
        if self.check_majority() {
            self.publish();
        }
    }

    /// Applies what a sentinel event says at once where that is safe, and tells whether it
    /// calls for a round. Duplicates (the same fact from several sentinels) are dropped.
    fn on_sentinel_event(&mut self, received: Received) -> Option<&'static str> {
        // The subscription is shared with the monitors of other services on these sentinels.
        if received
            .event
            .service()
            .is_some_and(|s| s != self.config.service)
        {
            return None;
        }
        if self.sentinels.heard_before(&received) {
            return None;
        }
        let Received { from, raw, event } = received;
        tracing::debug!(event = %raw, "sentinel event");
        match events::meaning(event, &self.primary) {
            Meaning::Nothing => None,
            Meaning::Round(reason) => Some(reason),
            Meaning::Switch(new) => {
                // The announced address is verified with ROLE and adopted as soon as it answers
                // master (a round now could still hear the old primary from sentinels that have
                // not switched yet); meanwhile no write goes to the old one.
                match self.primary.address.clone() {
                    Some(primary) if primary != new => {
                        self.start_fence(new, Some(primary), Announced::Switch)
                    }
                    _ => self.fencing.watch(
                        &self.tracker,
                        &self.settings,
                        new,
                        Announced::Switch,
                        self.cancel.child_token(),
                    ),
                }
                None
            }
            Meaning::Promotion { promoting, old } => {
                self.start_fence(promoting, old, Announced::Promotion);
                None
            }
            Meaning::Aborted { primary, event } => {
                let ours = self.fencing.is_demoting(&primary);
                if ours {
                    tracing::warn!(primary = %primary, event = %event, "failover aborted; writes resume");
                    self.fencing.lift();
                    self.publish();
                }
                ours.then_some("failover aborted")
            }
            Meaning::Sentinel { address, run_id } => {
                if self.sentinels.learn(address.clone(), Some(run_id), false) {
                    tracing::info!(sentinel = %address, "sentinel learned from +sentinel");
                    self.sentinels_changed();
                }
                None
            }
            Meaning::Tilt(on) => {
                if self.sentinels.tilt_event(&from, on, &mut self.publisher) {
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
        let Some(primary) = self.primary.address.clone() else {
            return;
        };
        let Some(cancel) =
            self.fencing
                .raise(&primary, old.as_ref(), &promoting, announced, &self.cancel)
        else {
            return;
        };
        if announced == Announced::Promotion {
            self.publisher.emit(EventKind::FailoverStarted {
                primary,
                promoting: promoting.clone(),
            });
        }
        self.publish();
        self.fencing
            .watch(&self.tracker, &self.settings, promoting, announced, cancel);
    }

    /// The end of a promotion watch: switch to the node if it answered master; otherwise lift
    /// the fence (the failover did not happen in time) or fall back to a round.
    fn on_promoted(&mut self, promoted: Promoted) -> Option<&'static str> {
        match self
            .fencing
            .watch_ended(promoted, self.primary.address.as_ref())
        {
            WatchEnd::Adopt(address, conn) => {
                self.adopt(address, conn);
                None
            }
            WatchEnd::Settled { lifted, round } => {
                if lifted {
                    self.publish();
                }
                round
            }
        }
    }

    /// Switches to a ROLE-verified primary that the sentinels announced (or are promoting).
    fn adopt(&mut self, new: Address, conn: Connection) {
        let old = self.primary.replace(new.clone(), Some(conn));
        let since = self.fencing.demoted_since(old.as_ref());
        self.fencing
            .replaced(old.as_ref(), &new, self.primary.epoch, since);
        tracing::info!(old = ?old.as_ref().map(|a| a.to_string()), new = %new, "primary changed (verified announcement)");
        self.publisher.emit(EventKind::PrimaryChanged { old, new });
        self.primary.switched(&mut self.publisher);
        self.schedule.switched();
        self.publish();
    }

    fn record_sentinels(&mut self, outcomes: Vec<SentinelOutcome>, timed_out: Vec<u64>) {
        self.fencing.heard(&outcomes, Instant::now());
        self.sentinels
            .record(outcomes, timed_out, &mut self.publisher);
    }

    fn sentinels_changed(&mut self) {
        self.sentinels.changed(&self.settings, &mut self.publisher);
        self.publish();
    }

    /// Judges the sentinel-majority fence now; true (and the event queued) when it changed.
    fn check_majority(&mut self) -> bool {
        let known = self.sentinels.members();
        self.fencing
            .judge_majority(&known, self.primary.address.as_ref(), &mut self.publisher)
    }

    /// Sends the status as the parts show it now, then the events queued before it.
    fn publish(&mut self) {
        let topology = Topology {
            service: self.config.service.clone(),
            primary: self.primary.address.clone(),
            replicas: self.primary.replicas.clone(),
            sentinels: self.sentinels.infos(),
            epoch: self.primary.epoch,
            healthy: self.primary.healthy,
        };
        self.publisher.publish(Status {
            topology: Arc::new(topology),
            last_error: self.schedule.last_error().cloned(),
            majority_lost: self.fencing.majority_lost(),
            rounds: self.schedule.rounds(),
            fenced: Arc::new(self.fencing.fenced()),
        });
    }

    fn stop(&mut self) {
        self.fencing.lift();
        self.sentinels.stop();
        self.primary.close();
    }
}

/// Sleeps until `at`; forever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}
