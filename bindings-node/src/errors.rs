//! Errors as JavaScript sees them.
//!
//! Errors thrown synchronously carry the stable code in their `code` property (the napi status of
//! the thrown error is the code), which `index.js` maps to its `SentinelRecoveryError` subclass.
//! Errors that settle a promise are made by JavaScript's `makeError(code, message, serverCode)`
//! ([`make_error`]), so both kinds are the same classes. A failure of napi itself, or a panic, is
//! the code `internal`.

use std::panic::AssertUnwindSafe;
use std::ptr;

use napi::bindgen_prelude::ToNapiValue;
use napi::{sys, Status};
use sentinel_recovery::{Error as SrError, ErrorCode};

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
pub(crate) type JsResult<T> = napi::Result<T, Code>;

/// A core error as a JavaScript error with `code` set to the stable code.
pub(crate) fn js_error(e: &SrError) -> napi::Error<Code> {
    napi::Error::new(Code(e.code().as_str()), e.message().to_string())
}

/// A failure of napi itself (not of the core), reported as `internal`.
pub(crate) fn napi_failure(what: &str, e: impl std::fmt::Display) -> SrError {
    SrError::new(
        ErrorCode::Internal,
        format!("internal error (a bug in sentinel-recovery): {what}: {e}"),
    )
}

/// Runs `f` with a panic turned into an `internal` error: no panic crosses into JavaScript.
pub(crate) fn guarded<T>(f: impl FnOnce() -> JsResult<T>) -> JsResult<T> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(js_error(&SrError::internal(&*panic))))
}

/// `napi_status` to a `Result`.
pub(crate) fn check(status: sys::napi_status) -> napi::Result<()> {
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
pub(crate) unsafe fn make_error(
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
