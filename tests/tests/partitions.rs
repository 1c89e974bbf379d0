//! Issue 28's partition scenarios A-E, short form, with sentinel-recovery's Rust client in its
//! default mode on two client hosts (see `sentinel_recovery_testkit::net::scenario`).
//!
//! Default mode loses acknowledged writes in A, B and C (Sentinel's asynchronous replication: an
//! isolated primary keeps acknowledging). These tests assert what holds anyway — the checker's
//! accounting adds up, no write is applied twice, no "failed" write was applied, both writers
//! follow the primary after heal, D and E cause no failover and lose nothing — and print the loss
//! numbers. A run with the durability options passes its URL keys through [`run_with`] and can
//! require `report.total.lost == 0`.
//!
//! Needs root (network namespaces): skips with a message otherwise. D's fault lasts
//! `SR_PARTITIONS_D_SECS` seconds (default 20; issue 28's full form is 60).

use std::path::PathBuf;
use std::time::Duration;

use sentinel_recovery_testkit::net::netns_available;
use sentinel_recovery_testkit::net::scenario::{
    run, Scenario, ScenarioRun, ScenarioSpec, WriterProgram,
};

fn writer() -> WriterProgram {
    WriterProgram {
        program: PathBuf::from(env!("CARGO_BIN_EXE_sr-set-writer")),
        args: Vec::new(),
    }
}

/// The same writer's calls through an in-process fencing proxy, over plain RESP.
fn proxy_writer() -> WriterProgram {
    WriterProgram {
        program: PathBuf::from(env!("CARGO_BIN_EXE_sr-proxy-set-writer")),
        args: Vec::new(),
    }
}

/// Runs `scenario` with the Rust writer and `url_extra` query keys; `None` when skipped.
fn run_with(scenario: Scenario, url_extra: &[(&str, &str)]) -> Option<ScenarioRun> {
    run_writer(scenario, writer(), url_extra)
}

/// [`run_with`] for any writer program.
fn run_writer(
    scenario: Scenario,
    writer: WriterProgram,
    url_extra: &[(&str, &str)],
) -> Option<ScenarioRun> {
    if let Err(why) = netns_available() {
        eprintln!("SKIPPED: {why}");
        return None;
    }
    let mut spec = ScenarioSpec::new(scenario, writer);
    spec.url_extra = url_extra
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Some(secs) = std::env::var("SR_PARTITIONS_D_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        spec.d_duration = Duration::from_secs(secs);
    }
    let r = run(&spec).unwrap_or_else(|e| panic!("scenario {}: {e}", scenario.name()));
    eprintln!(
        "scenario {} {:?}: {}",
        scenario.name(),
        url_extra,
        serde_json::json!({
            "total": r.report.total,
            "writers": r.report.writers,
            "primary_before": r.primary_before,
            "primary_after": r.primary_after,
            "followed_after_heal_ms": r.followed_after_heal_ms,
            "fault_to_heal_ms": r.heal_at_ms - r.fault_at_ms,
            "median_call_during_fault_ms": r.median_call_during_fault_ms,
            "sentinel_commands_per_s": r.sentinel_commands_per_s,
            "sentinel_commands_per_s_before": r.sentinel_commands_per_s_before,
            "sentinel_events": r.sentinel_events,
        })
    );
    Some(r)
}

/// What holds in every mode and scenario.
fn assert_invariants(r: &ScenarioRun) {
    let rep = &r.report;
    rep.consistent().unwrap();
    let t = &rep.total;
    assert!(t.acknowledged > 0, "no write acknowledged: {t:?}");
    assert_eq!(t.applied_twice, 0, "a write ran twice: {t:?}");
    assert_eq!(t.failed_but_present, 0, "a failed write was applied: {t:?}");
    assert_eq!(rep.unexpected, 0, "values nobody wrote: {rep:?}");
    for (w, followed) in &r.followed_after_heal_ms {
        assert!(
            followed.is_some(),
            "{w} did not follow the primary after heal"
        );
    }
}

fn assert_failed_over(r: &ScenarioRun) {
    assert_ne!(r.primary_before, r.primary_after, "no failover");
    assert!(
        r.sentinel_events
            .get("+switch-master")
            .copied()
            .unwrap_or(0)
            > 0
    );
}

