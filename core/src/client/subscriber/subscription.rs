//! What the application holds: [`Subscription`] (the messages) and [`SubscriptionControl`]
//! (subscribe, unsubscribe, close from anywhere), and the [`Client`] methods that start one.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::task::{ControlShared, Request, Task, Wanted};
use crate::client::handle::Client;
use crate::error::{Error, Result};
use crate::sync::Locked;
use crate::types::Message;

/// Messages a subscription buffers by default before it starts dropping the newest.
pub const DEFAULT_BUFFER: usize = 4096;

impl Client {
    /// Subscribes to `channels` on a connection of its own and returns once the node confirmed
    /// them (within `command_timeout_ms`). The subscription follows failovers (see the module
    /// docs) and buffers up to 4096 messages (`DEFAULT_BUFFER`).
    pub async fn subscribe<A: AsRef<[u8]>>(&self, channels: &[A]) -> Result<Subscription> {
        self.subscription::<A>(channels, &[], DEFAULT_BUFFER).await
    }

    /// [`Client::subscribe`] for glob-style patterns (`PSUBSCRIBE`): messages carry the pattern.
    pub async fn psubscribe<A: AsRef<[u8]>>(&self, patterns: &[A]) -> Result<Subscription> {
        self.subscription::<A>(&[], patterns, DEFAULT_BUFFER).await
    }

    /// Subscribes to `channels` and `patterns` together (at least one name in all), buffering up
    /// to `buffer` messages; beyond that the newest are dropped and counted.
    pub async fn subscription<A: AsRef<[u8]>>(
        &self,
        channels: &[A],
        patterns: &[A],
        buffer: usize,
    ) -> Result<Subscription> {
        crate::runtime::on_core(self.subscription_work(channels, patterns, buffer)?).await
    }

    /// A subscription's start, checked and copied but not started; the future must run on the
    /// core runtime.
    pub(crate) fn subscription_work<A: AsRef<[u8]>>(
        &self,
        channels: &[A],
        patterns: &[A],
        buffer: usize,
    ) -> Result<impl Future<Output = Result<Subscription>> + Send + 'static> {
        if channels.is_empty() && patterns.is_empty() {
            return Err(Error::config(
                "a subscription needs at least one channel or pattern",
            ));
        }
        if buffer == 0 {
            return Err(Error::config(
                "a subscription's buffer must hold at least one message",
            ));
        }
        let inner = self.inner.clone();
        let monitor = self.monitor()?;
        let names = |list: &[A]| {
            list.iter()
                .map(|n| Bytes::copy_from_slice(n.as_ref()))
                .collect()
        };
        let wanted = Wanted {
            channels: names(channels),
            patterns: names(patterns),
        };
        let timeout = inner.config.command_timeout();
        Ok(async move {
            let (requests, requests_rx) = mpsc::unbounded_channel();
            let (out, messages) = mpsc::channel(buffer);
            let control = SubscriptionControl {
                shared: Arc::new(ControlShared {
                    wanted: Mutex::new(wanted),
                    requests,
                    dropped: AtomicU64::new(0),
                    closed: CancellationToken::new(),
                }),
            };
            let (ready_tx, ready) = oneshot::channel();
            let task = Task {
                inner,
                monitor,
                control: control.shared.clone(),
                out,
                ready: Some(ready_tx),
            };
            tokio::spawn(task.run(requests_rx));
            let subscription = Subscription {
                control: control.clone(),
                messages,
            };
            let outcome = tokio::time::timeout(timeout, ready).await;
            match outcome {
                Ok(Ok(Ok(()))) => Ok(subscription),
                Ok(Ok(Err(e))) => Err(e),
                Ok(Err(_)) => Err(Error::closed()),
                Err(_) => Err(Error::timeout(format!(
                    "the subscription was not confirmed within {}",
                    crate::error::duration_text(timeout)
                ))),
            }
        })
    }
}

