//! A loopback TCP fault proxy: one listener forwarding to one target, with faults that can be
//! changed while connections are open — added latency, a blackhole (nothing forwarded, in either
//! direction, until healed) and a reset (every affected connection closed with an RST).
//!
//! Faults apply to the connections the proxy's [`Affects`] selects, so one link can carry a
//! client's traffic and the sentinels' and replicas' traffic to the same node, and hurt only the
//! client's: [`Affects::FirstCommand`] classifies a connection by the name of the first command
//! it sends (`HELLO` for sentinel-recovery's clients; sentinels start with `CLIENT SETNAME` or
//! `PING`, replicas with `PING`).
//!
//! A blackhole holds bytes rather than dropping them (TCP would retransmit them once the path
//! heals), so a healed link carries an intact byte stream. Every thread the proxy starts ends
//! when it is dropped; the sockets of its connections are closed then.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::TestkitError;

/// How often blocked proxy threads look at the fault state and the stop flag.
const TICK: Duration = Duration::from_millis(20);
/// How long a new connection may take to send the bytes that classify it.
const CLASSIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// Which connections a [`FaultProxy`]'s faults apply to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Affects {
    /// Every connection.
    All,
    /// Connections whose first command has this name (ASCII case-insensitive); others pass
    /// through untouched whatever the faults.
    FirstCommand(String),
}

/// The faults in force on a link. `Default` is a healthy link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkFaults {
    /// Added to every chunk of bytes, in each direction.
    pub latency: Duration,
    /// Nothing is forwarded (bytes are held) and no new upstream connection is made.
    pub blackhole: bool,
    /// Packet loss as a TCP stream feels it: this percentage of chunks (0-100) is held for one
    /// more [`RETRANSMIT_DELAY`] (the retransmission of a dropped segment), and everything
    /// behind it on the same connection waits too. Bytes are never dropped: TCP would resend them.
    pub loss_percent: u8,
}

/// What one lost segment costs a TCP stream on Linux: the minimum retransmission timeout.
pub const RETRANSMIT_DELAY: Duration = Duration::from_millis(200);

struct Shared {
    target: SocketAddr,
    /// The namespace upstream connections are made in (the test's own when `None`).
    netns: Option<String>,
    affects: Affects,
    faults: Mutex<LinkFaults>,
    stop: AtomicBool,
    conns: Mutex<Vec<Arc<ProxiedConn>>>,
    accepted: AtomicU64,
    resets: AtomicU64,
}

struct ProxiedConn {
    affected: bool,
    dead: AtomicBool,
    sockets: Mutex<Vec<TcpStream>>,
}

impl ProxiedConn {
    fn kill(&self, rst: bool) {
        self.dead.store(true, Ordering::SeqCst);
        let sockets = std::mem::take(&mut *self.sockets.lock().unwrap_or_else(|e| e.into_inner()));
        for s in &sockets {
            if rst {
                set_linger_zero(s);
            }
            // Wakes the pump threads; the sockets close (with an RST after linger 0) when the
            // last clone is dropped: these here now, the pumps' own within a tick.
            let _ = s.shutdown(Shutdown::Read);
        }
    }
}

