//! Application pub/sub for the foreign side: the host layer's subscription, read by pulling
//! (`next`), which each host turns into its own form (a Kotlin `Flow`, a Ruby block). It follows
//! failovers in the core (`subscription_lost` / `subscription_restored` events); messages are
//! at-most-once.

use std::sync::Arc;

use sentinel_recovery::host::Subscriber;

use crate::codes::SentinelError;
use crate::completion::Completion;

/// One message published to a channel the subscription listens to.
#[derive(uniffi::Record)]
pub struct Message {
    /// The channel it was published to.
    pub channel: Vec<u8>,
    /// The pattern it matched (pattern subscriptions only).
    pub pattern: Option<Vec<u8>>,
    /// The payload, as published.
    pub payload: Vec<u8>,
}

/// A subscription on a connection of the core's own. Messages wait in a bounded buffer (the
/// newest are dropped beyond it, counted by [`PubSub::dropped`]) until [`PubSub::next`] takes
/// them.
#[derive(uniffi::Object)]
pub struct PubSub {
    inner: Subscriber,
}

impl PubSub {
    pub(crate) fn new(inner: Subscriber) -> Arc<PubSub> {
        Arc::new(PubSub { inner })
    }
}

fn to_error(e: sentinel_recovery::Error) -> SentinelError {
    SentinelError::from(&e)
}

#[uniffi::export]
impl PubSub {
    /// The next message, waiting for one; `None` once the subscription (or its client) is
    /// closed.
    pub async fn next(&self) -> Result<Option<Message>, SentinelError> {
        let message = Completion::start(|done| self.inner.next(done))
            .await
            .map_err(to_error)?;
        Ok(message.map(|m| Message {
            channel: m.channel.to_vec(),
            pattern: m.pattern.map(|p| p.to_vec()),
            payload: m.payload.to_vec(),
        }))
    }

    /// Adds channels.
    pub async fn subscribe(&self, channels: Vec<Vec<u8>>) -> Result<(), SentinelError> {
        Completion::start(|done| self.inner.subscribe(&channels, done))
            .await
            .map_err(to_error)
    }

    /// Adds glob-style patterns.
    pub async fn psubscribe(&self, patterns: Vec<Vec<u8>>) -> Result<(), SentinelError> {
        Completion::start(|done| self.inner.psubscribe(&patterns, done))
            .await
            .map_err(to_error)
    }

    /// Removes channels: no message of theirs is returned once this completes.
    pub async fn unsubscribe(&self, channels: Vec<Vec<u8>>) -> Result<(), SentinelError> {
        Completion::start(|done| self.inner.unsubscribe(&channels, done))
            .await
            .map_err(to_error)
    }

    /// Removes patterns.
    pub async fn punsubscribe(&self, patterns: Vec<Vec<u8>>) -> Result<(), SentinelError> {
        Completion::start(|done| self.inner.punsubscribe(&patterns, done))
            .await
            .map_err(to_error)
    }

    /// Messages dropped because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped()
    }

    /// Closes the subscription (its connection too); a waiting [`PubSub::next`] returns `None`.
    pub fn unsubscribe_all(&self) {
        self.inner.close();
    }

    /// Whether it was closed (by [`PubSub::unsubscribe_all`] or by closing the client).
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}
