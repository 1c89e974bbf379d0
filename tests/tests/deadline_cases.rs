//! The shared deadline cases (`tests/cases/deadlines.tsv`, which every binding's suite reads):
//! through the host layer's callback form (what the bindings use) and through the async
//! `Client`, each call ends by its deadline with the expected outcome, and afterwards no client
//! is left blocked on the server (a timed-out blocking command's connection was closed).

mod common;

use std::time::{Duration, Instant};

use common::*;
use sentinel_recovery::host::{Handle, Operation};
use sentinel_recovery::{Client, ErrorCode, Value};
use sentinel_recovery_testkit::{Topology, TopologySpec};

/// What a call may take beyond its deadline (scheduling on a busy 2-core machine).
const SLACK: Duration = Duration::from_millis(1000);
/// The client default of a per-call or cancel case: long, so only the call's own timeout (or
/// the cancel) can end it.
const LONG_DEFAULT_MS: u64 = 30_000;
/// The client of a "no-primary" case: its only sentinel is a loopback port nobody listens on.
const NO_PRIMARY_URL: &str = "redis+sentinel://127.0.0.1:1/mymaster";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Command,
    Pipeline,
    Transaction,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Deadline {
    PerCall,
    Default,
    Cancel,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Healthy,
    Paused,
    NoPrimary,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Timeout,
    Nil,
    Config,
    Cancelled,
}

#[derive(Debug)]
struct Case {
    name: String,
    kind: Kind,
    deadline: Deadline,
    state: State,
    timeout: Duration,
    block: Duration,
    expect: Expect,
    /// One command, or the commands of a pipeline / transaction.
    commands: Vec<Vec<String>>,
}

/// What a call ended with, whatever its kind: `Ok(Some(v))` a single reply, `Ok(None)` a
/// pipeline's or transaction's replies.
type Outcome = sentinel_recovery::Result<Option<Value>>;

impl Case {
    fn budget(&self) -> Duration {
        let block = if self.deadline == Deadline::Default {
            self.block
        } else {
            Duration::ZERO
        };
        self.timeout + block + SLACK
    }

    fn commands(&self, serial: usize) -> Vec<Vec<String>> {
        let key = format!("deadline-case:{}:{serial}", self.name);
        self.commands
            .iter()
            .map(|c| c.iter().map(|a| a.replace("{key}", &key)).collect())
            .collect()
    }

    fn own(&self) -> Option<Duration> {
        (self.deadline == Deadline::PerCall).then_some(self.timeout)
    }

    fn url(&self, topo: &Topology) -> String {
        let default = if self.deadline == Deadline::Default {
            self.timeout.as_millis() as u64
        } else {
            LONG_DEFAULT_MS
        };
        let option = format!("command_timeout_ms={default}");
        match self.state {
            State::NoPrimary => format!("{NO_PRIMARY_URL}?{option}"),
            State::Healthy | State::Paused => url_with(&topo.url(), &option),
        }
    }

    fn check(&self, result: Outcome, took: Duration, form: &str) {
        assert!(
            took <= self.budget(),
            "{} ({form}): ended after {took:?}, allowed {:?}",
            self.name,
            self.budget()
        );
        let code = match self.expect {
            Expect::Nil => {
                assert_eq!(result.unwrap(), Some(Value::Nil), "{} ({form})", self.name);
                return;
            }
            Expect::Timeout => ErrorCode::Timeout,
            Expect::Config => ErrorCode::Config,
            // Operation::cancel's documented outcome: `closed`, "cancelled by the caller".
            Expect::Cancelled => ErrorCode::Closed,
        };
        let e = result.expect_err(&format!(
            "{} ({form}): expected {:?}",
            self.name, self.expect
        ));
        assert_eq!(e.code(), code, "{} ({form}): {e}", self.name);
    }
}

