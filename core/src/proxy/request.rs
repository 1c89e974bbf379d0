//! Cutting what a client sends into requests, as Redis itself reads them: RESP arrays of bulk
//! strings, and inline commands (a line of space-separated words, quotes as `redis-cli` writes
//! them). Bounded like the server: a request larger than the listener's `max_request_bytes`
//! (Redis' `proto-max-bulk-len`), more arguments than `MAX_ARGS`, or a malformed header is an
//! error whose text is the reply the session sends before closing, in Redis' own words.

use bytes::{Buf, Bytes, BytesMut};

/// Most arguments one request may carry (Redis accepts up to 1024*1024*1024; far more than any
/// real command, and each costs a `Bytes` here before anything is sent).
pub(super) const MAX_ARGS: usize = 1024 * 1024;
/// Longest inline command or multibulk header line, as Redis' `PROTO_INLINE_MAX_SIZE`.
const MAX_INLINE: usize = 64 * 1024;

/// One command as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Request {
    /// The arguments, the command name first. Never empty.
    pub(super) args: Vec<Bytes>,
    /// The request as RESP, ready to forward: the client's own bytes for a multibulk request,
    /// re-encoded for an inline one (the upstream gets one framing only).
    pub(super) wire: Bytes,
}

/// What went wrong reading a client's bytes: the error reply (without `-` and CRLF) the session
/// sends before it closes, as Redis words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Malformed(pub(super) String);

/// Takes the next complete request off the front of `buf`: `Ok(None)` when more bytes are
/// needed (nothing consumed), `Ok(Some(..))` with the request, `Err` when the bytes can never
/// be a request. Empty inline lines are skipped, as Redis skips them.
pub(super) fn next(buf: &mut BytesMut, max_request: usize) -> Result<Option<Request>, Malformed> {
    loop {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        if first == b'*' {
            return multibulk(buf, max_request);
        }
        match inline(buf, MAX_INLINE.min(max_request))? {
            Some(Some(request)) => return Ok(Some(request)),
            Some(None) => continue,
            None => return Ok(None),
        }
    }
}

/// `*<n>\r\n` then n times `$<len>\r\n<bytes>\r\n`. The headers are checked once while
/// the request may still be incomplete, then read again on the complete request to cut its
/// arguments: no scratch list per request.
fn multibulk(buf: &mut BytesMut, max_request: usize) -> Result<Option<Request>, Malformed> {
    let Some((count, first)) = header(buf, 0, b'*', "multibulk length")? else {
        return Ok(None);
    };
    if count > MAX_ARGS as i64 {
        return Err(Malformed(
            "ERR Protocol error: invalid multibulk length".into(),
        ));
    }
    if count <= 0 {
        // Redis ignores `*0` and `*-1`.
        buf.advance(first);
        return next(buf, max_request);
    }
    let mut at = first;
    for _ in 0..count {
        match buf.get(at) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&other) => {
                return Err(Malformed(format!(
                    "ERR Protocol error: expected '$', got '{}'",
                    char::from(other).escape_default()
                )))
            }
        }
        let Some((len, start)) = header(buf, at, b'$', "bulk length")? else {
            return Ok(None);
        };
        if len < 0 || len as u64 > max_request as u64 {
            return Err(Malformed("ERR Protocol error: invalid bulk length".into()));
        }
        let end = start + len as usize;
        if end > max_request {
            return Err(Malformed(format!(
                "ERR Protocol error: request larger than {max_request} bytes"
            )));
        }
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(Malformed(
                "ERR Protocol error: bulk string not followed by CRLF".into(),
            ));
        }
        at = end + 2;
    }
    let wire = buf.split_to(at).freeze();
    let mut args = Vec::with_capacity(count as usize);
    let mut at = first;
    while at < wire.len() {
        // Checked above: a `$` header, its length, its bytes and CRLF.
        let (len, start) = header(&wire, at, b'$', "bulk length")?
            .ok_or_else(|| Malformed("ERR Protocol error: invalid bulk length".into()))?;
        let end = start + len as usize;
        args.push(wire.slice(start..end));
        at = end + 2;
    }
    Ok(Some(Request { args, wire }))
}

/// Reads `<kind><digits>\r\n` at `at`: the number and where the line ends.
fn header(buf: &[u8], at: usize, kind: u8, what: &str) -> Result<Option<(i64, usize)>, Malformed> {
    debug_assert_eq!(buf.get(at), Some(&kind));
    let Some(newline) = memchr(b'\n', &buf[at..]) else {
        if buf.len() - at > MAX_INLINE {
            return Err(Malformed(format!("ERR Protocol error: too big {what}")));
        }
        return Ok(None);
    };
    let line = &buf[at + 1..at + newline];
    let digits = line.strip_suffix(b"\r").unwrap_or(line);
    number(digits)
        .map(|n| Some((n, at + newline + 1)))
        .ok_or_else(|| Malformed(format!("ERR Protocol error: invalid {what}")))
}

/// A decimal, optionally negative, of at most 18 digits (no overflow possible).
fn number(digits: &[u8]) -> Option<i64> {
    let (negative, digits) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Some(if negative { -n } else { n })
}

