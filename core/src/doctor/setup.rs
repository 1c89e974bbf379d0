//! What the doctor connects with: the resolver and the handshakes for sentinels and data nodes,
//! built from a [`Config`] the same way the monitor builds them, so a diagnosis sees what a client
//! with the same URL would see (credentials, TLS files and server name, protocol, client name,
//! DNS server and timeout).

use crate::config::{AddressMap, Config};
use crate::dns::Resolver;
use crate::error::Result;
use crate::node::connect_options;
use crate::resp::ConnectOptions;
use crate::types::Side;

/// The resolver and connection options for one diagnosis.
#[derive(Clone, Debug)]
pub struct Setup {
    /// A fresh resolver (empty cache, so the first lookup of each name is timed for real).
    pub resolver: Resolver,
    /// Handshake towards sentinels: sentinel credentials, sentinel TLS.
    pub sentinel: ConnectOptions,
    /// Handshake towards data nodes: data credentials, data TLS, database 0 (ROLE and INFO only).
    pub data: ConnectOptions,
    /// The client's `address_map`: what a sentinel reports is probed where a client would
    /// connect (configured sentinels are never mapped).
    pub address_map: AddressMap,
}

impl Setup {
    /// Builds the resolver and both handshakes from `config`.
    ///
    /// Reads resolv.conf, the hosts file and the TLS CA, certificate and key files: blocking file
    /// I/O, so call it on a host thread (or a blocking-pool thread), never on a core worker.
    pub fn from_config(config: &Config) -> Result<Setup> {
        Ok(Setup {
            resolver: Resolver::for_config(config)?,
            sentinel: connect_options(config, Side::Sentinel)?,
            data: connect_options(config, Side::Data)?,
            address_map: config.address_map.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn each_side_gets_its_own_credentials() {
        let config = Config::from_url(
            "redis+sentinel://app:pw@127.0.0.1/svc?sentinel_user=w&sentinel_password=spw\
             &client_name=doc&connect_timeout_ms=700&protocol=2",
        )
        .unwrap();
        let sentinel = connect_options(&config, Side::Sentinel).unwrap();
        let data = connect_options(&config, Side::Data).unwrap();
        assert_eq!(sentinel.auth.unwrap().password.expose(), "spw");
        assert_eq!(data.auth.unwrap().password.expose(), "pw");
        assert_eq!(sentinel.connect_timeout, Duration::from_millis(700));
        assert_eq!(data.client_name.as_deref(), Some("doc"));
        assert_eq!(data.protocol, crate::Protocol::Resp2);
        assert!(sentinel.tls.is_none() && data.tls.is_none());
    }
}
