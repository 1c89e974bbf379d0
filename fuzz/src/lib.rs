//! Helpers shared by the fuzz targets: a reference RESP encoder for [`Value`], a canonical form
//! for comparing values whose map and set order is unspecified, and the connection's read loop
//! (scan a growing buffer, cut and decode each whole frame) replayed over a byte string.

use bytes::{Bytes, BytesMut};
use sentinel_recovery::resp::fuzzing::FrameScanner;
use sentinel_recovery::{Protocol, Value};

/// The protocol chosen by the low bit of a fuzz input's control byte.
pub fn protocol_of(control: u8) -> Protocol {
    if control & 1 == 0 {
        Protocol::Resp2
    } else {
        Protocol::Resp3
    }
}

/// What the read loop made of one step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A whole frame of this many bytes, and what decoding it gave.
    Frame(usize, Result<Value, String>),
    /// The scanner refused the bytes: the connection is closed with this text.
    Invalid(String),
}

/// Replays the connection's read loop (`Connection::process`) over `wire`, delivered `chunk`
/// bytes at a time (`0`: all at once). Returns every step, and how many bytes were left over,
/// waiting for more, when the input ran out (`None` once a step was invalid).
///
/// Values are compared with [`same_value`]: RESP3 map and set order is the decoder's hash order.
pub fn read_loop(wire: &[u8], protocol: Protocol, chunk: usize) -> (Vec<Step>, Option<usize>) {
    let mut rbuf = BytesMut::new();
    let mut scanner = FrameScanner::new();
    let mut steps = Vec::new();
    let mut fed = 0;
    loop {
        match scanner.scan(&rbuf, protocol) {
            Ok(Some(len)) => {
                assert!(
                    len > 0 && len <= rbuf.len(),
                    "frame length {len} of {}",
                    rbuf.len()
                );
                let frame = rbuf.split_to(len).freeze();
                steps.push(Step::Frame(
                    len,
                    sentinel_recovery::resp::fuzzing::decode(frame, protocol),
                ));
            }
            Ok(None) => {
                if fed == wire.len() {
                    return (steps, Some(rbuf.len()));
                }
                let step = if chunk == 0 { wire.len() } else { chunk };
                let next = (fed + step).min(wire.len());
                rbuf.extend_from_slice(&wire[fed..next]);
                fed = next;
            }
            Err(e) => {
                steps.push(Step::Invalid(e));
                return (steps, None);
            }
        }
    }
}

/// Two read-loop step lists over the same `wire` are the same, up to map/set order inside values
/// and to which entry survives of a RESP3 map that repeats a key on the wire: redis-protocol
/// keeps one of them, chosen by hash order, which differs between decodes (as does the text of a
/// RESP3 decoding error).
pub fn same_steps(wire: &[u8], protocol: Protocol, a: &[Step], b: &[Step]) -> bool {
    let mut at = 0;
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Step::Frame(n, Ok(v)), Step::Frame(m, Ok(w))) if n == m => {
                let frame = &wire[at..at + n];
                at += n;
                same_value(v, w) || (protocol == Protocol::Resp3 && map_keys_repeat(frame))
            }
            // Which invalid element of a map or set the RESP3 decoder meets first, and so its
            // error text, follows hash order too.
            (Step::Frame(n, Err(e)), Step::Frame(m, Err(f))) if n == m => {
                at += n;
                e == f || protocol == Protocol::Resp3
            }
            (Step::Frame(n, _), _) => {
                at += n;
                x == y
            }
            _ => x == y,
        })
}

