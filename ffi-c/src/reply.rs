//! Replies: the opaque `sr_reply_t` (an `sr::Value`), its accessors, and the completion that
//! hands a reply to a host's `sr_reply_cb`.

use std::ffi::{c_int, c_void};

use sr::Value;

use crate::codes::{SR_ERR_INVALID_ARGUMENT, SR_ERR_WRONG_TYPE};
use crate::error::sr_error_t;
use crate::ffi::{
    free_box, guard, guard_or, to_boxed_mut_ptr, to_const_ptr, try_ref, Castable, OwnedBox,
    UserData, SR_OK,
};

/// A server reply (one RESP2/RESP3 value, possibly an aggregate of further replies).
///
/// Opaque. Owned when returned by sr_client_execute_blocking() or sr_reply_clone(): free it with
/// sr_reply_free(). Borrowed when passed to a completion callback (valid only during that call)
/// or returned by an element accessor (valid as long as the reply it came from). Never free a
/// borrowed reply.
pub struct sr_reply_t {
    _private: [u8; 0],
}

/// sr_reply_type() for NULL.
pub const SR_REPLY_INVALID: c_int = 100;
/// Null (RESP3 null, RESP2 null bulk or null array).
pub const SR_REPLY_NIL: c_int = 0;
/// An integer: read it with sr_reply_integer().
pub const SR_REPLY_INTEGER: c_int = 1;
/// A RESP3 double: sr_reply_double().
pub const SR_REPLY_DOUBLE: c_int = 2;
/// A RESP3 boolean: sr_reply_boolean().
pub const SR_REPLY_BOOLEAN: c_int = 3;
/// A RESP3 big number, as decimal text: sr_reply_bytes().
pub const SR_REPLY_BIG_NUMBER: c_int = 4;
/// A bulk string (binary safe): sr_reply_bytes().
pub const SR_REPLY_BULK: c_int = 5;
/// A simple status string such as `OK`: sr_reply_bytes().
pub const SR_REPLY_SIMPLE: c_int = 6;
/// A RESP3 verbatim string: sr_reply_bytes() for the text, sr_reply_verbatim_format() for the
/// format (`txt`, `mkd`).
pub const SR_REPLY_VERBATIM: c_int = 7;
/// An array: sr_reply_len(), sr_reply_element().
pub const SR_REPLY_ARRAY: c_int = 8;
/// A RESP3 map: sr_reply_len() entries, sr_reply_map_entry().
pub const SR_REPLY_MAP: c_int = 9;
/// A RESP3 set: sr_reply_len(), sr_reply_element().
pub const SR_REPLY_SET: c_int = 10;
/// A RESP3 push message: sr_reply_len(), sr_reply_element().
pub const SR_REPLY_PUSH: c_int = 11;
/// An error reply nested inside an aggregate (a top-level error reply is an sr_error_t with
/// SR_ERR_SERVER instead): sr_reply_bytes() gives its text.
pub const SR_REPLY_ERROR: c_int = 12;

impl Castable for sr_reply_t {
    type Ownership = OwnedBox;
    type RustType = Value;
}

/// Completion of sr_client_execute(): exactly one call per accepted command, on a core thread
/// (`sr-worker-N`), also when the client is closed meanwhile (then with SR_ERR_CLOSED).
///
/// Either `reply` is non-NULL and `error` NULL (success; the reply may be SR_REPLY_NIL), or
/// `reply` is NULL and `error` non-NULL. Both are borrowed for the duration of the call only:
/// copy what you need (or sr_reply_clone() / sr_error_clone()) and return quickly. The callback
/// must not block, must not call sr_client_execute_blocking() or sr_client_wait_ready() (they
/// fail there with SR_ERR_CONFIG), and must not unwind (no C++ exception may leave it).
/// It may call sr_client_execute(), sr_client_close() and sr_client_free().
pub type sr_reply_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        reply: *const sr_reply_t,
        error: *const sr_error_t,
    ),
>;

/// What `sr_reply_cb` holds when it is not NULL.
pub(crate) type ReplyFn = unsafe extern "C" fn(*mut c_void, *const sr_reply_t, *const sr_error_t);