/// One inline line of at most `max` bytes: `Some(Some(request))`, `Some(None)` for an empty line (consumed), `None`
/// when the line is not complete yet.
fn inline(buf: &mut BytesMut, max: usize) -> Result<Option<Option<Request>>, Malformed> {
    let newline = memchr(b'\n', buf);
    if newline.map_or(buf.len(), |n| n + 1) > max {
        return Err(Malformed(
            "ERR Protocol error: too big inline request".into(),
        ));
    }
    let Some(newline) = newline else {
        if buf.len() > max {
            return Err(Malformed(
                "ERR Protocol error: too big inline request".into(),
            ));
        }
        return Ok(None);
    };
    let line = buf.split_to(newline + 1);
    let line = line.strip_suffix(b"\n").unwrap_or(&line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let args = split_args(line)
        .ok_or_else(|| Malformed("ERR Protocol error: unbalanced quotes in request".into()))?;
    if args.is_empty() {
        return Ok(Some(None));
    }
    let mut wire = BytesMut::new();
    crate::resp::encode_command(&args, &mut wire);
    let args = args.into_iter().map(Bytes::from).collect();
    Ok(Some(Some(Request {
        args,
        wire: wire.freeze(),
    })))
}

/// Splits an inline line into words as Redis' `sdssplitargs` does: spaces separate words;
/// `"..."` takes `\n \r \t \b \a \\ \" \xHH` escapes, `'...'` takes `\'`; a closing quote must
/// be followed by a space or the end. `None` for unbalanced quotes.
pub(super) fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return Some(words);
        }
        let mut word = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = line.get(i).copied();
            if in_double {
                match c? {
                    b'\\'
                        if i + 3 < line.len()
                            && line[i + 1] == b'x'
                            && line[i + 2].is_ascii_hexdigit()
                            && line[i + 3].is_ascii_hexdigit() =>
                    {
                        let hex = std::str::from_utf8(&line[i + 2..i + 4]).ok()?;
                        word.push(u8::from_str_radix(hex, 16).ok()?);
                        i += 3;
                    }
                    b'\\' if i + 1 < line.len() => {
                        i += 1;
                        word.push(match line[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    }
                    b'"' => {
                        if line.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    other => word.push(other),
                }
            } else if in_single {
                match c? {
                    b'\\' if line.get(i + 1) == Some(&b'\'') => {
                        i += 1;
                        word.push(b'\'');
                    }
                    b'\'' => {
                        if line.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    other => word.push(other),
                }
            } else {
                match c {
                    None => break,
                    Some(b) if b.is_ascii_whitespace() => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(other) => word.push(other),
                }
            }
            i += 1;
        }
        words.push(word);
    }
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(bytes: &[u8]) -> (Vec<Result<Option<Request>, Malformed>>, BytesMut) {
        let mut buf = BytesMut::from(bytes);
        let mut out = Vec::new();
        loop {
            let r = next(&mut buf, 1 << 20);
            let stop = !matches!(r, Ok(Some(_)));
            out.push(r);
            if stop {
                return (out, buf);
            }
        }
    }

    fn args(r: &Result<Option<Request>, Malformed>) -> Vec<&[u8]> {
        r.as_ref()
            .unwrap()
            .as_ref()
            .unwrap()
            .args
            .iter()
            .map(|a| a.as_ref())
            .collect()
    }

    #[test]
    fn pipelined_multibulk_requests_keep_their_bytes() {
        let bytes = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI";
        let (out, rest) = take(bytes);
        assert_eq!(args(&out[0]), vec![&b"GET"[..], b"k"]);
        assert_eq!(
            &out[0].as_ref().unwrap().as_ref().unwrap().wire[..],
            &bytes[..20]
        );
        assert_eq!(args(&out[1]), vec![&b"PING"[..]]);
        assert_eq!(out[2], Ok(None));
        assert_eq!(&rest[..], b"*1\r\n$4\r\nPI");
    }

    #[test]
    fn inline_commands_are_split_like_redis_and_sent_as_resp() {
        let (out, _) = take(b"\r\nSET k \"a b\\x41\\n\" 'it\\'s'\r\nPING\n");
        assert_eq!(args(&out[0]), vec![&b"SET"[..], b"k", b"a bA\n", b"it's"]);
        let wire = &out[0].as_ref().unwrap().as_ref().unwrap().wire;
        assert!(wire.starts_with(b"*4\r\n$3\r\nSET\r\n"));
        assert_eq!(args(&out[1]), vec![&b"PING"[..]]);
    }

    #[test]
    fn malformed_input_is_refused_in_redis_words() {
        let cases: [(&[u8], &str); 5] = [
            (b"*1\r\n:3\r\n", "expected '$', got ':'"),
            (b"*x\r\n", "invalid multibulk length"),
            (b"*1\r\n$-5\r\n", "invalid bulk length"),
            (b"*1\r\n$2\r\nabcd\r\n", "not followed by CRLF"),
            (b"GET \"k\r\n", "unbalanced quotes"),
        ];
        for (bytes, text) in cases {
            let (out, _) = take(bytes);
            match out.last().unwrap() {
                Err(Malformed(m)) => assert!(m.contains(text), "{m} lacks {text}"),
                other => panic!("{bytes:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn a_request_larger_than_the_bound_is_refused_before_it_is_buffered() {
        let mut buf = BytesMut::from(&b"*1\r\n$100000\r\n"[..]);
        assert!(next(&mut buf, 1000).is_err());
        let mut huge_line = BytesMut::from(&vec![b'a'; MAX_INLINE + 1][..]);
        assert!(next(&mut huge_line, 1 << 30).is_err());
    }

    #[test]
    fn empty_multibulk_is_ignored() {
        let (out, _) = take(b"*0\r\n*1\r\n$4\r\nPING\r\n");
        assert_eq!(args(&out[0]), vec![&b"PING"[..]]);
    }
}
