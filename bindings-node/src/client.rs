//! `NativeClient`, the native client under `index.js`'s `Client`: opening, the operations on the
//! shared connection, routing for the ioredis adapter, and closing.
//!
//! The client's wake function is unreferenced (it does not keep the process alive); JavaScript
//! references it through [`NativeClient::hold`] while at least one operation is pending, so a
//! pending command keeps the process alive until it settles and nothing else does.

use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use napi::bindgen_prelude::{Function, Unknown};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{sys, Env, JsValue};
use napi_derive::napi;
use sentinel_recovery::host::{ApiNames, Handle, HostTransaction, Mailbox};
use sentinel_recovery::{Error as SrError, Event, Value};

use crate::address_map;
use crate::args::{deadline, pairs, Args};
use crate::batch::{batch_buffer, Batch, Item};
use crate::completions::{collect, Shared, Start, WakeFn, EVENT_BOUND};
use crate::errors::{check, guarded, js_error, napi_failure, Code};
use crate::execute;
use crate::operation::NativeOperation;
use crate::own_replies;

/// How the Node API is named in error hints (MULTI refused on the shared connection, ...).
pub static NODE_API: ApiNames = ApiNames {
    transaction: "client.transaction(commands) or client.beginTransaction()",
    watch: "client.transaction(commands, { watch }) or tx.watch() after client.beginTransaction()",
};

/// Where a transaction lives once begun (see `transactions.rs`): empty before, and once ended.
pub(crate) type Slot = Arc<Mutex<Option<HostTransaction>>>;

/// A client's transactions, for `close` to end them.
#[derive(Default)]
pub(crate) struct Transactions {
    closed: bool,
    live: Vec<Weak<Mutex<Option<HostTransaction>>>>,
}

impl Transactions {
    /// Puts a transaction just begun in its slot; refused (and so ended) after `close`.
    pub(crate) fn adopt(
        &mut self,
        slot: &Slot,
        tx: HostTransaction,
    ) -> sentinel_recovery::Result<()> {
        if self.closed {
            return Err(SrError::closed());
        }
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        self.live.retain(|w| w.strong_count() > 0);
        self.live.push(Arc::downgrade(slot));
        Ok(())
    }

    /// Ends every transaction (their steps in flight complete with `closed`) and any begun later.
    pub(crate) fn close(&mut self) {
        self.closed = true;
        for slot in self.live.drain(..).filter_map(|w| w.upgrade()) {
            drop(slot.lock().unwrap_or_else(|e| e.into_inner()).take());
        }
    }
}

/// Parses `url`, applies `options` (a flat `[key, value, key, value, ...]` list of core
/// option keys and their string values, each passed through the core's `Config::set`) and
/// opens the client; returns at once, discovery runs on the core's threads. `wake` is called
/// with each batch of what finished and of events, as `(columns, count, first, rest)` (see
/// `batch.rs`);
/// errors in it are made by `makeError(code, message, serverCode)`. It does not keep the
/// process alive (see [`NativeClient::hold`]). `address_map` is the function form of that
/// option (see `address_map.rs`).
#[napi(
    catch_unwind,
    ts_args_type = "url: string, options: Array<string>, decode: boolean, wake: (columns: { ids: Uint32Array, kinds: Uint8Array, offsets: Uint32Array, lengths: Uint32Array }, count: number, first: unknown, rest: Array<unknown> | undefined) => void, makeError: (code: string, message: string, serverCode: string | null) => Error, addressMap?: ((arg: string) => string | null) | undefined | null"
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

/// The native client under `index.js`'s `Client`. Not meant to be used directly.
#[napi]
pub struct NativeClient {
    pub(crate) handle: Handle,
    pub(crate) shared: Arc<Shared>,
    /// Delivers completions of replies read on the JavaScript thread (see `own_replies`).
    pub(crate) deliverer: Rc<own_replies::Deliverer>,
    /// Transactions begun, for `close` to end them.
    pub(crate) transactions: Arc<Mutex<Transactions>>,
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
        handle.set_api_names(&NODE_API);
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
        let deliverer = own_replies::Deliverer::new(
            env,
            shared.clone(),
            direct_wake,
            direct_make_error,
            decode,
        )
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
            transactions: Arc::default(),
        })
    }

    /// See [`Shared::starting`].
    pub(crate) fn starting<R>(&self, id: u32, f: impl FnOnce(&Start) -> Option<R>) -> Option<R> {
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
        self.transactions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .close();
        // No wake-up after this: nobody is left to take what comes (the completions handed
        // back had no one waiting, as nothing was pending).
        drop(self.shared.mailbox.close());
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

    /// Sends `commands` back to back and completes `id` with one result per command. `timeoutMs`
    /// is the whole pipeline's deadline. With `cancellable`, returns the operation.
    #[napi(catch_unwind)]
    pub fn pipeline(
        &self,
        id: u32,
        #[napi(ts_arg_type = "Array<Array<string | Uint8Array>>")] commands: Vec<Args>,
        timeout_ms: Option<f64>,
        cancellable: bool,
    ) -> Option<NativeOperation> {
        self.starting(id, |start| {
            let timeout = start.deadline(timeout_ms)?;
            let commands: Vec<Vec<Vec<u8>>> = commands.iter().map(Args::to_vecs).collect();
            let done = start.done_with(|id, result| Item::Many(id, result.map(Some)));
            // Busy from now on: a reply due on this thread goes back to the core.
            own_replies::hand_back(&self.deliverer);
            let operation = self.handle.pipeline(&commands, timeout, done);
            cancellable.then_some(NativeOperation { operation })
        })
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
                .close();
            self.handle.close(Box::new(move || done(Ok(()))));
            // The polled socket is let go now, not when the client is collected.
            own_replies::close_poll(&self.deliverer);
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
