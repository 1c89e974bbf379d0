//! [`FakeSentinel`]: a scriptable RESP2 server, for replies real sentinels cannot be made to send.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::resp::Reply;
use crate::TestkitError;

/// What the fake does with one received command.
#[derive(Debug, Clone)]
pub enum FakeReply {
    /// Write these bytes verbatim (may be malformed, partial, or several replies).
    Raw(Vec<u8>),
    /// Write this value, RESP2-encoded.
    Value(Reply),
    /// Never answer again on this connection; keep the socket open (later commands are still
    /// logged) until the peer closes it or the fake is dropped.
    Hang,
    /// Close the connection without answering.
    Close,
    /// Write these bytes, then close the connection.
    RawThenClose(Vec<u8>),
}

type Script = dyn Fn(&[Vec<u8>]) -> FakeReply + Send + Sync + 'static;

struct ConnEntry {
    writer: Mutex<TcpStream>,
    channels: Mutex<Vec<Vec<u8>>>,
    patterns: Mutex<Vec<Vec<u8>>>,
    hung: AtomicBool,
}

struct Shared {
    script: Box<Script>,
    commands: Mutex<Vec<Vec<String>>>,
    conns: Mutex<Vec<Arc<ConnEntry>>>,
    accepted: AtomicUsize,
    stop: AtomicBool,
}

