//! The client handle: open, execute, topology, events, close, free, over the core's host
//! layer (which guarantees exactly-once completions and no callback after close); this file
//! converts C arguments and results, nothing more.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sr::host::{EventSubscription, Handle};
use sr::{Config, Event, Value};

use crate::topology::EventBox;
use crate::*;

/// A client of one Sentinel-managed service.
///
/// Opaque. Created by sr_client_open(), which gives the caller one reference; released only by
/// sr_client_free(). sr_client_close() closes it but keeps the handle valid, so using a closed
/// client, or closing it twice, gives SR_ERR_CLOSED instead of undefined behaviour. After
/// sr_client_free() the pointer must not be used again. All functions taking a client are
/// thread-safe.
pub struct sr_client_t {
    pub(crate) handle: Handle,
    /// Set by the first sr_client_close().
    closing: AtomicBool,
    /// The installed event callback's subscription.
    events: Mutex<Option<EventSubscription>>,
}

/// One option for sr_client_open(): a key of the URL's query string (`command_timeout_ms`,
/// `sentinel_password`, `read_from`, ...) and its value, both NUL-terminated UTF-8. Borrowed
/// for the duration of the call only.
#[repr(C)]
pub struct sr_option_t {
    /// The option's name.
    pub key: *const c_char,
    /// Its value, as text (`"250"`, `"true"`, ...).
    pub value: *const c_char,
}

/// Completion of sr_client_execute(): exactly one call per accepted command, on a core thread
/// (`sr-worker-N`), also when the client is closed meanwhile (then with SR_ERR_CLOSED).
///
/// Either `reply` is non-NULL and `error` NULL (success; the reply may be SR_REPLY_NIL), or
/// `reply` is NULL and `error` non-NULL. Both are borrowed for the duration of the call only:
/// copy what you need (or sr_reply_clone() / sr_error_clone()) and return quickly. The callback
/// must not block, must not call sr_client_execute_blocking() or sr_client_wait_ready() (they
/// fail there with SR_ERR_INVALID_ARGUMENT), and must not unwind (no C++ exception may leave it).
/// It may call sr_client_execute(), sr_client_close() and sr_client_free().
pub type sr_reply_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        reply: *const sr_reply_t,
        error: *const sr_error_t,
    ),
>;

/// Event callback, installed with sr_client_set_event_callback(): called for each topology event
/// of the client, in order, on a core thread (one call at a time).
///
/// `event` and everything it points to are borrowed for the duration of the call only: copy what
/// you need (or sr_event_clone()) and return quickly; do not block and do not unwind. It may call
/// sr_client_close(), sr_client_free() and sr_client_set_event_callback(client, NULL, NULL) on its
/// own client; installing another callback from inside it is refused.
pub type sr_event_cb =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const sr_event_t)>;

/// The host's `user_data`, carried to a core thread and handed back untouched.
#[derive(Clone, Copy)]
pub(crate) struct UserData(pub(crate) *mut c_void);

// SAFETY: the library never dereferences it; the header tells the host that callbacks run on
// other threads.
unsafe impl Send for UserData {}

