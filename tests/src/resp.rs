//! A tiny synchronous RESP2 client: commands are sent as arrays of bulk strings, replies are parsed
//! into [`Reply`] (nested arrays and nulls included). Used to drive real servers and by the fakes.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::TestkitError;

/// One RESP2 value, as a server sends it (or as a fake sends it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Null bulk string (`$-1`) or null array (`*-1`).
    Nil,
    /// Integer (`:`).
    Int(i64),
    /// Bulk string (`$`), raw bytes.
    Bulk(Vec<u8>),
    /// Simple string (`+`).
    Simple(String),
    /// Error (`-`), without the leading dash.
    Error(String),
    /// Array (`*`), possibly nested.
    Array(Vec<Reply>),
}

impl Reply {
    /// Bulk string from text.
    pub fn bulk(s: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(s.as_ref().to_vec())
    }

    /// Array of bulk strings from text items.
    pub fn bulk_array<S: AsRef<[u8]>>(items: &[S]) -> Reply {
        Reply::Array(items.iter().map(Reply::bulk).collect())
    }

    /// Text of a bulk or simple string (lossy UTF-8), `None` for other kinds.
    pub fn as_str(&self) -> Option<String> {
        match self {
            Reply::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Reply::Simple(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// Integer value of an `Int`, or of a bulk/simple string holding a decimal integer.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            Reply::Bulk(_) | Reply::Simple(_) => self.as_str()?.trim().parse().ok(),
            _ => None,
        }
    }

    /// The items of an array, `None` for other kinds.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A flat array of name/value pairs (as `SENTINEL MASTER` returns) as a map of text to text.
    /// Values that are not strings or integers are skipped. `None` if this is not an array.
    pub fn to_map(&self) -> Option<HashMap<String, String>> {
        let items = self.as_array()?;
        let mut map = HashMap::new();
        for pair in items.chunks(2) {
            if let [k, v] = pair {
                let value = match v {
                    Reply::Int(i) => Some(i.to_string()),
                    other => other.as_str(),
                };
                if let (Some(k), Some(v)) = (k.as_str(), value) {
                    map.insert(k, v);
                }
            }
        }
        Some(map)
    }

    /// True for `Reply::Error`.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// RESP2 encoding of this value.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
            Reply::Bulk(b) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Simple(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
            Reply::Error(s) => out.extend_from_slice(format!("-{s}\r\n").as_bytes()),
            Reply::Array(items) => {
                out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
                for item in items {
                    item.encode_into(out);
                }
            }
        }
    }
}

/// Encodes a command as a RESP array of bulk strings.
pub fn encode_command<S: AsRef<[u8]>>(args: &[S]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn proto(msg: impl Into<String>) -> TestkitError {
    TestkitError::Protocol(msg.into())
}

fn read_line<R: BufRead>(r: &mut R) -> Result<Vec<u8>, TestkitError> {
    let mut line = Vec::new();
    let n = r
        .read_until(b'\n', &mut line)
        .map_err(|e| TestkitError::io("reading reply", e))?;
    if n == 0 {
        return Err(TestkitError::io(
            "reading reply",
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"),
        ));
    }
    if !line.ends_with(b"\r\n") {
        return Err(proto("line without CRLF"));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn parse_len(s: &[u8]) -> Result<i64, TestkitError> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| proto(format!("bad length {:?}", String::from_utf8_lossy(s))))
}

/// Reads one RESP2 value from `r` (blocking, subject to the stream's read timeout).
pub fn read_reply<R: BufRead>(r: &mut R) -> Result<Reply, TestkitError> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_first().ok_or_else(|| proto("empty line"))?;
    match kind {
        b'+' => Ok(Reply::Simple(String::from_utf8_lossy(rest).into_owned())),
        b'-' => Ok(Reply::Error(String::from_utf8_lossy(rest).into_owned())),
        b':' => Ok(Reply::Int(parse_len(rest)?)),
        b'$' => {
            let len = parse_len(rest)?;
            if len < 0 {
                return Ok(Reply::Nil);
            }
            let mut buf = vec![0u8; len as usize + 2];
            r.read_exact(&mut buf)
                .map_err(|e| TestkitError::io("reading bulk string", e))?;
            if !buf.ends_with(b"\r\n") {
                return Err(proto("bulk string without CRLF"));
            }
            buf.truncate(len as usize);
            Ok(Reply::Bulk(buf))
        }
        b'*' => {
            let len = parse_len(rest)?;
            if len < 0 {
                return Ok(Reply::Nil);
            }
            let mut items = Vec::with_capacity(len.min(1024) as usize);
            for _ in 0..len {
                items.push(read_reply(r)?);
            }
            Ok(Reply::Array(items))
        }
        other => Err(proto(format!("unexpected type byte {:?}", *other as char))),
    }
}

