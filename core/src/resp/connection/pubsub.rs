//! Pub/sub framing: a connection in subscribe mode, and telling its messages from replies.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::frames::{is_subscribe_confirmation, PubSub};
use super::handle::Connection;
use crate::error::{Error, Result};
use crate::resp::Value;

/// A connection in pub/sub mode, yielding the messages of the channels it subscribed to.
///
/// Dropping it closes the connection (unless other [`Connection`] clones are still alive).
pub struct SubscribedConnection {
    pub(super) conn: Connection,
    pub(super) rx: mpsc::UnboundedReceiver<Value>,
    /// Messages that arrived while `subscribe` was still waiting for confirmations.
    pub(super) early: VecDeque<(Bytes, Bytes)>,
}

impl SubscribedConnection {
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

impl fmt::Debug for SubscribedConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubscribedConnection")
            .field("connection", &self.conn)
            .finish_non_exhaustive()
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

impl Connection {
    /// Puts the connection in pub/sub mode with `SUBSCRIBE channels...` and waits up to `timeout`
    /// for one confirmation per channel.
    ///
    /// Works on RESP2 (every frame after SUBSCRIBE is a pub/sub array) and RESP3 (messages are
    /// push frames). Errors: the server's refusal, timeout, or connection loss; on any error the
    /// connection is closed. Use one subscription per connection.
    pub async fn subscribe(
        self,
        channels: &[&str],
        timeout: Duration,
    ) -> Result<SubscribedConnection> {
        if channels.is_empty() {
            return Err(Error::config("SUBSCRIBE needs at least one channel"));
        }
        let mut args: Vec<&[u8]> = vec![b"SUBSCRIBE"];
        args.extend(channels.iter().map(|c| c.as_bytes()));
        let (push, rx) = mpsc::unbounded_channel();
        self.queue_pubsub(&args, &push)?;

        let mut sub = SubscribedConnection {
            conn: self,
            rx,
            early: VecDeque::new(),
        };
        let wait = async {
            let mut confirmed = 0;
            while confirmed < channels.len() {
                match sub.rx.recv().await {
                    None => return Err(sub.conn.lost()),
                    Some(Value::Error(text)) => return Err(Error::server(&text)),
                    Some(value) => match PubSub::parse(value) {
                        PubSub::Subscribed => confirmed += 1,
                        PubSub::Message(channel, payload) => {
                            sub.early.push_back((channel, payload))
                        }
                        PubSub::Other => {}
                    },
                }
            }
            Ok(())
        };
        let peer = sub.conn.peer();
        let outcome = match tokio::time::timeout(timeout, wait).await {
            Ok(result) => result,
            Err(_) => Err(Error::timeout(format!(
                "no SUBSCRIBE confirmation from {peer} within {}",
                crate::error::duration_text(timeout)
            ))),
        };
        match outcome {
            Ok(()) => Ok(sub),
            Err(e) => {
                sub.conn.close();
                Err(e.context(format_args!("subscribe on {peer}")))
            }
        }
    }
}
