//! What the data path needs to know about a command before sending it: where it may run, whether
//! it blocks its connection, and whether it belongs on a shared connection at all.

use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::error::hint::{Api, Hint};
use crate::error::{Error, ErrorCode, Result};

/// The largest argument a Redis server accepts by default (`proto-max-bulk-len`, 512 MiB). A
/// bigger one is refused before anything is sent: otherwise the server's answer depends on how
/// far the upload got (an error reply, a dropped connection or a timeout), differently each run.
pub const MAX_ARG_LEN: usize = 512 * 1024 * 1024;

/// The largest whole command, all arguments together: Redis's default `client-query-buffer-limit`
/// (1 GiB), beyond which the server drops the connection.
pub const MAX_COMMAND_LEN: usize = 1024 * 1024 * 1024;

/// How a command is routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Reads nothing but data: may go to a replica under `read_from`.
    Read,
    /// Anything else: the primary.
    Write,
    /// Blocks its connection (BLPOP, XREAD BLOCK, WAIT, ...): runs on a dedicated connection so it
    /// cannot stall the shared one. Carries how long it may block (`None`: forever).
    Blocking(Option<Duration>),
}

/// Commands that only read data, so `read_from` may send them to a replica.
const READ_ONLY: &[&str] = &[
    "BITCOUNT",
    "BITFIELD_RO",
    "BITPOS",
    "DBSIZE",
    "DUMP",
    "EXISTS",
    "EXPIRETIME",
    "GEODIST",
    "GEOHASH",
    "GEOPOS",
    "GEORADIUSBYMEMBER_RO",
    "GEORADIUS_RO",
    "GEOSEARCH",
    "GET",
    "GETBIT",
    "GETRANGE",
    "HEXISTS",
    "HGET",
    "HGETALL",
    "HKEYS",
    "HLEN",
    "HMGET",
    "HRANDFIELD",
    "HSCAN",
    "HSTRLEN",
    "HVALS",
    "KEYS",
    "LCS",
    "LINDEX",
    "LLEN",
    "LPOS",
    "LRANGE",
    "MGET",
    "PEXPIRETIME",
    "PFCOUNT",
    "PTTL",
    "RANDOMKEY",
    "SCAN",
    "SCARD",
    "SDIFF",
    "SINTER",
    "SINTERCARD",
    "SISMEMBER",
    "SMEMBERS",
    "SMISMEMBER",
    "SRANDMEMBER",
    "SSCAN",
    "STRLEN",
    "SUBSTR",
    "SUNION",
    "TOUCH",
    "TTL",
    "TYPE",
    "XINFO",
    "XLEN",
    "XPENDING",
    "XRANGE",
    "XREVRANGE",
    "ZCARD",
    "ZCOUNT",
    "ZDIFF",
    "ZINTER",
    "ZINTERCARD",
    "ZLEXCOUNT",
    "ZMSCORE",
    "ZRANDMEMBER",
    "ZRANGE",
    "ZRANGEBYLEX",
    "ZRANGEBYSCORE",
    "ZRANK",
    "ZREVRANGE",
    "ZREVRANGEBYLEX",
    "ZREVRANGEBYSCORE",
    "ZREVRANK",
    "ZSCAN",
    "ZSCORE",
    "ZUNION",
];

/// The transaction commands, refused on the shared connection with a hint that points to the
/// transaction API (each binding spells it its own way): the API and what follows its name.
const TRANSACTION: &[(&str, Api, &str)] = &[
    (
        "MULTI",
        Api::Transaction,
        ", which runs MULTI..EXEC on one connection",
    ),
    ("EXEC", Api::Transaction, ""),
    ("DISCARD", Api::Transaction, ""),
    ("WATCH", Api::Watch, ""),
    ("UNWATCH", Api::Transaction, ""),
];

/// Other commands whose connection state or reply stream cannot be shared between callers.
const CONNECTION_STATE: &[(&str, &str)] = &[
    (
        "SUBSCRIBE",
        "use Client::subscribe(), which keeps a subscriber connection of its own across failovers",
    ),
    (
        "PSUBSCRIBE",
        "Pub/Sub for applications is not available yet",
    ),
    (
        "SSUBSCRIBE",
        "Pub/Sub for applications is not available yet",
    ),
    (
        "UNSUBSCRIBE",
        "Pub/Sub for applications is not available yet",
    ),
    (
        "PUNSUBSCRIBE",
        "Pub/Sub for applications is not available yet",
    ),
    (
        "SUNSUBSCRIBE",
        "Pub/Sub for applications is not available yet",
    ),
    ("MONITOR", "MONITOR takes over its connection"),
    (
        "SELECT",
        "the database is the `db` option, applied on every connection",
    ),
    ("HELLO", "the protocol is the `protocol` option"),
    (
        "AUTH",
        "credentials come from the URL and options, applied on every connection",
    ),
    ("QUIT", "use close()"),
    ("RESET", "it would drop the connection's handshake"),
    ("CLIENT", ""),
];

