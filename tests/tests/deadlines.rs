//! Every completion is delivered by its deadline: several clients on one monitor, commands in
//! flight through the callback form (what the C, Python, Node and .NET bindings use) and through
//! the async form when the primary is killed with -9. A completion that never comes, or comes
//! later than the command's deadline plus a slack, fails the test.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use sentinel_recovery::host::Handle;
use sentinel_recovery::{Client, ErrorCode, EventKind, Result, Value};
use sentinel_recovery_testkit::{Topology, TopologySpec};

/// `command_timeout_ms` of every client: small, so the test stays short.
const TIMEOUT: Duration = Duration::from_millis(3000);
/// What a completion may take beyond its deadline (scheduling on a busy 2-core machine).
const SLACK: Duration = Duration::from_millis(2000);
const WRITERS: usize = 16;
const FAILOVER: Duration = Duration::from_secs(40);

/// The two ways a command is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Callback,
    Async,
}

/// Every command issued: pending ones with their start, and what the settled ones did.
#[derive(Default)]
struct Ledger {
    next: AtomicU64,
    pending: Mutex<HashMap<u64, (Form, Instant)>>,
    /// Completions later than deadline + slack, and errors other than timeout/connection_lost.
    wrong: Mutex<Vec<String>>,
    /// Successful replies per form.
    ok_callback: AtomicU64,
    ok_async: AtomicU64,
    /// Errors seen (code names), for the failure message.
    errors: Mutex<HashMap<String, u64>>,
}

impl Ledger {
    fn start(&self, form: Form) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.pending
            .lock()
            .unwrap()
            .insert(id, (form, Instant::now()));
        id
    }

    fn settle(&self, id: u64, result: &Result<Value>) {
        let Some((form, started)) = self.pending.lock().unwrap().remove(&id) else {
            self.wrong
                .lock()
                .unwrap()
                .push(format!("command {id} completed twice"));
            return;
        };
        let took = started.elapsed();
        if took > TIMEOUT + SLACK {
            self.wrong.lock().unwrap().push(format!(
                "{form:?} command {id} completed after {took:?}, past its {TIMEOUT:?} deadline \
                 + {SLACK:?}: {result:?}"
            ));
        }
        match result {
            Ok(_) => {
                let ok = match form {
                    Form::Callback => &self.ok_callback,
                    Form::Async => &self.ok_async,
                };
                ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                *self
                    .errors
                    .lock()
                    .unwrap()
                    .entry(e.code().as_str().to_string())
                    .or_default() += 1;
                if !matches!(e.code(), ErrorCode::Timeout | ErrorCode::ConnectionLost) {
                    self.wrong
                        .lock()
                        .unwrap()
                        .push(format!("{form:?} command {id}: unexpected error {e}"));
                }
            }
        }
    }

    /// Whether a command is still pending past its deadline plus the slack.
    fn overdue(&self) -> bool {
        self.pending
            .lock()
            .unwrap()
            .values()
            .any(|(_, started)| started.elapsed() > TIMEOUT + SLACK)
    }

    fn acked(&self) -> u64 {
        self.ok_callback.load(Ordering::Relaxed) + self.ok_async.load(Ordering::Relaxed)
    }

    /// Pending commands started before `at`, as "form id age" lines.
    fn pending_since(&self, at: Instant) -> Vec<String> {
        self.pending
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, (_, started))| *started <= at)
            .map(|(id, (form, started))| {
                format!("{form:?} {id} pending for {:?}", started.elapsed())
            })
            .collect()
    }
}

/// One INCR through the callback form; its completion goes to `done` with its ledger id.
fn issue_callback(
    handle: &Handle,
    ledger: &Arc<Ledger>,
    done: &tokio::sync::mpsc::UnboundedSender<(u64, Result<Value>)>,
) {
    let id = ledger.start(Form::Callback);
    let done = done.clone();
    handle.execute(
        &["INCR", "deadlines:counter"],
        None,
        Box::new(move |result| {
            // Only a copy on the core thread: the test's own runtime does the rest.
            let _ = done.send((id, result));
        }),
    );
}

