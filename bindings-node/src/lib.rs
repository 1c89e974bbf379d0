//! Node.js binding of sentinel-recovery (napi-rs).
//!
//! This native module is the thin layer under `index.js`. It stands on the core's host layer
//! ([`sentinel_recovery::host`]), which runs every operation on the core's own threads and
//! guarantees what a binding would otherwise have to: every completion runs exactly once (also on
//! close, panic and runtime shutdown), `close` completes every operation in flight with `closed`
//! before its own completion, no event handler runs once `close` has completed, and a panic is the
//! error code `internal`. This module only converts values, owns the JavaScript-side lifetimes
//! and hands completions to the JavaScript thread; it starts nothing on the core runtime itself.
//!
//! Where things are: [`client`] (the client class and its operations), [`transactions`],
//! [`pubsub`], [`doctor`], [`proxy`] (the fencing proxy of `startProxy`); `execute` (the
//! per-command function), `completions` (the queue from the core's threads to the JavaScript
//! thread), `batch` (the typed batch JavaScript is woken with), `own_replies` (replies read on
//! the JavaScript thread itself), `values` (replies as
//! JavaScript values), `buffer_slab` (small Buffer replies cut from one ArrayBuffer), [`args`]
//! (arguments from JavaScript), `errors` (errors as JavaScript sees them), [`logging`],
//! [`tables`], [`test_hooks`], `address_map`.

#![deny(missing_docs)]

mod address_map;
pub mod args;
mod batch;
mod buffer_slab;
pub mod client;
mod completions;
pub mod doctor;
mod errors;
mod execute;
pub mod logging;
pub mod operation;
mod own_replies;
pub mod proxy;
pub mod pubsub;
pub mod tables;
pub mod test_hooks;
pub mod transactions;
mod values;
