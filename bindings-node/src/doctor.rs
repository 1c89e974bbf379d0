//! `doctor(url, options)`: the host layer's diagnosis for `index.js`'s `doctor()`.
//!
//! The result reaches JavaScript through a threadsafe function made from the callback (it keeps
//! the process alive until the diagnosis completes, like a pending command), as one JSON text:
//! `{"ok":true,"json":...,"text":...,"status":...,"exitCode":...}` or
//! `{"ok":false,"code":...,"message":...}`.

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;
use sentinel_recovery::host::{self, Diagnosis};

use crate::address_map;
use crate::args::pairs;
use crate::errors::{guarded, js_error, napi_failure, Code};
use crate::operation::NativeOperation;

type DoneTsfn = ThreadsafeFunction<String, (), String, Status, false, false>;

fn outcome(result: sentinel_recovery::Result<Diagnosis>) -> String {
    match result {
        Ok(d) => serde_json::json!({
            "ok": true,
            "json": d.json,
            "text": d.text,
            "status": d.status,
            "exitCode": d.exit_code,
        }),
        Err(e) => serde_json::json!({
            "ok": false,
            "code": e.code().as_str(),
            "message": e.message(),
        }),
    }
    .to_string()
}

/// Starts a diagnosis of `url` with `options` (the flat `[key, value, ...]` list of `open`);
/// `watch_ms` samples PINGs for that long, `pings` sets the PINGs per sentinel, `address_map` is
/// the wrapped function form of that option. `done` is called once with the outcome's JSON
/// text. Throws (with the error's code) only when the diagnosis could not start.
#[napi(catch_unwind)]
pub fn doctor(
    url: String,
    options: Vec<String>,
    watch_ms: Option<f64>,
    pings: Option<f64>,
    address_map: Option<Function<String, Option<String>>>,
    done: Function<String, ()>,
) -> napi::Result<NativeOperation, Code> {
    guarded(|| {
        let start = || -> sentinel_recovery::Result<NativeOperation> {
            let mut config = host::config_from_url(&url, &pairs(&options)?)?;
            if let Some(map) = address_map {
                config
                    .address_map
                    .set_function(Some(address_map::map_fn(map)?));
            }
            let how = sentinel_recovery::doctor::Options::from_host(
                watch_ms,
                sentinel_recovery::deadline::Unit::Milliseconds,
                pings,
            )?;
            let tsfn: DoneTsfn = done
                .build_threadsafe_function::<String>()
                .build()
                .map_err(|e| napi_failure("creating the doctor callback", e))?;
            let operation = host::doctor(
                config,
                how,
                Box::new(move |result| {
                    // On a core thread; the threadsafe function is released when dropped here.
                    tsfn.call(outcome(result), ThreadsafeFunctionCallMode::NonBlocking);
                }),
            );
            Ok(NativeOperation { operation })
        };
        start().map_err(|e| js_error(&e))
    })
}
