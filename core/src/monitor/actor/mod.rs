//! The monitor task's state and loop; what it does with events, promotions, replicas and
//! sentinels is in the submodules.

mod events;
mod fence;
mod fencing;
mod majority;

use fence::{Fence, Retired, RETIRED_FOR};
mod replicas;
mod sentinels;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::backoff::Backoff;
use super::command::Command;
use super::promotion::Promoted;
use super::status::{Publishing, Status};
use super::subscriber::{self, Received};
use crate::config::{Address, Config};
use crate::error::Error;
use crate::resp::Connection;
use crate::sentinel::discovery::Known;
use crate::sentinel::discovery::{self, Found, Round, RoundSettings, SentinelTarget};
use crate::sentinel::links::Link;
use crate::sentinel::sentinels::SentinelList;
use crate::sync::Locked;
use crate::types::{unix_ms, Event, EventKind, Topology};

/// The reason given for events about replicas (and other sentinels' view of them).
const REPLICA_EVENT: &str = "replica event";

/// The same event published by several sentinels within this window is handled once.
const DEDUPE_WINDOW: Duration = Duration::from_secs(2);

/// The first delay between rounds that the data path asks for; doubles while reports keep coming.
const REPORT_BASE: Duration = Duration::from_millis(100);

pub(super) struct Actor {
    config: Config,
    settings: RoundSettings,
    list: SentinelList,
    links: HashMap<u64, Arc<Link>>,
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
    subscribers: HashMap<u64, subscriber::Membership>,
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
    publishing: Arc<Publishing>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    /// The sentinel-majority fence, with `sentinel_majority_ms`.
    majority: Option<majority::Majority>,
    /// When the fence next asks every sentinel.
    heartbeat_at: Instant,
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
        let (tx, rx) = mpsc::unbounded_channel();
        let (promotions_tx, promotions_rx) = mpsc::unbounded_channel();
        let now = Instant::now();
        let majority = (config.sentinel_majority_ms > 0).then(|| {
            majority::Majority::new(Duration::from_millis(config.sentinel_majority_ms), now)
        });
        Actor {
            heartbeat_at: now + majority.as_ref().map_or(Duration::ZERO, |m| m.period()),
            majority,
            fence: None,
            retired: Vec::new(),
            confirmed: true,
            promotions_tx,
            promotions_rx: Some(promotions_rx),
            report_backoff: Backoff::new(
                REPORT_BASE.max(config.retry_base()),
                config.retry_max().max(REPORT_BASE),
            ),
            report_not_before: Instant::now(),
            deferred_report: None,
            deferred_trigger: None,
            switches: 0,
            list: SentinelList::new(&config.sentinels),
            backoff: Backoff::new(config.retry_base(), config.retry_max()),
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
            let heartbeat_at = self.heartbeat_at;
            tokio::select! {
                _ = sleep_until(at) => return Some(if self.healthy { "periodic check" } else { "retry" }),
                _ = sleep_until(heartbeat_at), if self.majority.is_some() => {
                    self.heartbeat(sentinel_events, promotions).await;
                    if let Some(reason) = self.deferred_trigger.take() {
                        return Some(reason);
                    }
                }
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
        let quiet = self.config.check_interval().max(Duration::from_secs(1));
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

    /// Every known sentinel in asking order, with its open connection if any.
    fn targets(&self) -> Vec<SentinelTarget> {
        self.list
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
            .collect()
    }

    /// Runs one round and applies it; returns when the next scheduled round is due.
    async fn round_and_apply(
        &mut self,
        reason: &'static str,
        sentinel_events: &mut mpsc::UnboundedReceiver<Received>,
        promotions: &mut mpsc::UnboundedReceiver<Promoted>,
    ) -> Instant {
        let targets = self.targets();
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
            return Instant::now() + self.config.check_interval();
        };
        self.rounds += 1;
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
            healthy = self.healthy,
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

    /// Asks every known sentinel for the service's master entry (the sentinel-majority fence's
    /// heartbeat), records who answered, and publishes when the fence changes. Sentinel events
    /// and promotions are handled while it waits; a reason for a round they give is kept in
    /// `deferred_trigger`.
    async fn heartbeat(
        &mut self,
        sentinel_events: &mut mpsc::UnboundedReceiver<Received>,
        promotions: &mut mpsc::UnboundedReceiver<Promoted>,
    ) {
        let Some(majority) = self.majority.as_ref() else {
            return;
        };
        let period = majority.period();
        let deadline = majority.deadline(self.config.sentinel_timeout());
        // Every sentinel at once: a heartbeat does not stagger those reported down.
        let targets: Vec<SentinelTarget> = self
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
        self.heartbeat_at = Instant::now() + period;
        if self.check_majority() {
            self.publish();
        }
    }

    /// Judges the sentinel-majority fence now; true (and the event queued) when it changed.
    fn check_majority(&mut self) -> bool {
        let known = self.list.ask_order();
        let primary = self.primary.clone();
        let Some(majority) = self.majority.as_mut() else {
            return false;
        };
        match majority.evaluate(&known, primary.as_ref(), Instant::now()) {
            Some(majority::Change::Lost { heard, known }) => {
                tracing::warn!(
                    heard,
                    known,
                    "fewer than a majority of the sentinels answered in time: writes wait"
                );
                self.emit(EventKind::SentinelMajorityLost { heard, known });
                true
            }
            Some(majority::Change::Regained { confirmed, known }) => {
                let Some(primary) = primary else { return false };
                tracing::info!(confirmed, known, primary = %primary, "a majority of the sentinels name the primary again: writes resume");
                self.emit(EventKind::SentinelMajorityRegained {
                    primary,
                    confirmed,
                    known,
                });
                true
            }
            None => false,
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
        let _guard = self.publishing.lock.locked();
        self.status.send_replace(Status {
            topology: Arc::new(topology),
            last_error: self.last_error.clone(),
            majority_lost: self.majority.as_ref().is_some_and(|m| m.is_lost()),
            rounds: self.rounds,
            fenced: Arc::new(self.fenced()),
        });
        // After the status: whoever sees the new count reads the new status.
        self.publishing
            .epoch
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        for event in self.unpublished.drain(..) {
            let _ = self.events.send(event);
        }
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
        self.subscribers.clear();
        // Shared with other monitors: dropped, not closed (the last holder closes it).
        self.links.clear();
        if let Some(conn) = self.primary_conn.take() {
            conn.close();
        }
    }
}