fn cases() -> Vec<Case> {
    let path = "deadlines.tsv";
    case_rows(path, 8, 18)
        .into_iter()
        .map(|f| {
            let ms = |f: &str| Duration::from_millis(f.parse().unwrap());
            Case {
                name: f[0].clone(),
                kind: match f[1].as_str() {
                    "command" => Kind::Command,
                    "pipeline" => Kind::Pipeline,
                    "transaction" => Kind::Transaction,
                    other => panic!("{path}: kind {other:?}"),
                },
                deadline: match f[2].as_str() {
                    "per-call" => Deadline::PerCall,
                    "default" => Deadline::Default,
                    "cancel" => Deadline::Cancel,
                    other => panic!("{path}: deadline {other:?}"),
                },
                state: match f[3].as_str() {
                    "healthy" => State::Healthy,
                    "paused" => State::Paused,
                    "no-primary" => State::NoPrimary,
                    other => panic!("{path}: state {other:?}"),
                },
                timeout: ms(&f[4]),
                block: ms(&f[5]),
                expect: match f[6].as_str() {
                    "timeout" => Expect::Timeout,
                    "nil" => Expect::Nil,
                    "config" => Expect::Config,
                    "cancelled" => Expect::Cancelled,
                    other => panic!("{path}: expect {other:?}"),
                },
                commands: f[7]
                    .split(" ; ")
                    .map(|c| c.split(' ').map(str::to_string).collect())
                    .collect(),
            }
        })
        .collect()
}

/// `blocked_clients` of the primary's `INFO clients`.
async fn blocked_clients(observer: &Client) -> u64 {
    let info = observer.execute(&["INFO", "clients"]).await.unwrap();
    let text = match info.as_bytes() {
        Some(b) => String::from_utf8_lossy(b).into_owned(),
        None => panic!("INFO clients answered {info:?}"),
    };
    text.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no blocked_clients in {text:?}"))
}

