//! A host-layer operation as a future: the operation's completion (run once, on a core thread)
//! sends its result through a oneshot channel; polling the receiver needs no runtime, so uniffi's
//! async support can poll it from any foreign thread.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_channel::oneshot;
use sentinel_recovery::host::{Done, Operation};
use sentinel_recovery::{Error, ErrorCode, Result};

/// The result of one started operation. Dropped before it completed (the foreign caller's
/// coroutine or thread was cancelled), it cancels the operation.
pub(crate) struct Completion<T> {
    receiver: oneshot::Receiver<Result<T>>,
    operation: Option<Operation>,
}

impl<T: Send + 'static> Completion<T> {
    /// Starts an operation with a completion that feeds this future.
    pub(crate) fn start(start: impl FnOnce(Done<T>) -> Operation) -> Completion<T> {
        let (sender, receiver) = oneshot::channel();
        let operation = start(Box::new(move |result| {
            // The receiver is gone only when the caller stopped waiting.
            let _ = sender.send(result);
        }));
        Completion {
            receiver,
            operation: Some(operation),
        }
    }
}

impl<T> Future for Completion<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let polled = Pin::new(&mut self.receiver).poll(cx);
        polled.map(|received| {
            self.operation = None;
            // The host layer completes every operation exactly once; a dropped sender would be
            // a broken promise, reported as such rather than hanging.
            received.unwrap_or_else(|_| {
                Err(Error::new(
                    ErrorCode::Internal,
                    "internal error: an operation ended without completing",
                ))
            })
        })
    }
}

impl<T> Drop for Completion<T> {
    fn drop(&mut self) {
        if let Some(operation) = self.operation.take() {
            operation.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_recovery::host::Handle;

    #[test]
    fn an_operation_on_a_closed_handle_completes_with_closed() {
        let none: &[(&str, &str)] = &[];
        let handle = Handle::open_url("redis+sentinel://127.0.0.1:1/mymaster", none).unwrap();
        handle.close_blocking();
        let completion = Completion::start(|done| handle.execute(&[b"PING"], None, done));
        let result = futures_executor::block_on(completion);
        assert_eq!(result.unwrap_err().code(), ErrorCode::Closed);
    }
}
