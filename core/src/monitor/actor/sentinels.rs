//! The sentinels: who they are, who answered, their TILT and service state, their shared
//! connections, and one event subscription per sentinel whose duplicates are dropped here.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::publisher::Publisher;
use crate::config::Config;
use crate::monitor::backoff::Backoff;
use crate::monitor::sentinel_feed::{self, Received};
use crate::sentinel::discovery::{Answer, RoundSettings, SentinelOutcome, SentinelTarget};
use crate::sentinel::events::SentinelEvent;
use crate::sentinel::links::Link;
use crate::sentinel::replies::InstanceInfo;
use crate::sentinel::sentinels::SentinelList;
use crate::types::Address;
use crate::types::{EventKind, SentinelInfo};

/// The same event published by several sentinels within this window is handled once.
const DEDUPE_WINDOW: Duration = Duration::from_secs(2);

/// The monitor's sentinels and what it hears from them.
pub(super) struct Sentinels {
    /// The service, named in warnings about sentinels that do not know it.
    service: String,
    /// Every sentinel known (configured, learned from peers and `+sentinel`), in asking order.
    list: SentinelList,
    /// Open connections by sentinel id, shared with other monitors, reused by the next round.
    links: HashMap<u64, Arc<Link>>,
    /// Sentinels whose state was recorded once: the first answer of one that is up is not news,
    /// the first failure of one is.
    observed: HashSet<u64>,
    /// Whether to subscribe to sentinel events at all (`sentinel_events`).
    subscribe: bool,
    /// The retry schedule each new subscription starts with.
    subscription_retry: Backoff,
    /// This monitor's place on each sentinel's shared event subscription.
    subscriptions: HashMap<u64, sentinel_feed::Membership>,
    /// Where the subscriptions deliver events.
    events_tx: mpsc::UnboundedSender<Received>,
    /// The receiving end, taken by the monitor's loop when it starts.
    events_rx: Option<mpsc::UnboundedReceiver<Received>>,
    /// Events handled within the last [`DEDUPE_WINDOW`], oldest first, by their dedupe key.
    recent: VecDeque<(String, Instant)>,
    /// The sentinels that make up the service now, what the majority fence counts over: the
    /// last round's winning sentinel, the peers it listed (`SENTINEL SENTINELS`, which drops
    /// removed sentinels after `SENTINEL RESET`), and those of the previous members that still
    /// answer (a sentinel just reset lists no peers until their hellos arrive, seconds later).
    /// `None` before a round said. The list above only grows, so a sentinel replaced on a new
    /// address stays in it; a member drops out only once it stops answering and no winner
    /// lists it.
    members: Option<Vec<u64>>,
}

impl Sentinels {
    pub(super) fn new(config: &Config) -> Sentinels {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        Sentinels {
            service: config.service.clone(),
            list: SentinelList::new(&config.sentinels),
            links: HashMap::new(),
            observed: HashSet::new(),
            subscribe: config.sentinel_events,
            subscription_retry: Backoff::new(config.retry_base(), config.retry_max()),
            subscriptions: HashMap::new(),
            events_tx,
            events_rx: Some(events_rx),
            recent: VecDeque::new(),
            members: None,
        }
    }

    /// The events of every subscription, once.
    pub(super) fn take_events(&mut self) -> Option<mpsc::UnboundedReceiver<Received>> {
        self.events_rx.take()
    }

    /// Ids of the known sentinels in asking order.
    pub(super) fn ask_order(&self) -> Vec<u64> {
        self.list.ask_order()
    }

    pub(super) fn infos(&self) -> Vec<SentinelInfo> {
        self.list.infos()
    }

