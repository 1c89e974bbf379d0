//! The sentinel event feed: one task per sentinel keeps a pub/sub connection open and forwards
//! parsed events to every monitor that listens to that sentinel.
//!
//! Listening on every sentinel (not one) means a failover is seen even when the sentinel we
//! happened to pick is the one that died; the monitor drops the duplicates. A broken subscription
//! is re-armed with a one-shot backoff, and while it is down the monitor's periodic check still
//! runs: events only ever make things faster.
//!
//! Sentinels publish the events of every service they monitor on the same channels, so monitors
//! with the same sentinel-side settings (the [`LinkKey`]) share one subscription per sentinel: a
//! process following 50 services through 3 sentinels holds 3 subscriptions, not 150. Each
//! monitor keeps only the events of its own service. The subscription ends when the last
//! monitor's [`Membership`] is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use crate::node;
use crate::resp::ConnectOptions;
use crate::sentinel::discovery::RoundSettings;
use crate::sentinel::events::{self, SentinelEvent, BASE_CHANNELS, CHANNELS};
use crate::sentinel::links::LinkKey;
use crate::sync::{Locked, PerProcess};
use crate::types::Address;

/// Where a monitor receives the events of a sentinel.
pub type Sink = mpsc::UnboundedSender<Received>;

type Members = Arc<Mutex<Vec<(u64, Sink)>>>;

/// One sentinel's subscription, while some monitor listens.
struct Hub {
    members: Members,
    cancel: CancellationToken,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A monitor's place on a sentinel's subscription; dropping it stops the deliveries to that
/// monitor (and the subscription, when it was the last).
pub struct Membership {
    hub: Arc<Hub>,
    id: u64,
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.hub.members.locked().retain(|(id, _)| *id != self.id);
    }
}

static HUBS: PerProcess<HashMap<LinkKey, Weak<Hub>>> = PerProcess::new();
static NEXT_MEMBER: AtomicU64 = AtomicU64::new(0);

/// Delivers the events of the sentinel `key.0` to `sink`, on the subscription shared by every
/// monitor with the same key (started here, on the core runtime, when there is none).
pub fn join(
    key: LinkKey,
    settings: RoundSettings,
    options: ConnectOptions,
    retry: Backoff,
    sink: Sink,
) -> Membership {
    let id = NEXT_MEMBER.fetch_add(1, Ordering::Relaxed);
    let hub = HUBS.with(|map| {
        map.retain(|_, hub| hub.strong_count() > 0);
        match map.get(&key).and_then(Weak::upgrade) {
            Some(hub) => hub,
            None => {
                let hub = Arc::new(Hub {
                    members: Members::default(),
                    cancel: CancellationToken::new(),
                });
                tokio::spawn(run(
                    key.0.clone(),
                    settings,
                    options,
                    retry,
                    hub.members.clone(),
                    hub.cancel.clone(),
                ));
                map.insert(key, Arc::downgrade(&hub));
                hub
            }
        }
    });
    hub.members.locked().push((id, sink));
    Membership { hub, id }
}

/// Hands `received` to every member; members that went away are dropped. Returns false when
/// none is left.
fn deliver(members: &Members, received: Received) -> bool {
    let mut members = members.locked();
    members.retain(|(_, sink)| {
        sink.send(Received {
            from: received.from.clone(),
            raw: received.raw.clone(),
            event: received.event.clone(),
        })
        .is_ok()
    });
    !members.is_empty()
}

/// An event and the raw text it came from (the raw text is the de-duplication key).
#[derive(Debug)]
pub struct Received {
    /// The sentinel it came from.
    pub from: Address,
    /// Channel and payload, as published.
    pub raw: String,
    /// The parsed event.
    pub event: SentinelEvent,
}

/// Runs until `cancel` fires: subscribe to `address`, forward events, re-subscribe on loss.
async fn run(
    address: Address,
    settings: RoundSettings,
    options: ConnectOptions,
    retry: Backoff,
    members: Members,
    cancel: CancellationToken,
) {
    let mut retry = retry;
    let mut channels = CHANNELS;
    loop {
        let session = async {
            let (conn, _) = node::connect(&settings.resolver, &address, &options).await?;
            let mut sub = match conn.subscribe(channels, options.connect_timeout).await {
                Err(e) if e.server_code() == Some("NOPERM") && channels == CHANNELS => {
                    // An ACL written for the older channel list: keep following failovers,
                    // without fencing writes at promotion.
                    tracing::warn!(sentinel = %address, error = %e,
                        "sentinel ACL refuses the promotion channels; writes are not fenced while a replica is promoted");
                    channels = BASE_CHANNELS;
                    let (conn, _) = node::connect(&settings.resolver, &address, &options).await?;
                    conn.subscribe(channels, options.connect_timeout).await?
                }
                other => other?,
            };
            tracing::debug!(sentinel = %address, "subscribed to sentinel events");
            retry.reset();
            while let Some((channel, payload)) = sub.next().await {
                match events::parse(&channel, &payload) {
                    Ok(mut event) => {
                        event.map_addresses(&settings.address_map);
                        let raw = format!(
                            "{} {}",
                            String::from_utf8_lossy(&channel),
                            String::from_utf8_lossy(&payload)
                        );
                        let from = address.clone();
                        if !deliver(&members, Received { from, raw, event }) {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(sentinel = %address, error = %e, "ignoring sentinel event")
                    }
                }
            }
            Ok::<(), crate::Error>(())
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            result = session => {
                if let Err(e) = result {
                    tracing::debug!(sentinel = %address, error = %e, "event subscription failed");
                }
            }
        }
        if cancel.is_cancelled() {
            return;
        }
        let delay = retry.next_delay();
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}
