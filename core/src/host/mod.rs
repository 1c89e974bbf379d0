//! The host layer: what every language binding stands on.
//!
//! A [`Handle`] offers each operation in a callback form (the completion runs on a core thread,
//! where a binding copies the result and hands it to its host's scheduler) and a blocking form
//! (blocks the calling host thread, and only it); Rust code uses [`crate::Client`]'s async
//! methods. Bindings convert values and own host-side lifetimes; the guarantees live here, once,
//! and are tested here:
//!
//! - every completion runs exactly once: with the result, with `internal` when something
//!   panicked, or with `closed` when the handle was closed or the core runtime stopped first;
//! - once [`Handle::close`] (or [`EventRegistration::remove`], or [`Subscriber::close`]) has
//!   completed, no callback of that handle (or subscription) runs again;
//! - `close` completes every operation still in flight with `closed` before its own completion;
//! - a panic anywhere, in the core or in a host callback, never aborts the process and never
//!   loses a completion (a host callback that panics is logged);
//! - what a binding then hands to its host's own thread or loop travels in a [`Mailbox`]: one
//!   ordered, bounded, coalescing queue with one overflow rule (completions are never dropped;
//!   events, messages and log records beyond the bound are, and counted) and a close barrier.
//!
//! No binding needs tokio: everything that runs on the core runtime is started from here.

mod doctor;
mod events;
mod gate;
mod guard;
mod handle;
mod hints;
mod inflight;
pub mod log;
pub mod mailbox;
mod proxy;
mod subscriptions;
mod transaction;
mod wait;
mod waiter;

pub use crate::resp::OwnReply;
pub use doctor::{config_from_url, doctor, doctor_blocking, Diagnosis};
pub use events::{EventHandler, EventRegistration};
pub use handle::Handle;
pub use hints::{ApiNames, RUST};
pub use inflight::{Done, Operation, Started};
pub use mailbox::{Completion, Delivery, Mailbox, Pushed};
pub use proxy::{HostProxy, DEFAULT_GRACE as PROXY_DEFAULT_GRACE};
pub use subscriptions::{MessageHandler, Subscriber};
pub use transaction::HostTransaction;

#[cfg(test)]
mod subscriber_tests;
#[cfg(test)]
mod tests;
