//! Replies read on the JavaScript thread.
//!
//! A command the JavaScript thread wrote itself to an idle connection offers its reply to that
//! thread ([`OwnReply`], see `Handle::execute_here`). Its socket is then watched by the
//! thread's libuv loop, as ioredis watches its own, and the reply read there when the socket is
//! readable: the reply wakes the JavaScript thread alone, instead of a core thread that reads it
//! and then wakes the JavaScript thread. The read never waits (the socket is readable, and a
//! reply not yet whole is read on at the next readiness), so the loop is never blocked on the
//! network.
//!
//! Commands `execute` sends while such replies are due join them ([`take_due`], [`put_back`]):
//! written on this thread too, their replies read here after the others. So a client that keeps
//! many commands in flight does all their I/O on this thread, as ioredis does, and no core thread
//! is woken per command (on a machine with few cores, core threads would compete with the server
//! and this thread for them). Commands JavaScript sends while `readable` delivers the replies it
//! read (each reply's continuation sending the next) are written together, sixteen to a system
//! call and the rest once it returns (`OwnReply::defer_writes`, `OwnReply::flush`).
//!
//! Lifetimes: each client keeps one poll handle on its connection's socket, made at its first
//! watch and started while a reply is due. It stays started after that reply is read, so a client
//! that sends the next command on the same socket costs the loop no system call at all: making a
//! handle and closing it again per command cost the JavaScript thread seven (`epoll_ctl` six
//! times, `ioctl` once). Meanwhile the runtime does not watch the socket
//! ([`OwnReply::keep_watching`]), which spares the two calls that would tell it to and not to
//! again. Readiness while no reply is due (bytes for the core's task, or the end of the stream)
//! closes the handle, which gives the socket back to the runtime: the core reads those. Another
//! operation (a pipeline, a transaction, ...) sent while a reply is due stops the handle and hands
//! the replies back (see [`hand_back`]).
//! The client's end, a watch on another socket (it reconnected), a failed poll and the
//! environment's teardown close it too. Closing makes libuv remove the socket from the loop's
//! epoll by descriptor number, so the client keeps the last [`OwnReply`] (which keeps the
//! descriptor open: [`OwnReply::give_back`]) until its handle is closed: the number cannot have
//! been reused by another socket of this loop. The poll handle is unreferenced: the pending
//! command keeps the process alive (JavaScript holds the client's wake function while operations
//! are pending), the watch does not. The first watch of an environment registers an asynchronous
//! cleanup hook that closes the handles still open when the environment is torn down (a worker
//! that ends with a command in flight, or with a client left open), so no libuv handle outlives
//! its loop.
use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::os::raw::{c_int, c_void};
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

use napi::bindgen_prelude::{FunctionRef, ToNapiValue};
use napi::{sys, Env, JsValue};
use sentinel_recovery::host::OwnReply;

use crate::batch::{Batch, Item};
use crate::completions::{collect, Shared};
use crate::errors::check;

/// `UV_POLL` of libuv's `uv_handle_type`.
const UV_POLL: c_int = 8;
/// `UV_READABLE` of libuv's `uv_poll_event`.
const UV_READABLE: c_int = 1;

type PollCallback = unsafe extern "C" fn(handle: *mut c_void, status: c_int, events: c_int);
type CloseCallback = unsafe extern "C" fn(handle: *mut c_void);

// libuv, which node exports to its addons.
extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_poll_init_socket(loop_: *mut sys::uv_loop_s, handle: *mut c_void, socket: c_int)
        -> c_int;
    fn uv_poll_start(handle: *mut c_void, events: c_int, cb: PollCallback) -> c_int;
    fn uv_poll_stop(handle: *mut c_void) -> c_int;
    fn uv_close(handle: *mut c_void, cb: CloseCallback);
    fn uv_unref(handle: *mut c_void);
}

