//! sentinel-recovery: finds and follows a Redis or Valkey primary through Sentinel, on threads
//! it owns.
//!
//! Open a [`Client`] from a `redis+sentinel://` URL; it returns at once and discovery runs on the
//! core's own runtime (`sr-worker-N` threads). Read the [`Topology`] at any time without waiting,
//! follow changes through [`Client::events`], and [`Client::close`] when done.
//!
//! ```no_run
//! # async fn demo() -> sentinel_recovery::Result<()> {
//! let client = sentinel_recovery::Client::connect("redis+sentinel://127.0.0.1:26379/mymaster").await?;
//! println!("{:?}", client.topology()?.primary);
//! let mut events = client.events()?;
//! while let Some(event) = events.next().await {
//!     println!("{}", event.kind.name());
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

// The public API: what a user of the crate needs, re-exported below, plus the modules whose
// contents are themselves API (configuration, the host layer bindings stand on, the runtime's
// knobs, the diagnosis, the plain types and errors).
pub mod arguments;
pub mod config;
pub mod deadline;
pub mod doctor;
pub mod error;
pub mod host;
pub mod proxy;
pub mod runtime;
pub mod types;

pub use client::{Client, EventStream, Route, Subscription, SubscriptionControl, Transaction};
pub use config::{Config, ReadFrom};
pub use doctor::{Options as DoctorOptions, Report as DoctorReport};
pub use error::{Error, ErrorCode, Result};
pub use proxy::{ListenAddress, Proxy, ProxyOptions, ProxyStats};
pub use resp::Value;
pub use types::{
    unix_ms, Address, Credentials, Event, EventKind, Message, Protocol, Role, Secret, SentinelInfo,
    Side, Topology,
};

// Internals. With the `internals` feature (the testkit's end-to-end suites and the fuzz targets
// only) `dns`, `monitor`, `resp` and `sentinel` are public, hidden from the docs; without it they
// are private like the rest. They are not API and may change in any release.
mod client;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod dns;
#[cfg(not(feature = "internals"))]
mod dns;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod monitor;
#[cfg(not(feature = "internals"))]
mod monitor;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod node;
#[cfg(not(feature = "internals"))]
mod node;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod resp;
#[cfg(not(feature = "internals"))]
mod resp;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod sentinel;
#[cfg(not(feature = "internals"))]
mod sentinel;
mod sync;
mod tls;
