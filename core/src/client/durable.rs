//! Durable acknowledgements (`wait_replicas=N`, `wait_timeout_ms`): every write is followed, on
//! the same connection, by `WAIT N timeout`, and its success is handed back only when at least N
//! replicas confirmed it. Sentinel replicates asynchronously: a primary cut off with some
//! clients keeps acknowledging writes that the majority's promotion then discards. A write at
//! least one replica holds survives that promotion (Sentinel promotes the most up-to-date
//! replica), so counting replicas before saying "done" closes the window that WAIT can close.
//!
//! Which commands are writes comes from the server's own command table (`COMMAND`: the `write`
//! and `may_replicate` flags, subcommands included), read once per client; EXEC is always a
//! write. A command the table does not know is treated as a write: an extra WAIT costs time,
//! a missing one costs data.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use super::command::{Encoded, Name};
use crate::config::Config;
use crate::error::{Error, ErrorCode, Result};
use crate::resp::{Connection, GroupReply, Value};

/// What the client does after each write, from its configuration.
#[derive(Clone, Debug)]
pub(crate) struct Durability {
    replicas: u32,
    timeout: Duration,
    /// `WAIT replicas timeout`, encoded once: every durable send carries it.
    wait: Bytes,
}

impl Durability {
    /// `None` when `wait_replicas` is 0 (off, the default).
    pub(crate) fn of(config: &Config) -> Option<Durability> {
        (config.wait_replicas > 0).then(|| {
            Durability::new(
                config.wait_replicas,
                Duration::from_millis(config.wait_timeout_ms),
            )
        })
    }

    /// How long a send's WAIT may block its connection: deadlines stretch by this much, so a
    /// write the server ran is not reported as timed out while its replicas are counted.
    pub(crate) fn allowance(&self) -> Duration {
        self.timeout
    }

    fn new(replicas: u32, timeout: Duration) -> Durability {
        let mut wait = BytesMut::new();
        let count = replicas.to_string();
        let ms = timeout.as_millis().to_string();
        crate::resp::encode_command(
            &[b"WAIT".as_slice(), count.as_bytes(), ms.as_bytes()],
            &mut wait,
        );
        Durability {
            replicas,
            timeout,
            wait: wait.freeze(),
        }
    }

    /// `WAIT replicas timeout`, encoded (a cheap clone).
    fn wait_command(&self) -> Bytes {
        self.wait.clone()
    }
}

/// The server's command table: for each command (and `CONTAINER|SUB` subcommand) in upper
/// case, whether it writes or may replicate. Looked up once per command sent (by the proxy for
/// every request), so keys are kept in the case [`Name`] gives and hashed with FNV-1a: no
/// allocation and no SipHash per lookup.
#[derive(Debug, Default)]
pub(crate) struct WriteTable {
    writes: HashMap<String, bool, Fnv>,
    /// Commands with subcommands (`XGROUP`, `CONFIG`, `FUNCTION`, ...): look at the subcommand.
    containers: HashMap<String, (), Fnv>,
}

/// FNV-1a: short command names from one server's own table, no untrusted keys to flood with.
type Fnv = std::hash::BuildHasherDefault<FnvHasher>;

/// The FNV-1a state (64-bit).
pub(crate) struct FnvHasher(u64);

impl Default for FnvHasher {
    fn default() -> FnvHasher {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The table of one client, read from the first node it sends a durable write to.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    table: OnceLock<Arc<WriteTable>>,
}

impl Tables {
    /// The table if it was read already.
    pub(crate) fn cached(&self) -> Option<Arc<WriteTable>> {
        self.table.get().cloned()
    }

