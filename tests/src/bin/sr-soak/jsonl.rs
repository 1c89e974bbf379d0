//! The soak's record files: one JSON object per line, appended by several threads, read back by
//! the checker; and the wall clock in unix milliseconds that every record uses.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Milliseconds since the unix epoch (the clock the writers in every language use too).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// An append-only JSON-lines file shared by threads; each line is written whole.
#[derive(Clone)]
pub struct Sink(Arc<Mutex<File>>);

impl Sink {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> std::io::Result<Sink> {
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)?;
        Ok(Sink(Arc::new(Mutex::new(f))))
    }

    /// Appends one record.
    pub fn put(&self, v: &Value) {
        let mut line = v.to_string();
        line.push('\n');
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = f.write_all(line.as_bytes());
    }
}

/// Every record of a JSON-lines file; a torn last line (a writer killed mid-write) is skipped.
pub fn read(path: &Path) -> std::io::Result<Vec<Value>> {
    let f = File::open(path)?;
    Ok(BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect())
}
