//! Differential: the core's frame scanner against redis-protocol's decoder (the crate the core
//! decodes with, same version as the main workspace's Cargo.lock), RESP2 and RESP3.
//!
//! Input: a control byte (bit 0: RESP2/RESP3) and the bytes a server sent. Each side's verdict on
//! the start of the input is complete (a frame of n bytes), incomplete (more bytes needed) or
//! invalid. Where they must agree, and the only ways they may differ:
//!
//! | scanner      | decoder      | allowed when                                                 |
//! |--------------|--------------|--------------------------------------------------------------|
//! | complete(n)  | complete(m)  | n == m: the scanner never cuts a frame elsewhere             |
//! | complete(n)  | incomplete   | never: the scanner would cut a frame short                   |
//! | complete(n)  | invalid      | the scanner only frames, the decoder also checks contents    |
//! |              |              | (`:x`, `#maybe`, a map keyed by an array, ...): then the     |
//! |              |              | core's `decode` of those n bytes must fail too, so the       |
//! |              |              | connection refuses the frame. One exception, on purpose:     |
//! |              |              | RESP3 `$-1`/`*-1` as a whole reply, which the decoder reads  |
//! |              |              | as a streamed header and the core's `decode` maps to Nil     |
//! |              |              | (servers send RESP2 nulls on RESP3 connections). And a set  |
//! |              |              | or map the decoder refuses for an aggregate element or key   |
//! |              |              | ("Invalid hash/map key": Redis sends COMMAND's key specs as  |
//! |              |              | a set of maps), which `decode` reads on purpose, those sets  |
//! |              |              | and maps as arrays (codec.rs's unit tests hold that).        |
//! | incomplete   | complete(m)  | never: the connection would wait on a reply it has whole     |
//! | incomplete   | incomplete   | always                                                       |
//! | incomplete   | invalid      | the decoder refused a *content* it read inside a frame the   |
//! |              |              | scanner has not finished (the decoder checks contents as it  |
//! |              |              | goes; the scanner frames, and `decode` checks once the frame |
//! |              |              | is whole). The refusal is located (shortest refused prefix)  |
//! |              |              | and must be one an independent walk over the elements        |
//! |              |              | (`element`) explains there: an integer, double, boolean or   |
//! |              |              | verbatim format the decoder cannot read, a RESP2 null inside |
//! |              |              | a RESP3 aggregate, a map key or set element that is an       |
//! |              |              | aggregate, an attribute before an attribute or a null.       |
//! |              |              | Never a framing reason. Harmless: once the frame is whole    |
//! |              |              | the same decoder refuses it (its refusals are prefix-        |
//! |              |              | monotone, checked here too).                                 |
//! | invalid      | complete or  | only for limits and strictness the scanner has on purpose    |
//! |              | incomplete   | (`scanner_strictness`): nesting deeper than MAX_DEPTH, bulk  |
//! |              |              | lengths over MAX_BULK_LEN, aggregates that cannot fit in     |
//! |              |              | MAX_BUFFER, length headers with a sign or over 20 digits,    |
//! |              |              | a blob not followed by CRLF (the decoder skips any 2 bytes), |
//! |              |              | RESP3 verbatim strings shorter than `txt:` (the decoder      |
//! |              |              | reads 4 bytes past their end), and RESP3 types no server     |
//! |              |              | sends as a reply (`;` `.` `H`).                              |
//! | invalid      | invalid      | always                                                       |
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sentinel_recovery::resp::fuzzing::{self, FrameScanner};
use sentinel_recovery::Protocol;
use sentinel_recovery_fuzz::protocol_of;

#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    Complete(usize),
    Incomplete,
    Invalid(String),
}
use Verdict::*;

