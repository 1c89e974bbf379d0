//! The read buffer with its frame scanner, and who holds it: the task or one caller.

use std::io;

use bytes::BytesMut;

use crate::resp::codec::{FrameScanner, MAX_BUFFER};
use crate::resp::{codec, Value};
use crate::types::Protocol;

/// Bytes requested from the socket per read; also the spare room kept in the read buffer.
pub(super) const READ_CHUNK: usize = 64 * 1024;
/// Buffers that grew past this for one large reply or pipeline are released once empty.
pub(super) const KEEP_CAPACITY: usize = 1024 * 1024;

/// The read buffer and the scanner that knows how far the frame at its start has been seen.
pub(super) struct ReadSide {
    pub(super) rbuf: BytesMut,
    pub(super) scanner: FrameScanner,
}

impl ReadSide {
    pub(super) fn new() -> ReadSide {
        ReadSide {
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            scanner: FrameScanner::default(),
        }
    }

    /// The next complete frame, decoded; `None` while more bytes are needed. `Err` for a frame
    /// that is not valid RESP or cannot fit in [`MAX_BUFFER`].
    pub(super) fn next_frame(
        &mut self,
        protocol: Protocol,
    ) -> std::result::Result<Option<Value>, String> {
        match self.scanner.scan(&self.rbuf, protocol)? {
            Some(len) => {
                let frame = self.rbuf.split_to(len).freeze();
                codec::decode(frame, protocol).map(Some)
            }
            None if self.rbuf.len() > MAX_BUFFER => {
                Err(format!("reply larger than {MAX_BUFFER} bytes"))
            }
            None => {
                if self.rbuf.is_empty() && self.rbuf.capacity() > KEEP_CAPACITY {
                    self.rbuf = BytesMut::with_capacity(READ_CHUNK);
                }
                Ok(None)
            }
        }
    }

    /// Room for the next read.
    pub(super) fn make_room(&mut self) {
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
            self.rbuf.reserve(READ_CHUNK);
        }
    }
}

/// Who holds the read side of a plain TCP connection, and what the task must hear once it is
/// handed back.
pub(super) struct ReadState {
    /// `None` while a caller holds it (and always under TLS, whose task keeps its own).
    pub(super) side: Option<ReadSide>,
    /// The task found the side lent (and forgot the socket's readiness): the lender looks
    /// whether bytes are waiting when it hands the side back.
    pub(super) deferred: bool,
    /// Bytes were waiting when the side came back: the task reads without waiting for the
    /// readiness it forgot.
    pub(super) recheck: bool,
    /// The caller handed back bytes that came after its reply: the task decodes them.
    pub(super) unprocessed: bool,
    /// What the caller's read ran into; the task ends the connection with it.
    pub(super) broken: Option<Broken>,
    /// The side is back, but the socket is still out of what the runtime watches: an event
    /// loop watches it instead ([`OwnReply::keep_watching`](super::OwnReply::keep_watching)) until it gives it back, or the
    /// task, running for something else, takes it back itself.
    pub(super) watched_elsewhere: bool,
}

impl ReadState {
    pub(super) fn new(side: Option<ReadSide>) -> ReadState {
        ReadState {
            side,
            deferred: false,
            recheck: false,
            unprocessed: false,
            broken: None,
            watched_elsewhere: false,
        }
    }
}

/// A failure a caller's read found, which only the task can act on.
pub(super) enum Broken {
    Io(io::Error),
    Invalid(String),
}
