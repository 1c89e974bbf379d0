//! The client object: each operation starts the host layer's callback form and awaits its
//! completion ([`Completion`]); nothing here runs on, or starts anything on, the core runtime.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sentinel_recovery::deadline;
use sentinel_recovery::host::Handle;
use sentinel_recovery::Error;

use crate::codes::SentinelError;
use crate::completion::Completion;
use crate::events::{EventListener, Subscription};
use crate::model::{Event, TimeoutUnit, Topology};
use crate::pubsub::PubSub;
use crate::reply::Reply;

/// A client following one service's primary through Sentinel.
#[derive(uniffi::Object)]
pub struct Client {
    handle: Handle,
}

type Outcome<T> = Result<T, SentinelError>;

fn convert<T, U: From<T>>(result: sentinel_recovery::Result<T>) -> Outcome<U> {
    result.map(U::from).map_err(|e| SentinelError::from(&e))
}

fn refuse_empty(commands: &[Vec<Vec<u8>>]) -> Result<(), SentinelError> {
    if commands.is_empty() {
        return Err(SentinelError::from(&Error::config(
            "a pipeline or transaction needs at least one command",
        )));
    }
    Ok(())
}

impl Client {
    async fn pipeline_under(
        &self,
        commands: Vec<Vec<Vec<u8>>>,
        timeout: Option<Duration>,
    ) -> Outcome<Vec<Reply>> {
        refuse_empty(&commands)?;
        let results = Completion::start(|done| self.handle.pipeline(&commands, timeout, done))
            .await
            .map_err(|e| SentinelError::from(&e))?;
        Ok(results
            .into_iter()
            .map(|r| match r {
                Ok(value) => Reply::from(value),
                Err(e) => Reply::from_error(&e),
            })
            .collect())
    }

    async fn transaction_under(
        &self,
        commands: Vec<Vec<Vec<u8>>>,
        watch: Vec<Vec<u8>>,
        timeout: Option<Duration>,
    ) -> Outcome<Option<Vec<Reply>>> {
        refuse_empty(&commands)?;
        let replies =
            Completion::start(|done| self.handle.transaction(&commands, &watch, timeout, done))
                .await
                .map_err(|e| SentinelError::from(&e))?;
        Ok(replies.map(|r| r.into_iter().map(Reply::from).collect()))
    }
}

#[uniffi::export]
impl Client {
    /// Opens a client from a `redis+sentinel://` URL plus options (the URL's query keys, e.g.
    /// `command_timeout_ms`); returns at once, discovery runs on the core's threads. A bad URL
    /// or option fails with `config`, naming it.
    #[uniffi::constructor]
    pub fn connect(url: String, options: HashMap<String, String>) -> Outcome<Arc<Client>> {
        let mut options: Vec<(String, String)> = options.into_iter().collect();
        // Applied in a stable order, so the same map always gives the same first error.
        options.sort();
        let handle = Handle::open_url(&url, &options).map_err(|e| SentinelError::from(&e))?;
        Ok(Arc::new(Client { handle }))
    }

    /// Completes with the topology once a verified primary is known (waits up to
    /// `command_timeout_ms`).
    pub async fn ready(&self) -> Outcome<Topology> {
        convert(Completion::start(|done| self.handle.ready(done)).await)
    }

    /// Runs one command (its name and arguments as bytes) on the node it belongs to.
    pub async fn execute(&self, args: Vec<Vec<u8>>) -> Outcome<Reply> {
        convert(Completion::start(|done| self.handle.execute(&args, None, done)).await)
    }

    /// [`Client::execute`] with a deadline of its own, `timeout` in `unit`, instead of
    /// `command_timeout_ms`: it ends the whole call, blocking commands included (`BLPOP k 0`: its
    /// connection is closed, so the server stops blocking it); past it the call fails with
    /// `timeout`. The timeout must be greater than 0 and at most 2^31 - 1 ms (the rule every
    /// binding shares, `sentinel_recovery::deadline`); otherwise the call fails with `config`,
    /// naming the value in `unit`, and nothing is sent.
    pub async fn execute_timeout(
        &self,
        args: Vec<Vec<u8>>,
        timeout: f64,
        unit: TimeoutUnit,
    ) -> Outcome<Reply> {
        let timeout =
            deadline::call_timeout(timeout, unit.into()).map_err(|e| SentinelError::from(&e))?;
        convert(Completion::start(|done| self.handle.execute(&args, Some(timeout), done)).await)
    }

    /// Sends commands back to back; one reply per command, a failed command as
    /// [`Reply::Error`] with its code.
    pub async fn pipeline(&self, commands: Vec<Vec<Vec<u8>>>) -> Outcome<Vec<Reply>> {
        self.pipeline_under(commands, None).await
    }

