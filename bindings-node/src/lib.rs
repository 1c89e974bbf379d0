//! Node.js binding of sentinel-recovery (napi-rs).
//!
//! This native module is the thin layer under `index.js`. It stands on the core's host layer
//! ([`sentinel_recovery::host`]), which runs every operation on the core's own threads and
//! guarantees what a binding would otherwise have to: every completion runs exactly once (also on
//! close, panic and runtime shutdown), `close` completes every operation in flight with `closed`
//! before its own completion, no event handler runs once `close` has completed, and a panic is the
//! error code `internal`. This module only converts values, owns the JavaScript-side lifetimes
//! and hands completions to the JavaScript thread; it starts nothing on the core runtime itself.
//!
//! Completions: every asynchronous operation (`ready`, `execute`, `close`) is identified by a
//! `u32` id (never 0) chosen by JavaScript. Its result goes, on a core thread, into the client's
//! mailbox (the core's [`Mailbox`]) through the operation's one completion token, so it is
//! delivered once by construction. Events take the same mailbox (as id 0 with the event as JSON,
//! bounded: see [`EVENT_BOUND`]), so JavaScript sees events and completions in the order the core
//! produced them: every event the core delivered before `close` completed is emitted before
//! `close()` resolves, and none after. The mailbox's wake-up calls the client's *wake*
//! threadsafe function (non-blocking) when it goes from idle to non-empty; dispatched on the
//! JavaScript thread, its native callback drains the mailbox and converts every item straight
//! into the JavaScript values it calls the wake function with, so a burst costs one crossing
//! into JavaScript and a single completion no more. The wake function is unreferenced (it does
//! not keep the process alive); JavaScript references it through [`NativeClient::hold`] while at
//! least one operation is pending, so a pending command keeps the process alive until it
//! settles and nothing else does.
//!
//! Errors thrown synchronously carry the stable code in their `code` property (the napi status of
//! the thrown error is the code), which `index.js` maps to its `SentinelRecoveryError` subclass.

#![deny(missing_docs)]

mod address_map;
pub mod apps;
pub mod args;
pub mod doctor;
mod execute;
mod pool;

use std::cell::Cell;
use std::ffi::c_void;
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::rc::Rc;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use napi::bindgen_prelude::{Function, ToNapiValue, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{sys, Env, JsValue, Status};
use napi_derive::napi;
use sentinel_recovery::host::{Completion, Delivery, Done, Handle, Mailbox, Operation};
use sentinel_recovery::{Error as SrError, ErrorCode, Event, EventKind, Value};

pub mod pubsub;
mod watch;

/// The status of an error thrown to JavaScript: a stable error code, which napi puts in the
/// thrown error's `code` property.
#[doc(hidden)]
pub struct Code(&'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

/// What the synchronous native functions return (spelled out where `#[napi]` reads it, which
/// recognizes a `Result` by its name): errors carry their stable code.
type JsResult<T> = napi::Result<T, Code>;

/// A core error as a JavaScript error with `code` set to the stable code.
fn js_error(e: &SrError) -> napi::Error<Code> {
    napi::Error::new(Code(e.code().as_str()), e.message().to_string())
}

/// A failure of napi itself (not of the core), reported as `internal`.
fn napi_failure(what: &str, e: impl std::fmt::Display) -> SrError {
    SrError::new(
        ErrorCode::Internal,
        format!("internal error (a bug in sentinel-recovery): {what}: {e}"),
    )
}

/// Runs `f` with a panic turned into an `internal` error: no panic crosses into JavaScript.
fn guarded<T>(f: impl FnOnce() -> JsResult<T>) -> JsResult<T> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(js_error(&SrError::internal(&*panic))))
}

/// The wake function: called on the JavaScript thread with a [`Batch`] of what was waiting.
type WakeFn = ThreadsafeFunction<(), (), Batch, Status, false, true>;

/// Events that may wait for the JavaScript thread (beyond it the newest are dropped, counted,
/// and reported as a warning through the logger in their place).
const EVENT_BOUND: usize = 65_536;

