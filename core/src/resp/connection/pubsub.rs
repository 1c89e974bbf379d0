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

/// Whether `value` confirms a SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE or PUNSUBSCRIBE (the first
/// confirmation of such a command takes the command's place among the replies awaited).
pub(super) fn is_subscribe_confirmation(value: &Value) -> bool {
    const KINDS: [&[u8]; 4] = [b"subscribe", b"psubscribe", b"unsubscribe", b"punsubscribe"];
    match value {
        Value::Array(items) | Value::Push(items) => items
            .first()
            .and_then(Value::as_bytes)
            .is_some_and(|k| KINDS.iter().any(|kind| k.eq_ignore_ascii_case(kind))),
        _ => false,
    }
}

/// A frame on a connection in pub/sub mode, as an application subscriber sees it.
#[derive(Debug)]
pub enum Frame {
    /// A `message` or `pmessage`.
    Message(crate::types::Message),
    /// One confirmation of SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE or PUNSUBSCRIBE (one per name).
    Confirmed,
    /// An error reply: the pub/sub command was refused.
    Refused(Error),
    /// Anything else (a RESP3 push of another kind, a PONG).
    Other,
}

impl Frame {
    /// Reads what a pub/sub frame means.
    pub fn parse(value: Value) -> Frame {
        if let Value::Error(text) = &value {
            return Frame::Refused(Error::server(text));
        }
        if is_subscribe_confirmation(&value) {
            return Frame::Confirmed;
        }
        let Some(items) = value.into_array() else {
            return Frame::Other;
        };
        let mut items = items.into_iter().map(Value::into_bytes);
        let Some(Some(kind)) = items.next() else {
            return Frame::Other;
        };
        let rest: Option<Vec<Bytes>> = items.collect();
        let message = match (rest, &kind[..]) {
            (Some(rest), kind) if kind.eq_ignore_ascii_case(b"message") => {
                match <[Bytes; 2]>::try_from(rest) {
                    Ok([channel, payload]) => crate::types::Message {
                        channel,
                        pattern: None,
                        payload,
                    },
                    Err(_) => return Frame::Other,
                }
            }
            (Some(rest), kind) if kind.eq_ignore_ascii_case(b"pmessage") => {
                match <[Bytes; 3]>::try_from(rest) {
                    Ok([pattern, channel, payload]) => crate::types::Message {
                        channel,
                        pattern: Some(pattern),
                        payload,
                    },
                    Err(_) => return Frame::Other,
                }
            }
            _ => return Frame::Other,
        };
        Frame::Message(message)
    }
}

impl Connection {
    /// Sends a pub/sub command (`SUBSCRIBE`, `PSUBSCRIBE`, `UNSUBSCRIBE`, `PUNSUBSCRIBE` and its
    /// names) without waiting: its confirmations (one per name), an error reply, and every
    /// message from then on go to `push`; read them with [`Frame::parse`]. Send the next such
    /// command only once this one is confirmed or refused, so an error reply is matched to it.
    pub fn send_pubsub(
        &self,
        command: &str,
        names: &[Bytes],
        push: &mpsc::UnboundedSender<Value>,
    ) -> Result<()> {
        let mut args: Vec<&[u8]> = Vec::with_capacity(names.len() + 1);
        args.push(command.as_bytes());
        args.extend(names.iter().map(|n| n.as_ref()));
        self.queue_pubsub(&args, push)
    }
}
