//! Pub/sub subscriptions of a handle, with the guarantees of event handlers: a message handler
//! is called in order, one call at a time, on a core thread; once [`Subscriber::close`] (or the
//! handle's close) has returned it is not called again, and once an unsubscribe has completed no
//! message of what it removed reaches the handler.
//!
//! Messages are read either by a handler ([`Subscriber::on_message`], the callback form) or one
//! at a time ([`Subscriber::next`], whose blocking form is [`Subscriber::next_blocking`]); Rust
//! code uses [`crate::Subscription`] directly.

use std::sync::{Arc, Mutex};

use super::gate::Gate;
use super::guard::guarded;
use super::inflight::{Done, Operation, Registry};
use super::wait;
use crate::client::{Subscription, SubscriptionControl};
use crate::error::{Error, Result};
use crate::sync::Locked;
use crate::types::Message;

/// A function the core calls with each message, on a core thread. It must only copy the message
/// and hand it to its host's scheduler.
pub type MessageHandler = Box<dyn FnMut(&Message) + Send + 'static>;

/// The gate in front of a message handler.
type MessageGate = Gate<dyn FnMut(&Message) + Send + 'static>;

/// A pub/sub subscription as a binding holds it. Cheap to clone; clones share one subscription.
#[derive(Clone)]
pub struct Subscriber {
    shared: Arc<SubscriberState>,
}

struct SubscriberState {
    control: SubscriptionControl,
    messages: tokio::sync::Mutex<Subscription>,
    registry: Arc<Registry>,
    handler: Mutex<Option<MessageGate>>,
    feed: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Subscriber {
    pub(super) fn new(registry: Arc<Registry>, subscription: Subscription) -> Subscriber {
        Subscriber {
            shared: Arc::new(SubscriberState {
                control: subscription.control().clone(),
                messages: tokio::sync::Mutex::new(subscription),
                registry,
                handler: Mutex::new(None),
                feed: Mutex::new(None),
            }),
        }
    }

    /// Calls `handler` with every message from now on, in order, one call at a time, on a core
    /// thread, until the subscription is closed. One handler per subscription (`config` error
    /// for a second); while it is installed [`Subscriber::next`] waits for nothing.
    pub fn on_message(&self, handler: MessageHandler) -> Result<()> {
        guarded(|| {
            if self.is_closed() {
                return Err(Error::closed());
            }
            let mut slot = self.shared.handler.locked();
            if slot.is_some() {
                return Err(Error::config(
                    "this subscription already has a message handler",
                ));
            }
            let gate: MessageGate = Gate::new(handler);
            let feeding = gate.clone();
            let shared = self.shared.clone();
            let task = crate::runtime::handle()?.spawn(async move {
                let mut messages = shared.messages.lock().await;
                while let Some(message) = messages.next().await {
                    // Checked inside the gate: an unsubscribe that completed meanwhile wins.
                    let open = feeding.call(&shared.registry, |handler| {
                        if shared.control.wants(&message) {
                            handler(&message)
                        }
                    });
                    if !open {
                        break;
                    }
                }
            });
            *slot = Some(gate);
            *self.shared.feed.locked() = Some(task.abort_handle());
            Ok(())
        })
    }

    /// Completes with the next message, or `None` once the subscription (or its handle) is
    /// closed, also when it was waiting then. Cancelling it may lose the message it was about to return (pub/sub is
    /// at-most-once anyway).
    pub fn next(&self, done: Done<Option<Message>>) -> Operation {
        let shared = self.shared.clone();
        // Failed with `closed` by the handle's close: that is the end of the messages too.
        let done: Done<Option<Message>> = Box::new(move |result| {
            done(match result {
                Err(e) if e.code() == crate::ErrorCode::Closed => Ok(None),
                other => other,
            })
        });
        self.shared.registry.spawn(
            async move {
                let mut messages = shared.messages.lock().await;
                Ok(messages.next().await)
            },
            done,
        )
    }

    /// [`Subscriber::next`] for host threads: blocks the calling thread (only it). Refused on a
    /// core thread.
    pub fn next_blocking(&self) -> Result<Option<Message>> {
        wait::block(|done| self.next(done))
    }

    /// Adds channels; completes once the node confirmed them (at once while the subscription is
    /// between nodes: they are subscribed when it is restored).
    pub fn subscribe<A: AsRef<[u8]>>(&self, channels: &[A], done: Done<()>) -> Operation {
        self.change("SUBSCRIBE", channels, done)
    }

    /// Adds patterns, as [`Subscriber::subscribe`] adds channels.
    pub fn psubscribe<A: AsRef<[u8]>>(&self, patterns: &[A], done: Done<()>) -> Operation {
        self.change("PSUBSCRIBE", patterns, done)
    }

    /// Removes channels: once this completes no message of theirs reaches the handler or
    /// [`Subscriber::next`].
    pub fn unsubscribe<A: AsRef<[u8]>>(&self, channels: &[A], done: Done<()>) -> Operation {
        self.change("UNSUBSCRIBE", channels, done)
    }

    /// Removes patterns, as [`Subscriber::unsubscribe`] removes channels.
    pub fn punsubscribe<A: AsRef<[u8]>>(&self, patterns: &[A], done: Done<()>) -> Operation {
        self.change("PUNSUBSCRIBE", patterns, done)
    }

    fn change<A: AsRef<[u8]>>(
        &self,
        command: &'static str,
        names: &[A],
        done: Done<()>,
    ) -> Operation {
        let work = guarded(|| self.shared.control.change_work(command, names));
        let shared = self.shared.clone();
        let removes = command.contains("UNSUBSCRIBE");
        match work {
            Ok(work) => self.shared.registry.spawn(
                async move {
                    work.await?;
                    if removes {
                        shared.handler_idle();
                    }
                    Ok(())
                },
                done,
            ),
            Err(e) => self.fail(e, done),
        }
    }

    fn fail<T: Send + 'static>(&self, e: Error, done: Done<T>) -> Operation {
        self.shared
            .registry
            .spawn(std::future::ready(Err::<T, _>(e)), done)
    }

