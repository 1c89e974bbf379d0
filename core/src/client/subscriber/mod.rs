//! Pub/sub for applications: a subscription on a connection of its own that follows the node.
//!
//! Each [`Subscription`] owns one connection and one task on the core runtime. The task keeps
//! the channels and patterns subscribed on the node the client uses (the primary, or a replica
//! with `read_from=replica`). When that connection is lost, or a failover makes another node the
//! one to use, it emits `subscription_lost`, finds the node again the way commands do, subscribes
//! every channel and pattern there, and emits `subscription_restored` with the gap in
//! milliseconds. Redis pub/sub is at-most-once: what is published during the gap is not received.
//!
//! Delivery never blocks the task: messages go into a bounded buffer per subscription; when it is
//! full the newest message is dropped and counted ([`Subscription::dropped`]).

mod subscription;
mod task;

pub use subscription::{Subscription, SubscriptionControl, DEFAULT_BUFFER};
