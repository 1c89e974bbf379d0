//! The public handle: open from a URL, run commands on the primary (or replicas), read the
//! topology, receive events, close.
//!
//! Opening returns at once; discovery runs on the core's own threads. No method here blocks the
//! calling thread on network work. A command whose node already has an open connection is
//! queued on it by the calling thread, which also writes it when nothing else waits to be
//! written (one non-blocking write, see `call`); anything that has to wait (for a primary, a
//! connection, a retry) runs as a task on the core runtime. The async methods only wait for the
//! completion, so they can be awaited from any executor.

mod attempt;
mod call;
pub(crate) use command::Deadline;
mod command;
mod durable;
mod execute;
mod handle;
mod nodes;
mod route;
mod subscriber;
mod transaction;

pub use call::Done;
#[cfg(test)]
pub(crate) use command::classify as classify_for_tests;
pub(crate) use durable::WriteTable;
pub use handle::{Client, EventStream};
pub use route::Route;
pub use subscriber::{Subscription, SubscriptionControl, DEFAULT_BUFFER};
pub use transaction::Transaction;
pub(crate) use transaction::{check as check_transaction_command, ended as transaction_ended};
