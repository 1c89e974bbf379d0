//! A host and a port, as configured or as a sentinel reported it.

use std::fmt;

/// A host (name or IP literal) and a port, as configured or as a sentinel reported it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Address {
    /// Host name or IP literal, without brackets for IPv6.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Address {
    /// An address from its parts.
    pub fn new(host: impl Into<String>, port: u16) -> Address {
        Address {
            host: host.into(),
            port,
        }
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
