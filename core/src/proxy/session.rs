//! One client connection and its own upstream: requests read, held while a promotion is under
//! way, forwarded in order; replies matched to what they answer, judged (a write's reply from a
//! primary being demoted is never a success) and forwarded byte for byte; at a primary change
//! the session moves with its state replayed.
//!
//! The decisions live in [`Session`], which does no I/O; [`run`] drives it with the client's
//! and the upstream's sockets on one task.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::time::Instant;

use super::command::{self, Family, Kind, PushKind};
use super::replies;
use super::request::{self, Request};
use super::shared::ProxyState;
use super::state::State;
use super::stats::Counters;
use super::upstream::{self, Stream};
use crate::client::Route;
use crate::resp::Value;
use crate::types::Address;
use crate::types::Protocol;

/// Most requests a session keeps in flight to its upstream before it stops reading its client.
const MAX_INFLIGHT: usize = 16 * 1024;
/// Most requests read from the client and not yet forwarded (held during a promotion).
const MAX_HELD: usize = 16 * 1024;
/// Bytes of replies waiting for a slow client before the upstream is no longer read.
const OUT_LIMIT: usize = 1024 * 1024;
/// Bytes of requests waiting to be written upstream before no more are forwarded.
const UP_LIMIT: usize = 1024 * 1024;
/// How often a session whose requests are held looks at the routing again, besides events:
/// a promotion that aborts may change nothing an event reports.
const HOLD_RECHECK: Duration = Duration::from_millis(20);

/// What a reply read from the upstream answers, in the order requests were written.
#[derive(Debug)]
enum Expect {
    /// A request's reply, judged and forwarded.
    Reply {
        kind: Kind,
        /// Kept for requests whose accepted reply changes the session's state.
        args: Option<Vec<Bytes>>,
        write: bool,
        /// A blocking command: not waited for at a move.
        blocking: bool,
        /// Held until the WAIT that follows it (`wait_replicas`).
        covered: bool,
    },
    /// A (un)subscribe's confirmations, pushed rather than replied.
    Confirmations { remaining: usize },
    /// A command of a replay after a move: its reply is not the client's.
    Replay,
    /// The WAIT that confirms the covered replies before it.
    Wait,
    /// DISCARD sent in place of an EXEC whose WATCH spanned a move: the client gets EXEC's null.
    NullExec,
    /// A reply the proxy gives itself, in order with the server's.
    Local { reply: Bytes, covered: bool },
}

/// Where a session stands towards its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    /// Requests may be written.
    Open,
    /// A promotion is demoting the node, or no other primary is known yet: requests wait.
    Hold,
    /// Another node is the one to use now.
    Move,
    /// No upstream yet (first request, or after a move or a lost connection).
    Connect,
}

