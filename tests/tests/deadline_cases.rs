//! The shared deadline cases (`tests/cases/deadlines.tsv`, which every binding's suite reads):
//! through the host layer's callback form (what the bindings use) and through the async
//! `Client`, each call ends by its deadline with the expected outcome, and afterwards no client
//! is left blocked on the server (a timed-out blocking command's connection was closed). A
//! subscribe that timed out or was cancelled leaves no connection behind; a cancelled doctor
//! closes its connections to the sentinels.

mod common;

use std::time::{Duration, Instant};

use common::*;
use sentinel_recovery::doctor::{Options as DoctorOptions, Status};
use sentinel_recovery::host::{Handle, Operation};
use sentinel_recovery::{Client, ErrorCode, EventKind, EventStream, Value};
use sentinel_recovery_testkit::{Node, StalledFailover, Topology, TopologySpec};

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
    Subscribe,
    Doctor,
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
    Failover,
    NoPrimary,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Timeout,
    Nil,
    Config,
    Cancelled,
    Failure,
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
    /// One command, or the commands of a pipeline / transaction; SUBSCRIBE and its channels;
    /// a doctor's options (`-` for none, `watch=SECONDS`).
    commands: Vec<Vec<String>>,
}

/// What a call ended with, whatever its kind.
#[derive(Debug, PartialEq)]
enum Got {
    /// A single command's reply.
    Reply(Value),
    /// A pipeline's or transaction's replies.
    Replies,
    /// A subscription, confirmed (and closed again at once).
    Subscribed,
    /// A doctor's report, by its status.
    Report(Status),
}

type Outcome = sentinel_recovery::Result<Got>;

impl Case {
    fn budget(&self) -> Duration {
        match (self.kind, self.deadline) {
            // Each of the doctor's steps waits for at most a connect and one reply.
            (Kind::Doctor, Deadline::Default) => 3 * self.timeout + SLACK,
            (_, Deadline::Default) => self.timeout + self.block + SLACK,
            _ => self.timeout + SLACK,
        }
    }

    /// A subscribe case's channels (the arguments after SUBSCRIBE).
    fn channels(commands: &[Vec<String>]) -> &[String] {
        &commands[0][1..]
    }

    /// A doctor case's options: `-` none, `watch=SECONDS` sampling that long.
    fn doctor_options(&self) -> DoctorOptions {
        let mut options = DoctorOptions::default();
        for option in &self.commands[0] {
            match option.split_once('=') {
                _ if option == "-" => {}
                Some(("watch", seconds)) => {
                    options.watch = Some(Duration::from_secs(seconds.parse().unwrap()));
                }
                _ => panic!("{}: doctor option {option:?}", self.name),
            }
        }
        options
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
        let option = if self.kind == Kind::Doctor {
            // The deadline of each of the doctor's probes.
            format!("connect_timeout_ms={}", self.timeout.as_millis())
        } else {
            format!("command_timeout_ms={default}")
        };
        match self.state {
            State::NoPrimary => format!("{NO_PRIMARY_URL}?{option}"),
            State::Healthy | State::Paused | State::Failover => url_with(&topo.url(), &option),
        }
    }