    /// The table, reading it over `conn` the first time (within `timeout`). A server that
    /// refuses `COMMAND` (renamed, or denied by ACL) gets an empty table: every command but the
    /// hand list of reads is then a write.
    pub(crate) async fn get(&self, conn: &Connection, timeout: Duration) -> Arc<WriteTable> {
        if let Some(table) = self.table.get() {
            return table.clone();
        }
        let read = tokio::time::timeout(timeout, conn.pipeline(&[vec![b"COMMAND".to_vec()]])).await;
        let table = match read {
            Ok(Ok(mut replies)) => match replies.pop() {
                Some(Ok(reply)) => WriteTable::parse(&reply),
                other => {
                    tracing::warn!(reply = ?other.map(|r| r.map(|_| ())), "COMMAND refused: treating every command not known to read only as a write");
                    WriteTable::default()
                }
            },
            _ => {
                tracing::warn!("COMMAND not answered in time: treating every command not known to read only as a write");
                // Not cached: the next write asks again.
                return Arc::new(WriteTable::default());
            }
        };
        self.table.get_or_init(|| Arc::new(table)).clone()
    }
}

impl WriteTable {
    /// Reads `COMMAND`'s reply: one entry per command, `[name, arity, flags, first, last, step,
    /// (acl categories, tips, key specs, subcommands)]`.
    pub(crate) fn parse(reply: &Value) -> WriteTable {
        let mut table = WriteTable::default();
        if let Value::Array(entries) | Value::Set(entries) = reply {
            for entry in entries {
                table.add(entry, None);
            }
        }
        table
    }

    fn add(&mut self, entry: &Value, container: Option<&str>) {
        let Value::Array(fields) = entry else { return };
        let Some(name) = fields.first().and_then(text) else {
            return;
        };
        let name = name.to_ascii_uppercase();
        let writes = match fields.get(2) {
            Some(Value::Array(flags) | Value::Set(flags)) => {
                flags.iter().filter_map(text).any(|f| {
                    f.eq_ignore_ascii_case("write") || f.eq_ignore_ascii_case("may_replicate")
                })
            }
            _ => false,
        };
        if container.is_none() {
            if let Some(Value::Array(subs)) = fields.get(9) {
                if !subs.is_empty() {
                    self.containers.insert(name.clone(), ());
                    for sub in subs {
                        self.add(sub, Some(&name));
                    }
                }
            }
        }
        self.writes.insert(name, writes);
    }

    /// Whether the command named `name` (with first argument `sub`) writes. Unknown: yes.
    pub(crate) fn writes(&self, name: &[u8], sub: Option<&[u8]>) -> bool {
        let upper = Name::of(name);
        let name = upper.as_str();
        if name == "EXEC" {
            return true;
        }
        if self.writes.is_empty() {
            return !super::command::is_read_only(name);
        }
        if self.containers.contains_key(name) {
            if let Some(sub) = sub {
                let key = format!(
                    "{name}|{}",
                    String::from_utf8_lossy(sub).to_ascii_uppercase()
                );
                if let Some(writes) = self.writes.get(&key) {
                    return *writes;
                }
            }
        }
        self.writes.get(name).copied().unwrap_or(true)
    }
}

fn text(value: &Value) -> Option<&str> {
    match value {
        Value::Bulk(b) => std::str::from_utf8(b).ok(),
        Value::Simple(s) => Some(s),
        _ => None,
    }
}

/// Commands with one WAIT after their last write, and which of them are writes.
///
/// One WAIT confirms every write before it on the connection (it waits for the replication
/// offset of the connection's latest write), so a pipeline needs one, not one per entry: with
/// the replicas gone, a pipeline of a hundred writes then waits `wait_timeout_ms` once, not a
/// hundred times.
pub(crate) struct Planned {
    pub(crate) encoded: Encoded,
    /// One entry per original command: whether it writes.
    writes: Vec<bool>,
}

impl Planned {
    /// Whether a WAIT was added.
    pub(crate) fn waits(&self) -> bool {
        self.writes.iter().any(|w| *w)
    }
}

/// Adds one `WAIT` after the last write of `commands` (encoded by this crate: arrays of bulk
/// strings); none when nothing writes.
pub(crate) fn plan(
    durability: &Durability,
    table: &WriteTable,
    commands: &Encoded,
) -> Result<Planned> {
    let mut writes = Vec::with_capacity(commands.count);
    let mut last_write_end = None;
    let mut at = 0;
    for _ in 0..commands.count {
        let head = head(&commands.bytes[at..])?;
        let write = table.writes(head.name, head.sub);
        at += head.len;
        if write {
            last_write_end = Some(at);
        }
        writes.push(write);
    }
    let Some(split) = last_write_end else {
        return Ok(Planned {
            encoded: commands.clone(),
            writes,
        });
    };
    let wait = durability.wait_command();
    let mut out = BytesMut::with_capacity(commands.bytes.len() + wait.len());
    out.extend_from_slice(&commands.bytes[..split]);
    out.extend_from_slice(&wait);
    out.extend_from_slice(&commands.bytes[split..]);
    Ok(Planned {
        encoded: Encoded {
            bytes: out.freeze(),
            count: commands.count + 1,
        },
        writes,
    })
}

/// The first command of an encoded batch: its length in bytes, its name and first argument.
struct Head<'a> {
    len: usize,
    name: &'a [u8],
    sub: Option<&'a [u8]>,
}