impl UserData {
    pub(crate) fn get(self) -> *mut c_void {
        self.0
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new reference to the handle for the duration of a call, so that a concurrent
/// sr_client_free() can't free it under our feet.
pub(crate) unsafe fn acquire(client: *const sr_client_t) -> Option<Arc<sr_client_t>> {
    if client.is_null() {
        return None;
    }
    Arc::increment_strong_count(client);
    Some(Arc::from_raw(client))
}

impl sr_client_t {
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Closes the client; see sr_client_close().
    fn close(&self) -> c_int {
        if self.closing.swap(true, Ordering::SeqCst) {
            return SR_ERR_CLOSED;
        }
        lock(&self.events).take();
        self.handle.close_blocking();
        SR_OK
    }
}

pub(crate) unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, sr_error_t> {
    if p.is_null() {
        return Err(sr_error_t::invalid(&format!("{what} is NULL")));
    }
    CStr::from_ptr(p)
        .to_str()
        .map_err(|_| sr_error_t::new(SR_ERR_CONFIG, &format!("{what} is not valid UTF-8")))
}

pub(crate) unsafe fn arguments<'a>(
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
) -> Result<Vec<&'a [u8]>, sr_error_t> {
    if argc == 0 || argv.is_null() {
        return Err(sr_error_t::invalid(
            "a command needs at least one argument (argc > 0, argv not NULL)",
        ));
    }
    let ptrs = std::slice::from_raw_parts(argv, argc);
    let lens = (!argv_len.is_null()).then(|| std::slice::from_raw_parts(argv_len, argc));
    let mut out = Vec::with_capacity(argc);
    for (i, &p) in ptrs.iter().enumerate() {
        let arg: &[u8] = match (p.is_null(), lens) {
            (true, Some(l)) if l[i] == 0 => &[],
            (true, _) => {
                return Err(sr_error_t::invalid(&format!("argument #{i} is NULL")));
            }
            (false, Some(l)) => std::slice::from_raw_parts(p.cast::<u8>(), l[i]),
            (false, None) => CStr::from_ptr(p).to_bytes(),
        };
        out.push(arg);
    }
    Ok(out)
}

/// Opens a client for a `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service
/// [?key=value&...]` URL (`valkey+sentinel://`, and `rediss+sentinel://` for TLS) and returns at
/// once: discovery runs in the background on the core's threads. Use sr_client_wait_ready() to
/// wait for the first discovery round, or just send commands (they wait for a primary up to
/// their deadline).
///
/// `options` (`options_len` of them; NULL when 0) override the URL's query keys. `url` and the
/// options are borrowed for the call only. On SR_OK, `*client` receives a new handle (free it
/// with sr_client_free()); otherwise `*client` is set to NULL and `*error` (if `error` is not
/// NULL) receives an owned error naming the offending part (never a password).
///
/// # Safety
/// `url` and every option string are NULL or NUL-terminated; `options` points to `options_len`
/// options; `client` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_open(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    client: *mut *mut sr_client_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    open_with(url, options, options_len, None, client, error)
}

/// The configuration of `url` and `options` (each option through `Config::set`), as
/// sr_client_open() and sr_doctor() read them.
pub(crate) unsafe fn config_of(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
) -> Result<Config, sr_error_t> {
    if options.is_null() && options_len > 0 {
        return Err(sr_error_t::invalid("options is NULL but options_len > 0"));
    }
    let mut pairs = Vec::with_capacity(options_len);
    if options_len > 0 {
        for (i, o) in std::slice::from_raw_parts(options, options_len)
            .iter()
            .enumerate()
        {
            let key = text(o.key, &format!("option #{i} key"))?;
            let value = text(o.value, &format!("option '{key}' value"))?;
            pairs.push((key, value));
        }
    }
    Ok(sr::host::config_from_url(text(url, "the URL")?, &pairs)?)
}

/// sr_client_open(), with `address_map`'s function form when `map` is given.
pub(crate) unsafe fn open_with(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    map: Option<std::sync::Arc<sr::config::AddressMapFn>>,
    client: *mut *mut sr_client_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    boundary!(fail(error, sr_error_t::panic()), {
        clear_error(error);
        if client.is_null() {
            return fail(
                error,
                sr_error_t::invalid("the client out-parameter is NULL"),
            );
        }
        *client = std::ptr::null_mut();
        let opened = (|| -> Result<Handle, sr_error_t> {
            let mut config = config_of(url, options, options_len)?;
            if map.is_some() {
                config.address_map.set_function(map);
            }
            let handle = Handle::open(config)?;
            handle.set_api_names(&crate::transaction::C_API);
            Ok(handle)
        })();
        match opened {
            Ok(opened) => {
                let handle = Arc::new(sr_client_t {
                    handle: opened,
                    closing: AtomicBool::new(false),
                    events: Mutex::new(None),
                });
                *client = Arc::into_raw(handle).cast_mut();
                SR_OK
            }
            Err(e) => fail(error, e),
        }
    })
}

