//! The [`Handle`]: a client as a binding holds it, with its operations in callback and blocking
//! form, and what it owns until its close (operations in flight, event handlers, pub/sub
//! subscriptions).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::doctor::config_from_url;
use super::events::{EventHandler, EventRegistration};
use super::guard::guarded;
use super::hints::{self, ApiNames};
use super::inflight::{Done, Operation, Registry, Started};
use super::subscriptions::Subscriber;
use super::wait;
use crate::client::{Client, Deadline, EventStream, Route, Subscription};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::monitor::Topology;
use crate::resp::{OwnReply, Reading, Value};
use crate::sync::Locked;
use crate::types::Address;

/// A client as a binding holds it. Cheap to clone; clones share one client.
#[derive(Clone)]
pub struct Handle {
    shared: Arc<HandleState>,
}

struct HandleState {
    /// `None` once closed.
    client: Mutex<Option<Client>>,
    registry: Arc<Registry>,
    subscriptions: Mutex<Vec<EventRegistration>>,
    /// Pub/sub subscriptions, closed with the handle.
    subscribers: Mutex<Vec<Subscriber>>,
    /// How the binding names the APIs error hints point to.
    api_names: Mutex<&'static ApiNames>,
}

impl Handle {
    /// Opens a client from a configuration, returning at once (discovery runs on core threads).
    pub fn open(config: Config) -> Result<Handle> {
        guarded(|| {
            let client = Client::open(config)?;
            Ok(Handle {
                shared: Arc::new(HandleState {
                    client: Mutex::new(Some(client)),
                    registry: Arc::default(),
                    subscriptions: Mutex::new(Vec::new()),
                    subscribers: Mutex::new(Vec::new()),
                    api_names: Mutex::new(&hints::RUST),
                }),
            })
        })
    }

    /// Parses `url`, applies `options` (keys of the URL's query string, each through
    /// [`Config::set`]) and opens a client.
    pub fn open_url<K: AsRef<str>, V: AsRef<str>>(url: &str, options: &[(K, V)]) -> Result<Handle> {
        Handle::open(config_from_url(url, options)?)
    }

    fn client(&self) -> Result<Client> {
        self.shared
            .client
            .locked()
            .clone()
            .ok_or_else(Error::closed)
    }

    /// Starts `work(client)` and completes `done` with its result (at once with `closed` on a
    /// closed handle, or with the error `work` could not start with).
    pub(super) fn start<T, F, W>(&self, work: W, done: Done<T>) -> Operation
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T>> + Send + 'static,
        W: FnOnce(Client) -> Result<F>,
    {
        let prepared = guarded(|| {
            let client = self.client()?;
            work(client)
        });
        match prepared {
            Ok(future) => self.shared.registry.spawn(future, done),
            Err(e) => self
                .shared
                .registry
                .spawn(async move { Err::<T, _>(e) }, done),
        }
    }

    /// Makes error hints (e.g. MULTI refused on the shared connection) name the binding's own
    /// API instead of the Rust one.
    pub fn set_api_names(&self, names: &'static ApiNames) {
        *self.shared.api_names.locked() = names;
    }

