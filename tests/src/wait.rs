//! Polling until a condition holds.

use std::time::{Duration, Instant};

use crate::error::TestkitError;

/// Polls `f` every 25 ms until it returns `Some`, and returns that value; after `timeout` returns
/// [`TestkitError::Timeout`] naming `what`. `f` is always called at least once.
pub fn wait_until<T>(
    timeout: Duration,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> Result<T, TestkitError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(TestkitError::Timeout(format!(
                "{what} (after {:.1} s)",
                timeout.as_secs_f64()
            )));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}
