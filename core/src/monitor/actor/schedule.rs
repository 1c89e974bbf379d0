//! When rounds run: the retry schedule after a failed round, the spacing of the rounds the data
//! path asks for, and the reasons kept for after the round that is running.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::Config;
use crate::error::Error;
use crate::monitor::backoff::Backoff;

/// The first delay between rounds that the data path asks for; doubles while reports keep coming.
const REPORT_BASE: Duration = Duration::from_millis(100);

/// The monitor's round schedule and counters.
pub(super) struct Schedule {
    /// Delays between failed rounds; reset by a found (or verified) primary.
    retry: Backoff,
    /// Why the last round failed, until one succeeds; published for the handles.
    last_error: Option<Error>,
    /// Rounds finished (and verified switches): the data path waits for this count to pass the
    /// round whose view failed a command.
    rounds: u64,
    /// Rounds started, for telling whether a report was already served by a newer round.
    started: u64,
    /// Spacing of the rounds the data path asks for, so that no fault of a node can make the
    /// monitor ask the sentinels faster than this schedule.
    report_backoff: Backoff,
    /// No round the data path asks for starts before this.
    report_not_before: Instant,
    /// A report that came too early, run at `report_not_before`.
    deferred_report: Option<&'static str>,
    /// A reason for a round that arrived while one was running.
    deferred_trigger: Option<&'static str>,
}

impl Schedule {
    pub(super) fn new(config: &Config) -> Schedule {
        Schedule {
            retry: Backoff::new(config.retry_base(), config.retry_max()),
            last_error: None,
            rounds: 0,
            started: 0,
            report_backoff: Backoff::new(
                REPORT_BASE.max(config.retry_base()),
                config.retry_max().max(REPORT_BASE),
            ),
            report_not_before: Instant::now(),
            deferred_report: None,
            deferred_trigger: None,
        }
    }

    pub(super) fn last_error(&self) -> Option<&Error> {
        self.last_error.as_ref()
    }

    pub(super) fn rounds(&self) -> u64 {
        self.rounds
    }

    pub(super) fn round_started(&mut self) {
        self.started += 1;
    }

    pub(super) fn round_finished(&mut self) {
        self.rounds += 1;
    }

    /// A primary was found: retries start again from the first delay.
    pub(super) fn succeeded(&mut self) {
        self.retry.reset();
        self.last_error = None;
    }

    /// A round failed with `error`: the delay before the next one.
    pub(super) fn failed(&mut self, error: Error) -> Duration {
        let delay = self.retry.next_delay();
        tracing::warn!(error = %error, retry_in_ms = delay.as_millis() as u64, "discovery failed");
        self.last_error = Some(error);
        delay
    }

    /// A verified switch counts as a round for the data path: commands waiting for a newer view
    /// than the one that failed them go on now.
    pub(super) fn switched(&mut self) {
        self.started += 1;
        self.rounds += 1;
        self.succeeded();
    }

    /// Whether a round started after round `round`, whose view the data path reports.
    pub(super) fn served(&self, round: u64) -> bool {
        self.started > round
    }

    /// Lets a round the data path asked for start now, or defers it to the report schedule:
    /// however fast commands fail, rounds they cause follow a backoff that resets only after a
    /// quiet period.
    pub(super) fn gate_report(
        &mut self,
        reason: &'static str,
        quiet: Duration,
    ) -> Option<&'static str> {
        let now = Instant::now();
        if now > self.report_not_before + quiet {
            self.report_backoff.reset();
        }
        if now >= self.report_not_before {
            self.report_not_before = now + self.report_backoff.next_delay();
            self.deferred_report = None;
            Some(reason)
        } else {
            self.deferred_report = Some(reason);
            None
        }
    }

    /// The deferred report and when it is due.
    pub(super) fn deferred_report(&self) -> Option<(Instant, &'static str)> {
        self.deferred_report.map(|r| (self.report_not_before, r))
    }

    pub(super) fn clear_deferred_report(&mut self) {
        self.deferred_report = None;
    }

    /// Keeps `reason` for after the running round, unless one is kept already.
    pub(super) fn defer(&mut self, reason: &'static str) {
        self.deferred_trigger.get_or_insert(reason);
    }

    pub(super) fn take_deferred(&mut self) -> Option<&'static str> {
        self.deferred_trigger.take()
    }
}
