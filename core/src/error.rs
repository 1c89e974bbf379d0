//! One error type with the stable codes every language binding shares.
//!
//! The code is the contract: bindings map it to their own exception classes and the C ABI to an
//! integer, so codes are never renumbered or renamed. The message is for humans and never contains
//! a secret (passwords are redacted before any text reaches an [`Error`]).

use std::fmt;

pub mod hint;

use hint::{ApiNames, Hint};

/// Declares the error codes once, in the style of rustls-ffi's `u32_enum_builder!`: each code with
/// its doc, its explicit C value, its snake_case name and its one-line description. From that
/// one list come the enum (the value is its discriminant), [`ErrorCode::ALL`], the name and
/// description lookups, [`ErrorCode::as_i32`] and [`ErrorCode::from_i32`], and through
/// `cargo run -p xtask -- tables` the C constants and every binding's table and error classes.
///
/// A value is a C ABI contract: never change one, never give a removed code's value to another
/// (list it in [`ErrorCode::RETIRED`]); the test `the_table_is_the_c_abi` holds them.
macro_rules! error_codes {
    (
        $(
            $(#[doc = $doc:literal])+
            $variant:ident = $value:literal => $name:literal, $description:literal;
        )+
    ) => {
        /// The stable error codes of DESIGN.md, each with its explicit C value.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
        #[non_exhaustive]
        #[repr(i32)]
        pub enum ErrorCode {
            $(
                $(#[doc = $doc])+
                #[serde(rename = $name)]
                $variant = $value,
            )+
        }

        impl ErrorCode {
            /// Every code, in the order of the table (ascending [`ErrorCode::as_i32`]).
            pub const ALL: [ErrorCode; [$($value),+].len()] = [$(ErrorCode::$variant),+];

            /// The snake_case name shared by all bindings (`"no_healthy_primary"`, ...).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)+
                }
            }

            /// One line for users: what the code means (the generated binding tables carry it).
            pub fn description(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $description,)+
                }
            }

            /// The code's documentation as declared (one `///` line per line, each with its
            /// leading space): the generated error classes of the bindings carry it.
            pub fn doc(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => concat!($($doc, "\n"),+),)+
                }
            }

            /// The integer used across the C ABI (0 is success, never a code).
            pub fn as_i32(self) -> i32 {
                self as i32
            }

            /// Inverse of [`ErrorCode::as_i32`].
            pub fn from_i32(value: i32) -> Option<ErrorCode> {
                match value {
                    $($value => Some(ErrorCode::$variant),)+
                    _ => None,
                }
            }

            /// Inverse of [`ErrorCode::as_str`].
            pub fn from_name(name: &str) -> Option<ErrorCode> {
                match name {
                    $($name => Some(ErrorCode::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    /// The URL or an option is invalid; the message names the offending part.
    Config = 1 => "config", "the URL or an option is invalid";
    /// No configured or learned sentinel could be reached within the deadline.
    SentinelsUnreachable = 2 => "sentinels_unreachable", "no sentinel could be reached within the deadline";
    /// Every sentinel that answered said it does not monitor the service.
    ServiceUnknown = 3 => "service_unknown", "every sentinel that answered does not monitor the service";
    /// Sentinels know the service but none reported a primary that is up and verified.
    NoHealthyPrimary = 4 => "no_healthy_primary", "no sentinel reported a primary that is up and verified";
    /// An operation did not finish before its deadline.
    Timeout = 5 => "timeout", "the operation did not finish before its deadline";
    /// The connection broke while a request was in flight; the command may or may not have run.
    ConnectionLost = 6 => "connection_lost", "the connection broke while a request was in flight (it may or may not have run)";
    /// The server answered with an error reply; its first word is the error's server code.
    Server = 7 => "server", "the server answered with an error reply";
    /// The peer sent something that is not valid RESP or not the expected shape.
    Protocol = 8 => "protocol", "the peer sent an invalid or unexpected reply";
    /// TLS setup or handshake failed.
    Tls = 9 => "tls", "TLS setup or handshake failed";
    /// The server refused the credentials.
    Auth = 10 => "auth", "the server refused the credentials";
    /// The client was closed.
    Closed = 11 => "closed", "the client is closed";
    /// The bounded queue of commands waiting for a primary is full (option `queue_size`).
    QueueFull = 12 => "queue_full", "too many commands are waiting for a primary";
    /// A bug in sentinel-recovery, caught (a panic in the core): the operation failed, the
    /// process goes on. Please report it.
    Internal = 13 => "internal", "internal error (a bug in sentinel-recovery, caught)";
    /// With `wait_replicas`: the write ran on the primary, but fewer replicas than asked
    /// confirmed it within `wait_timeout_ms`, so a failover may lose it. Never retried: it ran.
    NotReplicated = 14 => "not_replicated", "the write ran on the primary but too few replicas confirmed it; a failover may lose it";
}

impl ErrorCode {
    /// Values of codes that were removed: never given to a code again (none so far).
    pub const RETIRED: [i32; 0] = [];

    /// The C ABI's own codes (value, name, description), which no [`ErrorCode`] may take: the
    /// C header gets them with the others (`SR_ERR_INVALID_ARGUMENT`, ...).
    pub const C_ABI_ONLY: [(i32, &'static str, &'static str); 2] = [
        (
            100,
            "invalid_argument",
            "C ABI only: a NULL pointer where one is required, an empty command, an index out of range, a string that is not UTF-8, or a call not allowed where it was made",
        ),
        (
            101,
            "wrong_type",
            "C ABI only: a reply accessor was used on a reply of another type",
        ),
    ];
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with a stable [`ErrorCode`] and a human-readable message free of secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    message: String,
    server_code: Option<String>,
    /// For an error that points to an API: the message's structure, rendered per binding.
    hint: Option<Box<Hint>>,
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with the given code and message. The message must not contain secrets.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
            server_code: None,
            hint: None,
        }
    }

    /// An error whose message is `hint`, in the Rust API's words until a binding renders it in
    /// its own ([`Error::with_api_names`]).
    pub fn hinted(code: ErrorCode, hint: Hint) -> Error {
        let message = hint.render(&hint::RUST);
        Error {
            hint: Some(Box::new(hint)),
            ..Error::new(code, message)
        }
    }

    /// An error reply from a server, e.g. `ERR unknown command` or `READONLY You can't write`.
    ///
    /// The first word of the reply is kept as [`Error::server_code`]; auth failures
    /// (`WRONGPASS`, `NOAUTH`, `WRONGTYPE` is not one) get [`ErrorCode::Auth`].
    pub fn server(reply: &str) -> Error {
        let (word, rest) = reply.split_once(' ').unwrap_or((reply, ""));
        let code = match word {
            "WRONGPASS" | "NOAUTH" => ErrorCode::Auth,
            "ERR"
                if rest.starts_with("invalid password")
                    || rest.starts_with("invalid username-password")
                    || rest.starts_with("AUTH <password> called without") =>
            {
                ErrorCode::Auth
            }
            _ => ErrorCode::Server,
        };
        Error {
            code,
            message: reply.to_string(),
            server_code: Some(word.to_string()),
            hint: None,
        }
    }

    /// Shorthand for [`ErrorCode::Config`].
    pub fn config(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Config, message)
    }

    /// Shorthand for [`ErrorCode::Protocol`].
    pub fn protocol(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Protocol, message)
    }

    /// Shorthand for [`ErrorCode::Timeout`].
    pub fn timeout(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Timeout, message)
    }

    /// Shorthand for [`ErrorCode::ConnectionLost`].
    pub fn connection_lost(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::ConnectionLost, message)
    }

    /// Shorthand for [`ErrorCode::Closed`].
    pub fn closed() -> Error {
        Error::new(ErrorCode::Closed, "the client is closed")
    }

    /// [`ErrorCode::Closed`] for a host mailbox that was closed: it accepts no operation, event
    /// subscription or log sink any more (see `host::mailbox`).
    pub fn mailbox_closed() -> Error {
        Error::new(ErrorCode::Closed, "the mailbox is closed")
    }

    /// [`ErrorCode::Closed`] for an operation its caller cancelled. Said once here so every
    /// language reports it the same way: a command already sent may have run, and is not retried.
    pub fn cancelled() -> Error {
        Error::new(
            ErrorCode::Closed,
            "cancelled by the caller; a command already sent may have run on the server, and is \
             never retried",
        )
    }

    /// [`ErrorCode::Internal`] for a caught panic, with the panic's message (panic messages come
    /// from this library's own code, never from secrets).
    pub fn internal(panic: &(dyn std::any::Any + Send)) -> Error {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Error::new(
            ErrorCode::Internal,
            format!("internal error (a bug in sentinel-recovery): panic: {what}"),
        )
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message, without the code prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// For [`ErrorCode::Server`] and server-reported [`ErrorCode::Auth`]: the first word of the
    /// server's error reply (`ERR`, `READONLY`, `WRONGPASS`, ...).
    pub fn server_code(&self) -> Option<&str> {
        self.server_code.as_deref()
    }

    /// The hint of an error that points to an API (see [`hint`]).
    pub fn hint(&self) -> Option<&Hint> {
        self.hint.as_deref()
    }

    /// The same error with its hint, if any, in the words of `names`' users (the message of an
    /// error without a hint is kept as it is).
    pub fn with_api_names(mut self, names: &ApiNames) -> Error {
        if let Some(hint) = &self.hint {
            self.message = hint.render(names);
        }
        self
    }

    /// The same error with context put in front of the message (`"sentinel 10.0.0.1:26379: ..."`).
    pub fn context(mut self, context: impl fmt::Display) -> Error {
        let context = format!("{context}: ");
        self.message.insert_str(0, &context);
        if let Some(hint) = &mut self.hint {
            hint.context(&context);
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Error {
        match err.kind() {
            std::io::ErrorKind::TimedOut => Error::timeout(err.to_string()),
            _ => Error::connection_lost(err.to_string()),
        }
    }
}

impl serde::Serialize for Error {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Error", 3)?;
        st.serialize_field("code", &self.code)?;
        st.serialize_field("message", &self.message)?;
        st.serialize_field("server_code", &self.server_code)?;
        st.end()
    }
}

/// A duration for error texts: whole milliseconds below a second ("993 ms"), seconds with at
/// most one decimal from there on ("1 s", "2.5 s").
pub(crate) fn duration_text(d: std::time::Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 999.5 {
        format!("{} ms", ms.round() as u64)
    } else {
        let tenths = (d.as_secs_f64() * 10.0).round() as u64;
        if tenths.is_multiple_of(10) {
            format!("{} s", tenths / 10)
        } else {
            format!("{}.{} s", tenths / 10, tenths % 10)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_milliseconds_or_seconds() {
        assert_eq!(
            duration_text(std::time::Duration::from_nanos(993_316_323)),
            "993 ms"
        );
        assert_eq!(duration_text(std::time::Duration::from_millis(0)), "0 ms");
        assert_eq!(
            duration_text(std::time::Duration::from_millis(200)),
            "200 ms"
        );
        assert_eq!(
            duration_text(std::time::Duration::from_micros(999_700)),
            "1 s"
        );
        assert_eq!(duration_text(std::time::Duration::from_secs(1)), "1 s");
        assert_eq!(
            duration_text(std::time::Duration::from_millis(1_540)),
            "1.5 s"
        );
        assert_eq!(duration_text(std::time::Duration::from_secs(30)), "30 s");
    }

    #[test]
    fn codes_round_trip_through_integers_and_names() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_i32(code.as_i32()), Some(code));
            assert_eq!(ErrorCode::from_name(code.as_str()), Some(code));
            assert_eq!(serde_json::to_string(&code).unwrap(), format!("\"{code}\""));
            assert!(!code.doc().trim().is_empty(), "{code}");
        }
        assert_eq!(ErrorCode::from_i32(0), None);
        assert_eq!(ErrorCode::from_i32(15), None);
        assert_eq!(ErrorCode::from_name("nope"), None);
    }

    /// The C values are an ABI: this literal list changes only by appending a new code with a
    /// new value. A removed code's value goes to RETIRED, never to another code.
    #[test]
    fn the_table_is_the_c_abi() {
        let table: Vec<(i32, &str)> = ErrorCode::ALL
            .iter()
            .map(|c| (c.as_i32(), c.as_str()))
            .collect();
        assert_eq!(
            table,
            [
                (1, "config"),
                (2, "sentinels_unreachable"),
                (3, "service_unknown"),
                (4, "no_healthy_primary"),
                (5, "timeout"),
                (6, "connection_lost"),
                (7, "server"),
                (8, "protocol"),
                (9, "tls"),
                (10, "auth"),
                (11, "closed"),
                (12, "queue_full"),
                (13, "internal"),
                (14, "not_replicated"),
            ]
        );
        let mut values: Vec<i32> = table.iter().map(|(v, _)| *v).collect();
        values.extend(ErrorCode::C_ABI_ONLY.iter().map(|(v, _, _)| *v));
        let mut unique = values.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), values.len(), "a value used twice: {values:?}");
        assert!(values.iter().all(|v| *v > 0), "0 is success");
        for retired in ErrorCode::RETIRED {
            assert!(!values.contains(&retired), "retired value {retired} reused");
        }
        let mut names: Vec<&str> = table.iter().map(|(_, n)| *n).collect();
        names.extend(ErrorCode::C_ABI_ONLY.iter().map(|(_, n, _)| *n));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a name used twice");
    }

    #[test]
    fn server_replies_keep_their_code_and_auth_is_recognised() {
        let e = Error::server("READONLY You can't write against a read only replica.");
        assert_eq!(e.code(), ErrorCode::Server);
        assert_eq!(e.server_code(), Some("READONLY"));
        let e = Error::server("WRONGPASS invalid username-password pair or user is disabled.");
        assert_eq!(e.code(), ErrorCode::Auth);
        assert_eq!(
            e.to_string(),
            "auth: WRONGPASS invalid username-password pair or user is disabled."
        );
    }
}
