//! The host mailbox: one ordered, bounded, coalescing queue that carries what a binding hands to
//! its host (completions, events, pub/sub messages, log records), so that each binding only says
//! *how* its host is woken and *what* an item becomes there, never how items queue, coalesce,
//! overflow or stop.
//!
//! Core threads push; the host is woken by the mailbox's wake-up function and drains everything
//! queued in one go on its own thread or loop ([`Mailbox::drain`]).
//!
//! - **Order.** Items are delivered in the order they were pushed (one producer's items in its
//!   own order; items of different producers in the order the mailbox took them).
//! - **Wake-up.** The wake-up function runs only when the mailbox goes from idle (empty, no drain
//!   pending) to non-empty: a burst of pushes costs one wake-up, and a push while a drain is
//!   under way costs none (that drain delivers it). It runs on the pushing thread after the
//!   mailbox's lock is released (a wake-up is often a system call, which would otherwise hold up
//!   the drain and the other pushers), and `close` waits for wake-ups under way, so it must only
//!   signal (write an eventfd, notify a condition variable, push onto another queue) and never
//!   call into this mailbox.
//! - **Overflow rule.** Completions are never dropped: each caller waits for exactly one, and
//!   their number is already bounded by the operations in flight. Events, messages and log
//!   records ([`Mailbox::push`]) are refused once `bound` of them are queued: the newest is
//!   dropped and counted, and the count reaches the host as an item of its own,
//!   [`Delivery::Dropped`], in the place of the loss (after the items queued before it, before
//!   those queued after it).
//! - **Exactly once.** A completion is pushed through a [`Completion`], which [`Mailbox::completion`]
//!   hands out and [`Completion::complete`] consumes: one completion can queue one item, at most,
//!   by construction. Each queued completion leaves the mailbox once: delivered by a drain, or
//!   handed back by [`Mailbox::close`]; a completion refused after close is handed back to its
//!   pusher.
//! - **Acceptance.** A closed mailbox accepts nothing new: [`Mailbox::completion`] and
//!   [`Mailbox::sender`] refuse with `closed`, so a binding never checks `is_closed` before
//!   starting an operation or installing a subscription on it.
//! - **Close barrier.** Once [`Mailbox::close`] has returned, nothing more is delivered and the
//!   wake-up is never called again. A drain running on another thread finishes the item it is
//!   delivering first (close waits for it); called from inside a drain's delivery, close returns at
//!   once and that drain stops after the current item. Completions still queued are handed back
//!   by `close`, so the closer completes them in the host's own way (the host layer's rule:
//!   with `closed`, each once); events, messages and log records still queued are discarded.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::Error;
use crate::sync::Locked;

thread_local! {
    /// The mailboxes (by address) whose drain this thread is delivering from, innermost last.
    static DRAINING: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// The mailboxes (by address) whose wake-ups this thread holds back inside
    /// [`Mailbox::drain_after`], each with whether one was held back, innermost last.
    static HOLDING: RefCell<Vec<(usize, bool)>> = const { RefCell::new(Vec::new()) };
}

/// What a drain hands to the host, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Delivery<T> {
    /// An item as it was pushed.
    Item(T),
    /// This many events, messages or log records were dropped at this place because the bound
    /// was reached (see the module documentation); the host reports it.
    Dropped(u64),
}

enum Entry<T> {
    Completion(T),
    Other(T),
    Dropped(u64),
}

struct State<T> {
    queue: VecDeque<Entry<T>>,
    /// Events, messages and log records in `queue` (what `bound` limits).
    droppable: usize,
    /// Between a wake-up and the end of the drain that answers it: pushes don't wake again.
    scheduled: bool,
    closed: bool,
    dropped_total: u64,
}

struct Inner<T> {
    state: Mutex<State<T>>,
    /// Held by a drain while it delivers, so `close` can wait for the item being delivered.
    delivering: Mutex<()>,
    bound: usize,
    wake: Box<dyn Fn() + Send + Sync>,
    /// Wake-ups decided under the lock on an open mailbox and not yet returned: `close` waits
    /// for them, so none runs once it has returned.
    waking: AtomicUsize,
}

