//! The fencing proxy handle (`sr_proxy_t`): start, address, stats, close (callback, mailbox and
//! blocking forms), free, over the core's host-layer proxy (`sr::host::HostProxy`), which starts
//! without waiting for discovery and runs every session on the core's threads; this file
//! converts C arguments and results, nothing more.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sr::host::{Done, HostProxy};

use crate::args::{option_pairs, out_param, sr_option_t, text};
use crate::codes::{SR_ERR_CLOSED, SR_ERR_CONFIG, SR_ERR_INTERNAL};
use crate::error::{c_string, sr_error_t};
use crate::ffi::{
    clone_arc, free_arc, guard, report, start, to_arc_mut_ptr, try_ref, Castable, SharedArc,
    UserData,
};
use crate::mailbox::{acquire_mailbox, done_into, sr_mailbox_t};
use crate::pubsub::sr_done_cb;

/// A fencing RESP proxy: a listener (loopback TCP or a Unix socket) that any Redis client,
/// unchanged, connects to as if to one standalone Redis, while the library follows the primary
/// through Sentinel behind it.
///
/// Each client connection is a session with its own connection to the verified primary, so
/// MULTI/EXEC, WATCH, blocking commands, pub/sub, SELECT, HELLO and the client's own AUTH keep
/// their meaning. From the moment a sentinel starts promoting a replica nothing more is written
/// to the old primary (requests wait, up to `hold_ms`); a write's reply read from a primary
/// being demoted reaches the client as an error beginning with `UNCERTAIN` (it may or may not
/// have been applied), never as a success; a request that found no primary within `hold_ms`
/// gets an error beginning with `FENCED` (not sent); at the switch every session moves to the
/// new primary with its state replayed. Nothing that may have reached a server is sent again.
/// A command already on the wire to a primary being demoted cannot be recalled, and pub/sub is
/// at-most-once across a move.
///
/// Opaque. Created by sr_proxy_start(), which gives the caller one reference; released only by
/// sr_proxy_free(). sr_proxy_close(), sr_proxy_close_into() and sr_proxy_close_blocking() close
/// it but keep the handle valid, so using a closed proxy, or closing it twice, gives
/// SR_ERR_CLOSED instead of undefined behaviour. All functions taking a proxy are thread-safe.
pub struct sr_proxy_t {
    _private: [u8; 0],
}

/// What an `sr_proxy_t *` points to.
pub(crate) struct ProxyBox {
    proxy: HostProxy,
    /// sr_proxy_address()'s text, lent to the caller until sr_proxy_free().
    address: CString,
    /// Set by the first close, of any form.
    closing: AtomicBool,
}

impl Castable for sr_proxy_t {
    type Ownership = SharedArc;
    type RustType = ProxyBox;
}

/// The grace the sidecar and every binding give replies in flight at close when the caller
/// names none (5000 ms); pass it as `grace_ms` to close as they do.
pub const SR_PROXY_DEFAULT_GRACE_MS: u64 = 5000;

/// The error of a call on a proxy that is closed or being closed.
fn closed() -> sr_error_t {
    sr_error_t::new(SR_ERR_CLOSED, "the proxy is closed")
}

/// A new reference to the proxy for the duration of a call, so that a concurrent
/// sr_proxy_free() can't free it under our feet.
///
/// # Safety
/// `proxy` is NULL or a handle not yet freed.
unsafe fn acquire(proxy: *const sr_proxy_t) -> Result<Arc<ProxyBox>, sr_error_t> {
    clone_arc(proxy).ok_or_else(|| sr_error_t::invalid("proxy is NULL"))
}

impl ProxyBox {
    /// Marks the proxy closing; refused with SR_ERR_CLOSED when a close already began.
    fn begin_close(&self) -> Result<(), sr_error_t> {
        match self.closing.swap(true, Ordering::SeqCst) {
            true => Err(closed()),
            false => Ok(()),
        }
    }

    /// Closes within `grace_ms`; `done` runs exactly once (see [`exactly_once`]).
    fn close(&self, grace_ms: u64, done: Done<()>) {
        self.proxy
            .close(Some(Duration::from_millis(grace_ms)), exactly_once(done));
    }
}

/// The host layer's close completion for `done`: `done(Ok)` when the close has finished, and
/// `done(Err(closed))` if the completion is dropped unrun instead (the core runtime was stopped
/// with the close still under way, which ends the proxy's tasks with it), so the caller's
/// completion runs exactly once either way.
fn exactly_once(done: Done<()>) -> Box<dyn FnOnce() + Send + 'static> {
    struct Once(Option<Done<()>>);
    impl Drop for Once {
        fn drop(&mut self) {
            if let Some(done) = self.0.take() {
                done(Err(sr::Error::new(
                    sr::ErrorCode::Closed,
                    "the core runtime stopped before the proxy's close completed",
                )));
            }
        }
    }
    let mut once = Once(Some(done));
    Box::new(move || {
        if let Some(done) = once.0.take() {
            done(Ok(()));
        }
    })
}

