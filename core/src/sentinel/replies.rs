//! Typed views of the SENTINEL replies the client relies on, checked field by field.
//!
//! A reply that lacks a field we need, or carries a port outside 1..65535 or an empty host, is a
//! protocol error: the sentinel that sent it is skipped for this round rather than trusted in part.

use crate::config::Address;
use crate::error::{Error, Result};
use crate::resp::Value;
pub use crate::types::Role;

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

fn field<'a>(pairs: &'a [(Value, Value)], name: &str) -> Option<&'a Value> {
    pairs
        .iter()
        .find(|(k, _)| k.as_str() == Some(name))
        .map(|(_, v)| v)
}

fn instance(value: Value, what: &str) -> Result<InstanceInfo> {
    let pairs = value
        .into_pairs()
        .ok_or_else(|| Error::protocol(format!("{what}: expected a map of fields")))?;
    let host = field(&pairs, "ip")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty() && !h.contains(char::is_whitespace))
        .ok_or_else(|| Error::protocol(format!("{what}: missing or empty 'ip'")))?;
    let port = field(&pairs, "port")
        .and_then(Value::as_int)
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| Error::protocol(format!("{what}: 'port' missing or not in 1..65535")))?;
    let flags = field(&pairs, "flags")
        .and_then(Value::as_str)
        .map(Flags::parse)
        .ok_or_else(|| Error::protocol(format!("{what}: missing 'flags'")))?;
    let run_id = field(&pairs, "runid")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .map(String::from);
    let config_epoch = field(&pairs, "config-epoch")
        .and_then(Value::as_int)
        .and_then(|e| u64::try_from(e).ok())
        .unwrap_or(0);
    Ok(InstanceInfo {
        address: Address::new(host, port as u16),
        flags,
        run_id,
        config_epoch,
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

/// Parses a `ROLE` reply.
pub fn role(value: Value) -> Result<Role> {
    let items = value
        .into_array()
        .ok_or_else(|| Error::protocol("ROLE: expected an array"))?;
    let mut items = items.into_iter();
    let first = items
        .next()
        .ok_or_else(|| Error::protocol("ROLE: empty reply"))?;
    let name = first
        .as_str()
        .ok_or_else(|| Error::protocol("ROLE: first element is not a string"))?
        .to_string();
    Ok(match name.as_str() {
        "master" => Role::Master,
        "slave" | "replica" => {
            let host = items.next();
            let port = items.next();
            let master = match (
                host.as_ref().and_then(Value::as_str),
                port.as_ref().and_then(Value::as_int),
            ) {
                (Some(h), Some(p)) if (1..=65535).contains(&p) && !h.is_empty() => {
                    Some(Address::new(h, p as u16))
                }
                _ => None,
            };
            Role::Replica { master }
        }
        _ => Role::Other(name),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn info_tilt_reads_the_flag() {
        let info = "# Sentinel\r\nsentinel_masters:1\r\nsentinel_tilt:1\r\nsentinel_tilt_since_seconds:3\r\n";
        assert_eq!(info_tilt(info), Some(true));
        assert_eq!(info_tilt("sentinel_tilt:0\r\n"), Some(false));
        assert_eq!(info_tilt("sentinel_masters:1"), None);
        assert_eq!(info_tilt("sentinel_tilt:x"), None);
    }

    fn bulk(s: &str) -> Value {
        Value::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn flat(fields: &[(&str, &str)]) -> Value {
        Value::Array(
            fields
                .iter()
                .flat_map(|(k, v)| [bulk(k), bulk(v)])
                .collect(),
        )
    }

    fn map(fields: &[(&str, &str)]) -> Value {
        Value::Map(fields.iter().map(|(k, v)| (bulk(k), bulk(v))).collect())
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

    #[test]
    fn role_replies() {
        let m = Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(vec![])]);
        assert_eq!(role(m).unwrap(), Role::Master);
        let r = Value::Array(vec![
            bulk("slave"),
            bulk("127.0.0.1"),
            Value::Int(6379),
            bulk("connected"),
            Value::Int(1),
        ]);
        assert_eq!(
            role(r).unwrap(),
            Role::Replica {
                master: Some(Address::new("127.0.0.1", 6379))
            }
        );
        let s = Value::Array(vec![bulk("sentinel"), Value::Array(vec![])]);
        assert_eq!(role(s).unwrap(), Role::Other("sentinel".into()));
        assert!(role(Value::Array(vec![])).is_err());
        assert!(role(Value::Nil).is_err());
    }
}
