//! Pub/sub framing: a connection in subscribe mode, and telling its messages from replies.

use super::*;

/// A connection in pub/sub mode, yielding the messages of the channels it subscribed to.
///
/// Dropping it closes the connection (unless other [`Connection`] clones are still alive).
pub struct Subscription {
    pub(super) conn: Connection,
    pub(super) rx: mpsc::UnboundedReceiver<Value>,
    /// Messages that arrived while `subscribe` was still waiting for confirmations.
    pub(super) early: VecDeque<(Bytes, Bytes)>,
}

impl Subscription {
    /// The next message as `(channel, payload)`, from `message` and `pmessage` (pattern
    /// subscriptions) frames alike; confirmations and other frames are skipped.
    ///
    /// `None` once the connection has ended.
    pub async fn next(&mut self) -> Option<(Bytes, Bytes)> {
        if let Some(message) = self.early.pop_front() {
            return Some(message);
        }
        loop {
            let value = self.rx.recv().await?;
            match PubSub::parse(value) {
                PubSub::Message(channel, payload) => return Some((channel, payload)),
                PubSub::Subscribed | PubSub::Other => {}
            }
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("connection", &self.conn)
            .finish_non_exhaustive()
    }
}

/// What a pub/sub frame means to a subscriber.
pub(super) enum PubSub {
    Subscribed,
    Message(Bytes, Bytes),
    Other,
}

impl PubSub {
    pub(super) fn parse(value: Value) -> PubSub {
        let Some(items) = value.into_array() else {
            return PubSub::Other;
        };
        let mut items = items.into_iter();
        let Some(kind) = items.next() else {
            return PubSub::Other;
        };
        let Some(kind) = kind.as_bytes() else {
            return PubSub::Other;
        };
        if kind.eq_ignore_ascii_case(b"subscribe") {
            return PubSub::Subscribed;
        }
        let rest: Vec<Value> = items.collect();
        let (channel, payload) =
            if kind.eq_ignore_ascii_case(b"message") || kind.eq_ignore_ascii_case(b"smessage") {
                match <[Value; 2]>::try_from(rest) {
                    Ok([channel, payload]) => (channel, payload),
                    Err(_) => return PubSub::Other,
                }
            } else if kind.eq_ignore_ascii_case(b"pmessage") {
                match <[Value; 3]>::try_from(rest) {
                    Ok([_pattern, channel, payload]) => (channel, payload),
                    Err(_) => return PubSub::Other,
                }
            } else {
                return PubSub::Other;
            };
        match (channel.into_bytes(), payload.into_bytes()) {
            (Some(channel), Some(payload)) => PubSub::Message(channel, payload),
            _ => PubSub::Other,
        }
    }
}

/// RESP2 pub/sub frames are plain arrays; these first elements mark them.
pub(super) fn is_resp2_pubsub_frame(value: &Value) -> bool {
    const KINDS: [&[u8]; 9] = [
        b"message",
        b"pmessage",
        b"smessage",
        b"subscribe",
        b"psubscribe",
        b"ssubscribe",
        b"unsubscribe",
        b"punsubscribe",
        b"sunsubscribe",
    ];
    let Value::Array(items) = value else {
        return false;
    };
    let Some(kind) = items.first().and_then(Value::as_bytes) else {
        return false;
    };
    KINDS.iter().any(|k| kind.eq_ignore_ascii_case(k))
}

pub(super) fn is_subscribe_confirmation(value: &Value) -> bool {
    match value {
        Value::Array(items) | Value::Push(items) => items
            .first()
            .and_then(Value::as_bytes)
            .is_some_and(|k| k.eq_ignore_ascii_case(b"subscribe")),
        _ => false,
    }
}
