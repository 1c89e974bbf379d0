//! Typed views of the SENTINEL replies the client relies on, checked field by field.
//!
//! A reply that lacks a field we need, or carries a port outside 1..65535 or an empty host, is a
//! protocol error: the sentinel that sent it is skipped for this round rather than trusted in part.

use crate::error::{Error, Result};
use crate::resp::Value;
use crate::types::Address;

/// The `flags` field of a SENTINEL MASTER/REPLICAS/SENTINELS entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flags(Vec<String>);

impl Flags {
    fn parse(text: &str) -> Flags {
        Flags(
            text.split(',')
                .filter(|f| !f.is_empty())
                .map(String::from)
                .collect(),
        )
    }

    /// The same flags plus `flag`.
    pub fn with(mut self, flag: &str) -> Flags {
        self.0.push(flag.to_string());
        self
    }

    /// Whether the flag list contains `flag`.
    pub fn has(&self, flag: &str) -> bool {
        self.0.iter().any(|f| f == flag)
    }

    /// `s_down` or `o_down`: the reporting sentinel thinks the instance is down.
    pub fn is_down(&self) -> bool {
        self.has("s_down") || self.has("o_down")
    }

    /// The flags, in the order the sentinel sent them.
    pub(crate) fn into_vec(self) -> Vec<String> {
        self.0
    }

    /// Down, or the sentinel's link to it is broken.
    pub fn is_unhealthy(&self) -> bool {
        self.is_down() || self.has("disconnected")
    }
}

impl std::fmt::Display for Flags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join(","))
    }
}

/// One entry of `SENTINEL MASTER`, `REPLICAS` or `SENTINELS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceInfo {
    /// Announced address.
    pub address: Address,
    /// Flags as the reporting sentinel sees them.
    pub flags: Flags,
    /// `runid`, when known (empty strings become `None`).
    pub run_id: Option<String>,
    /// `config-epoch` (masters only; 0 otherwise).
    pub config_epoch: u64,
}

/// One entry of a field/value reply (`SENTINEL MASTER`, `REPLICAS`, `SENTINELS`, `CONFIG GET`)
/// by field name, from a RESP2 flat array or a RESP3 map. Values are kept as text, numbers too
/// (RESP3 sentinels send some fields as integers); a field whose name or value is not a scalar
/// is left out. What a field must hold is for the reader to say: the client refuses an entry
/// without a usable address or flags, the doctor reports what it finds.
pub(crate) struct Entry(Vec<(String, String)>);

impl Entry {
    /// `None` when `value` is neither a map nor an array of names and values.
    pub(crate) fn parse(value: Value) -> Option<Entry> {
        let pairs = value.into_pairs()?;
        Some(Entry(
            pairs
                .into_iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), text(&v)?)))
                .collect(),
        ))
    }

    /// The field `name` as text.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The field `name` as a number; `None` when missing or not one.
    pub(crate) fn num<T: std::str::FromStr>(&self, name: &str) -> Option<T> {
        self.get(name)?.trim().parse().ok()
    }

    /// `ip`, when it names a host: not empty, no white space.
    pub(crate) fn host(&self) -> Option<&str> {
        self.get("ip")
            .filter(|h| !h.is_empty() && !h.contains(char::is_whitespace))
    }

    /// `port`, when in 1..65535.
    pub(crate) fn port(&self) -> Option<u16> {
        self.num("port").filter(|p| *p != 0)
    }

    /// `ip` and `port`, when both are usable.
    pub(crate) fn address(&self) -> Option<Address> {
        Some(Address::new(self.host()?, self.port()?))
    }

    /// `flags`, when present.
    pub(crate) fn flags(&self) -> Option<Flags> {
        self.get("flags").map(Flags::parse)
    }

    /// `runid`, when not empty.
    pub(crate) fn run_id(&self) -> Option<&str> {
        self.get("runid").filter(|r| !r.is_empty())
    }
}

/// A scalar reply as text; `None` for arrays, maps and the like.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::Int(i) => Some(i.to_string()),
        Value::Double(d) => Some(d.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        Value::Nil => Some(String::new()),
        other => other.as_str().map(String::from),
    }
}