    fn check(&self, result: Outcome, took: Duration, form: &str) {
        println!("{} ({form}): ended after {took:?}", self.name);
        assert!(
            took <= self.budget(),
            "{} ({form}): ended after {took:?}, allowed {:?}",
            self.name,
            self.budget()
        );
        let code = match self.expect {
            Expect::Nil => {
                assert_eq!(
                    result.unwrap(),
                    Got::Reply(Value::Nil),
                    "{} ({form})",
                    self.name
                );
                return;
            }
            Expect::Failure => {
                let got = result.unwrap_or_else(|e| panic!("{} ({form}): {e}", self.name));
                assert_eq!(got, Got::Report(Status::Failure), "{} ({form})", self.name);
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
                    "subscribe" => Kind::Subscribe,
                    "doctor" => Kind::Doctor,
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
                    "failover" => State::Failover,
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
                    "failure" => Expect::Failure,
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

/// A number field of the primary's `INFO clients` (`blocked_clients`, `connected_clients`).
async fn clients_field(observer: &Client, field: &str) -> u64 {
    let info = observer.execute(&["INFO", "clients"]).await.unwrap();
    let text = match info.as_bytes() {
        Some(b) => String::from_utf8_lossy(b).into_owned(),
        None => panic!("INFO clients answered {info:?}"),
    };
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {text:?}"))
}

/// `blocked_clients` of the primary's `INFO clients`.
async fn blocked_clients(observer: &Client) -> u64 {
    clients_field(observer, "blocked_clients").await
}

/// Waits up to 5 s for `field` of `INFO clients` to be back to `before` or less.
async fn wait_back_to(observer: &Client, field: &str, before: u64, name: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    while clients_field(observer, field).await > before {
        assert!(
            Instant::now() < until,
            "{name}: {field} still above {before} 5 s after the call ended",
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_unblocked(observer: &Client, before: u64, case: &Case) {
    wait_back_to(observer, "blocked_clients", before, &case.name).await;
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
                let _ = tx.send(r.map(Got::Reply));
            }),
        ),
        Kind::Pipeline => handle.pipeline(
            commands,
            own,
            Box::new(move |r| {
                let _ = tx.send(r.map(|_| Got::Replies));
            }),
        ),
        Kind::Transaction => handle.transaction(
            commands,
            &[],
            own,
            Box::new(move |r| {
                let _ = tx.send(r.map(|_| Got::Replies));
            }),
        ),
        Kind::Subscribe => handle.subscribe(
            Case::channels(commands),
            &[],
            None,
            Box::new(move |r| {
                let _ = tx.send(r.map(|subscriber| {
                    subscriber.close();
                    Got::Subscribed
                }));
            }),
        ),
        Kind::Doctor => unreachable!("a doctor case runs without a client"),
    }
}

/// The case's call through the async `Client`.
async fn call_async(client: &Client, case: &Case, commands: &[Vec<String>]) -> Outcome {
    match (case.kind, case.own()) {
        (Kind::Command, Some(t)) => client
            .execute_timeout(&commands[0], t)
            .await
            .map(Got::Reply),
        (Kind::Command, None) => client.execute(&commands[0]).await.map(Got::Reply),
        (Kind::Pipeline, Some(t)) => client
            .pipeline_timeout(commands, t)
            .await
            .map(|_| Got::Replies),
        (Kind::Pipeline, None) => client.pipeline(commands).await.map(|_| Got::Replies),
        // Dropping the subscription closes it.
        (Kind::Subscribe, _) => client
            .subscribe(Case::channels(commands))
            .await
            .map(|_| Got::Subscribed),
        (Kind::Doctor, _) => unreachable!("a doctor case runs without a client"),
        (Kind::Transaction, own) => {
            let run = async {
                let mut tx = match own {
                    Some(t) => client.transaction_timeout(t).await?,
                    None => client.transaction().await?,
                };
                for c in commands {
                    tx.queue(c)?;
                }
                tx.exec().await
            };
            run.await.map(|_| Got::Replies)
        }
    }
}

/// The fault of a "paused" case (the current primary stopped) or a "failover" case (a failover
/// that can't finish); undone when dropped.
enum Fault<'a> {
    None,
    Paused(&'a Node),
    Failover(&'a Topology, StalledFailover),
}

impl<'a> Fault<'a> {
    fn new(topo: &'a Topology, case: &Case) -> Fault<'a> {
        match case.state {
            State::Paused => {
                let primary = topo.current_primary().expect("a primary before the case");
                primary.stop();
                Fault::Paused(primary)
            }
            State::Failover => Fault::Failover(topo, topo.stall_failover().unwrap()),
            State::Healthy | State::NoPrimary => Fault::None,
        }
    }
}

impl Drop for Fault<'_> {
    fn drop(&mut self) {
        match self {
            Fault::None => {}
            Fault::Paused(primary) => primary.cont(),
            Fault::Failover(topo, stalled) => {
                topo.release_failover(stalled, Duration::from_secs(30))
                    .unwrap();
            }
        }
    }
}

/// For a "failover" case, waits until the client heard that the failover began (its writes
/// are fenced until the promotion), so the call starts while it waits for that promotion.
/// `events` are the observer's: clients that differ only in data-path settings (here
/// `command_timeout_ms`) share one monitor, so the case's client heard it at the same moment.
async fn announced(events: &mut EventStream, case: &Case) {
    if case.state != State::Failover {
        return;
    }
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(until, events.next()).await {
            Ok(Some(e)) if matches!(e.kind, EventKind::FailoverStarted { .. }) => return,
            Ok(Some(_)) => {}
            _ => panic!(
                "{}: no failover_started within 10 s of the stall",
                case.name
            ),
        }
    }
}

/// After a paused or failover case: the same client works again once the fault is undone.
async fn works_again(
    call: impl std::future::Future<Output = sentinel_recovery::Result<Value>>,
    case: &Case,
) {
    let r = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap_or_else(|_| panic!("{}: no reply 10 s after the fault was undone", case.name));
    assert_eq!(r.unwrap(), Value::Simple("PONG".into()), "{}", case.name);
}

/// The primary's clients that are neither sentinels nor replicas (`CLIENT LIST`): the
/// connections of this suite's clients and subscriptions.
async fn app_clients(observer: &Client) -> usize {
    let list = observer.execute(&["CLIENT", "LIST"]).await.unwrap();
    let text = match list.as_bytes() {
        Some(b) => String::from_utf8_lossy(b).into_owned(),
        None => panic!("CLIENT LIST answered {list:?}"),
    };
    text.lines()
        .filter(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or("")
                    .to_string()
            };
            !field("name=").starts_with("sentinel-") && !field("flags=").contains('S')
        })
        .count()
}

/// This process's TCP sockets connected or connecting to loopback port `port` (its own file
/// descriptors' socket inodes, looked up in the kernel's table).
fn own_sockets_to(port: u16) -> usize {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|link| {
            let link = link.to_str()?.to_string();
            Some(
                link.strip_prefix("socket:[")?
                    .trim_end_matches(']')
                    .to_string(),
            )
        })
        .collect();
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let remote_port = f[2]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // 01 established, 02 SYN sent.
            remote_port == Some(port) && matches!(f[3], "01" | "02") && inodes.contains(f[9])
        })
        .count()
}