/// Waits until the client's first discovery round has finished, blocking the calling thread
/// only. On SR_OK the round found a verified primary and, if `topology` is not NULL, `*topology`
/// receives an owned snapshot (free with sr_topology_free()). Otherwise the error says which
/// case happened (SR_ERR_SENTINELS_UNREACHABLE, SR_ERR_SERVICE_UNKNOWN,
/// SR_ERR_NO_HEALTHY_PRIMARY, SR_ERR_CLOSED); the client stays open and keeps retrying.
/// Refused (SR_ERR_INVALID_ARGUMENT) inside a callback.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `topology` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_wait_ready(
    client: *mut sr_client_t,
    topology: *mut *mut sr_topology_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    boundary!(fail(error, sr_error_t::panic()), {
        clear_error(error);
        if !topology.is_null() {
            *topology = std::ptr::null_mut();
        }
        let Some(h) = acquire(client) else {
            return fail(error, sr_error_t::invalid("client is NULL"));
        };
        if sr::runtime::on_core_thread() {
            return fail(
                error,
                sr_error_t::invalid("sr_client_wait_ready can't wait inside a callback"),
            );
        }
        match Handle::block(|done| h.handle.ready(done)) {
            Ok(t) => {
                if !topology.is_null() {
                    *topology = topology_to_c(&t);
                }
                SR_OK
            }
            Err(e) => fail(error, e.into()),
        }
    })
}

/// Sends one command and returns at once; `callback` gets its result later, on a core thread
/// (see sr_reply_cb), with `user_data` passed back untouched.
///
/// `argv` holds `argc` (> 0) arguments, the command name first; `argv_len[i]` is the length of
/// `argv[i]` (binary safe), or `argv_len` may be NULL when every argument is a NUL-terminated
/// string. The arguments are copied before this returns.
///
/// Returns SR_OK when the command was accepted: `callback` is then called exactly once (in the
/// rare case that the core runtime can't run at all, it is called before this returns, on the
/// calling thread). Any other code means it was not accepted and `callback` is never called:
/// SR_ERR_INVALID_ARGUMENT (NULL client, argv or callback, argc 0), SR_ERR_CLOSED.
///
/// The command's deadline is the client's `command_timeout_ms` option (default 5000); use
/// sr_client_execute_with() for a deadline of its own or a cancel handle.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `argv` points to `argc` pointers, each NULL
/// (only with a length of 0) or valid for its length (or NUL-terminated when `argv_len` is NULL);
/// `argv_len` is NULL or points to `argc` lengths.
#[no_mangle]
pub unsafe extern "C" fn sr_client_execute(
    client: *mut sr_client_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    callback: sr_reply_cb,
    user_data: *mut c_void,
) -> c_int {
    boundary!(SR_ERR_INTERNAL, {
        let Some(h) = acquire(client) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let Some(cb) = callback else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let args = match arguments(argc, argv, argv_len) {
            Ok(a) => a,
            Err(e) => return e.code(),
        };
        if h.handle.is_closed() {
            return SR_ERR_CLOSED;
        }
        h.handle.execute(&args, None, reply_to(cb, user_data));
        SR_OK
    })
}

/// The completion that hands a reply (or error) to a host's `sr_reply_cb`, with its
/// `user_data` passed back untouched: the one way every reply-returning call of the ABI ends.
pub(crate) fn reply_to(cb: ReplyFn, user_data: *mut c_void) -> sr::host::Done<Value> {
    let user_data = UserData(user_data);
    Box::new(move |result: sr::Result<Value>| deliver(cb, user_data.get(), result))
}

/// What `sr_reply_cb` holds when it is not NULL.
pub(crate) type ReplyFn = unsafe extern "C" fn(*mut c_void, *const sr_reply_t, *const sr_error_t);

pub(crate) fn deliver(cb: ReplyFn, user_data: *mut c_void, result: sr::Result<Value>) {
    let converted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        result.map_err(sr_error_t::from)
    }));
    // SAFETY: the host promised a valid callback; the pointers live until it returns.
    unsafe {
        match converted {
            Ok(Ok(value)) => cb(user_data, as_reply(&value), std::ptr::null()),
            Ok(Err(e)) => cb(user_data, std::ptr::null(), &e),
            Err(_) => cb(user_data, std::ptr::null(), &sr_error_t::panic()),
        }
    }
}

