//! A host and a port, as configured or as a sentinel reported it.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A host (name or IP literal) and a port, as configured or as a sentinel reported it.
///
/// When the configuration's `address_map` rewrote what a sentinel reported, `host` and `port` are
/// where the client connects and [`Address::announced`] keeps what the sentinel said. Equality,
/// ordering and hashing look at `host` and `port` only (where the client connects); `announced` is
/// where that address came from, not part of its identity.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Address {
    /// Host name or IP literal, without brackets for IPv6.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// The address a sentinel reported, when `address_map` mapped it to this one; `None` when the
    /// address is used as reported (or was configured). Serialized only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announced: Option<Box<Address>>,
}

impl Address {
    /// An address from its parts.
    pub fn new(host: impl Into<String>, port: u16) -> Address {
        Address {
            host: host.into(),
            port,
            announced: None,
        }
    }

    /// This address as the mapped form of `announced` (what a sentinel reported).
    pub fn mapped_from(mut self, announced: &Address) -> Address {
        self.announced = Some(Box::new(Address::new(
            announced.host.clone(),
            announced.port,
        )));
        self
    }
}

impl PartialEq for Address {
    fn eq(&self, other: &Address) -> bool {
        self.host == other.host && self.port == other.port
    }
}

impl Eq for Address {}

impl Hash for Address {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.host.hash(state);
        self.port.hash(state);
    }
}

impl PartialOrd for Address {
    fn partial_cmp(&self, other: &Address) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Address {
    fn cmp(&self, other: &Address) -> Ordering {
        (&self.host, self.port).cmp(&(&other.host, other.port))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_where_to_connect_and_announced_is_kept_beside_it() {
        let announced = Address::new("127.0.0.99", 6379);
        let mapped = Address::new("127.0.0.1", 6379).mapped_from(&announced);
        assert_eq!(mapped, Address::new("127.0.0.1", 6379));
        assert_eq!(mapped.announced.as_deref(), Some(&announced));
        assert_eq!(
            serde_json::to_string(&mapped).unwrap(),
            r#"{"host":"127.0.0.1","port":6379,"announced":{"host":"127.0.0.99","port":6379}}"#
        );
        assert_eq!(
            serde_json::to_string(&announced).unwrap(),
            r#"{"host":"127.0.0.99","port":6379}"#
        );
    }
}
