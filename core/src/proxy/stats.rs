//! What a proxy has done since it started, counted with atomics on its sessions' own threads
//! and read at any time (the CLI's `--metrics` serves them).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one proxy. Every field only grows, except `sessions_open`.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) sessions_open: AtomicU64,
    pub(super) sessions_accepted: AtomicU64,
    pub(super) sessions_refused: AtomicU64,
    pub(super) commands: AtomicU64,
    pub(super) held: AtomicU64,
    pub(super) held_us: AtomicU64,
    pub(super) held_expired: AtomicU64,
    pub(super) fenced_replies: AtomicU64,
    pub(super) not_replicated: AtomicU64,
    pub(super) moves: AtomicU64,
    pub(super) sessions_closed_at_move: AtomicU64,
    pub(super) primary_changes: AtomicU64,
    pub(super) upstream_errors: AtomicU64,
    pub(super) malformed: AtomicU64,
}

impl Counters {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> ProxyStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ProxyStats {
            sessions_open: get(&self.sessions_open),
            sessions_accepted: get(&self.sessions_accepted),
            sessions_refused: get(&self.sessions_refused),
            commands_forwarded: get(&self.commands),
            commands_held: get(&self.held),
            held_seconds: get(&self.held_us) as f64 / 1e6,
            held_expired: get(&self.held_expired),
            fenced_replies: get(&self.fenced_replies),
            not_replicated: get(&self.not_replicated),
            moves: get(&self.moves),
            sessions_closed_at_move: get(&self.sessions_closed_at_move),
            primary_changes: get(&self.primary_changes),
            upstream_errors: get(&self.upstream_errors),
            malformed_requests: get(&self.malformed),
        }
    }
}

/// A snapshot of a proxy's counters ([`Proxy::stats`](super::Proxy::stats)).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ProxyStats {
    /// Client connections open now.
    pub sessions_open: u64,
    /// Client connections accepted since the start.
    pub sessions_accepted: u64,
    /// Client connections refused with `max number of clients reached`.
    pub sessions_refused: u64,
    /// Requests written to a data node.
    pub commands_forwarded: u64,
    /// Requests that had to wait for a primary (a promotion under way, no primary yet).
    pub commands_held: u64,
    /// Time those requests waited, summed.
    pub held_seconds: f64,
    /// Held requests answered `FENCED` because no primary came within the hold bound.
    pub held_expired: u64,
    /// Replies read from a primary being demoted that were turned into `UNCERTAIN` errors.
    pub fenced_replies: u64,
    /// Writes answered `NOTREPLICATED` (`wait_replicas`).
    pub not_replicated: u64,
    /// Sessions moved to a new primary with their state replayed.
    pub moves: u64,
    /// Sessions closed at a move because their state could not follow (MONITOR, CLIENT
    /// TRACKING, a reply still pending past the hold bound).
    pub sessions_closed_at_move: u64,
    /// `primary_changed` events seen.
    pub primary_changes: u64,
    /// Upstream connections that failed to open or broke.
    pub upstream_errors: u64,
    /// Client connections closed for malformed or oversized requests.
    pub malformed_requests: u64,
}