fuzz_target!(|data: &[u8]| {
    let Some((&control, wire)) = data.split_first() else {
        return;
    };
    let protocol = protocol_of(control);
    let scanner = match FrameScanner::new().scan(wire, protocol) {
        Ok(Some(n)) => Complete(n),
        Ok(None) => Incomplete,
        Err(e) => Invalid(e),
    };
    let decoder = reference(wire, protocol);
    match (&scanner, &decoder) {
        (Complete(n), Complete(m)) => assert_eq!(n, m, "frame lengths differ"),
        (Complete(n), Incomplete) => {
            panic!("the scanner ends a frame at {n}, the decoder needs more")
        }
        (Complete(n), Invalid(e)) => {
            let decoded = fuzzing::decode(Bytes::copy_from_slice(&wire[..*n]), protocol);
            let resp2_null_on_resp3 =
                protocol == Protocol::Resp3 && matches!(&wire[..*n], b"$-1\r\n" | b"*-1\r\n");
            let unhashable = protocol == Protocol::Resp3
                && (e.contains("Invalid hash key") || e.contains("Invalid map key"));
            assert!(
                decoded.is_err() || resp2_null_on_resp3 || unhashable,
                "the decoder refuses ({e}) a frame the core decodes: {decoded:?}"
            );
        }
        (Incomplete, Complete(m)) => {
            panic!("the decoder has a whole frame of {m}, the scanner waits")
        }
        (Incomplete, Incomplete) | (Invalid(_), Invalid(_)) => {}
        (Incomplete, Invalid(e)) => {
            let at = shortest_refused_prefix(wire, protocol);
            assert!(
                content_refusal(&wire[..at], protocol).is_some(),
                "the decoder refuses at byte {at} ({e}) what the scanner still reads: {:?}",
                String::from_utf8_lossy(&wire[..at])
            );
        }
        (Invalid(e), _) => assert!(
            scanner_strictness(e, protocol),
            "the scanner refuses ({e}) what the decoder finds {decoder:?}"
        ),
    }
});

/// redis-protocol's verdict, decoded the way the core decodes (`decode_bytes`, RESP3 `complete`).
fn reference(wire: &[u8], protocol: Protocol) -> Verdict {
    // The decoder recurses once per nesting level and has no depth limit (the scanner exists to
    // keep it from such input on a runtime thread). Here any input is handed to it: give it a
    // stack that deep nesting in a fuzz input cannot exhaust.
    let aggregates = wire
        .iter()
        .filter(|b| matches!(b, b'*' | b'%' | b'~' | b'>' | b'|'))
        .count();
    let wire = Bytes::copy_from_slice(wire);
    let run = move || {
        let result = match protocol {
            Protocol::Resp2 => {
                redis_protocol::resp2::decode::decode_bytes(&wire).map(|r| r.map(|(_, n)| n))
            }
            Protocol::Resp3 => redis_protocol::resp3::decode::complete::decode_bytes(&wire)
                .map(|r| r.map(|(_, n)| n)),
        };
        match result {
            Ok(Some(n)) => Complete(n),
            Ok(None) => Incomplete,
            Err(e) => Invalid(e.to_string()),
        }
    };
    if aggregates <= 48 {
        run()
    } else {
        std::thread::Builder::new()
            .stack_size((2 << 20) + aggregates * (64 << 10))
            .spawn(run)
            .expect("spawn")
            .join()
            .expect("decoder thread")
    }
}

/// The length of the shortest prefix the decoder refuses (it refuses the whole input). Checks
/// that refusals are prefix-monotone on the way: a prefix of a refused input is incomplete or
/// refused, never complete.
fn shortest_refused_prefix(wire: &[u8], protocol: Protocol) -> usize {
    let (mut lo, mut hi) = (0, wire.len()); // reference(wire[..lo]) incomplete, [..hi] refused
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match reference(&wire[..mid], protocol) {
            Incomplete => lo = mid,
            Invalid(_) => hi = mid,
            Complete(n) => {
                panic!("a prefix of {mid} bytes is a whole frame of {n}, the input is refused")
            }
        }
    }
    hi
}

/// Why the decoder may refuse `prefix` (whose last byte made it refuse) while the scanner reads
/// on: a content check of an element the scanner has framed (the connection's `decode` makes the
/// same check once the frame is whole), found by an independent walk over the elements. `None`
/// for anything else: a framing disagreement.
fn content_refusal(prefix: &[u8], protocol: Protocol) -> Option<&'static str> {
    let mut refusals = Vec::new();
    element(prefix, 0, protocol == Protocol::Resp3, &mut refusals, 0);
    refusals
        .into_iter()
        .find(|(end, _)| *end == prefix.len())
        .map(|(_, why)| why)
}

