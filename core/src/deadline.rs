//! The one rule for a per-call timeout, the same in every language.
//!
//! A call's own timeout replaces the client's `command_timeout_ms` for that call and bounds all
//! of it, blocking commands included. Leaving it out means the client's default. Given, it must
//! be a number greater than 0 and at most [`MAX_MS`] milliseconds: 0 is refused rather than read
//! as "expire now" or "no deadline" (the two readings languages disagree on), as are negative,
//! NaN, infinite and larger values. The refusal is a `config` error that names the value in the
//! caller's unit, raised before anything is sent. C, whose options struct has no "absent",
//! reads a zeroed `timeout_ms` as left out (the struct's zero value), and says so in its header.

use std::time::Duration;

use crate::error::{Error, Result};

/// The largest per-call timeout, in milliseconds: 2^31 - 1 (24.8 days), the most every host's
/// own timers take (JavaScript's `setTimeout`, .NET's `Timer`), so a deadline never overflows
/// a host clock.
pub const MAX_MS: u64 = i32::MAX as u64;

/// The unit a language states its timeouts in; the error message uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Python, Ruby.
    Seconds,
    /// C, Node, .NET (as a `TimeSpan`'s milliseconds), JVM.
    Milliseconds,
}

impl Unit {
    /// [`MAX_MS`] in this unit. Divided, not multiplied by 0.001, so that it is the same double
    /// a host gets from `2147483647 / 1000`.
    fn max(self) -> f64 {
        match self {
            Unit::Seconds => MAX_MS as f64 / 1000.0,
            Unit::Milliseconds => MAX_MS as f64,
        }
    }

    /// `value` (in this unit) in seconds.
    pub(crate) fn seconds(self, value: f64) -> f64 {
        match self {
            Unit::Seconds => value,
            Unit::Milliseconds => value / 1000.0,
        }
    }

    /// The unit's name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Unit::Seconds => "seconds",
            Unit::Milliseconds => "milliseconds",
        }
    }
}

/// `value` (in `unit`) as a per-call timeout, or the `config` error every binding raises for it.
pub fn call_timeout(value: f64, unit: Unit) -> Result<Duration> {
    if value > 0.0 && value <= unit.max() {
        // Finite, positive and bounded: the conversion cannot fail. The floor keeps a
        // sub-nanosecond value from reading as 0, the ceiling a rounding from passing MAX_MS.
        return Ok(Duration::from_secs_f64(unit.seconds(value))
            .clamp(Duration::from_nanos(1), Duration::from_millis(MAX_MS)));
    }
    Err(Error::config(format!(
        "timeout must be a number of {} greater than 0 and at most {}, not {}",
        unit.name(),
        unit.max(),
        show(value)
    )))
}

/// A call's own timeout given as a [`Duration`] (Rust callers, and what the hosts' numbers
/// became): the same rule, so `Duration::ZERO` is refused and a huge one cannot overflow the
/// clock.
pub fn check(timeout: Duration) -> Result<Duration> {
    if !timeout.is_zero() && timeout <= Duration::from_millis(MAX_MS) {
        return Ok(timeout);
    }
    call_timeout(timeout.as_secs_f64() * 1000.0, Unit::Milliseconds)
}

/// [`call_timeout`] for hosts whose timeout is an optional number: `None` is the client's
/// default.
pub fn optional_call_timeout(value: Option<f64>, unit: Unit) -> Result<Option<Duration>> {
    value.map(|v| call_timeout(v, unit)).transpose()
}

/// A close's grace period, `name` as the binding calls it, in `unit`: from 0 (close at once) to
/// [`MAX_MS`] milliseconds; `None` is the core's default. Anything else (negative, NaN, infinite,
/// larger) is the `config` error every binding raises for it, naming the value.
pub fn grace(name: &str, value: Option<f64>, unit: Unit) -> Result<Option<Duration>> {
    let Some(value) = value else { return Ok(None) };
    if (0.0..=unit.max()).contains(&value) {
        return Ok(Some(
            Duration::from_secs_f64(unit.seconds(value)).min(Duration::from_millis(MAX_MS)),
        ));
    }
    Err(Error::config(format!(
        "{name} must be a number of {} from 0 to {}, not {}",
        unit.name(),
        unit.max(),
        show(value)
    )))
}

fn show(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn accepts_what_is_positive_and_bounded_in_either_unit() {
        let ms = |v| call_timeout(v, Unit::Milliseconds).unwrap();
        let s = |v| call_timeout(v, Unit::Seconds).unwrap();
        assert_eq!(ms(300.0), Duration::from_millis(300));
        assert_eq!(s(0.3), Duration::from_millis(300));
        assert_eq!(ms(MAX_MS as f64), Duration::from_millis(MAX_MS));
        assert_eq!(s(MAX_MS as f64 / 1000.0), Duration::from_millis(MAX_MS));
        assert_eq!(ms(1e-12), Duration::from_nanos(1));
    }

    #[test]
    fn refuses_zero_negative_nan_infinite_and_too_large_naming_the_value() {
        for (value, shown) in [
            (0.0, "not 0"),
            (-1.0, "not -1"),
            (f64::NAN, "not NaN"),
            (f64::INFINITY, "not inf"),
            (MAX_MS as f64 + 1.0, "not 2147483648"),
        ] {
            let e = call_timeout(value, Unit::Milliseconds).unwrap_err();
            assert_eq!(e.code(), ErrorCode::Config);
            assert!(e.to_string().contains(shown), "{e}");
            assert!(e.to_string().contains("milliseconds"), "{e}");
        }
        let e = call_timeout(0.0, Unit::Seconds).unwrap_err();
        assert!(
            e.to_string()
                .contains("seconds greater than 0 and at most 2147483.647"),
            "{e}"
        );
    }

    #[test]
    fn a_duration_follows_the_same_rule() {
        assert_eq!(
            check(Duration::from_millis(300)).unwrap(),
            Duration::from_millis(300)
        );
        assert_eq!(check(Duration::ZERO).unwrap_err().code(), ErrorCode::Config);
        assert_eq!(check(Duration::MAX).unwrap_err().code(), ErrorCode::Config);
    }

    #[test]
    fn left_out_is_the_default() {
        assert_eq!(optional_call_timeout(None, Unit::Seconds).unwrap(), None);
    }

    #[test]
    fn a_grace_may_be_zero_and_is_bounded_like_a_timeout() {
        assert_eq!(grace("grace", None, Unit::Seconds).unwrap(), None);
        assert_eq!(
            grace("grace", Some(0.0), Unit::Seconds).unwrap(),
            Some(Duration::ZERO)
        );
        assert_eq!(
            grace("graceMs", Some(1500.0), Unit::Milliseconds).unwrap(),
            Some(Duration::from_millis(1500))
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, MAX_MS as f64 + 1.0] {
            let e = grace("graceMs", Some(bad), Unit::Milliseconds).unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::Config);
            assert!(
                e.message().starts_with(
                    "graceMs must be a number of milliseconds from 0 to 2147483647, not "
                ),
                "{e}"
            );
        }
    }
}
