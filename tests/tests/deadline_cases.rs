//! The shared deadline cases (`tests/cases/deadlines.tsv`, which every binding's suite reads):
//! through the host layer's callback form (what the bindings use) and through the async
//! `Client`, each call ends by its deadline with the expected outcome, and afterwards no client
//! is left blocked on the server (a timed-out blocking command's connection was closed).

mod common;

use std::time::{Duration, Instant};

use common::*;
use sentinel_recovery::host::Handle;
use sentinel_recovery::{Client, ErrorCode, Value};
use sentinel_recovery_testkit::{Topology, TopologySpec};

/// What a call may take beyond its deadline (scheduling on a busy 2-core machine).
const SLACK: Duration = Duration::from_millis(1000);
/// The client default of a per-call case: long, so only the call's own timeout can end it.
const LONG_DEFAULT_MS: u64 = 30_000;

#[derive(Debug)]
struct Case {
    name: String,
    /// The call's own timeout (true) or the client's `command_timeout_ms` (false).
    per_call: bool,
    timeout: Duration,
    block: Duration,
    expect_timeout: bool,
    command: Vec<String>,
}

impl Case {
    fn budget(&self) -> Duration {
        let block = if self.per_call {
            Duration::ZERO
        } else {
            self.block
        };
        self.timeout + block + SLACK
    }

    fn args(&self, serial: usize) -> Vec<String> {
        let key = format!("deadline-case:{}:{serial}", self.name);
        self.command
            .iter()
            .map(|a| a.replace("{key}", &key))
            .collect()
    }

    fn url(&self, topo: &Topology) -> String {
        let default = if self.per_call {
            LONG_DEFAULT_MS
        } else {
            self.timeout.as_millis() as u64
        };
        url_with(&topo.url(), &format!("command_timeout_ms={default}"))
    }

    fn check(&self, result: sentinel_recovery::Result<Value>, took: Duration, form: &str) {
        assert!(
            took <= self.budget(),
            "{} ({form}): ended after {took:?}, allowed {:?}",
            self.name,
            self.budget()
        );
        if self.expect_timeout {
            let e = result.expect_err(&format!("{} ({form}): expected a timeout", self.name));
            assert_eq!(e.code(), ErrorCode::Timeout, "{} ({form}): {e}", self.name);
        } else {
            assert_eq!(result.unwrap(), Value::Nil, "{} ({form})", self.name);
        }
    }
}

fn cases() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/cases/deadlines.tsv");
    let text = std::fs::read_to_string(path).unwrap();
    let cases: Vec<Case> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(
                fields.len(),
                6,
                "{path}: six tab-separated fields in {line:?}"
            );
            let ms = |f: &str| Duration::from_millis(f.parse().unwrap());
            Case {
                name: fields[0].to_string(),
                per_call: match fields[1] {
                    "per-call" => true,
                    "default" => false,
                    other => panic!("{path}: deadline {other:?}"),
                },
                timeout: ms(fields[2]),
                block: ms(fields[3]),
                expect_timeout: match fields[4] {
                    "timeout" => true,
                    "nil" => false,
                    other => panic!("{path}: expect {other:?}"),
                },
                command: fields[5].split(' ').map(str::to_string).collect(),
            }
        })
        .collect();
    assert!(!cases.is_empty(), "{path}: no cases");
    cases
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

#[test]
fn every_shared_deadline_case_ends_by_its_deadline_and_leaves_nothing_blocked() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    rt().block_on(async {
        let observer = Client::connect(&topo.url()).await.unwrap();
        for (serial, case) in cases().iter().enumerate() {
            let url = case.url(&topo);
            let own = case.per_call.then_some(case.timeout);

            // The callback form, as every binding calls it.
            let handle = Handle::open_url::<&str, &str>(&url, &[]).unwrap();
            let before = blocked_clients(&observer).await;
            let args = case.args(2 * serial);
            let (tx, rx) = tokio::sync::oneshot::channel();
            let start = Instant::now();
            let _op = handle.execute(
                &args,
                own,
                Box::new(move |r| {
                    let _ = tx.send(r);
                }),
            );
            let result = tokio::time::timeout(case.budget() + SLACK, rx)
                .await
                .unwrap_or_else(|_| panic!("{} (callback): no completion", case.name))
                .unwrap();
            case.check(result, start.elapsed(), "callback");
            wait_unblocked(&observer, before, case).await;
            handle.close_blocking();

            // The async client.
            let client = Client::connect(&url).await.unwrap();
            let before = blocked_clients(&observer).await;
            let args = case.args(2 * serial + 1);
            let start = Instant::now();
            let call = async {
                match own {
                    Some(timeout) => client.execute_timeout(&args, timeout).await,
                    None => client.execute(&args).await,
                }
            };
            let result = tokio::time::timeout(case.budget() + SLACK, call)
                .await
                .unwrap_or_else(|_| panic!("{} (async): did not end", case.name));
            case.check(result, start.elapsed(), "async");
            wait_unblocked(&observer, before, case).await;
            client.close().await;
        }
    });
}
