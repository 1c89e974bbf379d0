//! The multiplexed connection: cheap handles in front of one task that owns the socket.
//!
//! Callers encode their command straight into the connection's outbox and queue who waits for
//! the reply, both under one lock, so bytes and waiters stay in the same order. On an idle
//! connection (nothing waiting to be written, no reply outstanding) the caller then sends its
//! bytes itself with one non-blocking write: a command one at a time needs no other thread to wake
//! (what the socket does not take at once is left to the task, which is woken for it). Bursts of
//! commands from many callers are left to the task, which writes each burst with one call;
//! except for an event loop that reads the replies of its commands itself: it writes the
//! commands it sends meanwhile too, and reads their replies ([`Reading::Extend`]). The task
//! reads and decodes replies and
//! completes waiters in FIFO order: Redis answers in request order. Because a request is queued
//! synchronously, a caller that stops waiting never desynchronises the stream: its reply is still
//! read and matched, then discarded.

mod connect;
mod frames;
mod group;
mod handle;
mod options;
mod outbox;
mod pubsub;
mod read;
mod read_side;
mod shared;
mod socket;

pub(crate) use connect::tcp;
mod task;
#[cfg(test)]
mod tests;

pub use handle::{Connection, Reading};
pub use options::ConnectOptions;
pub use outbox::Reply;
pub use pubsub::Frame;
#[cfg(feature = "internals")]
pub use pubsub::SubscribedConnection;
pub use read::OwnReply;
pub use shared::GroupReply;
