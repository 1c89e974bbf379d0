//! What applications use through the host layer (every binding's path): pipelines, interactive
//! transactions refused after a primary change, per-call deadlines, cancellation, error hints in
//! the binding's words, and log records forwarded to the host without secrets.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sentinel_recovery::host::{log, ApiNames, Handle};
use sentinel_recovery::{ErrorCode, Value};
use sentinel_recovery_testkit::{refusing_port, wait_until, Topology, TopologySpec};

const LONG: Duration = Duration::from_secs(40);

static PYTHON: ApiNames = ApiNames {
    transaction: "client.transaction(commands)",
    watch: "client.transaction(commands, watch=[...])",
};

#[test]
fn pipeline_transaction_deadline_cancel_and_hints() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let handle = Handle::open_url(&topo.url(), &[("command_timeout_ms", "10000")]).unwrap();
    Handle::block(|done| handle.ready(done)).unwrap();
    handle.set_api_names(&PYTHON);

    // A pipeline: every reply (or its own error) in order.
    let cmds = vec![
        vec!["SET", "p", "1"],
        vec!["INCR", "p"],
        vec!["HGET", "p", "f"],
        vec!["GET", "p"],
    ];
    let results = Handle::block(|done| handle.pipeline(&cmds, None, done)).unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0].as_ref().unwrap(), &Value::Simple("OK".into()));
    assert_eq!(results[1].as_ref().unwrap(), &Value::Int(2));
    assert_eq!(
        results[2].as_ref().unwrap_err().server_code(),
        Some("WRONGTYPE")
    );
    assert_eq!(results[3].as_ref().unwrap(), &Value::Bulk("2".into()));

    // Hints name the binding's API.
    let e = Handle::block(|done| handle.execute(&["MULTI"], None, done)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Config);
    assert!(e.message().contains("client.transaction(commands)"), "{e}");
    assert!(!e.message().contains("Client::"), "{e}");

    // A per-call deadline shorter than the client's: a command held by CLIENT PAUSE WRITE misses it.
    // The stays short of the sentinels' down-after (1000 ms): their PUBLISH waits behind it too.
    Handle::block(|done| handle.execute(&["CLIENT", "PAUSE", "500", "WRITE"], None, done)).unwrap();
    let e = Handle::block(|done| {
        handle.execute(
            &["SET", "paused", "1"],
            Some(Duration::from_millis(100)),
            done,
        )
    })
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    let e = Handle::block(|done| {
        handle.pipeline(
            &[
                vec!["CLIENT", "PAUSE", "500", "WRITE"],
                vec!["SET", "paused", "2"],
            ],
            Some(Duration::from_millis(100)),
            done,
        )
    });
    // The pause itself answers; the SET behind it waits past the deadline.
    assert_eq!(e.unwrap_err().code(), ErrorCode::Timeout);
    Handle::block(|done| handle.execute(&["CLIENT", "UNPAUSE"], None, done)).unwrap();

    // Cancellation: the completion says the caller cancelled, and that it is not retried.
    let (tx, rx) = std::sync::mpsc::channel();
    let op = handle.execute(
        &["BLPOP", "nothing-here", "0"],
        None,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    op.cancel();
    let e = rx.recv_timeout(LONG).unwrap().unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed);
    assert!(e.message().contains("cancelled by the caller"), "{e}");
    assert!(e.message().contains("never retried"), "{e}");

    // An interactive transaction: WATCH, read, EXEC.
    let tx = Handle::block(|done| handle.begin_transaction(None, done)).unwrap();
    Handle::block(|done| tx.watch(&["p"], done)).unwrap();
    let read = Handle::block(|done| tx.execute(&["GET", "p"], done)).unwrap();
    assert_eq!(read, Value::Bulk("2".into()));
    let replies =
        Handle::block(|done| tx.exec(&[vec!["INCR", "p"], vec!["INCR", "p"]], done)).unwrap();
    assert_eq!(replies, Some(vec![Value::Int(3), Value::Int(4)]));
    let e = Handle::block(|done| tx.exec(&[vec!["INCR", "p"]], done)).unwrap_err();
    assert!(e.message().contains("has ended"), "{e}");

    // A watched key changed by someone else: nothing runs.
    let tx = Handle::block(|done| handle.begin_transaction(None, done)).unwrap();
    Handle::block(|done| tx.watch(&["p"], done)).unwrap();
    Handle::block(|done| handle.execute(&["SET", "p", "100"], None, done)).unwrap();
    assert_eq!(
        Handle::block(|done| tx.exec(&[vec!["INCR", "p"]], done)).unwrap(),
        None
    );
    // MULTI inside a transaction: refused with the binding's hint.
    let tx = Handle::block(|done| handle.begin_transaction(None, done)).unwrap();
    let e = Handle::block(|done| tx.exec(&[vec!["MULTI"]], done)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Config, "{e}");

    // Refused after a primary change: nothing was applied.
    let old = handle.topology().unwrap().primary.unwrap();
    let tx = Handle::block(|done| handle.begin_transaction(None, done)).unwrap();
    assert_eq!(tx.primary(), old.to_string());
    Handle::block(|done| tx.watch(&["p"], done)).unwrap();
    topo.sentinel_failover().unwrap();
    wait_until(LONG, "the client follows the failover", || {
        let p = handle.topology().ok()?.primary?;
        (p != old).then_some(())
    })
    .unwrap();
    let e = Handle::block(|done| tx.exec(&[vec!["INCR", "p"]], done)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::ConnectionLost, "{e}");
    assert!(e.message().contains("nothing was applied"), "{e}");
    assert_eq!(
        Handle::block(|done| handle.execute(&["GET", "p"], None, done)).unwrap(),
        Value::Bulk("100".into())
    );
    handle.close_blocking();
    // After close, a step of a transaction completes with `closed`.
    let e = Handle::block(|done| tx.watch(&["p"], done)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Closed);
}

