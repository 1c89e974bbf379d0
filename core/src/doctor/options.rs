//! How to diagnose ([`Options`]), and what every step of one run shares ([`Ctx`]).

use std::time::Duration;

use super::setup::Setup;
use crate::deadline::Unit;
use crate::error::{Error, Result};

/// The longest `watch`: an hour.
pub const MAX_WATCH_SECONDS: f64 = 3600.0;
/// The most PINGs per sentinel.
pub const MAX_PINGS: u32 = 1000;

/// How to diagnose.
#[derive(Clone, Debug)]
pub struct Options {
    /// Sample a PING every 100 ms to each sentinel for this long, to see loop stalls from
    /// outside (`--watch SECONDS`). Default: no sampling.
    pub watch: Option<Duration>,
    /// PINGs per sentinel for the round-trip figures. Default 10.
    pub pings: u32,
    /// Deadline of each command. Default: the configuration's `connect_timeout_ms`.
    pub reply_timeout: Option<Duration>,
    /// Name resolution slower than this is reported. Default 100 ms.
    pub slow_name: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            watch: None,
            pings: 10,
            reply_timeout: None,
            slow_name: Duration::from_millis(100),
        }
    }
}

impl Options {
    /// Options from a host's numbers, under the one rule every language keeps (the CLI's
    /// `--watch` too): `watch` (in `unit`) left out for no sampling, given more than 0 and at
    /// most an hour; `pings` left out for 10, given a whole number from 1 to [`MAX_PINGS`].
    /// Anything else (0, negative, NaN, infinite, a fraction of a PING, too large) is a
    /// `config` error naming the option and the value, before anything is sent.
    pub fn from_host(watch: Option<f64>, unit: Unit, pings: Option<f64>) -> Result<Options> {
        let mut options = Options::default();
        if let Some(value) = watch {
            let seconds = unit.seconds(value);
            if !(seconds > 0.0 && seconds <= MAX_WATCH_SECONDS) {
                return Err(Error::config(format!(
                    "watch must be a number of {} greater than 0 and at most {}, not {value}",
                    unit.name(),
                    MAX_WATCH_SECONDS / unit.seconds(1.0)
                )));
            }
            options.watch = Some(Duration::from_secs_f64(seconds));
        }
        if let Some(value) = pings {
            if !(value >= 1.0 && value <= MAX_PINGS as f64 && value.fract() == 0.0) {
                return Err(Error::config(format!(
                    "pings must be a whole number from 1 to {MAX_PINGS}, not {value}"
                )));
            }
            options.pings = value as u32;
        }
        Ok(options)
    }
}

/// What every step of one run needs.
pub(super) struct Ctx {
    pub(super) setup: Setup,
    pub(super) service: String,
    pub(super) options: Options,
    pub(super) reply_timeout: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn left_out_is_the_default_and_given_is_checked() {
        let o = Options::from_host(None, Unit::Seconds, None).unwrap();
        assert_eq!((o.watch, o.pings), (None, 10));
        let o = Options::from_host(Some(1500.0), Unit::Milliseconds, Some(3.0)).unwrap();
        assert_eq!((o.watch, o.pings), (Some(Duration::from_millis(1500)), 3));
        for (watch, pings) in [
            (Some(0.0), None),
            (Some(-1.0), None),
            (Some(f64::NAN), None),
            (Some(3601.0), None),
            (None, Some(0.0)),
            (None, Some(2.5)),
            (None, Some(1001.0)),
        ] {
            let e = Options::from_host(watch, Unit::Seconds, pings).unwrap_err();
            assert_eq!(e.code(), ErrorCode::Config, "{watch:?} {pings:?}");
        }
    }
}
