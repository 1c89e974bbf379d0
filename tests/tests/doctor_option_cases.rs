//! The shared doctor option cases (`tests/cases/doctor_options.tsv`, which every binding with
//! doctor options reads): the core's rule (`doctor::Options::from_host`) in both units the
//! bindings give `watch` in.

mod common;

use common::case_rows;
use sentinel_recovery::deadline::Unit;
use sentinel_recovery::doctor::Options;
use sentinel_recovery::ErrorCode;

fn number(value: &str) -> Option<f64> {
    match value {
        "-" => None,
        "NaN" => Some(f64::NAN),
        v => Some(v.parse().unwrap_or_else(|e| panic!("{v}: {e}"))),
    }
}

#[test]
fn every_binding_s_doctor_options_hold_in_the_core() {
    for fields in case_rows("doctor_options.tsv", 3, 10) {
        let line = fields.join(" ");
        let (watch_ms, pings) = (number(&fields[0]), number(&fields[1]));
        for (watch, unit) in [
            (watch_ms, Unit::Milliseconds),
            (watch_ms.map(|ms| ms / 1000.0), Unit::Seconds),
        ] {
            match (fields[2].as_str(), Options::from_host(watch, unit, pings)) {
                ("accepted", Ok(o)) => {
                    assert_eq!(o.pings, pings.map_or(10, |p| p as u32), "{line}");
                    let want = watch_ms.map(|ms| std::time::Duration::from_secs_f64(ms / 1000.0));
                    assert_eq!(o.watch, want, "{line} ({unit:?})");
                }
                ("refused", Err(e)) => {
                    assert_eq!(e.code(), ErrorCode::Config, "{line}");
                    let named = if watch_ms.is_some() {
                        "watch must be"
                    } else {
                        "pings must be"
                    };
                    assert!(e.message().starts_with(named), "{line}: {e}");
                }
                (want, got) => panic!("{line} ({unit:?}): wanted {want}, got {got:?}"),
            }
        }
    }
}
