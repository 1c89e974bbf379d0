//! Entry points for the fuzz target `proxy_requests` (not part of the API: no stability
//! promise): the proxy's request framing, driven the way a session drives it.

use bytes::BytesMut;

/// Feeds `input` to the session's request reader `chunk` bytes at a time (at least 1), taking
/// every complete request after each chunk as a session does. Returns each request's
/// arguments and the bytes it would forward, then the refusal text if the input was refused
/// (after which a session reads nothing more).
#[allow(clippy::type_complexity)]
pub fn split_requests(
    input: &[u8],
    chunk: usize,
    max_request: usize,
) -> (Vec<(Vec<Vec<u8>>, Vec<u8>)>, Option<String>) {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match super::request::next(&mut buf, max_request) {
                Ok(Some(r)) => {
                    out.push((r.args.iter().map(|a| a.to_vec()).collect(), r.wire.to_vec()))
                }
                Ok(None) => break,
                Err(super::request::Malformed(text)) => return (out, Some(text)),
            }
        }
    }
    (out, None)
}
