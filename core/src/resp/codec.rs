//! Wire format: encoding commands and cutting the read buffer into whole frames.
//!
//! redis-protocol's decoders are recursive and re-parse from the start on every call, so they are
//! only handed a frame once [`FrameScanner`] has seen all of it. The scanner is iterative and
//! resumable: it bounds nesting depth (a deep `*1\r\n*1\r\n...` would otherwise overflow the stack
//! of a runtime thread), line and bulk lengths, and looks at every header once however slowly a
//! large reply trickles in.

use bytes::{BufMut, Bytes, BytesMut};

use crate::config::Protocol;
use crate::resp::Value;

/// Largest bulk string accepted, Redis' own `proto-max-bulk-len` default.
pub(crate) const MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Read buffer cap: one maximal bulk string plus headroom for the frame around it.
pub(crate) const MAX_BUFFER: usize = MAX_BULK_LEN + 1024 * 1024;
/// Longest simple line (status, error, number, header) accepted.
const MAX_LINE: usize = 4 * 1024 * 1024;
/// Deepest aggregate nesting accepted. Real replies stay under 10; redis-protocol's recursive
/// decoder needs about 16 KiB of stack per level in debug builds, so 32 levels fit well within
/// half of a 2 MiB runtime thread stack.
pub(crate) const MAX_DEPTH: usize = 32;

/// Appends `args` to `out` as a RESP array of bulk strings (valid in RESP2 and RESP3).
pub(crate) fn encode_command<A: AsRef<[u8]>>(args: &[A], out: &mut BytesMut) {
    let payload: usize = args.iter().map(|a| a.as_ref().len() + 16).sum();
    out.reserve(payload + 16);
    put_header(out, b'*', args.len());
    for arg in args {
        let arg = arg.as_ref();
        put_header(out, b'$', arg.len());
        out.put_slice(arg);
        out.put_slice(b"\r\n");
    }
}

fn put_header(out: &mut BytesMut, kind: u8, len: usize) {
    // Digits written backwards into a stack buffer: no allocation per header.
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = len;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.put_u8(kind);
    out.put_slice(&digits[at..]);
    out.put_slice(b"\r\n");
}

/// Finds where the first complete frame in a growing buffer ends.
///
/// State is kept between calls so bytes already checked are not checked again; call
/// [`FrameScanner::scan`] with the same buffer (only appended to) until it returns a length, then
/// remove that many bytes from the buffer: the scanner is ready for the next frame.
#[derive(Debug, Default)]
pub(crate) struct FrameScanner {
    /// Offset of the next header to read.
    pos: usize,
    /// Open aggregates: elements still missing, and whether it is an attribute (which does not
    /// count as an element of its parent).
    open: Vec<(usize, bool)>,
}

