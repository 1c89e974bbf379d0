//! A fencing RESP proxy: any Redis client, unchanged, pointed at a local address as if at one
//! standalone Redis, gets the core's failover behaviour.
//!
//! One [`Client`] (one shared monitor) serves every session. Each client connection is a session
//! with its own upstream connection to the verified primary (or, for a [`Route::Read`](crate::Route::Read) listener,
//! to a node reads may use), opened at its first request, so MULTI/EXEC, WATCH, blocking
//! commands, pub/sub, SELECT, HELLO and the client's own AUTH keep their per-connection meaning.
//! Requests pass through in order and pipelined; replies are forwarded byte for byte.
//!
//! What it promises:
//! - From `failover_started` no request of any session is written to the primary being
//!   demoted: requests wait (up to the hold bound, then `FENCED`, not sent).
//! - A write's reply read from a primary being demoted is never passed on as a success: the
//!   client gets `UNCERTAIN` (it may or may not have been applied).
//! - At `primary_changed` every session moves to the verified new primary with its state
//!   replayed (AUTH/HELLO, SELECT, CLIENT SETNAME/SETINFO, READONLY, subscriptions). A MULTI
//!   open at the move ends with EXECABORT; a WATCH across it makes EXEC return null; a session
//!   with CLIENT TRACKING or MONITOR on is closed.
//! - Nothing that may have reached a server is ever sent again.
//! - With `wait_replicas=N` in the URL, writes are followed by `WAIT` and a write's reply
//!   passes only when N replicas confirmed it, else `NOTREPLICATED`.
//!
//! What it cannot promise: a command already on the wire to a primary that is being demoted
//! cannot be recalled (its reply says `UNCERTAIN`); pub/sub is at-most-once across a move.
//!
//! The proxy runs on the core's runtime; nothing here blocks a host thread except
//! [`Proxy::start`]'s socket bind (no network wait).

mod command;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod fuzzing;
mod listener;
mod options;
mod replies;
mod request;
mod session;
mod shared;
mod state;
mod stats;
mod upstream;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::types::EventKind;
use shared::{Limits, ProxyState};

pub use options::{ListenAddress, ProxyOptions, PROXY_KEYS};
pub use stats::ProxyStats;

/// A running proxy. Dropping it without [`Proxy::close`] closes it too, without waiting for
/// replies in flight.
pub struct Proxy {
    shared: Arc<ProxyState>,
    address: ListenAddress,
    tracker: TaskTracker,
    /// Ends every task at once (after the grace of [`Proxy::close`], or at drop).
    kill: CancellationToken,
    /// The client was opened by [`Proxy::start_url`] and is closed with the proxy.
    owns_client: bool,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("address", &self.address)
            .field("client", &self.shared.client)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Opens a client for `url`, waits for its verified primary as [`Client::connect`] does, and
    /// starts a proxy in front of it. The client is closed with the proxy.
    pub async fn start_url(url: &str, options: ProxyOptions) -> Result<Proxy> {
        let client = Client::connect(url).await?;
        match Proxy::start(client.clone(), options) {
            Ok(mut proxy) => {
                proxy.owns_client = true;
                Ok(proxy)
            }
            Err(e) => {
                client.close().await;
                Err(e)
            }
        }
    }

    /// Opens a client from `config` (returning at once, as [`Client::open`] does: sessions wait
    /// for the first verified primary within the hold bound) and starts a proxy in front of
    /// it. The client is closed with the proxy. For hosts that must not wait (the bindings).
    pub fn open(config: crate::Config, options: ProxyOptions) -> Result<Proxy> {
        let client = Client::open(config)?;
        match Proxy::start(client.clone(), options) {
            Ok(mut proxy) => {
                proxy.owns_client = true;
                Ok(proxy)
            }
            Err(e) => {
                // Closing waits for nothing the caller's thread would block on.
                if let Ok(handle) = crate::runtime::handle() {
                    handle.spawn(async move { client.close().await });
                }
                Err(e)
            }
        }
    }

