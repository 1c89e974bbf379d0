//! The history checker (`sr-soak check DIR`, also run at the end of `sr-soak run`): reads the
//! writers' call logs, the sentinels' recorded event streams, the samples and the final data,
//! judges six checks, writes `summary.json` and `timeline.svg`, and exits non-zero naming every
//! failed check with its evidence.
//!
//! The checks and their stated bounds:
//! 1. `no_value_applied_twice`: no id twice in a writer's final list, no id that was never sent,
//!    and no counter above the number of INCR calls made.
//! 2. `deadlines_kept`: every call ended within `command_timeout_ms` + [`DEADLINE_SLACK_MS`].
//! 3. `losses_only_in_promotion_windows`: an acknowledged RPUSH missing from the final list
//!    must overlap a failover's promotion window: from the first sign of that failover in any
//!    sentinel's stream (`+sdown`/`+odown`/`+try-failover` of the old primary, within
//!    [`SIGN_LOOKBACK_MS`] before the switch) minus down-after minus [`LAG_ALLOWANCE_MS`]
//!    (writes acknowledged just before a crash that had not reached a replica), to the first
//!    `+switch-master`. Lost writes are counted per failover.
//! 4. `no_ack_after_demotion`: no lost write started more than [`ANNOUNCE_SLACK_MS`] after a
//!    sentinel announced the old primary's demotion (`+failover-state-send-slaveof-noone`, else
//!    `+switch-master`): such a write was acknowledged by a node already being demoted.
//! 5. `sentinels_calm`: on every sentinel, commands per second from each writer process (by
//!    client name, from the sentinels' per-connection `tot-cmds`, Valkey 8+) stay under
//!    [`PROCESS_RATE_BOUND`] at every one-second sample — on servers without per-connection
//!    counts (Redis 7.0), the sentinel's `total_commands_processed` rate less its baseline
//!    before the writers started stays under [`SENTINEL_RATE_BOUND`] instead — and
//!    no client name holds more than [`SENTINEL_CONNS_BOUND`] connections on one sentinel.
//! 6. `resources_flat`: each writer's fds, threads and RSS at the end are within
//!    [`FD_SLACK`], [`THREAD_SLACK`] and [`RSS_FACTOR`] x start + [`RSS_SLACK_KB`] of the
//!    start (the first sample [`WARMUP_MS`] after every writer had its first acknowledged write).
//! 7. `durable_acks_kept`, only when the writers ran with `wait_replicas` (the run's
//!    `url_extra`): no acknowledged RPUSH is missing from the final list, whatever the fault —
//!    an acknowledgement then means the asked number of replicas had the write.
//!
//! A failed call may have run (a timeout, a lost connection, and `not_replicated`, which says it
//! ran on the primary but fewer replicas than asked confirmed it): it is indeterminate, counted
//! per writer, and never a loss; its value may or may not be in the final list.
//!
//! Every lost acknowledged write is attributed to the fault whose window it overlaps (from the
//! fault's start less [`LAG_ALLOWANCE_MS`] to the topology being healthy again) and counted per
//! fault kind. In default mode a partition loses acknowledged writes by design (an isolated
//! primary keeps acknowledging what the majority's promotion discards): losses inside a
//! partition's window are reported apart (`lost_in_partition_windows`) and exempt from checks 3
//! and 4; with `wait_replicas` nothing is exempt.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde_json::{json, Value};

use crate::faults::PARTITION_PREFIX;
use crate::jsonl;

/// Slack over a call's deadline for scheduling on a busy 2-core machine.
pub const DEADLINE_SLACK_MS: u64 = 1000;
/// Replication lag allowed before a failover's first sign.
pub const LAG_ALLOWANCE_MS: u64 = 1000;
/// How far before a `+switch-master` its first sign is looked for.
pub const SIGN_LOOKBACK_MS: u64 = 15_000;
/// Time a sentinel's announcement may take to reach a client.
pub const ANNOUNCE_SLACK_MS: u64 = 250;
/// Where the server has no per-connection counts (Redis 7.0): most commands per second one
/// sentinel may see beyond its baseline before any writer ran — from all writer processes
/// together, plus what the sentinels send each other during a failover (with the test
/// `ask-period` of 100 ms, about 20/s per sentinel), so only a flood shows.
pub const SENTINEL_RATE_BOUND: f64 = 100.0;
/// Most commands per second one writer process (one client name) may send to one sentinel,
/// measured from the sentinels' per-connection `tot-cmds` (Valkey 8 and later).
pub const PROCESS_RATE_BOUND: f64 = 20.0;
/// Most connections one client name may hold on one sentinel.
pub const SENTINEL_CONNS_BOUND: u64 = 4;
/// Allowed growth of a writer's open file descriptors.
pub const FD_SLACK: u64 = 16;
/// Allowed growth of a writer's threads.
pub const THREAD_SLACK: u64 = 8;
/// Allowed growth factor of a writer's RSS.
pub const RSS_FACTOR: f64 = 1.5;
/// Allowed absolute growth of a writer's RSS, in kB.
pub const RSS_SLACK_KB: u64 = 32 * 1024;
/// Resources are taken as "start" this long after the writers are up.
pub const WARMUP_MS: u64 = 5000;
/// `+switch-master` messages with the same old and new primary this close together are one
/// failover announced by several sentinels.
const SAME_SWITCH_MS: u64 = 5000;
/// At most this many pieces of evidence per failed check in the summary.
const EVIDENCE: usize = 20;

