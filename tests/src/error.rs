//! The testkit's one error type.

use std::fmt;

/// Everything that can go wrong in the testkit. `Display` says what was being done.
#[derive(Debug)]
pub enum TestkitError {
    /// An I/O error while doing `context`.
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A [`crate::wait_until`] (or another wait) ran out of time; the text names what was awaited and the
    /// last state seen.
    Timeout(String),
    /// The server answered with an error reply (text without the leading `-`).
    Server(String),
    /// The peer sent something that is not valid RESP2, or an unexpected reply shape.
    Protocol(String),
    /// A fixture could not be set up (missing binary, process exited at start, bad spec ...).
    Setup(String),
}

impl TestkitError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> TestkitError {
        TestkitError::Io {
            context: context.into(),
            source,
        }
    }
}

impl TestkitError {
    /// Appends `detail` (e.g. the last state seen) to the text of a `Timeout`, `Setup` or
    /// `Protocol` error; other kinds are returned unchanged.
    pub fn with_detail(self, detail: &str) -> TestkitError {
        match self {
            TestkitError::Timeout(s) => TestkitError::Timeout(format!("{s}; {detail}")),
            TestkitError::Setup(s) => TestkitError::Setup(format!("{s}; {detail}")),
            TestkitError::Protocol(s) => TestkitError::Protocol(format!("{s}; {detail}")),
            other => other,
        }
    }
}

impl fmt::Display for TestkitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestkitError::Io { context, source } => write!(f, "{context}: {source}"),
            TestkitError::Timeout(what) => write!(f, "timed out waiting for {what}"),
            TestkitError::Server(msg) => write!(f, "server error: {msg}"),
            TestkitError::Protocol(msg) => write!(f, "protocol error: {msg}"),
            TestkitError::Setup(msg) => write!(f, "setup failed: {msg}"),
        }
    }
}

impl std::error::Error for TestkitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TestkitError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
