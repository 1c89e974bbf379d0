//! Non-blocking host name resolution: the hosts file first, then DNS with a stale-while-refresh
//! cache.
//!
//! A blocking `getaddrinfo` on a runtime thread would stall every connection the runtime drives, so
//! DNS goes through hickory's async resolver. Names are looked up as glibc's `hosts: files dns`
//! does: a name the hosts file lists gets the file's addresses and no DNS query at all (also when
//! the file gives only one address family). The file is read on the caller's thread when a
//! resolver is built and re-read, on a short-lived thread of its own, when its modification time
//! changes; parsed files are shared by every resolver of the process.
//!
//! Sentinel hosts are re-resolved often and DNS can be slow exactly when failover happens, so DNS
//! answers are cached: an expired entry is still returned at once while one background lookup
//! refreshes it, and a failed refresh keeps the last good answer. AAAA records are only asked for
//! when this host has IPv6 addresses beyond loopback and link-local (as getaddrinfo's
//! `AI_ADDRCONFIG`), and once one family has answered with addresses the other gets 50 ms more,
//! not the whole timeout (RFC 8305's resolution delay).

mod hosts;
mod name;
mod resolver;
#[cfg(test)]
mod tests;

// The testkit's suites (the `internals` feature) name these; the crate itself does not.
#[cfg(feature = "internals")]
pub use hosts::HOSTS_FILE_ENV;
#[cfg(any(test, feature = "internals"))]
pub use resolver::DnsOptions;
pub use resolver::Resolver;