/// A reply lent to the host, valid while `value` lives.
pub(crate) fn as_reply(value: &Value) -> *const sr_reply_t {
    to_const_ptr::<sr_reply_t>(value)
}

/// A reply handed to the host, owned by it (freed with sr_reply_free()).
pub(crate) fn into_owned_reply(value: Value) -> *mut sr_reply_t {
    to_boxed_mut_ptr::<sr_reply_t>(value)
}

unsafe fn value<'a>(reply: *const sr_reply_t) -> Option<&'a Value> {
    try_ref(reply)
}

/// The completion that hands a reply (or error) to a host's `sr_reply_cb`, with its
/// `user_data` passed back untouched: the one way every reply-returning call of the ABI ends.
pub(crate) fn reply_to(cb: ReplyFn, user_data: *mut c_void) -> sr::host::Done<Value> {
    let user_data = UserData::new(user_data);
    Box::new(move |result: sr::Result<Value>| deliver(cb, user_data.get(), result))
}

fn deliver(cb: ReplyFn, user_data: *mut c_void, result: sr::Result<Value>) {
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

/// Runs `read` on the reply and stores what it gives in `out`; NULL reply or out →
/// SR_ERR_INVALID_ARGUMENT, `None` from `read` → SR_ERR_WRONG_TYPE.
unsafe fn read_into<T>(
    reply: *const sr_reply_t,
    out: *mut T,
    read: impl FnOnce(&Value) -> Option<T>,
) -> c_int {
    let Some(v) = value(reply) else {
        return SR_ERR_INVALID_ARGUMENT;
    };
    if out.is_null() {
        return SR_ERR_INVALID_ARGUMENT;
    }
    match read(v) {
        Some(x) => {
            *out = x;
            SR_OK
        }
        None => SR_ERR_WRONG_TYPE,
    }
}

fn elements(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(items) | Value::Set(items) | Value::Push(items) => Some(items),
        _ => None,
    }
}

/// The reply's type, one of `SR_REPLY_*`; SR_REPLY_INVALID for NULL.
///
/// # Safety
/// `reply` is NULL or a live reply from this library.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_type(reply: *const sr_reply_t) -> c_int {
    guard_or(
        || SR_REPLY_INVALID,
        || match value(reply) {
            None => SR_REPLY_INVALID,
            Some(Value::Nil) => SR_REPLY_NIL,
            Some(Value::Int(_)) => SR_REPLY_INTEGER,
            Some(Value::Double(_)) => SR_REPLY_DOUBLE,
            Some(Value::Boolean(_)) => SR_REPLY_BOOLEAN,
            Some(Value::BigNumber(_)) => SR_REPLY_BIG_NUMBER,
            Some(Value::Bulk(_)) => SR_REPLY_BULK,
            Some(Value::Simple(_)) => SR_REPLY_SIMPLE,
            Some(Value::Verbatim { .. }) => SR_REPLY_VERBATIM,
            Some(Value::Array(_)) => SR_REPLY_ARRAY,
            Some(Value::Map(_)) => SR_REPLY_MAP,
            Some(Value::Set(_)) => SR_REPLY_SET,
            Some(Value::Push(_)) => SR_REPLY_PUSH,
            Some(Value::Error(_)) => SR_REPLY_ERROR,
        },
    )
}

/// Stores an SR_REPLY_INTEGER's value in `*out`. Returns SR_OK, SR_ERR_WRONG_TYPE for another
/// type, SR_ERR_INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `reply` is NULL or a live reply; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_integer(reply: *const sr_reply_t, out: *mut i64) -> c_int {
    guard(|| {
        read_into(reply, out, |v| match v {
            Value::Int(i) => Some(*i),
            _ => None,
        })
    })
}

/// Stores an SR_REPLY_DOUBLE's value in `*out` (return codes as sr_reply_integer()).
///
/// # Safety
/// `reply` is NULL or a live reply; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_double(reply: *const sr_reply_t, out: *mut f64) -> c_int {
    guard(|| {
        read_into(reply, out, |v| match v {
            Value::Double(d) => Some(*d),
            _ => None,
        })
    })
}