/// Whether a RESP3 frame holds a map that repeats a key (same type, same content; attributes
/// aside: the decoder's frames compare keys without them).
pub fn map_keys_repeat(frame: &[u8]) -> bool {
    use redis_protocol::resp3::types::RangeFrame as F;
    fn key(frame: &[u8], f: &F) -> Vec<u8> {
        let slice = |(s, e): (usize, usize)| frame[s..e].to_vec();
        match f {
            F::BlobString { data, .. } => [b"$".to_vec(), slice(*data)].concat(),
            F::BlobError { data, .. } => [b"!".to_vec(), slice(*data)].concat(),
            F::SimpleString { data, .. } => [b"+".to_vec(), slice(*data)].concat(),
            F::SimpleError { data, .. } => [b"-".to_vec(), slice(*data)].concat(),
            F::BigNumber { data, .. } => [b"(".to_vec(), slice(*data)].concat(),
            F::VerbatimString { data, .. } => [b"=".to_vec(), slice(*data)].concat(),
            F::ChunkedString(data) => [b";".to_vec(), slice(*data)].concat(),
            F::Number { data, .. } => format!(":{data}").into_bytes(),
            // -0 equals 0 (and hashes apart); NaN never equals itself: count both as repeats.
            F::Double { data, .. } if *data == 0.0 => b",0".to_vec(),
            F::Double { data, .. } => format!(",{data}").into_bytes(),
            F::Boolean { data, .. } => format!("#{data}").into_bytes(),
            F::Null => b"_".to_vec(),
            other => format!("{other:?}").into_bytes(),
        }
    }
    fn walk(frame: &[u8], f: &F) -> bool {
        match f {
            F::Map { data, .. } => {
                let mut keys: Vec<Vec<u8>> = data.keys().map(|k| key(frame, k)).collect();
                keys.sort();
                let n = keys.len();
                keys.dedup();
                keys.len() != n || data.iter().any(|(k, v)| walk(frame, k) || walk(frame, v))
            }
            F::Array { data, .. } | F::Push { data, .. } => data.iter().any(|x| walk(frame, x)),
            F::Set { data, .. } => data.iter().any(|x| walk(frame, x)),
            _ => false,
        }
    }
    match redis_protocol::resp3::decode::complete::decode_range(frame) {
        Ok(Some((f, _))) => walk(frame, &f),
        _ => false,
    }
}

/// Equal up to the order of map entries and set elements, with NaN equal to NaN.
pub fn same_value(a: &Value, b: &Value) -> bool {
    canonical(a) == canonical(b)
}

/// The one frame at the start of `data[1..]` (protocol from `data[0]`), decoded, when the
/// scanner finds a whole frame there and the decoder takes it: how the targets build a reply
/// value from fuzz bytes, the way a connection would.
pub fn first_value(data: &[u8]) -> Option<(Protocol, Value)> {
    let (&control, wire) = data.split_first()?;
    let protocol = protocol_of(control);
    let len = FrameScanner::new().scan(wire, protocol).ok()??;
    let value =
        sentinel_recovery::resp::fuzzing::decode(Bytes::copy_from_slice(&wire[..len]), protocol)
            .ok()?;
    Some((protocol, value))
}