async fn wait_unblocked(observer: &Client, before: u64, case: &Case) {
    let until = Instant::now() + Duration::from_secs(5);
    while blocked_clients(observer).await > before {
        assert!(
            Instant::now() < until,
            "{}: the server still blocks a client 5 s after the call ended",
            case.name
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts the case's call through the host layer's callback form.
fn start_callback(
    handle: &Handle,
    case: &Case,
    commands: &[Vec<String>],
    tx: tokio::sync::oneshot::Sender<Outcome>,
) -> Operation {
    let own = case.own();
    match case.kind {
        Kind::Command => handle.execute(
            &commands[0],
            own,
            Box::new(move |r| {
                let _ = tx.send(r.map(Some));
            }),
        ),
        Kind::Pipeline => handle.pipeline(
            commands,
            own,
            Box::new(move |r| {
                let _ = tx.send(r.map(|_| None));
            }),
        ),
        Kind::Transaction => {
            assert!(
                own.is_none(),
                "{}: no per-call transaction deadline",
                case.name
            );
            handle.transaction(
                commands,
                &[],
                Box::new(move |r| {
                    let _ = tx.send(r.map(|_| None));
                }),
            )
        }
    }
}

/// The case's call through the async `Client`; `None` with the reason when it has no such API.
async fn call_async(
    client: &Client,
    case: &Case,
    commands: &[Vec<String>],
) -> Result<Outcome, &'static str> {
    Ok(match (case.kind, case.own()) {
        (Kind::Command, Some(t)) => client.execute_timeout(&commands[0], t).await.map(Some),
        (Kind::Command, None) => client.execute(&commands[0]).await.map(Some),
        (Kind::Pipeline, Some(_)) => return Err("Client::pipeline has no per-call deadline"),
        (Kind::Pipeline, None) => client.pipeline(commands).await.map(|_| None),
        (Kind::Transaction, _) => {
            let run = async {
                let mut tx = client.transaction().await?;
                for c in commands {
                    tx.queue(c)?;
                }
                tx.exec().await
            };
            run.await.map(|_| None)
        }
    })
}

/// Stops the primary for a "paused" case; continues it when dropped.
struct Paused<'a>(Option<&'a Topology>);

impl<'a> Paused<'a> {
    fn new(topo: &'a Topology, case: &Case) -> Paused<'a> {
        if case.state == State::Paused {
            topo.primary().stop();
            Paused(Some(topo))
        } else {
            Paused(None)
        }
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        if let Some(topo) = self.0.take() {
            topo.primary().cont();
        }
    }
}

/// After a paused case: the same client works again once the primary is continued.
async fn works_again(
    call: impl std::future::Future<Output = sentinel_recovery::Result<Value>>,
    case: &Case,
) {
    let r = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap_or_else(|_| panic!("{}: no reply 10 s after the primary continued", case.name));
    assert_eq!(r.unwrap(), Value::Simple("PONG".into()), "{}", case.name);
}

#[test]
fn every_shared_deadline_case_ends_by_its_deadline_and_leaves_nothing_blocked() {
    // A down-after far longer than any case: a paused primary stays the primary (no failover).
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        down_after_ms: 60_000,
        ..Default::default()
    })
    .unwrap();
    rt().block_on(async {
        let observer = Client::connect(&topo.url()).await.unwrap();
        for (serial, case) in cases().iter().enumerate() {
            let url = case.url(&topo);

            // The callback form, as every binding calls it.
            let handle = Handle::open_url::<&str, &str>(&url, &[]).unwrap();
            let (tx, rx) = tokio::sync::oneshot::channel();
            if case.state != State::NoPrimary {
                let ready = Handle::block(|done| handle.ready(done));
                ready.unwrap_or_else(|e| panic!("{}: not ready: {e}", case.name));
            }
            let before = blocked_clients(&observer).await;
            let commands = case.commands(2 * serial);
            let paused = Paused::new(&topo, case);
            let start = Instant::now();
            let op = start_callback(&handle, case, &commands, tx);
            if case.deadline == Deadline::Cancel {
                tokio::time::sleep(case.timeout).await;
                op.cancel();
            }
            let result = tokio::time::timeout(case.budget() + SLACK, rx)
                .await
                .unwrap_or_else(|_| panic!("{} (callback): no completion", case.name))
                .unwrap();
            let took = start.elapsed();
            drop(paused);
            case.check(result, took, "callback");
            if case.state == State::Paused {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let _op = handle.execute(
                    &["PING"],
                    None,
                    Box::new(move |r| {
                        let _ = tx.send(r);
                    }),
                );
                works_again(async { rx.await.unwrap() }, case).await;
            }
            wait_unblocked(&observer, before, case).await;
            handle.close_blocking();

            // The async client; cancelling is dropping the future.
            let client = match case.state {
                // Opened without waiting: connect would fail, as no primary is ever found.
                State::NoPrimary => Client::open_url(&url).unwrap(),
                State::Healthy | State::Paused => Client::connect(&url).await.unwrap(),
            };
            let before = blocked_clients(&observer).await;
            let commands = case.commands(2 * serial + 1);
            let paused = Paused::new(&topo, case);
            let start = Instant::now();
            let call = call_async(&client, case, &commands);
            if case.deadline == Deadline::Cancel {
                let dropped = tokio::time::timeout(case.timeout, call).await;
                assert!(
                    dropped.is_err(),
                    "{} (async): ended before the cancel",
                    case.name
                );
                drop(paused);
            } else {
                let result = tokio::time::timeout(case.budget() + SLACK, call)
                    .await
                    .unwrap_or_else(|_| panic!("{} (async): did not end", case.name));
                let took = start.elapsed();
                drop(paused);
                match result {
                    Ok(result) => case.check(result, took, "async"),
                    Err(why) => println!("skip {} (async): {why}", case.name),
                }
            }
            if case.state == State::Paused {
                works_again(client.execute(&["PING"]), case).await;
            }
            wait_unblocked(&observer, before, case).await;
            client.close().await;
        }
    });
}
