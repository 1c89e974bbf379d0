//! A failover that is under way and can't finish, for the deadline cases "during a failover" in
//! every language (`sr-topology`'s `stall-failover` / `release-failover`).
//!
//! Sentinel promotes a replica by sending it `REPLICAOF NO ONE` and waiting until it reports
//! role master; a client that heard `+failover-state-send-slaveof-noone` stops writing to the
//! old primary and waits for that promotion. Pausing every replica (SIGSTOP) just before
//! `SENTINEL FAILOVER` keeps that wait going for as long as the test needs: the leader still
//! selects one (its last answers are recent), the command reaches its socket buffer, and nothing
//! answers. The old primary is paused too once a replica was selected, so a client that has not
//! heard of the failover yet gets no answer either: "no reply before the deadline" holds whatever
//! the client knew when the call started.

use std::time::Duration;

use super::node::{Node, POLL_TIMEOUT};
use super::Topology;
use crate::{wait_until, TestkitError};

/// The nodes [`Topology::stall_failover`] paused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StalledFailover {
    /// The primary before the failover (paused).
    pub primary: u16,
    /// Its replicas (paused): the leader promotes one of them.
    pub replicas: Vec<u16>,
}

impl Topology {
    /// Starts a failover that can't finish until [`Topology::release_failover`]: waits for
    /// replication, pauses every replica of the current primary, asks for `SENTINEL FAILOVER`,
    /// waits until a sentinel has selected the replica to promote, then pauses the old primary.
    /// The topology's `failover-timeout` must outlast the stall (else the leader aborts).
    pub fn stall_failover(&self) -> Result<StalledFailover, TestkitError> {
        let mut last = String::new();
        for _ in 0..3 {
            match self.try_stall()? {
                Ok(stalled) => return Ok(stalled),
                // Refused (the replicas paused were not fit after all): continued, try again.
                Err(refused) => last = refused,
            }
        }
        Err(TestkitError::Timeout(format!(
            "SENTINEL FAILOVER with the replicas paused was refused 3 times; last: {last}\n{}",
            self.sentinel_log_tails(12)
        )))
    }

    /// One attempt: `Ok(Err(answer))` when SENTINEL FAILOVER was refused (everything paused was
    /// continued again).
    fn try_stall(&self) -> Result<Result<StalledFailover, String>, TestkitError> {
        // A sentinel converts a node that says it is a primary but should be a replica (the old
        // primary, once continued after a failover) 4 publish periods after it said so: 4 s at
        // the topology's 1 s, which a stall right after an earlier one would otherwise wait for.
        // Back to 1 s before the failover: at 100 ms the sentinels other than the leader would
        // convert the replica being promoted back, before the leader tells them of the promotion.
        self.set_publish_period(100)?;
        let fit = self.fit_replicas();
        self.set_publish_period(1000)?;
        let (primary, replicas) = fit?;
        let ports: Vec<u16> = replicas.iter().map(|r| r.port()).collect();
        for r in &replicas {
            r.stop();
        }
        let stalled = StalledFailover {
            primary: primary.port(),
            replicas: ports,
        };
        if let Err(refused) = self.ask_failover_once() {
            self.cont_all(&stalled);
            return Ok(Err(refused));
        }
        let selected = wait_until(
            Duration::from_secs(10),
            "a sentinel to select the replica to promote",
            || self.replica_selected().then_some(()),
        );
        if let Err(e) = selected {
            self.cont_all(&stalled);
            return Err(e);
        }
        primary.stop();
        Ok(Ok(stalled))
    }

    /// The current primary and its replicas, once every sentinel sees each of them fit to
    /// promote (after an earlier failover they learn the new primary's replicas over a few
    /// publish periods; pausing them before makes SENTINEL FAILOVER answer NOGOODSLAVE).
    fn fit_replicas(&self) -> Result<(&Node, Vec<&Node>), TestkitError> {
        self.wait_replication(Duration::from_secs(20))?;
        let primary = self
            .current_primary()
            .ok_or_else(|| TestkitError::Setup("no sentinel reports a primary".into()))?;
        let replicas: Vec<&Node> = self
            .data_nodes()
            .into_iter()
            .filter(|n| n.port() != primary.port() && n.pollable())
            .collect();
        if replicas.is_empty() {
            return Err(TestkitError::Setup("no running replica to promote".into()));
        }
        let ports: Vec<u16> = replicas.iter().map(|r| r.port()).collect();
        wait_until(
            Duration::from_secs(30),
            "every sentinel to see the replicas as fit to promote",
            || self.replicas_fit(primary.port(), &ports).then_some(()),
        )?;
        Ok((primary, replicas))
    }

