//! Blocking forms for host threads: start an operation and wait for its completion on the
//! calling thread (what [`super::Handle::wait`], every `*_blocking` call and
//! [`Client::execute_blocking`] stand on), reading the reply from the socket when the start
//! handed this thread its [`OwnReply`](crate::resp::OwnReply).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::inflight::{Done, Started};
use super::waiter::Rendezvous;
use crate::client::{Client, Deadline};
use crate::error::{Error, ErrorCode, Result};
use crate::resp::{Reading, Value};

/// [`super::Handle::wait`]: blocks the calling thread until the operation `start` begins
/// completes, reading the reply itself when `start` returns one to read ([`Started::own`]).
pub(super) fn wait<T: Send + 'static, S: Into<Started>>(
    start: impl FnOnce(Done<T>) -> S,
    poll: Duration,
    interrupted: impl FnMut() -> bool,
) -> Option<Result<T>> {
    if let Err(e) = crate::runtime::refuse_blocking_on_core_thread() {
        return Some(Err(e));
    }
    let rendezvous = Rendezvous::new();
    let Started { operation, own } = start(Box::new(rendezvous.completer())).into();
    let got = rendezvous.wait(own, poll, interrupted);
    if got.is_none() {
        operation.cancel();
    }
    got
}

/// [`wait`] without interruption.
pub(super) fn block<T: Send + 'static, S: Into<Started>>(
    start: impl FnOnce(Done<T>) -> S,
) -> Result<T> {
    wait(start, Duration::from_secs(3600), || false).unwrap_or_else(|| {
        Err(Error::new(
            ErrorCode::Internal,
            "internal error: uninterruptible wait interrupted",
        ))
    })
}

impl Client {
    /// [`Client::execute`] for hosts without an async runtime: blocks the calling thread (only
    /// it) until the reply or the command's deadline. Refused on the core's own threads, where
    /// waiting could starve the very work it waits for. When the command goes out on an idle
    /// connection, this thread reads its reply from the socket itself.
    pub fn execute_blocking<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Value> {
        let timeout = self.config().command_timeout();
        self.execute_blocking_under(args, Deadline::Default(timeout))
    }

    /// [`Client::execute_blocking`] with a deadline of its own, which ends the whole call as in
    /// [`Client::execute_timeout`].
    pub fn execute_blocking_timeout<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        timeout: Duration,
    ) -> Result<Value> {
        let deadline = Deadline::of_call(Some(timeout), Duration::ZERO)?;
        self.execute_blocking_under(args, deadline)
    }

    fn execute_blocking_under<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        deadline: Deadline,
    ) -> Result<Value> {
        crate::runtime::refuse_blocking_on_core_thread()?;
        let rendezvous = Rendezvous::new();
        let own = self.command(args, deadline)?.start(
            Reading::Offer,
            CancellationToken::new(),
            Box::new(rendezvous.completer()),
        );
        // The command's own deadline ends the wait; nothing else interrupts it.
        rendezvous
            .wait(own, Duration::from_secs(3600), || false)
            .unwrap_or_else(|| Err(Error::closed()))
    }
}