/// A TCP server on `127.0.0.1:<port>` speaking RESP2, one thread per connection; every command
/// (RESP arrays or inline commands) is logged and handed to the script, whose [`FakeReply`] is
/// carried out. Dropping it closes the listener and every connection.
pub struct FakeSentinel {
    port: u16,
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn upper(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_uppercase()
}

impl FakeSentinel {
    /// Starts the server; `script` is called for every command (arguments as bytes), including
    /// HELLO, CLIENT SETNAME, AUTH, PING and SUBSCRIBE (see [`FakeSentinel::default_reply`]).
    pub fn start(
        script: impl Fn(&[Vec<u8>]) -> FakeReply + Send + Sync + 'static,
    ) -> Result<FakeSentinel, TestkitError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| TestkitError::io("binding fake sentinel", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| TestkitError::io("fake sentinel addr", e))?
            .port();
        let shared = Arc::new(Shared {
            script: Box::new(script),
            commands: Mutex::new(Vec::new()),
            conns: Mutex::new(Vec::new()),
            accepted: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let sh = shared.clone();
        std::thread::Builder::new()
            .name("sr-fake-sentinel".into())
            .spawn(move || accept_loop(listener, sh))
            .map_err(|e| TestkitError::io("spawning fake sentinel thread", e))?;
        Ok(FakeSentinel { port, shared })
    }

    /// A fake that accepts connections and never answers anything. Panics if no loopback port can
    /// be bound.
    pub fn hanging() -> FakeSentinel {
        FakeSentinel::start(|_| FakeReply::Hang).expect("starting hanging fake sentinel")
    }

    /// A fake that consistently reports `primary` for `service` (a sentinel that stays stale):
    /// GET-MASTER-ADDR-BY-NAME, MASTER ([`master_reply_named`] with flags `master`), MASTERS,
    /// empty SENTINELS/REPLICAS/SLAVES, ROLE, plus [`FakeSentinel::default_reply`]. Unknown service
    /// names get what a real sentinel sends; other commands `-ERR unknown command`.
    pub fn reporting(service: &str, primary: (&str, u16)) -> Result<FakeSentinel, TestkitError> {
        let svc = service.to_string();
        let (ip, port) = (primary.0.to_string(), primary.1);
        FakeSentinel::start(move |args| {
            if let Some(r) = FakeSentinel::default_reply(args) {
                return r;
            }
            let name = args.first().map(|a| upper(a)).unwrap_or_default();
            let sub = args.get(1).map(|a| upper(a)).unwrap_or_default();
            let target = args.get(2).map(|a| String::from_utf8_lossy(a).into_owned());
            let known = target.as_deref() == Some(svc.as_str());
            let reply = match (name.as_str(), sub.as_str()) {
                ("ROLE", _) => Reply::Array(vec![
                    Reply::bulk("sentinel"),
                    Reply::bulk_array(&[svc.as_str()]),
                ]),
                ("SENTINEL", "GET-MASTER-ADDR-BY-NAME") if known => {
                    Reply::bulk_array(&[ip.clone(), port.to_string()])
                }
                ("SENTINEL", "GET-MASTER-ADDR-BY-NAME") => Reply::Nil,
                ("SENTINEL", "MASTER") if known => master_reply_named(&svc, &ip, port, "master"),
                ("SENTINEL", "MASTERS") => {
                    Reply::Array(vec![master_reply_named(&svc, &ip, port, "master")])
                }
                ("SENTINEL", "SENTINELS" | "REPLICAS" | "SLAVES") if known => Reply::Array(vec![]),
                ("SENTINEL", _) if target.is_some() => {
                    Reply::Error("ERR No such master with that name".into())
                }
                _ => Reply::Error(format!(
                    "ERR unknown command '{}'",
                    String::from_utf8_lossy(args.first().map(Vec::as_slice).unwrap_or(b""))
                )),
            };
            FakeReply::Value(reply)
        })
    }

    /// Answers the connection chatter every client sends, or `None` for anything else:
    /// `HELLO` -> `-ERR unknown command 'HELLO'` (clients fall back to RESP2), `AUTH`,
    /// `CLIENT SETNAME|SETINFO`, `SELECT` -> `+OK`, `PING` -> `+PONG` (or the bulk argument),
    /// `SUBSCRIBE`/`PSUBSCRIBE`/`UNSUBSCRIBE`/`PUNSUBSCRIBE` -> one confirmation per channel (counts
    /// numbered within the command), `QUIT` -> `+OK` and close.
    pub fn default_reply(args: &[Vec<u8>]) -> Option<FakeReply> {
        let name = upper(args.first()?);
        let ok = || Some(FakeReply::Value(Reply::Simple("OK".into())));
        match name.as_str() {
            "HELLO" => Some(FakeReply::Value(Reply::Error(
                "ERR unknown command 'HELLO', with args beginning with: ".into(),
            ))),
            "AUTH" | "SELECT" => ok(),
            "CLIENT"
                if matches!(
                    args.get(1).map(|a| upper(a)).as_deref(),
                    Some("SETNAME" | "SETINFO")
                ) =>
            {
                ok()
            }
            "PING" => Some(FakeReply::Value(match args.get(1) {
                Some(m) => Reply::Bulk(m.clone()),
                None => Reply::Simple("PONG".into()),
            })),
            "QUIT" => Some(FakeReply::RawThenClose(b"+OK\r\n".to_vec())),
            "SUBSCRIBE" | "PSUBSCRIBE" | "UNSUBSCRIBE" | "PUNSUBSCRIBE" => {
                let kind = name.to_ascii_lowercase();
                let mut out = Vec::new();
                for (i, ch) in args[1..].iter().enumerate() {
                    let count = if kind.starts_with('u') || kind.starts_with("pu") {
                        (args.len() - 2 - i) as i64
                    } else {
                        i as i64 + 1
                    };
                    out.extend(
                        Reply::Array(vec![
                            Reply::bulk(&kind),
                            Reply::Bulk(ch.clone()),
                            Reply::Int(count),
                        ])
                        .encode(),
                    );
                }
                Some(FakeReply::Raw(out))
            }
            _ => None,
        }
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `"127.0.0.1:<port>"`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Every command received so far, in arrival order (arguments as lossy UTF-8).
    pub fn commands(&self) -> Vec<Vec<String>> {
        lock(&self.shared.commands).clone()
    }

    /// Number of connections accepted so far.
    pub fn connections_accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Number of connections currently open.
    pub fn connections_open(&self) -> usize {
        lock(&self.shared.conns).len()
    }

    /// Sends a pub/sub message to every open, non-hung connection subscribed to `channel`
    /// (`message`) or to a matching pattern (`pmessage`; `*` and `?` globs); returns how many got it.
    pub fn publish(&self, channel: &str, payload: &str) -> usize {
        let conns: Vec<Arc<ConnEntry>> = lock(&self.shared.conns).clone();
        let mut n = 0;
        for c in conns.iter().filter(|c| !c.hung.load(Ordering::SeqCst)) {
            let mut out = Vec::new();
            if lock(&c.channels).iter().any(|ch| ch == channel.as_bytes()) {
                out.extend(Reply::bulk_array(&["message", channel, payload]).encode());
            }
            for p in lock(&c.patterns).iter() {
                if glob(p, channel.as_bytes()) {
                    out.extend(
                        Reply::Array(vec![
                            Reply::bulk("pmessage"),
                            Reply::Bulk(p.clone()),
                            Reply::bulk(channel),
                            Reply::bulk(payload),
                        ])
                        .encode(),
                    );
                }
            }
            if !out.is_empty() && lock(&c.writer).write_all(&out).is_ok() {
                n += 1;
            }
        }
        n
    }

    /// Closes every open connection (the listener stays up).
    pub fn drop_connections(&self) {
        for c in lock(&self.shared.conns).iter() {
            let _ = lock(&c.writer).shutdown(Shutdown::Both);
        }
    }
}

impl Drop for FakeSentinel {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.drop_connections();
        let _ = TcpStream::connect_timeout(
            &([127, 0, 0, 1], self.port).into(),
            Duration::from_millis(200),
        );
    }
}

fn glob(pat: &[u8], s: &[u8]) -> bool {
    match (pat.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => glob(&pat[1..], s) || (!s.is_empty() && glob(pat, &s[1..])),
        (Some(b'?'), Some(_)) => glob(&pat[1..], &s[1..]),
        (Some(a), Some(b)) if a == b => glob(&pat[1..], &s[1..]),
        _ => false,
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let Ok(writer) = stream.try_clone() else {
            continue;
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let entry = Arc::new(ConnEntry {
            writer: Mutex::new(writer),
            channels: Mutex::new(Vec::new()),
            patterns: Mutex::new(Vec::new()),
            hung: AtomicBool::new(false),
        });
        lock(&shared.conns).push(entry.clone());
        let sh = shared.clone();
        std::thread::spawn(move || {
            serve(stream, &entry, &sh);
            let _ = lock(&entry.writer).shutdown(Shutdown::Both);
            lock(&sh.conns).retain(|c| !Arc::ptr_eq(c, &entry));
        });
    }
}

/// Reads one command: a RESP array of bulk strings, or an inline command line. `None` at EOF or
/// on garbage.
fn read_command(r: &mut BufReader<TcpStream>) -> Option<Vec<Vec<u8>>> {
    loop {
        let mut line = Vec::new();
        if r.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        let trimmed = line.strip_suffix(b"\n").unwrap_or(&line);
        let trimmed = trimmed.strip_suffix(b"\r").unwrap_or(trimmed);
        if let Some(n) = trimmed.strip_prefix(b"*") {
            let n: usize = std::str::from_utf8(n).ok()?.parse().ok()?;
            let mut args = Vec::with_capacity(n.min(64));
            for _ in 0..n {
                let mut hdr = Vec::new();
                r.read_until(b'\n', &mut hdr).ok()?;
                let len: usize = std::str::from_utf8(hdr.strip_prefix(b"$")?)
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                let mut buf = vec![0u8; len + 2];
                r.read_exact(&mut buf).ok()?;
                buf.truncate(len);
                args.push(buf);
            }
            return Some(args);
        }
        let args: Vec<Vec<u8>> = trimmed
            .split(|b| b.is_ascii_whitespace())
            .filter(|a| !a.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        if !args.is_empty() {
            return Some(args);
        }
    }
}

fn serve(stream: TcpStream, entry: &ConnEntry, shared: &Shared) {
    let mut reader = BufReader::new(stream);
    while let Some(args) = read_command(&mut reader) {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        lock(&shared.commands).push(
            args.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect(),
        );
        if entry.hung.load(Ordering::SeqCst) {
            continue;
        }
        let name = upper(&args[0]);
        let rest = args[1..].to_vec();
        match name.as_str() {
            "SUBSCRIBE" => lock(&entry.channels).extend(rest),
            "PSUBSCRIBE" => lock(&entry.patterns).extend(rest),
            "UNSUBSCRIBE" if rest.is_empty() => lock(&entry.channels).clear(),
            "UNSUBSCRIBE" => lock(&entry.channels).retain(|c| !rest.contains(c)),
            "PUNSUBSCRIBE" if rest.is_empty() => lock(&entry.patterns).clear(),
            "PUNSUBSCRIBE" => lock(&entry.patterns).retain(|c| !rest.contains(c)),
            _ => {}
        }
        let write = |bytes: &[u8]| lock(&entry.writer).write_all(bytes).is_ok();
        match (shared.script)(&args) {
            FakeReply::Raw(b) => {
                if !write(&b) {
                    return;
                }
            }
            FakeReply::Value(v) => {
                if !write(&v.encode()) {
                    return;
                }
            }
            FakeReply::Hang => entry.hung.store(true, Ordering::SeqCst),
            FakeReply::Close => return,
            FakeReply::RawThenClose(b) => {
                write(&b);
                return;
            }
        }
    }
}

fn pairs(items: &[(&str, String)]) -> Reply {
    Reply::Array(
        items
            .iter()
            .flat_map(|(k, v)| [Reply::bulk(k), Reply::bulk(v)])
            .collect(),
    )
}

fn common_fields(ip: &str, port: u16, runid: &str, flags: &str) -> Vec<(&'static str, String)> {
    let mut f = vec![
        ("ip", ip.to_string()),
        ("port", port.to_string()),
        ("runid", runid.to_string()),
        ("flags", flags.to_string()),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "67".into()),
        ("last-ping-reply", "67".into()),
    ];
    if flags.split(',').any(|x| x == "s_down") {
        f.push(("s-down-time", "1523".into()));
    }
    if flags.split(',').any(|x| x == "o_down") {
        f.push(("o-down-time", "1402".into()));
    }
    f.push(("down-after-milliseconds", "1000".into()));
    f
}

/// A realistic Redis 7.0 `SENTINEL MASTER mymaster` reply (flat array of bulk-string pairs, in
/// Redis' field order) for a master at `ip:port` with `flags` (e.g. `"master"`,
/// `"master,s_down,o_down"`); 2 replicas, 2 other sentinels, quorum 2, config-epoch 0.
pub fn master_reply(ip: &str, port: u16, flags: &str) -> Reply {
    master_reply_named("mymaster", ip, port, flags)
}

/// [`master_reply`] with a chosen service name.
pub fn master_reply_named(name: &str, ip: &str, port: u16, flags: &str) -> Reply {
    let mut f = vec![("name", name.to_string())];
    f.extend(common_fields(
        ip,
        port,
        "e061d85cb36464b8fed270f655dfc1bc73f57c6d",
        flags,
    ));
    f.extend([
        ("info-refresh", "77".to_string()),
        ("role-reported", "master".into()),
        ("role-reported-time", "25084".into()),
        ("config-epoch", "0".into()),
        ("num-slaves", "2".into()),
        ("num-other-sentinels", "2".into()),
        ("quorum", "2".into()),
        ("failover-timeout", "3000".into()),
        ("parallel-syncs", "1".into()),
    ]);
    pairs(&f)
}

/// One realistic Redis 7.0 `SENTINEL REPLICAS` entry: a replica at `ip:port` with `flags` (e.g.
/// `"slave"`, `"slave,s_down,disconnected"`) replicating from `127.0.0.1:master_port`.
pub fn replica_reply(ip: &str, port: u16, flags: &str, master_port: u16) -> Reply {
    let mut f = vec![("name", format!("{ip}:{port}"))];
    f.extend(common_fields(
        ip,
        port,
        "9d4c2a1e0b3f5a6c7d8e9f00112233445566778a",
        flags,
    ));
    let down = flags.contains("s_down") || flags.contains("disconnected");
    f.extend([
        ("info-refresh", "77".to_string()),
        ("role-reported", "slave".into()),
        ("role-reported-time", "25080".into()),
        ("master-link-down-time", "0".into()),
        (
            "master-link-status",
            if down { "err" } else { "ok" }.to_string(),
        ),
        ("master-host", "127.0.0.1".into()),
        ("master-port", master_port.to_string()),
        ("slave-priority", "100".into()),
        ("slave-repl-offset", "12345".into()),
        ("replica-announced", "1".into()),
    ]);
    pairs(&f)
}

/// One realistic Redis 7.0 `SENTINEL SENTINELS` entry for a sentinel at `ip:port` with `runid`.
pub fn sentinel_reply(ip: &str, port: u16, runid: &str) -> Reply {
    let mut f = vec![("name", runid.to_string())];
    f.extend(common_fields(ip, port, runid, "sentinel"));
    f.extend([
        ("last-hello-message", "45".to_string()),
        ("voted-leader", "?".into()),
        ("voted-leader-epoch", "0".into()),
    ]);
    pairs(&f)
}