/// Room for a command's name on the stack: the longest name in these tables is 20 bytes.
const SHORT_NAME: usize = 24;

/// A command's name in upper case, as the tables here spell it. Built per command, so the name
/// of every real command stays on the stack; a longer or non-ASCII one (no table lists such a
/// name) is copied, invalid UTF-8 replaced.
pub(crate) enum Name {
    Short([u8; SHORT_NAME], u8),
    Long(String),
}

impl Name {
    /// The upper-case name of a command whose first argument is `raw`.
    pub(crate) fn of(raw: &[u8]) -> Name {
        if raw.len() <= SHORT_NAME && raw.is_ascii() {
            let mut buf = [0u8; SHORT_NAME];
            buf[..raw.len()].copy_from_slice(raw);
            buf.make_ascii_uppercase();
            Name::Short(buf, raw.len() as u8)
        } else {
            Name::Long(String::from_utf8_lossy(raw).to_ascii_uppercase())
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // ASCII, so always UTF-8.
            Name::Short(buf, len) => std::str::from_utf8(&buf[..*len as usize]).unwrap_or(""),
            Name::Long(name) => name,
        }
    }
}

/// Whether `name` (upper case) is one of the commands known to only read data.
pub(crate) fn is_read_only(name: &str) -> bool {
    READ_ONLY.binary_search(&name).is_ok()
}

/// Classifies `args`; commands that would break a shared connection get a config error that says
/// what to use instead.
pub fn classify<A: AsRef<[u8]>>(args: &[A]) -> Result<Kind> {
    let Some(first) = args.first() else {
        return Err(Error::config("a command needs at least one argument"));
    };
    check_sizes(args, MAX_ARG_LEN, MAX_COMMAND_LEN)?;
    let name = Name::of(first.as_ref());
    let name = name.as_str();
    if let Some((_, api, after)) = TRANSACTION.iter().find(|(n, _, _)| *n == name) {
        return Err(Error::hinted(
            ErrorCode::Config,
            Hint::new(
                format!("{name} can't run on the shared connection: use "),
                *api,
                after,
            ),
        ));
    }
    if let Some((_, why)) = CONNECTION_STATE.iter().find(|(n, _)| *n == name) {
        let sub = args.get(1).map(|a| Name::of(a.as_ref()));
        // CLIENT is fine except the subcommands that change the connection's own state.
        let blocked_client = matches!(
            sub.as_ref().map(Name::as_str),
            Some("REPLY" | "SETNAME" | "TRACKING" | "NO-EVICT" | "NO-TOUCH")
        );
        if name != "CLIENT" || blocked_client {
            let why = if why.is_empty() {
                "it changes the state of a shared connection"
            } else {
                why
            };
            return Err(Error::config(format!(
                "{name} can't run on the shared connection: {why}"
            )));
        }
    }
    if let Some(block) = blocking_time(name, args)? {
        return Ok(Kind::Blocking(block));
    }
    if is_read_only(name) {
        return Ok(Kind::Read);
    }
    Ok(Kind::Write)
}

/// Refuses an argument over `max_arg` bytes or a command over `max_total` bytes in all, naming
/// the argument (0 is the command's name) and its size.
fn check_sizes<A: AsRef<[u8]>>(args: &[A], max_arg: usize, max_total: usize) -> Result<()> {
    let mut total: usize = 0;
    for (i, arg) in args.iter().enumerate() {
        let len = arg.as_ref().len();
        if len > max_arg {
            return Err(Error::config(format!(
                "argument {i} is {len} bytes, over the {max_arg}-byte limit of one Redis argument \
                 (proto-max-bulk-len); nothing was sent"
            )));
        }
        total = total.saturating_add(len);
        if total > max_total {
            return Err(Error::config(format!(
                "the command is over the {max_total}-byte limit of one Redis command \
                 (client-query-buffer-limit) at argument {i} ({len} bytes, {total} bytes so far); \
                 nothing was sent"
            )));
        }
    }
    Ok(())
}