/// One failover as the sentinels announced it.
#[derive(Debug, Clone)]
pub struct Failover {
    /// Proxy ports of the old and new primary.
    pub old: u16,
    /// See `old`.
    pub new: u16,
    /// First `+switch-master` (unix ms).
    pub switch: u64,
    /// First sign of it (unix ms).
    pub first_sign: u64,
    /// Demotion announced (unix ms).
    pub announce: u64,
    /// Start of the promotion window.
    pub window_start: u64,
}

struct Check {
    name: &'static str,
    bound: String,
    observed: Value,
    evidence: Vec<String>,
}

impl Check {
    fn json(&self) -> Value {
        json!({"name": self.name, "passed": self.evidence.is_empty(), "bound": self.bound,
               "observed": self.observed,
               "evidence": self.evidence.iter().take(EVIDENCE).collect::<Vec<_>>(),
               "evidence_total": self.evidence.len()})
    }
}

/// Runs the checker on a soak directory; prints the verdict; returns the exit code.
pub fn check_dir(dir: &Path) -> Result<i32, String> {
    let read_json = |name: &str| -> Result<Value, String> {
        let text = std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{name}: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("{name}: {e}"))
    };
    let read_lines = |name: &str| jsonl::read(&dir.join(name)).map_err(|e| format!("{name}: {e}"));
    let meta = read_json("meta.json")?;
    let final_data = read_json("final.json")?;
    let events = read_lines("events.jsonl")?;
    let samples = read_lines("samples.jsonl")?;
    let faults = read_lines("faults.jsonl")?;
    let down_after = meta["down_after_ms"].as_u64().unwrap_or(1000);
    let timeout = meta["command_timeout_ms"].as_u64().unwrap_or(5000);
    let start_ms = meta["start_ms"].as_u64().unwrap_or(0);
    let end_ms = meta["end_ms"].as_u64().unwrap_or(u64::MAX);
    let mut calls: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for w in meta["writers"].as_array().cloned().unwrap_or_default() {
        let id = w["id"].as_str().unwrap_or_default().to_string();
        calls.insert(id.clone(), read_lines(&format!("{id}.jsonl"))?);
    }
    let failovers = failovers(&events, down_after);
    let wait_replicas = meta["url_extra"]["wait_replicas"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|n| *n > 0);
    // With durable acknowledgements a write's deadline stretches by its WAIT's timeout (the
    // client's documented allowance), default 1000 ms.
    let wait_allowance = match wait_replicas {
        Some(_) => meta["url_extra"]["wait_timeout_ms"]
            .as_str()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1000),
        None => 0,
    };
    // (kind, window start, window end) of every fault.
    let fault_windows: Vec<(String, u64, u64)> = faults
        .iter()
        .map(|f| {
            let t0 = f["t0"].as_u64().unwrap_or(0);
            let t1 = f["t1"].as_u64().unwrap_or(t0);
            let end = f["healthy_at"].as_u64().unwrap_or(t1).max(t1);
            (
                f["kind"].as_str().unwrap_or("?").to_string(),
                t0.saturating_sub(LAG_ALLOWANCE_MS),
                end,
            )
        })
        .collect();

    let mut dup = Check {
        name: "no_value_applied_twice",
        bound: "each id at most once per list; counter <= INCR calls made".into(),
        observed: json!({}),
        evidence: vec![],
    };
    let mut deadlines = Check {
        name: "deadlines_kept",
        bound: format!(
            "call duration <= {timeout} ms{} + {DEADLINE_SLACK_MS} ms",
            if wait_allowance > 0 {
                format!(" + {wait_allowance} ms (wait_timeout_ms)")
            } else {
                String::new()
            }
        ),
        observed: json!(null),
        evidence: vec![],
    };
    let mut windows = Check {
        name: "losses_only_in_promotion_windows",
        bound: format!(
            "lost acknowledged write overlaps [first sign - {down_after} - {LAG_ALLOWANCE_MS} ms, +switch-master]"
        ),
        observed: json!(null),
        evidence: vec![],
    };
    let mut demotion = Check {
        name: "no_ack_after_demotion",
        bound: format!(
            "no lost write started > {ANNOUNCE_SLACK_MS} ms after the demotion was announced"
        ),
        observed: json!(null),
        evidence: vec![],
    };
    let mut per_writer = serde_json::Map::new();
    let mut lost_per_failover = vec![0u64; failovers.len()];
    let mut max_duration = 0u64;
    let mut total_lost = 0u64;
    let mut lost_in_partitions = 0u64;
    let mut lost_by_kind: BTreeMap<String, u64> = BTreeMap::new();
    let mut durable = Check {
        name: "durable_acks_kept",
        bound: format!(
            "0 acknowledged writes lost (wait_replicas={}: each acknowledged write was confirmed by that many replicas)",
            wait_replicas.unwrap_or(0)
        ),
        observed: json!(null),
        evidence: vec![],
    };
    for (id, log) in &calls {
        let fin = &final_data[id];
        let list: Vec<u64> = fin["list"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let mut seen: HashMap<u64, usize> = HashMap::new();
        for v in &list {
            *seen.entry(*v).or_default() += 1;
        }
        let sent: HashSet<u64> = log
            .iter()
            .filter(|c| c["op"] == "rpush")
            .filter_map(|c| c["v"].as_u64())
            .collect();
        for (v, n) in &seen {
            if *n > 1 {
                dup.evidence
                    .push(format!("{id}: id {v} is {n} times in the final list"));
            }
            if !sent.contains(v) {
                dup.evidence
                    .push(format!("{id}: id {v} in the final list was never sent"));
            }
        }
        let incrs = log.iter().filter(|c| c["op"] == "incr").count() as u64;
        let counter = fin["counter"].as_u64().unwrap_or(0);
        if counter > incrs {
            dup.evidence.push(format!(
                "{id}: counter is {counter} after only {incrs} INCR calls"
            ));
        }
        let mut errors: BTreeMap<String, u64> = BTreeMap::new();
        let mut lost_here = 0u64;
        let mut lost_partition_here = 0u64;
        let (mut indeterminate, mut indeterminate_applied) = (0u64, 0u64);
        for c in log {
            let (t0, t1) = (c["t0"].as_u64().unwrap_or(0), c["t1"].as_u64().unwrap_or(0));
            let d = t1.saturating_sub(t0);
            max_duration = max_duration.max(d);
            if d > timeout + wait_allowance + DEADLINE_SLACK_MS {
                deadlines.evidence.push(format!(
                    "{id}: {} {} took {d} ms (t0 {t0}): {}",
                    c["op"].as_str().unwrap_or(""),
                    c["v"],
                    c["err"].as_str().unwrap_or("ok")
                ));
            }
            if c["ok"] != json!(true) {
                if c["op"] == "rpush" {
                    indeterminate += 1;
                    if c["v"].as_u64().is_some_and(|v| seen.contains_key(&v)) {
                        indeterminate_applied += 1;
                    }
                }
                let code = c["err"]
                    .as_str()
                    .unwrap_or("?")
                    .split(':')
                    .next()
                    .unwrap_or("?")
                    .to_string();
                *errors.entry(code).or_default() += 1;
                continue;
            }
            if c["op"] != "rpush" {
                continue;
            }
            let Some(v) = c["v"].as_u64() else { continue };
            if seen.contains_key(&v) {
                continue;
            }
            lost_here += 1;
            let kind = fault_windows
                .iter()
                .find(|(_, start, end)| t0 <= *end && t1 >= *start)
                .map_or("none", |(k, _, _)| k.as_str());
            *lost_by_kind.entry(kind.to_string()).or_default() += 1;
            if wait_replicas.is_some() {
                durable.evidence.push(format!(
                    "{id}: id {v} acknowledged at [{t0}, {t1}] is lost (fault window: {kind})"
                ));
            }
            // Default mode: an isolated primary's acknowledgements are lost by design.
            let excused = wait_replicas.is_none() && kind.starts_with(PARTITION_PREFIX);
            if excused {
                lost_partition_here += 1;
            }
            let hit = failovers
                .iter()
                .position(|f| t0 <= f.switch && t1 >= f.window_start);
            match hit {
                None if excused => {}
                None => windows.evidence.push(format!(
                    "{id}: id {v} acknowledged at [{t0}, {t1}] is lost, outside every promotion window"
                )),
                Some(i) => {
                    lost_per_failover[i] += 1;
                    let f = &failovers[i];
                    if !excused && t0 > f.announce + ANNOUNCE_SLACK_MS {
                        demotion.evidence.push(format!(
                            "{id}: id {v} sent at {t0}, {} ms after the demotion of {} was announced ({}), acknowledged at {t1}, lost",
                            t0 - f.announce, f.old, f.announce
                        ));
                    }
                }
            }
        }
        total_lost += lost_here;
        lost_in_partitions += lost_partition_here;
        let acked = log
            .iter()
            .filter(|c| c["op"] == "rpush" && c["ok"] == json!(true))
            .count();
        per_writer.insert(
            id.clone(),
            json!({"calls": log.len(), "ok": log.iter().filter(|c| c["ok"] == json!(true)).count(),
                   "errors": errors, "acked_writes": acked, "final_list": list.len(),
                   "lost_acked_writes": lost_here,
                   "lost_in_partition_windows": lost_partition_here,
                   "indeterminate_writes": indeterminate,
                   "indeterminate_writes_applied": indeterminate_applied,
                   "incr_calls": incrs, "final_counter": counter}),
        );
    }
    dup.observed = json!({"writers": calls.len()});
    deadlines.observed = json!({"max_call_ms": max_duration});
    windows.observed = json!({"lost_acked_writes": total_lost, "failovers": failovers.len(),
                              "exempt_in_partition_windows": lost_in_partitions});
    demotion.observed = json!({"lost_acked_writes": total_lost,
                               "exempt_in_partition_windows": lost_in_partitions});
    durable.observed = json!({"lost_acked_writes": total_lost, "by_fault_kind": lost_by_kind});

    let baseline_until = meta["writers_started_ms"].as_u64().unwrap_or(0);
    let (calm, rates) = sentinel_calm(&samples, baseline_until);
    let resources = resources_flat(&samples, start_ms + WARMUP_MS, end_ms);
    let mut checks = vec![dup, deadlines, windows, demotion, calm, resources];
    if wait_replicas.is_some() {
        checks.push(durable);
    }
    let windows_ok = checks[2].evidence.is_empty();
    let passed = checks.iter().all(|c| c.evidence.is_empty());
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    for f in &faults {
        *by_kind
            .entry(f["kind"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    let summary = json!({
        "passed": passed,
        "seed": meta["seed"],
        "minutes": meta["minutes"],
        "server": meta["server"],
        "faults": faults.len(),
        "faults_by_kind": by_kind,
        "mode": {"net": meta["net"], "url_extra": meta["url_extra"],
                 "wait_replicas": wait_replicas},
        "lost_acked_writes": total_lost,
        "lost_acked_writes_by_fault_kind": lost_by_kind,
        "lost_in_partition_windows": lost_in_partitions,
        "failovers": failovers.iter().zip(&lost_per_failover).map(|(f, n)| json!({
            "old_proxy_port": f.old, "new_proxy_port": f.new, "first_sign": f.first_sign,
            "demotion_announced": f.announce, "switch_master": f.switch,
            "window": [f.window_start, f.switch], "lost_acked_writes": n})).collect::<Vec<_>>(),
        "writers": per_writer,
        "checks": checks.iter().map(Check::json).collect::<Vec<_>>(),
        "meta": meta,
    });
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&summary).unwrap_or_default(),
    )
    .map_err(|e| format!("summary.json: {e}"))?;
    let svg = crate::svg::timeline(&crate::svg::Input {
        start: start_ms,
        end: end_ms,
        faults: &faults,
        failovers: &failovers,
        calls: &calls,
        sentinel_rates: &rates.0,
        sentinel_rates_label: rates.1,
        title: format!(
            "sr-soak seed {} - {} min - {} faults - {} failovers - {}",
            meta["seed"],
            meta["minutes"],
            faults.len(),
            failovers.len(),
            if passed { "PASSED" } else { "FAILED" }
        ),
    });
    std::fs::write(dir.join("timeline.svg"), svg).map_err(|e| format!("timeline.svg: {e}"))?;
    for c in &checks {
        if c.evidence.is_empty() {
            println!(
                "sr-soak check: {:<34} ok   ({}; observed {})",
                c.name, c.bound, c.observed
            );
        } else {
            println!(
                "sr-soak check: {:<34} FAIL ({}; observed {})",
                c.name, c.bound, c.observed
            );
            for e in c.evidence.iter().take(EVIDENCE) {
                println!("    {e}");
            }
            if c.evidence.len() > EVIDENCE {
                println!(
                    "    ... {} more in summary.json",
                    c.evidence.len() - EVIDENCE
                );
            }
        }
    }
    println!(
        "sr-soak: {} faults, {} failovers, {total_lost} acknowledged writes lost ({lost_in_partitions} inside partition windows; by fault: {lost_by_kind:?}; the rest inside promotion windows: {windows_ok}); summary {}",
        faults.len(),
        failovers.len(),
        dir.join("summary.json").display()
    );
    Ok(if passed { 0 } else { 1 })
}

/// Proxy port in a sentinel message's instance fields (`<name> <ip> <port>` at `skip`).
fn port_at(data: &str, index: usize) -> Option<u16> {
    data.split(' ').nth(index)?.parse().ok()
}

/// The failovers in the recorded event streams, one per distinct `+switch-master` (the same
/// switch announced by several sentinels counts once).
pub fn failovers(events: &[Value], down_after: u64) -> Vec<Failover> {
    let mut evs: Vec<(u64, &str, &str)> = events
        .iter()
        .filter_map(|e| {
            Some((
                e["t"].as_u64()?,
                e["channel"].as_str()?,
                e["data"].as_str()?,
            ))
        })
        .collect();
    evs.sort_by_key(|e| e.0);
    let mut out: Vec<Failover> = Vec::new();
    for &(t, ch, data) in &evs {
        if ch != "+switch-master" {
            continue;
        }
        // "<service> <old ip> <old port> <new ip> <new port>"
        let (Some(old), Some(new)) = (port_at(data, 2), port_at(data, 4)) else {
            continue;
        };
        if out
            .iter()
            .any(|f| f.old == old && f.new == new && t.saturating_sub(f.switch) < SAME_SWITCH_MS)
        {
            continue;
        }
        let lookback = t.saturating_sub(SIGN_LOOKBACK_MS);
        // "+sdown master <service> <ip> <port>", "+try-failover master <service> <ip> <port>"
        let first_sign = evs
            .iter()
            .filter(|(te, c, d)| {
                *te >= lookback
                    && *te <= t
                    && matches!(*c, "+sdown" | "+odown" | "+try-failover")
                    && d.starts_with("master ")
                    && port_at(d, 3) == Some(old)
            })
            .map(|e| e.0)
            .min()
            .unwrap_or(t);
        // "+failover-state-send-slaveof-noone slave <ip>:<port> <ip> <port> @ <service> <ip> <port>"
        let announce = evs
            .iter()
            .filter(|(te, c, d)| {
                *te >= first_sign
                    && *te <= t
                    && *c == "+failover-state-send-slaveof-noone"
                    && d.rsplit(' ').next().and_then(|p| p.parse().ok()) == Some(old)
            })
            .map(|e| e.0)
            .min()
            .unwrap_or(t);
        out.push(Failover {
            old,
            new,
            switch: t,
            first_sign,
            announce,
            window_start: first_sign.saturating_sub(down_after + LAG_ALLOWANCE_MS),
        });
    }
    out
}

/// Check 5, and for the picture a per-second series with its label: the busiest writer
/// process's commands/s on any sentinel where per-connection counts exist, else the commands/s
/// beyond the baseline summed over the sentinels. The rate before `baseline_until` (no writer running yet: the sentinels' own traffic
/// among themselves and the recorders' sampling) is each sentinel's baseline, subtracted.
fn sentinel_calm(samples: &[Value], baseline_until: u64) -> (Check, (Vec<(u64, f64)>, String)) {
    let mut check = Check {
        name: "sentinels_calm",
        bound: format!(
            "< {PROCESS_RATE_BOUND} commands/s per writer process per sentinel (servers with tot-cmds), else < {SENTINEL_RATE_BOUND} beyond the baseline; <= {SENTINEL_CONNS_BOUND} connections per client name per sentinel"
        ),
        observed: json!(null),
        evidence: vec![],
    };
    let mut last: HashMap<u64, (u64, u64)> = HashMap::new();
    // (port, t_prev, t, commands/s)
    let mut rates: Vec<(u64, u64, u64, f64)> = Vec::new();
    let mut max_conns = 0u64;
    // Per sentinel: the last sample's time and connections (id -> tot-cmds).
    let mut last_conns: HashMap<u64, (u64, HashMap<u64, u64>)> = HashMap::new();
    let mut per_process_seen = false;
    let mut max_process = (0f64, String::new());
    let mut process_by_time: BTreeMap<u64, f64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.get("sentinel").is_some()) {
        let (Some(port), Some(t), Some(calls)) =
            (s["sentinel"].as_u64(), s["t"].as_u64(), s["calls"].as_u64())
        else {
            continue;
        };
        let conns: Vec<(u64, &str, u64)> = s["conns"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| Some((c[0].as_u64()?, c[1].as_str()?, c[2].as_u64()?)))
            .collect();
        if !conns.is_empty() {
            per_process_seen = true;
            let now: HashMap<u64, u64> = conns.iter().map(|(id, _, n)| (*id, *n)).collect();
            if let Some((t_prev, prev)) = last_conns.insert(port, (t, now)) {
                let mut by_name: BTreeMap<&str, u64> = BTreeMap::new();
                for (id, name, n) in &conns {
                    // A connection new since the last sample counts whole.
                    let before = prev.get(id).copied().unwrap_or(0);
                    *by_name.entry(name).or_default() += n.saturating_sub(before);
                }
                let dt = t.saturating_sub(t_prev).max(1) as f64 / 1000.0;
                for (name, n) in by_name {
                    if name.starts_with("sentinel-") || name == "(unnamed)" || dt < 0.2 {
                        continue;
                    }
                    let rate = n as f64 / dt;
                    let slot = process_by_time.entry(t / 1000 * 1000).or_default();
                    *slot = slot.max(rate);
                    if rate > max_process.0 {
                        max_process = (rate, name.to_string());
                    }
                    if rate >= PROCESS_RATE_BOUND {
                        check.evidence.push(format!(
                            "sentinel {port}: client {name} sent {rate:.1} commands/s between {t_prev} and {t}"
                        ));
                    }
                }
            }
        }
        if let Some((t_prev, c_prev)) = last.insert(port, (t, calls)) {
            // A restarted sentinel starts counting from zero again.
            if calls >= c_prev && t > t_prev + 200 {
                let rate = (calls - c_prev) as f64 * 1000.0 / (t - t_prev) as f64;
                rates.push((port, t_prev, t, rate));
            }
        }
        for (name, n) in s["clients"].as_object().into_iter().flatten() {
            let n = n.as_u64().unwrap_or(0);
            if name.starts_with("sentinel-") || name == "(unnamed)" {
                continue;
            }
            max_conns = max_conns.max(n);
            if n > SENTINEL_CONNS_BOUND {
                check.evidence.push(format!(
                    "sentinel {port} at {t}: client {name} holds {n} connections"
                ));
            }
        }
    }
    let mut baseline: HashMap<u64, (f64, u64)> = HashMap::new();
    for (port, _, t, rate) in &rates {
        if *t <= baseline_until {
            let b = baseline.entry(*port).or_default();
            b.0 += rate;
            b.1 += 1;
        }
    }
    let base = |port: u64| {
        baseline
            .get(&port)
            .map(|(sum, n)| sum / *n as f64)
            .unwrap_or(0.0)
    };
    let mut by_time: BTreeMap<u64, f64> = BTreeMap::new();
    let mut max_rate = 0f64;
    for (port, t_prev, t, rate) in rates.iter().filter(|r| r.2 > baseline_until) {
        let clients = (rate - base(*port)).max(0.0);
        *by_time.entry(t / 1000 * 1000).or_default() += clients;
        max_rate = max_rate.max(clients);
        if clients >= SENTINEL_RATE_BOUND && !per_process_seen {
            check.evidence.push(format!(
                "sentinel {port}: {clients:.1} commands/s from clients between {t_prev} and {t} (total {rate:.1}, baseline {:.1})",
                base(*port)
            ));
        }
    }
    let baselines: BTreeMap<String, f64> = baseline
        .keys()
        .map(|p| (p.to_string(), (base(*p) * 10.0).round() / 10.0))
        .collect();
    check.observed = json!({"max_commands_per_s_beyond_baseline": (max_rate * 10.0).round() / 10.0,
                            "max_commands_per_s_of_one_process": if per_process_seen {
                                json!({"rate": (max_process.0 * 10.0).round() / 10.0,
                                       "client": max_process.1})
                            } else {
                                json!("not measured: the server has no per-connection tot-cmds")
                            },
                            "baseline_commands_per_s": baselines,
                            "max_connections_per_name": max_conns});
    let series = if per_process_seen {
        (
            process_by_time.into_iter().collect(),
            "busiest writer, one sentinel".to_string(),
        )
    } else {
        (
            by_time.into_iter().collect(),
            "beyond baseline, all sentinels".to_string(),
        )
    };
    (check, series)
}