/// Sends one command and blocks the calling thread (only it) until its reply or its deadline,
/// the client's `command_timeout_ms` option (default 5000 ms; set it per client with
/// sr_client_open() options). Arguments as for sr_client_execute().
///
/// On SR_OK `*reply` receives an owned reply (free with sr_reply_free()). Otherwise `*reply` is
/// NULL and `*error` (if `error` is not NULL) receives an owned error; an error reply from the
/// server is SR_ERR_SERVER. Refused (SR_ERR_INVALID_ARGUMENT) inside a callback, where waiting
/// could stall the threads the reply needs.
///
/// # Safety
/// As sr_client_execute(); `reply` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_execute_blocking(
    client: *mut sr_client_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    reply: *mut *mut sr_reply_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    boundary!(fail(error, sr_error_t::panic()), {
        execute_blocking(client, argc, argv, argv_len, None, reply, error)
    })
}

/// sr_client_execute_blocking() with an optional deadline of its own.
pub(crate) unsafe fn execute_blocking(
    client: *mut sr_client_t,
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
    timeout: Option<std::time::Duration>,
    reply: *mut *mut sr_reply_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    clear_error(error);
    if reply.is_null() {
        return fail(
            error,
            sr_error_t::invalid("the reply out-parameter is NULL"),
        );
    }
    *reply = std::ptr::null_mut();
    let Some(h) = acquire(client) else {
        return fail(error, sr_error_t::invalid("client is NULL"));
    };
    let args = match arguments(argc, argv, argv_len) {
        Ok(a) => a,
        Err(e) => return fail(error, e),
    };
    if sr::runtime::on_core_thread() {
        return fail(
            error,
            sr_error_t::invalid(
                "sr_client_execute_blocking can't wait inside a callback; use \
                 sr_client_execute",
            ),
        );
    }
    match Handle::block(|done| h.handle.execute(&args, timeout, done)) {
        Ok(v) => {
            *reply = into_owned_reply(v);
            SR_OK
        }
        Err(e) => fail(error, e.into()),
    }
}

/// The current topology snapshot, without waiting on network work. On SR_OK `*topology`
/// receives an owned snapshot (free with sr_topology_free()); otherwise it is NULL and the error
/// is SR_ERR_INVALID_ARGUMENT or SR_ERR_CLOSED.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `topology` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_client_topology(
    client: *mut sr_client_t,
    topology: *mut *mut sr_topology_t,
    error: *mut *mut sr_error_t,
) -> c_int {
    boundary!(fail(error, sr_error_t::panic()), {
        clear_error(error);
        if topology.is_null() {
            return fail(
                error,
                sr_error_t::invalid("the topology out-parameter is NULL"),
            );
        }
        *topology = std::ptr::null_mut();
        let Some(h) = acquire(client) else {
            return fail(error, sr_error_t::invalid("client is NULL"));
        };
        match h.handle.topology().map_err(sr_error_t::from) {
            Ok(t) => {
                *topology = topology_to_c(&t);
                SR_OK
            }
            Err(e) => fail(error, e),
        }
    })
}

/// Installs `callback` (with its `user_data`) as the client's event callback, replacing any
/// earlier one, or removes it when `callback` is NULL. When this returns, the earlier callback is
/// not running and will never be called again (except: called from inside that very callback,
/// its current run finishes first), so its `user_data` may be released.
///
/// Returns SR_OK, SR_ERR_INVALID_ARGUMENT (NULL client, or installing a callback from inside
/// this client's event callback) or SR_ERR_CLOSED.
///
/// # Safety
/// `client` is NULL or a handle not yet freed; `user_data` stays valid until the callback is
/// replaced or removed, or the client closed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_set_event_callback(
    client: *mut sr_client_t,
    callback: sr_event_cb,
    user_data: *mut c_void,
) -> c_int {
    boundary!(SR_ERR_INTERNAL, {
        let Some(h) = acquire(client) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        if h.handle.is_closed() {
            return SR_ERR_CLOSED;
        }
        let Some(cb) = callback else {
            if let Some(old) = lock(&h.events).take() {
                old.remove();
            }
            return SR_OK;
        };
        if h.handle.in_callback() {
            return SR_ERR_INVALID_ARGUMENT;
        }
        let user_data = UserData(user_data);
        let forward = move |event: &Event| {
            let Ok(boxed) = std::panic::catch_unwind(|| EventBox::new(event)) else {
                return;
            };
            // SAFETY: the host promised a valid callback; the event lives until it returns.
            unsafe { cb(user_data.get(), boxed.view()) };
        };
        let mut installed = lock(&h.events);
        if let Some(old) = installed.take() {
            old.remove();
        }
        match h.handle.subscribe_events(Box::new(forward)) {
            Ok(subscription) => {
                *installed = Some(subscription);
                SR_OK
            }
            Err(e) => sr_error_t::from(e).code(),
        }
    })
}