    pub(crate) fn api_names(&self) -> &'static ApiNames {
        *self.shared.api_names.locked()
    }

    /// `done`, with error hints in the binding's words.
    fn localized<T: Send + 'static>(&self, done: Done<T>) -> Done<T> {
        let names = self.api_names();
        Box::new(move |result| done(result.map_err(|e| names.localize(e))))
    }

    /// The configuration the client was opened with (secrets redacted in its `Debug`).
    pub fn config(&self) -> Result<Config> {
        Ok(self.client()?.config().clone())
    }

    /// Completes with the topology once a verified primary is known (see
    /// [`Client::ready`]: it waits up to `command_timeout_ms`).
    pub fn ready(&self, done: Done<Topology>) -> Operation {
        self.start(|c| Ok(async move { c.ready().await }), done)
    }

    /// Runs one command (see [`Client::execute`]). `timeout`, when given, is the call's own
    /// deadline and ends the whole call, blocking commands included ([`Client::execute_timeout`]);
    /// one that breaks [`crate::deadline`]'s rule completes with `config`, as in every binding;
    /// without it `command_timeout_ms` applies and a blocking command may block as long as it
    /// asked the server. On an open connection the calling thread sends it (one non-blocking
    /// write) and no other thread wakes until the reply comes; otherwise it runs as a task.
    pub fn execute<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        timeout: Option<Duration>,
        done: Done<Value>,
    ) -> Operation {
        self.start_command(args, timeout, done, Reading::Task).0
    }

    /// [`Handle::execute`] for a calling thread that reads the reply itself when it wrote the
    /// command: a thread about to block for it ([`Handle::wait`] reads it), or an event loop
    /// that can watch a socket (Node's). [`Started::own`] is the reply to read, when this thread
    /// wrote the whole command to an idle connection. A loop watches [`OwnReply::fd`] and calls
    /// [`OwnReply::read_ready`] each time it is readable, which reads the reply and calls `done`
    /// on the loop's own thread, so no core thread hands the reply over. `done` still runs
    /// exactly once, whichever thread reads the reply (a timeout, cancel or close completes it
    /// on a core thread). Until the `OwnReply` is read or dropped the connection's task reads
    /// nothing, so reading or watching must start at once; dropping it hands the reply back to
    /// the task.
    ///
    /// `held` is the `OwnReply` a loop holds, when its replies are not all read yet: a command
    /// sent on the same connection then joins it (written on the calling thread, its reply read
    /// by the loop after the others), so a loop that keeps many commands in flight does all
    /// their I/O itself and no core thread is woken for them. It comes back as [`Started::own`]
    /// (holding the replies it now reads), whether or not the command joined it.
    pub fn execute_here<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        timeout: Option<Duration>,
        done: Done<Value>,
        held: Option<OwnReply>,
    ) -> Started {
        match held {
            Some(mut held) => {
                let (operation, _) =
                    self.start_command(args, timeout, done, Reading::Extend(&mut held));
                Started {
                    operation,
                    own: Some(held),
                }
            }
            None => {
                let (operation, own) = self.start_command(args, timeout, done, Reading::Offer);
                Started { operation, own }
            }
        }
    }

    /// Starts one command with `reading` saying who reads its reply; returns the reply this
    /// thread is to read, if any (see [`Handle::execute_here`]).
    fn start_command<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        timeout: Option<Duration>,
        done: Done<Value>,
        reading: Reading<'_>,
    ) -> (Operation, Option<OwnReply>) {
        let completer = self.shared.registry.begin(self.localized(done));
        let command = guarded(|| {
            let client = self.client()?;
            let deadline = Deadline::of_call(timeout, client.config().command_timeout())?;
            client.command(args, deadline)
        });
        let command = match command {
            Ok(command) => command,
            // Completed on a core thread, as every completion.
            Err(e) => return (completer.run(async move { Err(e) }), None),
        };
        let cancel = CancellationToken::new();
        let operation = completer.cancelled_by(cancel.clone());
        // A panic in here drops the completion, which completes the operation as `internal`.
        let own = guarded(|| {
            Ok(command.start(
                reading,
                cancel,
                Box::new(move |result| completer.complete(result)),
            ))
        });
        (operation, own.ok().flatten())
    }

    /// For the bindings' own suites: an operation whose work panics on a core thread, so each
    /// language can show that a panic reaches its host as `internal`, once, and the process
    /// goes on. Nothing is sent; the client is unaffected.
    #[doc(hidden)]
    pub fn panic_for_test(&self, done: Done<Value>) -> Operation {
        fn work() -> Result<Value> {
            panic!("a test panic on a core thread")
        }
        self.start(|_| Ok(async { work() }), done)
    }

    /// Sends commands back to back (see [`Client::pipeline`]): one result per command, in
    /// order, each its reply or its own error. `timeout` (the whole pipeline's deadline) replaces
    /// `command_timeout_ms`.
    pub fn pipeline<A: AsRef<[u8]>>(
        &self,
        commands: &[Vec<A>],
        timeout: Option<Duration>,
        done: Done<Vec<Result<Value>>>,
    ) -> Operation {
        self.start(
            |c| {
                let timeout = Deadline::of_call(timeout, c.config().command_timeout())?;
                c.pipeline_work(commands, timeout.timeout())
            },
            self.localized(done),
        )
    }

    /// Runs `commands` in MULTI/EXEC on the primary, after `WATCH watch...` when not empty.
    /// Completes with `None` when a watched key changed (nothing ran), else one reply per command.
    ///
    /// `timeout` (else `command_timeout_ms`) bounds the whole transaction, from this call until
    /// EXEC's reply: waiting for the primary, connecting, WATCH and EXEC share it. Past it the
    /// transaction completes with `timeout` and its dedicated connection is closed, so nothing
    /// stays queued or blocked on the server; an EXEC sent but not answered in time may or may
    /// not have been applied, as a timed-out command may or may not have run. A timeout that
    /// breaks [`crate::deadline`]'s rule, and a command that can't run in a transaction
    /// (blocking, MULTI, ...), complete with `config` before anything is sent.
    pub fn transaction<A: AsRef<[u8]>>(
        &self,
        commands: &[Vec<A>],
        watch: &[A],
        timeout: Option<Duration>,
        done: Done<Option<Vec<Value>>>,
    ) -> Operation {
        let commands: Vec<Vec<Vec<u8>>> = commands
            .iter()
            .map(|c| c.iter().map(|a| a.as_ref().to_vec()).collect())
            .collect();
        let watch: Vec<Vec<u8>> = watch.iter().map(|a| a.as_ref().to_vec()).collect();
        self.start(
            move |c| {
                let deadline = Deadline::of_call(timeout, c.config().command_timeout())?;
                let by = tokio::time::Instant::now() + deadline.timeout();
                for command in &commands {
                    crate::client::check_transaction_command(command)?;
                }
                Ok(async move {
                    let mut tx = c.transaction_by(by, Some(by)).await?;
                    if !watch.is_empty() {
                        tx.watch(&watch).await?;
                    }
                    for command in &commands {
                        tx.queue(command)?;
                    }
                    tx.exec().await
                })
            },
            self.localized(done),
        )
    }

    /// Completes with the node a connection opened by another library should go to for
    /// `route` (see [`Client::route`]); `timeout` replaces `command_timeout_ms`. What the
    /// adapters (`sentinel_recovery.redis_py`, `sentinel-recovery/ioredis`) ask before every
    /// new connection.
    pub fn route(&self, route: Route, timeout: Option<Duration>, done: Done<Address>) -> Operation {
        self.start(
            |c| {
                let timeout = Deadline::of_call(timeout, c.config().command_timeout())?;
                Ok(async move { c.route(route, timeout.timeout()).await })
            },
            done,
        )
    }

    /// Whether a connection to `address` may still carry `route` (see [`Client::is_routable`]);
    /// `false` on a closed handle. Never waits.
    pub fn is_routable(&self, address: &Address, route: Route) -> bool {
        guarded(|| Ok(self.client()?.is_routable(address, route))).unwrap_or(false)
    }

    /// Whether a failover is demoting or has replaced `address` (see [`Client::is_fenced`]).
    /// Never waits.
    pub fn is_fenced(&self, address: &Address) -> bool {
        guarded(|| Ok(self.client()?.is_fenced(address))).unwrap_or(false)
    }

    /// The counter that changes whenever [`Handle::is_routable`] and [`Handle::is_fenced`] may
    /// answer differently (see [`Client::routing_epoch`]).
    pub fn routing_epoch(&self) -> Result<Arc<std::sync::atomic::AtomicU64>> {
        guarded(|| self.client()?.routing_epoch())
    }

    /// Reports that a connection another library opened to `address` failed before it carried
    /// anything, or found the wrong role there (see [`Client::report_unusable`]).
    pub fn report_unusable(&self, address: &Address) -> Result<()> {
        guarded(|| self.client()?.report_unusable(address))
    }

    /// The current topology; never waits on the network.
    pub fn topology(&self) -> Result<Topology> {
        guarded(|| self.client()?.topology())
    }

    /// Calls `handler` with every event from now on, in order, one call at a time, on a core
    /// thread, until the subscription is removed or the handle closed.
    pub fn subscribe_events(&self, handler: EventHandler) -> Result<EventRegistration> {
        guarded(|| self.add_event_subscription(self.client()?.events()?, handler))
    }

    /// [`Handle::subscribe_events`] from the client's first discovery on (see
    /// [`Client::events_from_start`]): subscribed right after [`Handle::open`], the handler's
    /// first `primary_changed` is the one from none to the first primary, whether or not the
    /// first round finished, or the monitor was shared, before this call.
    pub fn subscribe_events_from_start(&self, handler: EventHandler) -> Result<EventRegistration> {
        guarded(|| self.add_event_subscription(self.client()?.events_from_start()?, handler))
    }

    fn add_event_subscription(
        &self,
        events: EventStream,
        handler: EventHandler,
    ) -> Result<EventRegistration> {
        let subscription = EventRegistration::start(self.shared.registry.clone(), events, handler)?;
        let mut subscriptions = self.shared.subscriptions.locked();
        subscriptions.retain(|s| !s.is_removed());
        subscriptions.push(subscription.clone());
        Ok(subscription)
    }

    /// Asks for a discovery round now.
    pub fn refresh(&self) -> Result<()> {
        guarded(|| self.client()?.refresh())
    }

    /// Commands waiting for a usable node.
    pub fn queued(&self) -> usize {
        self.client().map(|c| c.queued()).unwrap_or(0)
    }

    /// Operations started here and not completed yet.
    pub fn in_flight(&self) -> usize {
        self.shared.registry.len()
    }

    /// Whether [`Handle::close`] (or [`Handle::close_blocking`]) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.client.locked().is_none()
    }

    /// Runs `begin` (starting one of this handle's operations) only while the handle is open:
    /// once [`Handle::close`] was called the operation is not accepted, `Err(closed)` says so and
    /// `begin` never runs, so its completion is never called. Bindings whose API reports "not
    /// accepted" apart from a completion ask this instead of checking [`Handle::is_closed`]
    /// first. An operation accepted while a close runs still completes, once, as every other.
    pub fn accept<R>(&self, begin: impl FnOnce(&Handle) -> R) -> Result<R> {
        if self.is_closed() {
            return Err(Error::closed());
        }
        Ok(begin(self))
    }

    /// Whether the calling thread is running one of this handle's callbacks.
    pub fn in_callback(&self) -> bool {
        self.shared.registry.in_callback()
    }

    /// Closes the handle: event handlers are removed, every operation in flight completes with
    /// `closed`, running callbacks finish, the client's connections (and, if it was the last
    /// client of its monitor, the monitor) stop; then `done` runs, on a core thread. Operations
    /// started afterwards complete at once with `closed`. Idempotent.
    pub fn close(&self, done: Box<dyn FnOnce() + Send + 'static>) {
        let client = self.shared.client.locked().take();
        let shared = self.shared.clone();
        let run = async move {
            shared.stop_callbacks();
            shared.registry.idle().await;
            if let Some(client) = client {
                client.close().await;
            }
            shared.registry.call(done);
        };
        match crate::runtime::handle() {
            Ok(handle) => {
                handle.spawn(run);
            }
            // No runtime: there is nothing running to wait for.
            Err(_) => futures_util::FutureExt::now_or_never(run).unwrap_or(()),
        }
    }

    /// [`Handle::close`] for host threads: returns when the close is complete. From inside one of
    /// this handle's callbacks (a core thread, where the host may hold locks its callbacks take)
    /// it removes the event handlers before it returns and leaves the rest to a task: the other
    /// operations in flight then complete with `closed`, each once, on core threads, and the
    /// connections close.
    pub fn close_blocking(&self) {
        let client = self.shared.client.locked().take();
        if crate::runtime::on_core_thread() {
            // Inside a callback: the other completions must not run nested in it.
            self.shared.remove_subscriptions();
            let shared = self.shared.clone();
            let rest = async move {
                shared.registry.fail_all(&Error::closed());
                if let Some(client) = client {
                    client.close().await;
                }
            };
            if let Ok(handle) = crate::runtime::handle() {
                handle.spawn(rest);
            }
            return;
        }
        // On a core task, so completions still run on core threads as promised.
        let shared = self.shared.clone();
        let done = crate::runtime::block_on(async move {
            shared.stop_callbacks();
            shared.registry.idle().await;
            if let Some(client) = client {
                client.close().await;
            }
        });
        if done.is_err() {
            // No runtime can run: nothing is running either; fail what waits, here.
            self.shared.stop_callbacks();
        }
    }

    /// Subscribes to `channels` and `patterns` (at least one name in all) on a connection of
    /// the core's own, and completes with the subscription once the node confirmed them (within
    /// `command_timeout_ms`). It follows failovers: `subscription_lost` and
    /// `subscription_restored` events tell when messages may have been missed (pub/sub is
    /// at-most-once). `buffer` messages wait for the host at most (default 4096); beyond that
    /// the newest are dropped and counted ([`Subscriber::dropped`]).
    pub fn subscribe<A: AsRef<[u8]>>(
        &self,
        channels: &[A],
        patterns: &[A],
        buffer: Option<usize>,
        done: Done<Subscriber>,
    ) -> Operation {
        let shared = self.shared.clone();
        let buffer = buffer.unwrap_or(crate::client::DEFAULT_BUFFER);
        self.start(
            move |c| {
                let work = c.subscription_work(channels, patterns, buffer)?;
                Ok(subscribed(shared, work))
            },
            done,
        )
    }

    /// Runs an operation's callback form and blocks the calling thread until it completes, asking
    /// `interrupted` every `poll` (e.g. to let Python run its signal handlers). When `interrupted`
    /// returns true the operation is cancelled and `None` returned. Refused (`config`) on a core
    /// thread, where waiting could starve the very work it waits for.
    ///
    /// When `start` returns a reply for this thread to read ([`Handle::execute_here`]: a command
    /// it wrote itself to an idle connection), this thread reads it from the socket, for up to
    /// `poll` at a time, and completes it here: no core thread hands it over.
    pub fn wait<T: Send + 'static, S: Into<Started>>(
        start: impl FnOnce(Done<T>) -> S,
        poll: Duration,
        interrupted: impl FnMut() -> bool,
    ) -> Option<Result<T>> {
        wait::wait(start, poll, interrupted)
    }

    /// [`Handle::wait`] without interruption.
    pub fn block<T: Send + 'static, S: Into<Started>>(
        start: impl FnOnce(Done<T>) -> S,
    ) -> Result<T> {
        wait::block(start)
    }
}

