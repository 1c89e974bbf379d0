//! The failover time to expect from the configuration.
//!
//! After `down-after-milliseconds` without a valid reply a sentinel flags the primary `s_down`.
//! It then asks its peers (every `SENTINEL_ASK_PERIOD`, 1 s) until a quorum agrees (`o_down`),
//! waits a random desync of up to 1 s before starting a failover, collects votes (another ask
//! round), promotes a replica and sees it promoted on its next INFO (1 s). With the default
//! periods that is about 3 s on top of `down-after-milliseconds`; a failed election is retried
//! only after twice `failover-timeout`.

use super::report::{SentinelReport, Timing};

/// The election estimate: o_down agreement (1 s) + start desync (≤ 1 s) + vote and promotion
/// (1 s), with the default sentinel periods.
pub const ELECTION_ESTIMATE_MS: u64 = 3000;

/// Expected failover time from the largest `down-after-milliseconds` reported.
pub(super) fn expected(sentinels: &[SentinelReport], watch_seconds: Option<f64>) -> Timing {
    let views = || sentinels.iter().filter_map(|s| s.master.as_ref());
    let down_after_ms = views().filter_map(|m| m.down_after_ms).max();
    Timing {
        down_after_ms,
        election_estimate_ms: ELECTION_ESTIMATE_MS,
        expected_failover_ms: down_after_ms.map(|d| d + ELECTION_ESTIMATE_MS),
        failover_timeout_ms: views().filter_map(|m| m.failover_timeout_ms).max(),
        watch_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::sentinel;
    use super::*;

    #[test]
    fn down_after_plus_election() {
        let mut s = vec![sentinel(1, 6379, 0, &[]), sentinel(2, 6379, 0, &[])];
        s[1].master.as_mut().unwrap().down_after_ms = Some(30_000);
        let t = expected(&s, None);
        assert_eq!(t.down_after_ms, Some(30_000));
        assert_eq!(t.expected_failover_ms, Some(33_000));
        assert_eq!(t.failover_timeout_ms, Some(3000));
        assert_eq!(expected(&[], Some(2.0)).expected_failover_ms, None);
    }
}
