//! The subscription's task: keeps what the application wants subscribed on the node the client
//! uses, across lost connections and failovers, and hands messages to the bounded buffer.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::attempt::pick;
use crate::client::command::Kind;
use crate::client::handle::Inner;
use crate::error::{Error, ErrorCode, Result};
use crate::monitor::{Event, EventKind, Monitor, Status};
use crate::node::Expect;
use crate::resp::{Connection, Frame};
use crate::sync::Locked;
use crate::types::Address;
use crate::types::{unix_ms, Message};

/// The channels and patterns a subscription wants now.
#[derive(Default)]
pub(super) struct Wanted {
    pub(super) channels: BTreeSet<Bytes>,
    pub(super) patterns: BTreeSet<Bytes>,
}

impl Wanted {
    /// Whether `message` belongs to what is wanted now: a message for a channel or pattern
    /// unsubscribed since it arrived is not delivered.
    pub(super) fn wants(&self, message: &Message) -> bool {
        match &message.pattern {
            Some(pattern) => self.patterns.contains(pattern),
            None => self.channels.contains(&message.channel),
        }
    }
}

/// What the user asked the task to send.
pub(super) struct Request {
    pub(super) command: &'static str,
    pub(super) names: Vec<Bytes>,
    pub(super) ack: oneshot::Sender<Result<()>>,
}

/// What a subscription's handles and its task share.
pub(super) struct ControlShared {
    pub(super) wanted: Mutex<Wanted>,
    pub(super) requests: mpsc::UnboundedSender<Request>,
    pub(super) dropped: AtomicU64,
    pub(super) closed: CancellationToken,
}

/// Offers `message` to the buffer without waiting: when it is full the message is dropped and
/// counted. `false` once nobody reads the buffer any more.
fn offer(out: &mpsc::Sender<Message>, dropped: &AtomicU64, message: Message) -> bool {
    match out.try_send(message) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            if dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!("subscription buffer full: dropping the newest messages (counted)");
            }
            true
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

/// A pub/sub command on the wire, waiting for one confirmation per name.
struct InFlight {
    command: &'static str,
    names: Vec<Bytes>,
    remaining: usize,
    deadline: Instant,
    /// The user's request, or `None` for the re-subscription of a restore.
    ack: Option<oneshot::Sender<Result<()>>>,
}

/// Why the task left a node.
enum Left {
    Closed,
    Lost(String),
    /// The node is no longer the one to use: look again without waiting for a new round.
    Moved,
}

pub(super) struct Task {
    pub(super) inner: Arc<Inner>,
    pub(super) monitor: Arc<Monitor>,
    pub(super) control: Arc<ControlShared>,
    pub(super) out: mpsc::Sender<Message>,
    /// Told the outcome of the first subscription.
    pub(super) ready: Option<oneshot::Sender<Result<()>>>,
}

