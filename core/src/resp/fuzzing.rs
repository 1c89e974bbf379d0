//! Entry points for the fuzz targets in `fuzz/` (not part of the API: no stability promise).
//!
//! The frame scanner and the decoder are crate-private; the targets drive them through these thin
//! wrappers exactly the way the connection does (scan a growing buffer, decode each whole frame).

use bytes::Bytes;

use crate::config::Protocol;
use crate::resp::codec;
use crate::resp::Value;

/// Deepest aggregate nesting the scanner accepts.
pub const MAX_DEPTH: usize = codec::MAX_DEPTH;
/// Largest bulk string the scanner accepts.
pub const MAX_BULK_LEN: usize = codec::MAX_BULK_LEN;
/// Read buffer cap of a connection.
pub const MAX_BUFFER: usize = codec::MAX_BUFFER;

/// The connection's resumable frame scanner.
#[derive(Debug, Default)]
pub struct FrameScanner(codec::FrameScanner);

impl FrameScanner {
    /// A scanner at the start of a frame.
    pub fn new() -> FrameScanner {
        FrameScanner::default()
    }

    /// `Ok(Some(len))`: `buf` starts with a whole frame of `len` bytes (the scanner is then ready
    /// for the next frame, once those bytes are removed); `Ok(None)`: more bytes needed (call
    /// again with the same buffer, appended to); `Err`: not a valid frame.
    pub fn scan(&mut self, buf: &[u8], protocol: Protocol) -> Result<Option<usize>, String> {
        self.0.scan(buf, protocol)
    }
}

/// Decodes one whole frame as delimited by [`FrameScanner`].
pub fn decode(frame: Bytes, protocol: Protocol) -> Result<Value, String> {
    codec::decode(frame, protocol)
}

/// A command as the connection writes it.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = bytes::BytesMut::new();
    codec::encode_command(args, &mut out);
    out.to_vec()
}
