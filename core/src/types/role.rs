//! A node's role, as its `ROLE` reply tells it.

use super::Address;

/// What `ROLE` says an instance is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// A primary.
    Master,
    /// A replica of the given primary.
    Replica {
        /// The primary it replicates from.
        master: Option<Address>,
    },
    /// A sentinel, or anything else.
    Other(String),
}
