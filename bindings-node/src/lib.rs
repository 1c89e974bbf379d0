//! Node.js binding of sentinel-recovery (napi-rs).
//!
//! This native module is the thin layer under `index.js`: it converts values and delivers
//! completions, nothing more. Work runs on the core's own runtime (`sr-worker-N` threads); napi's
//! tokio runtime is not used.
//!
//! Completions: every asynchronous operation (`ready`, `execute`, `close`) is identified by a
//! `u32` id chosen by JavaScript. Its result is pushed, on a core thread, into the client's queue,
//! and only the push that finds no wake-up scheduled calls the client's *wake* threadsafe function
//! (non-blocking). On the JavaScript thread, `drain` converts every queued result to JavaScript
//! values at once, so a burst of completions costs one crossing into JavaScript. A wake-up counts
//! as scheduled until it is dispatched on the JavaScript thread, where it is re-armed just before
//! the JavaScript function runs: a completion is never left waiting on a wake-up that already
//! happened, even when a drain took its result early or JavaScript had nothing to drain (and
//! JavaScript drains on every wake-up, pending operations or not). The wake function
//! is unreferenced (it does not keep the process alive); JavaScript references it through
//! [`NativeClient::hold`] while at least one operation is pending, so a pending command keeps the
//! process alive until it settles and nothing else does.
//!
//! Events reach JavaScript through a second, always-unreferenced threadsafe function, as JSON.

#![deny(missing_docs)]

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{Either, Function, ToNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{sys, Env, JsValue, Status};
use napi_derive::napi;
use sentinel_recovery::{Client, Config, Error as SrError, ErrorCode, Value};

// Synchronous errors are thrown to JavaScript with the message `"<code>: <message>"` (the core
// error's `Display`); `index.js` turns them into the matching `SentinelRecoveryError` subclass.
fn js_error(e: &SrError) -> napi::Error {
    napi::Error::new(Status::GenericFailure, e.to_string())
}

fn internal(e: napi::Error) -> napi::Error {
    napi::Error::new(Status::GenericFailure, format!("protocol: {}", e.reason))
}

/// The wake function: called with no arguments when completions are waiting.
type WakeFn = ThreadsafeFunction<(), (), (), Status, false, true>;
/// The event function: called with one event as a JSON string.
type EventFn = ThreadsafeFunction<String, (), String, Status, false, true>;

/// Completions of one client waiting for the JavaScript thread.
struct Shared {
    queue: Mutex<Vec<(u32, sentinel_recovery::Result<Value>)>>,
    /// True from the push that scheduled a wake-up until that wake-up is dispatched on the
    /// JavaScript thread (the wake function's callback resets it there, before `drain` can run).
    /// It is deliberately not reset by `drain`: a completion pushed after the reset schedules a
    /// wake-up of its own, and one whose result a drain already took only costs an empty drain.
    /// (Resetting it in `drain` alone made every wake-up that JavaScript did not answer with a
    /// drain a lost wake-up: the flag stayed set, and no later completion of the client was ever
    /// delivered, not even a command's deadline.)
    wake_pending: Arc<AtomicBool>,
    wake: WakeFn,
}

impl Shared {
    fn push(&self, id: u32, result: sentinel_recovery::Result<Value>) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, result));
        if !self.wake_pending.swap(true, Ordering::SeqCst) {
            let status = self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
            if status != Status::Ok {
                // Nothing was scheduled (the environment is being torn down): don't leave the
                // flag set for a wake-up that will never run.
                self.wake_pending.store(false, Ordering::SeqCst);
            }
        }
    }
}

/// Completes one operation exactly once: by [`Completer::complete`] or, if dropped without it
/// (a panic, or a task dropped when the runtime stops), with a `closed` error.
struct Completer {
    shared: Arc<Shared>,
    id: u32,
    done: bool,
}

impl Completer {
    fn complete(mut self, result: sentinel_recovery::Result<Value>) {
        self.done = true;
        self.shared.push(self.id, result);
    }
}

impl Drop for Completer {
    fn drop(&mut self) {
        if !self.done {
            self.shared.push(
                self.id,
                Err(SrError::new(
                    ErrorCode::Closed,
                    "the operation was abandoned (client closed or core stopped)",
                )),
            );
        }
    }
}

