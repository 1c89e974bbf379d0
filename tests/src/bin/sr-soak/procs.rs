//! The writer processes: each started from its command line with the common arguments
//! `URL ID LOG STOPFILE READS`, asked to stop by creating STOPFILE, and SIGKILLed by pid (and
//! reaped) if still running when its guard is dropped — also when the soak fails midway.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One writer to start.
#[derive(Debug, Clone)]
pub struct WriterSpec {
    /// Unique id, also its keys' suffix and its client name (`rust-1`, `py-1`, ...).
    pub id: String,
    /// Language, for the summary.
    pub lang: String,
    /// `primary` or `prefer-replica`; prefer-replica writers also read.
    pub read_from: String,
    /// The program and its leading arguments (before the common ones).
    pub program: Vec<String>,
}

/// A started writer.
pub struct Writer {
    /// What was started.
    pub spec: WriterSpec,
    /// Its JSON-lines log.
    pub log: PathBuf,
    child: Child,
}

impl Writer {
    /// Starts `spec` against `url`, logging to `dir/<id>.jsonl` (stdout and stderr to
    /// `dir/<id>.out`); inside network namespace `netns` (a client host of the LAN) when given,
    /// through `ip netns exec`, which execs the program: the pid is the writer's own.
    pub fn start(
        spec: WriterSpec,
        url: &str,
        dir: &Path,
        stop: &Path,
        netns: Option<&str>,
    ) -> std::io::Result<Writer> {
        let log = dir.join(format!("{}.jsonl", spec.id));
        let out = std::fs::File::create(dir.join(format!("{}.out", spec.id)))?;
        let reads = if spec.read_from == "primary" {
            "0"
        } else {
            "1"
        };
        let mut cmd = match netns {
            Some(ns) => sentinel_recovery_testkit::net::command_in(ns, &spec.program[0]),
            None => Command::new(&spec.program[0]),
        };
        cmd.args(&spec.program[1..])
            .arg(url)
            .arg(&spec.id)
            .arg(&log)
            .arg(stop)
            .arg(reads)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // SAFETY: prctl only, async-signal-safe, between fork and exec: the writer dies with the
        // driver's main thread even if the driver is SIGKILLed.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        Ok(Writer { spec, log, child })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `timeout` for the process to exit on its own (after STOPFILE was created);
    /// returns its exit status text, or kills it and says so.
    pub fn finish(&mut self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status.to_string(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return format!("did not exit within {timeout:?}; killed");
                }
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