/// Something waiting for the JavaScript thread.
pub(crate) enum Item {
    /// The result of operation `id`.
    Completion(u32, sentinel_recovery::Result<Value>),
    /// The results of operation `id` (a pipeline's, or EXEC's: `None` when a watched key
    /// changed), each a reply or that command's error.
    Many(
        u32,
        sentinel_recovery::Result<Option<Vec<sentinel_recovery::Result<Value>>>>,
    ),
    /// An event, as JSON.
    Event(String),
}

/// What one client hands to the JavaScript thread: its mailbox (the core's ordered, bounded,
/// coalescing queue with its close barrier and exactly-once completions), whose wake-up calls
/// the wake function without blocking.
pub(crate) struct Shared {
    pub(crate) mailbox: Mailbox<Item>,
    /// Also held by the mailbox's wake-up; here for [`NativeClient::hold`].
    wake: Arc<WakeFn>,
}

/// Appends a drain's deliveries to `items`; a count of dropped events becomes a warning.
pub(crate) fn collect(items: &mut Vec<Item>, delivery: Delivery<Item>) {
    match delivery {
        Delivery::Item(item) => items.push(item),
        Delivery::Dropped(n) => apps::warn(&format!(
            "{n} events for the 'event' listeners were dropped (the event loop was too slow to take them)"
        )),
    }
}

impl Shared {
    /// Completes operation `id` now with `item`'s result (nothing was started on the core).
    pub(crate) fn complete(&self, item: Item) {
        // Refused only once the client is gone: nobody waits for it then.
        let _ = self.mailbox.completion().complete(item);
    }

    /// Runs `f` with the start of operation `id`, whose completion `f` hands to the core through
    /// [`Start`]; if `f` panics before it did, `id` completes with `internal` (after that, the
    /// core completes the `Done` it drops, with `internal` too): one completion either way. A
    /// completion `f` left unused (a bug) completes with `internal` too, so no promise waits
    /// forever.
    pub(crate) fn starting<R>(&self, id: u32, f: impl FnOnce(&Start) -> Option<R>) -> Option<R> {
        let start = Start {
            id,
            token: Cell::new(Some(self.mailbox.completion())),
        };
        let (result, error) = match std::panic::catch_unwind(AssertUnwindSafe(|| f(&start))) {
            Ok(result) => (result, None),
            Err(panic) => (None, Some(SrError::internal(&*panic))),
        };
        if let Some(token) = start.token.take() {
            let error = error.unwrap_or_else(|| {
                napi_failure("starting an operation", "its completion was left unused")
            });
            let _ = token.complete(Item::Completion(id, Err(error)));
        }
        result
    }
}

/// Operation `id` as it starts: its one completion (see [`Shared::starting`]).
pub(crate) struct Start {
    id: u32,
    token: Cell<Option<Completion<Item>>>,
}

impl Start {
    /// The operation's completion token; taken once.
    fn token(&self) -> Completion<Item> {
        // Taken at most once per operation by the call sites; a second take is a bug that
        // panics into `starting`, and the operation completes through the first.
        self.token
            .take()
            .expect("one completion per operation (a bug in the binding)")
    }

    /// Completes the operation now with `item` (nothing was started on the core).
    pub(crate) fn complete(&self, item: Item) {
        let _ = self.token().complete(item);
    }

    /// The operation's completion as the host layer calls it (once, on a core thread), its
    /// value converted by `convert`.
    pub(crate) fn done<T: Send + 'static>(&self, convert: fn(T) -> Value) -> Done<T> {
        let (id, token) = (self.id, self.token());
        Box::new(move |result| {
            let _ = token.complete(Item::Completion(id, result.map(convert)));
        })
    }

    /// The operation's completion as a function of its result that makes the item.
    pub(crate) fn done_with<T: Send + 'static>(
        &self,
        make: impl FnOnce(u32, sentinel_recovery::Result<T>) -> Item + Send + 'static,
    ) -> Done<T> {
        let (id, token) = (self.id, self.token());
        Box::new(move |result| {
            let _ = token.complete(make(id, result));
        })
    }
}

/// For the test suite only: how many replies the calling (JavaScript) thread has read from a
/// socket itself and handed over (see `watch`), since it started.
#[napi]
pub fn replies_read_here_for_test() -> f64 {
    watch::replies_read_here() as f64
}

