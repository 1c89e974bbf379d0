//! sr_doctor(): the diagnosis of `sentinel-recovery doctor` as a JSON document, over the core's
//! host-layer doctor (callback and blocking forms, the same guarantees as sr_client_execute()).

use sr::deadline::Unit;
use sr::host::{self, Diagnosis};
use std::ffi::{c_char, c_int, c_void, CString};

use crate::address_map::{map_fn, sr_address_map_cb};
use crate::args::{config_of, out_param, sr_option_t};
use crate::client::required;
use crate::error::sr_error_t;
use crate::ffi::{blocking, guard, report, UserData};
use crate::mailbox::{acquire_mailbox, doctor_into, report_of, sr_mailbox_t};
use crate::operation::{give_operation, sr_operation_t};

/// How sr_doctor() diagnoses. Zeroed (or a NULL pointer) means the defaults. Values other than
/// 0 follow the rule every binding keeps (the core's `doctor::Options::from_host`): out of
/// range, the diagnosis fails with SR_ERR_CONFIG naming the option, nothing sent.
#[repr(C)]
pub struct sr_doctor_options_t {
    /// Sample a PING every 100 ms to each sentinel for this long, to see loop stalls from
    /// outside (`--watch`): more than 0 and at most 3600000; 0: no sampling.
    pub watch_ms: f64,
    /// PINGs per sentinel for the round-trip figures: 1 to 1000; 0: 10.
    pub pings: i32,
    /// The function form of `address_map`, as for sr_client_open_mapped(); NULL for none. Runs on
    /// core threads during the diagnosis only.
    pub address_map: sr_address_map_cb,
    /// Passed back to `address_map` untouched; must stay valid until the diagnosis completed.
    pub address_map_user_data: *mut c_void,
}

/// Completion of sr_doctor(): exactly one call, on a core thread.
///
/// Either `json` is non-NULL and `error` NULL — the report (schema in the README and the core's
/// `doctor::report` docs: `"verdict"`, `"findings"`, `"sentinels"`, ...) — with `exit_code` its
/// verdict (0 healthy, 1 warnings, 2 failures); or `json` is NULL, `exit_code` -1 and `error`
/// says what prevented a diagnosis (an invalid URL or option, unreadable TLS files, SR_ERR_CLOSED
/// when the core runtime stopped). Both are borrowed for the call only: copy what you need.
/// Must not block and must not unwind.
pub type sr_doctor_cb = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        json: *const c_char,
        exit_code: c_int,
        error: *const sr_error_t,
    ),
>;

unsafe fn prepare(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    doctor_options: *const sr_doctor_options_t,
) -> Result<(sr::Config, sr::doctor::Options), sr_error_t> {
    let mut config = config_of(url, options, options_len)?;
    let mut how = sr::doctor::Options::default();
    if let Some(o) = doctor_options.as_ref() {
        // 0 is the zeroed struct's "not set"; everything else goes to the rule.
        let watch = (o.watch_ms != 0.0).then_some(o.watch_ms);
        let pings = (o.pings != 0).then_some(f64::from(o.pings));
        how = sr::doctor::Options::from_host(watch, Unit::Milliseconds, pings)?;
        if let Some(map) = map_fn(o.address_map, o.address_map_user_data) {
            config.address_map.set_function(Some(map));
        }
    }
    Ok((config, how))
}

/// Diagnoses the deployment of a `redis+sentinel://` URL (with `options`, as sr_client_open()
/// reads them) and returns at once; `callback` gets the report later, on a core thread (see
/// sr_doctor_cb). `doctor_options` may be NULL. Everything passed in is copied before this
/// returns, except `address_map_user_data`.
///
/// Returns SR_OK when the diagnosis started: `callback` is then called exactly once. Any other
/// code (SR_ERR_CONFIG for a bad URL or option, SR_ERR_INVALID_ARGUMENT for a NULL callback)
/// means it did not start, `callback` is never called and `*error` (if `error` is not NULL)
/// receives an owned error.
///
/// # Safety
/// `url` and every option string are NULL or NUL-terminated; `options` points to `options_len`
/// options; `doctor_options` is NULL or valid for the call; `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_doctor(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    doctor_options: *const sr_doctor_options_t,
    callback: sr_doctor_cb,
    user_data: *mut c_void,
    error: *mut *mut sr_error_t,
) -> c_int {
    report(error, || {
        let callback = required(callback, "callback")?;
        let (config, how) = prepare(url, options, options_len, doctor_options)?;
        let user_data = UserData::new(user_data);
        let done = Box::new(move |result: sr::Result<Diagnosis>| match result {
            Ok(d) => {
                let (json, exit_code) = report_of(&d);
                callback(user_data.get(), json.as_ptr(), exit_code, std::ptr::null());
            }
            Err(e) => {
                let e = sr_error_t::from(e);
                callback(user_data.get(), std::ptr::null(), -1, &e);
            }
        });
        // No cancel handle in the callback form (sr_doctor_into() gives one).
        drop(host::doctor(config, how, done));
        Ok(())
    })
}

