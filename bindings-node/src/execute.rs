//! `execute`, the one call JavaScript makes per command, as a plain napi function bound to one
//! client.
//!
//! A `#[napi]` method pays, on every call, for napi-rs's machinery around it: unwrapping `this`
//! with a type-tag check, and registering a borrow of the receiver in a process-wide map under a
//! lock (napi-rs 3 tracks borrows so an asynchronous task can keep its arguments alive), then
//! releasing it. Counted with callgrind, that was about as much as the core's own work to encode
//! and send the command. This function is made once per client (`NativeClient::executor`) and
//! finds its client in the function's own data pointer, which nothing but this module can set:
//! no unwrap, no type check to trust, nothing registered. It converts its four arguments with
//! raw napi calls and runs the same steps the other operations do (a panic completes `id` with
//! `internal`; a bad argument throws an error whose `code` is the stable code).

use std::ffi::CString;
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;

use napi::bindgen_prelude::{FromNapiValue, ToNapiValue};
use napi::{sys, Status};
use sentinel_recovery::host::{Handle, Started};
use sentinel_recovery::Error as SrError;

use crate::args::Args;
use crate::completions::Shared;
use crate::errors::{check, napi_failure};
use crate::operation::NativeOperation;
use crate::own_replies;

/// What the function needs of its client (shared with the `NativeClient`).
pub(crate) struct Executor {
    pub(crate) handle: Handle,
    pub(crate) shared: Arc<Shared>,
    pub(crate) deliverer: Rc<own_replies::Deliverer>,
}

impl Executor {
    /// Runs one command (`args`) and completes `id` with its reply; with `cancellable`, returns
    /// the operation. A command written on this thread (to an idle connection, or to one whose
    /// replies this thread reads already) has its reply read on this thread as well (see
    /// `own_replies`).
    pub(crate) fn execute(
        &self,
        env: sys::napi_env,
        id: u32,
        args: &Args,
        timeout_ms: Option<f64>,
        cancellable: bool,
    ) -> Option<NativeOperation> {
        self.shared.starting(id, |start| {
            let timeout = start.deadline(timeout_ms)?;
            // Replies still due on this thread: this command's joins them when it goes to the
            // same connection (see `own_replies`).
            let reading = own_replies::take_due(&self.deliverer);
            let joining = reading.is_some();
            let Started { operation, own } = args.with_slices(|args| {
                self.handle
                    .execute_here(args, timeout, start.done(|v| v), reading)
            });
            if joining {
                own_replies::put_back(&self.deliverer, own);
            } else if let Some(own) = own {
                // Written here to an idle connection: the reply is read on this thread too.
                own_replies::read_here(env, own, &self.deliverer);
            }
            cancellable.then_some(NativeOperation { operation })
        })
    }
}

/// `execute(id, args, timeoutMs, cancellable)` for `executor`'s client, as a JavaScript
/// function that owns it (freed when the function is collected).
pub(crate) fn function(env: sys::napi_env, executor: Executor) -> napi::Result<sys::napi_value> {
    let data = Box::into_raw(Box::new(executor));
    let mut function = ptr::null_mut();
    // SAFETY: `data` is a leaked box, freed by `finalize` once the function is collected, or
    // below if the function can't be made (then no JavaScript can reach it).
    unsafe {
        let made = check(sys::napi_create_function(
            env,
            c"execute".as_ptr(),
            "execute".len() as isize,
            Some(call),
            data.cast(),
            &mut function,
        ))
        .and_then(|()| {
            check(sys::napi_add_finalizer(
                env,
                function,
                data.cast(),
                Some(finalize),
                ptr::null_mut(),
                ptr::null_mut(),
            ))
        });
        if let Err(e) = made {
            drop(Box::from_raw(data));
            return Err(e);
        }
    }
    Ok(function)
}

unsafe extern "C" fn finalize(
    _env: sys::napi_env,
    data: *mut std::ffi::c_void,
    _: *mut std::ffi::c_void,
) {
    // On the JavaScript thread (napi runs finalizers there), as the deliverer requires.
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        drop(Box::from_raw(data.cast::<Executor>()))
    }));
}

unsafe extern "C" fn call(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // No panic may unwind into napi.
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| call_inner(env, info)));
    let error = match result {
        Ok(Ok(value)) => return value,
        Ok(Err(e)) => e,
        Err(panic) => SrError::internal(&*panic),
    };
    throw(env, &error);
    ptr::null_mut()
}

unsafe fn call_inner(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> Result<sys::napi_value, SrError> {
    let mut argc = 4;
    let mut argv = [ptr::null_mut(); 4];
    let mut data = ptr::null_mut();
    napi_ok(sys::napi_get_cb_info(
        env,
        info,
        &mut argc,
        argv.as_mut_ptr(),
        ptr::null_mut(),
        &mut data,
    ))?;
    // SAFETY: `function` set the data pointer to the executor, alive while the function is.
    let executor = &*data.cast::<Executor>();
    let [id, args, timeout_ms, cancellable] = argv;
    let mut id_value = 0;
    if sys::napi_get_value_uint32(env, id, &mut id_value) != sys::Status::napi_ok {
        return Err(SrError::config(
            "execute: the operation id must be a number",
        ));
    }
    let args = Args::from_napi_value(env, args).map_err(|e| match e.status {
        Status::InvalidArg => SrError::config(e.reason),
        _ => napi_failure("reading the arguments", e.reason),
    })?;
    let timeout_ms = optional_number(env, timeout_ms)?;
    let mut cancellable_value = false;
    if sys::napi_get_value_bool(env, cancellable, &mut cancellable_value) != sys::Status::napi_ok {
        return Err(SrError::config("execute: cancellable must be a boolean"));
    }
    match executor.execute(env, id_value, &args, timeout_ms, cancellable_value) {
        Some(operation) => ToNapiValue::to_napi_value(env, operation)
            .map_err(|e| napi_failure("returning the operation", e.reason)),
        None => {
            let mut null = ptr::null_mut();
            napi_ok(sys::napi_get_null(env, &mut null))?;
            Ok(null)
        }
    }
}

/// `undefined` or `null` as `None`, a number as itself.
unsafe fn optional_number(
    env: sys::napi_env,
    value: sys::napi_value,
) -> Result<Option<f64>, SrError> {
    let mut kind = 0;
    napi_ok(sys::napi_typeof(env, value, &mut kind))?;
    if kind == sys::ValueType::napi_undefined || kind == sys::ValueType::napi_null {
        return Ok(None);
    }
    let mut number = 0.0;
    if sys::napi_get_value_double(env, value, &mut number) != sys::Status::napi_ok {
        return Err(SrError::config("timeoutMs must be a number"));
    }
    Ok(Some(number))
}

fn napi_ok(status: sys::napi_status) -> Result<(), SrError> {
    check(status).map_err(|e| napi_failure("napi", e.reason))
}

/// Throws `error` as a JavaScript error whose `code` is its stable code (as napi-rs throws the
/// errors of the `#[napi]` functions).
unsafe fn throw(env: sys::napi_env, error: &SrError) {
    let code = CString::new(error.code().as_str()).unwrap_or_default();
    let message = CString::new(error.message().replace('\0', " "))
        .unwrap_or_else(|_| CString::from(c"invalid message"));
    // Fails only when an exception is pending already, which JavaScript then sees instead.
    sys::napi_throw_error(env, code.as_ptr(), message.as_ptr());
}
