//! The RESP frame scanner and decoder (RESP2 and RESP3), driven the way a connection drives them.
//!
//! Input: a control byte (bit 0: RESP2/RESP3; the rest: a chunk size) and the bytes a server sent.
//! Properties:
//! - nothing panics; frames tile the input (frames + leftover = input, unless refused);
//! - the scanner is resumable: the same bytes delivered all at once, in chunks, or byte by byte
//!   give the same frames, the same values and the same verdict;
//! - a frame the scanner delimits is one the decoder reads to exactly its end (decoding may
//!   refuse its contents, never its length);
//! - every decoded value re-encodes (reference encoder in fuzz/src/lib.rs) to bytes that scan as
//!   exactly one frame and decode to the same value (RESP3 map/set order aside); RESP2 never
//!   yields RESP3-only variants;
//! - a command encoded by the connection's encoder reads back as the array of its arguments.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sentinel_recovery::resp::fuzzing::encode_command;
use sentinel_recovery::{Protocol, Value};
use sentinel_recovery_fuzz::{
    canonical, encode, has_ambiguous_map, protocol_of, read_loop, same_steps, same_value, Step,
};

fuzz_target!(|data: &[u8]| {
    let Some((&control, wire)) = data.split_first() else {
        return;
    };
    let protocol = protocol_of(control);
    let chunk = 1 + usize::from(control >> 1) % 24;

    let (whole, left) = read_loop(wire, protocol, 0);
    let (chunked, chunked_left) = read_loop(wire, protocol, chunk);
    assert!(
        same_steps(wire, protocol, &whole, &chunked) && left == chunked_left,
        "chunks of {chunk} differ:\n{whole:?} {left:?}\n{chunked:?} {chunked_left:?}"
    );
    if wire.len() <= 512 {
        let (bytewise, bytewise_left) = read_loop(wire, protocol, 1);
        assert!(
            same_steps(wire, protocol, &whole, &bytewise) && left == bytewise_left,
            "byte by byte differs:\n{whole:?} {left:?}\n{bytewise:?} {bytewise_left:?}"
        );
    }

    let framed: usize = whole
        .iter()
        .map(|s| match s {
            Step::Frame(n, _) => *n,
            Step::Invalid(_) => 0,
        })
        .sum();
    if let Some(left) = left {
        assert_eq!(
            framed + left,
            wire.len(),
            "frames and leftover tile the input"
        );
    }

    let mut at = 0;
    for step in &whole {
        match step {
            Step::Frame(len, result) => {
                let frame = &wire[at..at + len];
                at += len;
                match result {
                    Ok(value) => check_value(value, protocol),
                    Err(e) => assert!(
                        !e.contains("incomplete frame") && !e.starts_with("frame length mismatch"),
                        "scanner and decoder disagree on where {:?} ends: {e}",
                        String::from_utf8_lossy(frame)
                    ),
                }
            }
            Step::Invalid(e) => assert!(!e.is_empty()),
        }
    }

    // The command encoder: arguments are the input split at NUL bytes.
    let args: Vec<&[u8]> = wire.split(|b| *b == 0).collect();
    let command = encode_command(&args);
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let (steps, left) = read_loop(&command, protocol, 0);
        let expected = Value::Array(
            args.iter()
                .map(|a| Value::Bulk(Bytes::copy_from_slice(a)))
                .collect(),
        );
        assert_eq!(left, Some(0));
        assert_eq!(steps, vec![Step::Frame(command.len(), Ok(expected))]);
    }
});

fn check_value(value: &Value, protocol: Protocol) {
    // Accessors never panic and agree with the shape.
    let _ = (value.as_int(), value.as_str(), value.as_bytes());
    if let Value::Array(items) = value {
        assert_eq!(
            value.clone().into_pairs().is_some(),
            items.len() % 2 == 0,
            "into_pairs of an array"
        );
    }

    let encoded = encode(value, protocol).unwrap_or_else(|| {
        panic!("{protocol:?} decoded a value it has no encoding for: {value:?}")
    });
    let again = reread(&encoded, protocol, value);
    match protocol {
        Protocol::Resp2 => assert_eq!(&again, value, "RESP2 round trip via {encoded:?}"),
        Protocol::Resp3 => {
            // A map with two entries under one key (two keys that become equal values, e.g. an
            // attribute dropped or invalid UTF-8 replaced) keeps one of them: unspecified which.
            if !has_ambiguous_map(value) {
                assert!(
                    same_value(value, &again),
                    "RESP3 round trip via {:?}:\n{:?}\n{:?}",
                    String::from_utf8_lossy(&encoded),
                    String::from_utf8_lossy(&canonical(value)),
                    String::from_utf8_lossy(&canonical(&again)),
                );
            }
            // What came back is a fixed point.
            let encoded = encode(&again, protocol).expect("RESP3 encodes every value");
            let third = reread(&encoded, protocol, &again);
            assert!(
                same_value(&again, &third),
                "not a fixed point: {again:?} {third:?}"
            );
        }
    }
}

/// Reads `encoded` (one frame) back through the read loop.
fn reread(encoded: &[u8], protocol: Protocol, original: &Value) -> Value {
    let (steps, left) = read_loop(encoded, protocol, 0);
    match (&steps[..], left) {
        ([Step::Frame(n, Ok(v))], Some(0)) if *n == encoded.len() => v.clone(),
        _ => panic!(
            "re-encoded {original:?} as {:?}, which reads back as {steps:?} leaving {left:?}",
            String::from_utf8_lossy(encoded)
        ),
    }
}
