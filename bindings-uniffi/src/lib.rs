//! uniffi bindings of sentinel-recovery: one Rust interface over the core's host layer, from
//! which uniffi-bindgen generates the JVM (Kotlin, usable from Java) and Ruby bindings.
//!
//! Nothing here decides behaviour: every guarantee (exactly-once completion, no callback after
//! close or removal, `closed` for what is in flight at close, `internal` after a panic) is the
//! host layer's ([`sentinel_recovery::host`]). This crate converts values, and turns the host
//! layer's completions into futures that uniffi's async support polls from the foreign side.

#![warn(missing_docs)]

mod arguments;
mod client;
mod codes;
mod completion;
mod doctor;
mod errors;
mod events;
mod model;
mod proxy;
mod pubsub;
mod reply;

pub use client::Client;
pub use codes::SentinelError;
pub use doctor::{doctor, DoctorReport};
pub use events::{EventListener, Subscription};
pub use model::{Address, Event, EventDetail, SentinelInfo, Topology};
pub use proxy::{Proxy, ProxyStats};
pub use pubsub::{Message, PubSub};
pub use reply::{MapEntry, Reply};

uniffi::setup_scaffolding!();
