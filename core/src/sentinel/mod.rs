//! Talking to sentinels: the discovery round, the sentinel list, event parsing, reply formats.

pub mod discovery;
pub mod events;
pub mod links;
pub mod replies;
pub mod sentinels;
