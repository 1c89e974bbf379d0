//! What the handles and the task share: the outbox, the lendable read side, the wake-up and the
//! end of the connection.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use bytes::Bytes;

use super::outbox::Outbox;
use super::read_side::ReadState;
use crate::error::Result;
use crate::resp::Value;
use crate::types::Protocol;

/// State visible to both the handles and the task.
pub(super) struct ConnectionState {
    pub(super) peer: SocketAddr,
    pub(super) protocol: AtomicU8,
    /// Cancelled by `close()` (asking the task to stop) and by the task when it ends.
    pub(super) done: CancellationToken,
    /// Why the connection ended, for errors returned to later requests.
    pub(super) end_reason: Mutex<Option<String>>,
    pub(super) outbox: Mutex<Outbox>,
    /// The read side of plain TCP, lent to a caller that reads its own reply (see `read`).
    /// Lock order: `read`, then `outbox`.
    pub(super) read: Mutex<ReadState>,
    /// Wakes the task: bytes it must write, an earlier deadline to watch, or no handle left.
    pub(super) wake: Notify,
    pub(super) handles_gone: AtomicBool,
    /// Commands that share a trailer (see `group`). Lock order: `group`, then `outbox`.
    pub(super) group: Mutex<Group>,
}

/// The commands of [`Connection::call_in_group`](super::Connection::call_in_group).
#[derive(Default)]
pub(super) struct Group {
    /// A trailer is written and not answered yet: commands wait in `queued` for the next.
    pub(super) outstanding: bool,
    /// Commands that arrived while a trailer was outstanding, in order.
    pub(super) queued: Vec<Member>,
}

/// Who gets a grouped command's reply with the trailer's, once.
pub(super) type GroupDone = Box<dyn FnOnce(GroupReply) + Send + 'static>;

/// One command of a group and who gets its reply with the trailer's.
pub(super) struct Member {
    pub(super) command: Bytes,
    pub(super) done: GroupDone,
}

/// What a command sent in a group gets, once.
#[derive(Debug)]
pub enum GroupReply {
    /// Its reply, and the reply of the trailer written after it (the first after it: a trailer
    /// never answers for a command queued after it was written).
    Replied {
        /// The command's own reply.
        reply: Result<Value>,
        /// The trailer's reply.
        trailer: Result<Value>,
    },
    /// The connection had ended before the command was handed to it: nothing was sent.
    NotSent,
}

/// Marks the last handle's drop, so the task can end.
pub(super) struct Handles(pub(super) Arc<ConnectionState>);

impl Drop for Handles {
    fn drop(&mut self) {
        self.0.handles_gone.store(true, Ordering::SeqCst);
        self.0.wake.notify_one();
    }
}

impl ConnectionState {
    pub(super) fn protocol(&self) -> Protocol {
        decode_protocol(self.protocol.load(Ordering::SeqCst))
    }
}

pub(super) fn encode_protocol(protocol: Protocol) -> u8 {
    match protocol {
        Protocol::Resp2 => 2,
        Protocol::Resp3 => 3,
    }
}

pub(super) fn decode_protocol(value: u8) -> Protocol {
    if value == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    }
}
