//! The shared per-call timeout cases (`tests/cases/timeouts.tsv`, which every binding's suite
//! reads): the core's rule (`sentinel_recovery::deadline`) in both units the bindings state
//! timeouts in, and what a call with each timeout does against a real primary.

mod common;

use std::time::Duration;

use common::*;
use sentinel_recovery::deadline::{call_timeout, Unit};
use sentinel_recovery::host::Handle;
use sentinel_recovery::{Client, ErrorCode, Value};
use sentinel_recovery_testkit::{Topology, TopologySpec};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// The call runs and answers.
    Answers,
    /// Not refused: it answers, or ends with `timeout` (a deadline too short to keep).
    Accepted,
    /// `config` before anything is sent.
    Refused,
}

struct Case {
    value_ms: f64,
    expect: Expect,
    why: String,
}

fn cases() -> Vec<Case> {
    case_rows("timeouts.tsv", 3, 8)
        .into_iter()
        .map(|row| Case {
            value_ms: row[0].parse().unwrap_or_else(|e| panic!("{row:?}: {e}")),
            expect: match row[1].as_str() {
                "answers" => Expect::Answers,
                "accepted" => Expect::Accepted,
                "refused" => Expect::Refused,
                other => panic!("timeouts.tsv: expect {other:?}"),
            },
            why: row[2].clone(),
        })
        .collect()
}

/// What a call that was not refused gave: a nil reply, or for [`Expect::Accepted`] a timeout.
fn check_ran(case: &Case, reply: sentinel_recovery::Result<Value>, what: &str) {
    match reply {
        Ok(value) => assert_eq!(value, Value::Nil, "{what}"),
        Err(e) if case.expect == Expect::Accepted && e.code() == ErrorCode::Timeout => {}
        Err(e) => panic!("{what}: {e}"),
    }
}

#[test]
fn every_binding_s_timeout_rule_holds_in_the_core() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let url = url_with(&topo.url(), "command_timeout_ms=30000");
    let handle = Handle::open_url::<&str, &str>(&url, &[]).unwrap();
    let client = Client::open_url(&url).unwrap();
    for case in cases() {
        for (value, unit) in [
            (case.value_ms, Unit::Milliseconds),
            (case.value_ms / 1000.0, Unit::Seconds),
        ] {
            let what = format!("{value} {unit:?} ({})", case.why);
            match call_timeout(value, unit) {
                Ok(timeout) => {
                    assert_ne!(case.expect, Expect::Refused, "{what}: accepted");
                    let (tx, rx) = std::sync::mpsc::channel();
                    let args = ["GET", "timeout-case:absent"];
                    let _op = handle.execute(
                        &args,
                        Some(timeout),
                        Box::new(move |r| {
                            let _ = tx.send(r);
                        }),
                    );
                    let reply = rx.recv_timeout(Duration::from_secs(30)).unwrap();
                    check_ran(&case, reply, &what);
                    let reply = rt().block_on(client.execute_timeout(&args, timeout));
                    check_ran(&case, reply, &what);
                }
                Err(e) => {
                    assert_eq!(case.expect, Expect::Refused, "{what}: refused ({e})");
                    assert_eq!(e.code(), ErrorCode::Config, "{what}: {e}");
                    assert!(e.message().starts_with("timeout must be"), "{what}: {e}");
                }
            }
        }
    }
    // What a Rust caller can give as a Duration keeps the same rule.
    for refused in [Duration::ZERO, Duration::MAX] {
        let e = rt()
            .block_on(client.execute_timeout(&["GET", "k"], refused))
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Config, "{refused:?}: {e}");
    }
    handle.close_blocking();
    rt().block_on(client.close());
}