fn header(out: &mut Vec<u8>, kind: u8, len: usize) {
    out.push(kind);
    out.extend_from_slice(len.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn line(out: &mut Vec<u8>, kind: u8, text: &[u8]) {
    out.push(kind);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

fn blob(out: &mut Vec<u8>, kind: u8, data: &[u8]) {
    header(out, kind, data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Whether `text` can go on a simple line: a line ends at the first CRLF (a trailing `\r` is
/// fine: in `abc\r\r\n` the first CRLF is the last two bytes).
fn fits_line(text: &[u8]) -> bool {
    !text.windows(2).any(|w| w == b"\r\n")
}

/// A reference encoder: the RESP bytes a server would send for `value`.
///
/// RESP2 has no encoding for RESP3-only variants (maps, doubles, ...): `None` then. Simple
/// strings and errors that a line cannot carry become blob strings (RESP3 blob errors).
pub fn encode(value: &Value, protocol: Protocol) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    encode_into(value, protocol, &mut out, false)?;
    Some(out)
}

/// The canonical form of a value: its RESP3 encoding with map entries and set elements sorted
/// (sets also deduplicated, as the decoder's sets are) by their canonical form.
pub fn canonical(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(value, Protocol::Resp3, &mut out, true).expect("RESP3 encodes every value");
    out
}

fn encode_into(value: &Value, protocol: Protocol, out: &mut Vec<u8>, canon: bool) -> Option<()> {
    let resp3 = protocol == Protocol::Resp3;
    match value {
        Value::Nil if resp3 => out.extend_from_slice(b"_\r\n"),
        Value::Nil => out.extend_from_slice(b"$-1\r\n"),
        Value::Int(i) => line(out, b':', i.to_string().as_bytes()),
        Value::Bulk(b) => blob(out, b'$', b),
        Value::Simple(s) if fits_line(s.as_bytes()) => line(out, b'+', s.as_bytes()),
        Value::Simple(s) => blob(out, b'$', s.as_bytes()),
        Value::Error(s) if fits_line(s.as_bytes()) => line(out, b'-', s.as_bytes()),
        Value::Error(s) if resp3 => blob(out, b'!', s.as_bytes()),
        Value::Error(_) => return None,
        Value::Array(items) => {
            header(out, b'*', items.len());
            for item in items {
                encode_into(item, protocol, out, canon)?;
            }
        }
        _ if !resp3 => return None,
        Value::Double(d) => {
            if canon && d.is_nan() {
                line(out, b',', b"nan");
            } else {
                line(out, b',', d.to_string().as_bytes());
            }
        }
        Value::Boolean(b) => line(out, b'#', if *b { b"t" } else { b"f" }),
        Value::BigNumber(b) => line(out, b'(', b),
        Value::Verbatim { format, text } => {
            let mut data = format.as_bytes().to_vec();
            data.push(b':');
            data.extend_from_slice(text);
            blob(out, b'=', &data);
        }
        Value::Push(items) => {
            header(out, b'>', items.len());
            for item in items {
                encode_into(item, protocol, out, canon)?;
            }
        }
        Value::Set(items) => {
            let mut encoded: Vec<Vec<u8>> = items
                .iter()
                .map(|item| {
                    let mut e = Vec::new();
                    encode_into(item, protocol, &mut e, canon).map(|_| e)
                })
                .collect::<Option<_>>()?;
            if canon {
                encoded.sort();
                encoded.dedup();
            }
            header(out, b'~', encoded.len());
            encoded.iter().for_each(|e| out.extend_from_slice(e));
        }
        Value::Map(pairs) => {
            let mut encoded: Vec<(Vec<u8>, Vec<u8>)> = pairs
                .iter()
                .map(|(k, v)| {
                    let mut ke = Vec::new();
                    let mut ve = Vec::new();
                    encode_into(k, protocol, &mut ke, canon)?;
                    encode_into(v, protocol, &mut ve, canon)?;
                    Some((ke, ve))
                })
                .collect::<Option<_>>()?;
            if canon {
                encoded.sort();
                encoded.dedup();
            }
            header(out, b'%', encoded.len());
            for (k, v) in &encoded {
                out.extend_from_slice(k);
                out.extend_from_slice(v);
            }
        } // Variants added to Value later: a compile error here is the reminder to cover them.
    }
    Some(())
}

/// Whether a canonical value has a map with two entries under the same key (different values):
/// which one a decoder keeps is unspecified.
pub fn has_ambiguous_map(value: &Value) -> bool {
    match value {
        Value::Map(pairs) => {
            let mut keys: Vec<Vec<u8>> = pairs.iter().map(|(k, _)| canonical(k)).collect();
            keys.sort();
            let mut entries: Vec<Vec<u8>> = pairs
                .iter()
                .map(|(k, v)| [canonical(k), canonical(v)].concat())
                .collect();
            entries.sort();
            entries.dedup();
            keys.dedup();
            keys.len() != entries.len()
                || pairs
                    .iter()
                    .any(|(k, v)| has_ambiguous_map(k) || has_ambiguous_map(v))
        }
        Value::Array(items) | Value::Set(items) | Value::Push(items) => {
            items.iter().any(has_ambiguous_map)
        }
        _ => false,
    }
}
