//! The doctor's walker of X.509 certificates (DER) for `notAfter`, `tls_expiry::not_after`: it
//! reads the certificate a TLS server sent, so every byte of it comes from the network.
//!
//! Properties: nothing panics (no slice out of bounds, no overflow of a length); an answer comes
//! only from a SEQUENCE and lies between year 0 and 9999 (both time forms); and what follows the
//! outer element never changes an answer (the walker reads one element, not the stream).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sentinel_recovery::doctor::tls_expiry::not_after;

/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:99Z (the seconds field is two digits, unchecked).
const EARLIEST: i64 = -62_167_219_200;
const LATEST: i64 = 253_402_300_799 + 40;

fuzz_target!(|data: &[u8]| {
    let Some(seconds) = not_after(data) else {
        return;
    };
    assert_eq!(data.first(), Some(&0x30), "an answer from a non-SEQUENCE");
    assert!((EARLIEST..=LATEST).contains(&seconds), "{seconds}");
    let mut longer = data.to_vec();
    longer.extend_from_slice(b"\x30\x00trailing");
    assert_eq!(not_after(&longer), Some(seconds), "trailing bytes changed the answer");
});