/// What the JavaScript thread needs to hand a client's completions to JavaScript itself, right
/// after reading a reply, instead of scheduling the wake function (one more turn of the loop and
/// an eventfd write and read). Lives on the JavaScript thread only.
pub(crate) struct Deliverer {
    env: sys::napi_env,
    /// The async context JavaScript runs in when called from here (so microtasks and
    /// `process.nextTick` callbacks run after it, as after any callback from native code).
    context: sys::napi_async_context,
    shared: Arc<Shared>,
    wake: FunctionRef<(), ()>,
    make_error: FunctionRef<(String, String, Option<String>), ()>,
    decode: bool,
    /// This client's poll handle (null before its first watch and once closed). Its `data`
    /// points back here while it is open.
    poll: Cell<*mut c_void>,
    /// `poll` is started.
    polling: Cell<bool>,
    /// The reply watched for, or the last one (read, or given back), kept while `poll` may
    /// watch its socket: it keeps the descriptor open.
    own: RefCell<Option<OwnReply>>,
    /// `own`'s reply is still due and read here.
    due: Cell<bool>,
    /// JavaScript runs from `readable` (with the replies just read): commands that join the
    /// replies read here are written together once it returns.
    deferring: Cell<bool>,
}

impl Deliverer {
    /// On the JavaScript thread, as the client opens.
    pub(crate) fn new(
        env: &Env,
        shared: Arc<Shared>,
        wake: FunctionRef<(), ()>,
        make_error: FunctionRef<(String, String, Option<String>), ()>,
        decode: bool,
    ) -> napi::Result<Deliverer> {
        let mut context = ptr::null_mut();
        // SAFETY: on the JavaScript thread of `env`.
        unsafe {
            let name = ToNapiValue::to_napi_value(env.raw(), "sentinel-recovery:reply")?;
            let mut resource = ptr::null_mut();
            check(sys::napi_create_object(env.raw(), &mut resource))?;
            check(sys::napi_async_init(
                env.raw(),
                resource,
                name,
                &mut context,
            ))?;
        }
        Ok(Deliverer {
            env: env.raw(),
            context,
            shared,
            wake,
            make_error,
            decode,
            poll: Cell::new(ptr::null_mut()),
            polling: Cell::new(false),
            own: RefCell::new(None),
            due: Cell::new(false),
            deferring: Cell::new(false),
        })
    }

    /// Calls the wake function with `items` (drained here) as the same batch a wake-up makes.
    unsafe fn deliver(&self, items: Vec<Item>) -> napi::Result<()> {
        let env = self.env;
        let mut scope = ptr::null_mut();
        check(sys::napi_open_handle_scope(env, &mut scope))?;
        let delivered = self.deliver_in_scope(items);
        sys::napi_close_handle_scope(env, scope);
        delivered
    }

    unsafe fn deliver_in_scope(&self, items: Vec<Item>) -> napi::Result<()> {
        let env = Env::from_raw(self.env);
        let wake = self.wake.borrow_back(&env)?.raw();
        let make_error = self.make_error.borrow_back(&env)?.raw();
        let args = Batch {
            items,
            decode: self.decode,
            make_error,
        }
        .into_args(self.env)?;
        let mut recv = ptr::null_mut();
        // napi_make_callback wants an object as `this`; the wake function ignores it.
        check(sys::napi_get_global(self.env, &mut recv))?;
        let mut result = ptr::null_mut();
        let status = sys::napi_make_callback(
            self.env,
            self.context,
            recv,
            wake,
            args.len(),
            args.as_ptr(),
            &mut result,
        );
        if status == sys::Status::napi_pending_exception {
            // Thrown by a handler the promise settled into: uncaught, as from any callback.
            let mut error = ptr::null_mut();
            sys::napi_get_and_clear_last_exception(self.env, &mut error);
            sys::napi_fatal_exception(self.env, error);
            return Ok(());
        }
        check(status)
    }
}

impl Drop for Deliverer {
    fn drop(&mut self) {
        close_poll(self);
        // SAFETY: dropped on the JavaScript thread (held by the client object and by watches,
        // both of that thread only), while its environment lives.
        unsafe {
            sys::napi_async_destroy(self.env, self.context);
        }
    }
}

thread_local! {
    /// Replies read and handed over on this thread, each counted, for the suite
    /// (`repliesReadHereForTest`).
    static READ_HERE: Cell<u64> = const { Cell::new(0) };
}

/// How many replies this thread has read itself (and handed over) so far.
pub(crate) fn replies_read_here() -> u64 {
    READ_HERE.with(Cell::get)
}

