//! One attempt of a command on one node, decided without I/O: where it goes ([`Attempt::route`]),
//! what a failure to reach the node means ([`Attempt::unreachable`]), and what the replies mean
//! ([`Attempt::judge`]: finish, or retry from a later discovery round). Both drivers of a
//! command, the calling thread's direct send (`call`) and the task (`execute::run_shared`),
//! step through these same decisions, so a command's result does not depend on which drove it.

use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::command::Kind;
use super::handle::Inner;
use crate::config::ReadFrom;
use crate::error::{Error, ErrorCode, Result};
use crate::monitor::{Monitor, Status};
use crate::node::Expect;
use crate::resp::Value;
use crate::types::Address;

/// Server errors that mean "not executed here, and this node is not (or not yet) the one to use".
pub(super) const RE_RESOLVE: &[&str] = &["READONLY", "LOADING", "MASTERDOWN"];

/// Server errors during a connection's handshake that another attempt may not get.
const HANDSHAKE_TRANSIENT: &[&str] = &["LOADING", "MASTERDOWN", "BUSY", "TRYAGAIN"];

/// Where one attempt of a command goes: the node, the role it is expected to have, and the
/// discovery round it was picked in (reports and retries are counted from that round).
#[derive(Debug, Clone)]
pub(super) struct Attempt {
    pub(super) address: Address,
    pub(super) expect: Expect,
    pub(super) round: u64,
}

/// What the replies of one attempt on one node mean.
pub(super) enum Judged {
    /// Every command was refused before running: try again from this discovery round on.
    Retry { min_round: u64 },
    /// The results to hand back.
    Finished(Vec<Result<Value>>),
}

impl Attempt {
    /// The node a command of `kind` goes to in `status`, or `None` when it has to wait.
    pub(super) fn route(inner: &Inner, status: &Status, kind: Kind) -> Option<Attempt> {
        pick(inner, status, kind).map(|(address, expect)| Attempt {
            address,
            expect,
            round: status.rounds,
        })
    }

    /// Judges the replies the node gave, the same way for every path a command takes: all
    /// refused with READONLY, LOADING or MASTERDOWN (nothing ran) means mark the node,
    /// re-resolve and retry; otherwise the node answered, late writes of a demoted primary
    /// become `connection_lost`, and a lost connection is reported and said to maybe have run
    /// the command.
    pub(super) fn judge(
        &self,
        inner: &Inner,
        monitor: &Monitor,
        kind: Kind,
        results: Vec<Result<Value>>,
    ) -> Judged {
        let refused_here = results.iter().all(
            |r| matches!(r, Err(e) if e.server_code().is_some_and(|c| RE_RESOLVE.contains(&c))),
        );
        if refused_here {
            // READONLY: demoted behind the sentinels' back; LOADING; MASTERDOWN.
            tracing::info!(node = %self.address, "node refused the command; re-resolving");
            inner.nodes.mark_failed(&self.address);
            monitor.report(
                "node refused command (READONLY/LOADING/MASTERDOWN)",
                self.round,
            );
            return Judged::Retry {
                min_round: next_attempt(inner, monitor, kind, &self.address, self.round),
            };
        }
        inner.nodes.mark_ok(&self.address);
        let results = if self.expect == Expect::Primary {
            distrust_late_writes(monitor, &self.address, kind, results)
        } else {
            results
        };
        if results
            .iter()
            .any(|r| matches!(r, Err(e) if e.code() == ErrorCode::ConnectionLost))
        {
            monitor.report("data connection lost", self.round);
        }
        Judged::Finished(
            results
                .into_iter()
                .map(|r| {
                    r.map_err(|e| {
                        if e.code() == ErrorCode::ConnectionLost {
                            e.context("the command may or may not have run")
                        } else {
                            e
                        }
                    })
                })
                .collect(),
        )
    }

    /// What a connection to the node that could not be opened (`error`) means: the command fails
    /// with it (past the deadline, or a handshake error another attempt would get too), or it is
    /// retried from the round returned, the node marked and the monitor asked to re-resolve.
    pub(super) fn unreachable(
        &self,
        inner: &Inner,
        monitor: &Monitor,
        kind: Kind,
        error: Error,
        deadline: Instant,
    ) -> Result<u64> {
        if error.code() == ErrorCode::Timeout && Instant::now() >= deadline {
            return Err(error);
        }
        if is_permanent_handshake_error(&error) {
            return Err(error.context(format!("connecting to {}", self.address)));
        }
        tracing::debug!(node = %self.address, error = %error, "node unusable; re-resolving");
        inner.nodes.mark_failed(&self.address);
        monitor.report("data connection failed", self.round);
        Ok(next_attempt(
            inner,
            monitor,
            kind,
            &self.address,
            self.round,
        ))
    }

