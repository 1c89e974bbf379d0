//! One server or sentinel process: start, restart, faults (kill -9, SIGSTOP/SIGCONT), commands.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::spawn::{keep_dirs, spawn_child};
use crate::proxy::{Affects, FaultProxy, LinkFaults};
use crate::resp::{Conn, Reply};
use crate::{free_port, TestkitError};

/// Timeout of one [`Node::cmd`] (connect, write and read each).
pub(super) const CMD_TIMEOUT: Duration = Duration::from_secs(2);
/// Timeout used when polling many nodes (so a SIGSTOPped node does not stall a wait).
pub(super) const POLL_TIMEOUT: Duration = Duration::from_millis(400);
/// How long a freshly spawned process gets to answer.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(15);

/// One redis-server or sentinel process on `127.0.0.1:<port>`, with its own dir, config file and
/// log file (`<dir>/server.log`). Dropping a `Node` kills its process (SIGKILL + waitpid).
pub struct Node {
    sentinel: bool,
    binary: PathBuf,
    dir: PathBuf,
    conf: PathBuf,
    log: PathBuf,
    port: AtomicU16,
    /// The `tls-port`, 0 when the node has none.
    tls_port: AtomicU16,
    /// User and password the testkit authenticates with (ACL topologies).
    auth: Option<(String, String)>,
    child: Mutex<Option<Child>>,
    stopped: AtomicBool,
    placement: Placement,
    /// The proxy in front of the node on its host address, when [`Placement::proxied`].
    link_proxy: Mutex<Option<FaultProxy>>,
    /// The faults that proxy carries, kept across restarts.
    link_faults: Mutex<LinkFaults>,
    post_start: Vec<Vec<String>>,
    owns_dir: bool,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("sentinel", &self.sentinel)
            .field("port", &self.port())
            .field("tls_port", &self.tls_port())
            .field("pid", &self.pid())
            .field("dir", &self.dir)
            .finish()
    }
}

/// How the testkit reaches a node: whether it gets a TLS port, the credentials of the
/// testkit's own connections, and where the node runs.
#[derive(Default)]
pub(super) struct NodeAccess {
    pub(super) tls: bool,
    pub(super) auth: Option<(String, String)>,
    pub(super) placement: Placement,
}

/// Where a node's process runs and at which address peers and clients reach it.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    /// The address peers, sentinels and clients use ([`Node::addr`]).
    pub(crate) ip: String,
    /// The network namespace the process runs in (`ip netns exec`); the testkit then talks to it
    /// on 127.0.0.1 inside that namespace, so its control traffic is never cut. `None`: the test
    /// process' own namespace, where it is reached at `ip`.
    pub(crate) netns: Option<String>,
    /// The server binds only 127.0.0.1 and a [`FaultProxy`] in its namespace listens on
    /// `ip:port` in front of it, so every link into the node carries that proxy's faults.
    pub(crate) proxied: bool,
}

impl Default for Placement {
    fn default() -> Self {
        Placement {
            ip: "127.0.0.1".into(),
            netns: None,
            proxied: false,
        }
    }
}

impl Placement {
    /// Config lines for a data node: behind a link proxy, its peers see connections from the
    /// proxy (127.0.0.1), so a replica must announce its host address itself.
    pub(crate) fn announce_lines(&self) -> String {
        if self.proxied {
            format!("replica-announce-ip {}\n", self.ip)
        } else {
            String::new()
        }
    }

    /// The `bind` line's addresses.
    pub(crate) fn bind(&self) -> String {
        if self.proxied || self.ip == "127.0.0.1" {
            "127.0.0.1".into()
        } else {
            format!("127.0.0.1 {}", self.ip)
        }
    }
}