/// This JavaScript thread's poll handles and its cleanup hook.
struct Polls {
    /// Poll handles made and not yet closed (one per client that watched a reply).
    open: Vec<*mut c_void>,
    /// Registered at the first watch; `None` before.
    hook: Option<sys::napi_async_cleanup_hook_handle>,
    /// The environment is being torn down: no new watch starts, and the hook is removed once
    /// the last handle has closed.
    tearing_down: bool,
    /// Handles closing and not yet freed.
    closing: usize,
}

thread_local! {
    static POLLS: RefCell<Polls> = const {
        RefCell::new(Polls { open: Vec::new(), hook: None, tearing_down: false, closing: 0 })
    };
}

fn handle_layout() -> Layout {
    // SAFETY: a plain query of a constant of libuv.
    let size = unsafe { uv_handle_size(UV_POLL) };
    Layout::from_size_align(size.max(std::mem::size_of::<*mut c_void>()), 16)
        .expect("libuv's uv_poll_t size is a valid layout")
}

/// Watches `own`'s socket from this (the JavaScript) thread's loop and reads the reply there.
/// When it cannot (no loop, libuv refuses the socket, the environment is ending), `own` is
/// dropped, which hands the reply back to the core thread: the command completes either way.
/// `hand_back` came first: no reply of this client is due here.
pub(crate) fn read_here(env: sys::napi_env, own: OwnReply, deliverer: &Rc<Deliverer>) {
    if POLLS.with(|w| w.borrow().tearing_down) {
        return;
    }
    let fd = own.fd();
    // The kept `OwnReply` holds the descriptor `poll` watches open: the same number is the same
    // socket.
    let watched = deliverer.own.borrow().as_ref().map(OwnReply::fd);
    if !(watched == Some(fd) && is_open(deliverer.poll.get())) {
        close_poll(deliverer);
        let Some(handle) = new_handle(env, fd, deliverer) else {
            return;
        };
        deliverer.poll.set(handle);
    }
    // The socket stays watched here after the reply (as long as the handle is open), so the
    // runtime need not watch it again in between: it is told when this loop lets go.
    let mut own = own;
    own.keep_watching();
    // The previous one, if any, was read or given back already, and this one's lend took the
    // socket over from it: dropping it hands nothing back.
    let previous = deliverer.own.replace(Some(own));
    deliverer.due.set(true);
    drop_reply(previous);
    if !deliverer.polling.get() {
        // SAFETY: an open, stopped handle of this thread's loop, for `fd`.
        if unsafe { uv_poll_start(deliverer.poll.get(), UV_READABLE, readable) } != 0 {
            close_poll(deliverer);
            return;
        }
        deliverer.polling.set(true);
    }
}

/// A new, unreferenced poll handle of this thread's loop for `fd`, its `data` pointing to
/// `deliverer`; `None` when there can be none (no loop, no cleanup hook, libuv refuses).
fn new_handle(env: sys::napi_env, fd: RawFd, deliverer: &Rc<Deliverer>) -> Option<*mut c_void> {
    let mut uv_loop = ptr::null_mut();
    // SAFETY: `env` is the current environment; the call only reads it.
    if unsafe { sys::napi_get_uv_event_loop(env, &mut uv_loop) } != sys::Status::napi_ok
        || uv_loop.is_null()
    {
        return None;
    }
    if !ensure_hook(env) {
        return None;
    }
    let layout = handle_layout();
    // SAFETY: a non-zero layout; freed in `closed` (or below) with the same layout.
    let handle = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<c_void>();
    if handle.is_null() {
        return None;
    }
    // SAFETY: `handle` is zeroed memory of uv_poll_t's size, initialised here on the loop's own
    // thread; `data` (the first field) is set after init, which leaves it alone. The deliverer
    // outlives the pointer: it closes the handle (and clears `data`) before it goes.
    unsafe {
        if uv_poll_init_socket(uv_loop, handle, fd) != 0 {
            std::alloc::dealloc(handle.cast(), layout);
            return None;
        }
        *handle.cast::<*const Deliverer>() = Rc::as_ptr(deliverer);
        uv_unref(handle);
    }
    POLLS.with(|w| w.borrow_mut().open.push(handle));
    Some(handle)
}

