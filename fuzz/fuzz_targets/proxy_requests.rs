//! The fencing proxy's request reader: RESP multibulk and inline commands from a client.
//!
//! Input: a control byte (a chunk size) and the bytes a client sent.
//! Properties:
//! - nothing panics, whatever the bytes;
//! - the reader is resumable: the same bytes all at once or in chunks give the same requests
//!   and the same verdict;
//! - every request has at least one argument, and the bytes it forwards read back as exactly
//!   that request (one request, same arguments, nothing left over);
//! - no request is larger than the bound it was read with.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sentinel_recovery::proxy::fuzzing::split_requests;

const MAX: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&control, wire)) = data.split_first() else {
        return;
    };
    let chunk = 1 + usize::from(control) % 32;
    let whole = split_requests(wire, wire.len().max(1), MAX);
    let chunked = split_requests(wire, chunk, MAX);
    assert_eq!(whole, chunked, "chunk size {chunk} changed the requests");
    for (args, forwarded) in &whole.0 {
        assert!(!args.is_empty());
        assert!(args.iter().map(|a| a.len()).sum::<usize>() <= MAX, "a request over the bound");
        let (again, refused) = split_requests(forwarded, forwarded.len(), usize::MAX);
        assert_eq!(refused, None, "forwarded bytes refused");
        assert_eq!(again.len(), 1, "forwarded bytes are one request");
        assert_eq!(&again[0].0, args);
        assert_eq!(&again[0].1, forwarded);
    }
});
