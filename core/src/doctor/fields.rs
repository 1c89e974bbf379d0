//! Reading the replies the doctor asks for: `SENTINEL MASTER/REPLICAS/SENTINELS` entries (by field
//! name, through the client's own [`Entry`]), `INFO` sections, `SENTINEL CKQUORUM` and `SENTINEL
//! CONFIG GET` answers.
//!
//! Everything here is lenient: a field that is missing or malformed is `None` in the report, never
//! an error, because the doctor's job is to show what a server says, odd parts included. Only an
//! entry without a usable address (see [`Entry::address`]) is left out.

use super::report::{CkQuorum, MasterView, PeerView, ReplicaView};
use crate::error::Error;
use crate::resp::Value;
use crate::sentinel::replies::{Entry, Flags};

/// `flags` as a list (empty when missing).
fn flags(entry: &Entry) -> Vec<String> {
    entry.flags().map(Flags::into_vec).unwrap_or_default()
}

/// `SENTINEL MASTER <service>`.
pub(super) fn master(value: Value) -> Option<MasterView> {
    let f = Entry::parse(value)?;
    Some(MasterView {
        address: f.address()?,
        flags: flags(&f),
        config_epoch: f.num("config-epoch"),
        quorum: f.num("quorum"),
        down_after_ms: f.num("down-after-milliseconds"),
        failover_timeout_ms: f.num("failover-timeout"),
        parallel_syncs: f.num("parallel-syncs"),
        num_other_sentinels: f.num("num-other-sentinels"),
        num_slaves: f.num("num-slaves"),
        failover_state: f
            .get("failover-state")
            .filter(|s| !s.is_empty() && *s != "none")
            .map(String::from),
    })
}

fn entries(value: Value) -> Vec<Entry> {
    value
        .into_array()
        .unwrap_or_default()
        .into_iter()
        .filter_map(Entry::parse)
        .collect()
}

/// `SENTINEL REPLICAS <service>`; malformed entries are left out.
pub(super) fn replicas(value: Value) -> Vec<ReplicaView> {
    entries(value)
        .into_iter()
        .filter_map(|f| {
            Some(ReplicaView {
                address: f.address()?,
                flags: flags(&f),
                master_link_status: f.get("master-link-status").map(String::from),
                priority: f.num("slave-priority"),
                repl_offset: f.num("slave-repl-offset"),
            })
        })
        .collect()
}

/// `SENTINEL SENTINELS <service>`; malformed entries are left out.
pub(super) fn peers(value: Value) -> Vec<PeerView> {
    entries(value)
        .into_iter()
        .filter_map(|f| {
            Some(PeerView {
                address: f.address()?,
                flags: flags(&f),
                run_id: f.run_id().map(String::from),
            })
        })
        .collect()
}

/// One `field:value` line of an `INFO` reply.
pub(super) fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        let (k, v) = l.trim_end().split_once(':')?;
        (k == name).then_some(v)
    })
}

/// A numeric `INFO` field.
pub(super) fn info_num<T: std::str::FromStr>(info: &str, name: &str) -> Option<T> {
    info_field(info, name)?.trim().parse().ok()
}

/// `SENTINEL CKQUORUM <service>`: `+OK 3 usable Sentinels. Quorum and failover authorization
/// can be reached`, or the error `NOQUORUM 1 usable Sentinels. Not enough available Sentinels to
/// reach the specified quorum for this master. Not enough available Sentinels to reach the
/// majority and authorize a failover`. `None` for other errors (unknown command, NOPERM ...).
pub(super) fn ckquorum(reply: Result<Value, Error>) -> Option<CkQuorum> {
    let (ok, message) = match reply {
        Ok(v) => (true, v.as_str()?.to_string()),
        Err(e) if e.server_code() == Some("NOQUORUM") => (false, e.message().to_string()),
        Err(_) => return None,
    };
    let usable = message
        .split_whitespace()
        .find_map(|w| w.parse::<u32>().ok());
    Some(CkQuorum {
        ok,
        usable,
        quorum_reachable: ok || !message.contains("reach the specified quorum"),
        majority_reachable: ok || !message.contains("reach the majority"),
        message,
    })
}

