//! The host layer's guarantees against a real topology: close racing with a failover still
//! completes every operation exactly once, before its own completion, and nothing runs after.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use sentinel_recovery::host::Handle;
use sentinel_recovery::ErrorCode;
use sentinel_recovery_testkit::{Topology, TopologySpec};

#[test]
fn close_racing_with_a_failover_completes_everything_once_and_nothing_after() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let handle = Handle::open_url(&topo.url(), &[("command_timeout_ms", "20000")]).unwrap();
    Handle::block(|done| handle.ready(done)).unwrap();

    let n = 2000;
    let counts: Arc<Mutex<Vec<u32>>> = Arc::new(Mutex::new(vec![0; n]));
    let closed_done = Arc::new(AtomicBool::new(false));
    let after_close = Arc::new(AtomicUsize::new(0));
    let events_after_close = Arc::new(AtomicUsize::new(0));
    let (codes_tx, codes) = mpsc::channel();

    let seen = (closed_done.clone(), events_after_close.clone());
    handle
        .subscribe_events(Box::new(move |_| {
            if seen.0.load(Ordering::SeqCst) {
                seen.1.fetch_add(1, Ordering::SeqCst);
            }
        }))
        .unwrap();

    let start = |i: usize| {
        let counts = counts.clone();
        let closed_done = closed_done.clone();
        let after_close = after_close.clone();
        let codes_tx = codes_tx.clone();
        handle.execute(
            &["INCR", "host:counter"],
            None,
            Box::new(move |r| {
                counts.lock().unwrap()[i] += 1;
                if closed_done.load(Ordering::SeqCst) {
                    after_close.fetch_add(1, Ordering::SeqCst);
                }
                let _ = codes_tx.send(r.err().map(|e| e.code()));
            }),
        );
    };
    for i in 0..n / 2 {
        start(i);
    }
    topo.primary().kill9();
    for i in n / 2..n {
        start(i);
    }
    // Close while the commands wait for the failover.
    let (tx, rx) = mpsc::channel();
    let flag = closed_done.clone();
    let counts_at_close = counts.clone();
    handle.close(Box::new(move || {
        let completed: u32 = counts_at_close.lock().unwrap().iter().sum();
        flag.store(true, Ordering::SeqCst);
        let _ = tx.send(completed);
    }));
    let completed_before = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        completed_before as usize, n,
        "every operation completed before close's own completion"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        counts.lock().unwrap().iter().all(|c| *c == 1),
        "each exactly once"
    );
    assert_eq!(after_close.load(Ordering::SeqCst), 0);
    assert_eq!(events_after_close.load(Ordering::SeqCst), 0);
    let codes: Vec<Option<ErrorCode>> = codes.try_iter().collect();
    assert_eq!(codes.len(), n);
    assert!(
        codes.iter().all(|c| matches!(
            c,
            None | Some(ErrorCode::Closed | ErrorCode::ConnectionLost)
        )),
        "results, closed or connection_lost only: {:?}",
        codes
            .iter()
            .filter(|c| !matches!(
                c,
                None | Some(ErrorCode::Closed | ErrorCode::ConnectionLost)
            ))
            .collect::<Vec<_>>()
    );
}