impl Node {
    /// Writes `conf(port, tls_port)` to `<dir>/<conf_name>` (`tls_port` 0 without TLS), starts the
    /// process and waits until it answers; retries with new ports if a port turned out to be taken.
    pub(super) fn start_new(
        sentinel: bool,
        binary: PathBuf,
        dir: PathBuf,
        conf: impl Fn(u16, u16) -> String,
        post_start: Vec<Vec<String>>,
        owns_dir: bool,
        access: NodeAccess,
    ) -> Result<Node, TestkitError> {
        fs::create_dir_all(&dir)
            .map_err(|e| TestkitError::io(format!("creating {}", dir.display()), e))?;
        let conf_path = dir.join(if sentinel {
            "sentinel.conf"
        } else {
            "redis.conf"
        });
        let node = Node {
            sentinel,
            binary,
            log: dir.join("server.log"),
            dir,
            conf: conf_path,
            port: AtomicU16::new(0),
            tls_port: AtomicU16::new(0),
            auth: access.auth,
            child: Mutex::new(None),
            stopped: AtomicBool::new(false),
            placement: access.placement,
            link_proxy: Mutex::new(None),
            link_faults: Mutex::new(LinkFaults::default()),
            post_start,
            owns_dir,
        };
        let mut last_err = None;
        for _ in 0..4 {
            let port = free_port();
            let tls_port = if access.tls {
                // Another free port, distinct from the plain one.
                loop {
                    let p = free_port();
                    if p != port {
                        break p;
                    }
                }
            } else {
                0
            };
            node.port.store(port, Ordering::SeqCst);
            node.tls_port.store(tls_port, Ordering::SeqCst);
            fs::write(&node.conf, conf(port, tls_port))
                .map_err(|e| TestkitError::io(format!("writing {}", node.conf.display()), e))?;
            match node.launch() {
                Ok(()) => return Ok(node),
                Err(e) if e.to_string().contains("already in use") => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_err.unwrap_or_else(|| TestkitError::Setup("no port".into())))
    }

    /// Spawns the process from the config file and waits until it answers on its port.
    pub(super) fn launch(&self) -> Result<(), TestkitError> {
        let log_start = fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| TestkitError::io(format!("opening {}", self.log.display()), e))?;
        let log2 = log
            .try_clone()
            .map_err(|e| TestkitError::io("cloning log file", e))?;
        let mut cmd = match &self.placement.netns {
            Some(ns) => crate::netns::command_in(ns, &self.binary),
            None => Command::new(&self.binary),
        };
        cmd.arg(&self.conf);
        if self.sentinel {
            cmd.arg("--sentinel");
        }
        cmd.current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2));
        let child = spawn_child(cmd)
            .map_err(|e| TestkitError::io(format!("spawning {}", self.binary.display()), e))?;
        let pid = child.id();
        self.stopped.store(false, Ordering::SeqCst);
        *self.lock_child() = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // The guard must end before the body locks again (an `if let` keeps it alive).
            let exited = self.lock_child().as_mut().and_then(|c| c.try_wait().ok()?);
            if let Some(status) = exited {
                *self.lock_child() = None;
                return Err(TestkitError::Setup(format!(
                    "{} on port {} exited at start ({status}): {}",
                    self.binary.display(),
                    self.port(),
                    self.log_since(log_start)
                )));
            }
            if let Ok(info) = self.info_with_timeout("server", POLL_TIMEOUT) {
                if info.get("process_id").map(String::as_str) == Some(&pid.to_string()) {
                    break;
                }
            }
            if Instant::now() >= deadline {
                self.kill9();
                return Err(TestkitError::Timeout(format!(
                    "{} on port {} to answer: {}",
                    self.binary.display(),
                    self.port(),
                    self.log_since(log_start)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.start_link_proxy()?;
        for c in &self.post_start {
            self.cmd_with_timeout(c, CMD_TIMEOUT)?;
        }
        Ok(())
    }

    /// (Re)starts the link proxy of a proxied node on `ip:port`, keeping the faults in force.
    fn start_link_proxy(&self) -> Result<(), TestkitError> {
        let (true, Some(ns)) = (self.placement.proxied, &self.placement.netns) else {
            return Ok(());
        };
        let mut slot = self.link_proxy.lock().unwrap_or_else(|e| e.into_inner());
        drop(slot.take());
        let faults = *self.link_faults.lock().unwrap_or_else(|e| e.into_inner());
        let at = |ip: &str| -> Result<std::net::SocketAddr, TestkitError> {
            format!("{ip}:{}", self.port())
                .parse()
                .map_err(|_| TestkitError::Setup(format!("bad address {ip}")))
        };
        let proxy = FaultProxy::start_in_netns(
            ns,
            at(&self.placement.ip)?,
            at("127.0.0.1")?,
            Affects::All,
        )?;
        proxy.set_faults(faults);
        *slot = Some(proxy);
        Ok(())
    }

    /// Sets the faults on every link into this node (latency, loss, blackhole), when it was
    /// started behind a link proxy; returns false (and does nothing) otherwise.
    pub fn set_link_faults(&self, faults: LinkFaults) -> bool {
        *self.link_faults.lock().unwrap_or_else(|e| e.into_inner()) = faults;
        match &*self.link_proxy.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(p) => {
                p.set_faults(faults);
                true
            }
            None => false,
        }
    }

    /// The network namespace the process runs in, `None` for the test's own.
    pub fn netns(&self) -> Option<&str> {
        self.placement.netns.as_deref()
    }

    /// The address peers and clients reach the node at (127.0.0.1 outside network namespaces).
    pub fn ip(&self) -> &str {
        &self.placement.ip
    }

    pub(super) fn log_since(&self, start: u64) -> String {
        let mut s = String::new();
        if let Ok(mut f) = File::open(&self.log) {
            let _ = f.seek(SeekFrom::Start(start));
            let _ = f.read_to_string(&mut s);
        }
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(8)..].join(" | ")
    }

    pub(super) fn lock_child(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Current plain-TCP port (changes only through [`Node::restart_on_port`]); the testkit's own
    /// control traffic uses it, also on TLS topologies.
    pub fn port(&self) -> u16 {
        self.port.load(Ordering::SeqCst)
    }

    /// The TLS port on TLS topologies, `None` otherwise.
    pub fn tls_port(&self) -> Option<u16> {
        match self.tls_port.load(Ordering::SeqCst) {
            0 => None,
            p => Some(p),
        }
    }

    /// The port clients under test use and sentinels report: the TLS port on TLS topologies,
    /// else [`Node::port`].
    pub fn client_port(&self) -> u16 {
        self.tls_port().unwrap_or_else(|| self.port())
    }

    /// `"<ip>:<client_port>"` (`127.0.0.1` outside network namespaces).
    pub fn client_addr(&self) -> String {
        format!("{}:{}", self.placement.ip, self.client_port())
    }

    /// Process id while the process runs (also while SIGSTOPped); `None` after [`Node::kill9`].
    pub fn pid(&self) -> Option<u32> {
        self.lock_child().as_ref().map(|c| c.id())
    }

    /// True while the process has not been killed by the testkit (it may be SIGSTOPped).
    pub fn is_running(&self) -> bool {
        self.pid().is_some()
    }

    /// True between [`Node::stop`] and [`Node::cont`] (or a restart).
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// `"<ip>:<port>"` (`127.0.0.1` outside network namespaces).
    pub fn addr(&self) -> String {
        format!("{}:{}", self.placement.ip, self.port())
    }

    /// True for a sentinel process.
    pub fn is_sentinel(&self) -> bool {
        self.sentinel
    }

    /// The config file the process was started with (sentinels rewrite it with their state).
    pub fn config_path(&self) -> PathBuf {
        self.conf.clone()
    }

    /// The node's own directory (config, log, working dir).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file receiving the process' stdout and stderr (appended across restarts).
    pub fn log_path(&self) -> PathBuf {
        self.log.clone()
    }

    /// Opens a new RESP2 connection to the node's plain port, with `timeout` for
    /// connect/read/write; on ACL topologies it is authenticated as the testkit's admin user.
    pub fn connect(&self, timeout: Duration) -> Result<Conn, TestkitError> {
        let mut conn = match &self.placement.netns {
            // Inside the node's own namespace: never cut, never behind the link proxy.
            Some(ns) => {
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port()));
                let stream = crate::netns::dial(Some(ns), addr, timeout)
                    .map_err(|e| TestkitError::io(format!("connecting to {addr} in {ns}"), e))?;
                stream.set_nodelay(true).ok();
                Conn::from_stream(stream, timeout)?
            }
            None => Conn::connect(&self.addr(), timeout)?,
        };
        if let Some((user, password)) = &self.auth {
            if let Reply::Error(e) = conn.call(&["AUTH", user.as_str(), password.as_str()])? {
                return Err(TestkitError::Server(format!("AUTH as {user}: {e}")));
            }
        }
        Ok(conn)
    }

    /// Runs one command on a new connection (2 s timeout). An error reply becomes
    /// `Err(TestkitError::Server(text))`, so `?` never lets a failed command pass.
    pub fn cmd(&self, args: &[&str]) -> Result<Reply, TestkitError> {
        self.cmd_with_timeout(args, CMD_TIMEOUT)
    }

    /// Like [`Node::cmd`] with a chosen timeout.
    pub fn cmd_with_timeout<S: AsRef<[u8]>>(
        &self,
        args: &[S],
        timeout: Duration,
    ) -> Result<Reply, TestkitError> {
        let reply = self.connect(timeout)?.call(args)?;
        match reply {
            Reply::Error(e) => Err(TestkitError::Server(e)),
            r => Ok(r),
        }
    }

    /// `INFO <section>` parsed into `field -> value`.
    pub fn info(&self, section: &str) -> Result<HashMap<String, String>, TestkitError> {
        self.info_with_timeout(section, CMD_TIMEOUT)
    }

    pub(super) fn info_with_timeout(
        &self,
        section: &str,
        timeout: Duration,
    ) -> Result<HashMap<String, String>, TestkitError> {
        let text = self
            .cmd_with_timeout(&["INFO", section], timeout)?
            .as_str()
            .ok_or_else(|| TestkitError::Protocol("INFO reply is not a string".into()))?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect())
    }

    /// SIGKILL and waitpid; afterwards [`Node::pid`] is `None`. No-op if already down.
    pub fn kill9(&self) {
        // The proxy goes too: nothing answers on the host address of a dead node.
        drop(
            self.link_proxy
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        if let Some(mut child) = self.lock_child().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stopped.store(false, Ordering::SeqCst);
    }

    pub(super) fn signal(&self, sig: libc::c_int) -> bool {
        match self.pid() {
            // SAFETY: plain kill(2) on our own child's pid (not yet reaped, so not reused).
            Some(pid) => unsafe { libc::kill(pid as libc::pid_t, sig) == 0 },
            None => false,
        }
    }

    /// SIGSTOP: the process keeps its sockets but answers nothing until [`Node::cont`].
    pub fn stop(&self) {
        if self.signal(libc::SIGSTOP) {
            self.stopped.store(true, Ordering::SeqCst);
        }
    }

    /// SIGCONT after [`Node::stop`].
    pub fn cont(&self) {
        if self.signal(libc::SIGCONT) {
            self.stopped.store(false, Ordering::SeqCst);
        }
    }

    /// Starts the process again on the same port with the same config file (which a sentinel
    /// has rewritten with its state, and a data node possibly with a `replicaof` line); kills it
    /// first if it still runs. Waits until it answers, then re-applies the sentinel DEBUG periods.
    pub fn restart(&self) -> Result<(), TestkitError> {
        self.kill9();
        self.launch()
    }

    /// Like [`Node::restart`] but on `new_port` (the `port` line of the config file is rewritten).
    pub fn restart_on_port(&self, new_port: u16) -> Result<(), TestkitError> {
        self.kill9();
        let text = fs::read_to_string(&self.conf)
            .map_err(|e| TestkitError::io(format!("reading {}", self.conf.display()), e))?;
        let mut out: Vec<String> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("port "))
            .map(str::to_string)
            .collect();
        out.insert(0, format!("port {new_port}"));
        fs::write(&self.conf, out.join("\n") + "\n")
            .map_err(|e| TestkitError::io(format!("writing {}", self.conf.display()), e))?;
        self.port.store(new_port, Ordering::SeqCst);
        self.launch()
    }

    /// `CLIENT KILL TYPE normal`: drops every normal client connection (not replicas, not pub/sub
    /// on Redis 7, not the caller). Errors are ignored.
    pub fn client_kill_normal(&self) {
        let _ = self.cmd(&["CLIENT", "KILL", "TYPE", "normal"]);
    }

    /// Sends `DEBUG SLEEP <secs>` on its own connection and returns as soon as the command is
    /// written; a background thread waits for the reply. Data nodes only (sentinels have no DEBUG).
    pub fn debug_sleep(&self, secs: f64) {
        let Ok(mut conn) = self.connect(CMD_TIMEOUT) else {
            return;
        };
        if conn.send(&["DEBUG", "SLEEP", &format!("{secs}")]).is_err() {
            return;
        }
        let _ = conn.set_read_timeout(Some(Duration::from_secs_f64(secs.max(0.0) + 10.0)));
        std::thread::spawn(move || {
            let _ = conn.read();
        });
    }

    /// `REPLICAOF host port`; errors are ignored.
    pub fn replicaof(&self, host: &str, port: u16) {
        let _ = self.cmd(&["REPLICAOF", host, &port.to_string()]);
    }

    /// `REPLICAOF NO ONE`; errors are ignored.
    pub fn replicaof_no_one(&self) {
        let _ = self.cmd(&["REPLICAOF", "NO", "ONE"]);
    }

    /// First element of `ROLE`: `"master"`, `"slave"` or `"sentinel"`; `None` if unreachable.
    pub fn role(&self) -> Option<String> {
        self.cmd(&["ROLE"]).ok()?.as_array()?.first()?.as_str()
    }

    /// `CLIENT LIST`, one map per client (`id`, `addr`, `name`, `flags`, `cmd`, ...); empty if
    /// unreachable. Works on sentinels too.
    pub fn client_list(&self) -> Vec<HashMap<String, String>> {
        let Some(text) = self.cmd(&["CLIENT", "LIST"]).ok().and_then(|r| r.as_str()) else {
            return Vec::new();
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                l.split(' ')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }

    /// `SENTINEL MASTER <service>` as a map (sentinels only).
    pub fn sentinel_master(&self, service: &str) -> Result<HashMap<String, String>, TestkitError> {
        self.sentinel_master_with_timeout(service, CMD_TIMEOUT)
    }

    pub(super) fn sentinel_master_with_timeout(
        &self,
        service: &str,
        timeout: Duration,
    ) -> Result<HashMap<String, String>, TestkitError> {
        self.cmd_with_timeout(&["SENTINEL", "MASTER", service], timeout)?
            .to_map()
            .ok_or_else(|| TestkitError::Protocol("SENTINEL MASTER reply is not an array".into()))
    }

    /// `SENTINEL GET-MASTER-ADDR-BY-NAME <service>` (sentinels only); `Ok(None)` for a nil reply.
    pub fn get_master_addr(&self, service: &str) -> Result<Option<(String, u16)>, TestkitError> {
        self.get_master_addr_with_timeout(service, CMD_TIMEOUT)
    }

    pub(super) fn get_master_addr_with_timeout(
        &self,
        service: &str,
        timeout: Duration,
    ) -> Result<Option<(String, u16)>, TestkitError> {
        let r =
            self.cmd_with_timeout(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", service], timeout)?;
        match r.as_array() {
            Some([ip, port]) => {
                let ip = ip.as_str();
                let port = port.as_int().and_then(|p| u16::try_from(p).ok());
                match (ip, port) {
                    (Some(ip), Some(port)) => Ok(Some((ip, port))),
                    _ => Err(TestkitError::Protocol(format!("odd address reply {r:?}"))),
                }
            }
            _ if r == Reply::Nil => Ok(None),
            _ => Err(TestkitError::Protocol(format!("odd address reply {r:?}"))),
        }
    }

    /// A sentinel-command listing (`SENTINEL REPLICAS|SENTINELS <service>`) as maps.
    pub fn sentinel_list(
        &self,
        what: &str,
        service: &str,
        timeout: Duration,
    ) -> Result<Vec<HashMap<String, String>>, TestkitError> {
        let r = self.cmd_with_timeout(&["SENTINEL", what, service], timeout)?;
        Ok(r.as_array()
            .unwrap_or(&[])
            .iter()
            .filter_map(Reply::to_map)
            .collect())
    }

    /// `SENTINEL REPLICAS <service>` as maps (sentinels only).
    pub fn sentinel_replicas(
        &self,
        service: &str,
    ) -> Result<Vec<HashMap<String, String>>, TestkitError> {
        self.sentinel_list("REPLICAS", service, CMD_TIMEOUT)
    }

    /// `SENTINEL SENTINELS <service>` as maps (sentinels only).
    pub fn sentinel_sentinels(
        &self,
        service: &str,
    ) -> Result<Vec<HashMap<String, String>>, TestkitError> {
        self.sentinel_list("SENTINELS", service, CMD_TIMEOUT)
    }

    /// True if this node is running and not SIGSTOPped (worth polling).
    pub(super) fn pollable(&self) -> bool {
        self.is_running() && !self.is_stopped()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
        if self.owns_dir && !keep_dirs() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}
