//! The sentinel event parser, `events::parse(channel, payload)`.
//!
//! Input: a control byte choosing the channel (one of the subscribed channels, or, for values
//! past them, the input up to its first newline) and the payload.
//! Properties: nothing panics; errors are protocol errors; an accepted event is consistent with
//! its channel (switch-master only from `+switch-master`, TILT only from `+tilt`/`-tilt`, an
//! instance event names its channel), has non-zero ports, non-empty hosts and a non-empty service
//! without whitespace (replica and sentinel events always name their master, the service is the
//! name after `@`, never the first word); and an accepted event, written back in sentinel.c's
//! format, parses to the same event (extra words such as `#quorum 2/2` aside).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sentinel_recovery::sentinel::events::{self, InstanceKind, SentinelEvent, CHANNELS};
use sentinel_recovery::{Address, ErrorCode};

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let (channel, payload) = match CHANNELS.get(usize::from(control)) {
        Some(channel) => (channel.as_bytes(), rest),
        None => match rest.iter().position(|b| *b == b'\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &[][..]),
        },
    };
    let event = match events::parse(channel, payload) {
        Ok(event) => event,
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::Protocol, "{e}");
            return;
        }
    };
    let channel = std::str::from_utf8(channel).expect("an accepted channel is UTF-8");
    let payload = std::str::from_utf8(payload).expect("an accepted payload is UTF-8");
    let words: Vec<&str> = payload.split_ascii_whitespace().collect();

    let again = match &event {
        SentinelEvent::SwitchMaster { service, old, new } => {
            assert_eq!(channel, "+switch-master");
            check_word(service);
            check_address(old);
            check_address(new);
            assert_eq!(words[0], service);
            format!(
                "{service} {} {} {} {}",
                old.host, old.port, new.host, new.port
            )
        }
        SentinelEvent::Tilt { entered } => {
            assert!(channel == "+tilt" || channel == "-tilt", "{channel}");
            assert_eq!(*entered, channel == "+tilt");
            // The payload is not read: anything goes.
            assert_eq!(
                events::parse(channel.as_bytes(), b"#tilt mode entered").unwrap(),
                event
            );
            return;
        }
        SentinelEvent::Instance {
            event: name,
            instance,
        } => {
            assert_eq!(name, channel);
            assert!(!matches!(channel, "+switch-master" | "+tilt" | "-tilt"));
            check_word(&instance.name);
            check_word(&instance.service);
            check_address(&instance.address);
            assert_eq!(words[1], instance.name);
            let kind = match instance.kind {
                InstanceKind::Master => "master",
                InstanceKind::Replica => "slave",
                InstanceKind::Sentinel => "sentinel",
            };
            assert_eq!(
                kind,
                match words[0] {
                    "replica" => "slave",
                    w => w,
                }
            );
            let mut text = format!(
                "{kind} {} {} {}",
                instance.name, instance.address.host, instance.address.port
            );
            match &instance.master {
                Some(master) => {
                    check_address(master);
                    assert_eq!(words[4], "@");
                    assert_eq!(
                        words[5], instance.service,
                        "the service is the name after @"
                    );
                    text += &format!(" @ {} {} {}", instance.service, master.host, master.port);
                }
                None => {
                    assert_eq!(instance.kind, InstanceKind::Master, "no master for {kind}");
                    assert_eq!(instance.service, instance.name);
                }
            }
            text
        }
    };
    assert_eq!(
        events::parse(channel.as_bytes(), again.as_bytes()).unwrap(),
        event,
        "written back as {again:?}"
    );
    assert_eq!(
        event.service().is_some(),
        !matches!(event, SentinelEvent::Tilt { .. })
    );
});

fn check_word(word: &str) {
    assert!(
        !word.is_empty() && !word.contains(|c: char| c.is_ascii_whitespace()),
        "{word:?}"
    );
}

fn check_address(address: &Address) {
    assert_ne!(address.port, 0, "{address:?}");
    check_word(&address.host);
}