    /// Starts a proxy in front of `client` and returns once it accepts connections. The
    /// listener and every session run on the core's runtime. Fails with a `config` error that
    /// names the option for a non-loopback address without `allow_remote`, lent credentials
    /// on anything but loopback or a Unix socket, or an address that cannot be bound.
    pub fn start(client: Client, options: ProxyOptions) -> Result<Proxy> {
        check(&options)?;
        let config = client.config();
        let limits = Limits {
            hold: options.hold.unwrap_or_else(|| config.command_timeout()),
            max_clients: options.max_clients,
            idle_timeout: options.idle_timeout,
            max_request_bytes: options.max_request_bytes,
            route: options.route,
        };
        let (resolver, connect) = client.data_path()?;
        let lent = if options.lend_credentials {
            config.auth.clone()
        } else {
            None
        };
        let durability = (config.wait_replicas > 0).then(|| {
            (
                config.wait_replicas,
                Duration::from_millis(config.wait_timeout_ms),
            )
        });
        let shared = Arc::new(ProxyState {
            epoch: client.routing_epoch()?,
            client,
            options: limits,
            counters: Arc::default(),
            changes: tokio::sync::watch::channel(0).0,
            resolver,
            tls: connect.tls,
            connect_timeout: connect.connect_timeout,
            lent,
            durability,
            table: OnceLock::new(),
            closing: CancellationToken::new(),
        });
        let handle = crate::runtime::handle()?;
        let _entered = handle.enter();
        let (bound, address) = listener::bind(&options)?;
        let tracker = TaskTracker::new();
        let kill = CancellationToken::new();
        tracker.spawn(follow_events(shared.clone(), kill.clone()));
        tracker.spawn(read_write_table(shared.clone(), kill.clone()));
        tracker.spawn(listener::accept(
            bound,
            shared.clone(),
            tracker.clone(),
            kill.clone(),
        ));
        Ok(Proxy {
            shared,
            address,
            tracker,
            kill,
            owns_client: false,
        })
    }

    /// Where the proxy listens (with the port it was given for `:0`).
    pub fn address(&self) -> &ListenAddress {
        &self.address
    }

    /// The client whose monitor every session follows.
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// The proxy's counters now.
    pub fn stats(&self) -> ProxyStats {
        self.shared.counters.snapshot()
    }

    /// Stops accepting, lets replies in flight reach their clients for up to `grace`, then
    /// closes every session (and the client, if the proxy opened it). Idempotent.
    pub async fn close(&self, grace: Duration) {
        self.shared.closing.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            self.kill.cancel();
            self.tracker.wait().await;
        }
        self.kill.cancel();
        if let ListenAddress::Unix(path) = &self.address {
            let path = path.clone();
            // File I/O never runs on a core thread: the blocking pool takes it.
            if let Ok(handle) = crate::runtime::handle() {
                let _ = handle
                    .spawn_blocking(move || std::fs::remove_file(path))
                    .await;
            }
        }
        if self.owns_client {
            self.shared.client.close().await;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.closing.cancel();
        self.kill.cancel();
        if let ListenAddress::Unix(path) = &self.address {
            let path = path.clone();
            match crate::runtime::handle() {
                Ok(handle) if crate::runtime::on_core_thread() => {
                    handle.spawn_blocking(move || std::fs::remove_file(path));
                }
                _ => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
}

/// The checks that need no socket: what may be exposed where.
fn check(options: &ProxyOptions) -> Result<()> {
    if let ListenAddress::Tcp(addr) = &options.listen {
        if !addr.ip().is_loopback() {
            if !options.allow_remote {
                return Err(Error::config(format!(
                    "proxy listen address {addr} is not loopback: set allow_remote to expose the primary beyond this host"
                )));
            }
            if options.lend_credentials {
                return Err(Error::config(format!(
                    "lend_credentials needs a Unix socket or a loopback address, not {addr}"
                )));
            }
        }
    }
    if options.max_clients == 0 {
        return Err(Error::config("proxy max_clients must be at least 1"));
    }
    if options.max_request_bytes < 1024 {
        return Err(Error::config(
            "proxy max_request_bytes must be at least 1024",
        ));
    }
    Ok(())
}

/// Bumps the sessions' change signal at every event of the client, and counts primary changes.
async fn follow_events(shared: Arc<ProxyState>, kill: CancellationToken) {
    let Ok(mut events) = shared.client.events() else {
        return;
    };
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = kill.cancelled() => return,
            _ = shared.closing.cancelled() => return,
        };
        let Some(event) = event else { return };
        if matches!(event.kind, EventKind::PrimaryChanged { .. }) {
            stats::Counters::add(&shared.counters.primary_changes, 1);
        }
        shared.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Reads the server's command table once, through the client (see `Client::write_table`).
async fn read_write_table(shared: Arc<ProxyState>, kill: CancellationToken) {
    let read = async {
        let table = shared.client.write_table(shared.options.hold).await?;
        let _ = shared.table.set(table);
        Ok::<(), Error>(())
    };
    tokio::select! {
        result = read => if let Err(e) = result {
            tracing::warn!(
                error = %e,
                "proxy: the command table could not be read; commands not known to read only count as writes"
            );
        },
        _ = kill.cancelled() => {}
        _ = shared.closing.cancelled() => {}
    }
}
