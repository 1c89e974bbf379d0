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

pub mod client;
pub mod config;
pub mod dns;
pub mod doctor;
pub mod error;
pub mod host;
pub mod monitor;
pub mod node;
pub mod resp;
pub mod runtime;
pub mod sentinel;
mod sync;
pub mod tls;
pub mod types;

pub use client::{Client, EventCallback, EventStream, Transaction};
pub use config::{Address, Config, Credentials, Protocol, ReadFrom, Secret};
pub use doctor::{Options as DoctorOptions, Report as DoctorReport};
pub use error::{Error, ErrorCode, Result};
pub use monitor::{Event, EventKind, SentinelInfo, Topology};
pub use resp::Value;
