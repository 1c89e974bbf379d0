//! Spawning children that die with the test process, and their temp dirs.

use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::TestkitError;

// ---------------------------------------------------------------------------------------------
// Spawning: every child is spawned from one process-lifetime thread with PR_SET_PDEATHSIG, so the
// signal (which fires when the *spawning thread* exits) only fires when the whole process dies.

pub(super) struct SpawnReq {
    pub(super) cmd: Command,
    pub(super) reply: mpsc::Sender<io::Result<Child>>,
}

pub(crate) fn spawn_child(mut cmd: Command) -> io::Result<Child> {
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

pub(super) static DIR_SEQ: AtomicU64 = AtomicU64::new(0);

/// Creates a fresh temp directory `sr-testkit-<pid>-<seq>-<nanos>` (under `$SR_TESTKIT_TMP` or the
/// system temp dir).
pub(super) fn make_temp_dir(tag: &str) -> Result<PathBuf, TestkitError> {
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

/// True when env `SR_TESTKIT_KEEP=1`: temp dirs (configs, logs) survive the fixtures for debugging.
pub(super) fn keep_dirs() -> bool {
    std::env::var("SR_TESTKIT_KEEP").is_ok_and(|v| v == "1")
}
