//! What a request means for its session: which per-connection state it touches (and so must be
//! replayed after a move), whether it opens or ends a transaction, blocks, subscribes, or writes.
//! Decisions only; no I/O.

use bytes::Bytes;

/// The pub/sub families: each has its own subscribe and unsubscribe command and its own set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Family {
    /// SUBSCRIBE / UNSUBSCRIBE, messages `message`.
    Channels,
    /// PSUBSCRIBE / PUNSUBSCRIBE, messages `pmessage`.
    Patterns,
    /// SSUBSCRIBE / SUNSUBSCRIBE, messages `smessage`.
    Shard,
}

impl Family {
    /// All three, in the order they are replayed.
    pub(super) const ALL: [Family; 3] = [Family::Channels, Family::Patterns, Family::Shard];

    /// The subscribe command, as sent on replay.
    pub(super) fn subscribe(self) -> &'static [u8] {
        match self {
            Family::Channels => b"SUBSCRIBE",
            Family::Patterns => b"PSUBSCRIBE",
            Family::Shard => b"SSUBSCRIBE",
        }
    }

    /// The index into a per-family array.
    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// What the session does around a request, from its name (and subcommand).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Anything with no per-connection meaning to the proxy.
    Plain,
    /// `AUTH [user] pass`: replayed when the server accepted it.
    Auth,
    /// `HELLO [proto [AUTH user pass] [SETNAME name]]`.
    Hello,
    /// `SELECT db`.
    Select,
    /// `CLIENT SETNAME name`.
    SetName,
    /// `CLIENT SETINFO attr value`.
    SetInfo,
    /// `CLIENT TRACKING on|off ...`: a session with tracking on is closed at a move.
    Tracking,
    /// `READONLY` / `READWRITE`.
    ReadOnly(bool),
    /// `MULTI`.
    Multi,
    /// `EXEC`.
    Exec,
    /// `DISCARD`.
    Discard,
    /// `WATCH key...`.
    Watch,
    /// `UNWATCH`.
    Unwatch,
    /// `(P|S)SUBSCRIBE x...`: one confirmation per argument, no ordinary reply.
    Subscribe(Family),
    /// `(P|S)UNSUBSCRIBE [x...]`: one confirmation per argument, or per member when none.
    Unsubscribe(Family),
    /// `MONITOR`: every later reply is the server's feed; the session cannot move.
    Monitor,
    /// `RESET`: the connection's state back to its defaults.
    Reset,
    /// `QUIT`: the server replies +OK and closes.
    Quit,
}

/// Classifies `args` (non-empty).
pub(super) fn kind(args: &[Bytes]) -> Kind {
    let name = &args[0];
    let sub = args.get(1).map(|s| s.as_ref());
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    let sub_is = |n: &str| sub.is_some_and(|s| s.eq_ignore_ascii_case(n.as_bytes()));
    let family_args = args.len() > 1;
    if is("auth") {
        Kind::Auth
    } else if is("hello") {
        Kind::Hello
    } else if is("select") {
        Kind::Select
    } else if is("client") && sub_is("setname") {
        Kind::SetName
    } else if is("client") && sub_is("setinfo") {
        Kind::SetInfo
    } else if is("client") && sub_is("tracking") {
        Kind::Tracking
    } else if is("readonly") {
        Kind::ReadOnly(true)
    } else if is("readwrite") {
        Kind::ReadOnly(false)
    } else if is("multi") {
        Kind::Multi
    } else if is("exec") {
        Kind::Exec
    } else if is("discard") {
        Kind::Discard
    } else if is("watch") {
        Kind::Watch
    } else if is("unwatch") {
        Kind::Unwatch
    } else if is("subscribe") && family_args {
        Kind::Subscribe(Family::Channels)
    } else if is("psubscribe") && family_args {
        Kind::Subscribe(Family::Patterns)
    } else if is("ssubscribe") && family_args {
        Kind::Subscribe(Family::Shard)
    } else if is("unsubscribe") {
        Kind::Unsubscribe(Family::Channels)
    } else if is("punsubscribe") {
        Kind::Unsubscribe(Family::Patterns)
    } else if is("sunsubscribe") {
        Kind::Unsubscribe(Family::Shard)
    } else if is("monitor") {
        Kind::Monitor
    } else if is("reset") {
        Kind::Reset
    } else if is("quit") {
        Kind::Quit
    } else {
        Kind::Plain
    }
}

/// Whether a command may block its connection for longer than a server round trip: the B*
/// pops and moves, XREAD/XREADGROUP with BLOCK, WAIT, WAITAOF. At a move such a command is not
/// waited for: its connection is given up and the client told `UNCERTAIN`.
pub(super) fn blocks(args: &[Bytes]) -> bool {
    let name = &args[0];
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    if is("xread") || is("xreadgroup") {
        return args[1..].iter().any(|a| a.eq_ignore_ascii_case(b"block"));
    }
    [
        "blpop",
        "brpop",
        "brpoplpush",
        "blmove",
        "blmpop",
        "bzpopmin",
        "bzpopmax",
        "bzmpop",
        "wait",
        "waitaof",
    ]
    .iter()
    .any(|n| is(n))
}

/// The kind of a pub/sub frame by its first element: a confirmation of `family` (and whether it
/// confirms a subscribe), or a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PushKind {
    /// `subscribe` / `psubscribe` / `ssubscribe` (true) or their `un` forms (false).
    Confirmation(Family, bool),
    /// `message`, `pmessage`, `smessage`.
    Message,
    /// Any other push (RESP3 only: `invalidate`, ...).
    Other,
}

/// Reads the kind of a push or RESP2 pub/sub array from its first element.
pub(super) fn push_kind(first: &[u8]) -> PushKind {
    let lower = first.to_ascii_lowercase();
    match lower.as_slice() {
        b"subscribe" => PushKind::Confirmation(Family::Channels, true),
        b"unsubscribe" => PushKind::Confirmation(Family::Channels, false),
        b"psubscribe" => PushKind::Confirmation(Family::Patterns, true),
        b"punsubscribe" => PushKind::Confirmation(Family::Patterns, false),
        b"ssubscribe" => PushKind::Confirmation(Family::Shard, true),
        b"sunsubscribe" => PushKind::Confirmation(Family::Shard, false),
        b"message" | b"pmessage" | b"smessage" => PushKind::Message,
        _ => PushKind::Other,
    }
}

/// A request's arguments from words, for the unit tests.
#[cfg(test)]
pub(super) fn args(words: &[&str]) -> Vec<Bytes> {
    words
        .iter()
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use args as a;

    #[test]
    fn kinds_follow_names_and_subcommands_in_any_case() {
        assert_eq!(kind(&a(&["client", "SetName", "x"])), Kind::SetName);
        assert_eq!(kind(&a(&["CLIENT", "LIST"])), Kind::Plain);
        assert_eq!(
            kind(&a(&["psubscribe", "a*"])),
            Kind::Subscribe(Family::Patterns)
        );
        // Without arguments it is the server's arity error, an ordinary reply.
        assert_eq!(kind(&a(&["subscribe"])), Kind::Plain);
        assert_eq!(
            kind(&a(&["unsubscribe"])),
            Kind::Unsubscribe(Family::Channels)
        );
    }
}