impl FrameScanner {
    /// `Ok(Some(len))` when `buf` starts with a complete frame of `len` bytes, `Ok(None)` when more
    /// bytes are needed, `Err` when the bytes cannot be a valid frame for `protocol`.
    pub(crate) fn scan(&mut self, buf: &[u8], protocol: Protocol) -> Result<Option<usize>, String> {
        loop {
            let start = self.pos;
            let Some(&kind) = buf.get(start) else {
                return Ok(None);
            };
            let resp3 = protocol == Protocol::Resp3;
            // A byte that starts no frame is refused at once, not once its line is complete: a
            // peer that does not speak RESP may never send a CRLF.
            if !(matches!(kind, b'+' | b'-' | b':' | b'$' | b'*')
                || resp3 && b"_,#(!=~>%|".contains(&kind))
            {
                return Err(format!(
                    "unexpected type byte 0x{kind:02x} in a {protocol:?} reply"
                ));
            }
            let Some(line_end) = find_crlf(buf, start + 1) else {
                if buf.len() - start > MAX_LINE {
                    return Err(format!("line longer than {MAX_LINE} bytes"));
                }
                return Ok(None);
            };
            let line = &buf[start + 1..line_end];
            let after_line = line_end + 2;

            // Number of child elements this header opens, and whether it is an attribute.
            let mut opens: Option<(usize, bool)> = None;
            let mut end = after_line;
            match kind {
                b'+' | b'-' | b':' => {}
                b'_' | b',' | b'#' | b'(' if resp3 => {}
                // Null bulk: RESP2's only null, and still sent by some servers on RESP3.
                b'$' if line == b"-1" => {}
                b'$' | b'!' | b'=' if kind == b'$' || resp3 => {
                    match bulk_end(buf, after_line, kind, line)? {
                        Some(e) => end = e,
                        None => return Ok(None),
                    }
                }
                b'*' if line == b"-1" => {}
                b'*' => opens = Some((parse_count(line)?, false)),
                b'~' | b'>' if resp3 => opens = Some((parse_count(line)?, false)),
                b'%' | b'|' if resp3 => {
                    let n = parse_count(line)?
                        .checked_mul(2)
                        .ok_or_else(|| "aggregate length overflows".to_owned())?;
                    opens = Some((n, kind == b'|'));
                }
                other => {
                    return Err(format!(
                        "unexpected type byte 0x{other:02x} in a {protocol:?} reply"
                    ))
                }
            }
            self.pos = end;

            match opens {
                // Every element takes 3 bytes at least (`+\r\n`): a longer aggregate cannot fit
                // in the read buffer, so it is refused now rather than waited for.
                Some((n, _)) if n > MAX_BUFFER / 3 => {
                    return Err(format!(
                        "aggregate of {n} elements cannot fit in a {MAX_BUFFER}-byte reply"
                    ));
                }
                Some((n, attribute)) if n > 0 => {
                    if self.open.len() >= MAX_DEPTH {
                        return Err(format!("reply nested deeper than {MAX_DEPTH} levels"));
                    }
                    self.open.push((n, attribute));
                    continue;
                }
                // An empty attribute precedes a value like any other attribute.
                Some((_, true)) => continue,
                _ => {}
            }

            // One element is complete: close every aggregate it completes.
            loop {
                let Some((remaining, attribute)) = self.open.last_mut() else {
                    let len = self.pos;
                    self.pos = 0;
                    return Ok(Some(len));
                };
                *remaining -= 1;
                if *remaining > 0 {
                    break;
                }
                let attribute = *attribute;
                self.open.pop();
                if attribute {
                    // The attributed value itself still follows.
                    break;
                }
            }
        }
    }
}

/// End offset of a blob of type `kind` whose header `line` ended at `payload_start`, `None` if
/// not all here yet.
fn bulk_end(
    buf: &[u8],
    payload_start: usize,
    kind: u8,
    line: &[u8],
) -> Result<Option<usize>, String> {
    let len = parse_count(line)?;
    if len > MAX_BULK_LEN {
        return Err(format!("bulk length {len} exceeds {MAX_BULK_LEN} bytes"));
    }
    // A verbatim string starts with its format (`txt:`); redis-protocol would wait for those 4
    // bytes past the end of a shorter frame, and the frame would fail as "incomplete".
    if kind == b'=' && len < 4 {
        return Err(format!(
            "verbatim string of {len} bytes, shorter than its format prefix"
        ));
    }
    let end = payload_start + len + 2;
    if buf.len() < end {
        return Ok(None);
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Err("bulk string not terminated by CRLF".to_owned());
    }
    Ok(Some(end))
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let tail = buf.get(from..)?;
    tail.windows(2).position(|w| w == b"\r\n").map(|i| from + i)
}

fn parse_count(line: &[u8]) -> Result<usize, String> {
    if line.is_empty() || line.len() > 20 || !line.iter().all(u8::is_ascii_digit) {
        return Err(format!(
            "invalid length header {:?}",
            String::from_utf8_lossy(&line[..line.len().min(24)])
        ));
    }
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| "length header out of range".to_owned())
}

/// Decodes one complete frame (as delimited by [`FrameScanner`]) with `protocol`'s decoder.
pub(crate) fn decode(frame: Bytes, protocol: Protocol) -> Result<Value, String> {
    let (value, used) = match protocol {
        Protocol::Resp2 => {
            match redis_protocol::resp2::decode::decode_bytes(&frame).map_err(|e| e.to_string())? {
                Some((f, used)) => (Value::from(f), used),
                None => return Err("incomplete frame".to_owned()),
            }
        }
        Protocol::Resp3 => {
            // redis-protocol's RESP3 decoder does not take RESP2 nulls.
            if &frame[..] == b"$-1\r\n" || &frame[..] == b"*-1\r\n" {
                return Ok(Value::Nil);
            }
            let decoded = match redis_protocol::resp3::decode::complete::decode_bytes(&frame) {
                // A set of aggregates (COMMAND's key specs: maps) or a map keyed by aggregates:
                // redis-protocol keeps sets and maps in hash containers and refuses those.
                Err(e) if e.to_string().contains("Invalid") => {
                    let Some(relaxed) = unhashable_as_arrays(&frame) else {
                        return Err(e.to_string());
                    };
                    let decoded = redis_protocol::resp3::decode::complete::decode_bytes(
                        &Bytes::from(relaxed),
                    )
                    .map_err(|e| e.to_string())?;
                    // The rewrite changed header lengths: the frame was whole, so all of it.
                    return match decoded {
                        Some((f, _)) => Ok(Value::from(f)),
                        None => Err("incomplete frame".to_owned()),
                    };
                }
                other => other.map_err(|e| e.to_string())?,
            };
            match decoded {
                Some((f, used)) => (Value::from(f), used),
                None => return Err("incomplete frame".to_owned()),
            }
        }
    };
    if used != frame.len() {
        return Err(format!(
            "frame length mismatch: decoded {used} of {} bytes",
            frame.len()
        ));
    }
    Ok(value)
}

