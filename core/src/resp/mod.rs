//! A small RESP2/RESP3 client connection: one socket, pipelined requests, pub/sub.
//!
//! Built for talking to sentinels and data nodes from the core's runtime: every connection is
//! driven by one background task, callers only exchange messages with it, and nothing here blocks
//! a runtime thread or panics on what a peer sends.

mod codec;
mod connection;
mod handshake;
mod value;

/// Thin wrappers around the crate-private codec for the fuzz targets in `fuzz/`; not an API.
#[doc(hidden)]
#[cfg(feature = "internals")]
pub mod fuzzing;

#[cfg(test)]
mod real_server_tests;
#[cfg(test)]
pub(crate) mod test_server;

pub(crate) use codec::{decode, encode_command, FrameScanner};
pub(crate) use connection::tcp;
#[cfg(feature = "internals")]
pub use connection::SubscribedConnection;
pub use connection::{ConnectOptions, Connection, Frame, GroupReply, OwnReply, Reading, Reply};
pub use value::Value;