/// Changes a [`Subscription`] from anywhere: subscribe and unsubscribe, read the dropped count,
/// close. Cheap to clone.
#[derive(Clone)]
pub struct SubscriptionControl {
    shared: Arc<ControlShared>,
}

impl SubscriptionControl {
    /// Adds channels; returns once the node confirmed them (or at once while the subscription
    /// is between nodes: they are subscribed when it is restored).
    pub async fn subscribe<A: AsRef<[u8]>>(&self, channels: &[A]) -> Result<()> {
        self.change("SUBSCRIBE", channels).await
    }

    /// Adds patterns, as [`SubscriptionControl::subscribe`] adds channels.
    pub async fn psubscribe<A: AsRef<[u8]>>(&self, patterns: &[A]) -> Result<()> {
        self.change("PSUBSCRIBE", patterns).await
    }

    /// Removes channels. No message of theirs is delivered once this is called, even one
    /// already buffered.
    pub async fn unsubscribe<A: AsRef<[u8]>>(&self, channels: &[A]) -> Result<()> {
        self.change("UNSUBSCRIBE", channels).await
    }

    /// Removes patterns, as [`SubscriptionControl::unsubscribe`] removes channels.
    pub async fn punsubscribe<A: AsRef<[u8]>>(&self, patterns: &[A]) -> Result<()> {
        self.change("PUNSUBSCRIBE", patterns).await
    }

    /// Checks and records a change now (so filtering applies at once) and returns what waits
    /// for the node's confirmation.
    pub(crate) fn change_work<A: AsRef<[u8]>>(
        &self,
        command: &'static str,
        names: &[A],
    ) -> Result<impl Future<Output = Result<()>> + Send + 'static> {
        if names.is_empty() {
            return Err(Error::config(format!("{command} needs at least one name")));
        }
        if self.is_closed() {
            return Err(Error::closed());
        }
        let names: Vec<Bytes> = names
            .iter()
            .map(|n| Bytes::copy_from_slice(n.as_ref()))
            .collect();
        {
            let mut wanted = self.shared.wanted.locked();
            let Wanted { channels, patterns } = &mut *wanted;
            let (set, add) = match command {
                "SUBSCRIBE" => (channels, true),
                "PSUBSCRIBE" => (patterns, true),
                "UNSUBSCRIBE" => (channels, false),
                _ => (patterns, false),
            };
            for name in &names {
                if add {
                    set.insert(name.clone());
                } else {
                    set.remove(name);
                }
            }
        }
        let (ack, acked) = oneshot::channel();
        let sent = self.shared.requests.send(Request {
            command,
            names,
            ack,
        });
        Ok(async move {
            if sent.is_err() {
                return Err(Error::closed());
            }
            acked.await.unwrap_or_else(|_| Err(Error::closed()))
        })
    }

    async fn change<A: AsRef<[u8]>>(&self, command: &'static str, names: &[A]) -> Result<()> {
        self.change_work(command, names)?.await
    }

    /// Messages dropped so far because the buffer was full (the newest are dropped).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// The channels subscribed (or being subscribed) now.
    pub fn channels(&self) -> Vec<Bytes> {
        self.shared
            .wanted
            .locked()
            .channels
            .iter()
            .cloned()
            .collect()
    }

    /// The patterns subscribed (or being subscribed) now.
    pub fn patterns(&self) -> Vec<Bytes> {
        self.shared
            .wanted
            .locked()
            .patterns
            .iter()
            .cloned()
            .collect()
    }

    /// Ends the subscription: its connection closes, [`Subscription::next`] returns `None` and
    /// buffered messages are discarded. Idempotent.
    pub fn close(&self) {
        self.shared.closed.cancel();
    }

    /// Whether the subscription ended (closed here, or its client closed).
    pub fn is_closed(&self) -> bool {
        self.shared.closed.is_cancelled()
    }

    /// Resolves once the subscription has ended.
    pub async fn closed(&self) {
        self.shared.closed.cancelled().await
    }

    /// Whether `message` is still wanted (its channel or pattern was not unsubscribed since).
    pub(crate) fn wants(&self, message: &Message) -> bool {
        self.shared.wanted.locked().wants(message)
    }
}

