//! Replies as a uniffi enum: the core's [`Value`] variant for variant, with an error reply (nested
//! in an aggregate, or one failed command of a pipeline) carrying its shared code.

use sentinel_recovery::{Error, Value};

/// One reply from a server.
#[derive(Clone, Debug, PartialEq, uniffi::Enum)]
pub enum Reply {
    /// A null bulk string, null array (RESP2) or null (RESP3).
    Nil,
    /// An integer.
    Int {
        /// The value.
        value: i64,
    },
    /// A RESP3 double.
    Double {
        /// The value.
        value: f64,
    },
    /// A RESP3 boolean.
    Bool {
        /// The value.
        value: bool,
    },
    /// A RESP3 big number, as its decimal text.
    BigNumber {
        /// The decimal text.
        text: String,
    },
    /// A bulk (blob) string, as bytes.
    Bulk {
        /// The bytes.
        value: Vec<u8>,
    },
    /// A simple status string such as `OK`.
    Simple {
        /// The text.
        value: String,
    },
    /// A RESP3 verbatim string with its three-letter format (`txt`, `mkd`).
    Verbatim {
        /// The format tag.
        format: String,
        /// The text's bytes.
        value: Vec<u8>,
    },
    /// An array.
    Array {
        /// The elements.
        items: Vec<Reply>,
    },
    /// A RESP3 map, in the order the server sent its entries.
    Map {
        /// The entries.
        entries: Vec<MapEntry>,
    },
    /// A RESP3 set.
    Set {
        /// The elements.
        items: Vec<Reply>,
    },
    /// A RESP3 push message.
    Push {
        /// The elements.
        items: Vec<Reply>,
    },
    /// An error: an error reply inside an aggregate (code `server`), or a pipeline's failed
    /// command (any code).
    Error {
        /// The shared error code name (`server`, `connection_lost`, ...).
        code: String,
        /// The message (for a server error, the server's text).
        message: String,
        /// For a server error, its first word (`ERR`, `WRONGTYPE`, ...).
        server_code: Option<String>,
    },
}

/// One key/value pair of a [`Reply::Map`].
#[derive(Clone, Debug, PartialEq, uniffi::Record)]
pub struct MapEntry {
    /// The key.
    pub key: Reply,
    /// The value.
    pub value: Reply,
}

impl From<Value> for Reply {
    fn from(value: Value) -> Reply {
        let list = |items: Vec<Value>| items.into_iter().map(Reply::from).collect();
        match value {
            Value::Nil => Reply::Nil,
            Value::Int(value) => Reply::Int { value },
            Value::Double(value) => Reply::Double { value },
            Value::Boolean(value) => Reply::Bool { value },
            Value::BigNumber(b) => Reply::BigNumber {
                text: String::from_utf8_lossy(&b).into_owned(),
            },
            Value::Bulk(b) => Reply::Bulk { value: b.to_vec() },
            Value::Simple(value) => Reply::Simple { value },
            Value::Verbatim { format, text } => Reply::Verbatim {
                format,
                value: text.to_vec(),
            },
            Value::Array(items) => Reply::Array { items: list(items) },
            Value::Map(pairs) => Reply::Map {
                entries: pairs
                    .into_iter()
                    .map(|(k, v)| MapEntry {
                        key: k.into(),
                        value: v.into(),
                    })
                    .collect(),
            },
            Value::Set(items) => Reply::Set { items: list(items) },
            Value::Push(items) => Reply::Push { items: list(items) },
            Value::Error(text) => Reply::from_error(&Error::server(&text)),
        }
    }
}

impl Reply {
    /// An error as a reply (a pipeline's failed command).
    pub(crate) fn from_error(e: &Error) -> Reply {
        Reply::Error {
            code: e.code().as_str().to_string(),
            message: e.message().to_string(),
            server_code: e.server_code().map(str::to_string),
        }
    }
}