/// Stores an SR_REPLY_BOOLEAN's value in `*out` (return codes as sr_reply_integer()).
///
/// # Safety
/// `reply` is NULL or a live reply; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_boolean(reply: *const sr_reply_t, out: *mut bool) -> c_int {
    guard(|| {
        read_into(reply, out, |v| match v {
            Value::Boolean(b) => Some(*b),
            _ => None,
        })
    })
}

/// The bytes of an SR_REPLY_BULK, SR_REPLY_SIMPLE, SR_REPLY_VERBATIM (its text),
/// SR_REPLY_BIG_NUMBER (decimal digits) or SR_REPLY_ERROR (its text): `*data` points into the
/// reply (borrowed, valid as long as the reply, NOT NUL-terminated, binary safe), `*len` is the
/// length. Return codes as sr_reply_integer().
///
/// # Safety
/// `reply` is NULL or a live reply; `data` and `len` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_bytes(
    reply: *const sr_reply_t,
    data: *mut *const u8,
    len: *mut usize,
) -> c_int {
    guard(|| {
        if len.is_null() {
            return SR_ERR_INVALID_ARGUMENT;
        }
        let code = read_into(reply, data, |v| {
            let bytes: &[u8] = match v {
                Value::Bulk(b) | Value::BigNumber(b) => b,
                Value::Verbatim { text, .. } => text,
                Value::Simple(s) | Value::Error(s) => s.as_bytes(),
                _ => return None,
            };
            *len = bytes.len();
            Some(bytes.as_ptr())
        });
        code
    })
}

/// The format tag of an SR_REPLY_VERBATIM (`txt`, `mkd`), borrowed like sr_reply_bytes().
///
/// # Safety
/// `reply` is NULL or a live reply; `data` and `len` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_verbatim_format(
    reply: *const sr_reply_t,
    data: *mut *const u8,
    len: *mut usize,
) -> c_int {
    guard(|| {
        if len.is_null() {
            return SR_ERR_INVALID_ARGUMENT;
        }
        read_into(reply, data, |v| match v {
            Value::Verbatim { format, .. } => {
                *len = format.len();
                Some(format.as_ptr())
            }
            _ => None,
        })
    })
}

/// The number of elements of an SR_REPLY_ARRAY, SR_REPLY_SET or SR_REPLY_PUSH, or of entries
/// (key/value pairs) of an SR_REPLY_MAP, in `*out`. Return codes as sr_reply_integer().
///
/// # Safety
/// `reply` is NULL or a live reply; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_len(reply: *const sr_reply_t, out: *mut usize) -> c_int {
    guard(|| {
        read_into(reply, out, |v| match v {
            Value::Map(pairs) => Some(pairs.len()),
            v => elements(v).map(|e| e.len()),
        })
    })
}

/// Element `index` of an SR_REPLY_ARRAY, SR_REPLY_SET or SR_REPLY_PUSH in `*out`: borrowed from
/// `reply`, valid as long as it; never free it. SR_ERR_INVALID_ARGUMENT when `index` is out of
/// range.
///
/// # Safety
/// `reply` is NULL or a live reply; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_element(
    reply: *const sr_reply_t,
    index: usize,
    out: *mut *const sr_reply_t,
) -> c_int {
    guard(|| {
        let Some(v) = value(reply) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        if out.is_null() {
            return SR_ERR_INVALID_ARGUMENT;
        }
        match elements(v) {
            None => SR_ERR_WRONG_TYPE,
            Some(items) => match items.get(index) {
                None => SR_ERR_INVALID_ARGUMENT,
                Some(item) => {
                    *out = as_reply(item);
                    SR_OK
                }
            },
        }
    })
}

