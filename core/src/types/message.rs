//! A pub/sub message as a subscriber receives it.

use bytes::Bytes;

/// One message published to a channel the subscription listens to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The channel it was published to.
    pub channel: Bytes,
    /// The pattern it matched, for pattern subscriptions (`pmessage`); `None` for channels.
    pub pattern: Option<Bytes>,
    /// The payload, as published.
    pub payload: Bytes,
}