/// Why a session ends early.
#[derive(Debug)]
enum End {
    /// The client went away, or the session is done.
    Done,
    /// The session's state cannot follow (logged with the reason).
    Cannot(&'static str),
}

/// The decisions of one session: no I/O.
struct Session {
    shared: Arc<ProxyState>,
    state: State,
    /// The node the upstream goes to, while there is one.
    node: Option<Address>,
    held: VecDeque<(Request, Kind)>,
    /// Since when the front of `held` (or a pending move) waits.
    waiting_since: Option<Instant>,
    inflight: VecDeque<Expect>,
    to_up: BytesMut,
    to_client: BytesMut,
    /// Covered replies kept until their WAIT answers: (reply, is a write's success).
    durable: Vec<(Bytes, bool)>,
    /// Replay confirmations still to swallow.
    swallow: usize,
    /// MULTI written and its EXEC/DISCARD not yet.
    multi: bool,
    /// WATCH written and not yet ended by EXEC, DISCARD, UNWATCH or RESET.
    watching: bool,
    /// The WATCH's connection was replaced: the next EXEC fails as for a changed key.
    watch_broken: bool,
    /// The MULTI's connection was replaced: requests until its EXEC/DISCARD are refused.
    multi_aborted: bool,
    /// Writes forwarded since the last WAIT (`wait_replicas`).
    unconfirmed: bool,
    /// Stop reading the client (malformed input, QUIT, closing): finish what is in flight.
    draining: bool,
    /// Requests a session keeps beyond this many bytes are refused.
    max_request: usize,
    /// The error for a request that could not be read, sent after what came before it.
    malformed: Option<Bytes>,
    /// The routing epoch the gate was last judged at, and the verdict.
    judged: Option<(u64, Gate)>,
    /// The routing epoch the node's fence was last asked at, and the answer.
    fenced: Option<(u64, bool)>,
}

/// Runs one client's session until it ends. Never panics on input; every error is the
/// client's connection closed (after an error reply where Redis would give one).
pub(super) async fn run(shared: Arc<ProxyState>, client: Box<dyn Stream>) {
    let _open = Open::count(shared.counters.clone());
    let mut driver = Driver::new(shared, client);
    let end = driver.run().await;
    if let Err(End::Cannot(why)) = end {
        tracing::debug!(why, "proxy session closed");
    }
    driver.flush_client().await;
}

/// Counts a session as open for as long as it lives, also when it ends by a panic or is
/// dropped at close.
struct Open(Arc<Counters>);

impl Open {
    fn count(counters: Arc<Counters>) -> Open {
        Counters::add(&counters.sessions_open, 1);
        Open(counters)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0
            .sessions_open
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The session with its sockets.
struct Driver {
    s: Session,
    client_r: ReadHalf<Box<dyn Stream>>,
    client_w: WriteHalf<Box<dyn Stream>>,
    up_r: Option<ReadHalf<Box<dyn Stream>>>,
    up_w: Option<WriteHalf<Box<dyn Stream>>>,
    from_client: BytesMut,
    from_up: BytesMut,
    scanner: crate::resp::FrameScanner,
    changes: tokio::sync::watch::Receiver<u64>,
    last_activity: Instant,
}

impl Driver {
    fn new(shared: Arc<ProxyState>, client: Box<dyn Stream>) -> Driver {
        let (client_r, client_w) = tokio::io::split(client);
        let changes = shared.changes.subscribe();
        let max_request = shared.options.max_request_bytes;
        Driver {
            s: Session {
                shared,
                state: State::default(),
                node: None,
                held: VecDeque::new(),
                waiting_since: None,
                inflight: VecDeque::new(),
                to_up: BytesMut::new(),
                to_client: BytesMut::new(),
                durable: Vec::new(),
                swallow: 0,
                multi: false,
                watching: false,
                watch_broken: false,
                multi_aborted: false,
                unconfirmed: false,
                draining: false,
                max_request,
                malformed: None,
                judged: None,
                fenced: None,
            },
            client_r,
            client_w,
            up_r: None,
            up_w: None,
            from_client: BytesMut::new(),
            from_up: BytesMut::new(),
            scanner: Default::default(),
            changes,
            last_activity: Instant::now(),
        }
    }

    async fn run(&mut self) -> Result<(), End> {
        let closing = self.s.shared.closing.clone();
        loop {
            self.advance().await?;
            if self.s.finished() && self.to_flush() == 0 {
                return Err(End::Done);
            }
            let s = &self.s;
            let read_client = !s.draining
                && s.held.len() < MAX_HELD
                && s.inflight.len() < MAX_INFLIGHT
                && s.to_client.len() < OUT_LIMIT;
            let read_up = self.up_r.is_some() && s.to_client.len() < OUT_LIMIT;
            let write_up = self.up_w.is_some() && !s.to_up.is_empty();
            let write_client = !s.to_client.is_empty();
            let recheck = s.waiting_since.map(|_| Instant::now() + HOLD_RECHECK);
            let idle = self.idle_deadline();
            let closing_now = !s.draining;
            tokio::select! {
                read = read_into(&mut self.client_r, &mut self.from_client), if read_client => {
                    match read {
                        Ok(0) | Err(_) => return Err(End::Done),
                        Ok(_) => {
                            self.last_activity = Instant::now();
                            self.s.take_requests(&mut self.from_client);
                        }
                    }
                }
                read = read_some(self.up_r.as_mut(), &mut self.from_up), if read_up => {
                    match read {
                        Ok(0) | Err(_) => self.upstream_lost()?,
                        Ok(_) => self.replies()?,
                    }
                }
                written = write_some(self.up_w.as_mut(), &mut self.s.to_up), if write_up => {
                    if written.is_err() {
                        self.upstream_lost()?;
                    }
                }
                written = self.client_w.write_buf(&mut self.s.to_client), if write_client => {
                    if matches!(written, Ok(0) | Err(_)) {
                        return Err(End::Done);
                    }
                }
                _ = self.changes.changed() => {
                    self.s.judged = None;
                }
                _ = sleep_until(recheck), if recheck.is_some() => {
                    self.s.judged = None;
                }
                _ = sleep_until(idle), if idle.is_some() => {
                    return Err(End::Cannot("idle timeout"));
                }
                _ = closing.cancelled(), if closing_now => {
                    self.s.draining = true;
                }
            }
        }
    }

    /// Bytes the client has still to be sent.
    fn to_flush(&self) -> usize {
        self.s.to_client.len()
    }

    fn idle_deadline(&self) -> Option<Instant> {
        let idle = self.s.shared.options.idle_timeout?;
        let s = &self.s;
        let busy = !s.inflight.is_empty()
            || !s.held.is_empty()
            || s.state.subscription_count() > 0
            || s.state.monitor;
        (!busy).then_some(self.last_activity + idle)
    }

    /// Moves the session along: forwards what the gate lets through, connects or moves when
    /// it must, expires what waited too long.
    async fn advance(&mut self) -> Result<(), End> {
        loop {
            self.s.refuse_malformed();
            self.s.emit_local();
            let gate = self.s.gate();
            match gate {
                Gate::Open => {
                    self.s.dispatch();
                    self.s.refuse_malformed();
                    self.s.emit_local();
                    return Ok(());
                }
                Gate::Hold => {
                    if self.s.held.is_empty() {
                        return Ok(());
                    }
                    let since = *self.s.waiting_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= self.s.shared.options.hold {
                        self.s.expire_held("a promotion is under way");
                        continue;
                    }
                    return Ok(());
                }
                Gate::Move => {
                    if !self.s.inflight.is_empty() {
                        // Replies still due from the old node are read (and judged) first,
                        // unless one may block for long or they do not come within the hold
                        // bound: then the old connection is given up and what it owed is
                        // answered UNCERTAIN.
                        let since = *self.s.waiting_since.get_or_insert_with(Instant::now);
                        let blocked = self
                            .s
                            .inflight
                            .iter()
                            .any(|e| matches!(e, Expect::Reply { blocking: true, .. }));
                        if !blocked && since.elapsed() < self.s.shared.options.hold {
                            return Ok(());
                        }
                        self.drop_upstream();
                        self.s.lost()?;
                    } else {
                        self.s.leave_node()?;
                        self.drop_upstream();
                    }
                    Counters::add(&self.s.shared.counters.moves, 1);
                    if self.s.must_follow() {
                        continue;
                    }
                    return Ok(());
                }
                Gate::Connect => {
                    // A session that is ending (QUIT, a malformed request, the proxy closing)
                    // follows nothing more: it only answers what it still holds.
                    if self.s.held.is_empty() && (self.s.draining || !self.s.must_follow()) {
                        return Ok(());
                    }
                    self.connect().await?;
                }
            }
        }
    }

    /// Opens the upstream to the node the client routes to, and queues the replay of the
    /// session's state before anything else.
    async fn connect(&mut self) -> Result<(), End> {
        let shared = self.s.shared.clone();
        let hold = shared.options.hold;
        let since = *self.s.waiting_since.get_or_insert_with(Instant::now);
        loop {
            let left = hold.saturating_sub(since.elapsed());
            if left.is_zero() {
                self.s.expire_held("no primary could be reached");
                if self.s.must_follow() {
                    Counters::add(&shared.counters.sessions_closed_at_move, 1);
                    return Err(End::Cannot("no node to follow to"));
                }
                return Ok(());
            }
            let node = match shared.client.route(shared.options.route, left).await {
                Ok(node) => node,
                Err(e) if e.code() == crate::ErrorCode::Closed => {
                    return Err(End::Cannot("client closed"))
                }
                Err(e) => {
                    tracing::debug!(error = %e, "proxy: no node to route to");
                    let left = hold.saturating_sub(since.elapsed());
                    tokio::time::sleep(Duration::from_millis(50).min(left)).await;
                    continue;
                }
            };
            let left = hold.saturating_sub(since.elapsed());
            let timeout = shared
                .connect_timeout
                .min(left.max(Duration::from_millis(1)));
            match upstream::connect(&shared.resolver, &node, shared.tls.as_ref(), timeout).await {
                Ok(stream) => {
                    let (r, w) = tokio::io::split(stream);
                    self.up_r = Some(r);
                    self.up_w = Some(w);
                    self.from_up.clear();
                    self.scanner = Default::default();
                    self.s.arrived(node);
                    return Ok(());
                }
                Err(e) => {
                    tracing::debug!(error = %e, node = %node, "proxy: upstream connect failed");
                    Counters::add(&shared.counters.upstream_errors, 1);
                    let _ = shared.client.report_unusable(&node);
                    // One-shot pause before the next try; the route will have moved on.
                    tokio::time::sleep(Duration::from_millis(50).min(left)).await;
                }
            }
        }
    }

    fn drop_upstream(&mut self) {
        self.up_r = None;
        self.up_w = None;
        self.from_up.clear();
        self.scanner = Default::default();
    }

    fn upstream_lost(&mut self) -> Result<(), End> {
        Counters::add(&self.s.shared.counters.upstream_errors, 1);
        self.drop_upstream();
        self.s.lost()
    }

    /// Cuts the upstream's bytes into frames and hands each to the session.
    fn replies(&mut self) -> Result<(), End> {
        loop {
            match self.scanner.scan(&self.from_up, Protocol::Resp3) {
                Ok(Some(len)) => {
                    let frame = self.from_up.split_to(len).freeze();
                    self.s.on_frame(frame)?;
                }
                Ok(None) => return Ok(()),
                Err(e) => {
                    tracing::warn!(error = %e, "proxy: malformed reply from the server");
                    return self.upstream_lost();
                }
            }
        }
    }

    /// Sends what is left for the client, within a bound, before its connection is closed.
    async fn flush_client(&mut self) {
        self.s.emit_local();
        let bound = Duration::from_secs(1);
        let _ = tokio::time::timeout(bound, async {
            while !self.s.to_client.is_empty() {
                if matches!(
                    self.client_w.write_buf(&mut self.s.to_client).await,
                    Ok(0) | Err(_)
                ) {
                    break;
                }
            }
            let _ = self.client_w.shutdown().await;
        })
        .await;
    }
}

async fn read_into(
    r: &mut ReadHalf<Box<dyn Stream>>,
    buf: &mut BytesMut,
) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
    r.read_buf(buf).await
}

/// Reads from the upstream when there is one (select! builds every branch's future, also those
/// it will not poll).
async fn read_some(
    r: Option<&mut ReadHalf<Box<dyn Stream>>>,
    buf: &mut BytesMut,
) -> std::io::Result<usize> {
    match r {
        Some(r) => read_into(r, buf).await,
        None => std::future::pending().await,
    }
}

async fn write_some(
    w: Option<&mut WriteHalf<Box<dyn Stream>>>,
    buf: &mut BytesMut,
) -> std::io::Result<usize> {
    match w {
        Some(w) => w.write_buf(buf).await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Session {
    /// Whether nothing more will happen: draining and everything answered.
    fn finished(&self) -> bool {
        self.draining
            && self.held.is_empty()
            && self.inflight.is_empty()
            && self.malformed.is_none()
    }

    /// Whether the session must have an upstream even with nothing to send: it receives
    /// pushes (subscriptions).
    fn must_follow(&self) -> bool {
        self.state.subscription_count() > 0
    }

    /// Reads as many whole requests as `buf` holds into `held`. After QUIT, or a request that
    /// cannot be read, nothing more is read: what came before it is still answered, then the
    /// session ends (with Redis' protocol error for the malformed one).
    fn take_requests(&mut self, buf: &mut BytesMut) {
        while self.held.len() < MAX_HELD && !self.draining {
            match request::next(buf, self.max_request) {
                Ok(Some(request)) => {
                    let kind = command::kind(&request.args);
                    if kind == Kind::Quit {
                        self.draining = true;
                    }
                    self.held.push_back((request, kind));
                }
                Ok(None) => break,
                Err(request::Malformed(text)) => {
                    Counters::add(&self.shared.counters.malformed, 1);
                    self.draining = true;
                    self.malformed = Some(replies::plain(&text));
                    buf.clear();
                    break;
                }
            }
        }
        if buf.is_empty() && buf.capacity() > 64 * 1024 {
            *buf = BytesMut::new();
        }
    }

    /// Queues the protocol error of a malformed request once everything before it has gone.
    fn refuse_malformed(&mut self) {
        if self.held.is_empty() {
            if let Some(reply) = self.malformed.take() {
                self.inflight.push_back(Expect::Local {
                    reply,
                    covered: false,
                });
            }
        }
    }

    /// Where the session stands: judged again when the routing epoch moved.
    fn gate(&mut self) -> Gate {
        let Some(node) = &self.node else {
            return Gate::Connect;
        };
        let epoch = self.shared.epoch.load(std::sync::atomic::Ordering::Acquire);
        if let Some((at, gate)) = self.judged {
            if at == epoch {
                return gate;
            }
        }
        let client = &self.shared.client;
        let gate = match self.shared.options.route {
            Route::Primary => {
                // A replaced primary stays fenced for a while: the new one decides first.
                let primary = client.topology().ok().and_then(|t| t.primary);
                match primary {
                    Some(p) if p != *node => Gate::Move,
                    _ if client.is_fenced(node) => Gate::Hold,
                    _ if client.is_routable(node, Route::Primary) => Gate::Open,
                    // Reported down with no other promoted yet, or none known: wait.
                    _ => Gate::Hold,
                }
            }
            Route::Read if client.is_routable(node, Route::Read) => Gate::Open,
            Route::Read => Gate::Move,
        };
        self.judged = Some((epoch, gate));
        gate
    }

    /// Whether a failover is demoting (or replaced) the session's node: asked of the monitor
    /// again only when the routing epoch moved.
    fn node_fenced(&mut self) -> bool {
        let Some(node) = &self.node else {
            return false;
        };
        let epoch = self.shared.epoch.load(std::sync::atomic::Ordering::Acquire);
        match self.fenced {
            Some((at, fenced)) if at == epoch => fenced,
            _ => {
                let fenced = self.shared.client.is_fenced(node);
                self.fenced = Some((epoch, fenced));
                fenced
            }
        }
    }

    /// A new upstream to `node` is open: queue the replay, then let held requests through.
    fn arrived(&mut self, node: Address) {
        let lent = self
            .shared
            .lent
            .as_ref()
            .filter(|_| !self.state.authenticated());
        let lent = lent.map(|c| (c.username.as_deref(), c.password.expose()));
        let (commands, confirmations) = self.state.replay(lent);
        for args in &commands {
            crate::resp::encode_command(args, &mut self.to_up);
            self.inflight.push_back(Expect::Replay);
        }
        self.swallow += confirmations;
        self.node = Some(node);
        self.judged = None;
        self.fenced = None;
    }

    /// The upstream is about to be replaced: what of the session's state cannot follow.
    fn leave_node(&mut self) -> Result<(), End> {
        if self.state.tracking {
            Counters::add(&self.shared.counters.sessions_closed_at_move, 1);
            return Err(End::Cannot("CLIENT TRACKING cannot follow a move"));
        }
        if self.state.monitor {
            Counters::add(&self.shared.counters.sessions_closed_at_move, 1);
            return Err(End::Cannot("MONITOR cannot follow a move"));
        }
        if self.multi {
            self.multi = false;
            self.multi_aborted = true;
        }
        if self.watching {
            self.watching = false;
            self.watch_broken = true;
        }
        self.unconfirmed = false;
        self.node = None;
        self.judged = None;
        self.fenced = None;
        Ok(())
    }

    /// The upstream broke: everything it owed is answered `UNCERTAIN` (never re-sent).
    fn lost(&mut self) -> Result<(), End> {
        let node = self.node.clone();
        let shown = node
            .as_ref()
            .map(|n| n.to_string())
            .unwrap_or_else(|| "the server".into());
        if self.state.monitor || self.state.tracking {
            return Err(End::Cannot("connection lost with MONITOR or TRACKING on"));
        }
        let owed: Vec<Expect> = self.inflight.drain(..).collect();
        for expect in owed {
            match expect {
                Expect::Reply { covered, .. } => {
                    self.deliver(replies::broken(&shown), covered, false)
                }
                Expect::NullExec => self.deliver(replies::broken(&shown), false, false),
                Expect::Wait => self.confirm(0),
                Expect::Local { reply, covered } => self.deliver(reply, covered, false),
                Expect::Replay => {}
                Expect::Confirmations { .. } => {
                    return Err(End::Cannot("connection lost while subscribing"))
                }
            }
        }
        self.swallow = 0;
        // Requests not yet written were answered with the rest: none of them is sent later.
        self.to_up.clear();
        self.leave_node()
    }

    /// Held requests that waited past the hold bound (or found no node) are answered `FENCED`
    /// in order, never sent.
    fn expire_held(&mut self, why: &str) {
        let hold = self.shared.options.hold;
        let n = self.held.len() as u64;
        for (_, kind) in self.held.drain(..) {
            let reply = match kind {
                Kind::Exec if self.multi_aborted => replies::exec_aborted(),
                _ => replies::fenced(hold, why),
            };
            if matches!(kind, Kind::Exec | Kind::Discard) {
                self.multi_aborted = false;
            }
            self.inflight.push_back(Expect::Local {
                reply,
                covered: false,
            });
        }
        self.waiting_since = None;
        Counters::add(&self.shared.counters.held_expired, n);
        Counters::add(&self.shared.counters.held, n);
        self.emit_local();
    }

    /// Forwards held requests while the gate is open, each with what its reply will answer.
    fn dispatch(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let table = self.shared.write_table();
        let waited = self.waiting_since.take();
        let mut forwarded = 0u64;
        let mut batch_start = self.inflight.len();
        while self.to_up.len() < UP_LIMIT && self.inflight.len() < MAX_INFLIGHT {
            let Some((request, kind)) = self.held.pop_front() else {
                break;
            };
            // Answered here: the transaction of a replaced MULTI.
            if self.multi_aborted {
                let reply = match kind {
                    Kind::Exec => replies::exec_aborted(),
                    Kind::Discard => Bytes::from_static(replies::OK),
                    _ => replies::queued_after_move(),
                };
                if matches!(kind, Kind::Exec | Kind::Discard) {
                    self.multi_aborted = false;
                }
                self.inflight.push_back(Expect::Local {
                    reply,
                    covered: false,
                });
                continue;
            }
            // A WAIT closes the group of writes before anything whose replies a WAIT after it
            // could not follow (MULTI queues it, subscribed mode refuses it).
            if matches!(
                kind,
                Kind::Multi
                    | Kind::Subscribe(_)
                    | Kind::Unsubscribe(_)
                    | Kind::Monitor
                    | Kind::Reset
                    | Kind::Quit
            ) {
                self.close_group(batch_start);
                batch_start = self.inflight.len();
            }
            let expect = match kind {
                Kind::Exec if self.watch_broken => {
                    self.watch_broken = false;
                    self.multi = false;
                    crate::resp::encode_command(&[b"DISCARD".as_slice()], &mut self.to_up);
                    self.inflight.push_back(Expect::NullExec);
                    forwarded += 1;
                    continue;
                }
                Kind::Subscribe(_) => Expect::Confirmations {
                    remaining: request.args.len() - 1,
                },
                Kind::Unsubscribe(family) => Expect::Confirmations {
                    remaining: self.unsubscribe_confirmations(family, &request.args),
                },
                _ => {
                    let write = match kind {
                        Kind::Exec => true,
                        _ if self.multi => false,
                        Kind::Plain => {
                            table.writes(&request.args[0], request.args.get(1).map(|a| a.as_ref()))
                        }
                        _ => false,
                    };
                    self.note_sent(&kind);
                    let stateful = !matches!(kind, Kind::Plain);
                    Expect::Reply {
                        args: stateful.then(|| request.args.clone()),
                        blocking: command::blocks(&request.args),
                        kind,
                        write,
                        covered: false,
                    }
                }
            };
            if matches!(expect, Expect::Reply { write: true, .. }) {
                self.unconfirmed = true;
            }
            self.to_up.extend_from_slice(&request.wire);
            self.inflight.push_back(expect);
            forwarded += 1;
        }
        if !self.multi {
            self.close_group(batch_start);
        }
        let counters = &self.shared.counters;
        Counters::add(&counters.commands, forwarded);
        if let Some(since) = waited {
            Counters::add(&counters.held, forwarded);
            Counters::add(
                &counters.held_us,
                since.elapsed().as_micros() as u64 * forwarded,
            );
        }
    }

    /// With `wait_replicas`, follows the writes forwarded since the last WAIT with one WAIT,
    /// and covers every reply from `from` on so that none passes before it.
    fn close_group(&mut self, from: usize) {
        let Some((replicas, timeout)) = self.shared.durability else {
            return;
        };
        if !self.unconfirmed {
            return;
        }
        self.unconfirmed = false;
        for expect in self.inflight.iter_mut().skip(from) {
            if let Expect::Reply { covered, .. } | Expect::Local { covered, .. } = expect {
                *covered = true;
            }
        }
        let replicas = replicas.to_string();
        let timeout = timeout.as_millis().to_string();
        crate::resp::encode_command(
            &[b"WAIT".as_slice(), replicas.as_bytes(), timeout.as_bytes()],
            &mut self.to_up,
        );
        self.inflight.push_back(Expect::Wait);
    }

    /// The connection state a request changes once written (MULTI, WATCH), before its reply.
    fn note_sent(&mut self, kind: &Kind) {
        match kind {
            Kind::Multi => self.multi = true,
            Kind::Exec | Kind::Discard => {
                self.multi = false;
                self.watching = false;
                self.watch_broken = false;
            }
            Kind::Watch => self.watching = true,
            Kind::Unwatch => {
                self.watching = false;
                self.watch_broken = false;
            }
            Kind::Reset => {
                self.multi = false;
                self.watching = false;
                self.watch_broken = false;
            }
            _ => {}
        }
    }

    /// How many confirmations an unsubscribe brings: one per argument, else one per member of
    /// its family (at least one, naming no channel, when there is none).
    fn unsubscribe_confirmations(&self, family: Family, args: &[Bytes]) -> usize {
        if args.len() > 1 {
            args.len() - 1
        } else {
            self.state.subscribed(family).max(1)
        }
    }

    /// Answers what the proxy answers itself, once everything before it has been answered.
    fn emit_local(&mut self) {
        while matches!(self.inflight.front(), Some(Expect::Local { .. })) {
            if let Some(Expect::Local { reply, covered }) = self.inflight.pop_front() {
                self.deliver(reply, covered, false);
            }
        }
    }

    /// Passes a reply on, or keeps it for its WAIT.
    fn deliver(&mut self, reply: Bytes, covered: bool, success: bool) {
        if covered || !self.durable.is_empty() {
            self.durable.push((reply, success));
        } else {
            self.to_client.extend_from_slice(&reply);
        }
    }

    /// A WAIT answered: `confirmed` replicas hold every covered write.
    fn confirm(&mut self, confirmed: i64) {
        let Some((wanted, timeout)) = self.shared.durability else {
            return;
        };
        let enough = confirmed >= i64::from(wanted);
        for (reply, success) in std::mem::take(&mut self.durable) {
            if success && !enough {
                Counters::add(&self.shared.counters.not_replicated, 1);
                self.to_client
                    .extend_from_slice(&replies::not_replicated(confirmed, wanted, timeout));
            } else {
                self.to_client.extend_from_slice(&reply);
            }
        }
    }

    /// One frame read from the upstream.
    fn on_frame(&mut self, frame: Bytes) -> Result<(), End> {
        if self.state.monitor {
            self.to_client.extend_from_slice(&frame);
            return Ok(());
        }
        if let Some(push) = self.push_of(&frame) {
            return self.on_push(frame, push);
        }
        let Some(expect) = self.inflight.pop_front() else {
            // Nothing asked: a server speaking out of turn. Pass it on as Redis would have.
            self.to_client.extend_from_slice(&frame);
            return Ok(());
        };
        let error = replies::is_error(&frame);
        match expect {
            Expect::Reply {
                kind,
                args,
                write,
                covered,
                ..
            } => {
                let node_fenced = write && !error && self.node_fenced();
                if node_fenced {
                    Counters::add(&self.shared.counters.fenced_replies, 1);
                    let node = self.node.clone().expect("checked");
                    self.deliver(replies::demoted(&node), covered, false);
                } else {
                    if !error {
                        if let Some(args) = &args {
                            self.state.accepted(&kind, args);
                        }
                    }
                    if matches!(kind, Kind::Quit) {
                        // The server closes the connection: nothing of it is to be replayed.
                        self.draining = true;
                        self.state = State::default();
                    }
                    self.deliver(frame, covered, write && !error);
                }
            }
            Expect::Confirmations { .. } => {
                // An ordinary reply where confirmations were due: the command's error.
                self.deliver(frame, false, false);
            }
            Expect::Replay => {
                if error {
                    tracing::warn!(
                        reply = %String::from_utf8_lossy(&frame[..frame.len().min(200)]).trim_end(),
                        "proxy: the session's state could not be restored on its new node"
                    );
                    return Err(End::Cannot("replay refused"));
                }
            }
            Expect::Wait => {
                let confirmed = match crate::resp::decode(frame, Protocol::Resp3) {
                    Ok(Value::Int(n)) => n,
                    _ => 0,
                };
                self.confirm(confirmed);
            }
            Expect::NullExec => {
                let resp3 = self.state.resp3();
                self.deliver(replies::null_exec(resp3), false, false);
            }
            Expect::Local { reply, covered } => {
                // Cannot be at the front when a frame comes (emitted at once); keep order.
                self.deliver(reply, covered, false);
                return self.on_frame(frame);
            }
        }
        self.emit_local();
        Ok(())
    }

    /// Whether `frame` is a push (RESP3 `>`, or in RESP2 a pub/sub array while subscriptions
    /// are open or confirmations due), and of which kind.
    fn push_of(&self, frame: &Bytes) -> Option<PushKind> {
        let resp2_pubsub = frame.first() == Some(&b'*')
            && (self.state.subscription_count() > 0
                || self.swallow > 0
                || matches!(self.inflight.front(), Some(Expect::Confirmations { .. })));
        if frame.first() != Some(&b'>') && !resp2_pubsub {
            return None;
        }
        let value = crate::resp::decode(frame.clone(), Protocol::Resp3).ok()?;
        let (Value::Push(items) | Value::Array(items)) = value else {
            return None;
        };
        let first = match items.first() {
            Some(Value::Bulk(b)) => b.clone(),
            Some(Value::Simple(s)) => Bytes::copy_from_slice(s.as_bytes()),
            _ => return Some(PushKind::Other).filter(|_| frame[0] == b'>'),
        };
        let kind = command::push_kind(&first);
        if kind == PushKind::Other && frame[0] != b'>' {
            return None;
        }
        Some(kind)
    }

    fn on_push(&mut self, frame: Bytes, kind: PushKind) -> Result<(), End> {
        if let PushKind::Confirmation(family, on) = kind {
            let channel = match crate::resp::decode(frame.clone(), Protocol::Resp3) {
                Ok(Value::Push(items) | Value::Array(items)) => match items.get(1) {
                    Some(Value::Bulk(b)) => Some(b.clone()),
                    _ => None,
                },
                _ => None,
            };
            self.state.confirm(family, on, channel);
            if self.swallow > 0 {
                self.swallow -= 1;
                return Ok(());
            }
            if let Some(Expect::Confirmations { remaining }) = self.inflight.front_mut() {
                *remaining = remaining.saturating_sub(1);
                if *remaining == 0 {
                    self.inflight.pop_front();
                }
            }
        }
        self.to_client.extend_from_slice(&frame);
        self.emit_local();
        Ok(())
    }
}