/// Steps of an interactive transaction started back to back, without waiting for each other, run
/// in the order they were started (each step is its own task, and core threads may pick them up
/// in any order): 30 INCRs count 1 to 30 in start order, one cancelled before its turn changes
/// nothing for the others, and the EXEC started last runs last.
#[test]
fn transaction_steps_started_back_to_back_run_in_start_order() {
    let topo = Topology::start(TopologySpec {
        replicas: 0,
        ..Default::default()
    })
    .unwrap();
    let handle = Handle::open_url::<&str, &str>(&topo.url(), &[]).unwrap();
    Handle::block(|done| handle.ready(done)).unwrap();
    for round in 0..5 {
        let key = format!("order:{round}");
        let tx = Handle::block(|done| handle.begin_transaction(None, done)).unwrap();
        let (sender, replies) = std::sync::mpsc::channel();
        let mut cancelled = None;
        for i in 0..30 {
            let sender = sender.clone();
            let op = tx.execute(
                &["INCR", key.as_str()],
                Box::new(move |r| {
                    let _ = sender.send((i, r));
                }),
            );
            if i == 10 {
                cancelled = Some(op);
            }
        }
        cancelled.unwrap().cancel();
        let sender_exec = sender.clone();
        let _exec = tx.exec(
            &[vec!["INCR", key.as_str()]],
            Box::new(move |r| {
                let _ = sender_exec.send((99, r.map(|v| Value::Array(v.unwrap_or_default()))));
            }),
        );
        drop(sender);
        let mut got: Vec<(usize, sentinel_recovery::Result<Value>)> = replies.iter().collect();
        got.sort_by_key(|(i, _)| *i);
        let mut expected = 1;
        for (i, r) in &got {
            match (i, r) {
                (10, Err(e)) if e.code() == ErrorCode::Closed => {}
                (99, Ok(Value::Array(v))) => {
                    assert_eq!(
                        v,
                        &vec![Value::Int(expected)],
                        "round {round}: EXEC ran last"
                    )
                }
                (_, Ok(Value::Int(n))) => {
                    assert_eq!(*n, expected, "round {round}: step {i} ran out of order");
                    expected += 1;
                }
                other => panic!("round {round}: step {other:?}"),
            }
        }
        assert_eq!(got.len(), 31, "round {round}: one completion per step");
    }
    handle.close_blocking();
}

#[test]
fn log_records_reach_the_sink_without_secrets() {
    let lines: Arc<Mutex<Vec<(i32, String, String)>>> = Arc::default();
    let sink = lines.clone();
    assert!(log::set_log_sink(
        Some(Arc::new(move |level, target: &str, message: &str| {
            sink.lock()
                .unwrap()
                .push((level, target.to_string(), message.to_string()));
        })),
        log::TRACE,
    ));
    let url = format!(
        "redis+sentinel://app:pw-Secret-42@127.0.0.1:{}/svc?sentinel_password=sent-Secret-43",
        refusing_port()
    );
    let handle = Handle::open_url(&url, &[("connect_timeout_ms", "200")]).unwrap();
    wait_until(LONG, "a warning about the unreachable sentinel", || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|(level, _, _)| *level >= log::WARN)
            .then_some(())
    })
    .unwrap();
    handle.close_blocking();
    log::set_log_sink(None, log::TRACE);
    let lines = lines.lock().unwrap();
    for (level, target, message) in lines.iter() {
        assert!(target.starts_with("sentinel_recovery"), "{target}");
        assert!([5, 10, 20, 30, 40].contains(level), "{level}");
        assert!(
            !message.contains("Secret-4"),
            "a secret reached the log: {message}"
        );
    }
}