fn assert_no_failover(r: &ScenarioRun) {
    assert_eq!(r.primary_before, r.primary_after, "{:?}", r.sentinel_events);
    for event in ["+odown-master", "+switch-master", "+try-failover"] {
        assert_eq!(
            r.sentinel_events.get(event),
            None,
            "{event}: {:?}",
            r.sentinel_events
        );
    }
    // Nothing failed over, so nothing acknowledged can be discarded.
    assert_eq!(r.report.total.lost, 0, "{:?}", r.report.total);
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn a_primary_and_a_client_cut_from_the_majority() {
    let Some(r) = run_with(Scenario::A, &[]) else {
        return;
    };
    assert_invariants(&r);
    assert_failed_over(&r);
    // The majority-side writer can only lose what the primary acknowledged before the cut
    // stopped its replication: never a write started after the new primary was reported.
    let failover = r.failover_seen_at_ms.unwrap() - r.fault_at_ms;
    if let Some((_, last)) = r.report.writers["w2"].lost_window_ms {
        assert!(
            last < failover as i64,
            "w2 lost a write started {last} ms after the cut, failover at {failover} ms"
        );
    }
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn b_a_client_cut_from_the_sentinels_during_a_planned_failover() {
    let Some(r) = run_with(Scenario::B, &[]) else {
        return;
    };
    assert_invariants(&r);
    assert_failed_over(&r);
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn c_the_primary_cut_from_sentinels_and_replicas() {
    let Some(r) = run_with(Scenario::C, &[]) else {
        return;
    };
    assert_invariants(&r);
    assert_failed_over(&r);
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn d_loss_and_latency_on_every_link_cause_no_failover() {
    let Some(r) = run_with(Scenario::D, &[]) else {
        return;
    };
    assert_invariants(&r);
    assert_no_failover(&r);
    // The fault was on the clients' links too: 50 ms each way.
    assert!(
        r.median_call_during_fault_ms >= 100,
        "{}",
        r.median_call_during_fault_ms
    );
    // Calm under loss: what the fault added to the sentinels' load (both writers' monitors
    // reconnecting and re-asking over lossy links; the sentinels' own traffic is in both rates)
    // stays within the calm bound the core's own tests use for one client
    // (tests/tests/calm.rs: under 20 commands a second); a client retrying per lost packet or
    // per slow answer would add hundreds.
    let added = r.sentinel_commands_per_s - r.sentinel_commands_per_s_before;
    assert!(
        added < 20.0,
        "the fault added {added:.1} sentinel commands per second ({:.1} during, {:.1} before)",
        r.sentinel_commands_per_s,
        r.sentinel_commands_per_s_before
    );
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn e_sentinels_without_a_common_majority_do_not_fail_over() {
    let Some(r) = run_with(Scenario::E, &[]) else {
        return;
    };
    assert_invariants(&r);
    assert_no_failover(&r);
    // The split was real: the cut-off sentinels saw the primary down.
    assert!(r.sentinel_events.get("+sdown-master").copied().unwrap_or(0) >= 2);
}

/// With durable acknowledgements on every replica (`wait_replicas=2`: both replicas), a write is
/// acknowledged only once the replica Sentinel will promote has it, so no scenario can lose an
/// acknowledged write; the writes the cut primary ran without its replicas come back as
/// `not_replicated` (indeterminate), never as successes.
fn assert_durable_lost_nothing(scenario: Scenario) {
    assert_durable_writer_lost_nothing(scenario, writer());
}

/// [`assert_durable_lost_nothing`] for any writer program.
fn assert_durable_writer_lost_nothing(scenario: Scenario, writer: WriterProgram) {
    let Some(r) = run_writer(scenario, writer, &[("wait_replicas", "2")]) else {
        return;
    };
    assert_invariants(&r);
    assert_failed_over(&r);
    assert_eq!(r.report.total.lost, 0, "{:?}", r.report.total);
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn a_with_durable_acknowledgements_loses_no_acknowledged_write() {
    assert_durable_lost_nothing(Scenario::A);
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn b_with_durable_acknowledgements_loses_no_acknowledged_write() {
    assert_durable_lost_nothing(Scenario::B);
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn c_with_durable_acknowledgements_loses_no_acknowledged_write() {
    assert_durable_lost_nothing(Scenario::C);
}

/// Through the fencing proxy, with `wait_replicas` equal to the replicas, a client that knows
/// nothing of Sentinel loses no acknowledged write either: the proxy follows each write with
/// WAIT and answers NOTREPLICATED when the cut primary cannot replicate it.
fn assert_durable_proxy_lost_nothing(scenario: Scenario) {
    assert_durable_writer_lost_nothing(scenario, proxy_writer());
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn a_through_the_proxy_with_durable_acknowledgements_loses_no_acknowledged_write() {
    assert_durable_proxy_lost_nothing(Scenario::A);
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn b_through_the_proxy_with_durable_acknowledgements_loses_no_acknowledged_write() {
    assert_durable_proxy_lost_nothing(Scenario::B);
}

#[test]
#[ignore = "needs root and network namespaces: make test-partitions runs it"]
fn c_through_the_proxy_with_durable_acknowledgements_loses_no_acknowledged_write() {
    assert_durable_proxy_lost_nothing(Scenario::C);
}