/// `frame` (one whole RESP3 frame) with every set (`~N`) as an array (`*N`) and every map
/// (`%N`) as an array of its keys and values (`*2N`), so that a set of maps or a map keyed by an
/// aggregate decodes; `None` when the frame cannot be walked. Only headers are rewritten: the
/// walk skips the payload of every blob.
fn unhashable_as_arrays(frame: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(frame.len() + 16);
    let mut at = 0;
    while at < frame.len() {
        let end = find_crlf(frame, at)?;
        let kind = frame[at];
        let line = frame.get(at + 1..end)?;
        match kind {
            b'~' => {
                out.push(b'*');
                out.extend_from_slice(line);
                out.extend_from_slice(b"\r\n");
            }
            b'%' => {
                let pairs = parse_count(line).ok()?;
                out.extend_from_slice(format!("*{}\r\n", pairs.checked_mul(2)?).as_bytes());
            }
            b'$' | b'=' | b'!' if line != b"-1" => {
                let len = parse_count(line).ok()?;
                let payload_end = end.checked_add(2 + len + 2)?;
                out.extend_from_slice(frame.get(at..payload_end)?);
                at = payload_end;
                continue;
            }
            _ => out.extend_from_slice(&frame[at..end + 2]),
        }
        at = end + 2;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(wire: &[u8], protocol: Protocol) -> Result<Option<usize>, String> {
        FrameScanner::default().scan(wire, protocol)
    }

    /// Feeds `wire` one byte at a time; the scanner must report the frame exactly once, at the end.
    fn scan_bytewise(wire: &[u8], protocol: Protocol) -> usize {
        let mut scanner = FrameScanner::default();
        for i in 1..wire.len() {
            assert_eq!(scanner.scan(&wire[..i], protocol), Ok(None), "at {i}");
        }
        scanner.scan(wire, protocol).unwrap().unwrap()
    }

    #[test]
    fn encodes_commands_as_bulk_arrays() {
        let mut out = BytesMut::new();
        encode_command(&["SET", "k", ""], &mut out);
        assert_eq!(&out[..], b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
        for len in [9, 10, 99, 100, 12345, usize::MAX] {
            let mut out = BytesMut::new();
            put_header(&mut out, b'$', len);
            assert_eq!(&out[..], format!("${len}\r\n").as_bytes());
        }
    }

    #[test]
    fn scans_complete_frames_and_leaves_the_rest() {
        let wire = b"*2\r\n$3\r\nfoo\r\n*1\r\n:1\r\n+NEXT\r\n";
        assert_eq!(scan_all(wire, Protocol::Resp2), Ok(Some(wire.len() - 7)));
        assert_eq!(scan_bytewise(b"$-1\r\n", Protocol::Resp2), 5);
        assert_eq!(scan_bytewise(b"*0\r\n", Protocol::Resp2), 4);
        let resp3 = b"%1\r\n+k\r\n|1\r\n+a\r\n+b\r\n~2\r\n_\r\n#t\r\n";
        assert_eq!(scan_bytewise(resp3, Protocol::Resp3), resp3.len());
        let attr_first = b"|0\r\n|1\r\n+a\r\n+b\r\n:1\r\n";
        assert_eq!(scan_bytewise(attr_first, Protocol::Resp3), attr_first.len());
        assert_eq!(scan_bytewise(b"$-1\r\n", Protocol::Resp3), 5);
    }

    #[test]
    fn rejects_malformed_input() {
        for (wire, protocol) in [
            (&b"?\r\n"[..], Protocol::Resp2),
            (b"%1\r\n", Protocol::Resp2),
            (b"$abc\r\n", Protocol::Resp2),
            (b"$-5\r\n", Protocol::Resp2),
            (b"$3\r\nfooX\r\n", Protocol::Resp2),
            (b"*99999999999999999999999\r\n", Protocol::Resp2),
            (b"$?\r\n", Protocol::Resp3),
            (b"%9999999999999999999\r\n", Protocol::Resp3),
            (b"$600000000\r\n", Protocol::Resp2),
        ] {
            assert!(scan_all(wire, protocol).is_err(), "{wire:?}");
        }
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1);
        assert!(scan_all(deep.as_bytes(), Protocol::Resp2).is_err());
        let ok_depth = format!("{}:1\r\n", "*1\r\n".repeat(MAX_DEPTH));
        assert!(scan_all(ok_depth.as_bytes(), Protocol::Resp2)
            .unwrap()
            .is_some());
    }

    #[test]
    fn decodes_by_protocol() {
        let nil = Bytes::from_static(b"$-1\r\n");
        assert_eq!(decode(nil.clone(), Protocol::Resp2), Ok(Value::Nil));
        assert_eq!(decode(nil, Protocol::Resp3), Ok(Value::Nil));
        assert_eq!(
            decode(Bytes::from_static(b"_\r\n"), Protocol::Resp3),
            Ok(Value::Nil)
        );
        assert!(decode(Bytes::from_static(b":x\r\n"), Protocol::Resp2).is_err());
    }

    /// A byte that starts no frame is refused at once, not when a CRLF follows it: a peer that
    /// never sends one (not a RESP server) would be waited on until the deadline. redis-protocol
    /// refuses it at once too. Reproducers: fuzz/ resp_differential, corpus crash-type-byte-*.
    #[test]
    fn a_byte_that_starts_no_frame_is_refused_before_its_line_ends() {
        for (wire, protocol) in [
            (&b"\n"[..], Protocol::Resp2),
            (b"\0", Protocol::Resp3),
            (b"?abc", Protocol::Resp2),
            (b"_", Protocol::Resp2),
            (b"*2\r\n:1\r\n\x16\x03", Protocol::Resp3),
            (b"HTTP/1.1 400", Protocol::Resp3),
        ] {
            let e = scan_all(wire, protocol).unwrap_err();
            assert!(e.starts_with("unexpected type byte"), "{wire:?}: {e}");
        }
        assert_eq!(scan_all(b"_", Protocol::Resp3), Ok(None));
        assert_eq!(scan_all(b"*2\r\n:1\r\n#", Protocol::Resp3), Ok(None));
    }

    /// A verbatim string shorter than its `txt:` prefix is invalid, and the scanner and the
    /// decoder must agree on it: a decoder reading 4 bytes of format past its end would call a
    /// frame the scanner delimited "incomplete". Reproducers: fuzz/ resp_frames and
    /// resp_differential, corpus crash-verbatim-short*.
    #[test]
    fn a_verbatim_string_shorter_than_its_format_is_refused() {
        for wire in [
            &b"=1\r\na\r\n"[..],
            b"=3\r\ntxt\r\n",
            b"=0\r\n",
            b"*2\r\n=2\r\n",
        ] {
            let e = scan_all(wire, Protocol::Resp3).unwrap_err();
            assert!(
                e.contains("shorter than its format prefix"),
                "{wire:?}: {e}"
            );
        }
        let wire = b"=4\r\ntxt:\r\n";
        assert_eq!(scan_bytewise(wire, Protocol::Resp3), wire.len());
        assert_eq!(
            decode(Bytes::from_static(wire), Protocol::Resp3),
            Ok(Value::Verbatim {
                format: "txt".into(),
                text: Bytes::new()
            })
        );
    }

    /// No aggregate longer than a third of the read buffer can arrive whole, so one announcing
    /// more (`*9999999999999999999`, which fits a usize) is refused at once rather than waited
    /// on, as redis-protocol does. Reproducer: fuzz/ resp_differential, corpus
    /// crash-count-over-isize.
    #[test]
    fn an_aggregate_that_cannot_fit_in_the_buffer_is_refused_at_once() {
        let most = MAX_BUFFER / 3;
        for (wire, protocol) in [
            (b"*9999999999999999999\r\n".to_vec(), Protocol::Resp2),
            (format!("*{}\r\n", most + 1).into_bytes(), Protocol::Resp2),
            (format!("~{}\r\n", most + 1).into_bytes(), Protocol::Resp3),
            (
                format!("%{}\r\n", most / 2 + 1).into_bytes(),
                Protocol::Resp3,
            ),
            (
                format!("*1\r\n|{}\r\n", most / 2 + 1).into_bytes(),
                Protocol::Resp3,
            ),
        ] {
            let e = scan_all(&wire, protocol).unwrap_err();
            assert!(e.contains("cannot fit"), "{wire:?}: {e}");
        }
        assert_eq!(
            scan_all(format!("*{most}\r\n").as_bytes(), Protocol::Resp2),
            Ok(None)
        );
        assert_eq!(
            scan_all(format!(">{most}\r\n").as_bytes(), Protocol::Resp3),
            Ok(None)
        );
    }

    #[test]
    fn maximal_nesting_decodes_on_a_small_stack() {
        // Runtime worker threads have 2 MiB stacks; decoding, converting and dropping the deepest
        // accepted reply must fit in half of that.
        let wire = format!("{}:1\r\n", "*1\r\n".repeat(MAX_DEPTH));
        let handle = std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(move || {
                let a = decode(Bytes::from(wire.clone()), Protocol::Resp2).is_ok();
                let b = decode(Bytes::from(wire), Protocol::Resp3).is_ok();
                a && b
            })
            .unwrap();
        assert!(handle.join().unwrap());
    }

    #[test]
    fn random_input_never_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        let alphabet = b"+-:$*_,#(!=%~>|?.;0123456789\r\n\r\n\r\nabcf-1";
        for _ in 0..20_000 {
            let len = rng.gen_range(1..80);
            let wire: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            for protocol in [Protocol::Resp2, Protocol::Resp3] {
                let mut rest = &wire[..];
                let mut scanner = FrameScanner::default();
                // Feed in two steps to exercise resuming.
                let _ = scanner.scan(&rest[..rest.len() / 2], protocol);
                while let Ok(Some(n)) = scanner.scan(rest, protocol) {
                    let _ = decode(Bytes::copy_from_slice(&rest[..n]), protocol);
                    rest = &rest[n..];
                }
            }
        }
    }
}