/// Walks the element at `at`, independently of the scanner: where it ends and its type byte (that
/// of the value an attribute precedes), `None` when not all there. Every element the decoder
/// refuses for its content is recorded in `refusals` with the offset the decoder refuses at.
fn element(
    buf: &[u8],
    at: usize,
    resp3: bool,
    refusals: &mut Vec<(usize, &'static str)>,
    depth: usize,
) -> Option<(usize, u8)> {
    let kind = *buf.get(at)?;
    let line_end = at + 1 + buf.get(at + 1..)?.windows(2).position(|w| w == b"\r\n")?;
    let line = &buf[at + 1..line_end];
    let text = std::str::from_utf8(line).ok();
    let after = line_end + 2;
    let count = || text?.parse::<usize>().ok();
    let mut refuse = |end: usize, why: &'static str| refusals.push((end, why));
    match kind {
        b':' if text.and_then(|t| t.parse::<i64>().ok()).is_none() => {
            refuse(after, "integer that is not an i64")
        }
        b',' if resp3 && text.and_then(|t| t.parse::<f64>().ok()).is_none() => {
            refuse(after, "double that is not a number")
        }
        b'#' if resp3 && !matches!(text, Some("t" | "f")) => {
            refuse(after, "boolean that is neither t nor f")
        }
        // RESP3 decoder: `-1` is a streamed header, refused inside an aggregate.
        b'$' | b'*' if line == b"-1" && resp3 && depth > 0 => {
            refuse(after, "RESP2 null inside a RESP3 aggregate")
        }
        b'$' | b'*' if line == b"-1" => {}
        b'$' | b'!' | b'=' => {
            let end = after.checked_add(count()?)?.checked_add(2)?;
            if end > buf.len() {
                return None;
            }
            if kind == b'='
                && !(buf[after..].starts_with(b"txt:") || buf[after..].starts_with(b"mkd:"))
            {
                refuse(end, "verbatim string format that is neither txt nor mkd");
            }
            return Some((end, kind));
        }
        b'*' | b'~' | b'>' | b'%' | b'|' if depth < 4096 => {
            let pairs = matches!(kind, b'%' | b'|');
            let n = if pairs {
                count()?.checked_mul(2)?
            } else {
                count()?
            };
            let mut end = after;
            let mut aggregate_key = false;
            for i in 0..n {
                let (e, k) = element(buf, end, resp3, refusals, depth + 1)?;
                let is_key = kind == b'~' || (pairs && i % 2 == 0);
                aggregate_key |= is_key && matches!(k, b'*' | b'~' | b'>' | b'%');
                end = e;
            }
            // The decoder hashes map and attribute keys and set elements.
            if aggregate_key {
                refusals.push((end, "map key or set element that is an aggregate"));
            }
            if kind == b'|' {
                // The spec lets an attribute precede any value, redis-protocol not another
                // attribute: it refuses at that one's type byte (the scanner accepts it and
                // `decode` refuses the whole frame).
                if buf.get(end) == Some(&b'|') {
                    refusals.push((end + 1, "attribute after attribute"));
                }
                let (e, k) = element(buf, end, resp3, refusals, depth + 1)?;
                // Nor a null (the spec allows it, `decode` refuses the whole frame).
                if k == b'_' {
                    refusals.push((e, "attribute before a null"));
                }
                return Some((e, k));
            }
            return Some((end, kind));
        }
        _ => {}
    }
    Some((after, kind))
}

/// The scanner's own limits and strictness (see the table at the top).
fn scanner_strictness(error: &str, protocol: Protocol) -> bool {
    if error.starts_with("reply nested deeper than")
        || error.starts_with("bulk length")
        || error.starts_with("aggregate length overflows")
        || error.starts_with("aggregate of")
        || error.starts_with("line longer than")
        || error.starts_with("length header out of range")
        || error == "bulk string not terminated by CRLF"
    {
        return true;
    }
    if error.starts_with("verbatim string of") {
        // Shorter than `txt:`: the decoder waits for 4 bytes past the frame's end.
        return protocol == Protocol::Resp3;
    }
    if let Some(header) = error.strip_prefix("invalid length header ") {
        // Debug-quoted, cut at 24 bytes: a sign, or more than 20 digits.
        let header = header.trim_matches('"');
        return header.starts_with('+') || header.starts_with('-') || header.len() > 20;
    }
    if let Some(byte) = error.strip_prefix("unexpected type byte 0x") {
        // Streamed-string chunks, end of stream, HELLO: RESP3 the decoder reads and no server
        // sends as a reply.
        return protocol == Protocol::Resp3 && matches!(&byte[..2], "3b" | "2e" | "48");
    }
    false
}