/// One entry of the core's error-code or event-kind table.
#[napi(object)]
pub struct TableEntry {
    /// The snake_case name shared by every language.
    pub name: String,
    /// Its integer (1-based, as the C ABI uses it).
    pub value: u32,
    /// What it means.
    pub description: String,
}

/// The core's error codes, in the order of their integers (for the suite's check of `tables.js`).
#[napi]
pub fn error_codes() -> Vec<TableEntry> {
    ErrorCode::ALL
        .iter()
        .map(|c| TableEntry {
            name: c.as_str().to_string(),
            value: c.as_i32() as u32,
            description: c.description().to_string(),
        })
        .collect()
}

/// The core's event kinds, in the order of their integers (for the suite's check of `tables.js`).
#[napi]
pub fn event_kinds() -> Vec<TableEntry> {
    EventKind::TABLE
        .iter()
        .zip(1..)
        .map(|((name, description), value)| TableEntry {
            name: name.to_string(),
            value,
            description: description.to_string(),
        })
        .collect()
}

/// Panics inside the binding's panic guard: the suite's check that a panic reaches JavaScript as
/// an `internal` error. Not part of the API.
#[doc(hidden)]
#[napi(catch_unwind)]
pub fn panic_for_test() -> napi::Result<(), Code> {
    guarded(|| panic!("a test panic"))
}

/// Parses `url`, applies `options` (a flat `[key, value, key, value, ...]` list of core
/// option keys and their string values, each passed through the core's `Config::set`) and
/// opens the client; returns at once, discovery runs on the core's threads. `wake` is called
/// with the flat array `[id, ok, value, id, ok, value, ...]` of what finished, or with
/// `(id, ok, value)` for a single completion read on the JavaScript thread, or with
/// `(id, true, slab, offset, length)` when that completion is a small Buffer reply, the
/// `length` bytes at `offset` of the ArrayBuffer `slab` (see `pool.rs`): for a completion,
/// `ok` true means `value` is the reply, false that it is an error made by
/// `makeError(code, message, serverCode)`; id 0 is an event, `value` its JSON. It does not keep
/// the process alive (see [`NativeClient::hold`]).
/// `address_map` is the function form of that option (see `address_map.rs`).
#[napi(
    catch_unwind,
    ts_args_type = "url: string, options: Array<string>, decode: boolean, wake: (batch: Array<unknown> | number, ok?: boolean, value?: unknown, offset?: number, length?: number) => void, makeError: (code: string, message: string, serverCode: string | null) => Error, addressMap?: ((arg: string) => string | null) | undefined | null"
)]
pub fn open(
    env: Env,
    url: String,
    options: Vec<String>,
    decode: bool,
    wake: Function<(), ()>,
    make_error: Function<(String, String, Option<String>), ()>,
    address_map: Option<Function<String, Option<String>>>,
) -> napi::Result<NativeClient, Code> {
    guarded(|| {
        NativeClient::open_inner(&env, url, options, decode, wake, make_error, address_map)
            .map_err(|e| js_error(&e))
    })
}

