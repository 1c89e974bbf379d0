//! Event subscriptions: one task per known sentinel keeps a pub/sub connection open and forwards
//! parsed events to the monitor.
//!
//! Listening on every sentinel (not one) means a failover is seen even when the sentinel we
//! happened to pick is the one that died; the monitor drops the duplicates. A broken subscription
//! is re-armed with a one-shot backoff, and while it is down the monitor's periodic check still
//! runs: events only ever make things faster.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use crate::config::Address;
use crate::node;
use crate::resp::ConnectOptions;
use crate::sentinel::discovery::RoundSettings;
use crate::sentinel::events::{self, SentinelEvent, BASE_CHANNELS, CHANNELS};

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
pub async fn run(
    address: Address,
    settings: RoundSettings,
    options: ConnectOptions,
    retry: Backoff,
    to_monitor: mpsc::UnboundedSender<Received>,
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
                        if to_monitor.send(Received { from, raw, event }).is_err() {
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
        if to_monitor.is_closed() {
            return;
        }
        let delay = retry.next_delay();
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}