    /// Every known sentinel in asking order, with its open connection if any.
    pub(super) fn targets(&self) -> Vec<SentinelTarget> {
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

    /// A connection to some sentinel that is still open.
    pub(super) fn open_link(&self) -> Option<Arc<Link>> {
        self.links.values().find(|c| !c.is_closed()).cloned()
    }

    /// Adds a sentinel; true when the list changed (see [`Sentinels::changed`]).
    pub(super) fn learn(&mut self, address: Address, run_id: Option<String>, down: bool) -> bool {
        self.list.learn(address, run_id, down)
    }

    /// Adds the peers a sentinel reported; true when the list changed. Returns their ids too.
    pub(super) fn learn_peers(&mut self, peers: Vec<InstanceInfo>) -> (bool, Vec<u64>) {
        let mut learned = false;
        let mut ids = Vec::with_capacity(peers.len());
        for peer in peers {
            let address = peer.address.clone();
            learned |= self
                .list
                .learn(peer.address, peer.run_id, peer.flags.is_unhealthy());
            ids.extend(self.list.find(&address));
        }
        (learned, ids)
    }

    /// Takes what round winner `reporter` says makes up the service (itself and `peers`), with
    /// the previous members that `answered_lately`, as the members (see the field).
    pub(super) fn adopt_view(
        &mut self,
        reporter: u64,
        peers: Vec<u64>,
        answered_lately: impl Fn(u64) -> bool,
    ) {
        let mut members = vec![reporter];
        let kept = self
            .members
            .iter()
            .flatten()
            .copied()
            .filter(|id| answered_lately(*id));
        for id in peers.into_iter().chain(kept) {
            if !members.contains(&id) && self.list.get(id).is_some() {
                members.push(id);
            }
        }
        self.members = Some(members);
    }

    /// The sentinels a majority is counted over: the members, or every known one before a
    /// round said.
    pub(super) fn members(&self) -> Vec<u64> {
        match &self.members {
            Some(members) => members.clone(),
            None => self.ask_order(),
        }
    }

    /// Bookkeeping of who answered: connections kept for the next round, resolutions and run ids
    /// recorded, up/down transitions queued as events.
    pub(super) fn record(
        &mut self,
        outcomes: Vec<SentinelOutcome>,
        timed_out: Vec<u64>,
        publisher: &mut Publisher,
    ) {
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
                    // It failed or answered garbage: broken for every monitor sharing it.
                    if let Some(conn) = self.links.remove(&outcome.id) {
                        conn.close();
                    }
                }
            }
            self.set_up(outcome.id, outcome.answer.is_ok(), publisher);
            if let Some((tilt, asked)) = outcome.tilt {
                self.set_tilt(outcome.id, tilt, asked.into_std(), false, publisher);
            }
            match &outcome.answer {
                Ok(Answer::Unknown) => self.set_knows_service(outcome.id, false, publisher),
                Ok(Answer::Master(_)) => self.set_knows_service(outcome.id, true, publisher),
                Err(_) => {}
            }
        }
        for id in timed_out {
            if let Some(conn) = self.links.remove(&id) {
                conn.close();
            }
            self.set_up(id, false, publisher);
        }
        self.forget_merged();
    }

    fn set_up(&mut self, id: u64, up: bool, publisher: &mut Publisher) {
        let Some(address) = self.list.get(id).map(|e| e.address.clone()) else {
            return;
        };
        let changed = self.list.set_up(id, up).is_some();
        let first = self.observed.insert(id);
        if up && changed && !first {
            tracing::info!(sentinel = %address, "sentinel up");
            publisher.emit(EventKind::SentinelUp { sentinel: address });
        } else if !up && (changed || first) {
            tracing::warn!(sentinel = %address, "sentinel down");
            publisher.emit(EventKind::SentinelDown { sentinel: address });
        }
    }

    fn set_tilt(
        &mut self,
        id: u64,
        on: bool,
        asked: std::time::Instant,
        from_event: bool,
        publisher: &mut Publisher,
    ) {
        let Some(address) = self.list.get(id).map(|e| e.address.clone()) else {
            return;
        };
        if self.list.set_tilt(id, on, asked, from_event).is_some() {
            tracing::warn!(sentinel = %address, on, "sentinel TILT");
            publisher.emit(EventKind::SentinelTilt {
                sentinel: address,
                on,
            });
        }
    }

    /// A `+tilt`/`-tilt` event from `from`; true when `from` is a known sentinel.
    pub(super) fn tilt_event(
        &mut self,
        from: &Address,
        on: bool,
        publisher: &mut Publisher,
    ) -> bool {
        let Some(id) = self.list.find(from) else {
            return false;
        };
        self.set_tilt(id, on, Instant::now().into_std(), true, publisher);
        true
    }

    fn set_knows_service(&mut self, id: u64, knows: bool, publisher: &mut Publisher) {
        let Some(address) = self.list.get(id).map(|e| e.address.clone()) else {
            return;
        };
        if self.list.set_knows_service(id, knows) == Some(false) {
            tracing::warn!(sentinel = %address, service = %self.service, "sentinel does not know the service");
            publisher.emit(EventKind::SentinelServiceUnknown { sentinel: address });
        }
    }

    /// Drops connections and subscriptions of entries merged into others.
    fn forget_merged(&mut self) {
        let live: HashSet<u64> = self.list.entries().iter().map(|e| e.id).collect();
        // Shared with other monitors: dropped, not closed (the last holder closes it).
        self.links.retain(|id, _| live.contains(id));
        self.subscriptions.retain(|id, _| live.contains(id));
        self.observed.retain(|id| live.contains(id));
    }

    /// After the list changed: forgets merged entries, subscribes to new ones and queues the
    /// event.
    pub(super) fn changed(&mut self, settings: &RoundSettings, publisher: &mut Publisher) {
        self.forget_merged();
        self.subscribe_all(settings);
        publisher.emit(EventKind::SentinelsChanged {
            sentinels: self.list.infos(),
        });
    }

    /// One event subscription per known sentinel (none when `sentinel_events` is off).
    pub(super) fn subscribe_all(&mut self, settings: &RoundSettings) {
        if !self.subscribe {
            return;
        }
        for entry in self.list.entries() {
            if self.subscriptions.contains_key(&entry.id) {
                continue;
            }
            let membership = sentinel_feed::join(
                (entry.address.clone(), settings.sentinel_side.clone()),
                settings.clone(),
                settings.sentinel_connect.clone(),
                self.subscription_retry.clone(),
                self.events_tx.clone(),
            );
            self.subscriptions.insert(entry.id, membership);
        }
    }

    /// Whether the same fact was handled within the dedupe window (then it is dropped); a new
    /// one is remembered.
    pub(super) fn heard_before(&mut self, received: &Received) -> bool {
        let Received { from, raw, event } = received;
        // Several sentinels publish the same fact, sometimes with different trailing text
        // (`#quorum 2/2` and `#quorum 3/2`): the key leaves that text out.
        let key = match event {
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
            return true;
        }
        self.recent.push_back((key, now));
        false
    }

    /// Leaves the subscriptions and drops the connections; the monitor is stopping.
    pub(super) fn stop(&mut self) {
        self.subscriptions.clear();
        // Shared with other monitors: dropped, not closed (the last holder closes it).
        self.links.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_follow_the_winners_view_keep_answering_ones_and_drop_silent_unlisted_ones() {
        let config =
            Config::from_url("redis+sentinel://10.0.0.1:1,10.0.0.2:2,10.0.0.3:3/svc").unwrap();
        let mut sentinels = Sentinels::new(&config);
        let [a, b, c] = sentinels.ask_order()[..] else {
            panic!("three seeds")
        };
        // Before a round said, every known sentinel counts.
        assert_eq!(sentinels.members(), vec![a, b, c]);
        sentinels.adopt_view(a, vec![b, c], |_| true);
        assert_eq!(sentinels.members(), vec![a, b, c]);
        // c is replaced by d (learned) and the others are reset: a, just reset, lists no peers,
        // but b answers, so it stays; c is silent and no longer listed: out.
        let d = sentinels
            .list
            .learn(Address::new("10.0.0.4", 4), None, false);
        assert!(d);
        let d = sentinels.list.find(&Address::new("10.0.0.4", 4)).unwrap();
        sentinels.adopt_view(a, vec![], |id| id == b || id == d);
        assert_eq!(sentinels.members(), vec![a, b]);
        sentinels.adopt_view(b, vec![a, d], |id| id == a);
        assert_eq!(sentinels.members(), vec![b, a, d]);
        // Silent but listed by the winner (cut off, not removed): still a member.
        sentinels.adopt_view(a, vec![b, d], |_| false);
        assert_eq!(sentinels.members(), vec![a, b, d]);
        assert_eq!(sentinels.ask_order().len(), 4, "the list itself only grows");
    }
}
