//! Delays between discovery attempts: capped exponential with jitter, armed one at a time.
//!
//! There is deliberately no interval timer here: the monitor asks for the next delay only when the
//! previous attempt has finished, so attempts can never pile up behind a slow one, and a success
//! (a state, not an event) resets the schedule.

use std::time::Duration;

use rand::Rng;

/// The retry schedule of one monitor.
#[derive(Clone, Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    /// Starts at `base`, doubles per failure, never above `max`.
    pub fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max: max.max(base),
            failures: 0,
        }
    }

    /// The delay before the next attempt after one more failure: the capped exponential delay
    /// times a random factor in 0.8..1.2, so many clients do not retry in lockstep.
    pub fn next_delay(&mut self) -> Duration {
        let exp = self.base.saturating_mul(1u32 << self.failures.min(20));
        self.failures = self.failures.saturating_add(1);
        let capped = exp.min(self.max);
        capped.mul_f64(rand::thread_rng().gen_range(0.8..1.2))
    }

    /// Back to the first delay, after a success.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_with_bounded_jitter_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        let delays: Vec<u128> = (0..8).map(|_| b.next_delay().as_millis()).collect();
        let expected = [100, 200, 400, 800, 1000, 1000, 1000, 1000];
        for (d, e) in delays.iter().zip(expected) {
            assert!(*d >= e * 8 / 10 && *d <= e * 12 / 10, "{delays:?}");
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(120));
    }
}