/// The `OwnReply` whose replies are still due here, taken out for the next command to join
/// (`Handle::execute_here`), which gives it back to [`read_here`]; the socket stays watched
/// meanwhile. `None` when no reply is due here.
pub(crate) fn take_due(deliverer: &Deliverer) -> Option<OwnReply> {
    if !deliverer.due.get() {
        return None;
    }
    let mut own = deliverer.own.borrow_mut().take()?;
    own.defer_writes(deliverer.deferring.get());
    Some(own)
}

/// Gives back what [`take_due`] took, now reading the joined command's reply too: the handle
/// polls on (the same socket, held open by `own` all along). `None` (lost to a panic on the
/// way) ends the watch: nothing holds the descriptor open any more.
pub(crate) fn put_back(deliverer: &Deliverer, own: Option<OwnReply>) {
    match own {
        Some(own) => drop_reply(deliverer.own.replace(Some(own))),
        None => close_poll(deliverer),
    }
}

/// Ends the watch for `deliverer`'s client's reply, if one is due, handing the reply back to the
/// core: the client is sending more, so its connection is busy, and the core thread reads that
/// reply with those behind it, while this thread goes on with JavaScript (the watch would keep
/// the core from reading any of them until this thread is back in its loop). The handle is
/// stopped (the core's replies would wake this loop too) and kept for the next watch.
pub(crate) fn hand_back(deliverer: &Deliverer) {
    if !deliverer.due.replace(false) {
        return;
    }
    let handle = deliverer.poll.get();
    if deliverer.polling.replace(false) && is_open(handle) {
        // SAFETY: an open handle of this thread's loop; its socket is held open by `own`.
        unsafe { uv_poll_stop(handle) };
    }
    if let Some(own) = deliverer.own.borrow_mut().as_mut() {
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| own.give_back()));
    }
}

/// Closes `deliverer`'s client's poll handle, if it has one, then lets go of the socket (a reply
/// still due goes back to the core, which completes the command).
pub(crate) fn close_poll(deliverer: &Deliverer) {
    deliverer.polling.set(false);
    deliverer.due.set(false);
    let handle = deliverer.poll.replace(ptr::null_mut());
    if take_open(handle) {
        // SAFETY: an open handle of this thread's loop, its socket still held open by `own`;
        // `closed` frees it and finds no deliverer.
        unsafe {
            *handle.cast::<*const Deliverer>() = ptr::null();
            finish(handle);
        }
    }
    drop_reply(deliverer.own.borrow_mut().take());
}

/// Drops an `OwnReply` (handing an unread reply back) with no panic escaping.
fn drop_reply(own: Option<OwnReply>) {
    if own.is_some() {
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| drop(own)));
    }
}

/// Whether `handle` is one of this thread's open handles (not null, not closed by the teardown).
fn is_open(handle: *mut c_void) -> bool {
    !handle.is_null() && POLLS.with(|w| w.borrow().open.contains(&handle))
}

/// Takes `handle` out of the open handles; whether it was there (and so is to be closed now).
fn take_open(handle: *mut c_void) -> bool {
    !handle.is_null()
        && POLLS.with(|w| {
            let mut w = w.borrow_mut();
            let before = w.open.len();
            w.open.retain(|h| *h != handle);
            w.open.len() != before
        })
}