/// A host mailbox (see the module documentation). Cheap to clone; clones share one queue.
pub struct Mailbox<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Mailbox<T> {
    fn clone(&self) -> Mailbox<T> {
        Mailbox {
            inner: self.inner.clone(),
        }
    }
}

/// What [`Mailbox::push`] did with an event, message or log record.
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed<T> {
    /// Queued; it will be delivered unless the mailbox closes first.
    Queued,
    /// Refused because `bound` items were queued; counted in the next [`Delivery::Dropped`].
    Dropped,
    /// Refused because the mailbox is closed; the item is handed back.
    Closed(T),
}

/// The right to queue one completion (see [`Mailbox::completion`]). Consumed by
/// [`Completion::complete`], so one operation can never queue a second completion.
#[must_use = "a completion queues nothing until `complete` is called"]
pub struct Completion<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Completion<T> {
    /// Queues `item` as a completion: never dropped, delivered once (or handed back by
    /// [`Mailbox::close`]). Refused with the item handed back when the mailbox is closed.
    pub fn complete(self, item: T) -> Result<(), T> {
        self.inner
            .enqueue(Entry::Completion(item))
            .map_err(|e| match e {
                Entry::Completion(item) | Entry::Other(item) => item,
                Entry::Dropped(_) => unreachable!("only the item pushed is handed back"),
            })
    }
}

impl<T> Inner<T> {
    /// Queues a completion and wakes the host if the mailbox was idle; hands it back when closed.
    fn enqueue(&self, entry: Entry<T>) -> Result<(), Entry<T>> {
        let s = self.state.locked();
        if s.closed {
            return Err(entry);
        }
        self.enqueue_locked(s, entry);
        Ok(())
    }

    /// Queues `entry` on the open mailbox `s` locks, then, unlocked, wakes the host if it was
    /// idle. The wake-up is counted in `waking` before the lock is released: `close` then waits
    /// for it, so none runs after `close` returned.
    fn enqueue_locked(&self, mut s: MutexGuard<'_, State<T>>, entry: Entry<T>) {
        s.queue.push_back(entry);
        if s.scheduled {
            return;
        }
        s.scheduled = true;
        if self.hold_wake_here() {
            return;
        }
        self.waking.fetch_add(1, Ordering::Relaxed);
        drop(s);
        (self.wake)();
        self.waking.fetch_sub(1, Ordering::Release);
    }

    /// Whether this thread holds back this mailbox's wake-ups (see [`Mailbox::drain_after`]);
    /// if so, notes that one was held back, so that the holder drains.
    fn hold_wake_here(&self) -> bool {
        let me = self.id();
        HOLDING.with(|h| {
            let mut h = h.borrow_mut();
            match h.iter_mut().rev().find(|(id, _)| *id == me) {
                Some((_, held)) => {
                    *held = true;
                    true
                }
                None => false,
            }
        })
    }

    fn id(&self) -> usize {
        self as *const Inner<T> as *const () as usize
    }

    fn draining_here(&self) -> bool {
        let me = self.id();
        DRAINING.with(|d| d.borrow().contains(&me))
    }
}