/// A synchronous RESP2 connection with read/write timeouts.
pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    /// Connects to `addr` (e.g. `"127.0.0.1:6379"`); `timeout` bounds the connect and every later
    /// read and write.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Conn, TestkitError> {
        let sa: SocketAddr = addr
            .to_socket_addrs()
            .map_err(|e| TestkitError::io(format!("resolving {addr}"), e))?
            .next()
            .ok_or_else(|| TestkitError::Setup(format!("no address for {addr}")))?;
        let stream = TcpStream::connect_timeout(&sa, timeout)
            .map_err(|e| TestkitError::io(format!("connecting to {addr}"), e))?;
        stream.set_nodelay(true).ok();
        Conn::from_stream(stream, timeout)
    }

    /// Wraps an already connected stream, setting its read/write timeouts to `timeout`.
    pub fn from_stream(stream: TcpStream, timeout: Duration) -> Result<Conn, TestkitError> {
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|_| stream.set_write_timeout(Some(timeout)))
            .map_err(|e| TestkitError::io("setting timeouts", e))?;
        let writer = stream
            .try_clone()
            .map_err(|e| TestkitError::io("cloning stream", e))?;
        Ok(Conn {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Sends one command without reading a reply.
    pub fn send<S: AsRef<[u8]>>(&mut self, args: &[S]) -> Result<(), TestkitError> {
        self.writer
            .write_all(&encode_command(args))
            .map_err(|e| TestkitError::io("sending command", e))
    }

    /// Reads the next reply (e.g. a pub/sub message after SUBSCRIBE).
    pub fn read(&mut self) -> Result<Reply, TestkitError> {
        read_reply(&mut self.reader)
    }

    /// Sends one command and reads its reply; a server error comes back as `Ok(Reply::Error)`.
    pub fn call<S: AsRef<[u8]>>(&mut self, args: &[S]) -> Result<Reply, TestkitError> {
        self.send(args)?;
        self.read()
    }

    /// Changes the read timeout (`None` blocks forever).
    pub fn set_read_timeout(&mut self, t: Option<Duration>) -> Result<(), TestkitError> {
        self.writer
            .set_read_timeout(t)
            .map_err(|e| TestkitError::io("setting read timeout", e))
    }

    /// The underlying stream (e.g. to shut it down).
    pub fn stream(&self) -> &TcpStream {
        &self.writer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_nested() {
        let v = Reply::Array(vec![
            Reply::Int(-3),
            Reply::Nil,
            Reply::Simple("OK".into()),
            Reply::Error("ERR x".into()),
            Reply::Array(vec![Reply::bulk("a\r\nb"), Reply::Array(vec![])]),
        ]);
        let bytes = v.encode();
        let parsed = read_reply(&mut &bytes[..]).unwrap();
        assert_eq!(parsed, v);
        let nil_array = read_reply(&mut &b"*-1\r\n"[..]).unwrap();
        assert_eq!(nil_array, Reply::Nil);
        assert!(read_reply(&mut &b"?x\r\n"[..]).is_err());
        assert!(read_reply(&mut &b"$5\r\nab"[..]).is_err());
    }

    #[test]
    fn to_map_pairs() {
        let v = Reply::Array(vec![
            Reply::bulk("port"),
            Reply::bulk("6379"),
            Reply::bulk("n"),
            Reply::Int(2),
        ]);
        let m = v.to_map().unwrap();
        assert_eq!(m["port"], "6379");
        assert_eq!(m["n"], "2");
    }
}