/// Starts a fencing proxy (see sr_proxy_t) for a `redis+sentinel://` URL, as sr_client_open()
/// reads it, and returns once it accepts connections, without waiting for discovery: sessions
/// wait for the first verified primary within `hold_ms`. The proxy and its sessions run on the
/// core's threads; one client (one shared sentinel monitor) serves every session.
///
/// `options` (`options_len` of them; NULL when 0) are the proxy's own keys, and any other key
/// goes to the client as the URL's query would:
/// - `listen`: `IP:PORT` (an IP literal; port 0 picks a free port) or `unix:PATH`; default
///   `127.0.0.1:0`. A TCP address that is not loopback needs `allow_remote`.
/// - `hold_ms`: how long a request waits for a primary (a promotion under way, none known yet)
///   before it is answered `FENCED` unsent; default the URL's `command_timeout_ms`.
/// - `max_clients` (default 10000; past it Redis' own "max number of clients reached"),
///   `idle_timeout_ms` (0, the default: never), `max_request_bytes` (default 512 MiB, at least
///   1024).
/// - `route`: `primary` (default) or `read` (sessions go where `read_from` sends reads).
/// - `lend_credentials`: `true` authenticates clients that did not with the URL's data-node
///   credentials (loopback or a Unix socket only); off by default, so a client authenticates
///   itself with its own AUTH / HELLO AUTH, checked by the server.
/// - `allow_remote`: `true` allows a non-loopback TCP address (the primary is then reachable
///   from beyond this host, through the proxy, without the server's own network protections).
/// - `unix_mode`: the Unix socket's file mode, octal; default `600`.
///
/// `url` and the options are borrowed for the call only. On SR_OK, `*proxy` receives a new
/// handle (close it, then free it with sr_proxy_free()); otherwise `*proxy` is set to NULL and
/// `*error` (if `error` is not NULL) receives an owned error: SR_ERR_CONFIG naming the offending
/// URL part or option (never a password) or saying why the address could not be bound,
/// SR_ERR_INVALID_ARGUMENT for a NULL URL, option or `proxy`.
///
/// # Safety
/// `url` and every option string are NULL or NUL-terminated; `options` points to `options_len`
/// options; `proxy` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_proxy_start(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    proxy: *mut *mut sr_proxy_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    report(error, || {
        let out = out_param(proxy, "proxy")?;
        let pairs = option_pairs(options, options_len)?;
        let started = HostProxy::start(text(url, "the URL")?, &pairs)?;
        let address = c_string(&started.address().to_string());
        *out = to_arc_mut_ptr::<sr_proxy_t>(ProxyBox {
            proxy: started,
            address,
            closing: AtomicBool::new(false),
        });
        Ok(())
    })
}

/// Where the proxy listens, as a NUL-terminated string: `IP:PORT` for TCP (`127.0.0.1:40123`,
/// `[::1]:40123`; the port the system picked for port 0) or `unix:PATH`. Borrowed from `proxy`:
/// valid until sr_proxy_free() (also after a close). NULL for NULL.
///
/// # Safety
/// `proxy` is NULL or a handle not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_proxy_address(proxy: *const sr_proxy_t) -> *const c_char {
    guard(|| match try_ref(proxy) {
        Some(p) => p.address.as_ptr(),
        None => std::ptr::null(),
    })
}

/// The proxy's counters now, as one JSON object: `sessions_open`, `sessions_accepted`,
/// `sessions_refused` (past `max_clients`), `commands_forwarded`, `commands_held` (that waited
/// for a primary), `held_seconds` (their wait, summed), `held_expired` (answered `FENCED`),
/// `fenced_replies` (replies from a primary being demoted turned into `UNCERTAIN`),
/// `not_replicated` (`wait_replicas` not met), `moves` (sessions moved to a new primary),
/// `sessions_closed_at_move`, `primary_changes`, `upstream_errors`, `malformed_requests`. Every
/// field but `sessions_open` only grows; later versions may add fields.
///
/// On SR_OK `*json` receives the object as an owned NUL-terminated string (free it with
/// sr_string_free()). Otherwise `*json` is NULL and `*error` (if not NULL) receives an owned
/// error: SR_ERR_CLOSED once a close began, SR_ERR_INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `proxy` is NULL or a handle not yet freed; `json` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_proxy_stats(
    proxy: *mut sr_proxy_t,
    json: *mut *mut c_char,
    error: *mut *mut sr_error_t,
) -> c_int {
    report(error, || {
        let json = out_param(json, "json")?;
        let p = acquire(proxy)?;
        if p.closing.load(Ordering::SeqCst) {
            return Err(closed());
        }
        let stats = p.proxy.stats()?;
        let text = serde_json::to_string(&stats).map_err(|e| {
            sr_error_t::new(
                SR_ERR_INTERNAL,
                &format!("the proxy's counters could not be written as JSON: {e}"),
            )
        })?;
        *json = c_string(&text).into_raw();
        Ok(())
    })
}