/// Parses `url`, applies `options` (a flat `[key, value, key, value, ...]` list of core
/// option keys and their string values, each passed through the core's `Config::set`) and
/// opens the client; returns at once, discovery runs on the core's threads. `wake` is called
/// (with no arguments) when completions wait for [`NativeClient::drain`], and must call it;
/// `on_event` with each event as JSON. Neither keeps the process alive.
#[napi]
pub fn open(
    url: String,
    options: Vec<String>,
    decode: bool,
    wake: Function<(), ()>,
    on_event: Function<String, ()>,
) -> napi::Result<NativeClient> {
    // No panic crosses into JavaScript.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        NativeClient::open_inner(url, options, decode, wake, on_event)
    }))
    .unwrap_or_else(|_| {
        Err(napi::Error::new(
            Status::GenericFailure,
            "protocol: panic in open",
        ))
    })
}

/// The native client under `index.js`'s `Client`. Not meant to be used directly.
#[napi]
pub struct NativeClient {
    client: Client,
    shared: Arc<Shared>,
    decode: bool,
}

#[napi]
impl NativeClient {
    fn open_inner(
        url: String,
        options: Vec<String>,
        decode: bool,
        wake: Function<(), ()>,
        on_event: Function<String, ()>,
    ) -> napi::Result<NativeClient> {
        let mut config = Config::from_url(&url).map_err(|e| js_error(&e))?;
        for pair in options.chunks(2) {
            let [key, value] = pair else {
                return Err(js_error(&SrError::config("option without a value")));
            };
            config.set(key, value).map_err(|e| js_error(&e))?;
        }
        let client = Client::open(config).map_err(|e| js_error(&e))?;
        let wake_pending = Arc::new(AtomicBool::new(false));
        let rearm = wake_pending.clone();
        let wake: WakeFn = wake
            .build_threadsafe_function::<()>()
            .weak::<true>()
            .build_callback(move |_| {
                // On the JavaScript thread, as this wake-up is dispatched and before the JavaScript
                // function (and so `drain`) runs: from here on a push schedules a new wake-up.
                rearm.store(false, Ordering::SeqCst);
                Ok(())
            })
            .map_err(internal)?;
        let on_event: EventFn = on_event
            .build_threadsafe_function::<String>()
            .weak::<true>()
            .build()
            .map_err(internal)?;
        client
            .set_event_callback(Some(Box::new(move |event| {
                if let Ok(json) = serde_json::to_string(event) {
                    let _ = on_event.call(json, ThreadsafeFunctionCallMode::NonBlocking);
                }
            })))
            .map_err(|e| js_error(&e))?;
        Ok(NativeClient {
            client,
            shared: Arc::new(Shared {
                queue: Mutex::new(Vec::new()),
                wake_pending,
                wake,
            }),
            decode,
        })
    }

    fn completer(&self, id: u32) -> Completer {
        Completer {
            shared: self.shared.clone(),
            id,
            done: false,
        }
    }

    /// Completes `id` when the first discovery round has finished: with `null` if it found a
    /// verified primary, else with its error.
    #[napi(catch_unwind)]
    pub fn ready(&self, id: u32) {
        let done = self.completer(id);
        let client = self.client.clone();
        match sentinel_recovery::runtime::handle() {
            Ok(h) => {
                h.spawn(async move {
                    let result = client.ready().await.map(|_| Value::Nil);
                    done.complete(result);
                });
            }
            Err(e) => done.complete(Err(e)),
        }
    }

    /// Runs one command (`args`: strings and Buffers/Uint8Arrays) and completes `id` with its
    /// reply.
    #[napi(catch_unwind)]
    pub fn execute(&self, id: u32, args: Vec<Either<String, &[u8]>>) {
        let done = self.completer(id);
        let args: Vec<&[u8]> = args
            .iter()
            .map(|a| match a {
                Either::A(s) => s.as_bytes(),
                Either::B(b) => *b,
            })
            .collect();
        self.client
            .execute_with_callback(&args, move |result| done.complete(result));
    }

    /// Closes the client and completes `id` when it is closed. No event is delivered after that.
    #[napi(catch_unwind)]
    pub fn close(&self, id: u32) {
        let done = self.completer(id);
        let client = self.client.clone();
        match sentinel_recovery::runtime::handle() {
            Ok(h) => {
                h.spawn(async move {
                    client.close().await;
                    done.complete(Ok(Value::Nil));
                });
            }
            Err(e) => done.complete(Err(e)),
        }
    }

    /// The current topology snapshot as JSON. Never waits on network work.
    #[napi(catch_unwind)]
    pub fn topology(&self) -> napi::Result<String> {
        let topology = self.client.topology().map_err(|e| js_error(&e))?;
        serde_json::to_string(&topology)
            .map_err(|e| napi::Error::new(Status::GenericFailure, format!("protocol: {e}")))
    }

