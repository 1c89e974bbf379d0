//! `--watch`: a PING every 100 ms to each sentinel for a while, over the probe's warm
//! connection, one after another per sentinel. The longest time without a reply shows a loop
//! stall from outside: a sentinel whose timer does not run for 2 s enters TILT, and the same
//! stall delays its replies by as much.

use std::time::{Duration, Instant};

use super::findings::Findings;
use super::probe;
use super::report::{ms, Mode, SentinelReport, Severity, WatchStats};
use crate::resp::Connection;
use crate::sentinel::replies;

/// Sampling interval.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// A gap without replies longer than this counts as a stall.
pub const STALL: Duration = Duration::from_millis(500);

/// Samples `conn` for `period`, then asks `INFO sentinel` again for the TILT flag.
pub(super) async fn sample(
    conn: &Connection,
    period: Duration,
    reply_timeout: Duration,
) -> WatchStats {
    let start = Instant::now();
    let end = start + period;
    let mut rtts = Vec::new();
    let mut failed = 0u32;
    let mut max_gap = Duration::ZERO;
    let mut stalls = 0u32;
    let mut last_reply = start;
    let mut next = start;
    while next < end {
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        // Wait for the reply up to the end of the period: a stalled sentinel answers late,
        // and the lateness is what is measured.
        let left = end
            .saturating_duration_since(sent)
            .max(Duration::from_millis(1));
        match tokio::time::timeout(left, conn.request(&["PING"])).await {
            Ok(Ok(_)) => {
                let now = Instant::now();
                rtts.push(now - sent);
                let gap = now - last_reply;
                max_gap = max_gap.max(gap);
                if gap > STALL {
                    stalls += 1;
                }
                last_reply = now;
            }
            Ok(Err(_)) => {
                failed += 1;
                if conn.is_closed() {
                    break;
                }
            }
            Err(_) => {
                failed += 1;
                break;
            }
        }
        next += INTERVAL;
        let now = Instant::now();
        if next < now {
            next = now;
        }
    }
    let tail = Instant::now()
        .min(end)
        .saturating_duration_since(last_reply);
    if tail > max_gap {
        max_gap = tail;
    }
    if tail > STALL {
        stalls += 1;
    }
    let stats = probe::stats(&mut rtts);
    let tilt_after = match conn
        .request_timeout(&["INFO", "sentinel"], reply_timeout)
        .await
    {
        Ok(v) => v.as_str().and_then(replies::info_tilt),
        Err(_) => None,
    };
    WatchStats {
        seconds: period.as_secs_f64(),
        interval_ms: INTERVAL.as_millis() as u64,
        samples: rtts.len() as u32,
        failed,
        median_rtt_ms: stats.as_ref().map(|s| s.median_ms),
        max_rtt_ms: stats.as_ref().map(|s| s.max_ms),
        max_gap_ms: ms(max_gap),
        stalls,
        tilt_after,
    }
}

/// A sentinel loop that stalls this long enters TILT (`sentinel_tilt_trigger`).
const TILT_TRIGGER_MS: f64 = 2000.0;

/// The findings from watching one sentinel's loop (only for a sentinel that was reached).
pub(super) fn judge(f: &mut Findings, s: &SentinelReport) {
    let who = s.address.to_string();
    let subject = Some(who.clone());
    if let Some(w) = &s.watch {
        let stall_ms = STALL.as_millis() as f64;
        if w.max_gap_ms > stall_ms || w.failed > 0 {
            let severity = if w.max_gap_ms >= TILT_TRIGGER_MS {
                Severity::Failure
            } else {
                Severity::Warning
            };
            f.add(
                severity,
                Mode::LoopStall,
                "sentinel_stall_seen",
                subject.clone(),
                format!(
                    "sentinel {who} went {} ms without answering while watched ({} stalls over \
                     {} ms, {} PINGs unanswered); a stall of {} ms or more makes a sentinel \
                     enter TILT",
                    w.max_gap_ms, w.stalls, stall_ms, w.failed, TILT_TRIGGER_MS
                ),
            );
        }
        if w.tilt_after == Some(true) && s.tilt != Some(true) {
            f.add(
                Severity::Failure,
                Mode::LoopStall,
                "sentinel_tilt",
                subject.clone(),
                format!("sentinel {who} entered TILT while it was watched"),
            );
        }
    }
}