    /// [`Client::pipeline`] with a deadline of its own, `timeout` in `unit`, instead of
    /// `command_timeout_ms`: it bounds the whole pipeline, which fails as a whole with `timeout`
    /// past it. The timeout keeps [`Client::execute_timeout`]'s rule (`config`, nothing sent).
    pub async fn pipeline_timeout(
        &self,
        commands: Vec<Vec<Vec<u8>>>,
        timeout: f64,
        unit: TimeoutUnit,
    ) -> Outcome<Vec<Reply>> {
        let timeout =
            deadline::call_timeout(timeout, unit.into()).map_err(|e| SentinelError::from(&e))?;
        self.pipeline_under(commands, Some(timeout)).await
    }

    /// Runs `commands` in MULTI/EXEC on the primary, after `WATCH watch...` when `watch` is not
    /// empty. `None` when a watched key changed (nothing ran), else one reply per command. The
    /// whole transaction, from the call until EXEC's reply, is bounded by `command_timeout_ms`.
    pub async fn transaction(
        &self,
        commands: Vec<Vec<Vec<u8>>>,
        watch: Vec<Vec<u8>>,
    ) -> Outcome<Option<Vec<Reply>>> {
        self.transaction_under(commands, watch, None).await
    }

    /// [`Client::transaction`] with a deadline of its own, `timeout` in `unit`, instead of
    /// `command_timeout_ms`: it bounds the whole transaction, from the call until EXEC's reply.
    /// Past it the call fails with `timeout` and the transaction's dedicated connection is
    /// closed, so nothing stays queued or blocked on the server (an EXEC sent but not answered
    /// in time may or may not have been applied). The timeout keeps
    /// [`Client::execute_timeout`]'s rule (`config`, nothing sent).
    pub async fn transaction_timeout(
        &self,
        commands: Vec<Vec<Vec<u8>>>,
        watch: Vec<Vec<u8>>,
        timeout: f64,
        unit: TimeoutUnit,
    ) -> Outcome<Option<Vec<Reply>>> {
        let timeout =
            deadline::call_timeout(timeout, unit.into()).map_err(|e| SentinelError::from(&e))?;
        self.transaction_under(commands, watch, Some(timeout)).await
    }

    /// The current topology; never waits on the network.
    pub fn topology(&self) -> Outcome<Topology> {
        convert(self.handle.topology())
    }

    /// Calls `listener` with every event from now on until the subscription is removed or the
    /// client closed.
    pub fn subscribe(&self, listener: Arc<dyn EventListener>) -> Outcome<Arc<Subscription>> {
        let subscription = self
            .handle
            .subscribe_events(Box::new(move |event| listener.on_event(Event::from(event))))
            .map_err(|e| SentinelError::from(&e))?;
        Ok(Subscription::new(subscription))
    }

    /// Subscribes to `channels` and `patterns` (at least one name in all) on a connection of
    /// the core's own that follows failovers; completes once the node confirmed them. `buffer`
    /// messages wait at most (default 4096).
    pub async fn pubsub(
        &self,
        channels: Vec<Vec<u8>>,
        patterns: Vec<Vec<u8>>,
        buffer: Option<u32>,
    ) -> Outcome<Arc<PubSub>> {
        let buffer = buffer.map(|b| b as usize);
        let subscriber =
            Completion::start(|done| self.handle.subscribe(&channels, &patterns, buffer, done))
                .await
                .map_err(|e| SentinelError::from(&e))?;
        Ok(PubSub::new(subscriber))
    }

    /// Asks for a discovery round now.
    pub fn refresh(&self) -> Outcome<()> {
        self.handle.refresh().map_err(|e| SentinelError::from(&e))
    }

    /// Commands waiting for a usable node.
    pub fn queued(&self) -> u64 {
        self.handle.queued() as u64
    }

    /// Whether the client was shut down.
    pub fn is_closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// Closes the client: listeners are removed, operations in flight complete with `closed`,
    /// connections close; completes after all that. Later operations fail with `closed`.
    /// Idempotent. (Named `shutdown`: uniffi's generated classes use `close` to free the object.)
    pub async fn shutdown(&self) {
        let (sender, receiver) = futures_channel::oneshot::channel();
        self.handle.close(Box::new(move || {
            let _ = sender.send(());
        }));
        // The host layer runs `done` exactly once, also when no runtime is left.
        let _ = receiver.await;
    }

    /// [`Client::shutdown`], blocking the calling thread until it is complete (for `close()` of
    /// an `AutoCloseable`). From inside a listener it removes the listeners before returning and
    /// leaves the rest to the core.
    pub fn shutdown_blocking(&self) {
        self.handle.close_blocking();
    }
}

impl Drop for Client {
    /// A client the host forgot to close is closed in the background, never leaked running.
    fn drop(&mut self) {
        if !self.handle.is_closed() {
            self.handle.close(Box::new(|| {}));
        }
    }
}
