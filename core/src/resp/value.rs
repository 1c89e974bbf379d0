//! The owned reply type shared by RESP2 and RESP3 connections.

use bytes::Bytes;
use redis_protocol::resp2::types::BytesFrame as Resp2Frame;
use redis_protocol::resp3::types::{BytesFrame as Resp3Frame, VerbatimStringFormat};

/// One reply from a server, in a shape that covers both RESP2 and RESP3.
///
/// RESP2 has no maps, doubles or booleans: the same reply arrives as a flat array or a string there,
/// so readers should use the accessors ([`Value::as_int`], [`Value::into_pairs`], ...) that accept
/// both shapes instead of matching on one protocol's variant.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A null bulk string, null array (RESP2) or null (RESP3).
    Nil,
    /// An integer.
    Int(i64),
    /// A RESP3 double.
    Double(f64),
    /// A RESP3 boolean.
    Boolean(bool),
    /// A RESP3 big number, as its decimal text.
    BigNumber(Bytes),
    /// A bulk (blob) string.
    Bulk(Bytes),
    /// A simple status string such as `OK`.
    Simple(String),
    /// A RESP3 verbatim string with its three-letter format (`txt`, `mkd`).
    Verbatim {
        /// The format tag, e.g. `txt`.
        format: String,
        /// The text itself.
        text: Bytes,
    },
    /// An array.
    Array(Vec<Value>),
    /// A RESP3 map, in the order the decoder produced its entries.
    Map(Vec<(Value, Value)>),
    /// A RESP3 set.
    Set(Vec<Value>),
    /// A RESP3 out-of-band push message.
    Push(Vec<Value>),
    /// An error reply nested inside an aggregate (e.g. one failed command in an `EXEC` reply).
    ///
    /// A top-level error reply never becomes a `Value`: requests return it as an `Err`.
    Error(String),
}

