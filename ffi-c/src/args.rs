//! What the host passes in: strings, command arguments, commands, options and the
//! configuration they make, borrowed for the call and converted (copied where kept).

use std::ffi::{c_char, CStr};

use sr::Config;

use crate::error::sr_error_t;

/// One option for sr_client_open() (and sr_doctor(), sr_proxy_start()): a key of the URL's query
/// string (`command_timeout_ms`, `sentinel_password`, `read_from`, ...; for sr_proxy_start() also
/// the proxy's own keys) and its value, both NUL-terminated UTF-8. Borrowed for the duration of
/// the call only.
#[repr(C)]
pub struct sr_option_t {
    /// The option's name.
    pub key: *const c_char,
    /// Its value, as text (`"250"`, `"true"`, ...).
    pub value: *const c_char,
}

/// One command of a pipeline or transaction: arguments as for sr_client_execute() (`argv_len`
/// may be NULL when every argument is a NUL-terminated string).
#[repr(C)]
pub struct sr_command_t {
    /// Number of arguments (> 0), the command name first.
    pub argc: usize,
    /// The arguments.
    pub argv: *const *const c_char,
    /// Their lengths, or NULL.
    pub argv_len: *const usize,
}

/// A NUL-terminated UTF-8 string of the host (`what` names it in errors).
///
/// # Safety
/// `p` is NULL or NUL-terminated, live for `'a`.
pub(crate) unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, sr_error_t> {
    if p.is_null() {
        return Err(sr_error_t::invalid(&format!("{what} is NULL")));
    }
    CStr::from_ptr(p)
        .to_str()
        .map_err(|_| sr_error_t::not_utf8(what))
}

/// A command's `argc` arguments (binary safe with `argv_len`, else NUL-terminated).
///
/// # Safety
/// `argv` points to `argc` pointers, each NULL (only with a length of 0) or valid for its length
/// (or NUL-terminated when `argv_len` is NULL); `argv_len` is NULL or points to `argc` lengths.
pub(crate) unsafe fn arguments<'a>(
    argc: usize,
    argv: *const *const c_char,
    argv_len: *const usize,
) -> Result<Vec<&'a [u8]>, sr_error_t> {
    if argc == 0 || argv.is_null() {
        return Err(sr_error_t::invalid(
            "a command needs at least one argument (argc > 0, argv not NULL)",
        ));
    }
    let ptrs = std::slice::from_raw_parts(argv, argc);
    let lens = (!argv_len.is_null()).then(|| std::slice::from_raw_parts(argv_len, argc));
    let mut out = Vec::with_capacity(argc);
    for (i, &p) in ptrs.iter().enumerate() {
        let arg: &[u8] = match (p.is_null(), lens) {
            (true, Some(l)) if l[i] == 0 => &[],
            (true, _) => {
                return Err(sr_error_t::invalid(&format!("argument #{i} is NULL")));
            }
            (false, Some(l)) => std::slice::from_raw_parts(p.cast::<u8>(), l[i]),
            (false, None) => CStr::from_ptr(p).to_bytes(),
        };
        out.push(arg);
    }
    Ok(out)
}

/// `count` names as [`arguments`] reads them; none when `count` is 0.
///
/// # Safety
/// As [`arguments`] when `count` > 0.
pub(crate) unsafe fn names<'a>(
    count: usize,
    names: *const *const c_char,
    lens: *const usize,
) -> Result<Vec<&'a [u8]>, sr_error_t> {
    if count == 0 {
        return Ok(Vec::new());
    }
    arguments(count, names, lens)
}

/// Every command's arguments, borrowed from the caller for the call.
///
/// # Safety
/// `commands` is NULL (only when `n` is 0) or points to `n` valid commands.
pub(crate) unsafe fn command_list<'a>(
    commands: *const sr_command_t,
    n: usize,
) -> Result<Vec<Vec<&'a [u8]>>, sr_error_t> {
    if commands.is_null() && n > 0 {
        return Err(sr_error_t::invalid("commands is NULL but n > 0"));
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    std::slice::from_raw_parts(commands, n)
        .iter()
        .enumerate()
        .map(|(i, c)| {
            arguments(c.argc, c.argv, c.argv_len)
                .map_err(|e| sr_error_t::invalid(&format!("command #{i}: {}", e.message())))
        })
        .collect()
}