/// Reads the first command of `bytes` (an array of bulk strings, as this crate encodes them).
fn head(bytes: &[u8]) -> Result<Head<'_>> {
    let bad = || {
        Error::new(
            ErrorCode::Internal,
            "internal error: a command encoded by this library could not be read back",
        )
    };
    // `<prefix><decimal>\r\n` at `at`: the number and where the line ends.
    let line = |at: usize| -> Result<(usize, usize)> {
        let end = bytes[at..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(bad)?
            + at;
        let n = std::str::from_utf8(&bytes[at + 1..end])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        Ok((n, end + 2))
    };
    if bytes.first() != Some(&b'*') {
        return Err(bad());
    }
    let (count, mut at) = line(0)?;
    let mut first_two = Vec::with_capacity(2);
    for _ in 0..count {
        if bytes.get(at) != Some(&b'$') {
            return Err(bad());
        }
        let (len, start) = line(at)?;
        let end = start + len;
        if end + 2 > bytes.len() {
            return Err(bad());
        }
        if first_two.len() < 2 {
            first_two.push(&bytes[start..end]);
        }
        at = end + 2;
    }
    Ok(Head {
        len: at,
        name: first_two.first().copied().ok_or_else(bad)?,
        sub: first_two.get(1).copied(),
    })
}

/// Folds the replies of a planned send back to one result per original command: a write whose
/// WAIT counted fewer than the asked replicas becomes `not_replicated` (it ran on the primary;
/// a failover may lose it), never a success.
pub(crate) fn fold(
    durability: &Durability,
    planned: &Planned,
    mut replies: Vec<Result<Value>>,
) -> Vec<Result<Value>> {
    let Some(last_write) = planned.writes.iter().rposition(|w| *w) else {
        return replies;
    };
    if replies.len() != planned.encoded.count {
        return replies;
    }
    let wait = replies.remove(last_write + 1);
    replies
        .into_iter()
        .zip(&planned.writes)
        .map(|(reply, write)| {
            if *write {
                judge_wait(durability, reply, wait.clone())
            } else {
                reply
            }
        })
        .collect()
}

/// Sends one write in its connection's group (see [`Connection::call_in_group`]): the writes in
/// flight together share one WAIT, sent after the last of them, and each gets its reply judged
/// with that WAIT's. `Err` when nothing was sent (the connection had ended): the caller may retry.
pub(crate) async fn grouped(
    durability: &Durability,
    conn: &Connection,
    write: &Encoded,
) -> Result<Vec<Result<Value>>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    conn.call_in_group(
        write.bytes.clone(),
        durability.wait_command(),
        move |reply| {
            // The caller may have stopped waiting (its deadline passed).
            let _ = tx.send(reply);
        },
    );
    match rx.await {
        Ok(GroupReply::Replied { reply, trailer }) => {
            Ok(vec![judge_wait(durability, reply, trailer)])
        }
        Ok(GroupReply::NotSent) => Err(Error::connection_lost("the connection had ended")),
        // Dropped unanswered: the connection ended with the command in flight.
        Err(_) => Ok(vec![Err(Error::connection_lost(
            "the connection ended before the write's reply",
        ))]),
    }
}

