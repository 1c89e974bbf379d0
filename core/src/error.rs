//! One error type with the stable codes every language binding shares.
//!
//! The code is the contract: bindings map it to their own exception classes and the C ABI to an
//! integer, so codes are never renumbered or renamed. The message is for humans and never contains
//! a secret (passwords are redacted before any text reaches an [`Error`]).

use std::fmt;

/// The stable error codes of DESIGN.md, in the order of their C integer values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The URL or an option is invalid; the message names the offending part.
    Config,
    /// No configured or learned sentinel could be reached within the deadline.
    SentinelsUnreachable,
    /// Every sentinel that answered said it does not monitor the service.
    ServiceUnknown,
    /// Sentinels know the service but none reported a primary that is up and verified.
    NoHealthyPrimary,
    /// An operation did not finish before its deadline.
    Timeout,
    /// The connection broke while a request was in flight.
    ConnectionLost,
    /// The server answered with an error reply; see [`Error::server_code`].
    Server,
    /// The peer sent something that is not valid RESP or not the expected shape.
    Protocol,
    /// TLS setup or handshake failed.
    Tls,
    /// The server refused the credentials.
    Auth,
    /// The client or monitor was closed.
    Closed,
    /// The bounded queue of waiting commands is full.
    QueueFull,
    /// A bug in this library (a caught panic): the operation failed, the process goes on.
    Internal,
    /// With `wait_replicas`: the write ran on the primary, but fewer replicas than asked
    /// confirmed it within `wait_timeout_ms`, so a failover may lose it. Never retried.
    NotReplicated,
}

impl ErrorCode {
    /// Every code, in the order of [`ErrorCode::as_i32`].
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::Config,
        ErrorCode::SentinelsUnreachable,
        ErrorCode::ServiceUnknown,
        ErrorCode::NoHealthyPrimary,
        ErrorCode::Timeout,
        ErrorCode::ConnectionLost,
        ErrorCode::Server,
        ErrorCode::Protocol,
        ErrorCode::Tls,
        ErrorCode::Auth,
        ErrorCode::Closed,
        ErrorCode::QueueFull,
        ErrorCode::Internal,
        ErrorCode::NotReplicated,
    ];

    /// The snake_case name shared by all bindings (`"no_healthy_primary"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Config => "config",
            ErrorCode::SentinelsUnreachable => "sentinels_unreachable",
            ErrorCode::ServiceUnknown => "service_unknown",
            ErrorCode::NoHealthyPrimary => "no_healthy_primary",
            ErrorCode::Timeout => "timeout",
            ErrorCode::ConnectionLost => "connection_lost",
            ErrorCode::Server => "server",
            ErrorCode::Protocol => "protocol",
            ErrorCode::Tls => "tls",
            ErrorCode::Auth => "auth",
            ErrorCode::Closed => "closed",
            ErrorCode::QueueFull => "queue_full",
            ErrorCode::Internal => "internal",
            ErrorCode::NotReplicated => "not_replicated",
        }
    }

    /// One line for users: what the code means (the generated binding tables carry it).
    pub fn description(self) -> &'static str {
        match self {
            ErrorCode::Config => "the URL or an option is invalid",
            ErrorCode::SentinelsUnreachable => "no sentinel could be reached within the deadline",
            ErrorCode::ServiceUnknown => {
                "every sentinel that answered does not monitor the service"
            }
            ErrorCode::NoHealthyPrimary => "no sentinel reported a primary that is up and verified",
            ErrorCode::Timeout => "the operation did not finish before its deadline",
            ErrorCode::ConnectionLost => {
                "the connection broke while a request was in flight (it may or may not have run)"
            }
            ErrorCode::Server => "the server answered with an error reply",
            ErrorCode::Protocol => "the peer sent an invalid or unexpected reply",
            ErrorCode::Tls => "TLS setup or handshake failed",
            ErrorCode::Auth => "the server refused the credentials",
            ErrorCode::Closed => "the client is closed",
            ErrorCode::QueueFull => "too many commands are waiting for a primary",
            ErrorCode::Internal => "internal error (a bug in sentinel-recovery, caught)",
            ErrorCode::NotReplicated => {
                "the write ran on the primary but too few replicas confirmed it; a failover may lose it"
            }
        }
    }

    /// The integer used across the C ABI: 1-based, 0 is reserved for success.
    pub fn as_i32(self) -> i32 {
        ErrorCode::ALL
            .iter()
            .position(|c| *c == self)
            .map(|i| i as i32 + 1)
            .unwrap_or(-1)
    }

    /// Inverse of [`ErrorCode::as_i32`].
    pub fn from_i32(value: i32) -> Option<ErrorCode> {
        usize::try_from(value - 1)
            .ok()
            .and_then(|i| ErrorCode::ALL.get(i).copied())
    }
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

    /// The same error with context put in front of the message (`"sentinel 10.0.0.1:26379: ..."`).
    pub fn context(mut self, context: impl fmt::Display) -> Error {
        self.message = format!("{context}: {}", self.message);
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
    fn codes_round_trip_through_integers() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_i32(code.as_i32()), Some(code));
        }
        assert_eq!(ErrorCode::Config.as_i32(), 1);
        assert_eq!(ErrorCode::from_i32(0), None);
        assert_eq!(ErrorCode::Internal.as_i32(), 13);
        assert_eq!(ErrorCode::NotReplicated.as_i32(), 14);
        assert_eq!(ErrorCode::from_i32(15), None);
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