/// The flat `[key, value, key, value, ...]` option list as pairs.
fn pairs(options: &[String]) -> sentinel_recovery::Result<Vec<(&String, &String)>> {
    let mut pairs = Vec::with_capacity(options.len() / 2);
    for pair in options.chunks(2) {
        let [key, value] = pair else {
            return Err(SrError::config("option without a value"));
        };
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// A started operation that JavaScript may cancel (an `execute` with an `AbortSignal`).
#[napi]
pub struct NativeOperation {
    pub(crate) operation: Operation,
}

#[napi]
impl NativeOperation {
    /// Stops the operation if it is still running; its completion then comes with `closed`. A
    /// command already sent may still have run on the server.
    #[napi(catch_unwind)]
    pub fn cancel(&self) {
        self.operation.cancel();
    }
}

/// The native client under `index.js`'s `Client`. Not meant to be used directly.
#[napi]
pub struct NativeClient {
    pub(crate) handle: Handle,
    pub(crate) shared: Arc<Shared>,
    /// Delivers completions of replies read on the JavaScript thread (see `watch`).
    deliverer: Rc<watch::Deliverer>,
    /// Transactions begun and not ended, by the id JavaScript gave them.
    transactions: apps::Transactions,
}

impl NativeClient {
    fn open_inner(
        env: &Env,
        url: String,
        options: Vec<String>,
        decode: bool,
        wake: Function<(), ()>,
        make_error: Function<(String, String, Option<String>), ()>,
        address_map: Option<Function<String, Option<String>>>,
    ) -> sentinel_recovery::Result<NativeClient> {
        let mut config = sentinel_recovery::host::config_from_url(&url, &pairs(&options)?)?;
        if let Some(map) = address_map {
            config
                .address_map
                .set_function(Some(address_map::map_fn(map)?));
        }
        let handle = Handle::open(config)?;
        handle.set_api_names(&apps::NODE_API);
        // The wake function's callback finds the mailbox through the client (weakly: the
        // client owns the mailbox, whose wake-up owns the wake function).
        let client: Arc<OnceLock<Weak<Shared>>> = Arc::default();
        let drains = client.clone();
        let direct_make_error = make_error
            .create_ref()
            .map_err(|e| napi_failure("referencing makeError", e))?;
        let direct_wake = wake
            .create_ref()
            .map_err(|e| napi_failure("referencing the wake function", e))?;
        let make_error = make_error
            .create_ref()
            .map_err(|e| napi_failure("referencing makeError", e))?;
        let wake: WakeFn = wake
            .build_threadsafe_function::<()>()
            .weak::<true>()
            .build_callback(move |ctx| {
                // Before the drain: should it fail, the items stay queued for the next wake-up.
                let make_error = make_error.borrow_back(&ctx.env)?.raw();
                let mut items = batch_buffer();
                if let Some(shared) = drains.get().and_then(Weak::upgrade) {
                    shared.mailbox.drain(|d| collect(&mut items, d));
                }
                Ok(Batch {
                    items,
                    decode,
                    make_error,
                })
            })
            .map_err(|e| napi_failure("creating the wake function", e))?;
        let wake = Arc::new(wake);
        let wakes = wake.clone();
        let mailbox = Mailbox::new(EVENT_BOUND, move || {
            // Only signals (the mailbox's rule for its wake-up); fails only as the environment
            // is torn down, when nothing is delivered any more.
            let _ = wakes.call((), ThreadsafeFunctionCallMode::NonBlocking);
        });
        let shared = Arc::new(Shared { mailbox, wake });
        let _ = client.set(Arc::downgrade(&shared));
        let deliverer =
            watch::Deliverer::new(env, shared.clone(), direct_wake, direct_make_error, decode)
                .map_err(|e| napi_failure("creating the async context", e))?;
        let events = shared.clone();
        // From the start: JavaScript attaches its listeners after this returns, and they must
        // hear the first discovery even when the monitor (shared, or quick) found it already.
        let subscribed = handle.subscribe_events_from_start(Box::new(move |event: &Event| {
            // On a core thread: copy the event and queue it for the JavaScript thread.
            if let Ok(json) = serde_json::to_string(event) {
                // Dropped ones are counted and reported in their place; none after close.
                let _ = events.mailbox.push(Item::Event(json));
            }
        }));
        if let Err(e) = subscribed {
            handle.close(Box::new(|| {}));
            return Err(e);
        }
        Ok(NativeClient {
            handle,
            shared,
            deliverer: Rc::new(deliverer),
            transactions: apps::Transactions::default(),
        })
    }

    /// See [`Shared::starting`].
    fn starting<R>(&self, id: u32, f: impl FnOnce(&Start) -> Option<R>) -> Option<R> {
        self.shared.starting(id, f)
    }
}

impl Drop for NativeClient {
    /// A client collected without `close()` is closed (nothing of it is pending: JavaScript keeps
    /// a client with pending operations reachable).
    fn drop(&mut self) {
        if !self.handle.is_closed() {
            self.handle.close(Box::new(|| {}));
        }
        // No wake-up after this: nobody is left to take what comes (the completions handed
        // back had no one waiting, as nothing was pending).
        drop(self.shared.mailbox.close());
    }
}

/// A command's deadline from JavaScript's `timeoutMs` (checked there too).
fn deadline(timeout_ms: Option<f64>) -> sentinel_recovery::Result<Option<Duration>> {
    match timeout_ms {
        None => Ok(None),
        Some(ms) if ms > 0.0 => Duration::try_from_secs_f64(ms / 1000.0)
            .map(Some)
            .map_err(|_| SrError::config(format!("timeoutMs {ms} is out of range"))),
        Some(ms) => Err(SrError::config(format!(
            "timeoutMs must be a positive number of milliseconds, not {ms}"
        ))),
    }
}

#[napi]
impl NativeClient {
    /// Completes `id` when the first discovery round has finished: with `null` if it found a
    /// verified primary, else with its error.
    #[napi(catch_unwind)]
    pub fn ready(&self, id: u32) {
        self.starting(id, |start| {
            Some(self.handle.ready(start.done(|_| Value::Nil)))
        });
    }

    /// The function `execute(id, args, timeoutMs, cancellable)` of this client (see
    /// `execute.rs`): runs one command (`args`: strings and Buffers/Uint8Arrays) and completes
    /// `id` with its reply; `timeoutMs` replaces the client's `command_timeout_ms` for this
    /// command; with `cancellable` it returns the operation, to cancel it. Made once per client.
    #[napi(
        catch_unwind,
        ts_return_type = "(id: number, args: Array<string | Uint8Array>, timeoutMs: number | undefined | null, cancellable: boolean) => NativeOperation | null"
    )]
    pub fn executor<'env>(&self, env: &'env Env) -> napi::Result<Unknown<'env>, Code> {
        let executor = execute::Executor {
            handle: self.handle.clone(),
            shared: self.shared.clone(),
            deliverer: self.deliverer.clone(),
        };
        let function = execute::function(env.raw(), executor)
            .map_err(|e| js_error(&napi_failure("creating the execute function", e.reason)))?;
        // SAFETY: a function just made in this environment.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), function) })
    }

    /// For the test suite only: an operation whose work panics on a core thread; `id`
    /// completes with an `internal` error, once, and the client goes on.
    #[napi(catch_unwind)]
    pub fn panic_for_test(&self, id: u32) {
        self.starting(id, |start| {
            Some(self.handle.panic_for_test(start.done(|v| v)))
        });
    }

    /// Closes the client and completes `id` once every operation in flight has completed (with
    /// `closed` if it had not finished) and no event handler runs any more: every completion and
    /// event queued before is drained before this one.
    #[napi(catch_unwind)]
    pub fn close(&self, id: u32) {
        self.starting(id, |start| {
            let done = start.done(|()| Value::Nil);
            // Transactions end with the client (their steps complete with `closed`).
            self.transactions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            self.handle.close(Box::new(move || done(Ok(()))));
            // The watched socket is let go now, not when the client is collected.
            watch::close_poll(&self.deliverer);
            Some(())
        });
    }

    /// Completes `id` with `[host, port]` of the node a connection of another library (the
    /// ioredis adapter) should go to: the verified primary for `primary`, else a node for reads
    /// under `read_from`; it waits, as a command would, up to `timeoutMs` (the client's
    /// `command_timeout_ms` when absent) through a promotion or a missing primary.
    #[napi(catch_unwind)]
    pub fn route(&self, id: u32, primary: bool, timeout_ms: Option<f64>) {
        self.starting(id, |start| {
            let done = start.done(|a: sentinel_recovery::Address| {
                Value::Array(vec![Value::Simple(a.host), Value::Int(i64::from(a.port))])
            });
            match deadline(timeout_ms) {
                Ok(timeout) => Some(self.handle.route(route(primary), timeout, done)),
                Err(e) => {
                    done(Err(e));
                    None
                }
            }
        });
    }

    /// Whether a connection to `host:port` may still carry writes (`primary`) or reads. Never
    /// waits; false from the moment a failover starts demoting the node.
    #[napi(catch_unwind)]
    pub fn is_routable(&self, host: String, port: u32, primary: bool) -> bool {
        u16::try_from(port).is_ok_and(|port| {
            self.handle
                .is_routable(&sentinel_recovery::Address::new(host, port), route(primary))
        })
    }

    /// Whether a failover is demoting, or has replaced, `host:port`. Never waits.
    #[napi(catch_unwind)]
    pub fn is_fenced(&self, host: String, port: u32) -> bool {
        u16::try_from(port).is_ok_and(|port| {
            self.handle
                .is_fenced(&sentinel_recovery::Address::new(host, port))
        })
    }

    /// An 8-byte ArrayBuffer over the core's routing counter (see `Handle::routing_epoch`): it
    /// changes whenever `isRoutable` / `isFenced` may answer differently, so the ioredis adapter
    /// keeps a verdict while the counter's low 32 bits read the same instead of calling in for
    /// every command. The buffer keeps the counter alive; the core writes it, JavaScript reads.
    #[napi(catch_unwind, ts_return_type = "ArrayBuffer")]
    pub fn routing_epoch<'env>(&self, env: &'env Env) -> napi::Result<Unknown<'env>, Code> {
        let epoch = self.handle.routing_epoch().map_err(|e| js_error(&e))?;
        let buffer = epoch_buffer(env.raw(), epoch).map_err(|e| {
            js_error(&napi_failure(
                "creating the routing counter's buffer",
                e.reason,
            ))
        })?;
        // SAFETY: a value just made in this environment.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), buffer) })
    }

    /// Reports that a connection to `host:port` could not be opened or found the wrong role.
    #[napi(catch_unwind)]
    pub fn report_unusable(&self, host: String, port: u32) -> napi::Result<(), Code> {
        let port = u16::try_from(port)
            .map_err(|_| js_error(&SrError::config(format!("port {port} is out of range"))))?;
        self.handle
            .report_unusable(&sentinel_recovery::Address::new(host, port))
            .map_err(|e| js_error(&e))
    }

    /// The current topology snapshot as JSON. Never waits on network work.
    #[napi(catch_unwind)]
    pub fn topology(&self) -> napi::Result<String, Code> {
        guarded(|| {
            let topology = self.handle.topology().map_err(|e| js_error(&e))?;
            serde_json::to_string(&topology)
                .map_err(|e| js_error(&napi_failure("serializing the topology", e)))
        })
    }

    /// Whether `close` was called.
    #[napi(getter, catch_unwind)]
    pub fn closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// References (`true`) or unreferences (`false`) the wake function: referenced, it keeps the
    /// process alive. JavaScript holds it while operations are pending.
    #[napi(catch_unwind)]
    pub fn hold(&self, env: Env, on: bool) -> napi::Result<(), Code> {
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
            Err(js_error(&napi_failure(
                "napi_(un)ref_threadsafe_function",
                status,
            )))
        }
    }
}

