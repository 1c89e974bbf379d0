//! Telling pub/sub frames from replies, and what one means to a subscriber.

use bytes::Bytes;

use crate::resp::Value;

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
