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
//!
//! # Glossary
//!
//! One word per concept, in the code of every crate of the project:
//!
//! - **primary**, **replica**, **sentinel**: the roles of the nodes (the server's `master` and
//!   `slave` appear only where a reply spells them so).
//! - **monitor**: the task that follows one service through its sentinels and publishes its
//!   [`Topology`] and [`Event`]s; clients of one service in a process share it.
//! - **round**: one discovery pass over the sentinels; every status carries the round it came
//!   from, and retries wait for a later one.
//! - **fence**: writes held back from a primary a failover is demoting (or has replaced), or one
//!   cut off from the sentinel majority.
//! - **command**: one request and its reply. An **attempt** is one try of it on one node; a
//!   command is retried (a new attempt) only when it provably did not run.
//! - **operation**: anything a binding starts (a command, a pipeline, a close...), cancellable.
//! - **completion** ([`host::Done`]): the callback an operation's result goes to, exactly once.
//! - **own reply** ([`host::OwnReply`]): the reply of a command the calling thread wrote itself and
//!   reads itself, returned explicitly ([`host::Started`]).
//! - **mailbox** ([`host::Mailbox`]): where completions and callbacks wait for the host's own
//!   thread to take them; a **delivery** is one item taken out.
//! - **subscription** ([`Subscription`], C `sr_subscription_t`): pub/sub on channels and
//!   patterns; [`host::Subscriber`] is its host-layer handle. A connection in pub/sub mode is a
//!   **subscribed connection**.
//! - **event handler**: a callback for topology [`Event`]s ([`host::EventHandler`]); once
//!   installed it has an **event registration** ([`host::EventRegistration`]), whose `remove()`
//!   uninstalls it.
//! - **sentinel feed**: the monitor's pub/sub connections to the sentinels' event channels.
//! - **proxy**: the fencing proxy ([`Proxy`]): unchanged Redis clients connect to it, and it
//!   forwards to the primary the monitor follows, fencing writes as the client does.
//! - **state** (`…State`): what the parts of one thing share behind an `Arc` (a handle and its
//!   tasks, a connection and its task, a proxy and its sessions).

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
