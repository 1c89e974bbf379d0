//! [`SlowDns`]: a DNS server for tests whose answers take as long as you say.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::TestkitError;

const QTYPE_A: u16 = 1;
const QTYPE_AAAA: u16 = 28;
const RCODE_NXDOMAIN: u8 = 3;

#[derive(Clone)]
struct Record {
    name: String,
    ip: IpAddr,
    delay: Duration,
}

struct State {
    records: Mutex<Vec<Record>>,
    log: Mutex<Vec<(String, u16, Instant)>>,
    ttl: Mutex<u32>,
    /// Queries are logged but never answered.
    dropping: AtomicBool,
    stop: AtomicBool,
}

/// A DNS server on `127.0.0.1:<port>` (UDP, and TCP on the same port) in background threads.
/// `A` queries get the name's IPv4 records, `AAAA` its IPv6 records; a known name without records of
/// the asked type gets an empty NOERROR answer; both after the name's delay. Unknown names get
/// NXDOMAIN at once. Answers have TTL 0 unless [`SlowDns::set_ttl`] says otherwise. A delayed answer
/// never holds up others (each is sent from its own thread). [`SlowDns::set_dropping`] turns it
/// into a server that logs every query and answers none. Stops when dropped.
pub struct SlowDns {
    addr: SocketAddr,
    state: Arc<State>,
}

fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl SlowDns {
    /// Starts the server with `(name, address, delay before answering)` records; a name may have
    /// several records (IPv4 and IPv6, or several of one family). The delay of a name is that of
    /// its first record.
    pub fn start(records: &[(&str, IpAddr, Duration)]) -> Result<SlowDns, TestkitError> {
        let state = Arc::new(State {
            records: Mutex::new(
                records
                    .iter()
                    .map(|(n, ip, d)| Record {
                        name: normalize(n),
                        ip: *ip,
                        delay: *d,
                    })
                    .collect(),
            ),
            log: Mutex::new(Vec::new()),
            ttl: Mutex::new(0),
            dropping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let mut last_err = None;
        for _ in 0..10 {
            let udp = UdpSocket::bind("127.0.0.1:0")
                .map_err(|e| TestkitError::io("binding DNS UDP socket", e))?;
            let addr = udp
                .local_addr()
                .map_err(|e| TestkitError::io("DNS local addr", e))?;
            let tcp = match TcpListener::bind(addr) {
                Ok(t) => t,
                Err(e) => {
                    last_err = Some(TestkitError::io("binding DNS TCP listener", e));
                    continue;
                }
            };
            udp.set_read_timeout(Some(Duration::from_millis(50)))
                .map_err(|e| TestkitError::io("DNS socket timeout", e))?;
            let st = state.clone();
            std::thread::Builder::new()
                .name("sr-slowdns-udp".into())
                .spawn(move || udp_loop(udp, st))
                .map_err(|e| TestkitError::io("spawning DNS thread", e))?;
            let st = state.clone();
            std::thread::Builder::new()
                .name("sr-slowdns-tcp".into())
                .spawn(move || tcp_loop(tcp, st))
                .map_err(|e| TestkitError::io("spawning DNS thread", e))?;
            return Ok(SlowDns { addr, state });
        }
        Err(last_err.unwrap_or_else(|| TestkitError::Setup("DNS bind".into())))
    }

    /// The server's address (UDP and TCP).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every query received so far: lower-case name without trailing dot, qtype, arrival time.
    pub fn query_log(&self) -> Vec<(String, u16, Instant)> {
        self.state
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Adds a record (takes effect for the next query).
    pub fn add_record(&self, name: &str, ip: IpAddr, delay: Duration) {
        self.state
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Record {
                name: normalize(name),
                ip,
                delay,
            });
    }

    /// Changes the delay of every record of `name`.
    pub fn set_delay(&self, name: &str, delay: Duration) {
        let name = normalize(name);
        for r in self
            .state
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .filter(|r| r.name == name)
        {
            r.delay = delay;
        }
    }

    /// Removes every record of `name` (it becomes NXDOMAIN).
    pub fn remove(&self, name: &str) {
        let name = normalize(name);
        self.state
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|r| r.name != name);
    }

    /// Starts a server that logs every query and answers none, as a DNS server that drops
    /// queries (or a firewall that drops its packets) looks to a client.
    pub fn start_dropping() -> Result<SlowDns, TestkitError> {
        let dns = SlowDns::start(&[])?;
        dns.set_dropping(true);
        Ok(dns)
    }

    /// While `on`, every query is logged and none is answered (records and delays are kept for
    /// when it is turned off again).
    pub fn set_dropping(&self, on: bool) {
        self.state.dropping.store(on, Ordering::SeqCst);
    }

    /// The queries received so far for `name` (any case, with or without the final dot), as
    /// (qtype, arrival time).
    pub fn queries_for(&self, name: &str) -> Vec<(u16, Instant)> {
        let name = normalize(name);
        self.query_log()
            .into_iter()
            .filter(|(n, _, _)| *n == name)
            .map(|(_, t, at)| (t, at))
            .collect()
    }

    /// Sets the TTL of answers (default 0, so resolvers do not cache).
    pub fn set_ttl(&self, ttl: u32) {
        *self.state.ttl.lock().unwrap_or_else(|e| e.into_inner()) = ttl;
    }
}

impl Drop for SlowDns {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the TCP accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// Parsed question: (lower-case name, qtype, end offset of the question section).
fn parse_question(msg: &[u8]) -> Option<(String, u16, usize)> {
    if msg.len() < 12 || u16::from_be_bytes([msg[4], msg[5]]) < 1 {
        return None;
    }
    let mut i = 12;
    let mut labels = Vec::new();
    loop {
        let len = *msg.get(i)? as usize;
        i += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None; // compression pointers do not occur in queries we accept
        }
        labels.push(String::from_utf8_lossy(msg.get(i..i + len)?).to_ascii_lowercase());
        i += len;
    }
    let qtype = u16::from_be_bytes([*msg.get(i)?, *msg.get(i + 1)?]);
    msg.get(i + 3)?;
    Some((labels.join("."), qtype, i + 4))
}

/// Builds the answer for `query`; returns (delay, response), or `None` for garbage and while
/// queries are dropped.
fn answer(query: &[u8], state: &State) -> Option<(Duration, Vec<u8>)> {
    let (name, qtype, qend) = parse_question(query)?;
    state
        .log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((name.clone(), qtype, Instant::now()));
    if state.dropping.load(Ordering::SeqCst) {
        return None;
    }
    let records: Vec<Record> = state
        .records
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|r| r.name == name)
        .cloned()
        .collect();
    let ttl = *state.ttl.lock().unwrap_or_else(|e| e.into_inner());
    let (delay, rcode) = match records.first() {
        Some(r) => (r.delay, 0),
        None => (Duration::ZERO, RCODE_NXDOMAIN),
    };
    let matching: Vec<&IpAddr> = records
        .iter()
        .map(|r| &r.ip)
        .filter(|ip| match qtype {
            QTYPE_A => ip.is_ipv4(),
            QTYPE_AAAA => ip.is_ipv6(),
            _ => false,
        })
        .collect();
    let mut out = Vec::with_capacity(qend + 32 * matching.len());
    out.extend_from_slice(&query[0..2]); // id
    let opcode_rd = query[2] & 0x79; // opcode + RD
    out.push(0x80 | 0x04 | opcode_rd); // QR, AA
    out.push(0x80 | rcode); // RA, rcode
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(matching.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&query[12..qend]);
    for ip in matching {
        out.extend_from_slice(&[0xC0, 0x0C]);
        let (t, data): (u16, Vec<u8>) = match ip {
            IpAddr::V4(v4) => (QTYPE_A, v4.octets().to_vec()),
            IpAddr::V6(v6) => (QTYPE_AAAA, v6.octets().to_vec()),
        };
        out.extend_from_slice(&t.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes()); // IN
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(&data);
    }
    Some((delay, out))
}