impl<T> Mailbox<T> {
    /// A mailbox holding at most `bound` events, messages and log records (completions are not
    /// counted; a `bound` of 0 is taken as 1), calling `wake` when it goes from idle to non-empty
    /// (see the module documentation for what `wake` may do).
    pub fn new(bound: usize, wake: impl Fn() + Send + Sync + 'static) -> Mailbox<T> {
        Mailbox {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    droppable: 0,
                    scheduled: false,
                    closed: false,
                    dropped_total: 0,
                }),
                delivering: Mutex::new(()),
                bound: bound.max(1),
                wake: Box::new(wake),
                waking: AtomicUsize::new(0),
            }),
        }
    }

    /// Queues an event, a pub/sub message or a log record, unless `bound` of them are queued
    /// (then it is dropped and counted) or the mailbox is closed (then it is handed back).
    pub fn push(&self, item: T) -> Pushed<T> {
        let inner = &*self.inner;
        let mut s = inner.state.locked();
        if s.closed {
            return Pushed::Closed(item);
        }
        if s.droppable >= inner.bound {
            s.dropped_total += 1;
            match s.queue.back_mut() {
                Some(Entry::Dropped(n)) => *n += 1,
                _ => s.queue.push_back(Entry::Dropped(1)),
            }
            return Pushed::Dropped;
        }
        s.droppable += 1;
        inner.enqueue_locked(s, Entry::Other(item));
        Pushed::Queued
    }

    /// The right to queue one completion. Take it when the operation starts and move it into the
    /// operation's completion callback (a `FnOnce` the host layer calls exactly once). Refused
    /// with [`Error::mailbox_closed`] once [`Mailbox::close`] was called: an operation whose
    /// completion would go to a closed mailbox is not accepted, so nobody waits for one that
    /// could never be delivered. (A mailbox closed after this is the close barrier's case: the
    /// completion is refused and handed back to its pusher.)
    pub fn completion(&self) -> Result<Completion<T>, Error> {
        self.accepting()?;
        Ok(Completion {
            inner: self.inner.clone(),
        })
    }

    /// A handle that pushes into this mailbox, for an event subscription or a log sink; refused
    /// as [`Mailbox::completion`] once the mailbox is closed, so neither is installed on it.
    pub fn sender(&self) -> Result<Mailbox<T>, Error> {
        self.accepting()?;
        Ok(self.clone())
    }

    fn accepting(&self) -> Result<(), Error> {
        if self.is_closed() {
            return Err(Error::mailbox_closed());
        }
        Ok(())
    }

    /// Delivers everything queued, in order, to `deliver` on the calling thread (the host's),
    /// including what is pushed while it runs, and returns how many deliveries it made. Call it
    /// once per wake-up. Returns 0 at once when the mailbox is closed, and when called from inside
    /// a delivery of this same mailbox (the outer drain delivers the rest). Drains on different
    /// threads deliver one at a time, in order.
    pub fn drain(&self, mut deliver: impl FnMut(Delivery<T>)) -> usize {
        let inner = &*self.inner;
        if inner.draining_here() {
            return 0;
        }
        let _delivering = inner.delivering.locked();
        let me = inner.id();
        DRAINING.with(|d| d.borrow_mut().push(me));
        let mut delivered = 0;
        loop {
            let entry = {
                let mut s = inner.state.locked();
                if s.closed {
                    break;
                }
                match s.queue.pop_front() {
                    Some(entry) => {
                        if matches!(entry, Entry::Other(_)) {
                            s.droppable -= 1;
                        }
                        entry
                    }
                    None => {
                        // Idle again: the next push wakes the host.
                        s.scheduled = false;
                        break;
                    }
                }
            };
            let delivery = match entry {
                Entry::Completion(item) | Entry::Other(item) => Delivery::Item(item),
                Entry::Dropped(n) => Delivery::Dropped(n),
            };
            // A delivery that panics must not leave the mailbox marked as draining here.
            let panicked =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(delivery))).err();
            delivered += 1;
            if let Some(panic) = panicked {
                DRAINING.with(|d| d.borrow_mut().pop());
                drop(_delivering);
                // Whatever is still queued needs another drain.
                let mut s = inner.state.locked();
                if !s.closed && !s.queue.is_empty() {
                    (inner.wake)();
                } else {
                    s.scheduled = false;
                }
                drop(s);
                std::panic::resume_unwind(panic);
            }
        }
        DRAINING.with(|d| d.borrow_mut().pop());
        delivered
    }

    /// Runs `f` on this thread, which drains right after it: a push that `f` makes on this thread
    /// and that would wake the host does not (the wake-up would only make the host drain again
    /// what is delivered here, as an empty batch). If such a wake-up was held back, everything
    /// queued is then delivered to `deliver` as [`Mailbox::drain`] does; if not, nothing is (a
    /// wake-up was already under way, or nothing was pushed). Pushes from other threads wake as
    /// usual. If `f` panics, a held-back wake-up is made before the panic goes on, so nothing is
    /// left waiting. Returns what `f` returned and how many deliveries were made.
    pub fn drain_after<R>(
        &self,
        f: impl FnOnce() -> R,
        deliver: impl FnMut(Delivery<T>),
    ) -> (R, usize) {
        /// Ends the hold, also when `f` unwinds; `held` says whether a wake-up was held back.
        struct Hold<'a, T> {
            inner: &'a Inner<T>,
            held: bool,
        }
        impl<T> Hold<'_, T> {
            fn end(&mut self) {
                let me = self.inner.id();
                HOLDING.with(|h| {
                    let mut h = h.borrow_mut();
                    if let Some(i) = h.iter().rposition(|(id, _)| *id == me) {
                        self.held = h.remove(i).1;
                    }
                });
            }
        }
        impl<T> Drop for Hold<'_, T> {
            fn drop(&mut self) {
                if !std::thread::panicking() {
                    return;
                }
                self.end();
                if self.held {
                    let s = self.inner.state.locked();
                    if !s.closed {
                        (self.inner.wake)();
                    }
                }
            }
        }
        let inner = &*self.inner;
        HOLDING.with(|h| h.borrow_mut().push((inner.id(), false)));
        let mut hold = Hold { inner, held: false };
        let result = f();
        hold.end();
        let delivered = if hold.held { self.drain(deliver) } else { 0 };
        (result, delivered)
    }

    /// Closes the mailbox (see the module documentation): when this returns nothing more is
    /// delivered and the wake-up is never called again. Returns the completions that were still
    /// queued, in order, for the caller to complete (each once, as `closed`); drops the other
    /// items. Idempotent: a second call returns nothing.
    pub fn close(&self) -> Vec<T> {
        let inner = &*self.inner;
        let completions = {
            let mut s = inner.state.locked();
            if s.closed {
                Vec::new()
            } else {
                s.closed = true;
                s.droppable = 0;
                s.queue
                    .drain(..)
                    .filter_map(|e| match e {
                        Entry::Completion(item) => Some(item),
                        Entry::Other(_) | Entry::Dropped(_) => None,
                    })
                    .collect()
            }
        };
        // No wake-up after this returns: wait for those decided before `closed` was set (each
        // only signals, so this is short).
        while inner.waking.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
        // The barrier: wait for the item a drain on another thread is delivering.
        if !inner.draining_here() {
            drop(inner.delivering.locked());
        }
        completions
    }

    /// Whether [`Mailbox::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.state.locked().closed
    }

    /// Items queued now (completions, other items and drop counts).
    pub fn len(&self) -> usize {
        self.inner.state.locked().queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Events, messages and log records dropped over the mailbox's life.
    pub fn dropped(&self) -> u64 {
        self.inner.state.locked().dropped_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    fn counted(bound: usize) -> (Mailbox<u32>, Arc<AtomicUsize>) {
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        let mailbox = Mailbox::new(bound, move || {
            w.fetch_add(1, Ordering::SeqCst);
        });
        (mailbox, wakes)
    }

    fn drained(mailbox: &Mailbox<u32>) -> Vec<Delivery<u32>> {
        let mut got = Vec::new();
        mailbox.drain(|d| got.push(d));
        got
    }

    #[test]
    fn delivers_in_push_order_completions_and_others_alike() {
        let (m, _) = counted(16);
        assert_eq!(m.push(1), Pushed::Queued);
        m.completion().unwrap().complete(2).unwrap();
        assert_eq!(m.push(3), Pushed::Queued);
        m.completion().unwrap().complete(4).unwrap();
        let got = drained(&m);
        assert_eq!(
            got,
            vec![
                Delivery::Item(1),
                Delivery::Item(2),
                Delivery::Item(3),
                Delivery::Item(4)
            ]
        );
        assert!(m.is_empty());
    }

    #[test]
    fn wakes_once_per_idle_to_non_empty() {
        let (m, wakes) = counted(16);
        assert_eq!(wakes.load(Ordering::SeqCst), 0);
        for i in 0..5 {
            let _ = m.push(i);
        }
        m.completion().unwrap().complete(9).unwrap();
        assert_eq!(wakes.load(Ordering::SeqCst), 1, "a burst costs one wake-up");
        assert_eq!(drained(&m).len(), 6);
        // Pushes made while a drain delivers are delivered by it, without a wake-up.
        let _ = m.push(10);
        assert_eq!(wakes.load(Ordering::SeqCst), 2);
        let mut got = Vec::new();
        let pusher = m.clone();
        m.drain(|d| {
            if d == Delivery::Item(10) {
                let _ = pusher.push(11);
                pusher.completion().unwrap().complete(12).unwrap();
            }
            got.push(d);
        });
        assert_eq!(
            got,
            vec![Delivery::Item(10), Delivery::Item(11), Delivery::Item(12)]
        );
        assert_eq!(wakes.load(Ordering::SeqCst), 2);
        // Idle again: the next push wakes.
        let _ = m.push(13);
        assert_eq!(wakes.load(Ordering::SeqCst), 3);
        // An empty drain (a spurious wake-up) delivers nothing and changes nothing.
        assert_eq!(drained(&m), vec![Delivery::Item(13)]);
        assert_eq!(m.drain(|_| panic!("nothing queued")), 0);
    }

    #[test]
    fn overflow_drops_and_counts_others_in_place_never_completions() {
        let (m, _) = counted(2);
        assert_eq!(m.push(1), Pushed::Queued);
        assert_eq!(m.push(2), Pushed::Queued);
        assert_eq!(m.push(3), Pushed::Dropped);
        assert_eq!(m.push(4), Pushed::Dropped);
        // Completions are never refused, however full the mailbox is.
        for c in 100..110 {
            m.completion().unwrap().complete(c).unwrap();
        }
        assert_eq!(m.push(5), Pushed::Dropped);
        assert_eq!(m.dropped(), 3);
        let got = drained(&m);
        let mut want = vec![Delivery::Item(1), Delivery::Item(2), Delivery::Dropped(2)];
        want.extend((100..110).map(Delivery::Item));
        want.push(Delivery::Dropped(1));
        assert_eq!(got, want);
        // Delivered items free the bound again.
        assert_eq!(m.push(6), Pushed::Queued);
        assert_eq!(m.push(7), Pushed::Queued);
        assert_eq!(m.push(8), Pushed::Dropped);
        assert_eq!(m.dropped(), 4);
    }

    #[test]
    fn close_hands_back_queued_completions_and_refuses_later_pushes() {
        let (m, wakes) = counted(4);
        let _ = m.push(1);
        m.completion().unwrap().complete(2).unwrap();
        let _ = m.push(3);
        m.completion().unwrap().complete(4).unwrap();
        let early = m.completion().unwrap();
        assert_eq!(m.close(), vec![2, 4]);
        assert!(m.is_closed());
        assert_eq!(
            m.close(),
            Vec::<u32>::new(),
            "each completion is handed back once"
        );
        let wakes_at_close = wakes.load(Ordering::SeqCst);
        assert_eq!(m.push(5), Pushed::Closed(5));
        assert_eq!(early.complete(6), Err(6));
        // Taken after close: the operation is not accepted at all.
        let refused = m
            .completion()
            .err()
            .expect("a closed mailbox accepts no operation");
        assert_eq!(refused.code(), crate::ErrorCode::Closed);
        assert_eq!(refused.message(), "the mailbox is closed");
        assert!(m.sender().is_err(), "nor an event subscription or log sink");
        assert_eq!(m.drain(|_| panic!("closed")), 0);
        assert_eq!(wakes.load(Ordering::SeqCst), wakes_at_close);
    }

    #[test]
    fn close_waits_for_the_delivery_in_progress_on_another_thread() {
        let (m, _) = counted(16);
        for i in 0..3 {
            let _ = m.push(i);
        }
        m.completion().unwrap().complete(3).unwrap();
        let (entered_tx, entered_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let drainer = m.clone();
        let delivered = Arc::new(Mutex::new(Vec::new()));
        let log = delivered.clone();
        let thread = std::thread::spawn(move || {
            drainer.drain(|d| {
                log.locked().push(d);
                entered_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            })
        });
        entered_rx.recv().unwrap();
        let closer = m.clone();
        let (closed_tx, closed_rx) = mpsc::channel();
        let close = std::thread::spawn(move || {
            let left = closer.close();
            closed_tx.send(()).unwrap();
            left
        });
        // Close must wait while the first item is being delivered.
        assert!(closed_rx.recv_timeout(Duration::from_millis(100)).is_err());
        release_tx.send(()).unwrap();
        closed_rx.recv().unwrap();
        assert_eq!(close.join().unwrap(), vec![3]);
        // The drain stopped after the item it was delivering.
        assert_eq!(thread.join().unwrap(), 1);
        assert_eq!(*delivered.locked(), vec![Delivery::Item(0)]);
    }

    #[test]
    fn close_from_inside_a_delivery_returns_at_once_and_stops_the_drain() {
        let (m, _) = counted(16);
        let _ = m.push(1);
        m.completion().unwrap().complete(2).unwrap();
        let _ = m.push(3);
        m.completion().unwrap().complete(4).unwrap();
        let closer = m.clone();
        let mut got = Vec::new();
        let mut handed_back = Vec::new();
        m.drain(|d| {
            got.push(d);
            handed_back = closer.close();
        });
        assert_eq!(got, vec![Delivery::Item(1)]);
        assert_eq!(handed_back, vec![2, 4]);
    }

    #[test]
    fn a_panicking_delivery_leaves_the_rest_for_the_next_drain() {
        let (m, wakes) = counted(16);
        let _ = m.push(1);
        let _ = m.push(2);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            m.drain(|_| panic!("a host callback failed"))
        }));
        assert!(panicked.is_err());
        assert_eq!(wakes.load(Ordering::SeqCst), 2, "the rest asks for a drain");
        assert_eq!(drained(&m), vec![Delivery::Item(2)]);
        // Nested drains of the same mailbox deliver nothing (the outer one goes on).
        let _ = m.push(3);
        let inner = m.clone();
        let mut nested = 0;
        m.drain(|_| nested += inner.drain(|_| {}));
        assert_eq!(nested, 0);
    }

    #[test]
    fn concurrent_producers_each_keep_their_order_and_every_completion_arrives_once() {
        const PRODUCERS: u32 = 4;
        const EACH: u32 = 2000;
        let woken = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let w = woken.clone();
        let m: Mailbox<(u32, u32, bool)> = Mailbox::new(64, move || {
            *w.0.locked() = true;
            w.1.notify_one();
        });
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        if i % 2 == 0 {
                            m.completion().unwrap().complete((p, i, true)).unwrap();
                        } else {
                            let _ = m.push((p, i, false));
                        }
                    }
                })
            })
            .collect();
        let mut last = vec![None::<u32>; PRODUCERS as usize];
        let mut completions = vec![0u32; PRODUCERS as usize];
        let mut dropped = 0u64;
        let mut others = 0u64;
        let mut done = false;
        while !done {
            done = producers.iter().all(|p| p.is_finished());
            {
                let mut flag = woken.0.locked();
                if !*flag && !done {
                    flag = woken
                        .1
                        .wait_timeout(flag, Duration::from_millis(10))
                        .unwrap()
                        .0;
                }
                *flag = false;
            }
            m.drain(|d| match d {
                Delivery::Item((p, i, completion)) => {
                    let before = last[p as usize].replace(i);
                    assert!(
                        before.is_none_or(|b| b < i),
                        "producer {p}: {before:?} then {i}"
                    );
                    if completion {
                        completions[p as usize] += 1;
                    } else {
                        others += 1;
                    }
                }
                Delivery::Dropped(n) => dropped += n,
            });
        }
        for p in producers {
            p.join().unwrap();
        }
        m.drain(|d| match d {
            Delivery::Item((p, _, true)) => completions[p as usize] += 1,
            Delivery::Item(_) => others += 1,
            Delivery::Dropped(n) => dropped += n,
        });
        assert_eq!(completions, vec![EACH / 2; PRODUCERS as usize]);
        assert_eq!(others + dropped, u64::from(PRODUCERS * EACH / 2));
        assert_eq!(dropped, m.dropped());
    }

    #[test]
    fn drain_after_delivers_its_own_pushes_without_a_wake_up() {
        let (m, wakes) = counted(16);
        let pusher = m.clone();
        let mut got = Vec::new();
        let (r, n) = m.drain_after(
            || {
                let _ = pusher.push(1);
                pusher.completion().unwrap().complete(2).unwrap();
                "read"
            },
            |d| got.push(d),
        );
        assert_eq!((r, n), ("read", 2));
        assert_eq!(got, vec![Delivery::Item(1), Delivery::Item(2)]);
        assert_eq!(
            wakes.load(Ordering::SeqCst),
            0,
            "the drain here needs no wake-up"
        );
        // Idle again: a push outside wakes.
        let _ = m.push(3);
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        // A wake-up already under way delivers what `f` pushes: nothing is delivered here.
        let (_, n) = m.drain_after(
            || pusher.completion().unwrap().complete(4).unwrap(),
            |_| panic!("the scheduled wake-up delivers"),
        );
        assert_eq!(n, 0);
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
        assert_eq!(drained(&m), vec![Delivery::Item(3), Delivery::Item(4)]);
        // Nothing pushed: nothing delivered, no wake-up.
        assert_eq!(m.drain_after(|| (), |_| panic!("nothing queued")), ((), 0));
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn drain_after_holds_back_only_this_threads_pushes() {
        let (m, wakes) = counted(16);
        let other = m.clone();
        let mut got = Vec::new();
        m.drain_after(
            || {
                std::thread::spawn(move || {
                    let _ = other.push(1);
                })
                .join()
                .unwrap()
            },
            |d| got.push(d),
        );
        assert_eq!(
            wakes.load(Ordering::SeqCst),
            1,
            "another thread's push wakes"
        );
        assert!(got.is_empty());
        assert_eq!(drained(&m), vec![Delivery::Item(1)]);
        // Another mailbox pushed to inside the hold wakes as usual.
        let (n, n_wakes) = counted(16);
        m.drain_after(
            || {
                let _ = n.push(5);
            },
            |_| {},
        );
        assert_eq!(n_wakes.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn drain_after_wakes_when_its_closure_panics() {
        let (m, wakes) = counted(16);
        let pusher = m.clone();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            m.drain_after(
                || {
                    let _ = pusher.push(1);
                    panic!("the read failed");
                },
                |_| {},
            )
        }));
        assert!(panicked.is_err());
        assert_eq!(wakes.load(Ordering::SeqCst), 1, "held back, then made");
        assert_eq!(drained(&m), vec![Delivery::Item(1)]);
        // The hold ended: the next push wakes.
        let _ = m.push(2);
        assert_eq!(wakes.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn no_wake_up_after_close_returns_even_with_pushes_racing_it() {
        for _ in 0..200 {
            let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let late = Arc::new(AtomicUsize::new(0));
            let (c, l) = (closed.clone(), late.clone());
            let m: Mailbox<u32> = Mailbox::new(8, move || {
                if c.load(Ordering::SeqCst) {
                    l.fetch_add(1, Ordering::SeqCst);
                }
            });
            let pusher = m.clone();
            let t = std::thread::spawn(move || {
                for i in 0..200 {
                    let _ = pusher.push(i);
                    pusher.drain(|_| {});
                }
            });
            std::thread::yield_now();
            let _ = m.close();
            closed.store(true, Ordering::SeqCst);
            t.join().unwrap();
            assert_eq!(late.load(Ordering::SeqCst), 0);
        }
    }
}