/// Closes the proxy and returns at once: it stops accepting, lets replies in flight reach their
/// clients for up to `grace_ms` milliseconds (0: none; SR_PROXY_DEFAULT_GRACE_MS is what the
/// sidecar gives), then closes every session and the proxy's client (for a Unix socket, the
/// socket file is removed). Then `callback` (may be NULL) is called exactly once, on a core
/// thread, with `user_data` and a NULL error (SR_ERR_CLOSED instead if the core runtime was
/// stopped, by sr_runtime_shutdown(), before the close completed; the proxy's work ends with
/// the runtime). When the core runtime can't run at all it is called before this returns, on
/// the calling thread. The handle stays valid until sr_proxy_free(); calls on it give
/// SR_ERR_CLOSED from now on.
///
/// Returns SR_OK when the close began (the callback is then called once); any other code means
/// it did not and the callback is never called: SR_ERR_CLOSED (a close already began, from any
/// thread), SR_ERR_INVALID_ARGUMENT (NULL proxy). Safe to call from any callback of the library.
///
/// # Safety
/// `proxy` is NULL or a handle not yet freed; `user_data` stays valid until the callback ran.
#[no_mangle]
pub unsafe extern "C" fn sr_proxy_close(
    proxy: *mut sr_proxy_t,
    grace_ms: u64,
    callback: sr_done_cb,
    user_data: *mut c_void,
) -> c_int {
    start(|| {
        let p = acquire(proxy)?;
        p.begin_close()?;
        let user_data = UserData::new(user_data);
        p.close(
            grace_ms,
            Box::new(move |result: sr::Result<()>| {
                let Some(cb) = callback else { return };
                match result {
                    Ok(()) => cb(user_data.get(), std::ptr::null()),
                    Err(e) => {
                        let e = sr_error_t::from(e);
                        cb(user_data.get(), &e);
                    }
                }
            }),
        );
        Ok::<(), sr_error_t>(())
    })
}

/// sr_proxy_close() whose completion goes to `mailbox` as `op_id`'s SR_DELIVERY_COMPLETION,
/// as sr_client_execute_into(): `error` NULL (and every other pointer NULL) once the close has
/// finished, or SR_ERR_CLOSED if the core runtime was stopped first. Nothing of yours runs on a
/// core thread.
///
/// Returns SR_OK when the close began: exactly one completion with `op_id` then reaches the
/// mailbox (a mailbox closed before the proxy's close finished discards it). Any other code
/// means it did not begin and no completion comes: SR_ERR_CLOSED (a close already began, or the
/// mailbox is closed), SR_ERR_INVALID_ARGUMENT (NULL proxy or mailbox).
///
/// # Safety
/// `proxy` is NULL or a handle not yet freed; `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_proxy_close_into(
    proxy: *mut sr_proxy_t,
    grace_ms: u64,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
) -> c_int {
    start(|| {
        let p = acquire(proxy)?;
        let done = done_into(&*acquire_mailbox(mailbox)?, op_id)?;
        p.begin_close()?;
        p.close(grace_ms, done);
        Ok::<(), sr_error_t>(())
    })
}

/// sr_proxy_close() that blocks the calling thread (and only it) until the close has finished:
/// when it returns SR_OK the proxy accepts nothing, every session is closed and the listener's
/// address is free again. Returns SR_ERR_CLOSED when a close already began (from any thread),
/// SR_ERR_INVALID_ARGUMENT for NULL, and SR_ERR_CONFIG from inside a library callback (a core
/// thread), where waiting could stall the very threads the close needs: use sr_proxy_close()
/// there. `*error` (if `error` is not NULL) receives an owned error for any code but SR_OK.
///
/// # Safety
/// `proxy` is NULL or a handle not yet freed; `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_proxy_close_blocking(
    proxy: *mut sr_proxy_t,
    grace_ms: u64,
    error: *mut *mut sr_error_t,
) -> c_int {
    // The host layer refuses a core thread too; the check here gives C's own wording.
    report(error, || {
        let p = acquire(proxy)?;
        if sr::runtime::on_core_thread() {
            return Err(sr_error_t::new(
                SR_ERR_CONFIG,
                "sr_proxy_close_blocking() was called on a core runtime thread (inside a callback); use sr_proxy_close() there",
            ));
        }
        p.begin_close()?;
        p.proxy
            .close_blocking(Some(Duration::from_millis(grace_ms)))
            .map_err(sr_error_t::from)
    })
}

