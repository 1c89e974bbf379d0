//! The timeline picture the checker writes (`timeline.svg`): time runs left to right; one lane
//! for the faults (a bar from start to end, labelled), the failovers (shaded promotion window
//! ending in a line at `+switch-master`), one lane per writer with its failed calls per second
//! (red marks) and successful ones (grey bars) per second, and the sentinels' commands per second.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use crate::check::Failover;

/// What to draw.
pub struct Input<'a> {
    /// First and last instant shown (unix ms).
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// Fault records (`kind`, `t0`, `t1`, `target`).
    pub faults: &'a [Value],
    /// Failovers found in the event streams.
    pub failovers: &'a [Failover],
    /// Each writer's call log.
    pub calls: &'a BTreeMap<String, Vec<Value>>,
    /// (second, sentinel commands/s) as the checker measured them.
    pub sentinel_rates: &'a [(u64, f64)],
    /// What `sentinel_rates` are.
    pub sentinel_rates_label: String,
    /// Heading.
    pub title: String,
}

const LEFT: f64 = 110.0;
/// Narrowest picture; longer runs get [`PX_PER_S`] so their labels do not overlap (scroll it).
const MIN_WIDTH: f64 = 1400.0;
/// Horizontal scale of long runs.
const PX_PER_S: f64 = 8.0;
const LANE: f64 = 60.0;

