//! Error objects and the static texts of error codes.

use std::ffi::{c_char, c_int, CStr, CString};

use crate::codes::{code_texts_of, SR_ERR_CONFIG, SR_ERR_INTERNAL, SR_ERR_INVALID_ARGUMENT};
use crate::ffi::{
    free_box, guard, guard_or, to_boxed_mut_ptr, try_ref, Castable, ErrorObject, OwnedBox, SR_OK,
};

/// An error: a code (`SR_ERR_*`), a message and, for server errors, the server's error word.
///
/// Opaque. Owned when a function hands it out through an `sr_error_t **error` out-parameter: free
/// it with sr_error_free(). Borrowed when passed to a callback: valid only during that call (use
/// sr_error_clone() to keep it). Messages never contain passwords.
pub struct sr_error_t {
    code: c_int,
    message: CString,
    server_code: Option<CString>,
}

/// A C string from Rust text; NUL bytes (possible in server error replies) become U+FFFD.
pub(crate) fn c_string(text: &str) -> CString {
    CString::new(text.replace('\0', "\u{FFFD}")).unwrap_or_default()
}

impl Castable for sr_error_t {
    type Ownership = OwnedBox;
    type RustType = sr_error_t;
}

impl ErrorObject for sr_error_t {
    fn code(&self) -> c_int {
        self.code
    }

    fn panicked() -> sr_error_t {
        sr_error_t::panic()
    }
}

impl sr_error_t {
    pub(crate) fn new(code: c_int, message: &str) -> sr_error_t {
        sr_error_t {
            code,
            message: c_string(message),
            server_code: None,
        }
    }

    pub(crate) fn invalid(message: &str) -> sr_error_t {
        sr_error_t::new(SR_ERR_INVALID_ARGUMENT, message)
    }

    pub(crate) fn panic() -> sr_error_t {
        sr_error_t::new(
            SR_ERR_INTERNAL,
            "internal error (a bug in sentinel-recovery): a panic was caught at the C boundary",
        )
    }

    /// A UTF-8 text is needed where only valid UTF-8 may go (`what` names it).
    pub(crate) fn not_utf8(what: &str) -> sr_error_t {
        sr_error_t::new(SR_ERR_CONFIG, &format!("{what} is not valid UTF-8"))
    }

    pub(crate) fn message(&self) -> std::borrow::Cow<'_, str> {
        self.message.to_string_lossy()
    }
}

impl From<&sr::Error> for sr_error_t {
    fn from(e: &sr::Error) -> sr_error_t {
        sr_error_t {
            code: e.code().as_i32(),
            message: c_string(e.message()),
            server_code: e.server_code().map(c_string),
        }
    }
}

impl From<sr::Error> for sr_error_t {
    fn from(e: sr::Error) -> sr_error_t {
        sr_error_t::from(&e)
    }
}

impl Clone for sr_error_t {
    fn clone(&self) -> sr_error_t {
        sr_error_t {
            code: self.code,
            message: self.message.clone(),
            server_code: self.server_code.clone(),
        }
    }
}

/// The error's code (`SR_ERR_*`), or SR_ERR_INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `error` is NULL or a live error from this library.
#[no_mangle]
pub unsafe extern "C" fn sr_error_get_code(error: *const sr_error_t) -> c_int {
    guard(|| match try_ref(error) {
        Some(e) => e.code,
        None => SR_ERR_INVALID_ARGUMENT,
    })
}

/// The error's message, NUL-terminated, borrowed from `error` (valid until it is freed, or for a
/// borrowed error until its callback returns). NULL for NULL.
///
/// # Safety
/// `error` is NULL or a live error from this library.
#[no_mangle]
pub unsafe extern "C" fn sr_error_get_message(error: *const sr_error_t) -> *const c_char {
    guard(|| match try_ref(error) {
        Some(e) => e.message.as_ptr(),
        None => std::ptr::null(),
    })
}

/// For SR_ERR_SERVER (and server-reported SR_ERR_AUTH): the first word of the server's error
/// reply (`"ERR"`, `"WRONGTYPE"`, `"READONLY"`, ...), borrowed like sr_error_get_message().
/// NULL when there is none, or for NULL.
///
/// # Safety
/// `error` is NULL or a live error from this library.
#[no_mangle]
pub unsafe extern "C" fn sr_error_get_server_code(error: *const sr_error_t) -> *const c_char {
    guard(
        || match try_ref(error).and_then(|e| e.server_code.as_ref()) {
            Some(c) => c.as_ptr(),
            None => std::ptr::null(),
        },
    )
}

/// An owned copy of `error` (e.g. to keep an error passed to a callback); free it with
/// sr_error_free(). NULL for NULL.
///
/// # Safety
/// `error` is NULL or a live error from this library.
#[no_mangle]
pub unsafe extern "C" fn sr_error_clone(error: *const sr_error_t) -> *mut sr_error_t {
    guard(|| match try_ref(error) {
        Some(e) => to_boxed_mut_ptr::<sr_error_t>(e.clone()),
        None => std::ptr::null_mut(),
    })
}

/// Frees an owned error. NULL is ignored. Never pass an error borrowed in a callback.
///
/// # Safety
/// `error` is NULL or an owned error from this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_error_free(error: *mut sr_error_t) {
    guard(|| drop(free_box(error)))
}

fn code_texts(code: c_int) -> (&'static CStr, &'static CStr) {
    match code {
        SR_OK => (c"ok", c"success"),
        code => code_texts_of(code).unwrap_or((c"unknown", c"unknown error code")),
    }
}

/// A static, NUL-terminated description of an error code (`SR_OK` or `SR_ERR_*`); never NULL,
/// never freed. Unknown codes give "unknown error code".
#[no_mangle]
pub extern "C" fn sr_error_message(code: c_int) -> *const c_char {
    guard_or(
        || c"internal error".as_ptr(),
        || code_texts(code).1.as_ptr(),
    )
}

/// The stable snake_case name of an error code, shared by every language binding (`"config"`,
/// `"no_healthy_primary"`, ..., `"ok"` for SR_OK, `"unknown"` otherwise); static, never NULL.
#[no_mangle]
pub extern "C" fn sr_error_code_name(code: c_int) -> *const c_char {
    guard_or(|| c"unknown".as_ptr(), || code_texts(code).0.as_ptr())
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::{sr_error_code_name, sr_error_t};
    use crate::codes::SR_ERR_SERVER;

    #[test]
    fn names_match_the_core() {
        for code in sr::ErrorCode::ALL {
            let name = unsafe { CStr::from_ptr(sr_error_code_name(code.as_i32())) };
            assert_eq!(name.to_str().unwrap(), code.as_str());
        }
    }

    #[test]
    fn nul_bytes_do_not_truncate_or_fail() {
        let e = sr_error_t::from(sr::Error::server("ERR a\0b"));
        assert_eq!(e.message.to_str().unwrap(), "ERR a\u{FFFD}b");
        assert_eq!(e.code, SR_ERR_SERVER);
    }
}