/// Releases the handle; the pointer must not be used afterwards. NULL is ignored. A proxy not
/// closed yet is closed without a grace and without waiting: it stops accepting and its
/// sessions end at once, in the background (close it first to wait for that or to give replies
/// in flight time).
///
/// # Safety
/// `proxy` is NULL or a handle from sr_proxy_start(), not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_proxy_free(proxy: *mut sr_proxy_t) {
    guard(|| drop(free_arc(proxy)))
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;
    use std::ptr::{null, null_mut};
    use std::sync::mpsc;

    use super::*;
    use crate::codes::SR_ERR_INVALID_ARGUMENT;
    use crate::doctor::sr_string_free;
    use crate::error::{sr_error_free, sr_error_get_code, sr_error_get_message};
    use crate::ffi::SR_OK;

    #[test]
    fn the_default_grace_is_the_host_layers() {
        assert_eq!(
            u128::from(SR_PROXY_DEFAULT_GRACE_MS),
            sr::host::PROXY_DEFAULT_GRACE.as_millis()
        );
    }

    unsafe extern "C" fn on_closed(user_data: *mut c_void, error: *const sr_error_t) {
        let tx = &*user_data.cast::<mpsc::Sender<c_int>>();
        let code = match error.is_null() {
            true => SR_OK,
            false => sr_error_get_code(error),
        };
        tx.send(code).unwrap();
    }

    #[test]
    fn start_address_stats_close_and_refusals() {
        unsafe {
            let url = c"redis+sentinel://127.0.0.1:1/svc";
            let mut p = null_mut();
            let mut e = null_mut();
            let remote = [sr_option_t {
                key: c"listen".as_ptr(),
                value: c"10.0.0.1:0".as_ptr(),
            }];
            assert_eq!(
                sr_proxy_start(url.as_ptr(), remote.as_ptr(), 1, &mut p, &mut e),
                SR_ERR_CONFIG
            );
            assert!(p.is_null());
            let msg = CStr::from_ptr(sr_error_get_message(e)).to_str().unwrap();
            assert!(msg.contains("allow_remote"), "{msg}");
            sr_error_free(e);
            assert_eq!(
                sr_proxy_start(null(), null(), 0, &mut p, null_mut()),
                SR_ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                sr_proxy_start(url.as_ptr(), null(), 1, &mut p, null_mut()),
                SR_ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                sr_proxy_start(url.as_ptr(), null(), 0, null_mut(), null_mut()),
                SR_ERR_INVALID_ARGUMENT
            );

            let hold = [sr_option_t {
                key: c"hold_ms".as_ptr(),
                value: c"100".as_ptr(),
            }];
            assert_eq!(
                sr_proxy_start(url.as_ptr(), hold.as_ptr(), 1, &mut p, &mut e),
                SR_OK
            );
            assert!(e.is_null());
            let address = CStr::from_ptr(sr_proxy_address(p)).to_str().unwrap();
            assert!(address.starts_with("127.0.0.1:"), "{address}");
            assert_ne!(address, "127.0.0.1:0");
            let mut json = null_mut();
            assert_eq!(sr_proxy_stats(p, &mut json, null_mut()), SR_OK);
            let text = CStr::from_ptr(json).to_str().unwrap();
            assert!(text.contains("\"sessions_open\":0"), "{text}");
            sr_string_free(json);

            let (tx, rx) = mpsc::channel::<c_int>();
            let tx_ptr = std::ptr::addr_of!(tx).cast_mut().cast::<c_void>();
            assert_eq!(sr_proxy_close(p, 0, Some(on_closed), tx_ptr), SR_OK);
            assert_eq!(
                rx.recv_timeout(std::time::Duration::from_secs(10)),
                Ok(SR_OK)
            );
            // A second close of any form is refused and never calls back.
            assert_eq!(sr_proxy_close(p, 0, Some(on_closed), tx_ptr), SR_ERR_CLOSED);
            assert_eq!(sr_proxy_close_blocking(p, 0, null_mut()), SR_ERR_CLOSED);
            assert_eq!(sr_proxy_stats(p, &mut json, &mut e), SR_ERR_CLOSED);
            assert!(json.is_null());
            sr_error_free(e);
            assert!(rx
                .recv_timeout(std::time::Duration::from_millis(100))
                .is_err());
            // The address outlives the close.
            assert!(!sr_proxy_address(p).is_null());
            sr_proxy_free(p);

            assert!(sr_proxy_address(null()).is_null());
            assert_eq!(
                sr_proxy_close(null_mut(), 0, None, null_mut()),
                SR_ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                sr_proxy_close_blocking(null_mut(), 0, null_mut()),
                SR_ERR_INVALID_ARGUMENT
            );
            sr_proxy_free(null_mut());
        }
    }
}
