//! The two kinds of servers a client talks to, which are configured separately.

/// Sentinels, or data nodes (primary and replicas): credentials and TLS apply to each apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The sentinels.
    Sentinel,
    /// The primary and its replicas.
    Data,
}
