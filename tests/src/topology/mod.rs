//! Real server processes: [`Topology`] (primary + replicas + sentinels) and [`Node`] (one process).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::security::{AclSetup, AclSpec, TlsFiles, TlsSpec};
use crate::{wait_until, TestkitError};

mod announce;
mod conf;
mod node;
mod server;
mod services;
mod spawn;
mod stale;
pub(crate) mod stalled;

use conf::{data_conf, debug_commands, default_sentinel_debug, SentinelConf};
pub use node::Node;
pub(crate) use node::Placement;
use node::{NodeAccess, POLL_TIMEOUT};
pub use server::ServerKind;
pub(crate) use spawn::spawn_child as spawn_owned_child;
use spawn::{keep_dirs, make_temp_dir};
pub use stale::{start_stale_sentinel, StaleSentinelSpec};

// ---------------------------------------------------------------------------------------------

/// What to start. Use `TopologySpec { replicas: 1, ..Default::default() }`.
#[derive(Debug, Clone)]
pub struct TopologySpec {
    /// Service (master) name the sentinels monitor. Default `"mymaster"`.
    pub service: String,
    /// Number of replicas of the primary. Default 2.
    pub replicas: usize,
    /// Number of sentinels. Default 3.
    pub sentinels: usize,
    /// Sentinel quorum. Default 2.
    pub quorum: usize,
    /// `down-after-milliseconds`. Default 1000.
    pub down_after_ms: u64,
    /// `failover-timeout`. Default 3000.
    pub failover_timeout_ms: u64,
    /// Server binary. Default from env `SR_SERVER` ([`ServerKind::from_env`]).
    pub server: ServerKind,
    /// `SENTINEL DEBUG <knob> <value>` pairs applied to every sentinel after each (re)start.
    /// Default: info-period 200, ping-period 500, ask-period 100, publish-period 1000,
    /// tilt-period 5000 (so a failover takes a few seconds, and a TILT caused by a busy machine
    /// lasts 5 s instead of 30 s). Two traps in Redis 7.0 (and Valkey): while the primary is
    /// `s_down` a replica is only eligible for promotion if its INFO is younger than
    /// 5 x ping-period, but replicas of a down primary are polled only every 1000 ms, so
    /// ping-period 100 makes crash failovers abort with `-failover-abort-no-good-slave` most of
    /// the time. And keep publish-period well above 250: a sentinel that sees a
    /// replica report `role:master` while the primary looks fine turns it back into a replica
    /// after 4 x publish-period, which with 100 ms undoes every `SENTINEL FAILOVER` before the
    /// leader (which polls a promoted replica's INFO only every 1 s) can announce it.
    pub sentinel_debug: Vec<(String, u64)>,
    /// TLS on every node (a `tls-port` next to the plain port, `tls-replication yes`), with a
    /// throwaway CA made at start. Default `None`: plain TCP only.
    pub tls: Option<TlsSpec>,
    /// ACL users on data nodes and sentinels, with the `default` user off. Default `None`: the
    /// `default` user with no password, as usual.
    pub acl: Option<AclSpec>,
}

impl Default for TopologySpec {
    fn default() -> Self {
        TopologySpec {
            service: "mymaster".into(),
            replicas: 2,
            sentinels: 3,
            quorum: 2,
            down_after_ms: 1000,
            failover_timeout_ms: 3000,
            server: ServerKind::from_env(),
            sentinel_debug: default_sentinel_debug(),
            tls: None,
            acl: None,
        }
    }
}

/// Where each node of a [`Topology`] runs: by default every node on 127.0.0.1 in the test's own
/// namespace; [`crate::net::NetTopology`] gives each its own host.
#[derive(Debug, Clone, Default)]
pub(crate) struct Placements {
    pub(crate) primary: Placement,
    pub(crate) replicas: Vec<Placement>,
    pub(crate) sentinels: Vec<Placement>,
}

impl Placements {
    fn replica(&self, i: usize) -> Placement {
        self.replicas.get(i).cloned().unwrap_or_default()
    }