/// One proxied link: `127.0.0.1:port()` forwards to the target. Dropping it stops the listener
/// and closes every connection it carries.
pub struct FaultProxy {
    shared: Arc<Shared>,
    port: u16,
    accept_thread: Option<thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards every connection to `target`, healthy until
    /// told otherwise.
    pub fn start(target: SocketAddr, affects: Affects) -> Result<FaultProxy, TestkitError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| TestkitError::io("binding the fault proxy", e))?;
        Self::serve_listener(listener, target, affects, None)
    }

    /// Listens on `listen` inside network namespace `netns` and forwards every connection to
    /// `target`, also reached from inside `netns` (see [`crate::net`]).
    pub fn start_in_netns(
        netns: &str,
        listen: SocketAddr,
        target: SocketAddr,
        affects: Affects,
    ) -> Result<FaultProxy, TestkitError> {
        let listener = crate::netns::in_netns(netns, move || TcpListener::bind(listen))
            .and_then(|r| r)
            .map_err(|e| {
                TestkitError::io(format!("binding the fault proxy on {listen} in {netns}"), e)
            })?;
        Self::serve_listener(listener, target, affects, Some(netns.to_string()))
    }

    fn serve_listener(
        listener: TcpListener,
        target: SocketAddr,
        affects: Affects,
        netns: Option<String>,
    ) -> Result<FaultProxy, TestkitError> {
        listener
            .set_nonblocking(true)
            .map_err(|e| TestkitError::io("setting the proxy listener non-blocking", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| TestkitError::io("reading the proxy's port", e))?
            .port();
        let shared = Arc::new(Shared {
            target,
            netns,
            affects,
            faults: Mutex::new(LinkFaults::default()),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            accepted: AtomicU64::new(0),
            resets: AtomicU64::new(0),
        });
        let s = shared.clone();
        let accept_thread = thread::Builder::new()
            .name(format!("sr-proxy-{port}"))
            .spawn(move || accept_loop(listener, s))
            .map_err(|e| TestkitError::io("spawning the proxy thread", e))?;
        Ok(FaultProxy {
            shared,
            port,
            accept_thread: Some(accept_thread),
        })
    }

    /// The loopback port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where connections are forwarded.
    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// The faults in force now.
    pub fn faults(&self) -> LinkFaults {
        *self.shared.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the faults in force (for open connections too, from their next chunk on).
    pub fn set_faults(&self, faults: LinkFaults) {
        *self.shared.faults.lock().unwrap_or_else(|e| e.into_inner()) = faults;
    }

    /// Adds `latency` to every chunk of the affected connections.
    pub fn set_latency(&self, latency: Duration) {
        let mut f = self.faults();
        f.latency = latency;
        self.set_faults(f);
    }

    /// Starts (`true`) or ends a blackhole on the affected connections.
    pub fn set_blackhole(&self, on: bool) {
        let mut f = self.faults();
        f.blackhole = on;
        self.set_faults(f);
    }

    /// Removes every fault.
    pub fn heal(&self) {
        self.set_faults(LinkFaults::default());
    }

    /// Closes every affected open connection with an RST (both sides); returns how many.
    pub fn reset(&self) -> usize {
        let conns = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        for c in conns.iter().filter(|c| c.affected) {
            if !c.dead.load(Ordering::SeqCst) {
                c.kill(true);
                n += 1;
            }
        }
        self.shared.resets.fetch_add(n as u64, Ordering::SeqCst);
        n
    }

    /// Open connections: (affected by faults, total).
    pub fn open_connections(&self) -> (usize, usize) {
        let conns = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        let live: Vec<_> = conns
            .iter()
            .filter(|c| !c.dead.load(Ordering::SeqCst))
            .collect();
        (live.iter().filter(|c| c.affected).count(), live.len())
    }

    /// Connections accepted since the start.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for c in self
            .shared
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            c.kill(false);
        }
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut handlers = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                let s = shared.clone();
                if let Ok(h) = thread::Builder::new()
                    .name("sr-proxy-conn".into())
                    .spawn(move || serve(client, s))
                {
                    handlers.push(h);
                }
                handlers.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(TICK),
            Err(_) => thread::sleep(TICK),
        }
    }
    for h in handlers {
        let _ = h.join();
    }
}

/// One accepted connection: classify it by its first bytes, connect upstream (after any
/// blackhole, if affected) and pump both directions until either side closes or it is reset.
fn serve(client: TcpStream, shared: Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(TICK));
    let first = match read_first_command(&client, &shared) {
        Some(b) => b,
        None => return,
    };
    let affected = match &shared.affects {
        Affects::All => true,
        Affects::FirstCommand(name) => {
            first_command_name(&first).is_some_and(|n| n.eq_ignore_ascii_case(name.as_bytes()))
        }
    };
    let conn = Arc::new(ProxiedConn {
        affected,
        dead: AtomicBool::new(false),
        sockets: Mutex::new(Vec::new()),
    });
    if let Ok(c) = client.try_clone() {
        conn.sockets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(c);
    }
    {
        let mut conns = shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.retain(|c| !c.dead.load(Ordering::SeqCst));
        conns.push(conn.clone());
    }
    // A blackholed path: the connection is accepted (the kernel does that) but goes nowhere.
    while affected && current(&shared).blackhole && alive(&shared, &conn) {
        thread::sleep(TICK);
    }
    if !alive(&shared, &conn) {
        return;
    }
    let upstream = crate::netns::dial(
        shared.netns.as_deref(),
        shared.target,
        Duration::from_secs(2),
    );
    let Ok(server) = upstream else {
        conn.kill(true);
        return;
    };
    let _ = server.set_nodelay(true);
    let _ = server.set_read_timeout(Some(TICK));
    if let Ok(s) = server.try_clone() {
        conn.sockets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(s);
    }
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        conn.kill(true);
        return;
    };
    let up = {
        let (shared, conn) = (shared.clone(), conn.clone());
        thread::spawn(move || pump(client, server, Some(first), shared, conn))
    };
    pump(s2, c2, None, shared.clone(), conn.clone());
    let _ = up.join();
    conn.kill(false);
}

fn current(shared: &Shared) -> LinkFaults {
    *shared.faults.lock().unwrap_or_else(|e| e.into_inner())
}

fn alive(shared: &Shared, conn: &ProxiedConn) -> bool {
    !shared.stop.load(Ordering::SeqCst) && !conn.dead.load(Ordering::SeqCst)
}