fn instance(value: Value, what: &str) -> Result<InstanceInfo> {
    let entry = Entry::parse(value)
        .ok_or_else(|| Error::protocol(format!("{what}: expected a map of fields")))?;
    let host = entry
        .host()
        .ok_or_else(|| Error::protocol(format!("{what}: missing or empty 'ip'")))?;
    let port = entry
        .port()
        .ok_or_else(|| Error::protocol(format!("{what}: 'port' missing or not in 1..65535")))?;
    let flags = entry
        .flags()
        .ok_or_else(|| Error::protocol(format!("{what}: missing 'flags'")))?;
    Ok(InstanceInfo {
        address: Address::new(host, port),
        flags,
        run_id: entry.run_id().map(String::from),
        config_epoch: entry.num("config-epoch").unwrap_or(0),
    })
}

/// `SENTINEL MASTER <service>`.
pub fn master(value: Value) -> Result<InstanceInfo> {
    instance(value, "SENTINEL MASTER")
}

/// `SENTINEL REPLICAS` or `SENTINEL SENTINELS`: entries that are malformed are dropped (and
/// logged), since one bad entry says nothing about the others.
pub fn instances(value: Value, what: &str) -> Result<Vec<InstanceInfo>> {
    let items = value
        .into_array()
        .ok_or_else(|| Error::protocol(format!("{what}: expected an array")))?;
    Ok(items
        .into_iter()
        .filter_map(|item| match instance(item, what) {
            Ok(info) => Some(info),
            Err(e) => {
                tracing::warn!(error = %e, "skipping malformed entry");
                None
            }
        })
        .collect())
}

/// `SENTINEL GET-MASTER-ADDR-BY-NAME`: `None` when the sentinel does not know the service.
pub fn master_addr(value: Value) -> Result<Option<Address>> {
    let bad = || Error::protocol("GET-MASTER-ADDR-BY-NAME: expected [host, port] or null");
    match value {
        Value::Nil => Ok(None),
        v => {
            let items = v.into_array().ok_or_else(bad)?;
            if items.is_empty() {
                return Ok(None);
            }
            let [host, port] = <[Value; 2]>::try_from(items).map_err(|_| bad())?;
            let host = host.as_str().filter(|h| !h.is_empty()).ok_or_else(bad)?;
            let port = port
                .as_int()
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(bad)?;
            Ok(Some(Address::new(host, port as u16)))
        }
    }
}

/// `sentinel_tilt` from an `INFO sentinel` reply: `Some(true)` in TILT, `None` when the field is
/// missing or not 0/1.
pub fn info_tilt(info: &str) -> Option<bool> {
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix("sentinel_tilt:"))
        .and_then(|v| match v {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        })
}

/// Entries in the shapes sentinels send them, for the tests of what reads them.
#[cfg(test)]
pub(crate) mod shapes {
    use bytes::Bytes;

    use crate::resp::Value;