fn udp_loop(sock: UdpSocket, state: Arc<State>) {
    let sock = Arc::new(sock);
    let mut buf = [0u8; 4096];
    while !state.stop.load(Ordering::SeqCst) {
        let Ok((n, peer)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let Some((delay, resp)) = answer(&buf[..n], &state) else {
            continue;
        };
        if delay.is_zero() {
            let _ = sock.send_to(&resp, peer);
        } else {
            let sock = sock.clone();
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let _ = sock.send_to(&resp, peer);
            });
        }
    }
}

fn tcp_loop(listener: TcpListener, state: Arc<State>) {
    for stream in listener.incoming() {
        if state.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let st = state.clone();
        std::thread::spawn(move || tcp_conn(stream, st));
    }
}

fn tcp_conn(mut stream: TcpStream, state: Arc<State>) {
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(Mutex::new(writer));
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    loop {
        if state.stop.load(Ordering::SeqCst) {
            return;
        }
        let mut len = [0u8; 2];
        match stream.read_exact(&mut len) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        if stream.read_exact(&mut msg).is_err() {
            return;
        }
        let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
        let Some((delay, resp)) = answer(&msg, &state) else {
            continue;
        };
        let w = writer.clone();
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            let mut framed = (resp.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&resp);
            let _ = w
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .write_all(&framed);
        });
    }
}

/// Encodes a standard recursive query for `name`/`qtype` with transaction id `id` (for tests that
/// talk to [`SlowDns`] directly).
pub fn encode_query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in normalize(name).split('.').filter(|l| !l.is_empty()) {
        q.push(label.len().min(63) as u8);
        q.extend_from_slice(&label.as_bytes()[..label.len().min(63)]);
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    q
}

/// Decodes a response to a query from [`encode_query`]: (id, rcode, addresses in the answer).
pub fn decode_response(msg: &[u8]) -> Option<(u16, u8, Vec<IpAddr>)> {
    let (_, _, mut i) = parse_question(msg)?;
    let id = u16::from_be_bytes([msg[0], msg[1]]);
    let rcode = msg[3] & 0x0F;
    let ancount = u16::from_be_bytes([msg[6], msg[7]]);
    let mut ips = Vec::new();
    for _ in 0..ancount {
        // name: pointer or labels
        loop {
            let b = *msg.get(i)?;
            if b & 0xC0 == 0xC0 {
                i += 2;
                break;
            }
            i += 1 + b as usize;
            if b == 0 {
                break;
            }
        }
        let t = u16::from_be_bytes([*msg.get(i)?, *msg.get(i + 1)?]);
        let rdlen = u16::from_be_bytes([*msg.get(i + 8)?, *msg.get(i + 9)?]) as usize;
        let data = msg.get(i + 10..i + 10 + rdlen)?;
        match (t, rdlen) {
            (QTYPE_A, 4) => ips.push(IpAddr::from(<[u8; 4]>::try_from(data).ok()?)),
            (QTYPE_AAAA, 16) => ips.push(IpAddr::from(<[u8; 16]>::try_from(data).ok()?)),
            _ => {}
        }
        i += 10 + rdlen;
    }
    Some((id, rcode, ips))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(dns: &SlowDns, id: u16, name: &str) -> Option<(u16, u8, Vec<IpAddr>)> {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        sock.send_to(&encode_query(id, name, QTYPE_A), dns.addr())
            .unwrap();
        let mut buf = [0u8; 512];
        let (n, _) = sock.recv_from(&mut buf).ok()?;
        decode_response(&buf[..n])
    }

    #[test]
    fn a_dropping_server_logs_queries_and_answers_none() {
        let dns = SlowDns::start_dropping().unwrap();
        dns.add_record("known.test", "10.0.0.1".parse().unwrap(), Duration::ZERO);
        assert_eq!(ask(&dns, 7, "known.test"), None, "dropped");
        assert_eq!(ask(&dns, 8, "unknown.test"), None, "dropped");
        assert_eq!(dns.queries_for("KNOWN.test.").len(), 1);
        assert_eq!(dns.queries_for("unknown.test")[0].0, QTYPE_A);
        dns.set_dropping(false);
        assert_eq!(
            ask(&dns, 9, "known.test"),
            Some((9, 0, vec!["10.0.0.1".parse().unwrap()]))
        );
        assert_eq!(dns.queries_for("known.test").len(), 2);
    }
}