/// The configuration of `url` and `options` (each option through `Config::set`), as
/// sr_client_open() and sr_doctor() read them.
///
/// # Safety
/// `url` and every option string are NULL or NUL-terminated; `options` points to `options_len`
/// options (or is NULL when 0).
pub(crate) unsafe fn config_of(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
) -> Result<Config, sr_error_t> {
    let pairs = option_pairs(options, options_len)?;
    Ok(sr::host::config_from_url(text(url, "the URL")?, &pairs)?)
}

/// The `key`/`value` texts of `options_len` options, borrowed from the caller for the call.
///
/// # Safety
/// Every option string is NULL or NUL-terminated; `options` points to `options_len` options (or
/// is NULL when 0).
pub(crate) unsafe fn option_pairs<'a>(
    options: *const sr_option_t,
    options_len: usize,
) -> Result<Vec<(&'a str, &'a str)>, sr_error_t> {
    if options.is_null() && options_len > 0 {
        return Err(sr_error_t::invalid("options is NULL but options_len > 0"));
    }
    let mut pairs = Vec::with_capacity(options_len);
    if options_len > 0 {
        for (i, o) in std::slice::from_raw_parts(options, options_len)
            .iter()
            .enumerate()
        {
            let key = text(o.key, &format!("option #{i} key"))?;
            let value = text(o.value, &format!("option '{key}' value"))?;
            pairs.push((key, value));
        }
    }
    Ok(pairs)
}

/// An out-parameter the call must write (`what` names it in errors), cleared to NULL first so
/// that it is NULL whenever the call fails.
///
/// # Safety
/// `out` is NULL or writable, for `'a`.
pub(crate) unsafe fn out_param<'a, T>(
    out: *mut *mut T,
    what: &str,
) -> Result<&'a mut *mut T, sr_error_t> {
    match out.as_mut() {
        Some(out) => {
            *out = std::ptr::null_mut();
            Ok(out)
        }
        None => Err(sr_error_t::invalid(&format!(
            "the {what} out-parameter is NULL"
        ))),
    }
}

/// The text every binding sends for a floating-point command argument (the policy the core
/// keeps once, its `arguments` module): the shortest text that reads back as the same value,
/// laid out as JavaScript writes numbers (`2`, `0.1`, `1e+21`, `1e-7`, `-0`), infinities as
/// `inf` / `-inf`; `single` reads `value` as a 32-bit float (its own shortest text: `0.1`, not
/// `0.10000000149011612`). For hosts with typed numbers (.NET); C callers format their own.
///
/// Writes the text and a NUL into `buf` (every text fits in 32 bytes) and its length, without
/// the NUL, into `*len`. Returns SR_OK; SR_ERR_CONFIG for NaN, which has no text Redis reads as
/// a number, with an owned `*error` (if not NULL) naming argument `index` (0 is the command's
/// name); SR_ERR_INVALID_ARGUMENT for a NULL `buf` or `len`, or `cap` below 32.
///
/// # Safety
/// `buf` is NULL or writable for `cap` bytes; `len` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_argument_float_text(
    value: f64,
    single: bool,
    index: usize,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
    error: *mut *mut sr_error_t,
) -> std::ffi::c_int {
    crate::ffi::report(error, || {
        if buf.is_null() || len.is_null() || cap < 32 {
            return Err(sr_error_t::invalid(
                "sr_argument_float_text needs a buffer of at least 32 bytes and a length",
            ));
        }
        let text = if single {
            sr::arguments::float32_text(value as f32, index)?
        } else {
            sr::arguments::float_text(value, index)?
        };
        let bytes = text.as_bytes();
        if bytes.len() >= cap {
            return Err(sr_error_t::invalid(
                "the float's text is longer than the buffer",
            ));
        }
        // SAFETY: the text and its NUL fit in `cap` writable bytes (checked above).
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        *buf.add(bytes.len()) = 0;
        *len = bytes.len();
        Ok(())
    })
}