/// One write's result from its own reply and its WAIT's.
fn judge_wait(durability: &Durability, reply: Result<Value>, wait: Result<Value>) -> Result<Value> {
    // The write failed (READONLY, a wrong type, a lost connection): that is its result, and
    // READONLY stays recognizable so the data path can re-resolve and retry.
    let value = reply?;
    let asked = durability.replicas;
    let ms = durability.timeout.as_millis();
    match wait {
        Ok(Value::Int(n)) if n >= i64::from(asked) => Ok(value),
        Ok(Value::Int(n)) => Err(Error::new(
            ErrorCode::NotReplicated,
            format!(
                "the write ran on the primary, but {n} of the {asked} replicas asked for \
                 (wait_replicas) confirmed it within {ms} ms (wait_timeout_ms); a failover may \
                 lose it"
            ),
        )),
        // The connection broke between the write's reply and WAIT's: it ran, replicas unknown.
        Err(e) if e.code() == ErrorCode::ConnectionLost => Err(Error::new(
            ErrorCode::NotReplicated,
            format!("the write ran on the primary, but the connection broke before its replicas were counted ({e}); a failover may lose it"),
        )),
        Err(e) => Err(Error::new(
            ErrorCode::NotReplicated,
            format!("the write ran on the primary, but WAIT failed ({e}); a failover may lose it"),
        )),
        Ok(other) => Err(Error::new(
            ErrorCode::NotReplicated,
            format!("the write ran on the primary, but WAIT answered {other:?}; a failover may lose it"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn durability() -> Durability {
        Durability::new(1, Duration::from_millis(250))
    }

    fn entry(name: &str, flags: &[&str], subs: Vec<Value>) -> Value {
        let mut fields = vec![
            Value::Bulk(Bytes::from(name.to_string())),
            Value::Int(-1),
            Value::Array(flags.iter().map(|f| Value::Simple(f.to_string())).collect()),
            Value::Int(1),
            Value::Int(1),
            Value::Int(1),
            Value::Array(vec![]),
            Value::Array(vec![]),
            Value::Array(vec![]),
        ];
        fields.push(Value::Array(subs));
        Value::Array(fields)
    }

    fn table() -> WriteTable {
        WriteTable::parse(&Value::Array(vec![
            entry("get", &["readonly", "fast"], vec![]),
            entry("set", &["write", "denyoom"], vec![]),
            entry("eval", &["noscript", "may_replicate"], vec![]),
            entry(
                "xgroup",
                &[],
                vec![
                    entry("xgroup|create", &["write"], vec![]),
                    entry("xgroup|help", &["loading", "stale"], vec![]),
                ],
            ),
        ]))
    }

    #[test]
    fn writes_come_from_the_flags_and_subcommands() {
        let t = table();
        assert!(!t.writes(b"GET", None));
        assert!(t.writes(b"set", None));
        assert!(t.writes(b"EVAL", Some(b"return 1")));
        assert!(t.writes(b"XGROUP", Some(b"CREATE")));
        assert!(!t.writes(b"xgroup", Some(b"help")));
        assert!(t.writes(b"EXEC", None), "EXEC runs what MULTI queued");
        assert!(t.writes(b"NOSUCHCOMMAND", None), "unknown means write");
        // Without a table: everything but the known reads.
        let empty = WriteTable::default();
        assert!(!empty.writes(b"GET", None));
        assert!(empty.writes(b"SET", None));
    }

    #[test]
    fn a_wait_follows_each_write_and_the_replies_fold_back() {
        let t = table();
        let commands = Encoded::many(&[
            vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()],
            vec![b"GET".to_vec(), b"k".to_vec()],
            vec![b"SET".to_vec(), b"k".to_vec(), b"w\r\n*".to_vec()],
        ]);
        let planned = plan(&durability(), &t, &commands).unwrap();
        assert_eq!(planned.encoded.count, 4);
        assert!(planned.waits());
        let text = String::from_utf8_lossy(&planned.encoded.bytes).into_owned();
        assert_eq!(text.matches("WAIT").count(), 1);
        assert!(
            text.ends_with("$4\r\nw\r\n*\r\n*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n250\r\n"),
            "{text:?}"
        );
        let replies = |wait: i64| {
            vec![
                Ok(Value::Simple("OK".into())),
                Ok(Value::Bulk(Bytes::from_static(b"v"))),
                Ok(Value::Simple("OK".into())),
                Ok(Value::Int(wait)),
            ]
        };
        let folded = fold(&durability(), &planned, replies(1));
        assert_eq!(folded.len(), 3);
        assert!(matches!(&folded[0], Ok(Value::Simple(s)) if s == "OK"));
        assert!(matches!(&folded[1], Ok(Value::Bulk(_))));
        assert!(matches!(&folded[2], Ok(Value::Simple(s)) if s == "OK"));
        // Too few replicas: every write of the batch fails, the read keeps its reply.
        let folded = fold(&durability(), &planned, replies(0));
        for i in [0, 2] {
            let e = folded[i].as_ref().unwrap_err();
            assert_eq!(e.code(), ErrorCode::NotReplicated);
            assert!(e.message().contains("0 of the 1 replicas"), "{e}");
        }
        assert!(matches!(&folded[1], Ok(Value::Bulk(_))));
        // Nothing writes: nothing added.
        let reads = Encoded::one(&[b"GET".as_slice(), b"k"]);
        let planned = plan(&durability(), &t, &reads).unwrap();
        assert!(!planned.waits());
        assert_eq!(planned.encoded.bytes, reads.bytes);
    }

    #[test]
    fn the_options_are_checked_and_off_by_default() {
        let mut config = Config::from_url("redis+sentinel://127.0.0.1/m").unwrap();
        assert!(Durability::of(&config).is_none());
        assert_eq!(config.wait_timeout_ms, 1000);
        for (key, value) in [
            ("wait_replicas", "-1"),
            ("wait_replicas", "x"),
            ("wait_timeout_ms", "0"),
        ] {
            let e = config.set(key, value).unwrap_err();
            assert_eq!(e.code(), ErrorCode::Config);
            assert!(e.message().contains(key), "{e}");
        }
        let config =
            Config::from_url("redis+sentinel://127.0.0.1/m?wait_replicas=2&wait_timeout_ms=50")
                .unwrap();
        let d = Durability::of(&config).unwrap();
        assert_eq!(
            &d.wait_command()[..],
            b"*3\r\n$4\r\nWAIT\r\n$1\r\n2\r\n$2\r\n50\r\n"
        );
    }

    #[test]
    fn a_failed_write_keeps_its_own_error() {
        let planned = plan(
            &durability(),
            &table(),
            &Encoded::one(&[b"SET".as_slice(), b"k", b"v"]),
        )
        .unwrap();
        let readonly = Error::server("READONLY You can't write against a read only replica.");
        let folded = fold(
            &durability(),
            &planned,
            vec![Err(readonly), Ok(Value::Int(0))],
        );
        assert_eq!(
            folded[0].as_ref().unwrap_err().server_code(),
            Some("READONLY")
        );
        let folded = fold(
            &durability(),
            &planned,
            vec![
                Ok(Value::Simple("OK".into())),
                Err(Error::connection_lost("gone")),
            ],
        );
        assert_eq!(
            folded[0].as_ref().unwrap_err().code(),
            ErrorCode::NotReplicated
        );
    }
}