impl Value {
    /// The bytes of a [`Value::Bulk`], [`Value::Simple`] or the text of a [`Value::Verbatim`];
    /// `None` for every other variant.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(b) => Some(b),
            Value::Simple(s) => Some(s.as_bytes()),
            Value::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Like [`Value::as_bytes`], when those bytes are valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// An [`Value::Int`], or a string variant (or big number) holding a decimal `i64`.
    ///
    /// RESP2 sentinels send numbers as strings (`SENTINEL MASTER` fields), hence the parsing.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::BigNumber(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => self.as_str()?.trim().parse().ok(),
        }
    }

    /// The elements of an [`Value::Array`], [`Value::Set`] or [`Value::Push`]; `None` otherwise.
    pub fn into_array(self) -> Option<Vec<Value>> {
        match self {
            Value::Array(items) | Value::Set(items) | Value::Push(items) => Some(items),
            _ => None,
        }
    }

    /// Key/value pairs from a RESP3 [`Value::Map`] or a RESP2 flat array `[k1, v1, k2, v2, ...]`.
    ///
    /// `None` for an array of odd length and for every other variant.
    pub fn into_pairs(self) -> Option<Vec<(Value, Value)>> {
        match self {
            Value::Map(pairs) => Some(pairs),
            Value::Array(items) => {
                if items.len() % 2 != 0 {
                    return None;
                }
                let mut pairs = Vec::with_capacity(items.len() / 2);
                let mut items = items.into_iter();
                while let (Some(k), Some(v)) = (items.next(), items.next()) {
                    pairs.push((k, v));
                }
                Some(pairs)
            }
            _ => None,
        }
    }

    /// The payload as shared bytes, for the string variants (used for pub/sub messages).
    pub(crate) fn into_bytes(self) -> Option<Bytes> {
        match self {
            Value::Bulk(b) => Some(b),
            Value::Simple(s) => Some(Bytes::from(s)),
            Value::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// Decodes a RESP2 frame; error frames become [`Value::Error`] at any depth.
impl From<Resp2Frame> for Value {
    fn from(frame: Resp2Frame) -> Value {
        match frame {
            Resp2Frame::SimpleString(b) => Value::Simple(String::from_utf8_lossy(&b).into_owned()),
            Resp2Frame::Error(s) => Value::Error(String::from(&*s)),
            Resp2Frame::Integer(i) => Value::Int(i),
            Resp2Frame::BulkString(b) => Value::Bulk(b),
            Resp2Frame::Array(items) => Value::Array(items.into_iter().map(Value::from).collect()),
            Resp2Frame::Null => Value::Nil,
        }
    }
}

/// Decodes a RESP3 frame; attributes are dropped, error frames become [`Value::Error`].
impl From<Resp3Frame> for Value {
    fn from(frame: Resp3Frame) -> Value {
        match frame {
            Resp3Frame::BlobString { data, .. } => Value::Bulk(data),
            Resp3Frame::BlobError { data, .. } => {
                Value::Error(String::from_utf8_lossy(&data).into_owned())
            }
            Resp3Frame::SimpleString { data, .. } => {
                Value::Simple(String::from_utf8_lossy(&data).into_owned())
            }
            Resp3Frame::SimpleError { data, .. } => Value::Error(String::from(&*data)),
            Resp3Frame::Boolean { data, .. } => Value::Boolean(data),
            Resp3Frame::Null => Value::Nil,
            Resp3Frame::Number { data, .. } => Value::Int(data),
            Resp3Frame::Double { data, .. } => Value::Double(data),
            Resp3Frame::BigNumber { data, .. } => Value::BigNumber(data),
            Resp3Frame::VerbatimString { data, format, .. } => Value::Verbatim {
                format: match format {
                    VerbatimStringFormat::Text => "txt".to_owned(),
                    VerbatimStringFormat::Markdown => "mkd".to_owned(),
                },
                text: data,
            },
            Resp3Frame::Array { data, .. } => {
                Value::Array(data.into_iter().map(Value::from).collect())
            }
            Resp3Frame::Map { data, .. } => Value::Map(
                data.into_iter()
                    .map(|(k, v)| (Value::from(k), Value::from(v)))
                    .collect(),
            ),
            Resp3Frame::Set { data, .. } => Value::Set(data.into_iter().map(Value::from).collect()),
            Resp3Frame::Push { data, .. } => {
                Value::Push(data.into_iter().map(Value::from).collect())
            }
            // Only ever built by clients to send; a decoder never produces it.
            Resp3Frame::Hello { .. } => Value::Nil,
            Resp3Frame::ChunkedString(data) => Value::Bulk(data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis_protocol::resp2::decode::decode_bytes as decode2;
    use redis_protocol::resp3::decode::complete::decode_bytes as decode3;

    fn v2(wire: &str) -> Value {
        let (frame, used) = decode2(&Bytes::copy_from_slice(wire.as_bytes()))
            .unwrap()
            .unwrap();
        assert_eq!(used, wire.len());
        Value::from(frame)
    }

    fn v3(wire: &str) -> Value {
        let (frame, used) = decode3(&Bytes::copy_from_slice(wire.as_bytes()))
            .unwrap()
            .unwrap();
        assert_eq!(used, wire.len());
        Value::from(frame)
    }

    fn bulk(s: &str) -> Value {
        Value::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn resp2_scalars_and_nulls() {
        assert_eq!(v2("+OK\r\n"), Value::Simple("OK".into()));
        assert_eq!(v2(":-42\r\n"), Value::Int(-42));
        assert_eq!(v2("$3\r\nfoo\r\n"), bulk("foo"));
        assert_eq!(v2("$0\r\n\r\n"), bulk(""));
        assert_eq!(v2("$-1\r\n"), Value::Nil);
        assert_eq!(v2("*-1\r\n"), Value::Nil);
        assert_eq!(v2("*0\r\n"), Value::Array(vec![]));
        assert_eq!(v2("-ERR boom\r\n"), Value::Error("ERR boom".into()));
    }

    #[test]
    fn resp2_nested_errors_and_nulls_stay_values() {
        let v = v2("*3\r\n+OK\r\n-WRONGTYPE bad\r\n$-1\r\n");
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Simple("OK".into()),
                Value::Error("WRONGTYPE bad".into()),
                Value::Nil
            ])
        );
    }

    #[test]
    fn resp3_types() {
        assert_eq!(v3("_\r\n"), Value::Nil);
        assert_eq!(v3("#t\r\n"), Value::Boolean(true));
        assert_eq!(v3(",1.5\r\n"), Value::Double(1.5));
        assert_eq!(
            v3("(12345678901234567890\r\n"),
            Value::BigNumber(Bytes::from_static(b"12345678901234567890"))
        );
        assert_eq!(
            v3("=7\r\ntxt:abc\r\n"),
            Value::Verbatim {
                format: "txt".into(),
                text: Bytes::from_static(b"abc")
            }
        );
        assert_eq!(v3("!5\r\nERR x\r\n"), Value::Error("ERR x".into()));
        assert_eq!(
            v3("~2\r\n:1\r\n:1\r\n").into_array().map(|a| a.len()),
            Some(1),
            "a set deduplicates"
        );
        assert_eq!(
            v3(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n"),
            Value::Push(vec![bulk("message"), bulk("ch"), bulk("x")])
        );
        assert_eq!(
            v3("*2\r\n-ERR one\r\n_\r\n"),
            Value::Array(vec![Value::Error("ERR one".into()), Value::Nil])
        );
        assert_eq!(
            v3("|1\r\n+key\r\n+val\r\n:7\r\n"),
            Value::Int(7),
            "attributes are dropped"
        );
    }

    #[test]
    fn into_pairs_accepts_maps_and_flat_arrays() {
        let map = v3("%2\r\n$4\r\nname\r\n$2\r\nm1\r\n$4\r\nport\r\n:6379\r\n");
        let mut pairs = map.into_pairs().unwrap();
        pairs.sort_by(|a, b| a.0.as_bytes().cmp(&b.0.as_bytes()));
        assert_eq!(
            pairs,
            vec![(bulk("name"), bulk("m1")), (bulk("port"), Value::Int(6379))]
        );

        let flat = v2("*4\r\n$4\r\nname\r\n$2\r\nm1\r\n$4\r\nport\r\n$4\r\n6379\r\n");
        let pairs = flat.into_pairs().unwrap();
        assert_eq!(pairs[0], (bulk("name"), bulk("m1")));
        assert_eq!(pairs[1].1.as_int(), Some(6379));

        assert_eq!(v2("*3\r\n:1\r\n:2\r\n:3\r\n").into_pairs(), None);
        assert_eq!(v2("*0\r\n").into_pairs(), Some(vec![]));
        assert_eq!(v2("+OK\r\n").into_pairs(), None);
    }

    #[test]
    fn accessors() {
        assert_eq!(bulk("17").as_int(), Some(17));
        assert_eq!(Value::Simple("-3".into()).as_int(), Some(-3));
        assert_eq!(bulk("x").as_int(), None);
        assert_eq!(Value::Double(1.0).as_int(), None);
        assert_eq!(bulk("hi").as_str(), Some("hi"));
        assert_eq!(
            Value::Bulk(Bytes::from_static(&[0xff, 0xfe])).as_str(),
            None
        );
        assert_eq!(
            Value::Bulk(Bytes::from_static(&[0xff])).as_bytes(),
            Some(&[0xff][..])
        );
        assert_eq!(Value::Int(1).as_bytes(), None);
        assert_eq!(Value::Nil.into_array(), None);
        assert_eq!(
            Value::Set(vec![Value::Int(1)]).into_array(),
            Some(vec![Value::Int(1)])
        );
    }
}
