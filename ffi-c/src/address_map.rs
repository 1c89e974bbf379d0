//! `address_map`'s function form in C: a callback with user data, like ioredis' `natMap`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Arc;

use sr::config::AddressMapFn;
use sr::Address;

use crate::args::sr_option_t;
use crate::client::{open_with, sr_client_t};
use crate::error::sr_error_t;
use crate::ffi::guard;

/// The room sr_address_map_cb gets for the mapped host, NUL included.
pub const SR_ADDRESS_MAP_HOST_MAX: usize = 256;

/// The function form of `address_map`: called for every address a sentinel reports (primary,
/// replicas, other sentinels, addresses in sentinel events; never for the sentinels of the URL)
/// before the client connects to it.
///
/// To connect elsewhere, write the NUL-terminated host (at most `mapped_host_len` bytes, NUL
/// included; SR_ADDRESS_MAP_HOST_MAX) into `mapped_host`, the port into `*mapped_port`, and
/// return 1. Return 0 to use the reported address. `host` is borrowed for the call only.
///
/// It runs on a core thread (`sr-worker-N`), possibly on several at once: it must be quick,
/// thread-safe, must not block and must not unwind. A return value other than 0 or 1, an empty
/// or unterminated host, or port 0 is logged and the reported address is used.
pub type sr_address_map_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        host: *const c_char,
        port: u16,
        mapped_host: *mut c_char,
        mapped_host_len: usize,
        mapped_port: *mut u16,
    ) -> c_int,
>;

/// The callback and its `user_data`, which the library never dereferences.
struct CMap {
    callback: unsafe extern "C" fn(
        *mut c_void,
        *const c_char,
        u16,
        *mut c_char,
        usize,
        *mut u16,
    ) -> c_int,
    user_data: *mut c_void,
}

// SAFETY: the header tells the host that the callback runs on core threads, concurrently.
unsafe impl Send for CMap {}
unsafe impl Sync for CMap {}

impl CMap {
    fn map(&self, reported: &Address) -> Option<Address> {
        let host = CString::new(reported.host.as_str()).ok()?;
        let mut out = [0 as c_char; SR_ADDRESS_MAP_HOST_MAX];
        let mut port: u16 = 0;
        // SAFETY: `host` and `out` live across the call; the callback's contract is above.
        let r = unsafe {
            (self.callback)(
                self.user_data,
                host.as_ptr(),
                reported.port,
                out.as_mut_ptr(),
                out.len(),
                &mut port,
            )
        };
        match r {
            0 => None,
            1 => {
                let bytes: Vec<u8> = out.iter().map(|&c| c as u8).collect();
                let mapped = CStr::from_bytes_until_nul(&bytes)
                    .ok()
                    .and_then(|c| c.to_str().ok())
                    .filter(|h| !h.is_empty() && port != 0);
                if mapped.is_none() {
                    tracing::warn!(address = %reported,
                        "address_map callback returned 1 with an empty, unterminated or non-UTF-8 host, or port 0; using the reported address");
                }
                mapped.map(|h| Address::new(h, port))
            }
            other => {
                tracing::warn!(address = %reported, returned = other,
                    "address_map callback returned neither 0 nor 1; using the reported address");
                None
            }
        }
    }
}

/// The core's form of a C map, or `None` without a callback.
pub(crate) fn map_fn(
    callback: sr_address_map_cb,
    user_data: *mut c_void,
) -> Option<Arc<AddressMapFn>> {
    let map = CMap {
        callback: callback?,
        user_data,
    };
    Some(Arc::new(move |a: &Address| map.map(a)))
}

/// sr_client_open() with the function form of `address_map`: `map` (with `map_user_data`, passed
/// back untouched) is asked for every address a sentinel reports; a matching `address_map`
/// option entry wins over it. `map` may be NULL (then this is sr_client_open()).
/// `map_user_data` must stay valid until sr_client_close() (or sr_client_free()) of this client
/// has returned on a host thread; a close made inside one of the client's callbacks returns
/// before the client's threads have stopped, so the map may still be called after it.
///
/// # Safety
/// As sr_client_open(); `map` is NULL or a function as described in sr_address_map_cb.
#[no_mangle]
pub unsafe extern "C" fn sr_client_open_mapped(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    map: sr_address_map_cb,
    map_user_data: *mut c_void,
    client: *mut *mut sr_client_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    guard(|| {
        open_with(
            url,
            options,
            options_len,
            map_fn(map, map_user_data),
            client,
            error,
        )
    })
}
