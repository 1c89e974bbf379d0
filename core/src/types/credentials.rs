//! Credentials and the secret they carry, which never prints.

use std::fmt;

/// A secret string (a password). Its `Debug` and `Display` print `***`, so it can't leak into logs
/// or error text by accident; [`Secret::expose`] is the one place it is read.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself, for sending to a server and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A username (optional: Redis' `default` user when absent) and a password, for `AUTH`/`HELLO`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Credentials {
    /// The ACL user; `None` authenticates as the default user with the password alone.
    pub username: Option<String>,
    /// The password.
    pub password: Secret,
}
