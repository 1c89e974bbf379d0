//! The monitor: one task per followed service that owns the sentinel list, runs discovery rounds,
//! listens to sentinel events and publishes the topology and its changes.
//!
//! Everything that decides runs on this one task, so switches for a service are serialized by
//! construction: a trigger that arrives while a round runs waits in the task's queue and is
//! replayed once the round is over. Rounds are scheduled with one-shot timers; retries stop on
//! state (a ROLE-verified primary), not on the order in which events arrive.

mod actor;
mod backoff;
mod command;
mod handle;
mod promotion;
pub(crate) mod registry;
mod sentinel_feed;
mod status;

#[cfg(feature = "internals")]
pub use crate::types::SentinelInfo;
pub use crate::types::{unix_ms, Event, EventKind, Topology};
#[cfg(feature = "internals")]
pub use registry::live_monitors;

pub(crate) use handle::Monitor;
pub(crate) use status::Status;