/// The SVG document.
pub fn timeline(i: &Input) -> String {
    let span = (i.end.saturating_sub(i.start)).max(1) as f64;
    let width = MIN_WIDTH
        .max(LEFT + 20.0 + span / 1000.0 * PX_PER_S)
        .round();
    let x =
        |t: u64| LEFT + (t.saturating_sub(i.start) as f64).min(span) / span * (width - LEFT - 20.0);
    let lanes = 2 + i.calls.len() + 1;
    let height = 60.0 + lanes as f64 * LANE + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14" font-weight="bold">{}</text>"#,
        esc(&i.title)
    );
    let mut y = 40.0;
    // Time axis: a tick every 30 s.
    let mut t = i.start;
    while t <= i.end {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{y}" x2="{0:.1}" y2="{1}" stroke="#eee"/><text x="{0:.1}" y="{2}" fill="#888">{3}s</text>"##,
            x(t),
            height - 30.0,
            height - 15.0,
            (t - i.start) / 1000
        );
        t += 30_000;
    }
    // Failovers: windows and switch lines across every lane.
    for f in i.failovers {
        let (a, b) = (x(f.window_start), x(f.switch));
        let _ = writeln!(
            s,
            r##"<rect x="{a:.1}" y="{y}" width="{:.1}" height="{:.1}" fill="#fde68a" opacity="0.5"><title>promotion window {} -> switch at {} ({} -> {})</title></rect>
<line x1="{b:.1}" y1="{y}" x2="{b:.1}" y2="{:.1}" stroke="#b45309" stroke-width="1.5"/>"##,
            (b - a).max(1.0),
            height - 70.0,
            f.window_start,
            f.switch,
            f.old,
            f.new,
            height - 30.0
        );
    }
    // Lane 1: faults.
    lane_label(&mut s, width, y, "faults");
    for (k, f) in i.faults.iter().enumerate() {
        let (t0, t1) = (f["t0"].as_u64().unwrap_or(0), f["t1"].as_u64().unwrap_or(0));
        let row = y + 8.0 + (k % 3) as f64 * 16.0;
        let kind = f["kind"].as_str().unwrap_or("?");
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{row}" width="{:.1}" height="12" fill="{}"><title>{} on {}: {}</title></rect><text x="{:.1}" y="{:.1}" font-size="9">{}</text>"##,
            x(t0),
            (x(t1) - x(t0)).max(2.0),
            color(kind),
            esc(kind),
            esc(f["target"].as_str().unwrap_or("")),
            esc(f["detail"].as_str().unwrap_or("")),
            x(t0) + 2.0,
            row + 10.0,
            esc(kind)
        );
    }
    y += LANE;
    // Lane 2: failovers, labelled.
    lane_label(&mut s, width, y, "switches");
    for f in i.failovers {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="9" fill="#b45309">{}&#8594;{}</text>"##,
            x(f.switch) + 2.0,
            y + 30.0,
            f.old,
            f.new
        );
    }
    y += LANE;
    // One lane per writer: calls per second, errors in red.
    for (w, log) in i.calls {
        lane_label(&mut s, width, y, w);
        let mut ok: BTreeMap<u64, u64> = BTreeMap::new();
        let mut bad: BTreeMap<u64, u64> = BTreeMap::new();
        for c in log {
            let sec = c["t1"].as_u64().unwrap_or(0) / 1000 * 1000;
            if c["ok"] == Value::Bool(true) {
                *ok.entry(sec).or_default() += 1;
            } else {
                *bad.entry(sec).or_default() += 1;
            }
        }
        let top = ok
            .values()
            .chain(bad.values())
            .copied()
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let bw = (x(i.start + 1000) - x(i.start)).max(1.0);
        for (sec, n) in &ok {
            let h = *n as f64 / top * (LANE - 12.0);
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="{bw:.1}" height="{h:.1}" fill="#9ca3af"/>"##,
                x(*sec),
                y + LANE - 6.0 - h
            );
        }
        // Failed calls are rare: a full-height red mark for every second that had any.
        for (sec, n) in &bad {
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#dc2626" opacity="0.8"><title>{n} failed calls</title></rect>"##,
                x(*sec),
                y + 4.0,
                bw.max(2.0),
                LANE - 10.0
            );
        }
        let errors: u64 = bad.values().sum();
        let _ = writeln!(
            s,
            r##"<text x="8" y="{:.1}" font-size="9" fill="#dc2626">{errors} failed calls</text>"##,
            y + LANE / 2.0 + 14.0
        );
        y += LANE;
    }
    // Last lane: sentinel commands per second.
    lane_label(&mut s, width, y, "sentinel cmd/s");
    let _ = writeln!(
        s,
        r##"<text x="8" y="{:.1}" font-size="9" fill="#2563eb">{}</text><text x="8" y="{:.1}" font-size="9" fill="#2563eb">max {:.0}/s</text>"##,
        y + LANE / 2.0 + 14.0,
        esc(&i.sentinel_rates_label),
        y + LANE / 2.0 + 26.0,
        i.sentinel_rates.iter().map(|r| r.1).fold(0.0f64, f64::max)
    );
    let top = i.sentinel_rates.iter().map(|r| r.1).fold(1.0f64, f64::max);
    let pts: Vec<String> = i
        .sentinel_rates
        .iter()
        .map(|(t, r)| {
            format!(
                "{:.1},{:.1}",
                x(*t),
                y + LANE - 6.0 - r / top * (LANE - 12.0)
            )
        })
        .collect();
    let _ = writeln!(
        s,
        r##"<polyline points="{}" fill="none" stroke="#2563eb" stroke-width="1"/>
</svg>"##,
        pts.join(" ")
    );
    s
}

fn lane_label(s: &mut String, width: f64, y: f64, text: &str) {
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{y}" x2="{}" y2="{y}" stroke="#ccc"/><text x="8" y="{:.1}">{}</text>"##,
        width - 20.0,
        y + LANE / 2.0,
        esc(text)
    );
}

fn color(kind: &str) -> &'static str {
    match kind {
        "kill_primary" | "stop_primary" => "#f87171",
        "sentinel_failover" => "#fb923c",
        "sentinel_restart" | "sentinel_tilt" => "#a78bfa",
        "net_latency" | "net_blackhole" | "net_reset" => "#60a5fa",
        k if k.starts_with(crate::faults::PARTITION_PREFIX) => "#f472b6",
        _ => "#86efac",
    }
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