    /// Whether `close` was called.
    #[napi(getter, catch_unwind)]
    pub fn closed(&self) -> bool {
        self.client.is_closed()
    }

    /// References (`true`) or unreferences (`false`) the wake function: referenced, it keeps the
    /// process alive. JavaScript holds it while operations are pending.
    #[napi(catch_unwind)]
    pub fn hold(&self, env: Env, on: bool) -> napi::Result<()> {
        let raw = self.shared.wake.raw();
        // SAFETY: called on the JavaScript thread that owns the threadsafe function, which lives
        // as long as `self.shared`.
        let status = unsafe {
            if on {
                sys::napi_ref_threadsafe_function(env.raw(), raw)
            } else {
                sys::napi_unref_threadsafe_function(env.raw(), raw)
            }
        };
        if status == sys::Status::napi_ok {
            Ok(())
        } else {
            Err(napi::Error::new(
                Status::GenericFailure,
                format!("protocol: napi_(un)ref_threadsafe_function failed: {status}"),
            ))
        }
    }

    /// Takes every waiting completion, as a flat array `[id, ok, value, id, ok, value, ...]`:
    /// `ok` true means `value` is the reply, false that it is an error made by
    /// `make_error(code, message, serverCode)`.
    #[napi(
        catch_unwind,
        ts_args_type = "makeError: (code: string, message: string, serverCode: string | null) => Error",
        ts_return_type = "Array<unknown>"
    )]
    pub fn drain(
        &self,
        make_error: Function<'_, (String, String, Option<String>), ()>,
    ) -> napi::Result<Batch> {
        let make_error = make_error.raw();
        let items =
            std::mem::take(&mut *self.shared.queue.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(Batch {
            items,
            decode: self.decode,
            make_error,
        })
    }
}

/// Completions converted to JavaScript in [`NativeClient::drain`].
#[doc(hidden)]
pub struct Batch {
    items: Vec<(u32, sentinel_recovery::Result<Value>)>,
    decode: bool,
    make_error: sys::napi_value,
}

/// `napi_status` to a `Result`.
fn check(status: sys::napi_status) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(
            Status::from(status),
            "converting a reply failed",
        ))
    }
}

/// Calls `make_error(code, message, serverCode)`.
unsafe fn make_error(
    env: sys::napi_env,
    factory: sys::napi_value,
    code: &str,
    message: &str,
    server_code: Option<&str>,
) -> napi::Result<sys::napi_value> {
    let args = [
        ToNapiValue::to_napi_value(env, code)?,
        ToNapiValue::to_napi_value(env, message)?,
        match server_code {
            Some(s) => ToNapiValue::to_napi_value(env, s)?,
            None => ToNapiValue::to_napi_value(env, napi::bindgen_prelude::Null)?,
        },
    ];
    let mut undefined = ptr::null_mut();
    check(sys::napi_get_undefined(env, &mut undefined))?;
    let mut out = ptr::null_mut();
    check(sys::napi_call_function(
        env,
        undefined,
        factory,
        args.len(),
        args.as_ptr(),
        &mut out,
    ))?;
    Ok(out)
}

/// Bytes as a Buffer (copied), or as a string when decoding and they are valid UTF-8.
unsafe fn bytes_value(
    env: sys::napi_env,
    bytes: &[u8],
    decode: bool,
) -> napi::Result<sys::napi_value> {
    if decode {
        if let Ok(s) = std::str::from_utf8(bytes) {
            return ToNapiValue::to_napi_value(env, s);
        }
    }
    let mut data: *mut c_void = ptr::null_mut();
    let mut out = ptr::null_mut();
    check(sys::napi_create_buffer_copy(
        env,
        bytes.len(),
        bytes.as_ptr().cast(),
        &mut data,
        &mut out,
    ))?;
    Ok(out)
}

unsafe fn array_value(
    env: sys::napi_env,
    items: &[Value],
    decode: bool,
    factory: sys::napi_value,
) -> napi::Result<sys::napi_value> {
    let mut array = ptr::null_mut();
    check(sys::napi_create_array_with_length(
        env,
        items.len(),
        &mut array,
    ))?;
    for (i, item) in items.iter().enumerate() {
        let v = reply_value(env, item, decode, factory)?;
        check(sys::napi_set_element(env, array, i as u32, v))?;
    }
    Ok(array)
}