/// libuv's callback: the socket is readable (or polling failed).
unsafe extern "C" fn readable(handle: *mut c_void, status: c_int, _events: c_int) {
    let d = *handle.cast::<*const Deliverer>();
    if d.is_null() {
        return;
    }
    // SAFETY: `data` points to the live deliverer of an open handle (it closes the handle
    // before it goes); held here while JavaScript runs below.
    Rc::increment_strong_count(d);
    let deliverer = Rc::from_raw(d);
    if status != 0 || !deliverer.due.get() {
        // Polling failed, or the socket has something while no reply is due here: bytes or the
        // end of the stream for the core's task, which watches the socket then too.
        close_poll(&deliverer);
    } else {
        // The reply's completion is delivered here right after the read (the mailbox holds back
        // the wake-up it would make), not one more turn of the loop later.
        let mut items = Vec::new();
        let (read, _) = deliverer.shared.mailbox.drain_after(
            // No panic may unwind into libuv: one ends the watch (the core completes the command).
            || {
                std::panic::catch_unwind(AssertUnwindSafe(|| {
                    match deliverer.own.borrow_mut().as_mut() {
                        Some(own) => {
                            let before = own.handed_over();
                            let read = own.read_ready();
                            let handed = own.handed_over() - before;
                            READ_HERE.with(|n| n.set(n.get() + handed));
                            read
                        }
                        None => Poll::Ready(false),
                    }
                }))
            },
            |d| collect(&mut items, d),
        );
        match read {
            Ok(Poll::Pending) => {}
            // Still watched: the next command on this socket starts no new registration.
            Ok(Poll::Ready(true)) => deliverer.due.set(false),
            // The connection ended or sent something invalid: the core completes the command.
            _ => close_poll(&deliverer),
        }
        if !items.is_empty() {
            // The commands JavaScript sends from here on (typically one per reply just
            // delivered) are written with one system call once it returns.
            deliverer.deferring.set(true);
            // A failure here loses what was drained, as a failing wake-up would: napi fails only
            // as the environment goes.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| deliverer.deliver(items)));
            deliverer.deferring.set(false);
            if let Some(own) = deliverer.own.borrow_mut().as_mut() {
                let _ = std::panic::catch_unwind(AssertUnwindSafe(|| own.flush()));
            }
        }
    }
}

/// Stops `handle` and closes it; `closed` frees it.
unsafe fn finish(handle: *mut c_void) {
    uv_poll_stop(handle);
    POLLS.with(|w| w.borrow_mut().closing += 1);
    uv_close(handle, closed);
}

unsafe extern "C" fn closed(handle: *mut c_void) {
    std::alloc::dealloc(handle.cast(), handle_layout());
    let done_hook = POLLS.with(|w| {
        let mut w = w.borrow_mut();
        w.closing -= 1;
        if w.tearing_down && w.closing == 0 && w.open.is_empty() {
            w.hook.take()
        } else {
            None
        }
    });
    if let Some(hook) = done_hook {
        sys::napi_remove_async_cleanup_hook(hook);
    }
}

/// Registers this environment's cleanup hook once; false when napi refuses it (then no watch
/// starts: nothing could close it at teardown).
fn ensure_hook(env: sys::napi_env) -> bool {
    if POLLS.with(|w| w.borrow().hook.is_some()) {
        return true;
    }
    let mut hook = ptr::null_mut();
    // SAFETY: `teardown` takes no data; napi passes the hook's handle back to it.
    let status = unsafe {
        sys::napi_add_async_cleanup_hook(env, Some(teardown), ptr::null_mut(), &mut hook)
    };
    if status != sys::Status::napi_ok || hook.is_null() {
        return false;
    }
    POLLS.with(|w| w.borrow_mut().hook = Some(hook));
    true
}

/// The environment is being torn down: closes every open handle, handing the replies still due
/// back (those commands complete on the core, with `closed` as the client closes), and removes
/// the hook once the last has closed.
unsafe extern "C" fn teardown(hook: sys::napi_async_cleanup_hook_handle, _: *mut c_void) {
    let open = POLLS.with(|w| {
        let mut w = w.borrow_mut();
        w.tearing_down = true;
        w.hook = Some(hook);
        std::mem::take(&mut w.open)
    });
    for handle in open {
        let d = std::mem::replace(&mut *handle.cast::<*const Deliverer>(), ptr::null());
        finish(handle);
        if !d.is_null() {
            // SAFETY: the live deliverer of an open handle. Its reply, if one is due, and the
            // watch of its socket go back to the core; the socket stays held until the
            // deliverer goes.
            let deliverer = &*d;
            deliverer.polling.set(false);
            deliverer.due.set(false);
            if let Some(own) = deliverer.own.borrow_mut().as_mut() {
                let _ = std::panic::catch_unwind(AssertUnwindSafe(|| own.give_back()));
            }
        }
    }
    let nothing_closing = POLLS.with(|w| w.borrow().closing == 0);
    if nothing_closing {
        POLLS.with(|w| w.borrow_mut().hook = None);
        sys::napi_remove_async_cleanup_hook(hook);
    }
}
