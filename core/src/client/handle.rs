//! The [`Client`] handle itself: what it holds, opening and closing, the topology and the event
//! streams. Commands, routes, transactions and subscriptions are methods added by the sibling
//! modules, which depend on this one and never the other way round.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::durable;
use super::nodes::Nodes;
use crate::config::Config;
use crate::error::{Error, ErrorCode, Result};
use crate::monitor::{registry, unix_ms, Event, EventKind, Monitor, Topology};
use crate::sync::Locked;

/// Commands cross to core tasks as owned bytes.
pub(super) fn owned<A: AsRef<[u8]>>(args: &[A]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_ref().to_vec()).collect()
}

/// Events of one client's own buffered per stream before a slow consumer misses some.
const LOCAL_EVENT_BUFFER: usize = 1024;

/// A client of one Sentinel-managed service. Cheap to clone; clones share one handle, and
/// [`Client::close`] on any clone closes all of them.
#[derive(Clone)]
pub struct Client {
    pub(super) inner: Arc<Inner>,
}

/// What every clone of one [`Client`] shares.
pub(super) struct Inner {
    pub(super) config: Config,
    pub(super) monitor: Mutex<Option<Arc<Monitor>>>,
    pub(super) nodes: Nodes,
    /// Commands waiting for a usable primary or replica, bounded by `config.queue_size`.
    pub(super) waiting: AtomicUsize,
    /// Round-robin position over replicas for reads.
    pub(super) next_replica: AtomicUsize,
    /// `wait_replicas`: what follows each write, if anything.
    pub(super) durability: Option<durable::Durability>,
    /// The server's command table, read for `wait_replicas` (which commands write).
    pub(super) write_tables: durable::Tables,
    pub(super) closed: CancellationToken,
    /// Events of this client alone (its subscriptions' `subscription_lost`/`_restored`), merged
    /// into its event streams with the monitor's.
    pub(super) local_events: broadcast::Sender<Event>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.inner.config.redacted_url())
            .field("closed", &self.inner.closed.is_cancelled())
            .finish()
    }
}

impl Client {
    /// Opens a client and returns at once, without waiting for discovery; use
    /// [`Client::ready`] to wait for the first answer. Clients with the same sentinels, service and
    /// credentials share one monitor.
    pub fn open(config: Config) -> Result<Client> {
        config.validate()?;
        let monitor = registry::acquire(&config)?;
        // db and client-side timeouts are not part of the shared monitor; apply them here.
        let options = crate::resp::ConnectOptions {
            db: config.db,
            ..monitor.data_options().clone()
        };
        let nodes = Nodes::new(options, monitor.resolver().clone());
        let durability = durable::Durability::of(&config);
        Ok(Client {
            inner: Arc::new(Inner {
                config,
                monitor: Mutex::new(Some(monitor)),
                nodes,
                waiting: AtomicUsize::new(0),
                next_replica: AtomicUsize::new(0),
                durability,
                write_tables: durable::Tables::default(),
                closed: CancellationToken::new(),
                local_events: broadcast::channel(LOCAL_EVENT_BUFFER).0,
            }),
        })
    }

    /// Parses `url` and opens a client, returning at once.
    pub fn open_url(url: &str) -> Result<Client> {
        Client::open(Config::from_url(url)?)
    }

    /// Opens a client and waits, as [`Client::ready`] does, for a verified primary. If none is
    /// found in time, the client is closed and the error says which case happened
    /// (`sentinels_unreachable`, `service_unknown`, `no_healthy_primary`, `auth`, `tls`).
    pub async fn connect(url: &str) -> Result<Client> {
        Client::connect_with(Config::from_url(url)?).await
    }

    /// [`Client::connect`] with a configuration built in code.
    pub async fn connect_with(config: Config) -> Result<Client> {
        let client = Client::open(config)?;
        match client.ready().await {
            Ok(_) => Ok(client),
            Err(e) => {
                client.close().await;
                Err(e)
            }
        }
    }

    /// The configuration this client was opened with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The monitor this client follows. In a child forked after the client was opened (gunicorn
    /// `--preload`, Celery prefork), the inherited monitor and connections belong to tasks that
    /// do not exist here: the client takes a monitor of this process and forgets the inherited
    /// connections without touching their sockets, which the parent still uses.
    pub(super) fn monitor(&self) -> Result<Arc<Monitor>> {
        let mut guard = self.inner.monitor.locked();
        let current = guard.as_ref().ok_or_else(Error::closed)?;
        if !current.is_inherited() {
            return Ok(current.clone());
        }
        let fresh = registry::acquire(&self.inner.config)?;
        if let Some(inherited) = guard.replace(fresh.clone()) {
            // Dropping it would cancel tokens whose waiters live in the parent's runtime.
            std::mem::forget(inherited);
        }
        self.inner.nodes.forget_inherited();
        tracing::debug!("client inherited across fork: using a monitor of this process");
        Ok(fresh)
    }

