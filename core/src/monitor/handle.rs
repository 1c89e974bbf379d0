//! The [`Monitor`] handle that clients share: it starts the monitor task and reads what the
//! task publishes.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::actor;
use super::command::Command;
use super::status::{Publishing, Status};
use crate::config::Config;
use crate::error::Result;
use crate::sync::Locked;
use crate::types::Address;
use crate::types::{Event, Side};
use crate::Topology;

/// A running monitor, shared by every client of the same sentinels, service and credentials.
pub(crate) struct Monitor {
    pid: u32,
    resolver: crate::dns::Resolver,
    data_options: crate::resp::ConnectOptions,
    status: watch::Receiver<Status>,
    events: broadcast::Sender<Event>,
    publishing: Arc<Publishing>,
    commands: mpsc::UnboundedSender<Command>,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

/// Events buffered per subscriber before a slow one starts to miss some.
const EVENT_BUFFER: usize = 4096;

impl Monitor {
    /// Starts the monitor task on the core runtime and returns at once; the first round starts
    /// immediately in the background.
    pub fn start(config: Config) -> Result<Arc<Monitor>> {
        let handle = crate::runtime::handle()?;
        // Built here, on the caller's thread: resolv.conf, the hosts file and the TLS files are
        // read with blocking file I/O that must not happen on a core thread.
        let resolver = crate::dns::Resolver::for_config(&config)?;
        let settings = crate::sentinel::discovery::RoundSettings {
            service: config.service.clone(),
            sentinel_connect: crate::node::connect_options(&config, Side::Sentinel)?,
            data_connect: crate::node::connect_options(&config, Side::Data)?,
            deadline: config.sentinel_timeout(),
            resolver: resolver.clone(),
            sentinel_side: crate::sentinel::links::sentinel_side(&config),
            address_map: config.address_map.clone(),
        };
        let data_options = settings.data_connect.clone();
        let initial = Status {
            topology: Arc::new(Topology {
                service: config.service.clone(),
                primary: None,
                replicas: Vec::new(),
                sentinels: crate::sentinel::sentinels::SentinelList::new(&config.sentinels).infos(),
                epoch: 0,
                healthy: false,
            }),
            last_error: None,
            majority_lost: false,
            rounds: 0,
            fenced: Arc::new(Vec::new()),
        };
        let (status_tx, status_rx) = watch::channel(initial);
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let publishing = Arc::new(Publishing::default());
        let actor = actor::Actor::new(
            config,
            settings,
            status_tx,
            events.clone(),
            publishing.clone(),
            cancel.clone(),
            tracker.clone(),
        );
        let _guard = handle.enter();
        tracker.spawn(actor.run(commands_rx));
        tracker.close();
        Ok(Arc::new(Monitor {
            pid: crate::sync::current_pid(),
            resolver,
            data_options,
            status: status_rx,
            events,
            publishing,
            commands,
            cancel,
            tracker,
        }))
    }

    /// The resolver the monitor uses, shared with its clients' data connections.
    pub fn resolver(&self) -> &crate::dns::Resolver {
        &self.resolver
    }

    /// How data nodes are connected to (credentials, TLS, protocol), as the monitor verifies them.
    pub fn data_options(&self) -> &crate::resp::ConnectOptions {
        &self.data_options
    }

    /// The latest published status; never waits for network work.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// `f` of the latest published status, without copying it; `f` must not wait.
    pub fn with_status<R>(&self, f: impl FnOnce(&Status) -> R) -> R {
        f(&self.status.borrow())
    }

    /// Since when writes to `address` have been fenced (a failover demotes it), if they are.
    pub fn fenced_since(&self, address: &Address) -> Option<tokio::time::Instant> {
        self.status.borrow().fenced_since(address)
    }

    /// A receiver that sees every status the monitor publishes from now on.
    pub fn watch_status(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// A receiver of all events published from now on: every change is either in the status
    /// already published or among the events this receiver gets.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        let _guard = self.publishing.lock.locked();
        self.events.subscribe()
    }

    /// [`Monitor::subscribe`], with the primary of the status published at that moment: a
    /// primary this receiver will hear no `primary_changed` for.
    pub fn subscribe_with_primary(&self) -> (broadcast::Receiver<Event>, Option<Address>) {
        let _guard = self.publishing.lock.locked();
        let primary = self.status.borrow().topology.primary.clone();
        (self.events.subscribe(), primary)
    }

    /// Asks for a discovery round; several requests before it starts are served by one round.
    pub fn refresh(&self, reason: &'static str) {
        let _ = self.commands.send(Command::Refresh(reason));
    }

    /// Reports that the node picked from the status of round `round` failed. Many commands
    /// failing on one dead primary cause one round, not one each, and never bypass the retry
    /// backoff once the monitor knows it has no healthy primary.
    pub fn report(&self, reason: &'static str, round: u64) {
        let _ = self.commands.send(Command::Report(reason, round));
    }

    /// The counter bumped after every published status (see [`Publishing::epoch`]).
    pub fn routing_epoch(&self) -> Arc<AtomicU64> {
        self.publishing.epoch.clone()
    }

    /// Whether the monitor belongs to this process and still runs (a forked child must not use
    /// its parent's monitors: their tasks do not exist in the child).
    pub fn is_usable(&self) -> bool {
        self.pid == crate::sync::current_pid() && !self.cancel.is_cancelled()
    }

    /// Whether this monitor was started by another process (the parent of a fork): its tasks
    /// and connections do not run here.
    pub fn is_inherited(&self) -> bool {
        self.pid != crate::sync::current_pid()
    }

    /// Stops every task of the monitor and waits until they have ended.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        if self.pid == crate::sync::current_pid() {
            self.tracker.wait().await;
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