#[cfg(test)]
impl Handle {
    /// A subscription fed by a test, owned by this handle as [`Handle::subscribe`]'s are.
    pub(super) fn adopt(&self, subscription: Subscription) -> Subscriber {
        let subscriber = Subscriber::new(self.shared.registry.clone(), subscription);
        self.shared.subscribers.locked().push(subscriber.clone());
        subscriber
    }
}

impl HandleState {
    fn remove_subscriptions(&self) {
        let subscriptions: Vec<EventRegistration> = self.subscriptions.locked().drain(..).collect();
        for s in subscriptions {
            s.remove();
        }
        let subscribers: Vec<Subscriber> = self.subscribers.locked().drain(..).collect();
        for s in subscribers {
            s.close();
        }
    }

    /// Removes every event handler and fails every operation in flight with `closed`.
    fn stop_callbacks(&self) {
        self.remove_subscriptions();
        self.registry.fail_all(&Error::closed());
    }
}

/// Wraps the new subscription for the host and ties it to the handle's close.
async fn subscribed(
    shared: Arc<HandleState>,
    work: impl Future<Output = Result<Subscription>>,
) -> Result<Subscriber> {
    let subscriber = Subscriber::new(shared.registry.clone(), work.await?);
    {
        let mut subscribers = shared.subscribers.locked();
        subscribers.retain(|s| !s.is_closed());
        subscribers.push(subscriber.clone());
    }
    // A close that ran meanwhile did not see it: end it here.
    if shared.client.locked().is_none() {
        subscriber.close();
        return Err(Error::closed());
    }
    Ok(subscriber)
}