/// sr_doctor() whose completion goes to `mailbox` as `op_id`'s SR_DELIVERY_COMPLETION, as
/// sr_client_execute_into(): `json` (borrowed for the delivery) and `exit_code` (0 healthy,
/// 1 warnings, 2 failures), or `error` saying what prevented a diagnosis. Arguments as for
/// sr_doctor() (`address_map` still runs on core threads, during the diagnosis only).
///
/// `operation` is NULL or where to store a handle that stops the diagnosis (sr_operation_cancel():
/// the completion is then SR_ERR_CLOSED; free it with sr_operation_free()), for a long `watch`
/// above all; it is set to NULL when the diagnosis did not start.
///
/// Returns SR_OK when the diagnosis started: exactly one completion with `op_id` then reaches
/// the mailbox (a diagnosis belongs to no client, so no client's close waits for it: a mailbox
/// closed before the diagnosis ended discards its completion). Any other code means it did not start, no completion comes and `*error` (if
/// `error` is not NULL) receives an owned error: SR_ERR_CONFIG (a bad URL or option),
/// SR_ERR_INVALID_ARGUMENT (NULL mailbox or URL), SR_ERR_CLOSED (the mailbox is closed).
///
/// # Safety
/// As sr_doctor(); `operation` is NULL or writable; `mailbox` is NULL or a mailbox not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_doctor_into(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    doctor_options: *const sr_doctor_options_t,
    operation: *mut *mut sr_operation_t,
    mailbox: *const sr_mailbox_t,
    op_id: u64,
    error: *mut *mut sr_error_t,
) -> c_int {
    if !operation.is_null() {
        *operation = std::ptr::null_mut();
    }
    report(error, || {
        let m = acquire_mailbox(mailbox)?;
        let (config, how) = prepare(url, options, options_len, doctor_options)?;
        give_operation(
            operation,
            host::doctor(config, how, doctor_into(&m, op_id)?),
        );
        Ok(())
    })
}

/// sr_doctor(), blocking the calling thread (and only it) until the report is ready. On SR_OK
/// `*json` receives the report as an owned NUL-terminated string (free it with
/// sr_string_free()) and `*exit_code` (if not NULL) its verdict: 0 healthy, 1 warnings,
/// 2 failures. Otherwise `*json` is NULL and `*error` (if not NULL) receives an owned error.
/// Refused (SR_ERR_CONFIG) inside a callback.
///
/// # Safety
/// As sr_doctor(); `json` is writable; `exit_code` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sr_doctor_blocking(
    url: *const c_char,
    options: *const sr_option_t,
    options_len: usize,
    doctor_options: *const sr_doctor_options_t,
    json: *mut *mut c_char,
    exit_code: *mut c_int,
    error: *mut *mut sr_error_t,
) -> c_int {
    blocking(error, |waiter| {
        let json = out_param(json, "json")?;
        let exit_code = exit_code.as_mut().map(|code| {
            *code = -1;
            code
        });
        let (config, how) = prepare(url, options, options_len, doctor_options)?;
        let d = waiter.wait(|done| host::doctor(config, how, done))?;
        let (report, verdict) = report_of(&d);
        *json = report.into_raw();
        if let Some(code) = exit_code {
            *code = verdict;
        }
        Ok(())
    })
}

/// Frees a string the library returned as owned (sr_doctor_blocking()'s and sr_proxy_stats()'s
/// `json`). NULL is ignored.
///
/// # Safety
/// `s` is NULL or such a string, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sr_string_free(s: *mut c_char) {
    guard(|| {
        if !s.is_null() {
            // The string came from CString::into_raw in sr_doctor_blocking() or sr_proxy_stats().
            drop(CString::from_raw(s));
        }
    })
}