impl Task {
    pub(super) async fn run(mut self, mut requests: mpsc::UnboundedReceiver<Request>) {
        let mut min_round = 0;
        // Since when and from which node the subscription is lost, once it was established.
        let mut lost: Option<(std::time::Instant, Address)> = None;
        loop {
            let found = tokio::select! {
                _ = self.ended() => None,
                found = self.wait_for_node(min_round, &mut requests) => found,
            };
            let Some((address, expect, round)) = found else {
                break;
            };
            let connect_by = Instant::now() + self.inner.config.connect_timeout();
            // A subscription closed (cancelled, timed out) while its connect waits on a node
            // that does not answer drops the half-made connection now, not at `connect_by`.
            let connected = tokio::select! {
                _ = self.ended() => break,
                connected = self.inner.nodes.dedicated(&address, expect, connect_by) => connected,
            };
            let conn = match connected {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::debug!(node = %address, error = %e, "subscriber cannot connect; re-resolving");
                    if self.ready.is_some() && is_permanent(&e) {
                        self.fail_start(e);
                        break;
                    }
                    self.inner.nodes.mark_failed(&address);
                    self.monitor.report("subscriber connection failed", round);
                    min_round = round + 1;
                    continue;
                }
            };
            let left = self
                .serve(&conn, &address, expect, &mut requests, &mut lost)
                .await;
            conn.close();
            match left {
                Left::Closed => break,
                Left::Lost(why) => {
                    tracing::info!(node = %address, reason = %why, "subscription lost; re-subscribing");
                    self.monitor.report("subscriber connection lost", round);
                    min_round = round + 1;
                }
                Left::Moved => {
                    tracing::info!(node = %address, "subscription's node changed; re-subscribing");
                    min_round = 0;
                }
            }
        }
        self.control.closed.cancel();
        self.fail_start(Error::closed());
        // Requests still queued: the subscription is over.
        requests.close();
        while let Ok(request) = requests.try_recv() {
            let _ = request.ack.send(Err(Error::closed()));
        }
    }

    /// Resolves when the subscription or its client is closed.
    async fn ended(&self) {
        tokio::select! {
            _ = self.control.closed.cancelled() => {}
            _ = self.inner.closed.cancelled() => {}
        }
    }

    fn fail_start(&mut self, error: Error) {
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Err(error));
        }
    }

    fn emit(&self, kind: EventKind) {
        let _ = self.inner.local_events.send(Event {
            kind,
            service: self.inner.config.service.clone(),
            at: unix_ms(),
        });
    }

    /// The node to subscribe on from a status of round `min_round` or later; changes asked for
    /// meanwhile are confirmed at once (they apply when subscribed). `None` once the monitor
    /// stopped.
    async fn wait_for_node(
        &self,
        min_round: u64,
        requests: &mut mpsc::UnboundedReceiver<Request>,
    ) -> Option<(Address, Expect, u64)> {
        let mut status = self.monitor.watch_status();
        loop {
            let current = status.borrow_and_update().clone();
            if current.rounds >= min_round {
                if let Some((address, expect)) = pick(&self.inner, &current, Kind::Read) {
                    return Some((address, expect, current.rounds));
                }
            }
            tokio::select! {
                changed = status.changed() => changed.ok()?,
                request = requests.recv() => {
                    let _ = request?.ack.send(Ok(()));
                }
            }
        }
    }

    /// Subscribes everything wanted on `conn`, then delivers its messages and carries out the
    /// user's changes until the subscription ends or has to move.
    async fn serve(
        &mut self,
        conn: &Connection,
        address: &Address,
        expect: Expect,
        requests: &mut mpsc::UnboundedReceiver<Request>,
        lost: &mut Option<(std::time::Instant, Address)>,
    ) -> Left {
        let timeout = self.inner.config.command_timeout();
        let (push, mut frames) = mpsc::unbounded_channel();
        let mut queue: VecDeque<InFlight> = VecDeque::new();
        {
            let wanted = self.control.wanted.locked();
            for (command, names) in [
                ("SUBSCRIBE", &wanted.channels),
                ("PSUBSCRIBE", &wanted.patterns),
            ] {
                if !names.is_empty() {
                    queue.push_back(InFlight {
                        command,
                        names: names.iter().cloned().collect(),
                        remaining: names.len(),
                        deadline: Instant::now(),
                        ack: None,
                    });
                }
            }
        }
        let mut restoring = queue.len();
        let mut current: Option<InFlight> = None;
        let mut status = self.monitor.watch_status();
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let left = loop {
            if restoring == 0 {
                restoring = usize::MAX;
                self.established(address, lost);
            }
            if current.is_none() {
                if let Some(mut next) = queue.pop_front() {
                    next.deadline = Instant::now() + timeout;
                    if let Err(e) = conn.send_pubsub(next.command, &next.names, &push) {
                        queue.push_front(next);
                        break Left::Lost(e.to_string());
                    }
                    current = Some(next);
                }
            }
            let deadline = current.as_ref().map_or(far, |c| c.deadline);
            tokio::select! {
                biased;
                _ = self.ended() => break Left::Closed,
                _ = conn.closed() => break Left::Lost("connection ended".into()),
                frame = frames.recv() => {
                    let Some(frame) = frame else { break Left::Lost("connection ended".into()) };
                    match Frame::parse(frame) {
                        Frame::Message(message) => {
                            if !offer(&self.out, &self.control.dropped, message) {
                                break Left::Closed;
                            }
                        }
                        Frame::Confirmed => {
                            if let Some(c) = current.as_mut() {
                                c.remaining = c.remaining.saturating_sub(1);
                                if c.remaining == 0 {
                                    let done = current.take().expect("checked above");
                                    match done.ack {
                                        Some(ack) => { let _ = ack.send(Ok(())); }
                                        None => restoring -= 1,
                                    }
                                }
                            }
                        }
                        Frame::Refused(e) => match current.take() {
                            Some(InFlight { ack: Some(ack), command, names, .. }) => {
                                self.forget(command, &names);
                                let _ = ack.send(Err(e));
                            }
                            Some(InFlight { ack: None, .. }) => {
                                if self.ready.is_some() {
                                    self.fail_start(e);
                                    break Left::Closed;
                                }
                                break Left::Lost(format!("re-subscribing was refused: {e}"));
                            }
                            None => tracing::debug!(error = %e, "unexpected error reply on a subscriber connection"),
                        },
                        Frame::Other => {}
                    }
                }
                request = requests.recv() => {
                    let Some(request) = request else { break Left::Closed };
                    queue.push_back(InFlight {
                        command: request.command,
                        remaining: request.names.len(),
                        names: request.names,
                        deadline: far,
                        ack: Some(request.ack),
                    });
                }
                changed = status.changed() => {
                    if changed.is_err() {
                        break Left::Closed;
                    }
                    let now = status.borrow_and_update().clone();
                    if !still_the_node(&now, address, expect) {
                        break Left::Moved;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    break Left::Lost(format!("no confirmation of {} within {}",
                        current.as_ref().map_or("a pub/sub command", |c| c.command),
                        crate::error::duration_text(timeout)));
                }
            }
        };
        // The user's changes are recorded in `wanted`: the next node gets them.
        for pending in current.into_iter().chain(queue) {
            if let Some(ack) = pending.ack {
                let _ = ack.send(Ok(()));
            }
        }
        // Lost only once it was established; before its first confirmation the caller's
        // deadline decides, and after a loss the gap simply goes on.
        if matches!(left, Left::Lost(_) | Left::Moved) && restoring == usize::MAX {
            *lost = Some((std::time::Instant::now(), address.clone()));
            self.emit(EventKind::SubscriptionLost {
                address: address.clone(),
            });
        }
        left
    }

    /// Everything wanted is subscribed on `address`: the first time, the caller learns it;
    /// after a loss, `subscription_restored` says so with the gap.
    fn established(&mut self, address: &Address, lost: &mut Option<(std::time::Instant, Address)>) {
        self.inner.nodes.mark_ok(address);
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Ok(()));
        }
        if let Some((since, _)) = lost.take() {
            self.emit(EventKind::SubscriptionRestored {
                address: address.clone(),
                gap_ms: since.elapsed().as_millis() as u64,
            });
        }
    }

    /// Takes back names the node refused to subscribe.
    fn forget(&self, command: &str, names: &[Bytes]) {
        let mut wanted = self.control.wanted.locked();
        let set = match command {
            "SUBSCRIBE" => &mut wanted.channels,
            "PSUBSCRIBE" => &mut wanted.patterns,
            _ => return,
        };
        for name in names {
            set.remove(name);
        }
    }
}

