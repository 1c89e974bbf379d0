//! The hosts file: read and parsed as glibc does, shared by every resolver of the process, and
//! re-read on a short-lived thread of its own when it changes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use super::name::normalize;
use crate::sync::Locked;

/// The environment variable that overrides the default hosts file path (tests, special setups).
pub const HOSTS_FILE_ENV: &str = "SR_HOSTS_FILE";

/// Longest time between two checks of the hosts file for changes (shorter when `cache_ttl` is).
pub(super) const HOSTS_RECHECK: Duration = Duration::from_secs(2);

/// A check of the hosts file still marked as under way after this long is taken as lost (its
/// thread died, or the process forked meanwhile) and another is started.
const HOSTS_CHECK_LOST: Duration = Duration::from_secs(10);

/// Names (lower case, no final dot) to their addresses, IPv4 first, each family in file order.
type HostsTable = HashMap<String, Arc<[IpAddr]>>;

/// What tells one version of the file from another without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

/// One hosts file, parsed, shared by every resolver of the process that uses its path.
pub(super) struct HostsFile {
    path: PathBuf,
    state: Mutex<HostsState>,
}

struct HostsState {
    names: Arc<HostsTable>,
    /// `None` while the file is missing or unreadable.
    stamp: Option<Stamp>,
    checked_at: Instant,
    /// Set while a background check runs.
    checking_since: Option<Instant>,
}

impl HostsFile {
    /// The shared entry for `path`, brought up to date now, on the calling (host) thread.
    pub(super) fn shared(path: &Path) -> Arc<HostsFile> {
        static FILES: OnceLock<Mutex<HashMap<PathBuf, Arc<HostsFile>>>> = OnceLock::new();
        let file = FILES
            .get_or_init(Default::default)
            .locked()
            .entry(path.to_owned())
            .or_insert_with(|| {
                Arc::new(HostsFile {
                    path: path.to_owned(),
                    state: Mutex::new(HostsState {
                        names: Arc::default(),
                        stamp: None,
                        checked_at: Instant::now(),
                        checking_since: None,
                    }),
                })
            })
            .clone();
        file.refresh();
        file
    }

    fn lock(&self) -> MutexGuard<'_, HostsState> {
        self.state.locked()
    }

    /// The file's addresses for `name` (normalized). Never touches the disk: when the last check
    /// is older than `recheck`, one background thread looks for a change while this call answers
    /// from what was read before.
    pub(super) fn lookup(self: &Arc<Self>, name: &str, recheck: Duration) -> Option<Arc<[IpAddr]>> {
        let mut state = self.lock();
        let now = Instant::now();
        let check_running = state
            .checking_since
            .is_some_and(|since| now.duration_since(since) < HOSTS_CHECK_LOST);
        if !check_running && now.duration_since(state.checked_at) >= recheck {
            state.checking_since = Some(now);
            let file = self.clone();
            let spawned = std::thread::Builder::new()
                .name("sr-hosts".into())
                .spawn(move || file.refresh());
            if let Err(e) = spawned {
                tracing::debug!(error = %e, "cannot start the hosts file check; trying later");
                state.checking_since = None;
                state.checked_at = now;
            }
        }
        state.names.get(name).cloned()
    }

    /// Blocking: looks at the file's metadata and re-reads it when it changed. Only on a host
    /// thread or the check's own thread.
    fn refresh(&self) {
        let stamp = file_stamp(&self.path);
        let unchanged = self.lock().stamp == stamp && stamp.is_some();
        let names = if unchanged {
            None
        } else {
            match std::fs::read(&self.path) {
                Ok(bytes) => Some(parse_hosts(&String::from_utf8_lossy(&bytes))),
                Err(e) => {
                    tracing::debug!(path = %self.path.display(), error = %e, "hosts file not read; names go to DNS");
                    Some(HostsTable::new())
                }
            }
        };
        let mut state = self.lock();
        if let Some(names) = names {
            state.names = Arc::new(names);
            state.stamp = stamp;
        }
        state.checked_at = Instant::now();
        state.checking_since = None;
    }
}

fn file_stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode,
    })
}

/// Parses hosts(5) text: `address name [alias...]` per line, `#` to the end of a line is a
/// comment. Lines whose address does not parse (or has a `%zone`) are skipped, as are names that
/// could never be looked up.
fn parse_hosts(text: &str) -> HostsTable {
    let mut v4: HashMap<String, Vec<IpAddr>> = HashMap::new();
    let mut v6: HashMap<String, Vec<IpAddr>> = HashMap::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_ascii_whitespace();
        let Some(Ok(ip)) = fields.next().map(str::parse::<IpAddr>) else {
            continue;
        };
        for name in fields {
            let Ok(name) = normalize(name) else { continue };
            let list = match ip {
                IpAddr::V4(_) => v4.entry(name).or_default(),
                IpAddr::V6(_) => v6.entry(name).or_default(),
            };
            if !list.contains(&ip) {
                list.push(ip);
            }
        }
    }
    for (name, ips) in v6 {
        v4.entry(name).or_default().extend(ips);
    }
    v4.into_iter()
        .map(|(name, ips)| (name, ips.into()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_text_is_parsed_like_glibc() {
        let table = parse_hosts(
            "127.0.0.1 localhost\n\
             ::1 localhost ip6-localhost # comment\n\
             10.0.0.1 a.test A.TEST.\n\
             fe80::1%eth0 zoned.test\n\
             # 10.0.0.2 commented.test\n\
             10.0.0.3\n\
             10.0.0.4 a.test\n",
        );
        let get = |n: &str| table.get(n).map(|a| a.to_vec());
        assert_eq!(
            get("localhost"),
            Some(vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()])
        );
        assert_eq!(
            get("a.test"),
            Some(vec![
                "10.0.0.1".parse().unwrap(),
                "10.0.0.4".parse().unwrap()
            ])
        );
        assert_eq!(get("ip6-localhost"), Some(vec!["::1".parse().unwrap()]));
        assert_eq!(get("zoned.test"), None);
        assert_eq!(get("commented.test"), None);
    }
}