    /// Sentinels beyond the planned ones (added later) need a host of their own: refused on
    /// placed topologies rather than started where nothing can reach them.
    fn sentinel(&self, i: usize) -> Result<Placement, TestkitError> {
        match self.sentinels.get(i) {
            Some(p) => Ok(p.clone()),
            None if self.primary.netns.is_none() => Ok(Placement::default()),
            None => Err(TestkitError::Setup(
                "no host planned for another sentinel on this network topology".into(),
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// A primary, its replicas and the sentinels monitoring it, all on 127.0.0.1. Owns every process
/// and its temp dir: dropping it (also while a test panics) SIGKILLs and reaps every process and
/// removes the dir (kept when env `SR_TESTKIT_KEEP=1`).
pub struct Topology {
    spec: TopologySpec,
    dir: PathBuf,
    tls: Option<TlsFiles>,
    acl: Option<AclSetup>,
    primary: Node,
    replicas: Vec<Node>,
    sentinels: Vec<Node>,
    stale: Vec<Node>,
    binary: PathBuf,
    placements: Placements,
}

impl Topology {
    /// Starts the primary, the replicas (waits until they are in sync) and the sentinels, then
    /// waits until every sentinel reports the primary (flags exactly `master`), all replicas
    /// (`num-slaves`, no `s_down`/`disconnected` flags, `master-link-status` ok) and all other
    /// sentinels (`num-other-sentinels` = sentinels - 1). Takes about 1-3 s.
    pub fn start(spec: TopologySpec) -> Result<Topology, TestkitError> {
        Self::start_placed(spec, Placements::default())
    }

    /// [`Topology::start`] with each node where `placements` says.
    pub(crate) fn start_placed(
        spec: TopologySpec,
        placements: Placements,
    ) -> Result<Topology, TestkitError> {
        if spec.sentinels > 0 && spec.quorum == 0 {
            return Err(TestkitError::Setup("quorum must be at least 1".into()));
        }
        let binary = spec.server.binary()?;
        let dir = make_temp_dir("topo")?;
        let result = Self::start_in(spec, binary, dir.clone(), placements);
        if result.is_err() {
            let _ = fs::remove_dir_all(&dir);
        }
        result
    }

    fn start_in(
        spec: TopologySpec,
        binary: PathBuf,
        dir: PathBuf,
        placements: Placements,
    ) -> Result<Topology, TestkitError> {
        let tls = match &spec.tls {
            Some(_) => Some(TlsFiles::generate(&dir.join("tls"))?),
            None => None,
        };
        let acl = spec.acl.clone().map(AclSetup::new);
        let require_client_cert = spec.tls.as_ref().is_some_and(|t| t.require_client_cert);
        let tls_lines = |tls_port: u16| match &tls {
            Some(files) => files.render(tls_port, require_client_cert),
            None => String::new(),
        };
        let data_extra = |tls_port: u16| {
            tls_lines(tls_port) + &acl.as_ref().map(AclSetup::render_data).unwrap_or_default()
        };
        let access = |placement: Placement| NodeAccess {
            tls: tls.is_some(),
            auth: acl.as_ref().map(AclSetup::admin),
            placement,
        };
        let pdir = dir.join("primary");
        let pbind = placements.primary.bind();
        let pannounce = placements.primary.announce_lines();
        let primary = Node::start_new(
            false,
            binary.clone(),
            pdir.clone(),
            |p, t| data_conf(&pdir, p, &pbind, None, &(data_extra(t) + &pannounce)),
            vec![],
            false,
            access(placements.primary.clone()),
        )?;
        let pport = primary.client_port();
        let pip = primary.ip().to_string();
        let mut replicas = Vec::new();
        for i in 1..=spec.replicas {
            let rdir = dir.join(format!("replica-{i}"));
            let placement = placements.replica(i - 1);
            let rbind = placement.bind();
            let rannounce = placement.announce_lines();
            let node = Node::start_new(
                false,
                binary.clone(),
                rdir.clone(),
                |p, t| {
                    let extra = data_extra(t) + &rannounce;
                    data_conf(&rdir, p, &rbind, Some((&pip, pport)), &extra)
                },
                vec![],
                false,
                access(placement),
            )?;
            replicas.push(node);
        }
        let mut topo = Topology {
            spec,
            dir,
            tls,
            acl,
            primary,
            replicas,
            sentinels: Vec::new(),
            stale: Vec::new(),
            binary,
            placements,
        };
        topo.wait_replication(Duration::from_secs(20))?;
        for _ in 0..topo.spec.sentinels {
            let node = topo.spawn_sentinel((&pip, pport), &[], "sentinel")?;
            topo.sentinels.push(node);
        }
        if !topo.sentinels.is_empty() {
            topo.wait_sentinels_settled(pport, Duration::from_secs(30))?;
        }
        Ok(topo)
    }

    fn spawn_sentinel(
        &self,
        primary: (&str, u16),
        known_replicas: &[(String, u16)],
        tag: &str,
    ) -> Result<Node, TestkitError> {
        let n = self.sentinels.len() + self.stale.len() + 1;
        let sdir = self.dir.join(format!("{tag}-{n}"));
        let placement = self.placements.sentinel(n - 1)?;
        let conf = SentinelConf {
            bind: placement.bind(),
            service: &self.spec.service,
            primary,
            quorum: self.spec.quorum,
            down_after_ms: self.spec.down_after_ms,
            failover_timeout_ms: self.spec.failover_timeout_ms,
            known_replicas,
            extra: String::new(),
        };
        let require_client_cert = self
            .spec
            .tls
            .as_ref()
            .is_some_and(|t| t.require_client_cert);
        let acl_lines = self
            .acl
            .as_ref()
            .map(|a| a.render_sentinel(&self.spec.service))
            .unwrap_or_default();
        let render = |p: u16, t: u16| {
            let tls_lines = match &self.tls {
                Some(files) => files.render(t, require_client_cert),
                None => String::new(),
            };
            SentinelConf {
                extra: tls_lines + &acl_lines,
                ..conf.clone()
            }
            .render(&sdir, p)
        };
        Node::start_new(
            true,
            self.binary.clone(),
            sdir.clone(),
            render,
            debug_commands(&self.spec.sentinel_debug),
            false,
            NodeAccess {
                tls: self.tls.is_some(),
                auth: self.acl.as_ref().map(AclSetup::admin),
                placement,
            },
        )
    }

    fn wait_sentinels_settled(&self, pport: u16, timeout: Duration) -> Result<(), TestkitError> {
        let svc = &self.spec.service;
        let want_replicas = self.replicas.len();
        let want_others = self.sentinels.len() - 1;
        let mut last = String::new();
        let res = wait_until(timeout, "sentinels to agree on the topology", || {
            for s in &self.sentinels {
                let m = match s.sentinel_master_with_timeout(svc, POLL_TIMEOUT) {
                    Ok(m) => m,
                    Err(e) => {
                        last = format!("sentinel {}: {e}", s.port());
                        return None;
                    }
                };
                let ok = m.get("port").map(String::as_str) == Some(&pport.to_string())
                    && m.get("flags").map(String::as_str) == Some("master")
                    && m.get("num-slaves").and_then(|v| v.parse().ok()) == Some(want_replicas)
                    && m.get("num-other-sentinels").and_then(|v| v.parse().ok())
                        == Some(want_others);
                if !ok {
                    last = format!(
                        "sentinel {}: port={:?} flags={:?} num-slaves={:?} num-other-sentinels={:?}",
                        s.port(),
                        m.get("port"),
                        m.get("flags"),
                        m.get("num-slaves"),
                        m.get("num-other-sentinels")
                    );
                    return None;
                }
                let reps = s.sentinel_list("REPLICAS", svc, POLL_TIMEOUT).ok()?;
                for r in &reps {
                    let flags = r.get("flags").cloned().unwrap_or_default();
                    if flags.contains("s_down")
                        || flags.contains("disconnected")
                        || r.get("master-link-status").map(String::as_str) != Some("ok")
                    {
                        last = format!("sentinel {}: replica {:?}", s.port(), r);
                        return None;
                    }
                }
            }
            Some(())
        });
        res.map_err(|e| e.with_detail(&format!("last seen: {last}")))
    }

    /// The service name.
    pub fn service(&self) -> &str {
        &self.spec.service
    }

    /// The spec the topology was started with.
    pub fn spec(&self) -> &TopologySpec {
        &self.spec
    }

    /// The temp dir holding every node's dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `redis+sentinel://127.0.0.1:P1,127.0.0.1:P2,.../<service>` over [`Topology::sentinels`]
    /// (current ports, in start order, including added sentinels).
    ///
    /// On TLS topologies: `rediss+sentinel://` over the sentinels' TLS ports with
    /// `?tls_ca_file=<CA>` (and `&tls_cert_file=...&tls_key_file=...` when client certificates are
    /// required), so more keys must be appended with `&`. No credentials: see
    /// [`Topology::url_with`].
    pub fn url(&self) -> String {
        self.url_with(None, None, &[])
    }

    /// [`Topology::url`] with data-node credentials as userinfo (`user:password@`), sentinel
    /// credentials as `sentinel_user` / `sentinel_password`, and `extra` query pairs (values are
    /// percent-encoded).
    pub fn url_with(
        &self,
        data_auth: Option<(&str, &str)>,
        sentinel_auth: Option<(&str, &str)>,
        extra: &[(&str, &str)],
    ) -> String {
        let addrs: Vec<String> = self.sentinels.iter().map(Node::client_addr).collect();
        let scheme = if self.tls.is_some() {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        let userinfo = match data_auth {
            Some((user, password)) => format!("{}:{}@", encode(user), encode(password)),
            None => String::new(),
        };
        let mut query: Vec<(String, String)> = Vec::new();
        if let Some(files) = &self.tls {
            query.push(("tls_ca_file".into(), files.ca_cert.display().to_string()));
            if self
                .spec
                .tls
                .as_ref()
                .is_some_and(|t| t.require_client_cert)
            {
                query.push((
                    "tls_cert_file".into(),
                    files.client_cert.display().to_string(),
                ));
                query.push((
                    "tls_key_file".into(),
                    files.client_key.display().to_string(),
                ));
            }
        }
        if let Some((user, password)) = sentinel_auth {
            query.push(("sentinel_user".into(), user.into()));
            query.push(("sentinel_password".into(), password.into()));
        }
        query.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let query: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        let mut url = format!(
            "{scheme}://{userinfo}{}/{}",
            addrs.join(","),
            self.spec.service
        );
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query.join("&"));
        }
        url
    }

    /// The CA and certificates of a TLS topology (`None` for plain ones).
    pub fn tls_files(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// The testkit's admin user and password on ACL topologies (every permission).
    pub fn admin_credentials(&self) -> Option<(String, String)> {
        self.acl.as_ref().map(AclSetup::admin)
    }

    /// The node started as primary (it may be a replica after a failover; see
    /// [`Topology::current_primary`]).
    pub fn primary(&self) -> &Node {
        &self.primary
    }

    /// The nodes started as replicas.
    pub fn replicas(&self) -> &[Node] {
        &self.replicas
    }

    /// The sentinels (started ones, then those from [`Topology::add_sentinel`]).
    pub fn sentinels(&self) -> &[Node] {
        &self.sentinels
    }

    /// Sentinels from [`Topology::start_stale_sentinel`] (not in `sentinels()` or `url()`).
    pub fn stale_sentinels(&self) -> &[Node] {
        &self.stale
    }

    /// Primary and replicas, in start order.
    pub fn data_nodes(&self) -> Vec<&Node> {
        std::iter::once(&self.primary)
            .chain(self.replicas.iter())
            .collect()
    }

    /// Any node (data node or sentinel, stale ones included) currently on `port` (plain or TLS).
    pub fn node_by_port(&self, port: u16) -> Option<&Node> {
        self.data_nodes()
            .into_iter()
            .chain(self.sentinels.iter())
            .chain(self.stale.iter())
            .find(|n| n.port() == port || n.tls_port() == Some(port))
    }

    /// `SENTINEL GET-MASTER-ADDR-BY-NAME` asked of the first sentinel that answers (SIGSTOPped
    /// and killed ones are skipped).
    pub fn reported_primary(&self) -> Option<(String, u16)> {
        self.sentinels
            .iter()
            .filter(|s| s.pollable())
            .find_map(|s| {
                s.get_master_addr_with_timeout(&self.spec.service, POLL_TIMEOUT)
                    .ok()
                    .flatten()
            })
    }

    /// The data node the sentinels currently report as primary.
    pub fn current_primary(&self) -> Option<&Node> {
        let (_, port) = self.reported_primary()?;
        self.node_by_port(port).filter(|n| !n.is_sentinel())
    }

    /// Waits until every reachable sentinel (running, not SIGSTOPped, answering) reports the same
    /// primary address, at least one answers, and `pred` holds for it; returns that address.
    pub fn wait_for_reported_primary(
        &self,
        pred: impl Fn(&(String, u16)) -> bool,
        timeout: Duration,
    ) -> Result<(String, u16), TestkitError> {
        let mut last: Vec<(u16, Option<(String, u16)>)> = Vec::new();
        let res = wait_until(
            timeout,
            "sentinels to agree on the reported primary",
            || {
                last = self
                    .sentinels
                    .iter()
                    .filter(|s| s.pollable())
                    .filter_map(|s| {
                        s.get_master_addr_with_timeout(&self.spec.service, POLL_TIMEOUT)
                            .ok()
                            .map(|a| (s.port(), a))
                    })
                    .collect();
                let first = last.first()?.1.clone()?;
                if last.iter().all(|(_, a)| a.as_ref() == Some(&first)) && pred(&first) {
                    Some(first)
                } else {
                    None
                }
            },
        );
        res.map_err(|e| {
            e.with_detail(&format!(
                "last answers: {last:?}\n{}",
                self.sentinel_log_tails(12)
            ))
        })
    }

    /// The last `lines` event lines of every sentinel's log (startup noise and "configuration
    /// saved" lines left out), for failure messages.
    pub fn sentinel_log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for s in self.sentinels.iter().chain(self.stale.iter()) {
            let text = fs::read_to_string(s.log_path()).unwrap_or_default();
            let events: Vec<&str> = text
                .lines()
                .filter(|l| l.contains(" # ") || l.contains(" * +") || l.contains(" * -"))
                .filter(|l| !l.contains("configuration saved") && !l.contains("oO0OoO0"))
                .collect();
            out.push_str(&format!("--- sentinel {} log tail:\n", s.port()));
            for l in &events[events.len().saturating_sub(lines)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// `SENTINEL FAILOVER <service>` on the first sentinel that answers; retries for up to 15 s
    /// while the answer is `-INPROG` or `-NOGOODSLAVE` (replicas still syncing). Returns when a
    /// sentinel accepted the failover (not when it finished; use
    /// [`Topology::wait_for_reported_primary`]).
    pub fn sentinel_failover(&self) -> Result<(), TestkitError> {
        let mut last = String::from("no sentinel answered");
        let res = wait_until(
            Duration::from_secs(15),
            "SENTINEL FAILOVER accepted",
            || {
                for s in self.sentinels.iter().filter(|s| s.pollable()) {
                    match s.cmd(&["SENTINEL", "FAILOVER", &self.spec.service]) {
                        Ok(_) => return Some(Ok(())),
                        Err(TestkitError::Server(e))
                            if e.contains("INPROG") || e.contains("NOGOODSLAVE") =>
                        {
                            last = e;
                            return None;
                        }
                        Err(TestkitError::Server(e)) => {
                            return Some(Err(TestkitError::Server(e)));
                        }
                        Err(e) => last = e.to_string(),
                    }
                }
                None
            },
        );
        match res {
            Ok(r) => r,
            Err(e) => Err(e.with_detail(&format!("last: {last}"))),
        }
    }

    /// Starts one more sentinel monitoring the currently reported primary with the same quorum
    /// and timings, and waits until it knows every reachable sentinel and they all list it.
    pub fn add_sentinel(&mut self) -> Result<&Node, TestkitError> {
        let (ip, port) = self
            .reported_primary()
            .unwrap_or_else(|| (self.primary.ip().to_string(), self.primary.client_port()));
        let node = self.spawn_sentinel((&ip, port), &[], "sentinel")?;
        let svc = self.spec.service.clone();
        let new_port = node.client_port();
        let others: Vec<&Node> = self.sentinels.iter().filter(|s| s.pollable()).collect();
        wait_until(
            Duration::from_secs(20),
            "the new sentinel to be known by the others",
            || {
                let m = node.sentinel_master_with_timeout(&svc, POLL_TIMEOUT).ok()?;
                let n: usize = m.get("num-other-sentinels")?.parse().ok()?;
                if n < others.len() {
                    return None;
                }
                for s in &others {
                    let list = s.sentinel_list("SENTINELS", &svc, POLL_TIMEOUT).ok()?;
                    if !list
                        .iter()
                        .any(|e| e.get("port").map(String::as_str) == Some(&new_port.to_string()))
                    {
                        return None;
                    }
                }
                Some(())
            },
        )?;
        self.sentinels.push(node);
        Ok(self.sentinels.last().expect("just pushed"))
    }

    /// Starts a sentinel (kept in [`Topology::stale_sentinels`], killed on drop) that believes
    /// `old_primary` is the primary of this service, with optional `sentinel known-replica` lines
    /// and the topology's quorum/timings. Waits only until it answers PING. Note: a real sentinel
    /// does not stay stale for long if it can reach instances where the others publish hellos
    /// with a newer config epoch; for a sentinel that lies forever use [`crate::FakeSentinel`].
    pub fn start_stale_sentinel(
        &mut self,
        old_primary: (&str, u16),
        known_replicas: &[(&str, u16)],
    ) -> Result<&Node, TestkitError> {
        let known: Vec<(String, u16)> = known_replicas
            .iter()
            .map(|(h, p)| (h.to_string(), *p))
            .collect();
        let node = self.spawn_sentinel(old_primary, &known, "stale-sentinel")?;
        self.stale.push(node);
        Ok(self.stale.last().expect("just pushed"))
    }

    /// `SENTINEL SET <service> down-after-milliseconds <ms>` on every reachable sentinel (errors
    /// ignored).
    pub fn set_down_after(&self, ms: u64) {
        for s in self.sentinels.iter().filter(|s| s.pollable()) {
            let _ = s.cmd(&[
                "SENTINEL",
                "SET",
                &self.spec.service,
                "down-after-milliseconds",
                &ms.to_string(),
            ]);
        }
    }

    /// Waits until every running data node that replicates from the current primary (reported
    /// by the sentinels, else the node started as primary) has its link up and an offset at least
    /// the primary's offset when the wait began; also waits for the started replica count when no
    /// sentinel answers yet (during [`Topology::start`]).
    pub fn wait_replication(&self, timeout: Duration) -> Result<(), TestkitError> {
        let primary = self.current_primary().unwrap_or(&self.primary);
        let pport = primary.client_port().to_string();
        let target: i64 = wait_until(timeout, "the primary's replication offset", || {
            primary
                .info("replication")
                .ok()?
                .get("master_repl_offset")?
                .parse()
                .ok()
        })?;
        let mut last = String::new();
        let res = wait_until(timeout, "replicas to catch up", || {
            for n in self.data_nodes() {
                if n.port() == primary.port() || !n.pollable() {
                    continue;
                }
                let info = n.info_with_timeout("replication", POLL_TIMEOUT).ok()?;
                if info.get("role").map(String::as_str) != Some("slave")
                    || info.get("master_port") != Some(&pport)
                {
                    if self.sentinels.is_empty() {
                        last = format!("{} not yet a replica of {pport}", n.port());
                        return None;
                    }
                    continue;
                }
                let off: i64 = info.get("slave_repl_offset")?.parse().ok()?;
                if info.get("master_link_status").map(String::as_str) != Some("up") || off < target
                {
                    last = format!(
                        "{}: link {:?} offset {off}",
                        n.port(),
                        info.get("master_link_status")
                    );
                    return None;
                }
            }
            Some(())
        });
        res.map_err(|e| e.with_detail(&format!("last: {last}")))
    }

    fn kill_all(&self) {
        for n in self.stale.iter().chain(self.sentinels.iter()) {
            n.kill9();
        }
        for n in self.data_nodes() {
            n.kill9();
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.kill_all();
        if keep_dirs() {
            eprintln!("sr-testkit: keeping {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Percent-encodes what would break a URL's userinfo or query value.
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `redis+sentinel://a1,a2,.../<service>` from `host:port` strings.
pub fn sentinel_url(service: &str, addrs: &[String]) -> String {
    format!("redis+sentinel://{}/{service}", addrs.join(","))
}