/// `clients` clients on one URL (one monitor); 16 callback writers and 16 async writers on the
/// first, the others idle except one sending PING every 500 ms through the callback form. The
/// primary is killed with -9 while all of that is in flight.
fn in_flight_commands_settle_by_their_deadline(clients: usize) {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let url = url_with(
        &topo.url(),
        &format!("command_timeout_ms={}", TIMEOUT.as_millis()),
    );
    rt().block_on(async {
        let mut all = Vec::new();
        for _ in 0..clients {
            all.push(Client::connect(&url).await.unwrap());
        }
        let first = all[0].clone();
        // The callback form, as the bindings use it: host handles on the same URL, so every one
        // of them shares the clients' monitor.
        let handles: Vec<Handle> = (0..2)
            .map(|_| Handle::open_url::<&str, &str>(&url, &[]).unwrap())
            .collect();
        let mut events = first.events().unwrap();
        let ledger = Arc::new(Ledger::default());
        let stop = Arc::new(AtomicBool::new(false));

        // Callback writers: each completion (a copy sent by the callback) starts the next command.
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..WRITERS {
            issue_callback(&handles[0], &ledger, &done_tx);
        }
        let callback_driver = {
            let (handle, ledger, stop) = (handles[0].clone(), ledger.clone(), stop.clone());
            tokio::spawn(async move {
                while let Some((id, result)) = done_rx.recv().await {
                    let failed = result.is_err();
                    ledger.settle(id, &result);
                    if stop.load(Ordering::Relaxed) {
                        continue;
                    }
                    if failed {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    issue_callback(&handle, &ledger, &done_tx);
                }
            })
        };
        // Async writers.
        let async_writers: Vec<_> = (0..WRITERS)
            .map(|_| {
                let (client, ledger, stop) = (first.clone(), ledger.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let id = ledger.start(Form::Async);
                        let result = client.execute(&["INCR", "deadlines:counter"]).await;
                        let failed = result.is_err();
                        ledger.settle(id, &result);
                        if failed {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                })
            })
            .collect();
        // Another client of the same monitor sends a PING every 500 ms; the rest stay idle.
        let pinger = Some(handles[1].clone()).map(|handle| {
            let (ledger, stop) = (ledger.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let id = ledger.start(Form::Callback);
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    handle.execute(
                        &["PING"],
                        None,
                        Box::new(move |r| {
                            let _ = tx.send(r);
                        }),
                    );
                    if let Ok(result) = rx.await {
                        ledger.settle(id, &result);
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
        });

        wait_until_async(Duration::from_secs(15), "writes before the kill", || {
            ledger.ok_callback.load(Ordering::Relaxed) > 200
                && ledger.ok_async.load(Ordering::Relaxed) > 200
        })
        .await;
        let old = addr(topo.primary());
        topo.primary().kill9();
        let killed_at = Instant::now();
        let in_flight_at_kill = ledger.pending_since(killed_at).len();

        // The client follows the failover, and writes succeed again on the new primary.
        wait_event(
            &mut events,
            FAILOVER,
            |e| matches!(&e.kind, EventKind::PrimaryChanged { old: Some(o), .. } if *o == old),
        )
        .await;
        let acked_after_switch = ledger.acked();
        // (Or a command is overdue: then the assertion below says which.)
        wait_until_async(FAILOVER, "writes after the failover", || {
            ledger.acked() > acked_after_switch + 100 || ledger.overdue()
        })
        .await;
        stop.store(true, Ordering::Relaxed);

        // Every command settles, each by its own deadline plus the slack: wait for that state,
        // bounded by the latest deadline of anything still pending.
        let stopped_at = Instant::now();
        let settle_by = stopped_at + TIMEOUT + SLACK + Duration::from_millis(500);
        loop {
            let empty = ledger.pending.lock().unwrap().is_empty();
            if empty || Instant::now() > settle_by {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let never = ledger.pending_since(stopped_at);
        let wrong = ledger.wrong.lock().unwrap().clone();
        let errors = ledger.errors.lock().unwrap().clone();
        assert!(
            never.is_empty() && wrong.is_empty(),
            "{clients} clients, {in_flight_at_kill} commands in flight at the kill; \
             not settled by deadline + slack: {never:#?}; wrong: {wrong:#?}; errors: {errors:?}"
        );
        assert!(
            in_flight_at_kill > 0,
            "the kill found commands in flight (else the test shows nothing)"
        );

        for writer in async_writers {
            writer.await.unwrap();
        }
        if let Some(p) = pinger {
            p.await.unwrap();
        }
        // Everything settled, so the callback driver only waits on its own sender now.
        callback_driver.abort();
        for client in &all {
            client.close().await;
        }
        for handle in &handles {
            handle.close_blocking();
        }
    });
}

/// Polls `check` every 20 ms until it holds; panics after `timeout`.
async fn wait_until_async(timeout: Duration, what: &str, check: impl Fn() -> bool) {
    let end = Instant::now() + timeout;
    while !check() {
        assert!(
            Instant::now() < end,
            "{what}: not reached within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn two_clients_on_one_monitor_settle_in_flight_commands_at_a_kill_9() {
    in_flight_commands_settle_by_their_deadline(2);
}

#[test]
fn eight_clients_on_one_monitor_settle_in_flight_commands_at_a_kill_9() {
    in_flight_commands_settle_by_their_deadline(8);
}
