//! The shared argument text cases (`tests/cases/arguments.tsv`, which every binding's suite
//! reads): the core's policy (`sentinel_recovery::arguments`) gives each number its text, or
//! refuses NaN naming the argument.

mod common;

use common::case_rows;
use sentinel_recovery::arguments::{float32_text, float_text};
use sentinel_recovery::ErrorCode;

fn number(value: &str) -> f64 {
    match value {
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().unwrap_or_else(|e| panic!("{v}: {e}")),
    }
}

#[test]
fn every_binding_s_argument_text_holds_in_the_core() {
    for row in case_rows("arguments.tsv", 3, 19) {
        let (kind, value, want) = (row[0].as_str(), row[1].as_str(), row[2].as_str());
        let line = row.join(" ");
        let got = match kind {
            "int" => Ok(value.parse::<i128>().unwrap().to_string()),
            "float" => float_text(number(value), 1),
            "float32" => float32_text(number(value) as f32, 1),
            other => panic!("arguments.tsv: kind {other:?}"),
        };
        match (want, got) {
            ("refused", Err(e)) => {
                assert_eq!(e.code(), ErrorCode::Config, "{line}");
                assert_eq!(e.message(), "argument 1 is NaN", "{line}");
            }
            (want, Ok(text)) => assert_eq!(text, want, "{line}"),
            (want, Err(e)) => panic!("{line}: wanted {want:?}, got {e}"),
        }
    }
}
