//! The host layer's guarantees, each tested once here (real-server cases are in
//! tests/tests/host.rs).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::inflight::{Done, Registry};
use super::{EventRegistration, Handle};
use crate::error::{ErrorCode, Result};

/// A client whose sentinel never answers: commands wait in the queue until their deadline.
fn unreachable_handle(extra: &str) -> Handle {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    Handle::open_url::<&str, &str>(
        &format!(
            "redis+sentinel://127.0.0.1:{port}/mymaster?queue_size=20000&command_timeout_ms=60000{extra}"
        ),
        &[],
    )
    .unwrap()
}

/// Counts completions per operation, to prove each ran exactly once.
#[derive(Clone, Default)]
struct Tally(Arc<Mutex<Vec<u32>>>);

impl Tally {
    fn with(n: usize) -> Tally {
        Tally(Arc::new(Mutex::new(vec![0; n])))
    }
    fn done<T: Send + 'static>(&self, i: usize, codes: mpsc::Sender<Option<ErrorCode>>) -> Done<T> {
        let tally = self.0.clone();
        Box::new(move |r: Result<T>| {
            tally.lock().unwrap()[i] += 1;
            let _ = codes.send(r.err().map(|e| e.code()));
        })
    }
    fn all_once(&self) -> bool {
        self.0.lock().unwrap().iter().all(|n| *n == 1)
    }
}

#[test]
fn a_closed_handle_accepts_nothing_and_never_runs_what_it_refused() {
    let handle = unreachable_handle("");
    let ran = AtomicUsize::new(0);
    let accepted = handle.accept(|_| ran.fetch_add(1, Ordering::SeqCst));
    assert!(accepted.is_ok());
    handle.close_blocking();
    let refused = handle.accept(|_| ran.fetch_add(1, Ordering::SeqCst));
    assert_eq!(refused.err().map(|e| e.code()), Some(ErrorCode::Closed));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn close_with_10000_commands_in_flight_completes_each_once_with_closed_before_its_own_completion() {
    let handle = unreachable_handle("");
    let n = 10_000;
    let tally = Tally::with(n);
    let (codes_tx, codes) = mpsc::channel();
    for i in 0..n {
        handle.execute(&["GET", "k"], None, tally.done(i, codes_tx.clone()));
    }
    assert_eq!(handle.in_flight(), n);
    let (closed_tx, closed) = mpsc::channel();
    let completed_before_close = Arc::new(AtomicUsize::new(0));
    let seen = completed_before_close.clone();
    let tally_at_close = tally.clone();
    handle.close(Box::new(move || {
        let done: u32 = tally_at_close.0.lock().unwrap().iter().sum();
        seen.store(done as usize, Ordering::SeqCst);
        let _ = closed_tx.send(());
    }));
    closed.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        completed_before_close.load(Ordering::SeqCst),
        n,
        "all completed before close's own completion"
    );
    let codes: Vec<Option<ErrorCode>> = codes.try_iter().collect();
    assert_eq!(codes.len(), n);
    assert!(
        codes.iter().all(|c| *c == Some(ErrorCode::Closed)),
        "{:?}",
        &codes[..3]
    );
    // Nothing more arrives later: each exactly once.
    std::thread::sleep(Duration::from_millis(200));
    assert!(tally.all_once());
    // After close: at once, with closed.
    let (tx, rx) = mpsc::channel();
    handle.execute(&["GET", "k"], None, Box::new(move |r| tx.send(r).unwrap()));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap_err()
            .code(),
        ErrorCode::Closed
    );
}

#[test]
fn a_completion_that_closes_its_own_handle_does_not_deadlock_and_nothing_runs_after() {
    let handle = unreachable_handle("&command_timeout_ms=50");
    let (tx, rx) = mpsc::channel();
    let calls = Arc::new(AtomicUsize::new(0));
    for _ in 0..20 {
        let h = handle.clone();
        let tx = tx.clone();
        let calls = calls.clone();
        handle.execute(
            &["GET", "k"],
            None,
            Box::new(move |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                // The first one closes; the rest complete with closed, each once.
                h.close_blocking();
                let _ = tx.send(());
            }),
        );
    }
    for _ in 0..20 {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("every completion ran");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 20);
    assert!(handle.is_closed());
}

#[test]
fn a_panic_in_the_core_is_internal_and_a_panicking_callback_does_not_lose_others() {
    let registry = Arc::new(Registry::default());
    let (tx, rx) = mpsc::channel();
    registry.spawn(
        async { panic!("boom in the core") },
        Box::new(move |r: Result<()>| tx.send(r).unwrap()),
    );
    let err = rx
        .recv_timeout(Duration::from_secs(5))
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Internal);
    assert!(err.message().contains("boom in the core"), "{err}");

    // The bindings' test hook takes the same path through a handle, which stays usable.
    let handle = unreachable_handle("&command_timeout_ms=50");
    let (tx, rx) = mpsc::channel();
    handle.panic_for_test(Box::new(move |r| tx.send(r).unwrap()));
    let err = rx
        .recv_timeout(Duration::from_secs(5))
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Internal);
    assert!(!handle.is_closed());

    // Host callbacks that panic are caught: the next completions still run.
    let (tx, rx) = mpsc::channel();
    for i in 0..10 {
        let tx = tx.clone();
        handle.execute(
            &["GET", "k"],
            None,
            Box::new(move |_| {
                let _ = tx.send(i);
                if i % 2 == 0 {
                    panic!("host callback {i} panics");
                }
            }),
        );
    }
    let mut got: Vec<i32> = (0..10)
        .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    got.sort();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    handle.close_blocking();
}

#[test]
fn a_removed_event_handler_is_never_called_again_and_close_removes_all() {
    let handle = unreachable_handle("&retry_base_ms=10&retry_max_ms=20");
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let sub = handle
        .subscribe_events(Box::new(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    // discovery_failed arrives on every retry.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while calls.load(Ordering::SeqCst) < 3 {
        assert!(std::time::Instant::now() < deadline, "events arrive");
        std::thread::sleep(Duration::from_millis(5));
    }
    sub.remove();
    let after = calls.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        after,
        "no call after remove returned"
    );

    // A handler that removes itself: its current call finishes, then nothing.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let slot: Arc<Mutex<Option<EventRegistration>>> = Arc::default();
    let own = slot.clone();
    let sub = handle
        .subscribe_events(Box::new(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            if let Some(me) = own.lock().unwrap().as_ref() {
                me.remove();
            }
        }))
        .unwrap();
    *slot.lock().unwrap() = Some(sub);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while calls.load(Ordering::SeqCst) < 1 {
        assert!(std::time::Instant::now() < deadline, "events arrive");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // Close removes every handler.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    handle
        .subscribe_events(Box::new(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    handle.close_blocking();
    let after = calls.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(calls.load(Ordering::SeqCst), after);
}

#[test]
fn blocking_waits_can_be_interrupted_and_cancel_the_operation() {
    let handle = unreachable_handle("");
    let mut asks = 0;
    let h = handle.clone();
    let outcome = Handle::wait(
        move |done| h.execute(&["GET", "k"], None, done),
        Duration::from_millis(10),
        || {
            asks += 1;
            asks == 3
        },
    );
    assert!(outcome.is_none(), "interrupted");
    // The cancelled operation completed (with closed) and left nothing in flight.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while handle.in_flight() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "in flight: {}",
            handle.in_flight()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    handle.close_blocking();
}