/// This process's sockets to the paused primary of a "paused" case (0 for other cases).
fn primary_sockets(fault: &Fault<'_>) -> usize {
    match fault {
        Fault::Paused(primary) => own_sockets_to(primary.port()),
        Fault::None | Fault::Failover(..) => 0,
    }
}

/// While a subscribe case's primary is still paused: the connection the subscription was
/// making is dropped once the call ended (timed out or cancelled), not when its connect would
/// have timed out (`connect_timeout_ms`, 2 s by default, longer than the case). `before`: this
/// process's sockets to the primary before the call.
async fn no_subscriber_socket_left(fault: &Fault<'_>, before: usize, case: &Case) {
    let (Fault::Paused(primary), Kind::Subscribe) = (fault, case.kind) else {
        return;
    };
    let until = Instant::now() + Duration::from_millis(500);
    while own_sockets_to(primary.port()) > before {
        assert!(
            Instant::now() < until,
            "{}: the subscription's connection to the paused primary is still open",
            case.name
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// After a subscribe case on a paused primary: the connection the subscription opened is gone
/// once the primary continued (its task ended with the timeout or the cancel, instead of
/// subscribing when the primary answers again). The primary of a failover case changed, and
/// nothing reached a server in a no-primary case.
async fn no_subscriber_left(observer: &Client, before: usize, case: &Case) {
    if case.kind != Kind::Subscribe || case.state != State::Paused {
        return;
    }
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let now = app_clients(observer).await;
        if now <= before {
            return;
        }
        if Instant::now() >= until {
            let list = observer.execute(&["CLIENT", "LIST"]).await.unwrap();
            panic!(
                "{}: {now} clients (before: {before}) 5 s after the call ended: {list:?}",
                case.name
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `connected_clients` of every sentinel's `INFO clients`, summed.
fn sentinel_clients(topo: &Topology) -> u64 {
    topo.sentinels()
        .iter()
        .map(|s| {
            let info = s.info("clients").unwrap();
            info["connected_clients"].parse::<u64>().unwrap()
        })
        .sum()
}

/// After a cancelled doctor: its connections to the sentinels close within 5 s (the diagnosis
/// stopped, rather than sampling on for the rest of its watch).
async fn doctor_stopped(topo: &Topology, before: u64, case: &Case, form: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let now = sentinel_clients(topo);
        if now <= before {
            return;
        }
        assert!(
            Instant::now() < until,
            "{} ({form}): the sentinels still have {now} clients (before: {before}) 5 s after \
             the cancel",
            case.name
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A doctor case: the host's doctor operation (what every binding calls), cancelled with
/// `Operation::cancel`, then `doctor::run`, cancelled by dropping its future.
async fn doctor_case(topo: &Topology, observer: &Client, case: &Case) {
    let url = case.url(topo);
    let status = |s: &str| match s {
        "healthy" => Status::Healthy,
        "warning" => Status::Warning,
        "failure" => Status::Failure,
        other => panic!("a diagnosis with status {other:?}"),
    };

    // The callback form.
    let config = sentinel_recovery::host::config_from_url::<&str, &str>(&url, &[]).unwrap();
    let before = sentinel_clients(topo);
    let mut events = observer.events().unwrap();
    let fault = Fault::new(topo, case);
    announced(&mut events, case).await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let start = Instant::now();
    let op = sentinel_recovery::host::doctor(
        config,
        case.doctor_options(),
        Box::new(move |r| {
            let _ = tx.send(r.map(|d| Got::Report(status(d.status))));
        }),
    );
    let result = completion(&op, rx, case).await;
    let took = start.elapsed();
    drop(fault);
    case.check(result, took, "callback");
    if case.deadline == Deadline::Cancel {
        doctor_stopped(topo, before, case, "callback").await;
    }

    // The async form; cancelling is dropping the future.
    let before = sentinel_clients(topo);
    let mut events = observer.events().unwrap();
    let fault = Fault::new(topo, case);
    announced(&mut events, case).await;
    let start = Instant::now();
    let call = async {
        sentinel_recovery::doctor::run(url.as_str(), case.doctor_options())
            .await
            .map(|report| Got::Report(report.verdict.status))
    };
    if case.deadline == Deadline::Cancel {
        let dropped = tokio::time::timeout(case.timeout, call).await;
        assert!(
            dropped.is_err(),
            "{} (async): ended before the cancel",
            case.name
        );
        drop(fault);
        doctor_stopped(topo, before, case, "async").await;
    } else {
        let result = tokio::time::timeout(case.budget() + SLACK, call)
            .await
            .unwrap_or_else(|_| panic!("{} (async): did not end", case.name));
        let took = start.elapsed();
        drop(fault);
        case.check(result, took, "async");
    }
}

#[test]
fn every_shared_deadline_case_ends_by_its_deadline_and_leaves_nothing_blocked() {
    // A down-after far longer than any case: a paused primary stays the primary (no failover);
    // a failover-timeout as long: a stalled failover is not aborted while a case runs.
    let topo = Topology::start(TopologySpec {
        replicas: 1,
        down_after_ms: 60_000,
        failover_timeout_ms: 60_000,
        ..Default::default()
    })
    .unwrap();
    rt().block_on(async {
        let observer = Client::connect(&topo.url()).await.unwrap();
        for (serial, case) in cases().iter().enumerate() {
            if case.kind == Kind::Doctor {
                doctor_case(&topo, &observer, case).await;
                continue;
            }
            let url = case.url(&topo);

            // The callback form, as every binding calls it.
            let handle = Handle::open_url::<&str, &str>(&url, &[]).unwrap();
            let (tx, rx) = tokio::sync::oneshot::channel();
            if case.state != State::NoPrimary {
                let ready = Handle::block(|done| handle.ready(done));
                ready.unwrap_or_else(|e| panic!("{}: not ready: {e}", case.name));
            }
            if case.kind == Kind::Subscribe && case.state == State::Paused {
                // The client's own connection, opened before the clients are counted.
                Handle::block(|done| handle.execute(&["PING"], None, done)).unwrap();
            }
            let before = blocked_clients(&observer).await;
            let connected = app_clients(&observer).await;
            let commands = case.commands(2 * serial);
            let mut events = observer.events().unwrap();
            let fault = Fault::new(&topo, case);
            let sockets = primary_sockets(&fault);
            announced(&mut events, case).await;
            let start = Instant::now();
            let op = start_callback(&handle, case, &commands, tx);
            let result = completion(&op, rx, case).await;
            let took = start.elapsed();
            no_subscriber_socket_left(&fault, sockets, case).await;
            drop(fault);
            case.check(result, took, "callback");
            if matches!(case.state, State::Paused | State::Failover) {
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
            no_subscriber_left(&observer, connected, case).await;
            handle.close_blocking();

            // The async client; cancelling is dropping the future.
            let client = match case.state {
                // Opened without waiting: connect would fail, as no primary is ever found.
                State::NoPrimary => Client::open_url(&url).unwrap(),
                State::Healthy | State::Paused | State::Failover => {
                    Client::connect(&url).await.unwrap()
                }
            };
            if case.kind == Kind::Subscribe && case.state == State::Paused {
                client.execute(&["PING"]).await.unwrap();
            }
            let before = blocked_clients(&observer).await;
            let connected = app_clients(&observer).await;
            let commands = case.commands(2 * serial + 1);
            let mut events = observer.events().unwrap();
            let fault = Fault::new(&topo, case);
            let sockets = primary_sockets(&fault);
            announced(&mut events, case).await;
            let start = Instant::now();
            let call = call_async(&client, case, &commands);
            if case.deadline == Deadline::Cancel {
                let dropped = tokio::time::timeout(case.timeout, call).await;
                assert!(
                    dropped.is_err(),
                    "{} (async): ended before the cancel",
                    case.name
                );
                no_subscriber_socket_left(&fault, sockets, case).await;
                drop(fault);
            } else {
                let result = tokio::time::timeout(case.budget() + SLACK, call)
                    .await
                    .unwrap_or_else(|_| panic!("{} (async): did not end", case.name));
                let took = start.elapsed();
                no_subscriber_socket_left(&fault, sockets, case).await;
                drop(fault);
                case.check(result, took, "async");
            }
            if matches!(case.state, State::Paused | State::Failover) {
                works_again(client.execute(&["PING"]), case).await;
            }
            wait_unblocked(&observer, before, case).await;
            no_subscriber_left(&observer, connected, case).await;
            client.close().await;
        }
    });
}

/// A transaction begun with a timeout of its own (the interactive form every binding's
/// `begin` uses, and the async `Client`'s): one deadline from the begin until EXEC's reply.
/// A step past it fails with `timeout` and ends the transaction, whose connection closes; an
/// EXEC a paused primary does not answer in time fails with `timeout`, outcome unknown.
#[test]
fn an_interactive_transaction_ends_by_its_own_deadline() {
    let topo = Topology::start(TopologySpec {
        replicas: 0,
        down_after_ms: 60_000,
        ..Default::default()
    })
    .unwrap();
    let url = url_with(
        &topo.url(),
        &format!("command_timeout_ms={LONG_DEFAULT_MS}"),
    );
    let ms = Duration::from_millis;
    rt().block_on(async {
        let observer = Client::connect(&topo.url()).await.unwrap();
        let handle = Handle::open_url::<&str, &str>(&url, &[]).unwrap();
        Handle::block(|done| handle.execute(&["PING"], None, done)).unwrap();
        let connected = clients_field(&observer, "connected_clients").await;

        // Time spent between steps counts: the next step is out of time, and ends it.
        let tx = Handle::block(|done| handle.begin_transaction(Some(ms(400)), done)).unwrap();
        Handle::block(|done| tx.watch(&["itx:a"], done)).unwrap();
        assert_eq!(
            Handle::block(|done| tx.execute(&["GET", "itx:a"], done)).unwrap(),
            Value::Nil
        );
        tokio::time::sleep(ms(500)).await;
        let e = Handle::block(|done| tx.execute(&["GET", "itx:a"], done)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
        assert!(e.message().contains("deadline passed"), "{e}");
        let e = Handle::block(|done| tx.exec(&[vec!["SET", "itx:a", "1"]], done)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Config, "{e}");
        assert!(e.message().contains("has ended"), "{e}");
        wait_back_to(
            &observer,
            "connected_clients",
            connected,
            "step past the deadline",
        )
        .await;

        // EXEC on a paused primary: timeout by the deadline, outcome unknown; the connection
        // is closed and the client works again once the primary continues.
        let tx = Handle::block(|done| handle.begin_transaction(Some(ms(300)), done)).unwrap();
        let start = Instant::now();
        topo.primary().stop();
        let e = Handle::block(|done| tx.exec(&[vec!["SET", "itx:b", "1"]], done)).unwrap_err();
        let took = start.elapsed();
        topo.primary().cont();
        assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
        assert!(e.message().contains("outcome unknown"), "{e}");
        assert!(took <= ms(300) + SLACK, "EXEC ended after {took:?}");
        let e = Handle::block(|done| tx.watch(&["itx:b"], done)).unwrap_err();
        assert!(e.message().contains("has ended"), "{e}");
        assert_eq!(
            Handle::block(|done| handle.execute(&["PING"], None, done)).unwrap(),
            Value::Simple("PONG".into())
        );
        wait_back_to(
            &observer,
            "connected_clients",
            connected,
            "EXEC past the deadline",
        )
        .await;

        // The rule every per-call timeout keeps.
        let e = Handle::block(|done| handle.begin_transaction(Some(Duration::ZERO), done));
        assert_eq!(e.err().map(|e| e.code()), Some(ErrorCode::Config));
        handle.close_blocking();

        // No primary: the begin waits for one until the deadline.
        let lost = Handle::open_url::<&str, &str>(
            &format!("{NO_PRIMARY_URL}?command_timeout_ms={LONG_DEFAULT_MS}"),
            &[],
        )
        .unwrap();
        let start = Instant::now();
        let e = Handle::block(|done| lost.begin_transaction(Some(ms(300)), done));
        assert_eq!(e.err().map(|e| e.code()), Some(ErrorCode::Timeout));
        assert!(start.elapsed() <= ms(300) + SLACK);
        lost.close_blocking();

        // The async client: the same deadline through Client::transaction_timeout.
        let client = Client::connect(&url).await.unwrap();
        let mut tx = client.transaction_timeout(ms(400)).await.unwrap();
        tx.watch(&["itx:c"]).await.unwrap();
        tokio::time::sleep(ms(500)).await;
        let e = tx.execute(&["GET", "itx:c"]).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
        assert!(tx.is_ended());
        let e = tx.queue(&["SET", "itx:c", "1"]).err().unwrap();
        assert!(e.message().contains("has ended"), "{e}");
        let e = tx.exec().await.unwrap_err();
        assert!(e.message().contains("has ended"), "{e}");
        assert_eq!(
            client
                .transaction_timeout(Duration::ZERO)
                .await
                .err()
                .map(|e| e.code()),
            Some(ErrorCode::Config)
        );
        client.close().await;
        observer.close().await;
    });
}

/// The completion of a callback-form call started as `op`: for a "cancel" case, `op` is
/// cancelled the case's timeout after it started; either way it must complete within the case's
/// budget and the slack.
async fn completion<T>(op: &Operation, rx: tokio::sync::oneshot::Receiver<T>, case: &Case) -> T {
    if case.deadline == Deadline::Cancel {
        tokio::time::sleep(case.timeout).await;
        op.cancel();
    }
    tokio::time::timeout(case.budget() + SLACK, rx)
        .await
        .unwrap_or_else(|_| panic!("{} (callback): no completion", case.name))
        .unwrap()
}