/// Items converted to JavaScript by the wake function's callback (see the module documentation).
#[doc(hidden)]
pub struct Batch {
    pub(crate) items: Vec<Item>,
    pub(crate) decode: bool,
    pub(crate) make_error: sys::napi_value,
}

/// `napi_status` to a `Result`.
fn check(status: sys::napi_status) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(
            Status::from(status),
            format!("a napi call failed (status {status})"),
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

/// One completion as `(ok, value)`; a reply that can't be converted still settles its promise,
/// as an `internal` error.
pub(crate) unsafe fn completion_value(
    env: sys::napi_env,
    result: &sentinel_recovery::Result<Value>,
    decode: bool,
    factory: sys::napi_value,
) -> napi::Result<(bool, sys::napi_value)> {
    let converted = match result {
        Ok(v) => reply_value(env, v, decode, factory).map(|v| (true, v)),
        Err(e) => make_error(
            env,
            factory,
            e.code().as_str(),
            e.message(),
            e.server_code(),
        )
        .map(|v| (false, v)),
    };
    match converted {
        Ok(pair) => Ok(pair),
        Err(e) => {
            let e = napi_failure("converting a reply", &e.reason);
            Ok((
                false,
                make_error(env, factory, e.code().as_str(), e.message(), None)?,
            ))
        }
    }
}

/// A pipeline's or EXEC's completion as `(ok, value)`: an array of replies and error objects,
/// `null` for an EXEC whose watched key changed, or the error of the whole call.
unsafe fn many_value(
    env: sys::napi_env,
    result: &sentinel_recovery::Result<Option<Vec<sentinel_recovery::Result<Value>>>>,
    decode: bool,
    factory: sys::napi_value,
) -> napi::Result<(bool, sys::napi_value)> {
    let items = match result {
        Err(e) => return completion_value(env, &Err(e.clone()), decode, factory),
        Ok(None) => return completion_value(env, &Ok(Value::Nil), decode, factory),
        Ok(Some(items)) => items,
    };
    let mut array = ptr::null_mut();
    check(sys::napi_create_array_with_length(
        env,
        items.len(),
        &mut array,
    ))?;
    for (i, item) in items.iter().enumerate() {
        let (_, v) = completion_value(env, item, decode, factory)?;
        check(sys::napi_set_element(env, array, i as u32, v))?;
    }
    Ok((true, array))
}

impl ToNapiValue for Batch {
    unsafe fn to_napi_value(env: sys::napi_env, batch: Self) -> napi::Result<sys::napi_value> {
        let mut array = ptr::null_mut();
        check(sys::napi_create_array_with_length(
            env,
            batch.items.len() * 3,
            &mut array,
        ))?;
        for (i, item) in batch.items.iter().enumerate() {
            let (id, ok, value) = match item {
                Item::Completion(id, result) => {
                    let (ok, value) =
                        completion_value(env, result, batch.decode, batch.make_error)?;
                    (*id, ok, value)
                }
                Item::Many(id, result) => {
                    let (ok, value) = many_value(env, result, batch.decode, batch.make_error)?;
                    (*id, ok, value)
                }
                Item::Event(json) => (0, true, ToNapiValue::to_napi_value(env, json.as_str())?),
            };
            let base = (i * 3) as u32;
            check(sys::napi_set_element(
                env,
                array,
                base,
                ToNapiValue::to_napi_value(env, id)?,
            ))?;
            check(sys::napi_set_element(
                env,
                array,
                base + 1,
                ToNapiValue::to_napi_value(env, ok)?,
            ))?;
            check(sys::napi_set_element(env, array, base + 2, value))?;
        }
        recycle(batch.items);
        Ok(array)
    }
}

thread_local! {
    /// The JavaScript thread's batch buffer, emptied and kept between wake-ups: a batch's
    /// buffer is often larger than the allocator's small sizes, and allocating it anew for each
    /// batch on this thread made the allocator consolidate its small free chunks, which then
    /// missed its per-thread cache (measured under callgrind at 64 commands in flight: about
    /// 8 % more instructions per command).
    static SPARE: std::cell::RefCell<Vec<Item>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty buffer for a batch, with the capacity of earlier ones.
pub(crate) fn batch_buffer() -> Vec<Item> {
    SPARE.with(|s| s.take())
}

/// Gives a converted batch's buffer back for the next one.
fn recycle(mut items: Vec<Item>) {
    items.clear();
    SPARE.with(|s| {
        if s.borrow().capacity() < items.capacity() {
            *s.borrow_mut() = items;
        }
    });
}

/// The core's route for a connection that carries writes (`primary`) or reads.
fn route(primary: bool) -> sentinel_recovery::Route {
    if primary {
        sentinel_recovery::Route::Primary
    } else {
        sentinel_recovery::Route::Read
    }
}

/// An external ArrayBuffer over `epoch`'s 8 bytes; the buffer's finalizer drops the `Arc`.
fn epoch_buffer(
    env: sys::napi_env,
    epoch: Arc<std::sync::atomic::AtomicU64>,
) -> napi::Result<sys::napi_value> {
    unsafe extern "C" fn release(
        _env: sys::napi_env,
        _data: *mut std::ffi::c_void,
        hint: *mut std::ffi::c_void,
    ) {
        // SAFETY: `hint` is the box leaked below, released once, by this finalizer.
        drop(unsafe { Box::from_raw(hint.cast::<Arc<std::sync::atomic::AtomicU64>>()) });
    }
    let data = Arc::as_ptr(&epoch).cast_mut().cast::<std::ffi::c_void>();
    let hint = Box::into_raw(Box::new(epoch));
    let mut buffer = std::ptr::null_mut();
    // SAFETY: `data` points at 8 bytes that live as long as `hint`'s Arc, which the finalizer
    // drops only once V8 collected the buffer.
    let made = check(unsafe {
        sys::napi_create_external_arraybuffer(
            env,
            data,
            std::mem::size_of::<std::sync::atomic::AtomicU64>(),
            Some(release),
            hint.cast(),
            &mut buffer,
        )
    });
    if made.is_err() {
        // SAFETY: not handed to V8: ours to drop.
        drop(unsafe { Box::from_raw(hint) });
    }
    made.map(|()| buffer)
}
