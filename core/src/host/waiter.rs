//! The spin-then-sleep waiter behind every blocking wait of a host thread: one result handed
//! from the thread that completes to the thread that waits.
//!
//! On a fast network a reply comes back sooner than a sleeping thread takes to be woken: a
//! futex wake-up costs the waiter several microseconds of scheduling latency, as much as the
//! round trip itself on loopback. So the waiter first spins for a short while, then sleeps. The
//! spin is bounded three ways, so it never costs much where it cannot help: it lasts at most
//! [`SPIN_LIMIT`]; it is skipped while recent waits took longer than that (a remote server);
//! and only one thread per two cores spins at a time (the other blocked threads sleep at once).
//!
//! Better still, a thread that blocks for the reply of a command it wrote itself to an idle
//! connection reads that reply from the socket itself, as a synchronous client does: the
//! [`OwnReply`] the command's start returned ([`super::Started`]) is handed to
//! [`Rendezvous::wait`], and then only the waiting thread wakes when the reply comes.

use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::resp::OwnReply;
use crate::sync::Locked;

/// The longest a waiter spins before it sleeps.
const SPIN_LIMIT: Duration = Duration::from_micros(50);

const WAITING: u8 = 0;
const SLEEPING: u8 = 1;
const DONE: u8 = 2;

/// Recent waits, in microseconds, as a moving average (7/8 old, 1/8 new).
static RECENT_MICROS: AtomicU32 = AtomicU32::new(0);
/// Threads spinning right now.
static SPINNING: AtomicUsize = AtomicUsize::new(0);

fn max_spinners() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| (n.get() / 2).max(1))
            .unwrap_or(1)
    })
}

/// One result handed from the thread that completes to the thread that waits.
pub(super) struct Rendezvous<T> {
    state: AtomicU8,
    value: Mutex<Option<Result<T>>>,
    waiter: Thread,
}

impl<T> Rendezvous<T> {
    /// A rendezvous the calling thread will wait on.
    pub(super) fn new() -> Arc<Rendezvous<T>> {
        Arc::new(Rendezvous {
            state: AtomicU8::new(WAITING),
            value: Mutex::new(None),
            waiter: std::thread::current(),
        })
    }

    /// What completes this rendezvous: called with the result, or, dropped uncalled, with an
    /// `internal` error, so the waiter never waits for a completion that was lost.
    pub(super) fn completer(self: &Arc<Self>) -> impl FnOnce(Result<T>) + Send + 'static
    where
        T: Send + 'static,
    {
        struct Completer<T>(Arc<Rendezvous<T>>);
        impl<T> Drop for Completer<T> {
            fn drop(&mut self) {
                self.0.complete(Err(crate::error::Error::new(
                    crate::error::ErrorCode::Internal,
                    "internal error: an operation ended without completing",
                )));
            }
        }
        let completer = Completer(self.clone());
        move |result| completer.0.complete(result)
    }

    /// Hands over `result`, waking the waiter if it sleeps. Only the first result counts.
    pub(super) fn complete(&self, result: Result<T>) {
        {
            let mut value = self.value.locked();
            if value.is_some() || self.state.load(Ordering::Acquire) == DONE {
                return;
            }
            *value = Some(result);
        }
        if self.state.swap(DONE, Ordering::AcqRel) == SLEEPING {
            self.waiter.unpark();
        }
    }

    /// Waits for the result: reads `own` reply for up to `poll` when given, else spins briefly
    /// (see the module); then sleeps. Every `poll` it asks `interrupted`, and gives up (`None`)
    /// when it says so.
    pub(super) fn wait(
        &self,
        own: Option<OwnReply>,
        poll: Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> Option<Result<T>> {
        let started = Instant::now();
        if let Some(own) = own {
            let spinner = Spinner::start();
            let spin_until = spinner.as_ref().map(|_| started + SPIN_LIMIT);
            let read_here = own.read(started + poll, spin_until);
            drop(spinner);
            if read_here {
                note(started.elapsed());
                return self.take();
            }
        } else if self.spin(started) {
            return self.take();
        }
        let mut next_poll = started + poll;
        loop {
            if self
                .state
                .compare_exchange(WAITING, SLEEPING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
                && self.state.load(Ordering::Acquire) == DONE
            {
                note(started.elapsed());
                return self.take();
            }
            let now = Instant::now();
            if now >= next_poll {
                if interrupted() {
                    return None;
                }
                next_poll = now + poll;
            }
            std::thread::park_timeout(next_poll.saturating_duration_since(Instant::now()));
            if self.state.load(Ordering::Acquire) == DONE {
                note(started.elapsed());
                return self.take();
            }
            // Woken early (or spuriously): back to WAITING before sleeping again.
            let _ =
                self.state
                    .compare_exchange(SLEEPING, WAITING, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Spins until done or the spin budget is spent; true when done. Never inlined, so that
    /// instruction counts (bench/latency/callgrind.sh) can leave the busy wait out.
    #[inline(never)]
    fn spin(&self, started: Instant) -> bool {
        let Some(spinner) = Spinner::start() else {
            return false;
        };
        let mut done = false;
        'spin: while started.elapsed() < SPIN_LIMIT {
            for _ in 0..64 {
                if self.state.load(Ordering::Acquire) == DONE {
                    done = true;
                    break 'spin;
                }
                std::hint::spin_loop();
            }
        }
        drop(spinner);
        if done {
            note(started.elapsed());
        }
        done
    }

    fn take(&self) -> Option<Result<T>> {
        self.value.locked().take()
    }
}

/// Leave to spin: given while recent waits were short and fewer threads than allowed spin;
/// counted among the spinners until dropped.
struct Spinner;

impl Spinner {
    fn start() -> Option<Spinner> {
        if RECENT_MICROS.load(Ordering::Relaxed) as u128 > SPIN_LIMIT.as_micros() {
            return None;
        }
        if SPINNING.fetch_add(1, Ordering::AcqRel) >= max_spinners() {
            SPINNING.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Spinner)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        SPINNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Adds one wait's duration to the moving average that decides whether spinning pays.
fn note(waited: Duration) {
    let sample = u32::try_from(waited.as_micros()).unwrap_or(u32::MAX);
    let old = RECENT_MICROS.load(Ordering::Relaxed);
    let new = ((u64::from(old) * 7 + u64::from(sample)) / 8) as u32;
    RECENT_MICROS.store(new, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_from_another_thread_arrives_whether_the_waiter_spins_or_sleeps() {
        for delay in [0u64, 10, 200, 20_000] {
            let rendezvous = Rendezvous::<u64>::new();
            let completer = rendezvous.clone();
            let t = std::thread::spawn(move || {
                if delay > 0 {
                    std::thread::sleep(Duration::from_micros(delay));
                }
                completer.complete(Ok(delay));
            });
            let got = rendezvous.wait(None, Duration::from_secs(10), || false);
            assert_eq!(got.unwrap().unwrap(), delay);
            t.join().unwrap();
        }
    }

    #[test]
    fn only_the_first_result_counts_and_an_interrupt_gives_up() {
        let rendezvous = Rendezvous::<u32>::new();
        rendezvous.complete(Ok(1));
        rendezvous.complete(Ok(2));
        assert_eq!(
            rendezvous
                .wait(None, Duration::from_secs(1), || false)
                .unwrap()
                .unwrap(),
            1
        );

        let never = Rendezvous::<u32>::new();
        let mut asked = 0;
        let got = never.wait(None, Duration::from_millis(5), || {
            asked += 1;
            asked == 3
        });
        assert!(got.is_none());
        assert_eq!(asked, 3);
    }
}