/// For commands that can block: `Some(how long)` (`Some(None)`: no limit). `None` otherwise.
fn blocking_time<A: AsRef<[u8]>>(name: &str, args: &[A]) -> Result<Option<Option<Duration>>> {
    let arg = |i: usize| {
        args.get(i)
            .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
    };
    let last = || arg(args.len().saturating_sub(1));
    let (text, millis) = match name {
        "BLPOP" | "BRPOP" | "BRPOPLPUSH" | "BLMOVE" | "BZPOPMIN" | "BZPOPMAX" => (last(), false),
        "BLMPOP" | "BZMPOP" => (arg(1), false),
        "WAIT" | "WAITAOF" => (last(), true),
        "XREAD" | "XREADGROUP" => {
            let block = args
                .iter()
                .position(|a| a.as_ref().eq_ignore_ascii_case(b"BLOCK"))
                .map(|i| arg(i + 1));
            match block {
                Some(text) => (text, true),
                None => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    let text = text.ok_or_else(|| Error::config(format!("{name}: missing timeout argument")))?;
    let seconds: f64 = text
        .parse()
        .map_err(|_| Error::config(format!("{name}: timeout '{text}' is not a number")))?;
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(Error::config(format!(
            "{name}: timeout '{text}' is negative"
        )));
    }
    let duration = if millis {
        Duration::from_secs_f64(seconds / 1000.0)
    } else {
        Duration::from_secs_f64(seconds)
    };
    Ok(Some((!duration.is_zero()).then_some(duration)))
}

/// Commands encoded once, as they go on the wire: retries send the same bytes again.
#[derive(Clone, Debug)]
pub(crate) struct Encoded {
    pub(crate) bytes: Bytes,
    pub(crate) count: usize,
}

impl Encoded {
    pub(crate) fn one<A: AsRef<[u8]>>(args: &[A]) -> Encoded {
        let mut bytes = BytesMut::new();
        crate::resp::encode_command(args, &mut bytes);
        Encoded {
            bytes: bytes.freeze(),
            count: 1,
        }
    }

    pub(crate) fn many<A: AsRef<[u8]>>(commands: &[Vec<A>]) -> Encoded {
        let mut bytes = BytesMut::new();
        for command in commands {
            crate::resp::encode_command(command, &mut bytes);
        }
        Encoded {
            bytes: bytes.freeze(),
            count: commands.len(),
        }
    }
}

/// Whose deadline a command runs under: it decides whether the block a blocking command asked
/// the server for (BLPOP's timeout, XREAD's BLOCK, WAIT's timeout) counts against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deadline {
    /// The client's `command_timeout_ms`: it bounds waiting for a node, connecting and the
    /// reply, and a blocking command may block beyond it for as long as it asked the server
    /// (`BLPOP k 0`: until data arrives, the caller cancels or the client closes).
    Default(Duration),
    /// The call's own timeout: it ends the whole call, blocking commands included (their
    /// dedicated connection is closed, so the server stops blocking them).
    Call(Duration),
}

impl Deadline {
    /// The call's own timeout when there is one (refused unless it keeps
    /// [`crate::deadline`]'s rule), else the client's default.
    pub(crate) fn of_call(timeout: Option<Duration>, default: Duration) -> Result<Deadline> {
        match timeout {
            Some(timeout) => Ok(Deadline::Call(crate::deadline::check(timeout)?)),
            None => Ok(Deadline::Default(default)),
        }
    }

    pub(crate) fn timeout(self) -> Duration {
        match self {
            Deadline::Default(t) | Deadline::Call(t) => t,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_upper_case_on_the_stack_when_a_table_could_list_them() {
        let listed = READ_ONLY
            .iter()
            .chain(CONNECTION_STATE.iter().map(|(n, _)| n));
        for name in listed {
            assert!(
                matches!(
                    Name::of(name.to_ascii_lowercase().as_bytes()),
                    Name::Short(..)
                ),
                "{name} fits"
            );
            assert_eq!(
                Name::of(name.to_ascii_lowercase().as_bytes()).as_str(),
                *name
            );
        }
        assert_eq!(Name::of(b"gEt").as_str(), "GET");
        assert_eq!(Name::of(b"").as_str(), "");
        let long = "x".repeat(SHORT_NAME + 1);
        assert_eq!(
            Name::of(long.as_bytes()).as_str(),
            long.to_ascii_uppercase()
        );
        assert_eq!(Name::of("géT".as_bytes()).as_str(), "GéT");
        assert_eq!(Name::of(b"g\xffe").as_str(), "G\u{fffd}E");
        // Not a command any table lists: a write, whatever its bytes.
        assert_eq!(classify(&[long.as_bytes()]).unwrap(), Kind::Write);
        assert_eq!(
            classify(&["mUlTi".as_bytes()]).unwrap_err().code(),
            crate::ErrorCode::Config
        );
    }

    #[test]
    fn read_only_table_is_sorted_for_binary_search() {
        assert!(READ_ONLY.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn classification() {
        assert_eq!(classify(&["get", "k"]).unwrap(), Kind::Read);
        assert_eq!(classify(&["SET", "k", "v"]).unwrap(), Kind::Write);
        assert_eq!(classify(&["EVAL", "return 1", "0"]).unwrap(), Kind::Write);
        assert_eq!(
            classify(&["BLPOP", "a", "b", "1.5"]).unwrap(),
            Kind::Blocking(Some(Duration::from_millis(1500)))
        );
        assert_eq!(
            classify(&["BLPOP", "a", "0"]).unwrap(),
            Kind::Blocking(None)
        );
        assert_eq!(
            classify(&["BLMPOP", "2", "1", "k", "LEFT"]).unwrap(),
            Kind::Blocking(Some(Duration::from_secs(2)))
        );
        assert_eq!(
            classify(&["WAIT", "1", "250"]).unwrap(),
            Kind::Blocking(Some(Duration::from_millis(250)))
        );
        assert_eq!(
            classify(&["XREAD", "COUNT", "1", "BLOCK", "100", "STREAMS", "s", "$"]).unwrap(),
            Kind::Blocking(Some(Duration::from_millis(100)))
        );
        assert_eq!(
            classify(&["XREAD", "STREAMS", "s", "0"]).unwrap(),
            Kind::Write
        );
        assert_eq!(classify(&["CLIENT", "ID"]).unwrap(), Kind::Write);
    }

    #[test]
    fn connection_state_commands_are_refused_with_a_hint() {
        for cmd in [
            vec!["MULTI"],
            vec!["watch", "k"],
            vec!["SUBSCRIBE", "c"],
            vec!["SELECT", "1"],
            vec!["CLIENT", "REPLY", "OFF"],
        ] {
            let e = classify(&cmd).unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::Config, "{cmd:?}");
            assert!(e.message().contains("shared connection"), "{e}");
        }
        assert!(classify::<&str>(&[]).is_err());
        assert!(classify(&["BLPOP", "k", "soon"])
            .unwrap_err()
            .message()
            .contains("soon"));
        assert!(classify(&["BLPOP", "k", "-1"]).is_err());
        assert!(classify(&["BLPOP"]).is_err());
    }

    #[test]
    fn sizes_are_checked_against_the_limits() {
        assert!(check_sizes(&["SET", "k", "12345"], 5, 100).is_ok());
        let e = check_sizes(&["SET", "k", "123456"], 5, 100).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.message().contains("argument 2 is 6 bytes"), "{e}");
        assert!(e.message().contains("5-byte limit"), "{e}");
        // Each argument fits, the whole command does not: named where it crosses the limit.
        assert!(check_sizes(&["MSET", "k1", "12345", "k2", "1234"], 5, 17).is_ok());
        let e = check_sizes(&["MSET", "k1", "12345", "k2", "12345"], 5, 17).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(
            e.message().contains(
                "17-byte limit of one Redis command (client-query-buffer-limit) \
                 at argument 4 (5 bytes, 18 bytes so far)"
            ),
            "{e}"
        );
    }

    #[test]
    fn an_argument_over_512_mib_is_refused_before_sending() {
        assert_eq!(MAX_ARG_LEN, 512 * 1024 * 1024);
        // One allocation, zeroed lazily by the allocator (no page is touched): MAX_ARG_LEN + 1.
        let big = vec![0u8; MAX_ARG_LEN + 1];
        let e = classify(&[&b"SET"[..], b"k", &big]).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(
            e.message()
                .contains(&format!("argument 2 is {} bytes", MAX_ARG_LEN + 1)),
            "{e}"
        );
        // Exactly at the limit is fine.
        let at_limit = &big[..MAX_ARG_LEN];
        assert_eq!(
            classify(&[&b"SET"[..], b"k", at_limit]).unwrap(),
            Kind::Write
        );
        // Arguments at the limit each, over the limit of a whole command together (the same
        // memory three times, not three allocations).
        let e =
            classify(&[&b"MSET"[..], b"a", at_limit, b"b", at_limit, b"c", at_limit]).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(
            e.message().contains("limit of one Redis command")
                && e.message()
                    .contains(&format!("at argument 4 ({MAX_ARG_LEN} bytes")),
            "{e}"
        );
        // Blocking commands and refused commands get the same check first.
        let e = classify(&[&b"BLPOP"[..], &big, b"0"]).unwrap_err();
        assert!(e.message().contains("argument 1 is"), "{e}");
    }
}
