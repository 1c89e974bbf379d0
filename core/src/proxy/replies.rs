//! The error replies the proxy itself gives, each beginning with a stable code word that
//! clients and operators can match (documented in the README's "Every client, unchanged"):
//!
//! - `UNCERTAIN`: the command reached a primary that was being demoted, or its connection broke
//!   before the reply; it may or may not have been applied. Never re-sent.
//! - `FENCED`: no verified primary came within the hold bound; the command was not sent.
//! - `NOTREPLICATED`: `wait_replicas` was not met; the write ran on the primary but may be lost
//!   in a failover (the error also names `not_replicated`, the core's code).
//! - `EXECABORT`: a MULTI was open on a primary that was replaced; nothing of it ran there.

use std::fmt::Display;
use std::time::Duration;

use bytes::Bytes;

fn error(text: String) -> Bytes {
    Bytes::from(format!("-{}\r\n", text.replace(['\r', '\n'], " ")))
}

/// A write's reply read from a primary being demoted.
pub(super) fn demoted(address: &impl Display) -> Bytes {
    error(format!(
        "UNCERTAIN the primary {address} was being demoted when this write ran: it may or may not have been applied"
    ))
}

/// A command whose connection broke before its reply.
pub(super) fn broken(address: &impl Display) -> Bytes {
    error(format!(
        "UNCERTAIN the connection to {address} broke before the reply: the command may or may not have run"
    ))
}

/// A held command that found no primary in time.
pub(super) fn fenced(hold: Duration, why: &str) -> Bytes {
    error(format!(
        "FENCED no verified primary within {}: the command was not sent ({why})",
        crate::error::duration_text(hold)
    ))
}

/// A write that WAIT did not confirm on enough replicas.
pub(super) fn not_replicated(confirmed: i64, wanted: u32, timeout: Duration) -> Bytes {
    error(format!(
        "NOTREPLICATED not_replicated: WAIT confirmed {confirmed} of {wanted} replicas within {}; the write ran on the primary but may be lost in a failover",
        crate::error::duration_text(timeout)
    ))
}

/// EXEC of a transaction whose MULTI was open on a replaced primary.
pub(super) fn exec_aborted() -> Bytes {
    error("EXECABORT Transaction discarded because the primary changed while MULTI was open".into())
}

/// A command queued after MULTI on a replaced primary.
pub(super) fn queued_after_move() -> Bytes {
    error(
        "EXECABORT the primary changed while MULTI was open: this transaction will be discarded"
            .into(),
    )
}

/// Redis' own refusal past `maxclients`.
pub(super) const MAX_CLIENTS: &[u8] = b"-ERR max number of clients reached\r\n";
/// DISCARD's success, given for a DISCARD that closes an aborted transaction.
pub(super) const OK: &[u8] = b"+OK\r\n";
/// EXEC's null reply after a WATCH that spanned a move, per protocol.
pub(super) fn null_exec(resp3: bool) -> Bytes {
    Bytes::from_static(if resp3 { b"_\r\n" } else { b"*-1\r\n" })
}

/// Any error text as a reply.
pub(super) fn plain(text: &str) -> Bytes {
    error(text.to_string())
}

/// Whether a reply frame is an error (simple or RESP3 blob error).
pub(super) fn is_error(frame: &[u8]) -> bool {
    matches!(frame.first(), Some(b'-' | b'!'))
}
