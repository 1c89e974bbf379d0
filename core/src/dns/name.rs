//! How a host name is keyed: the one normal form the cache and the hosts file agree on.

use crate::error::{Error, Result};

/// The form a name is cached and looked up in, in the hosts file as in DNS: lower case, without
/// a trailing dot. Rejects what cannot be a DNS name, with a message that shows at most the start
/// of a long name.
pub(super) fn normalize(host: &str) -> Result<String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    match crate::config::host_name_problem(name) {
        Some(problem) => Err(Error::config(format!("invalid host name: {problem}"))),
        None => Ok(name.to_ascii_lowercase()),
    }
}