/// Check 6.
fn resources_flat(samples: &[Value], from: u64, until: u64) -> Check {
    let mut check = Check {
        name: "resources_flat",
        bound: format!(
            "end <= start + {FD_SLACK} fds, + {THREAD_SLACK} threads, RSS <= {RSS_FACTOR} x start + {} MB",
            RSS_SLACK_KB / 1024
        ),
        observed: json!(null),
        evidence: vec![],
    };
    let mut per: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.get("writer").is_some()) {
        let t = s["t"].as_u64().unwrap_or(0);
        if t >= from && t <= until {
            per.entry(s["writer"].as_str().unwrap_or("?").to_string())
                .or_default()
                .push(s);
        }
    }
    let mut observed = serde_json::Map::new();
    for (w, list) in &per {
        let (Some(a), Some(b)) = (list.first(), list.last()) else {
            continue;
        };
        let g = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
        observed.insert(
            w.clone(),
            json!({"start": {"fds": g(a, "fds"), "threads": g(a, "threads"), "rss_kb": g(a, "rss_kb")},
                   "end": {"fds": g(b, "fds"), "threads": g(b, "threads"), "rss_kb": g(b, "rss_kb")}}),
        );
        if g(b, "fds") > g(a, "fds") + FD_SLACK {
            check
                .evidence
                .push(format!("{w}: fds {} -> {}", g(a, "fds"), g(b, "fds")));
        }
        if g(b, "threads") > g(a, "threads") + THREAD_SLACK {
            check.evidence.push(format!(
                "{w}: threads {} -> {}",
                g(a, "threads"),
                g(b, "threads")
            ));
        }
        if g(b, "rss_kb") as f64 > g(a, "rss_kb") as f64 * RSS_FACTOR + RSS_SLACK_KB as f64 {
            check.evidence.push(format!(
                "{w}: RSS {} kB -> {} kB",
                g(a, "rss_kb"),
                g(b, "rss_kb")
            ));
        }
    }
    if per.is_empty() {
        check
            .evidence
            .push("no resource samples of any writer".into());
    }
    check.observed = Value::Object(observed);
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: u64, channel: &str, data: &str) -> Value {
        json!({"t": t, "sentinel": 1, "channel": channel, "data": data})
    }

    fn events() -> Vec<Value> {
        vec![
            ev(10_000, "+sdown", "master mymaster 127.0.0.1 7001"),
            ev(
                10_100,
                "+odown",
                "master mymaster 127.0.0.1 7001 #quorum 2/2",
            ),
            ev(
                10_300,
                "+failover-state-send-slaveof-noone",
                "slave 127.0.0.1:7002 127.0.0.1 7002 @ mymaster 127.0.0.1 7001",
            ),
            ev(
                11_000,
                "+switch-master",
                "mymaster 127.0.0.1 7001 127.0.0.1 7002",
            ),
            // The same switch from another sentinel, then a later one back.
            ev(
                11_900,
                "+switch-master",
                "mymaster 127.0.0.1 7001 127.0.0.1 7002",
            ),
            ev(40_000, "+try-failover", "master mymaster 127.0.0.1 7002"),
            ev(
                41_000,
                "+switch-master",
                "mymaster 127.0.0.1 7002 127.0.0.1 7001",
            ),
        ]
    }

    #[test]
    fn failovers_are_read_from_the_event_streams() {
        let f = failovers(&events(), 1000);
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].old, f[0].new, f[0].switch), (7001, 7002, 11_000));
        assert_eq!((f[0].first_sign, f[0].announce), (10_000, 10_300));
        assert_eq!(f[0].window_start, 10_000 - 1000 - LAG_ALLOWANCE_MS);
        assert_eq!((f[1].first_sign, f[1].announce), (40_000, 41_000));
    }

    fn call(op: &str, v: Option<u64>, t0: u64, t1: u64, ok: bool) -> Value {
        json!({"w": "w1", "op": op, "v": v, "t0": t0, "t1": t1, "ok": ok,
               "reply": null, "err": if ok { Value::Null } else { json!("timeout: late") }})
    }

    /// Writes a soak directory whose writer `w1` made `calls` and whose final list is `list`;
    /// returns the checker's exit code and the failed checks' names.
    fn judge(calls: &[Value], list: &[u64], counter: u64) -> (i32, Vec<String>) {
        let (code, failed, _) = judge_run(calls, list, counter, &[], json!({}));
        (code, failed)
    }

    /// [`judge`] with fault records and the run's URL extra keys; also returns the summary.
    fn judge_run(
        calls: &[Value],
        list: &[u64],
        counter: u64,
        faults: &[Value],
        url_extra: Value,
    ) -> (i32, Vec<String>, Value) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("sr-soak-check-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let meta = json!({"seed": 1, "minutes": 0.1, "start_ms": 0, "end_ms": 100_000,
            "writers_started_ms": 0, "down_after_ms": 1000, "command_timeout_ms": 2000,
            "url_extra": url_extra,
            "writers": [{"id": "w1", "lang": "rust", "read_from": "primary", "pid": 1}]});
        std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
        let fin = json!({"w1": {"list": list, "counter": counter}});
        std::fs::write(dir.join("final.json"), fin.to_string()).unwrap();
        let lines = |v: &[Value]| v.iter().map(|x| x.to_string() + "\n").collect::<String>();
        std::fs::write(dir.join("events.jsonl"), lines(&events())).unwrap();
        std::fs::write(dir.join("w1.jsonl"), lines(calls)).unwrap();
        std::fs::write(dir.join("faults.jsonl"), lines(faults)).unwrap();
        let samples: Vec<Value> = (0..3)
            .map(|i| {
                json!({"t": 6000 + i * 1000, "writer": "w1", "pid": 1, "fds": 10,
                            "threads": 3, "rss_kb": 10_000})
            })
            .collect();
        std::fs::write(dir.join("samples.jsonl"), lines(&samples)).unwrap();
        let code = check_dir(&dir).unwrap();
        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        assert!(dir.join("timeline.svg").exists());
        let _ = std::fs::remove_dir_all(&dir);
        let failed = summary["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["passed"] == json!(false))
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect();
        (code, failed, summary)
    }

    fn fault(kind: &str, t0: u64, t1: u64, healthy_at: u64) -> Value {
        json!({"kind": kind, "t0": t0, "t1": t1, "healthy_at": healthy_at, "target": "x",
               "detail": "y"})
    }

    fn err_call(v: u64, t0: u64, err: &str) -> Value {
        json!({"w": "w1", "op": "rpush", "v": v, "t0": t0, "t1": t0 + 1000, "ok": false,
               "reply": null, "err": err})
    }

    /// Id 2 acknowledged at 30 000, between the two failovers' windows, and lost.
    fn lost_at_30s() -> Vec<Value> {
        vec![
            call("rpush", Some(1), 1000, 1001, true),
            call("rpush", Some(2), 30_000, 30_005, true),
            call("rpush", Some(3), 36_000, 36_001, true),
        ]
    }

    #[test]
    fn default_mode_reports_partition_losses_apart() {
        let cut = fault("partition_primary_with_writer", 29_000, 33_000, 35_000);
        let (code, failed, summary) = judge_run(&lost_at_30s(), &[1, 3], 0, &[cut], json!({}));
        assert_eq!((code, failed), (0, Vec::<String>::new()));
        assert_eq!(summary["lost_in_partition_windows"], 1);
        assert_eq!(
            summary["lost_acked_writes_by_fault_kind"]["partition_primary_with_writer"],
            1
        );
        assert_eq!(summary["writers"]["w1"]["lost_in_partition_windows"], 1);
        // The same loss inside any other fault's window is still a failure.
        let latency = fault("net_latency", 29_000, 33_000, 35_000);
        let (code, failed, summary) = judge_run(&lost_at_30s(), &[1, 3], 0, &[latency], json!({}));
        assert_eq!(code, 1);
        assert_eq!(failed, ["losses_only_in_promotion_windows"]);
        assert_eq!(summary["lost_acked_writes_by_fault_kind"]["net_latency"], 1);
        // After the topology was healthy again the partition excuses nothing.
        let early = fault("partition_primary", 20_000, 24_000, 26_000);
        let (code, _, _) = judge_run(&lost_at_30s(), &[1, 3], 0, &[early], json!({}));
        assert_eq!(code, 1);
    }

    #[test]
    fn wait_replicas_mode_allows_no_loss_and_counts_not_replicated_as_indeterminate() {
        let durable = json!({"wait_replicas": "2"});
        let cut = fault("partition_primary_with_writer", 29_000, 33_000, 35_000);
        // Ran on the primary (in the final list) or not: both fine, both indeterminate.
        let mut calls = vec![
            call("rpush", Some(1), 1000, 1001, true),
            err_call(2, 30_000, "not_replicated: 1 of 2 replicas confirmed"),
            err_call(3, 31_000, "not_replicated: 0 of 2 replicas confirmed"),
            call("rpush", Some(4), 36_000, 36_001, true),
            // Within the deadline stretched by wait_timeout_ms (2000 + 1000 + slack 1000).
            call("incr", None, 50_000, 53_500, false),
        ];
        let (code, failed, summary) = judge_run(
            &calls,
            &[1, 2, 4],
            0,
            std::slice::from_ref(&cut),
            durable.clone(),
        );
        assert_eq!((code, failed), (0, Vec::<String>::new()));
        let w = &summary["writers"]["w1"];
        assert_eq!(
            (
                w["indeterminate_writes"].as_u64(),
                w["indeterminate_writes_applied"].as_u64()
            ),
            (Some(2), Some(1))
        );
        assert_eq!(w["errors"]["not_replicated"], 2);
        assert!(summary["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "durable_acks_kept" && c["passed"] == json!(true)));
        // An acknowledged write lost, even inside a partition's window, fails the run.
        calls.push(call("rpush", Some(5), 30_500, 30_501, true));
        let (code, failed, _) = judge_run(&calls, &[1, 2, 4], 0, &[cut], durable);
        assert_eq!(code, 1);
        assert!(
            failed.contains(&"durable_acks_kept".to_string()),
            "{failed:?}"
        );
    }

    #[test]
    fn a_clean_history_passes() {
        let calls = [
            call("rpush", Some(1), 1000, 1001, true),
            call("incr", None, 1001, 1002, true),
            // Acknowledged, lost, inside the first failover's window, sent before the announcement.
            call("rpush", Some(2), 10_200, 10_210, true),
            call("rpush", Some(3), 12_000, 12_001, true),
        ];
        assert_eq!(judge(&calls, &[1, 3], 1), (0, vec![]));
    }

    #[test]
    fn each_violation_fails_its_check() {
        let calls = [
            call("rpush", Some(1), 1000, 1001, true),
            // Lost outside every window.
            call("rpush", Some(2), 5000, 5001, true),
            // Lost, sent 400 ms after the demotion was announced at 10 300.
            call("rpush", Some(3), 10_700, 10_710, true),
            // Over its deadline.
            call("rpush", Some(4), 20_000, 23_500, false),
            call("incr", None, 20_000, 20_001, true),
        ];
        // Id 1 twice, a counter above the INCR calls.
        let (code, failed) = judge(&calls, &[1, 1, 4], 2);
        assert_eq!(code, 1);
        assert_eq!(
            failed,
            [
                "no_value_applied_twice",
                "deadlines_kept",
                "losses_only_in_promotion_windows",
                "no_ack_after_demotion"
            ]
        );
    }
}