    /// A bulk string.
    pub(crate) fn bulk(s: &str) -> Value {
        Value::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// RESP2: names and values in one flat array.
    pub(crate) fn flat(fields: &[(&str, &str)]) -> Value {
        Value::Array(
            fields
                .iter()
                .flat_map(|(k, v)| [bulk(k), bulk(v)])
                .collect(),
        )
    }

    /// RESP3: a map.
    pub(crate) fn map(fields: &[(&str, &str)]) -> Value {
        Value::Map(fields.iter().map(|(k, v)| (bulk(k), bulk(v))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::shapes::{bulk, flat, map};
    use super::{info_tilt, instances, master, master_addr, Address, Entry, Value};

    #[test]
    fn info_tilt_reads_the_flag() {
        let info = "# Sentinel\r\nsentinel_masters:1\r\nsentinel_tilt:1\r\nsentinel_tilt_since_seconds:3\r\n";
        assert_eq!(info_tilt(info), Some(true));
        assert_eq!(info_tilt("sentinel_tilt:0\r\n"), Some(false));
        assert_eq!(info_tilt("sentinel_masters:1"), None);
        assert_eq!(info_tilt("sentinel_tilt:x"), None);
    }

    const MASTER: &[(&str, &str)] = &[
        ("name", "mymaster"),
        ("ip", "127.0.0.1"),
        ("port", "6379"),
        ("runid", "abc"),
        ("flags", "master"),
        ("config-epoch", "3"),
    ];

    #[test]
    fn master_in_resp2_and_resp3_shapes() {
        for v in [flat(MASTER), map(MASTER)] {
            let m = master(v).unwrap();
            assert_eq!(m.address, Address::new("127.0.0.1", 6379));
            assert!(m.flags.has("master") && !m.flags.is_down());
            assert_eq!(m.config_epoch, 3);
            assert_eq!(m.run_id.as_deref(), Some("abc"));
        }
        let m = master(flat(&[
            ("ip", "h"),
            ("port", "1"),
            ("flags", "master,s_down"),
        ]))
        .unwrap();
        assert!(m.flags.is_down());
    }

    #[test]
    fn entry_fields_are_text_and_resp3_numbers_too() {
        let resp3 = Value::Map(vec![
            (bulk("ip"), bulk("127.0.0.1")),
            (bulk("port"), Value::Int(6379)),
            (bulk("config-epoch"), Value::Int(4)),
            (bulk("runid"), Value::Nil),
            (bulk("nested"), Value::Array(vec![])),
        ]);
        let e = Entry::parse(resp3).unwrap();
        assert_eq!(e.address(), Some(Address::new("127.0.0.1", 6379)));
        assert_eq!(e.num::<u64>("config-epoch"), Some(4));
        assert_eq!(e.get("port"), Some("6379"));
        assert_eq!((e.run_id(), e.get("nested")), (None, None));
        assert_eq!(e.flags(), None);
        assert!(Entry::parse(Value::Array(vec![bulk("ip")])).is_none());
        assert!(Entry::parse(Value::Int(1)).is_none());
    }

    #[test]
    fn bad_ports_hosts_and_shapes_are_protocol_errors() {
        for port in ["0", "65536", "-1", "x", ""] {
            let e = master(flat(&[
                ("ip", "127.0.0.1"),
                ("port", port),
                ("flags", "master"),
            ]))
            .unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::Protocol, "port {port}");
        }
        assert!(master(flat(&[("ip", ""), ("port", "6379"), ("flags", "master")])).is_err());
        assert!(master(flat(&[("port", "6379"), ("flags", "master")])).is_err());
        assert!(master(Value::Int(3)).is_err());
        assert!(master(Value::Array(vec![bulk("ip")])).is_err());
        assert!(master(Value::Array(vec![Value::Int(1), Value::Int(2)])).is_err());
    }

    #[test]
    fn instance_lists_skip_malformed_entries() {
        let v = Value::Array(vec![
            flat(&[("ip", "10.0.0.2"), ("port", "6380"), ("flags", "slave")]),
            flat(&[("ip", "10.0.0.3"), ("port", "0"), ("flags", "slave")]),
            Value::Int(7),
        ]);
        let list = instances(v, "SENTINEL REPLICAS").unwrap();
        assert_eq!(list.len(), 1);
        assert!(instances(Value::Int(1), "SENTINEL REPLICAS").is_err());
        assert!(instances(Value::Array(vec![]), "x").unwrap().is_empty());
    }

    #[test]
    fn master_addr_replies() {
        assert_eq!(master_addr(Value::Nil).unwrap(), None);
        assert_eq!(
            master_addr(Value::Array(vec![bulk("10.0.0.1"), bulk("6379")])).unwrap(),
            Some(Address::new("10.0.0.1", 6379))
        );
        assert!(master_addr(Value::Array(vec![bulk("10.0.0.1")])).is_err());
        assert!(master_addr(Value::Array(vec![bulk("10.0.0.1"), bulk("x")])).is_err());
        assert!(master_addr(Value::Array(vec![bulk("a"), bulk("1"), bulk("2")])).is_err());
        assert!(master_addr(Value::Int(1)).is_err());
    }
}