/// Closes the client: stops its event callback, fails its waiting commands with SR_ERR_CLOSED
/// and releases its connections (and, for the last client of a service, the shared sentinel
/// monitor). The handle stays valid until sr_client_free(); every later call on it gives
/// SR_ERR_CLOSED.
///
/// From a host thread it blocks until the close is done and every completion of this client's
/// commands has been delivered: after it returns, no callback of this client runs (so
/// `user_data` given to it may be released; do not hold a lock that a callback takes while
/// calling it). From inside a callback (a core thread) it does not wait: the event callback is
/// never called again after it returns, and the rest of the close runs in the background;
/// completions of other commands still in flight are still delivered, each once, on core
/// threads, typically with SR_ERR_CLOSED.
///
/// Returns SR_OK, SR_ERR_CLOSED if the client was already closed (or is being closed by another
/// thread), SR_ERR_INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `client` is NULL or a handle not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_close(client: *mut sr_client_t) -> c_int {
    boundary!(SR_ERR_INTERNAL, {
        match acquire(client) {
            Some(h) => h.close(),
            None => SR_ERR_INVALID_ARGUMENT,
        }
    })
}

/// Closes the client if it is still open (as sr_client_close()) and releases the handle; the
/// pointer must not be used afterwards. NULL is ignored. Memory still needed by completions in
/// flight (possible only when freed from inside a callback) is released after the last of them.
///
/// # Safety
/// `client` is NULL or a handle from sr_client_open(), not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_client_free(client: *mut sr_client_t) {
    boundary!((), {
        if client.is_null() {
            return;
        }
        let h = Arc::from_raw(client.cast_const());
        let _ = h.close();
        drop(h);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    #[test]
    fn bad_urls_and_nulls_give_codes() {
        unsafe {
            let mut c = null_mut();
            let mut e = null_mut();
            let rc = sr_client_open(c"http://x/y".as_ptr(), null(), 0, &mut c, &mut e);
            assert_eq!(rc, SR_ERR_CONFIG);
            assert!(c.is_null());
            assert_eq!(sr_error_get_code(e), SR_ERR_CONFIG);
            sr_error_free(e);
            assert_eq!(
                sr_client_open(null(), null(), 0, &mut c, null_mut()),
                SR_ERR_INVALID_ARGUMENT
            );
            let opt = sr_option_t {
                key: c"password".as_ptr(),
                value: c"hunter2".as_ptr(),
            };
            let bad = sr_option_t {
                key: c"nope".as_ptr(),
                value: c"1".as_ptr(),
            };
            let opts = [opt, bad];
            let rc = sr_client_open(
                c"redis+sentinel://127.0.0.1:1/m".as_ptr(),
                opts.as_ptr(),
                2,
                &mut c,
                &mut e,
            );
            assert_eq!(rc, SR_ERR_CONFIG);
            let msg = CStr::from_ptr(sr_error_get_message(e)).to_str().unwrap();
            assert!(msg.contains("nope") && !msg.contains("hunter2"), "{msg}");
            sr_error_free(e);
            assert_eq!(sr_client_close(null_mut()), SR_ERR_INVALID_ARGUMENT);
            sr_client_free(null_mut());
        }
    }
}
