//! C ABI of sentinel-recovery (`libsentinel_recovery.so` / `.a`, header `sentinel_recovery.h`).
//!
//! A thin layer over the core crate: it converts arguments and replies, owns the C-side
//! lifetimes and delivers completions, nothing more. Every exported function catches panics and
//! reports them as [`SR_ERR_PANIC`]; NULL pointers give [`SR_ERR_INVALID_ARGUMENT`].
//!
//! The header is generated from this crate by cbindgen (see `cbindgen.toml`); the doc comments
//! here are its documentation.

#![allow(non_camel_case_types)]
#![deny(missing_docs)]

use std::ffi::{c_char, c_int};

mod client;
mod error;
mod reply;
mod runtime;
mod topology;

pub use client::*;
pub use error::*;
pub use reply::*;
pub use runtime::*;
pub use topology::*;

/// Runs `$body`, turning a panic into `$default`, so that no panic ever crosses the C boundary.
macro_rules! boundary {
    ($default:expr, $body:block) => {
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(value) => value,
            Err(_) => $default,
        }
    };
}
pub(crate) use boundary;

/// The library version (`"MAJOR.MINOR.PATCH"`), a static NUL-terminated string; never NULL,
/// never freed.
#[no_mangle]
pub extern "C" fn sr_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Success.
pub const SR_OK: c_int = 0;
/// The URL or an option is invalid; the message names the offending part.
pub const SR_ERR_CONFIG: c_int = 1;
/// No configured or learned sentinel could be reached within the deadline.
pub const SR_ERR_SENTINELS_UNREACHABLE: c_int = 2;
/// Every sentinel that answered said it does not monitor the service.
pub const SR_ERR_SERVICE_UNKNOWN: c_int = 3;
/// Sentinels know the service but none reported a primary that is up and verified.
pub const SR_ERR_NO_HEALTHY_PRIMARY: c_int = 4;
/// An operation did not finish before its deadline.
pub const SR_ERR_TIMEOUT: c_int = 5;
/// The connection broke while a request was in flight (the command may or may not have run).
pub const SR_ERR_CONNECTION_LOST: c_int = 6;
/// The server answered with an error reply; see sr_error_get_server_code().
pub const SR_ERR_SERVER: c_int = 7;
/// The peer sent something that is not valid RESP or not the expected shape.
pub const SR_ERR_PROTOCOL: c_int = 8;
/// TLS setup or handshake failed.
pub const SR_ERR_TLS: c_int = 9;
/// The server refused the credentials.
pub const SR_ERR_AUTH: c_int = 10;
/// The client was closed (also: the command was abandoned because the client closed).
pub const SR_ERR_CLOSED: c_int = 11;
/// The bounded queue of commands waiting for a primary is full.
pub const SR_ERR_QUEUE_FULL: c_int = 12;
/// C ABI only: a NULL pointer where one is required, an empty command, an index out of range,
/// a string that is not UTF-8, or a call not allowed where it was made.
pub const SR_ERR_INVALID_ARGUMENT: c_int = 100;
/// C ABI only: a reply accessor was used on a reply of another type.
pub const SR_ERR_WRONG_TYPE: c_int = 101;
/// C ABI only: an internal error (a Rust panic) was caught at the C boundary.
pub const SR_ERR_PANIC: c_int = 102;

#[cfg(test)]
mod tests {
    use super::*;
    use sr::ErrorCode;

    #[test]
    fn c_codes_match_the_shared_codes() {
        let c = [
            (SR_ERR_CONFIG, ErrorCode::Config),
            (
                SR_ERR_SENTINELS_UNREACHABLE,
                ErrorCode::SentinelsUnreachable,
            ),
            (SR_ERR_SERVICE_UNKNOWN, ErrorCode::ServiceUnknown),
            (SR_ERR_NO_HEALTHY_PRIMARY, ErrorCode::NoHealthyPrimary),
            (SR_ERR_TIMEOUT, ErrorCode::Timeout),
            (SR_ERR_CONNECTION_LOST, ErrorCode::ConnectionLost),
            (SR_ERR_SERVER, ErrorCode::Server),
            (SR_ERR_PROTOCOL, ErrorCode::Protocol),
            (SR_ERR_TLS, ErrorCode::Tls),
            (SR_ERR_AUTH, ErrorCode::Auth),
            (SR_ERR_CLOSED, ErrorCode::Closed),
            (SR_ERR_QUEUE_FULL, ErrorCode::QueueFull),
        ];
        assert_eq!(c.len(), ErrorCode::ALL.len());
        for (value, code) in c {
            assert_eq!(value, code.as_i32(), "{code}");
        }
    }

    #[test]
    fn boundary_turns_panics_into_the_default() {
        let v: c_int = boundary!(SR_ERR_PANIC, {
            if SR_OK == 0 {
                panic!("boom");
            }
            SR_OK
        });
        assert_eq!(v, SR_ERR_PANIC);
    }

    #[test]
    fn version_is_nul_terminated() {
        let v = unsafe { std::ffi::CStr::from_ptr(sr_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
