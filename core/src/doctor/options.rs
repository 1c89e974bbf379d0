//! How to diagnose ([`Options`]), and what every step of one run shares ([`Ctx`]).

use std::time::Duration;

use super::setup::Setup;

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

/// What every step of one run needs.
pub(super) struct Ctx {
    pub(super) setup: Setup,
    pub(super) service: String,
    pub(super) options: Options,
    pub(super) reply_timeout: Duration,
}