    /// Messages dropped so far because the subscription's buffer was full (the newest are
    /// dropped; the buffer holds `buffer` messages, 4096 by default).
    pub fn dropped(&self) -> u64 {
        self.shared.control.dropped()
    }

    /// The channels subscribed now.
    pub fn channels(&self) -> Vec<Vec<u8>> {
        let channels = self.shared.control.channels();
        channels.into_iter().map(|c| c.to_vec()).collect()
    }

    /// The patterns subscribed now.
    pub fn patterns(&self) -> Vec<Vec<u8>> {
        let patterns = self.shared.control.patterns();
        patterns.into_iter().map(|p| p.to_vec()).collect()
    }

    /// Runs `begin` (starting a change of this subscription) only while it is open: once it
    /// ended (closed, or its handle closed) the change is not accepted, `Err(closed)` says so and
    /// `begin` never runs, so its completion is never called (as [`super::Handle::accept`]).
    pub fn accept<R>(&self, begin: impl FnOnce(&Subscriber) -> R) -> Result<R> {
        if self.is_closed() {
            return Err(Error::closed());
        }
        Ok(begin(self))
    }

    /// Whether the subscription ended (closed, or its handle closed).
    pub fn is_closed(&self) -> bool {
        self.shared.control.is_closed()
    }

    /// Ends the subscription: when this returns the message handler is not running (unless this
    /// is called from inside it: that call finishes after this returns) and is never called
    /// again; pending [`Subscriber::next`] calls complete with `None`; the connection closes.
    /// Idempotent.
    pub fn close(&self) {
        self.shared.control.close();
        if let Some(feed) = self.shared.feed.locked().take() {
            feed.abort();
        }
        let gate = self.shared.handler.locked().clone();
        if let Some(gate) = gate {
            gate.close();
        }
    }
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("channels", &self.shared.control.channels().len())
            .field("patterns", &self.shared.control.patterns().len())
            .field("dropped", &self.dropped())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl SubscriberState {
    /// Returns once no handler call that started before is still running (a core task may
    /// briefly wait here for a host callback that only copies a message).
    fn handler_idle(&self) {
        let gate = self.handler.locked().clone();
        if let Some(gate) = gate {
            gate.barrier();
        }
    }
}