/// Whether the subscription's node is still the one to use: the primary it expected, or a
/// replica the sentinels still report healthy.
fn still_the_node(status: &Status, address: &Address, expect: Expect) -> bool {
    match expect {
        Expect::Primary => status.topology.primary.as_ref() == Some(address),
        Expect::Replica => status.topology.replicas.contains(address),
    }
}

/// A failure that trying again cannot fix: refused credentials, failed TLS, a bad option.
fn is_permanent(e: &Error) -> bool {
    matches!(
        e.code(),
        ErrorCode::Auth | ErrorCode::Tls | ErrorCode::Config
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(channel: &str) -> Message {
        Message {
            channel: Bytes::copy_from_slice(channel.as_bytes()),
            pattern: None,
            payload: Bytes::from_static(b"x"),
        }
    }

    #[test]
    fn a_full_buffer_drops_the_newest_and_counts_them() {
        let (out, mut rx) = mpsc::channel(2);
        let dropped = AtomicU64::new(0);
        for i in 0..5 {
            assert!(offer(&out, &dropped, message(&format!("c{i}"))));
        }
        assert_eq!(dropped.load(Ordering::Relaxed), 3);
        assert_eq!(rx.try_recv().unwrap().channel, "c0");
        assert_eq!(rx.try_recv().unwrap().channel, "c1");
        assert!(rx.try_recv().is_err());
        drop(rx);
        assert!(!offer(&out, &dropped, message("late")));
    }

    #[test]
    fn messages_of_unsubscribed_channels_and_patterns_are_not_wanted() {
        let wanted = Wanted {
            channels: [Bytes::from_static(b"a")].into_iter().collect(),
            patterns: [Bytes::from_static(b"n*")].into_iter().collect(),
        };
        assert!(wanted.wants(&message("a")));
        assert!(!wanted.wants(&message("b")));
        let by_pattern = Message {
            pattern: Some(Bytes::from_static(b"n*")),
            ..message("news")
        };
        assert!(wanted.wants(&by_pattern));
        let by_old_pattern = Message {
            pattern: Some(Bytes::from_static(b"x*")),
            ..message("a")
        };
        assert!(!wanted.wants(&by_old_pattern));
    }
}
