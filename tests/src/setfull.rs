//! A set-full checker (Jepsen's shape) for partition scenarios: writers add unique values to one
//! set and log each call's outcome; after heal and resync one final read of the set judges them.
//!
//! A history is JSON lines, one per call, in every writer language:
//! `{"w":"w1","v":"w1-17","t0":<unix ms>,"t1":<unix ms>,"outcome":"ok"|"fail"|"info","reply":1,"err":null}`.
//! `ok`: acknowledged (the reply is SADD's count); `fail`: known not applied (the server refused
//! it, or it never left the client); `info`: indeterminate (a timeout or a lost connection after
//! it may have been sent, or the server ran it but could not confirm it durable).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::TestkitError;

/// What a writer learned of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Acknowledged.
    Ok,
    /// Known not applied.
    Fail,
    /// May or may not have been applied.
    Info,
}

/// One logged call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Op {
    /// Writer id.
    pub w: String,
    /// The unique value added.
    pub v: String,
    /// Call start, unix ms.
    pub t0: u64,
    /// Call end, unix ms.
    pub t1: u64,
    /// What the writer learned.
    pub outcome: Outcome,
    /// SADD's reply when acknowledged (1 = added now, 0 = was already there).
    #[serde(default)]
    pub reply: Option<i64>,
    /// The error text when not acknowledged.
    #[serde(default)]
    pub err: Option<String>,
}

/// Reads a history file; a line that is not a call (a writer killed mid-line) is skipped.
pub fn read_history(path: &Path) -> Result<Vec<Op>, TestkitError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TestkitError::io(format!("reading {}", path.display()), e))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// The judgement of one writer's calls (or of all of them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Calls made.
    pub attempted: usize,
    /// Acknowledged calls.
    pub acknowledged: usize,
    /// Acknowledged values missing from the final set.
    pub lost: usize,
    /// Calls known not applied.
    pub failed: usize,
    /// Of those, values present in the final set: a "failure" that was applied after all.
    pub failed_but_present: usize,
    /// Indeterminate calls.
    pub indeterminate: usize,
    /// Of those, values present in the final set.
    pub indeterminate_present: usize,
    /// Acknowledged with SADD reply 0: the value was already there, so the write ran twice (the
    /// values are unique).
    pub applied_twice: usize,
    /// Earliest and latest start of a lost call, in ms relative to the fault's start.
    pub lost_window_ms: Option<(i64, i64)>,
    /// The longest time, after the fault's start, without an acknowledgement (up to the last
    /// call), in ms.
    pub max_unavailable_ms: u64,
}

impl Counts {
    /// Lost acknowledged writes in percent of acknowledged ones (0 when none were).
    pub fn lost_percent(&self) -> f64 {
        if self.acknowledged == 0 {
            0.0
        } else {
            100.0 * self.lost as f64 / self.acknowledged as f64
        }
    }
}

/// The checker's verdict on a whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// All writers together.
    pub total: Counts,
    /// Per writer id.
    pub writers: BTreeMap<String, Counts>,
    /// Values in the final set that no writer logged (0 unless something else wrote).
    pub unexpected: usize,
}

impl Report {
    /// The accounting holds: every call is acknowledged, failed or indeterminate; losses are
    /// among the acknowledged; per-writer counts add up to the totals. `Err` names what does not.
    pub fn consistent(&self) -> Result<(), String> {
        let t = &self.total;
        if t.acknowledged + t.failed + t.indeterminate != t.attempted {
            return Err(format!("outcomes do not add up: {t:?}"));
        }
        if t.lost > t.acknowledged || t.indeterminate_present > t.indeterminate {
            return Err(format!("subsets larger than their sets: {t:?}"));
        }
        let sum = |f: fn(&Counts) -> usize| self.writers.values().map(f).sum::<usize>();
        if sum(|c| c.attempted) != t.attempted || sum(|c| c.lost) != t.lost {
            return Err("per-writer counts do not add up to the totals".into());
        }
        Ok(())
    }
}

/// Judges `ops` against the `final_set` read after heal; times are taken relative to
/// `fault_at_ms` (unix ms).
pub fn check(ops: &[Op], final_set: &HashSet<String>, fault_at_ms: u64) -> Report {
    let mut report = Report::default();
    let mut by_writer: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_writer.entry(op.w.as_str()).or_default().push(op);
    }
    for (w, calls) in &by_writer {
        let c = judge(calls, final_set, fault_at_ms);
        add(&mut report.total, &c);
        report.writers.insert(w.to_string(), c);
    }
    let logged: HashSet<&str> = ops.iter().map(|o| o.v.as_str()).collect();
    report.unexpected = final_set
        .iter()
        .filter(|v| !logged.contains(v.as_str()))
        .count();
    report
}

