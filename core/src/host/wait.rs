//! Blocking forms for host threads: run an operation's callback form and wait for its completion
//! on the calling thread (what [`super::Handle::wait`] and every `*_blocking` call stand on).

use std::time::Duration;

use super::inflight::{Done, Operation};
use crate::client::rendezvous;
use crate::error::{Error, ErrorCode, Result};

/// [`super::Handle::wait`]: blocks the calling thread until the operation `start` begins
/// completes, reading the reply itself when `start` wrote the command to an idle connection.
pub(super) fn wait<T: Send + 'static>(
    start: impl FnOnce(Done<T>) -> Operation,
    poll: Duration,
    interrupted: impl FnMut() -> bool,
) -> Option<Result<T>> {
    if crate::runtime::on_core_thread() {
        return Some(Err(Error::config(
            "a blocking call was made on a core runtime thread; use the callback or async form",
        )));
    }
    let rendezvous = rendezvous::Rendezvous::new();
    let (operation, own) = rendezvous::starting(|| start(Box::new(rendezvous.completer())));
    let got = rendezvous.wait(own, poll, interrupted);
    if got.is_none() {
        operation.cancel();
    }
    got
}

/// [`wait`] without interruption.
pub(super) fn block<T: Send + 'static>(start: impl FnOnce(Done<T>) -> Operation) -> Result<T> {
    wait(start, Duration::from_secs(3600), || false).unwrap_or_else(|| {
        Err(Error::new(
            ErrorCode::Internal,
            "internal error: uninterruptible wait interrupted",
        ))
    })
}
