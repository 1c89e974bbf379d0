//! The SENTINEL reply parsers (MASTER, REPLICAS/SENTINELS, GET-MASTER-ADDR-BY-NAME, ROLE, INFO).
//!
//! Input: a control byte (bit 0: RESP2/RESP3) and a reply frame; the value comes from the core's
//! own scanner and decoder, as on a connection, and is handed to every parser.
//! Properties: nothing panics; whatever a parser accepts keeps its promises (ports in 1..65535,
//! non-empty hosts without whitespace, no empty flags, run ids non-empty); what it accepts,
//! re-encoded as a sentinel would send it (RESP2 flat array and RESP3 map), parses to the same
//! thing; a REPLICAS/SENTINELS list is exactly the entries MASTER's field rules accept, in order
//! (one bad entry never hides the others); ROLE and GET-MASTER-ADDR-BY-NAME answers round trip;
//! `info_tilt` reads the first `sentinel_tilt:` line and nothing else.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sentinel_recovery::node::parse_role;
use sentinel_recovery::sentinel::replies::{self, InstanceInfo};
use sentinel_recovery::types::Role;
use sentinel_recovery::{Address, ErrorCode, Value};
use sentinel_recovery_fuzz::first_value;

fuzz_target!(|data: &[u8]| {
    let Some((_, value)) = first_value(data) else {
        // Not a frame: the INFO text parser still gets the bytes.
        if let Some(text) = data.get(1..).and_then(|b| std::str::from_utf8(b).ok()) {
            check_info(text);
        }
        return;
    };

    match replies::master(value.clone()) {
        Ok(info) => {
            check_instance(&info);
            for shape in [flat(&info), map(&info)] {
                assert_eq!(replies::master(shape).unwrap(), info, "MASTER round trip");
            }
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::Protocol, "{e}"),
    }

    for what in ["SENTINEL REPLICAS", "SENTINEL SENTINELS"] {
        match replies::instances(value.clone(), what) {
            Ok(list) => {
                // Exactly the entries that parse alone, in order.
                let expected: Vec<InstanceInfo> = value
                    .clone()
                    .into_array()
                    .expect("an accepted list is an array")
                    .into_iter()
                    .filter_map(|entry| replies::master(entry).ok())
                    .collect();
                assert_eq!(list, expected, "{what}: the list is the entries that parse");
                list.iter().for_each(check_instance);
            }
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::Protocol);
                assert!(
                    value.clone().into_array().is_none(),
                    "{what} refused an array: {e}"
                );
            }
        }
    }

    match replies::master_addr(value.clone()) {
        Ok(Some(address)) => {
            check_address(&address);
            let again = Value::Array(vec![bulk(&address.host), bulk(&address.port.to_string())]);
            assert_eq!(replies::master_addr(again).unwrap(), Some(address));
        }
        Ok(None) => assert!(
            value == Value::Nil || value.clone().into_array().is_some_and(|a| a.is_empty()),
            "GET-MASTER-ADDR-BY-NAME: None from {value:?}"
        ),
        Err(e) => assert_eq!(e.code(), ErrorCode::Protocol),
    }

    match parse_role(value.clone()) {
        Ok(role) => {
            let name = value.clone().into_array().unwrap()[0]
                .as_str()
                .unwrap()
                .to_string();
            let again = match &role {
                Role::Master => {
                    assert_eq!(name, "master");
                    Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(vec![])])
                }
                Role::Replica { master } => {
                    assert!(name == "slave" || name == "replica", "{name}");
                    let mut v = vec![bulk("slave")];
                    if let Some(address) = master {
                        check_address(address);
                        v.push(bulk(&address.host));
                        v.push(Value::Int(i64::from(address.port)));
                        v.push(bulk("connected"));
                        v.push(Value::Int(1));
                    }
                    Value::Array(v)
                }
                Role::Other(other) => {
                    assert_eq!(other, &name);
                    assert!(!matches!(name.as_str(), "master" | "slave" | "replica"));
                    Value::Array(vec![bulk(other), Value::Array(vec![])])
                }
            };
            assert_eq!(parse_role(again).unwrap(), role, "ROLE round trip");
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::Protocol),
    }

    if let Some(text) = value.as_str() {
        check_info(text);
    }
});

fn bulk(s: &str) -> Value {
    Value::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

fn fields(info: &InstanceInfo) -> Vec<(&'static str, String)> {
    let mut f = vec![
        ("name", "svc".to_string()),
        ("ip", info.address.host.clone()),
        ("port", info.address.port.to_string()),
        ("flags", info.flags.to_string()),
        ("config-epoch", info.config_epoch.to_string()),
    ];
    if let Some(run_id) = &info.run_id {
        f.push(("runid", run_id.clone()));
    }
    f
}

/// As a RESP2 sentinel sends it: a flat array of bulk strings.
fn flat(info: &InstanceInfo) -> Value {
    Value::Array(
        fields(info)
            .into_iter()
            .flat_map(|(k, v)| [bulk(k), bulk(&v)])
            .collect(),
    )
}

/// As a RESP3 sentinel sends it: a map.
fn map(info: &InstanceInfo) -> Value {
    Value::Map(
        fields(info)
            .into_iter()
            .map(|(k, v)| (bulk(k), bulk(&v)))
            .collect(),
    )
}

fn check_address(address: &Address) {
    assert_ne!(address.port, 0, "{address:?}");
    assert!(!address.host.is_empty(), "{address:?}");
}

fn check_instance(info: &InstanceInfo) {
    check_address(&info.address);
    assert!(
        !info.address.host.contains(char::is_whitespace),
        "{:?}",
        info.address
    );
    let flags = info.flags.to_string();
    assert!(
        flags.is_empty() || flags.split(',').all(|f| !f.is_empty()),
        "empty flag in {flags:?}"
    );
    assert_eq!(
        info.flags.is_down(),
        info.flags.has("s_down") || info.flags.has("o_down")
    );
    assert_eq!(
        info.flags.is_unhealthy(),
        info.flags.is_down() || info.flags.has("disconnected")
    );
    if let Some(run_id) = &info.run_id {
        assert!(!run_id.is_empty());
    }
    assert!(info.config_epoch <= i64::MAX as u64);
}

/// `info_tilt`: the first `sentinel_tilt:` line decides; prepending a line decides for it, and
/// anything after that line changes nothing.
fn check_info(text: &str) {
    let tilt = replies::info_tilt(text);
    let first = text
        .lines()
        .find_map(|l| l.trim_end().strip_prefix("sentinel_tilt:"));
    match tilt {
        Some(t) => assert_eq!(first, Some(if t { "1" } else { "0" })),
        None => assert!(!matches!(first, Some("0" | "1"))),
    }
    for flag in [false, true] {
        let line = format!("# Sentinel\r\nsentinel_tilt:{}\r\n", u8::from(flag));
        assert_eq!(replies::info_tilt(&format!("{line}{text}")), Some(flag));
    }
    if first.is_some() {
        assert_eq!(
            replies::info_tilt(&format!("{text}\r\nsentinel_tilt:1\r\nsentinel_tilt:0\r\n")),
            tilt,
            "a later line changed the verdict"
        );
    }
}