fn judge(calls: &[&Op], final_set: &HashSet<String>, fault_at_ms: u64) -> Counts {
    let rel = |t: u64| t as i64 - fault_at_ms as i64;
    let mut c = Counts {
        attempted: calls.len(),
        ..Counts::default()
    };
    for op in calls {
        let present = final_set.contains(&op.v);
        match op.outcome {
            Outcome::Ok => {
                c.acknowledged += 1;
                if op.reply == Some(0) {
                    c.applied_twice += 1;
                }
                if !present {
                    c.lost += 1;
                    let (lo, hi) = c.lost_window_ms.unwrap_or((i64::MAX, i64::MIN));
                    c.lost_window_ms = Some((lo.min(rel(op.t0)), hi.max(rel(op.t0))));
                }
            }
            Outcome::Fail => {
                c.failed += 1;
                c.failed_but_present += usize::from(present);
            }
            Outcome::Info => {
                c.indeterminate += 1;
                c.indeterminate_present += usize::from(present);
            }
        }
    }
    let mut acks: Vec<u64> = calls
        .iter()
        .filter(|o| o.outcome == Outcome::Ok && o.t1 >= fault_at_ms)
        .map(|o| o.t1)
        .collect();
    acks.sort_unstable();
    let end = calls.iter().map(|o| o.t1).max().unwrap_or(fault_at_ms);
    let mut last = fault_at_ms;
    for t in acks.into_iter().chain(std::iter::once(end)) {
        c.max_unavailable_ms = c.max_unavailable_ms.max(t.saturating_sub(last));
        last = t.max(last);
    }
    c
}

fn add(total: &mut Counts, c: &Counts) {
    total.attempted += c.attempted;
    total.acknowledged += c.acknowledged;
    total.lost += c.lost;
    total.failed += c.failed;
    total.failed_but_present += c.failed_but_present;
    total.indeterminate += c.indeterminate;
    total.indeterminate_present += c.indeterminate_present;
    total.applied_twice += c.applied_twice;
    total.max_unavailable_ms = total.max_unavailable_ms.max(c.max_unavailable_ms);
    total.lost_window_ms = match (total.lost_window_ms, c.lost_window_ms) {
        (Some((a, b)), Some((x, y))) => Some((a.min(x), b.max(y))),
        (a, b) => a.or(b),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(w: &str, v: &str, t: u64, outcome: Outcome, reply: Option<i64>) -> Op {
        Op {
            w: w.into(),
            v: v.into(),
            t0: t,
            t1: t + 5,
            outcome,
            reply,
            err: None,
        }
    }

    #[test]
    fn judges_losses_doubles_and_windows() {
        let ops = vec![
            op("w1", "a", 900, Outcome::Ok, Some(1)),
            op("w1", "b", 1100, Outcome::Ok, Some(1)),
            op("w1", "c", 1500, Outcome::Ok, Some(0)),
            op("w1", "d", 1600, Outcome::Fail, None),
            op("w1", "e", 1700, Outcome::Info, None),
            op("w2", "f", 1000, Outcome::Ok, Some(1)),
            op("w2", "g", 4000, Outcome::Ok, Some(1)),
        ];
        let set: HashSet<String> = ["a", "c", "d", "e", "f", "g", "zz"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let r = check(&ops, &set, 1000);
        r.consistent().unwrap();
        let w1 = &r.writers["w1"];
        assert_eq!((w1.acknowledged, w1.lost, w1.applied_twice), (3, 1, 1));
        assert_eq!((w1.failed, w1.failed_but_present), (1, 1));
        assert_eq!((w1.indeterminate, w1.indeterminate_present), (1, 1));
        assert_eq!(w1.lost_window_ms, Some((100, 100)));
        // w2: acks end at 1005 and then 4005.
        assert_eq!(r.writers["w2"].max_unavailable_ms, 3000);
        assert_eq!((r.total.lost, r.unexpected), (1, 1));
        assert!((w1.lost_percent() - 33.33).abs() < 0.01);
    }

    #[test]
    fn reads_histories_and_skips_torn_lines() {
        let dir = std::env::temp_dir().join(format!("sr-setfull-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("h.jsonl");
        std::fs::write(
            &p,
            "{\"w\":\"w1\",\"v\":\"w1-1\",\"t0\":1,\"t1\":2,\"outcome\":\"ok\",\"reply\":1,\"err\":null}\n{\"w\":\"w1\",\"v\":",
        )
        .unwrap();
        let ops = read_history(&p).unwrap();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].outcome, Outcome::Ok);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
