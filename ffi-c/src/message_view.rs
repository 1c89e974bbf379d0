//! The message view (`sr_message_t`): one pub/sub message as C borrows it, handed over by a
//! message callback or a mailbox delivery; below both `mailbox` and `pubsub`.

use sr::Message;

/// One message, borrowed for the duration of the message callback only (copy what you need).
/// The byte strings are not NUL-terminated.
#[repr(C)]
pub struct sr_message_t {
    /// The channel it was published to.
    pub channel: *const u8,
    /// Length of `channel` in bytes.
    pub channel_len: usize,
    /// The pattern it matched (a PSUBSCRIBE subscription), or NULL for a channel subscription.
    pub pattern: *const u8,
    /// Length of `pattern` in bytes (0 when NULL).
    pub pattern_len: usize,
    /// The payload, as published.
    pub payload: *const u8,
    /// Length of `payload` in bytes.
    pub payload_len: usize,
}

/// A message as C sees it, borrowing from `m`.
pub(crate) fn message_view(m: &Message) -> sr_message_t {
    let (pattern, pattern_len) = match &m.pattern {
        Some(p) => (p.as_ptr(), p.len()),
        None => (std::ptr::null(), 0),
    };
    sr_message_t {
        channel: m.channel.as_ptr(),
        channel_len: m.channel.len(),
        pattern,
        pattern_len,
        payload: m.payload.as_ptr(),
        payload_len: m.payload.len(),
    }
}
