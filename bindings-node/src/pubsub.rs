//! Pub/sub: `NativeSubscriber`, the core's host-layer subscription under `index.js`'s
//! `Subscription`.
//!
//! Messages are pulled one at a time (`next`) and completed through the client's queue like any
//! other operation, so they reach JavaScript in the same batches, and the core's bounded buffer
//! (with its dropped counter) stays the only place messages wait while nobody reads them.

use std::sync::{Arc, Mutex};

use napi_derive::napi;
use sentinel_recovery::host::{Done, Handle, Subscriber};
use sentinel_recovery::{Error as SrError, Message, Value};

use crate::args::Args;
use crate::batch::Item;
use crate::client::NativeClient;
use crate::completions::Shared;
use crate::operation::NativeOperation;

/// A message as the reply `[channel, payload, pattern | null]`, or `null` once the subscription
/// ended.
fn message_value(message: Option<Message>) -> Value {
    match message {
        None => Value::Nil,
        Some(m) => Value::Array(vec![
            Value::Bulk(m.channel),
            Value::Bulk(m.payload),
            m.pattern.map_or(Value::Nil, Value::Bulk),
        ]),
    }
}

/// The subscription itself, once the node confirmed it, and whether JavaScript closed it.
#[derive(Default)]
struct Slot {
    subscriber: Option<Subscriber>,
    closed: bool,
}

/// A pub/sub subscription of a client. Not meant to be used directly: see `index.js`.
#[napi]
pub struct NativeSubscriber {
    handle: Handle,
    shared: Arc<Shared>,
    slot: Arc<Mutex<Slot>>,
}

/// A subscription of `client`, not subscribed yet (see [`NativeSubscriber::open`]).
#[napi(catch_unwind)]
pub fn subscriber(client: &NativeClient) -> NativeSubscriber {
    NativeSubscriber {
        handle: client.handle.clone(),
        shared: client.shared.clone(),
        slot: Arc::default(),
    }
}

impl NativeSubscriber {
    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The subscription, or `closed` (closed by JavaScript, or not confirmed).
    fn subscriber(&self) -> sentinel_recovery::Result<Subscriber> {
        self.slot().subscriber.clone().ok_or_else(SrError::closed)
    }

    fn fail(&self, id: u32, e: SrError) {
        self.shared.complete(Item::Completion(id, Err(e)));
    }

    /// Operation `id`'s completion, its value converted by `convert`.
    fn done<T: Send + 'static>(&self, id: u32, convert: fn(T) -> Value) -> Done<T> {
        // None only once the client was collected: nothing can be delivered then.
        let token = self.shared.mailbox.completion().ok();
        Box::new(move |result| {
            if let Some(token) = token {
                let _ = token.complete(Item::Completion(id, result.map(convert)));
            }
        })
    }
}

#[napi]
impl NativeSubscriber {
    /// Subscribes to `channels` and `patterns` and completes `id` with `null` once the node
    /// confirmed them. `buffer`: messages that may wait (default 4096). The returned operation
    /// cancels the wait (an AbortSignal); `close` then closes a subscription confirmed anyway.
    #[napi(catch_unwind)]
    pub fn open(
        &self,
        id: u32,
        #[napi(ts_arg_type = "Array<string | Uint8Array>")] channels: Args,
        #[napi(ts_arg_type = "Array<string | Uint8Array>")] patterns: Args,
        buffer: Option<u32>,
    ) -> NativeOperation {
        let done = self.done(id, |()| Value::Nil);
        let slot = self.slot.clone();
        let opened: Done<Subscriber> = Box::new(move |result| {
            let result = result.and_then(|s| {
                let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                if slot.closed {
                    s.close();
                    return Err(SrError::closed());
                }
                slot.subscriber = Some(s);
                Ok(())
            });
            done(result)
        });
        let operation = self.handle.subscribe(
            &channels.to_vecs(),
            &patterns.to_vecs(),
            buffer.map(|b| b as usize),
            opened,
        );
        NativeOperation { operation }
    }

    /// Completes `id` with the next message `[channel, payload, pattern | null]`, or `null` once
    /// the subscription ended.
    #[napi(catch_unwind)]
    pub fn next(&self, id: u32) {
        match self.subscriber() {
            Ok(s) => {
                s.next(self.done(id, message_value));
            }
            Err(_) => self.shared.complete(Item::Completion(id, Ok(Value::Nil))),
        }
    }

    /// Starts `change` (`subscribe`, `psubscribe`, `unsubscribe`, `punsubscribe`) of `names`
    /// and completes `id` with `null` once the node confirmed it.
    #[napi(catch_unwind)]
    pub fn change(
        &self,
        id: u32,
        change: String,
        #[napi(ts_arg_type = "Array<string | Uint8Array>")] list: Args,
    ) {
        let s = match self.subscriber() {
            Ok(s) => s,
            Err(e) => return self.fail(id, e),
        };
        let list = list.to_vecs();
        let done = self.done(id, |()| Value::Nil);
        match change.as_str() {
            "subscribe" => drop(s.subscribe(&list, done)),
            "psubscribe" => drop(s.psubscribe(&list, done)),
            "unsubscribe" => drop(s.unsubscribe(&list, done)),
            "punsubscribe" => drop(s.punsubscribe(&list, done)),
            other => self.fail(
                id,
                SrError::config(format!("unknown subscription change {other:?}")),
            ),
        }
    }

    /// Ends the subscription: pending and later `next` calls complete with `null`. Idempotent.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        let subscriber = {
            let mut slot = self.slot();
            slot.closed = true;
            slot.subscriber.clone()
        };
        if let Some(s) = subscriber {
            s.close();
        }
    }

    /// Messages dropped because the buffer was full (the newest are dropped).
    #[napi(getter, catch_unwind)]
    pub fn dropped(&self) -> i64 {
        self.slot()
            .subscriber
            .as_ref()
            .map_or(0, |s| s.dropped() as i64)
    }

    /// The channels subscribed now (UTF-8, lossy; none once closed).
    #[napi(catch_unwind)]
    pub fn channels(&self) -> Vec<String> {
        self.subscriber()
            .map(|s| s.channels())
            .unwrap_or_default()
            .iter()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect()
    }

    /// The patterns subscribed now.
    #[napi(catch_unwind)]
    pub fn patterns(&self) -> Vec<String> {
        self.subscriber()
            .map(|s| s.patterns())
            .unwrap_or_default()
            .iter()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect()
    }
}
