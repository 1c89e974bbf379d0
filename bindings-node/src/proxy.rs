//! `startProxy(url, options)`: the core's fencing proxy ([`HostProxy`]) under `index.js`'s
//! `Proxy`.
//!
//! Starting applies the flat `[key, value, ...]` option list (a proxy key to the proxy, any other
//! to the client, as the URL's query takes it: the core's rule) and returns once the proxy
//! listens; discovery runs on the core's threads. Every behaviour (the options' rules and their
//! errors, the fence, the close with its grace) is the core's.
//!
//! A running proxy keeps the process alive, as a listening `net.Server` does: the function
//! JavaScript gives at the start to learn that the proxy has closed becomes a referenced
//! threadsafe function, which [`NativeProxy::hold`] unreferences and references again (like a
//! server's `unref()` / `ref()`). `close` hands that function to the core's callback form of
//! close (its completion runs once, on a core thread, and calls it without blocking); dropped
//! there, it lets the process go. So a close completes the way `doctor` does, never blocking
//! the JavaScript thread.

use std::sync::Mutex;

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{sys, Env, Status};
use napi_derive::napi;
use sentinel_recovery::deadline::{self, Unit};
use sentinel_recovery::host::HostProxy;
use sentinel_recovery::ListenAddress;

use crate::args::pairs;
use crate::errors::{guarded, js_error, napi_failure, Code};

/// The function told that the proxy has closed; referenced unless JavaScript unreferenced it.
type ClosedFn = ThreadsafeFunction<(), (), (), Status, false, false>;

/// The core's proxy option keys (any other key goes to the proxy's client), for the suite's
/// check of `index.js`'s table and `index.d.ts`'s `ProxyOptions`.
#[napi]
pub fn proxy_keys() -> Vec<String> {
    sentinel_recovery::proxy::PROXY_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect()
}

/// Parses `url`, applies `options` (the flat `[key, value, ...]` list of core keys and their
/// string values) and starts the proxy; returns once it accepts connections, without waiting
/// for discovery. `onClosed` is called once, on the JavaScript thread, when a close has
/// completed; until then it keeps the process alive (see [`NativeProxy::hold`]). Throws (with
/// the error's code) a `config` error naming a bad key or value, or the bind's failure.
#[napi(
    catch_unwind,
    ts_args_type = "url: string, options: Array<string>, onClosed: () => void"
)]
pub fn start_proxy(
    url: String,
    options: Vec<String>,
    on_closed: Function<(), ()>,
) -> napi::Result<NativeProxy, Code> {
    guarded(|| {
        let start = || -> sentinel_recovery::Result<NativeProxy> {
            let options = pairs(&options)?;
            // Made before the start, so nothing can fail once the proxy listens.
            let closed: ClosedFn = on_closed
                .build_threadsafe_function::<()>()
                .build()
                .map_err(|e| napi_failure("creating the proxy's close callback", e))?;
            let proxy = HostProxy::start(&url, &options)?;
            Ok(NativeProxy {
                proxy,
                closed: Mutex::new(Some(closed)),
            })
        };
        start().map_err(|e| js_error(&e))
    })
}

/// The native proxy under `index.js`'s `Proxy`. Not meant to be used directly. Collected
/// without `close()` (only possible once JavaScript let it go, which `index.js` does only after
/// a close), it closes without waiting for replies in flight.
#[napi]
pub struct NativeProxy {
    proxy: HostProxy,
    /// Taken by the first close.
    closed: Mutex<Option<ClosedFn>>,
}

#[napi]
impl NativeProxy {
    /// Where the proxy listens: `IP:PORT` (`[IP]:PORT` for IPv6) or `unix:PATH`.
    #[napi(getter, catch_unwind)]
    pub fn address(&self) -> String {
        self.proxy.address().to_string()
    }

    /// The listening IP (without brackets for IPv6), or nothing on a Unix socket.
    #[napi(getter, catch_unwind)]
    pub fn host(&self) -> Option<String> {
        match self.proxy.address() {
            ListenAddress::Tcp(a) => Some(a.ip().to_string()),
            ListenAddress::Unix(_) => None,
        }
    }

    /// The listening port, or nothing on a Unix socket.
    #[napi(getter, catch_unwind)]
    pub fn port(&self) -> Option<u32> {
        match self.proxy.address() {
            ListenAddress::Tcp(a) => Some(u32::from(a.port())),
            ListenAddress::Unix(_) => None,
        }
    }

    /// The Unix socket's path, or nothing on TCP.
    #[napi(getter, catch_unwind)]
    pub fn path(&self) -> Option<String> {
        match self.proxy.address() {
            ListenAddress::Tcp(_) => None,
            ListenAddress::Unix(p) => Some(p.to_string_lossy().into_owned()),
        }
    }

    /// The proxy's counters as JSON text; throws `closed` once a close has begun.
    #[napi(catch_unwind)]
    pub fn stats(&self) -> napi::Result<String, Code> {
        guarded(|| {
            let stats = self.proxy.stats().map_err(|e| js_error(&e))?;
            serde_json::to_string(&stats)
                .map_err(|e| js_error(&napi_failure("serializing the proxy's counters", e)))
        })
    }

    /// Closes the proxy (stops accepting, lets replies in flight finish within `graceMs`,
    /// default 5000, then closes every session and the proxy's client); `onClosed` is called
    /// when that is done. Throws `config` for a grace out of range, nothing closed. A second
    /// close does nothing (its caller waits for the first's `onClosed`).
    #[napi(catch_unwind)]
    pub fn close(&self, env: Env, grace_ms: Option<f64>) -> napi::Result<(), Code> {
        guarded(|| {
            let grace = deadline::grace("graceMs", grace_ms, Unit::Milliseconds)
                .map_err(|e| js_error(&e))?;
            let Some(closed) = self.closed.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                return Ok(());
            };
            // A pending close keeps the process alive, as a pending operation does.
            reference(&env, &closed, true)?;
            self.proxy.close(
                grace,
                Box::new(move || {
                    // On a core thread; the function is released when dropped here. It fails
                    // only as the environment is torn down, when nobody waits any more.
                    let _ = closed.call((), ThreadsafeFunctionCallMode::NonBlocking);
                }),
            );
            Ok(())
        })
    }

    /// References (`true`, the default from the start) or unreferences (`false`) the running
    /// proxy: referenced, it keeps the process alive. Does nothing once a close has begun.
    #[napi(catch_unwind)]
    pub fn hold(&self, env: Env, on: bool) -> napi::Result<(), Code> {
        guarded(
            || match &*self.closed.lock().unwrap_or_else(|e| e.into_inner()) {
                Some(closed) => reference(&env, closed, on),
                None => Ok(()),
            },
        )
    }
}

/// `napi_ref_threadsafe_function` or `napi_unref_threadsafe_function` on `f`.
fn reference(env: &Env, f: &ClosedFn, on: bool) -> napi::Result<(), Code> {
    // SAFETY: called on the JavaScript thread that owns the threadsafe function, which `f`
    // keeps alive for the call.
    let status = unsafe {
        if on {
            sys::napi_ref_threadsafe_function(env.raw(), f.raw())
        } else {
            sys::napi_unref_threadsafe_function(env.raw(), f.raw())
        }
    };
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(js_error(&napi_failure(
            "napi_(un)ref_threadsafe_function",
            status,
        )))
    }
}
