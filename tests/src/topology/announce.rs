//! Replicas that announce an address the client must not use, for `address_map` tests in every
//! language (`sr-topology`'s `announce-replicas IP`).
//!
//! On one loopback every address a sentinel can reach, the client can reach too, so "not
//! reachable from the client" can't be made real through a failover: the sentinels must reach
//! the replicas they promote. The data nodes therefore also bind the announced address (which
//! must answer nothing before: checked), and a test proves its client never used it (a map to
//! 127.0.0.1, and `CLIENT LIST` `laddr` on the servers).

use std::time::Duration;

use super::Topology;
use crate::{wait_until, TestkitError};

impl Topology {
    /// Makes every replica announce `ip` (the data nodes also bind it) and waits until every
    /// sentinel lists the replicas only under it, with all peers known again, so a failover can
    /// happen. Fails if something already answered on `ip` at a data node's port.
    pub fn announce_replicas_at(&self, ip: &str) -> Result<(), TestkitError> {
        for node in self.data_nodes() {
            if std::net::TcpStream::connect((ip, node.port())).is_ok() {
                return Err(TestkitError::Setup(format!(
                    "something already answers on {ip}:{}",
                    node.port()
                )));
            }
            node.cmd(&["CONFIG", "SET", "bind", &format!("127.0.0.1 {ip}")])?;
        }
        for replica in self.replicas() {
            replica.cmd(&["CONFIG", "SET", "replica-announce-ip", ip])?;
            // The announced address is sent in the replication handshake: redo it.
            replica.cmd(&["CLIENT", "KILL", "TYPE", "master"])?;
        }
        let service = self.service();
        for sentinel in self.sentinels() {
            // Drops the 127.0.0.1 entries of the initial configuration.
            sentinel.cmd(&["SENTINEL", "RESET", service])?;
        }
        let peers = self.sentinels().len() - 1;
        wait_until(
            Duration::from_secs(30),
            "every sentinel to list only announced replicas and all peers",
            || {
                self.sentinels()
                    .iter()
                    .all(|s| {
                        let replicas = s.sentinel_replicas(service).unwrap_or_default();
                        let sentinels = s.sentinel_sentinels(service).unwrap_or_default();
                        replicas.len() == self.replicas().len()
                            && replicas.iter().all(|r| {
                                r.get("ip").map(String::as_str) == Some(ip)
                                    && r.get("flags").map(String::as_str) == Some("slave")
                            })
                            && sentinels.len() == peers
                    })
                    .then_some(())
            },
        )?;
        Ok(())
    }
}