/// Reads until the first command's name is complete (or 256 bytes, or EOF); `None` when the
/// client left or said nothing in time.
fn read_first_command(mut client: &TcpStream, shared: &Shared) -> Option<Vec<u8>> {
    let start = Instant::now();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while start.elapsed() < CLASSIFY_TIMEOUT && !shared.stop.load(Ordering::SeqCst) {
        match client.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if first_command_name(&buf).is_some() || buf.len() >= 256 || buf[0] != b'*' {
                    return Some(buf);
                }
            }
            Err(e) if is_timeout(&e) => {}
            Err(_) => return None,
        }
    }
    (!buf.is_empty()).then_some(buf)
}

/// The name of the first command in `buf` when it is a complete RESP array head and first bulk
/// string (`*N\r\n$L\r\nNAME\r\n`), or an inline command's first word.
fn first_command_name(buf: &[u8]) -> Option<&[u8]> {
    if buf.first() != Some(&b'*') {
        let end = buf.iter().position(|b| *b == b' ' || *b == b'\r')?;
        return Some(&buf[..end]);
    }
    let line1 = buf.windows(2).position(|w| w == b"\r\n")?;
    let rest = &buf[line1 + 2..];
    if rest.first() != Some(&b'$') {
        return None;
    }
    let line2 = rest.windows(2).position(|w| w == b"\r\n")?;
    let len: usize = std::str::from_utf8(&rest[1..line2]).ok()?.parse().ok()?;
    let body = &rest[line2 + 2..];
    (body.len() >= len).then(|| &body[..len])
}

/// Copies `from` to `to` (after `first`, the bytes already read), applying the link's faults
/// to affected connections: a reader thread stamps each chunk, this thread delivers it once
/// its latency has passed and no blackhole is in force.
fn pump(
    from: TcpStream,
    mut to: TcpStream,
    first: Option<Vec<u8>>,
    shared: Arc<Shared>,
    conn: Arc<ProxiedConn>,
) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    if let Some(b) = first {
        let _ = tx.send((Instant::now(), b));
    }
    let reader = {
        let (shared, conn) = (shared.clone(), conn.clone());
        thread::spawn(move || {
            let mut from = from;
            let mut chunk = vec![0u8; 16 * 1024];
            while alive(&shared, &conn) {
                match from.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        if tx.send((Instant::now(), chunk[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                    Err(e) if is_timeout(&e) => {}
                    Err(_) => break,
                }
            }
        })
    };
    let mut dice = Dice::seeded();
    'deliver: loop {
        let (stamp, bytes) = match rx.recv_timeout(TICK) {
            Ok(item) => item,
            Err(RecvTimeoutError::Timeout) if alive(&shared, &conn) => continue,
            Err(_) => break,
        };
        // Whether this chunk is "lost" once is decided when it arrives, not on every look.
        let loss = if conn.affected {
            current(&shared).loss_percent
        } else {
            0
        };
        let stamp = if dice.percent() < u32::from(loss) {
            stamp + RETRANSMIT_DELAY
        } else {
            stamp
        };
        loop {
            if !alive(&shared, &conn) {
                break 'deliver;
            }
            let f = if conn.affected {
                current(&shared)
            } else {
                LinkFaults::default()
            };
            let due = stamp + f.latency;
            let now = Instant::now();
            if !f.blackhole && now >= due {
                break;
            }
            thread::sleep(if f.blackhole {
                TICK
            } else {
                (due - now).min(TICK)
            });
        }
        if to.write_all(&bytes).is_err() {
            break;
        }
    }
    // The peer closed (or the link was reset): pass the close on.
    if !conn.dead.load(Ordering::SeqCst) {
        let _ = to.shutdown(Shutdown::Write);
    }
    let _ = reader.join();
}

/// A small xorshift generator for the loss draws (seeded per connection direction).
struct Dice(u64);

impl Dice {
    fn seeded() -> Dice {
        static SEQ: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Dice((t ^ SEQ.fetch_add(0x9E37_79B9, Ordering::Relaxed)) | 1)
    }

    /// 0..100, uniform enough for fault injection.
    fn percent(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 100) as u32
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// `SO_LINGER {on, 0}`: closing the socket sends an RST instead of a FIN.
fn set_linger_zero(s: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd owned by `s`, and a properly sized `linger` value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::first_command_name;

    #[test]
    fn first_command_name_reads_resp_and_inline_heads() {
        assert_eq!(
            first_command_name(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"),
            Some(&b"HELLO"[..])
        );
        assert_eq!(first_command_name(b"*2\r\n$5\r\nHEL"), None);
        assert_eq!(first_command_name(b"PING\r\n"), Some(&b"PING"[..]));
    }
}
