//! More services on the same sentinels: a standalone primary per extra service, monitored by
//! every sentinel of the topology under its own name (for the many-services measurement).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::conf::data_conf;
use super::node::{Node, NodeAccess, POLL_TIMEOUT};
use super::spawn::DIR_SEQ;
use super::Topology;
use crate::{wait_until, TestkitError};

impl Topology {
    /// Starts a primary without replicas (owned by the returned [`Node`]: dropping it kills the
    /// process) and makes every sentinel monitor it as `service`, with the topology's quorum and
    /// timings; waits until each sentinel reports it as `master`.
    pub fn add_service(&self, service: &str) -> Result<Node, TestkitError> {
        let n = DIR_SEQ.fetch_add(1, Ordering::Relaxed);
        let pdir = self.dir.join(format!("service-{service}-{n}"));
        let primary = Node::start_new(
            false,
            self.binary.clone(),
            pdir.clone(),
            |p, _| data_conf(&pdir, p, "127.0.0.1", None, ""),
            vec![],
            true,
            NodeAccess::default(),
        )?;
        let port = primary.client_port().to_string();
        let quorum = self.spec.quorum.to_string();
        let down_after = self.spec.down_after_ms.to_string();
        let failover = self.spec.failover_timeout_ms.to_string();
        for s in &self.sentinels {
            s.cmd(&["SENTINEL", "MONITOR", service, "127.0.0.1", &port, &quorum])?;
            s.cmd(&[
                "SENTINEL",
                "SET",
                service,
                "down-after-milliseconds",
                &down_after,
                "failover-timeout",
                &failover,
            ])?;
        }
        wait_until(
            Duration::from_secs(20),
            "every sentinel to report the new service's primary",
            || {
                self.sentinels
                    .iter()
                    .all(|s| {
                        s.sentinel_master_with_timeout(service, POLL_TIMEOUT)
                            .ok()
                            .and_then(|m| m.get("flags").cloned())
                            .is_some_and(|f| f == "master")
                    })
                    .then_some(())
            },
        )?;
        Ok(primary)
    }
}