    /// Waits for a verified primary the way a command does: up to `command_timeout_ms`, through
    /// a failover in progress or sentinels that are briefly unreachable. Returns the topology
    /// once a round has verified the primary. Fails at once on what waiting cannot fix
    /// (refused credentials, failed TLS, a service no reachable sentinel knows, bad options),
    /// and at the deadline with the last round's error.
    pub async fn ready(&self) -> Result<Topology> {
        let timeout = self.inner.config.command_timeout();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut status = self.monitor()?.watch_status();
        let closed = self.inner.closed.clone();
        loop {
            let last_error = {
                let s = status.borrow_and_update();
                if s.rounds > 0 && s.topology.healthy {
                    return Ok((*s.topology).clone());
                }
                if let Some(e) = s.last_error.as_ref().filter(|e| {
                    matches!(
                        e.code(),
                        ErrorCode::Auth
                            | ErrorCode::Tls
                            | ErrorCode::Config
                            | ErrorCode::ServiceUnknown
                    )
                }) {
                    return Err(e.clone());
                }
                s.last_error.clone()
            };
            tokio::select! {
                _ = closed.cancelled() => return Err(Error::closed()),
                changed = status.changed() => if changed.is_err() { return Err(Error::closed()) },
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(last_error.unwrap_or_else(|| Error::new(
                        ErrorCode::NoHealthyPrimary,
                        format!("no verified primary within {} ms", timeout.as_millis()),
                    )));
                }
            }
        }
    }

    /// The current topology snapshot. Never waits on network work.
    pub fn topology(&self) -> Result<Topology> {
        Ok((*self.monitor()?.status().topology).clone())
    }

    /// Events from now on, until the client is closed. Each call gives an independent stream.
    pub fn events(&self) -> Result<EventStream> {
        Ok(self.event_stream(None, self.monitor()?.subscribe()))
    }

    /// [`Client::events`] from the client's first discovery on: when the monitor already knows
    /// a primary (it is shared with another client, or its first round finished before this
    /// call), the stream begins with a `primary_changed` from none to that primary, the event a
    /// stream made before the round received. A stream made right after [`Client::open`]
    /// therefore always begins with the first discovery, however the threads were scheduled.
    pub fn events_from_start(&self) -> Result<EventStream> {
        let (receiver, primary) = self.monitor()?.subscribe_with_primary();
        let first = primary.map(|new| Event {
            kind: EventKind::PrimaryChanged { old: None, new },
            service: self.inner.config.service.clone(),
            at: unix_ms(),
        });
        Ok(self.event_stream(first, receiver))
    }

    fn event_stream(
        &self,
        first: Option<Event>,
        receiver: broadcast::Receiver<Event>,
    ) -> EventStream {
        EventStream {
            first,
            receiver,
            local: self.inner.local_events.subscribe(),
            closed: self.inner.closed.clone(),
        }
    }

    /// Asks the monitor for a discovery round now (coalesced with any already waiting).
    pub fn refresh(&self) -> Result<()> {
        self.monitor()?.refresh("requested by client");
        Ok(())
    }

    /// Commands now waiting for a usable node (bounded by the `queue_size` option).
    pub fn queued(&self) -> usize {
        self.inner
            .waiting
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// Closes the client. Event streams end, and no event is delivered after this returns. If
    /// this was the last client of its monitor, the monitor's tasks are stopped and awaited, even
    /// in the middle of a discovery round. Idempotent.
    pub async fn close(&self) {
        self.inner.closed.cancel();
        let monitor = self.inner.monitor.locked().take();
        match monitor {
            Some(inherited) if inherited.is_inherited() => {
                self.inner.nodes.forget_inherited();
                std::mem::forget(inherited);
            }
            monitor => {
                self.inner.nodes.close_all();
                if let Some(last) = monitor.and_then(registry::release) {
                    last.shutdown().await;
                }
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.closed.cancel();
        let monitor = self
            .monitor
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match monitor {
            Some(inherited) if inherited.is_inherited() => {
                self.nodes.forget_inherited();
                std::mem::forget(inherited);
            }
            monitor => {
                self.nodes.close_all();
                // Dropping the last reference cancels the monitor's tasks; they end on their own.
                drop(monitor.and_then(registry::release));
            }
        }
    }
}

/// A stream of [`Event`]s for one client; ends when the client is closed.
pub struct EventStream {
    /// An event the stream gives before what it receives (see [`Client::events_from_start`]).
    first: Option<Event>,
    receiver: broadcast::Receiver<Event>,
    /// This client's own events (its subscriptions').
    local: broadcast::Receiver<Event>,
    closed: CancellationToken,
}

impl EventStream {
    /// The next event, or `None` once the client is closed. A consumer so slow that more than
    /// 4096 events queue up loses the oldest ones, with a warning in the log.
    pub async fn next(&mut self) -> Option<Event> {
        if let Some(first) = self.first.take() {
            return (!self.closed.is_cancelled()).then_some(first);
        }
        loop {
            let received = tokio::select! {
                biased;
                _ = self.closed.cancelled() => return None,
                r = self.receiver.recv() => r,
                r = self.local.recv() => r,
            };
            match received {
                Ok(event) if !self.closed.is_cancelled() => return Some(event),
                Ok(_) => return None,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "event consumer too slow; oldest events dropped");
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next event if one is waiting, without waiting.
    pub fn try_next(&mut self) -> Option<Event> {
        loop {
            if self.closed.is_cancelled() {
                return None;
            }
            if let Some(first) = self.first.take() {
                return Some(first);
            }
            let received = match self.receiver.try_recv() {
                Err(broadcast::error::TryRecvError::Empty) => self.local.try_recv(),
                other => other,
            };
            match received {
                Ok(event) => return Some(event),
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "event consumer too slow; oldest events dropped");
                }
                Err(_) => return None,
            }
        }
    }
}
