//! Replies as JavaScript values, made with raw napi calls on the JavaScript thread.
//!
//! A reply becomes null, a number (BigInt beyond 2^53), a boolean, a BigInt, a Buffer (or a
//! string when the client decodes), a string for status replies, an Array, a Map, or an error
//! object made by JavaScript's `makeError`. A reply that can't be converted still settles its
//! promise, as an `internal` error.

use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::ToNapiValue;
use napi::sys;
use sentinel_recovery::{Error as SrError, Value};

use crate::errors::{check, make_error, napi_failure};

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
pub(crate) unsafe fn many_value(
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
