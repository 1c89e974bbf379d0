//! The RESP protocol version.

/// The RESP protocol version to ask for first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum Protocol {
    /// RESP2 only: no `HELLO`.
    Resp2,
    /// `HELLO 3` first, falling back to RESP2 where the server refuses it.
    #[default]
    Resp3,
}
