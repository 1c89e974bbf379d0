//! The host layer's guarantees against a real topology: close racing with a failover still
//! completes every operation exactly once, before its own completion, and nothing runs after.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use sentinel_recovery::host::{EventHandler, Handle};
use sentinel_recovery::{Address, ErrorCode, Event, EventKind, Value};
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

/// Commands the calling thread sent itself (the connection was open and idle) are operations like
/// any other: a cancel completes one with `cancelled`, once; close completes the rest with
/// `closed`, once each, before it returns; nothing runs afterwards, not even when their replies
/// come.
#[test]
fn commands_sent_by_the_calling_thread_cancel_and_close_like_any_other() {
    let topo = Topology::start(TopologySpec {
        replicas: 0,
        ..TopologySpec::default()
    })
    .unwrap();
    let handle = Handle::open_url(&topo.url(), &[("command_timeout_ms", "20000")]).unwrap();
    // Opens the data connection: the next commands go out on it from this thread.
    Handle::block(|done| handle.execute(&["SET", "host:k", "v"], None, done)).unwrap();
    topo.primary().stop();

    let n = 10;
    let counts: Arc<Mutex<Vec<u32>>> = Arc::new(Mutex::new(vec![0; n]));
    let (tx, rx) = mpsc::channel();
    let operations: Vec<_> = (0..n)
        .map(|i| {
            let counts = counts.clone();
            let tx = tx.clone();
            handle.execute(
                &["GET", "host:k"],
                None,
                Box::new(move |r| {
                    counts.lock().unwrap()[i] += 1;
                    let _ = tx.send((i, r.map_err(|e| (e.code(), e.message().to_string()))));
                }),
            )
        })
        .collect();
    operations[3].cancel();
    let (i, result) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        i, 3,
        "only the cancelled one completes while the primary is stopped"
    );
    let (code, message) = result.unwrap_err();
    assert_eq!(code, ErrorCode::Closed);
    assert!(message.contains("cancelled"), "{message}");

    handle.close_blocking();
    let rest: Vec<_> = rx.try_iter().collect();
    assert_eq!(
        rest.len(),
        n - 1,
        "close returned before completing them all"
    );
    assert!(
        rest.iter()
            .all(|(_, r)| matches!(r, Err((ErrorCode::Closed, _)))),
        "{rest:?}"
    );
    // The replies come now; nothing more may run.
    topo.primary().cont();
    std::thread::sleep(Duration::from_millis(300));
    assert!(rx.try_recv().is_err());
    assert!(counts.lock().unwrap().iter().all(|c| *c == 1));
}

/// A subscription made at open begins with the first discovery, whatever the timing: its first
/// event is the `primary_changed` from none to the primary, also when the monitor had found that
/// primary before (here it is shared with a client that is ready), where a plain subscription
/// hears nothing of it. After a failover both report the same change, once.
#[test]
fn events_from_start_begin_with_the_first_discovery_also_on_a_shared_monitor() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let first = Handle::open_url(&topo.url(), &[("db", "0")]).unwrap();
    Handle::block(|done| first.ready(done)).unwrap();
    // db is not part of the monitor's key: this client shares `first`'s monitor.
    let second = Handle::open_url(&topo.url(), &[("db", "1")]).unwrap();
    let subscribe = |from_start: bool| {
        let (tx, rx) = mpsc::channel::<Event>();
        let handler: EventHandler = Box::new(move |e| {
            let _ = tx.send(e.clone());
        });
        if from_start {
            second.subscribe_events_from_start(handler).unwrap();
        } else {
            second.subscribe_events(handler).unwrap();
        }
        rx
    };
    let plain = subscribe(false);
    let from_start = subscribe(true);
    let primary = Address::new("127.0.0.1", topo.primary().port());
    let next_primary_change = |rx: &mpsc::Receiver<Event>| loop {
        let event = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        if let EventKind::PrimaryChanged { old, new } = event.kind {
            assert_eq!(event.service, topo.service());
            return (old, new);
        }
    };
    assert_eq!(next_primary_change(&from_start), (None, primary.clone()));

    topo.sentinel_failover().unwrap();
    let after = next_primary_change(&plain);
    assert_eq!(
        after.0,
        Some(primary),
        "the plain subscription's first change"
    );
    assert_ne!(after.1, after.0.clone().unwrap());
    assert_eq!(next_primary_change(&from_start), after);
    second.close_blocking();
    first.close_blocking();
}

/// The reply a calling thread may read itself is handed over in the signature, never by a
/// thread-local: `execute_here` returns it when this thread wrote the command to an idle
/// connection, and then the completion runs on this thread as the reply is read; `execute`
/// never returns one (its reply is read by the connection's task); an `OwnReply` dropped unread
/// hands the reply back, and the command still completes exactly once.
#[test]
fn the_reply_to_read_here_is_returned_by_execute_here_only() {
    use sentinel_recovery::host::Started;
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let handle = Handle::open_url(&topo.url(), &[("command_timeout_ms", "5000")]).unwrap();
    Handle::block(|done| handle.ready(done)).unwrap();
    // The shared connection to the primary is opened by a first command.
    Handle::block(|done| handle.execute(&["SET", "host:own", "1"], None, done)).unwrap();

    let here = std::thread::current().id();
    let (tx, rx) = mpsc::channel();
    let Started { own, .. } = handle.execute_here(
        &["GET", "host:own"],
        None,
        Box::new(move |r| tx.send((r, std::thread::current().id())).unwrap()),
        None,
    );
    let own = own.expect("an idle connection: this thread wrote the command and reads its reply");
    assert!(own.read(std::time::Instant::now() + Duration::from_secs(5), None));
    let (reply, completed_on) = rx.try_recv().expect("completed while this thread read");
    assert_eq!(reply.unwrap(), Value::Bulk("1".into()));
    assert_eq!(
        completed_on, here,
        "the reply was read and completed on this thread"
    );

    // `execute` leaves the reply to the connection's task.
    let (tx, rx) = mpsc::channel();
    let _operation = handle.execute(
        &["GET", "host:own"],
        None,
        Box::new(move |r| {
            tx.send(std::thread::current().id())
                .map(|_| drop(r))
                .unwrap()
        }),
    );
    assert_ne!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), here);

    // Dropped unread: the task reads it, once.
    let count = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let seen = count.clone();
    let Started { own, .. } = handle.execute_here(
        &["GET", "host:own"],
        None,
        Box::new(move |r| {
            seen.fetch_add(1, Ordering::SeqCst);
            tx.send(r).unwrap();
        }),
        None,
    );
    drop(own.expect("idle again"));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).unwrap().unwrap(),
        Value::Bulk("1".into())
    );
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    assert_eq!(count.load(Ordering::SeqCst), 1);
    drop(topo);
}