/// Largest integer a JavaScript number holds exactly.
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// One reply as a JavaScript value: null, number (BigInt beyond 2^53), boolean, BigInt for big
/// numbers, Buffer (or string when decoding) for bulk and verbatim strings, string for status
/// replies, Array for arrays, sets and pushes, Map for maps, an Error object for nested errors.
unsafe fn reply_value(
    env: sys::napi_env,
    value: &Value,
    decode: bool,
    factory: sys::napi_value,
) -> napi::Result<sys::napi_value> {
    match value {
        Value::Nil => ToNapiValue::to_napi_value(env, napi::bindgen_prelude::Null),
        Value::Int(i) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(i) => {
            ToNapiValue::to_napi_value(env, *i as f64)
        }
        Value::Int(i) => {
            let mut out = ptr::null_mut();
            check(sys::napi_create_bigint_int64(env, *i, &mut out))?;
            Ok(out)
        }
        Value::Double(d) => ToNapiValue::to_napi_value(env, *d),
        Value::Boolean(b) => ToNapiValue::to_napi_value(env, *b),
        Value::BigNumber(digits) => big_number(env, digits),
        Value::Bulk(b) => bytes_value(env, b, decode),
        Value::Verbatim { text, .. } => bytes_value(env, text, decode),
        Value::Simple(s) => ToNapiValue::to_napi_value(env, s.as_str()),
        Value::Array(items) | Value::Set(items) | Value::Push(items) => {
            array_value(env, items, decode, factory)
        }
        Value::Map(pairs) => {
            let mut global = ptr::null_mut();
            check(sys::napi_get_global(env, &mut global))?;
            let mut map_ctor = ptr::null_mut();
            check(sys::napi_get_named_property(
                env,
                global,
                c"Map".as_ptr(),
                &mut map_ctor,
            ))?;
            let mut map = ptr::null_mut();
            check(sys::napi_new_instance(
                env,
                map_ctor,
                0,
                ptr::null(),
                &mut map,
            ))?;
            let mut set = ptr::null_mut();
            check(sys::napi_get_named_property(
                env,
                map,
                c"set".as_ptr(),
                &mut set,
            ))?;
            for (k, v) in pairs {
                let args = [
                    reply_value(env, k, decode, factory)?,
                    reply_value(env, v, decode, factory)?,
                ];
                let mut ignored = ptr::null_mut();
                check(sys::napi_call_function(
                    env,
                    map,
                    set,
                    2,
                    args.as_ptr(),
                    &mut ignored,
                ))?;
            }
            Ok(map)
        }
        Value::Error(message) => {
            let err = SrError::server(message);
            make_error(
                env,
                factory,
                err.code().as_str(),
                err.message(),
                err.server_code(),
            )
        }
    }
}

/// A RESP3 big number as a BigInt (or its decimal text if it does not fit in 128 bits).
unsafe fn big_number(env: sys::napi_env, digits: &[u8]) -> napi::Result<sys::napi_value> {
    let text = String::from_utf8_lossy(digits);
    let Ok(n) = text.trim().parse::<i128>() else {
        return ToNapiValue::to_napi_value(env, text.as_ref());
    };
    let magnitude = n.unsigned_abs();
    let words = [magnitude as u64, (magnitude >> 64) as u64];
    let mut out = ptr::null_mut();
    check(sys::napi_create_bigint_words(
        env,
        i32::from(n < 0),
        2,
        words.as_ptr(),
        &mut out,
    ))?;
    Ok(out)
}

impl ToNapiValue for Batch {
    unsafe fn to_napi_value(env: sys::napi_env, batch: Self) -> napi::Result<sys::napi_value> {
        let mut array = ptr::null_mut();
        check(sys::napi_create_array_with_length(
            env,
            batch.items.len() * 3,
            &mut array,
        ))?;
        for (i, (id, result)) in batch.items.iter().enumerate() {
            let (ok, value) = match result {
                Ok(v) => (true, reply_value(env, v, batch.decode, batch.make_error)),
                Err(e) => (
                    false,
                    make_error(
                        env,
                        batch.make_error,
                        e.code().as_str(),
                        e.message(),
                        e.server_code(),
                    ),
                ),
            };
            // A value that can't be converted still settles its promise, as an error.
            let (ok, value) = match value {
                Ok(v) => (ok, v),
                Err(e) => (
                    false,
                    make_error(env, batch.make_error, "protocol", &e.reason, None)?,
                ),
            };
            let base = (i * 3) as u32;
            check(sys::napi_set_element(
                env,
                array,
                base,
                ToNapiValue::to_napi_value(env, *id)?,
            ))?;
            check(sys::napi_set_element(
                env,
                array,
                base + 1,
                ToNapiValue::to_napi_value(env, ok)?,
            ))?;
            check(sys::napi_set_element(env, array, base + 2, value))?;
        }
        Ok(array)
    }
}