    /// The round to retry from when the connection had ended before the command was handed to
    /// it (nothing ran).
    pub(super) fn ended_before_sending(&self, monitor: &Monitor) -> u64 {
        monitor.report("data connection lost", self.round);
        self.round + 1
    }

    /// The error of a command the node did not answer within its deadline (reported, so the
    /// monitor checks the node).
    pub(super) fn timed_out(&self, monitor: &Monitor) -> Error {
        monitor.report("command timed out", self.round);
        Error::timeout(format!(
            "no reply from {} within the command deadline",
            self.address
        ))
    }
}

/// Picks the node for `kind` from a status, or `None` when the command has to wait.
///
/// Writes wait while the primary is fenced (a failover is demoting it); reads may go on. Nodes
/// that just failed are passed over while others are usable: replica reads go to the other
/// replicas, then (for `prefer-replica`) to the primary.
pub(super) fn pick(inner: &Inner, status: &Status, kind: Kind) -> Option<(Address, Expect)> {
    let t = &status.topology;
    // Sentinels that actively report the primary down (or no longer know the service) mean wait;
    // sentinels that are merely unreachable do not stop traffic to a primary that works.
    let primary_usable = match &status.last_error {
        Some(e) if !t.healthy => e.code() == ErrorCode::SentinelsUnreachable,
        _ => true,
    };
    let primary = t
        .primary
        .clone()
        .filter(|_| primary_usable)
        .filter(|a| kind == Kind::Read || status.fenced_since(a).is_none())
        // Cut off from the sentinel majority, the primary may already be replaced: writes wait.
        .filter(|_| kind == Kind::Read || !status.majority_lost)
        .map(|a| (a, Expect::Primary));
    let rotate = |candidates: Vec<&Address>| {
        (!candidates.is_empty()).then(|| {
            let i = inner.next_replica.fetch_add(1, Ordering::Relaxed) % candidates.len();
            (candidates[i].clone(), Expect::Replica)
        })
    };
    let fresh = || {
        rotate(
            t.replicas
                .iter()
                .filter(|a| !inner.nodes.avoided(a))
                .collect(),
        )
    };
    match (kind, inner.config.read_from) {
        (Kind::Read, ReadFrom::Replica) => fresh().or_else(|| rotate(t.replicas.iter().collect())),
        (Kind::Read, ReadFrom::PreferReplica) => fresh().or(primary),
        _ => primary,
    }
}

/// The round to wait for before the next attempt after `failed` failed in round `round`: none
/// when another node can take the command now, else the next one.
fn next_attempt(inner: &Inner, monitor: &Monitor, kind: Kind, failed: &Address, round: u64) -> u64 {
    let status = monitor.status();
    match pick(inner, &status, kind) {
        Some((other, _)) if other != *failed && status.rounds >= round => round,
        _ => round + 1,
    }
}

/// A handshake error that reconnecting cannot fix (a `SELECT` out of range, a refused
/// `CLIENT SETNAME`, credentials or TLS the node refuses): the command fails with it at once.
pub(super) fn is_permanent_handshake_error(e: &Error) -> bool {
    match e.code() {
        ErrorCode::Auth | ErrorCode::Tls | ErrorCode::Config => true,
        ErrorCode::Server => !e
            .server_code()
            .is_some_and(|c| HANDSHAKE_TRANSIENT.contains(&c) || RE_RESOLVE.contains(&c)),
        _ => false,
    }
}

/// Write replies from a primary whose demotion has begun become `connection_lost` errors: the
/// write ran there, and the failover may discard it.
///
/// No grace: a reply that comes after the monitor learnt of the promotion is from a write the
/// primary may have run after the replica stopped following it (a primary paused past
/// down-after runs the writes queued in its socket the moment it wakes, while the replica is
/// already being promoted). Calling such a write a success would promise what the failover
/// throws away; calling it `connection_lost` ("may be discarded") is the truth whichever way it
/// went. What this costs is an error, instead of a success, for a write in flight at the
/// moment of fencing that the new primary did get.
pub(super) fn distrust_late_writes(
    monitor: &Monitor,
    address: &Address,
    kind: Kind,
    results: Vec<Result<Value>>,
) -> Vec<Result<Value>> {
    results
        .into_iter()
        .map(|r| distrust_late_write(monitor, address, kind, r))
        .collect()
}

/// [`distrust_late_writes`] for one reply.
fn distrust_late_write(
    monitor: &Monitor,
    address: &Address,
    kind: Kind,
    result: Result<Value>,
) -> Result<Value> {
    if kind == Kind::Read || result.is_err() {
        return result;
    }
    let Some(since) = monitor.fenced_since(address) else {
        return result;
    };
    let late = Instant::now().saturating_duration_since(since);
    Err(Error::new(
        ErrorCode::ConnectionLost,
        format!(
            "{address} answered {} ms after a failover began demoting it; the write may be \
             discarded with its data set",
            late.as_millis()
        ),
    ))
}