/// Entry `index` of an SR_REPLY_MAP: its key in `*key` and value in `*value` (either may be
/// NULL if not wanted), borrowed from `reply` like sr_reply_element(). Entries keep the order
/// the server sent. SR_ERR_INVALID_ARGUMENT when `index` is out of range.
///
/// # Safety
/// `reply` is NULL or a live reply; `key` and `value` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_map_entry(
    reply: *const sr_reply_t,
    index: usize,
    key: *mut *const sr_reply_t,
    value_out: *mut *const sr_reply_t,
) -> c_int {
    guard(|| {
        let Some(v) = value(reply) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        let Value::Map(pairs) = v else {
            return SR_ERR_WRONG_TYPE;
        };
        let Some((k, val)) = pairs.get(index) else {
            return SR_ERR_INVALID_ARGUMENT;
        };
        if !key.is_null() {
            *key = as_reply(k);
        }
        if !value_out.is_null() {
            *value_out = as_reply(val);
        }
        SR_OK
    })
}

/// An owned deep copy of `reply` (e.g. to keep a reply passed to a callback, or an element
/// beyond its parent); free it with sr_reply_free(). NULL for NULL.
///
/// # Safety
/// `reply` is NULL or a live reply.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_clone(reply: *const sr_reply_t) -> *mut sr_reply_t {
    guard(|| match value(reply) {
        Some(v) => into_owned_reply(v.clone()),
        None => std::ptr::null_mut(),
    })
}

/// Frees an owned reply (from sr_client_execute_blocking() or sr_reply_clone()) and every
/// element borrowed from it. NULL is ignored. Never pass a borrowed reply.
///
/// # Safety
/// `reply` is NULL or an owned reply, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_reply_free(reply: *mut sr_reply_t) {
    guard(|| drop(free_box(reply)))
}

#[cfg(test)]
mod tests {
    use super::{
        into_owned_reply, sr_reply_bytes, sr_reply_clone, sr_reply_double, sr_reply_element,
        sr_reply_free, sr_reply_integer, sr_reply_len, sr_reply_map_entry, sr_reply_type, Value,
        SR_REPLY_ARRAY, SR_REPLY_MAP,
    };
    use crate::codes::{SR_ERR_INVALID_ARGUMENT, SR_ERR_WRONG_TYPE};
    use crate::ffi::SR_OK;

    #[test]
    fn accessors_read_every_type_and_refuse_others() {
        let v = Value::Map(vec![(
            Value::Simple("k".into()),
            Value::Array(vec![Value::Int(7), Value::Double(1.5), Value::Nil]),
        )]);
        let r = into_owned_reply(v);
        unsafe {
            assert_eq!(sr_reply_type(r), SR_REPLY_MAP);
            let mut n = 0usize;
            assert_eq!(sr_reply_len(r, &mut n), SR_OK);
            assert_eq!(n, 1);
            let (mut k, mut val) = (std::ptr::null(), std::ptr::null());
            assert_eq!(sr_reply_map_entry(r, 0, &mut k, &mut val), SR_OK);
            assert_eq!(
                sr_reply_map_entry(r, 1, &mut k, &mut val),
                SR_ERR_INVALID_ARGUMENT
            );
            let (mut p, mut len) = (std::ptr::null(), 0usize);
            assert_eq!(sr_reply_bytes(k, &mut p, &mut len), SR_OK);
            assert_eq!(std::slice::from_raw_parts(p, len), b"k");
            let mut e = std::ptr::null();
            assert_eq!(sr_reply_element(val, 0, &mut e), SR_OK);
            let mut i = 0i64;
            assert_eq!(sr_reply_integer(e, &mut i), SR_OK);
            assert_eq!(i, 7);
            assert_eq!(sr_reply_double(e, &mut 0.0), SR_ERR_WRONG_TYPE);
            assert_eq!(sr_reply_element(val, 3, &mut e), SR_ERR_INVALID_ARGUMENT);
            assert_eq!(
                sr_reply_integer(std::ptr::null(), &mut i),
                SR_ERR_INVALID_ARGUMENT
            );
            let copy = sr_reply_clone(val);
            sr_reply_free(r);
            assert_eq!(sr_reply_type(copy), SR_REPLY_ARRAY);
            sr_reply_free(copy);
            sr_reply_free(std::ptr::null_mut());
        }
    }
}