    /// `SENTINEL DEBUG publish-period` on every reachable sentinel.
    fn set_publish_period(&self, ms: u64) -> Result<(), TestkitError> {
        for s in self.sentinels.iter().filter(|s| s.pollable()) {
            s.cmd(&["SENTINEL", "DEBUG", "publish-period", &ms.to_string()])?;
        }
        Ok(())
    }

    /// `SENTINEL FAILOVER` asked once of the first sentinel that answers; its refusal as text.
    fn ask_failover_once(&self) -> Result<(), String> {
        for s in self.sentinels.iter().filter(|s| s.pollable()) {
            match s.cmd(&["SENTINEL", "FAILOVER", &self.spec.service]) {
                Ok(_) => return Ok(()),
                Err(TestkitError::Server(e)) => return Err(e),
                Err(_) => continue,
            }
        }
        Err("no sentinel answered".into())
    }

    /// Continues what [`Topology::stall_failover`] paused and waits (up to `timeout`) until every
    /// reachable sentinel reports a primary other than the old one and none has the failover in
    /// progress any more (sentinels report the promoted replica before they finished
    /// reconfiguring the others, and refuse another failover until then); returns it.
    pub fn release_failover(
        &self,
        stalled: &StalledFailover,
        timeout: Duration,
    ) -> Result<(String, u16), TestkitError> {
        self.cont_all(stalled);
        let started = std::time::Instant::now();
        let primary = self.wait_for_reported_primary(|a| a.1 != stalled.primary, timeout)?;
        let left = timeout.saturating_sub(started.elapsed());
        wait_until(left, "the sentinels to end the failover", || {
            let in_progress = self.sentinels.iter().filter(|s| s.pollable()).any(|s| {
                s.sentinel_master_with_timeout(&self.spec.service, POLL_TIMEOUT)
                    .map_or(true, |m| {
                        m.get("flags")
                            .is_some_and(|f| f.split(',').any(|f| f == "failover_in_progress"))
                    })
            });
            (!in_progress).then_some(())
        })?;
        Ok(primary)
    }

    fn cont_all(&self, stalled: &StalledFailover) {
        for port in stalled.replicas.iter().chain([&stalled.primary]) {
            if let Some(n) = self.node_by_port(*port) {
                n.cont();
            }
        }
    }

    /// Whether every reachable sentinel lists each of `ports` as a replica it would promote: no
    /// down or disconnected flag, answered a PING and an INFO recently (Sentinel's own rules),
    /// and that INFO showed it replicating from `primary` with its link up.
    fn replicas_fit(&self, primary: u16, ports: &[u16]) -> bool {
        let fit = |r: &std::collections::HashMap<String, String>| {
            let ms = |k: &str| r.get(k).and_then(|v| v.parse::<u64>().ok());
            r.get("flags").is_some_and(|f| f == "slave")
                && r.get("role-reported").is_some_and(|v| v == "slave")
                && r.get("master-link-status").is_some_and(|v| v == "ok")
                && r.get("master-port").and_then(|v| v.parse::<u16>().ok()) == Some(primary)
                && ms("last-ok-ping-reply").is_some_and(|v| v < 2_000)
                && ms("info-refresh").is_some_and(|v| v < 20_000)
        };
        self.sentinels.iter().filter(|s| s.pollable()).all(|s| {
            s.sentinel_list("REPLICAS", &self.spec.service, POLL_TIMEOUT)
                .is_ok_and(|listed| {
                    ports.iter().all(|p| {
                        listed.iter().any(|r| {
                            r.get("port").and_then(|v| v.parse::<u16>().ok()) == Some(*p) && fit(r)
                        })
                    })
                })
        })
    }

    /// Whether some sentinel flags a replica `promoted` (the leader selected it).
    fn replica_selected(&self) -> bool {
        self.sentinels.iter().filter(|s| s.pollable()).any(|s| {
            s.sentinel_list("REPLICAS", &self.spec.service, POLL_TIMEOUT)
                .is_ok_and(|replicas| {
                    replicas.iter().any(|r| {
                        r.get("flags")
                            .is_some_and(|f| f.split(',').any(|f| f == "promoted"))
                    })
                })
        })
    }
}
