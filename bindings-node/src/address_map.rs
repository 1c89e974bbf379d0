//! `addressMap`'s function form in Node: a JavaScript function `(address) => address | null`,
//! like ioredis' `natMap`.
//!
//! JavaScript runs on its own thread only, and the core asks the map on a core thread and needs
//! the answer before it connects: the core thread hands the address to the JavaScript thread
//! (a weak threadsafe function: it never keeps the process alive) and waits for the answer, at
//! most [`ANSWER_WAIT`]. A JavaScript thread busy for longer, or gone, means the reported address
//! is used and a warning is logged. `index.js` wraps the user's function so that it gets and
//! returns JSON text and never throws across (an exception comes back as `{"error": ...}`).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use sentinel_recovery::config::AddressMapFn;
use sentinel_recovery::{Address, Error as SrError};

/// How long a core thread waits for the JavaScript thread's answer.
pub const ANSWER_WAIT: Duration = Duration::from_millis(1000);

type MapTsfn = ThreadsafeFunction<String, Option<String>, String, Status, false, true>;

/// The core's form of the wrapped JavaScript function (`index.js`'s `mapWrapper`).
pub fn map_fn(function: Function<String, Option<String>>) -> Result<Arc<AddressMapFn>, SrError> {
    let tsfn: MapTsfn = function
        .build_threadsafe_function::<String>()
        .weak::<true>()
        .build()
        .map_err(|e| {
            SrError::new(
                sentinel_recovery::ErrorCode::Internal,
                format!("internal error: creating the addressMap function: {e}"),
            )
        })?;
    Ok(Arc::new(move |reported: &Address| ask(&tsfn, reported)))
}

fn ask(tsfn: &MapTsfn, reported: &Address) -> Option<Address> {
    let arg = serde_json::json!({"host": reported.host, "port": reported.port}).to_string();
    let (tx, rx) = mpsc::sync_channel::<napi::Result<Option<String>>>(1);
    let status = tsfn.call_with_return_value(
        arg,
        ThreadsafeFunctionCallMode::NonBlocking,
        move |answer, _env| {
            let _ = tx.send(answer);
            Ok(())
        },
    );
    if status != Status::Ok {
        tracing::warn!(address = %reported, ?status,
            "addressMap function could not be called; using the reported address");
        return None;
    }
    let answer = match rx.recv_timeout(ANSWER_WAIT) {
        Ok(Ok(answer)) => answer?,
        Ok(Err(e)) => {
            tracing::warn!(address = %reported, error = %e,
                "addressMap function failed; using the reported address");
            return None;
        }
        Err(_) => {
            tracing::warn!(address = %reported, wait_ms = ANSWER_WAIT.as_millis() as u64,
                "addressMap function did not answer in time (JavaScript thread busy); using the reported address");
            return None;
        }
    };
    let parsed: serde_json::Value = serde_json::from_str(&answer).ok()?;
    if let Some(error) = parsed.get("error") {
        tracing::warn!(address = %reported, error = %error,
            "addressMap function threw; using the reported address");
        return None;
    }
    let host = parsed.get("host").and_then(|h| h.as_str());
    let port = parsed
        .get("port")
        .and_then(|p| p.as_u64())
        .and_then(|p| u16::try_from(p).ok());
    match (host, port) {
        (Some(host), Some(port)) => Some(Address::new(host, port)),
        _ => {
            tracing::warn!(address = %reported, answer = %answer,
                "addressMap function returned no host and port; using the reported address");
            None
        }
    }
}