/// `SENTINEL CONFIG GET <name>` as yes/no: a `[name, value]` pair (map in RESP3).
pub(super) fn config_flag(value: Value, name: &str) -> Option<bool> {
    let f = Entry::parse(value)?;
    match f.get(name)? {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{ckquorum, config_flag, info_field, info_num, master, peers, replicas};
    use crate::error::Error;
    use crate::resp::Value;
    use crate::sentinel::replies::shapes::{bulk, flat};
    use crate::types::Address;

    #[test]
    fn master_fields() {
        let m = master(flat(&[
            ("name", "mymaster"),
            ("ip", "127.0.0.1"),
            ("port", "6379"),
            ("flags", "master,s_down"),
            ("config-epoch", "4"),
            ("quorum", "2"),
            ("down-after-milliseconds", "1000"),
            ("failover-timeout", "3000"),
            ("parallel-syncs", "1"),
            ("num-other-sentinels", "2"),
            ("num-slaves", "2"),
        ]))
        .unwrap();
        assert_eq!(m.address, Address::new("127.0.0.1", 6379));
        assert_eq!(m.flags, ["master", "s_down"]);
        assert!(m.has_flag("s_down"));
        assert_eq!(
            (m.config_epoch, m.quorum, m.down_after_ms),
            (Some(4), Some(2), Some(1000))
        );
        assert_eq!((m.num_other_sentinels, m.num_slaves), (Some(2), Some(2)));
        assert_eq!(m.failover_state, None);
        assert!(master(flat(&[("ip", "h"), ("port", "0")])).is_none());
        assert!(master(Value::Int(1)).is_none());
    }

    #[test]
    fn replica_and_peer_lists_skip_bad_entries() {
        let v = Value::Array(vec![
            flat(&[
                ("ip", "127.0.0.99"),
                ("port", "6380"),
                ("flags", "slave,s_down,disconnected"),
                ("master-link-status", "err"),
                ("slave-priority", "0"),
                ("slave-repl-offset", "77"),
            ]),
            flat(&[("ip", ""), ("port", "1")]),
        ]);
        let r = replicas(v);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].priority, Some(0));
        assert_eq!(r[0].master_link_status.as_deref(), Some("err"));
        let p = peers(Value::Array(vec![flat(&[
            ("ip", "10.0.0.2"),
            ("port", "26379"),
            ("flags", "sentinel"),
            ("runid", "abc"),
        ])]));
        assert_eq!(p[0].run_id.as_deref(), Some("abc"));
        assert!(peers(Value::Nil).is_empty());
    }

    #[test]
    fn ckquorum_replies() {
        let ok = ckquorum(Ok(Value::Simple(
            "OK 3 usable Sentinels. Quorum and failover authorization can be reached".into(),
        )))
        .unwrap();
        assert!(ok.ok && ok.quorum_reachable && ok.majority_reachable);
        assert_eq!(ok.usable, Some(3));
        let no = ckquorum(Err(Error::server(
            "NOQUORUM 1 usable Sentinels. Not enough available Sentinels to reach the specified \
             quorum for this master. Not enough available Sentinels to reach the majority and \
             authorize a failover",
        )))
        .unwrap();
        assert!(!no.ok && !no.quorum_reachable && !no.majority_reachable);
        assert_eq!(no.usable, Some(1));
        let majority_only = ckquorum(Err(Error::server(
            "NOQUORUM 2 usable Sentinels. Not enough available Sentinels to reach the majority \
             and authorize a failover",
        )))
        .unwrap();
        assert!(majority_only.quorum_reachable && !majority_only.majority_reachable);
        assert!(ckquorum(Err(Error::server("NOPERM no"))).is_none());
    }

    #[test]
    fn info_and_config_fields() {
        let info = "# Sentinel\r\nsentinel_tilt:1\r\nsentinel_tilt_since_seconds:3\r\n\
                    slave0:ip=127.0.0.1,port=6380,state=online,offset=10,lag=0\r\n";
        assert_eq!(info_field(info, "sentinel_tilt"), Some("1"));
        assert_eq!(
            info_num::<i64>(info, "sentinel_tilt_since_seconds"),
            Some(3)
        );
        assert_eq!(info_num::<i64>(info, "missing"), None);
        assert!(info_field(info, "slave0")
            .unwrap()
            .starts_with("ip=127.0.0.1,"));
        assert_eq!(
            config_flag(flat(&[("resolve-hostnames", "yes")]), "resolve-hostnames"),
            Some(true)
        );
        assert_eq!(
            config_flag(
                Value::Map(vec![(bulk("announce-hostnames"), bulk("no"))]),
                "announce-hostnames"
            ),
            Some(false)
        );
        assert_eq!(config_flag(Value::Array(vec![]), "x"), None);
    }
}
