//! Network namespaces by name: create, delete, run `ip` in them, start processes in them and open
//! sockets inside them.
//!
//! Every namespace the testkit creates is named `srnet-<pid>-<seq>-<role>`, so a later run can
//! tell its own leftovers (owner pid dead) from another live run's namespaces, and never touches
//! a name without that prefix.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::TestkitError;

/// The prefix of every namespace name the testkit creates.
pub const NAME_PREFIX: &str = "srnet-";
/// Where `ip netns add` puts its named namespaces.
const NETNS_DIR: &str = "/var/run/netns";

/// Says why network namespaces cannot be used here (`Err` with a reason a skipped test prints),
/// or `Ok` when they can: the process must be root and `ip` must be installed.
pub fn netns_available() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("network namespaces need root (CI runs as root)".into());
    }
    match Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        _ => Err("`ip` (iproute2) is not installed".into()),
    }
}

/// Runs `ip ARGS...` and waits for it; a failure carries `ip`'s own message.
pub(crate) fn ip(args: &[&str]) -> Result<(), TestkitError> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestkitError::io(format!("running ip {}", args.join(" ")), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(TestkitError::Setup(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Runs `ip -n NETNS ARGS...`.
pub(crate) fn ip_in(netns: &str, args: &[&str]) -> Result<(), TestkitError> {
    let mut all = vec!["-n", netns];
    all.extend_from_slice(args);
    ip(&all)
}

/// A named network namespace this process created; dropping it deletes it (by its name). The
/// processes still inside keep it alive until they exit, so owners kill them first.
#[derive(Debug)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    /// `ip netns add NAME` with loopback up. `name` must start with [`NAME_PREFIX`].
    pub(crate) fn create(name: String) -> Result<Namespace, TestkitError> {
        assert!(
            name.starts_with(NAME_PREFIX),
            "namespace {name} lacks the prefix"
        );
        ip(&["netns", "add", &name])?;
        // Owned from here: an error below deletes it.
        let ns = Namespace { name };
        ip_in(&ns.name, &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name (for `ip -n` and `ip netns exec`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets `net.ipv4.conf.<iface>.<key>` inside the namespace (through its own /proc view).
    pub(crate) fn sysctl_conf(
        &self,
        iface: &str,
        key: &str,
        value: &str,
    ) -> Result<(), TestkitError> {
        let path = format!("/proc/sys/net/ipv4/conf/{iface}/{key}");
        let value = value.to_string();
        in_netns(&self.name, move || std::fs::write(&path, value))
            .and_then(|r| r)
            .map_err(|e| TestkitError::io(format!("{} in {}", key, self.name), e))
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "delete", &self.name]) {
            eprintln!("sr-testkit: deleting namespace {}: {e}", self.name);
        }
    }
}

/// Runs `f` on a new thread that has entered namespace `name`; sockets `f` opens belong to that
/// namespace for their whole life, whichever thread uses them later. The caller's thread never
/// changes namespace.
pub fn in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let path = format!("{NETNS_DIR}/{name}");
    let file = File::open(&path)?;
    std::thread::Builder::new()
        .name("sr-netns".into())
        .spawn(move || {
            // SAFETY: setns on an fd we own, for this thread only (CLONE_NEWNET is per thread).
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(f())
        })?
        .join()
        .map_err(|_| io::Error::other("namespace thread panicked"))?
}

/// Connects to `addr` from inside namespace `netns` (from this process' own when `None`).
pub fn dial(netns: Option<&str>, addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    match netns {
        None => TcpStream::connect_timeout(&addr, timeout),
        Some(ns) => in_netns(ns, move || TcpStream::connect_timeout(&addr, timeout))?,
    }
}

/// A command that runs `program` inside namespace `netns` (`ip netns exec NETNS program`); `ip`
/// execs the program, so the child's pid is the program's.
pub fn command_in(netns: &str, program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns]).arg(program);
    cmd
}

/// Deletes namespaces named `srnet-<pid>-...` whose owner pid is no longer alive (a test process
/// killed before its destructors ran). Names of live owners and names without the prefix are left
/// alone. Returns the names deleted.
pub fn remove_stale_namespaces() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_pid(&name) else {
            continue;
        };
        if pid_alive(pid) {
            continue;
        }
        if ip(&["netns", "delete", &name]).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// The owner pid encoded in a testkit namespace name, `None` for any other name.
pub(crate) fn owner_pid(name: &str) -> Option<u32> {
    name.strip_prefix(NAME_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

fn pid_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Names of existing namespaces that start with `prefix` (for tests that check cleanup).
pub fn namespaces_named(prefix: &str) -> Vec<String> {
    std::fs::read_dir(NETNS_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_reads_only_testkit_names() {
        assert_eq!(owner_pid("srnet-1234-0-hub"), Some(1234));
        assert_eq!(owner_pid("srnet-x-0-hub"), None);
        assert_eq!(owner_pid("other-1234-0"), None);
    }
}