#[cfg(test)]
mod unhashable_tests {
    use super::*;

    /// One COMMAND entry as Redis 7 sends it over RESP3: its key specs are a set of maps, which
    /// redis-protocol refuses; the frame still decodes (the set as an array), and a set of
    /// strings elsewhere in a reply is still a set.
    #[test]
    fn a_set_of_maps_decodes_and_a_set_of_strings_stays_a_set() {
        let entry = b"*1\r\n*10\r\n$3\r\nset\r\n:-3\r\n~2\r\n+write\r\n+denyoom\r\n:1\r\n:1\r\n:1\r\n\
~1\r\n+@write\r\n~0\r\n~1\r\n%2\r\n$5\r\nflags\r\n~1\r\n+RW\r\n$5\r\nnotes\r\n$6\r\n~1\r\n%1\r\n*0\r\n";
        let value = decode(Bytes::from_static(entry), Protocol::Resp3).unwrap();
        let Value::Array(entries) = &value else {
            panic!("{value:?}")
        };
        let Value::Array(fields) = &entries[0] else {
            panic!("{value:?}")
        };
        assert_eq!(fields.len(), 10);
        assert!(
            matches!(&fields[2], Value::Array(f) if f.len() == 2),
            "{:?}",
            fields[2]
        );
        // The payload "~1\r\n%1\r\n" of the bulk string was not rewritten.
        let Value::Array(specs) = &fields[8] else {
            panic!("{:?}", fields[8])
        };
        assert_eq!(specs.len(), 1);
        assert!(
            format!("{:?}", specs[0]).contains("~1\\r\\n%1"),
            "{:?}",
            specs[0]
        );
        let table = crate::client::WriteTable::parse(&value);
        assert!(table.writes(b"SET", None));

        let plain = decode(Bytes::from_static(b"~2\r\n+a\r\n+b\r\n"), Protocol::Resp3).unwrap();
        assert!(matches!(plain, Value::Set(_)), "{plain:?}");
        // Not RESP (an empty line where a header belongs): no rewrite, no panic.
        assert_eq!(unhashable_as_arrays(b"*1\r\n\r\n"), None);
    }
}