/// A pub/sub subscription of a [`Client`]: [`Subscription::next`] yields its messages in the
/// order the node sent them. Dropping it closes it.
pub struct Subscription {
    control: SubscriptionControl,
    messages: mpsc::Receiver<Message>,
}

impl Subscription {
    /// The next message, or `None` once the subscription or its client is closed.
    pub async fn next(&mut self) -> Option<Message> {
        loop {
            let message = tokio::select! {
                biased;
                _ = self.control.closed() => return None,
                m = self.messages.recv() => m?,
            };
            if self.control.is_closed() {
                return None;
            }
            if self.control.wants(&message) {
                return Some(message);
            }
        }
    }

    /// The next message if one is buffered, without waiting.
    pub fn try_next(&mut self) -> Option<Message> {
        while !self.control.is_closed() {
            let message = self.messages.try_recv().ok()?;
            if self.control.wants(&message) {
                return Some(message);
            }
        }
        None
    }

    /// What changes this subscription from elsewhere (another task, a host thread).
    pub fn control(&self) -> &SubscriptionControl {
        &self.control
    }

    /// See [`SubscriptionControl::subscribe`].
    pub async fn subscribe<A: AsRef<[u8]>>(&self, channels: &[A]) -> Result<()> {
        self.control.subscribe(channels).await
    }

    /// See [`SubscriptionControl::psubscribe`].
    pub async fn psubscribe<A: AsRef<[u8]>>(&self, patterns: &[A]) -> Result<()> {
        self.control.psubscribe(patterns).await
    }

    /// See [`SubscriptionControl::unsubscribe`].
    pub async fn unsubscribe<A: AsRef<[u8]>>(&self, channels: &[A]) -> Result<()> {
        self.control.unsubscribe(channels).await
    }

    /// See [`SubscriptionControl::punsubscribe`].
    pub async fn punsubscribe<A: AsRef<[u8]>>(&self, patterns: &[A]) -> Result<()> {
        self.control.punsubscribe(patterns).await
    }

    /// See [`SubscriptionControl::dropped`].
    pub fn dropped(&self) -> u64 {
        self.control.dropped()
    }

    /// See [`SubscriptionControl::close`].
    pub fn close(&self) {
        self.control.close()
    }

    /// A subscription fed from `messages` with no task behind it, for the host layer's tests.
    #[cfg(test)]
    pub(crate) fn detached(
        channels: &[&str],
        buffer: usize,
    ) -> (Subscription, mpsc::Sender<Message>) {
        let (requests, mut requests_rx) = mpsc::unbounded_channel::<Request>();
        let (out, messages) = mpsc::channel(buffer);
        let control = SubscriptionControl {
            shared: Arc::new(ControlShared {
                wanted: Mutex::new(Wanted {
                    channels: channels
                        .iter()
                        .map(|c| Bytes::copy_from_slice(c.as_bytes()))
                        .collect(),
                    patterns: std::collections::BTreeSet::new(),
                }),
                requests,
                dropped: AtomicU64::new(0),
                closed: CancellationToken::new(),
            }),
        };
        // Confirms every change at once, as a node would.
        if let Ok(handle) = crate::runtime::handle() {
            handle.spawn(async move {
                while let Some(request) = requests_rx.recv().await {
                    let _ = request.ack.send(Ok(()));
                }
            });
        }
        (Subscription { control, messages }, out)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.control.close();
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let wanted = self.control.shared.wanted.locked();
        f.debug_struct("Subscription")
            .field("channels", &wanted.channels.len())
            .field("patterns", &wanted.patterns.len())
            .field("dropped", &self.control.dropped())
            .field("closed", &self.control.is_closed())
            .finish()
    }
}
