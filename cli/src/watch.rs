//! `sentinel-recovery watch`.

use std::io::Write;

use sentinel_recovery::{Address, Client, Event, EventKind, Topology};

/// `watch URL [--json]`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The service's URL
    pub url: String,
    /// One JSON object per line instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn main(Args { url, json }: Args) -> Result<(), String> {
    let client = Client::open_url(&url).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let first = client.ready().await;
        // Subscribe, then read the snapshot: whatever happened before is in the snapshot, and
        // whatever happens after the subscription is printed as an event.
        let mut events = client.events().map_err(|e| e.to_string())?;
        let topology = client.topology().map_err(|e| e.to_string())?;
        print_topology(&topology, json);
        if let Err(e) = first {
            if !json {
                println!(
                    "{} discovery: {e} (still trying)",
                    stamp(sentinel_recovery::unix_ms())
                );
            }
        }
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                event = events.next() => match event {
                    Some(event) => print_event(&event, json),
                    None => break,
                },
            }
        }
        client.close().await;
        Ok(())
    })
}

pub(crate) fn print_topology(t: &Topology, json: bool) {
    if json {
        let mut value = serde_json::to_value(t).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert("kind".into(), "topology".into());
            map.insert("at".into(), sentinel_recovery::unix_ms().into());
        }
        line(&value.to_string());
        return;
    }
    let primary = t
        .primary
        .as_ref()
        .map(Address::to_string)
        .unwrap_or_else(|| "unknown".into());
    let replicas: Vec<String> = t.replicas.iter().map(Address::to_string).collect();
    let sentinels: Vec<String> = t
        .sentinels
        .iter()
        .map(|s| {
            format!(
                "{}{}",
                Address::new(s.host.clone(), s.port),
                if s.up { "" } else { " (down)" }
            )
        })
        .collect();
    line(&format!(
        "{} service {}: primary {primary}, replicas [{}], sentinels [{}], epoch {}, {}",
        stamp(sentinel_recovery::unix_ms()),
        t.service,
        replicas.join(", "),
        sentinels.join(", "),
        t.epoch,
        if t.healthy { "healthy" } else { "unhealthy" }
    ));
}

pub(crate) fn print_event(e: &Event, json: bool) {
    if json {
        line(&serde_json::to_string(e).unwrap_or_default());
        return;
    }
    let detail = match &e.kind {
        EventKind::PrimaryChanged { old, new } => format!(
            "{} -> {new}",
            old.as_ref()
                .map(Address::to_string)
                .unwrap_or_else(|| "none".into())
        ),
        EventKind::ReplicasChanged { replicas } => {
            format!(
                "[{}]",
                replicas
                    .iter()
                    .map(Address::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        EventKind::SentinelsChanged { sentinels } => format!(
            "[{}]",
            sentinels
                .iter()
                .map(|s| Address::new(s.host.clone(), s.port).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        EventKind::SentinelDown { sentinel } | EventKind::SentinelUp { sentinel } => {
            sentinel.to_string()
        }
        EventKind::ConnectionLost { address } | EventKind::ConnectionRestored { address } => {
            address.to_string()
        }
        EventKind::DiscoveryFailed { error } => error.to_string(),
        EventKind::FailoverStarted { primary, promoting } => {
            format!("{primary} -> {promoting} (writes wait)")
        }
        EventKind::SentinelTilt { sentinel, on } => {
            format!(
                "{sentinel} {}",
                if *on { "entered TILT" } else { "left TILT" }
            )
        }
        EventKind::SentinelServiceUnknown { sentinel } => sentinel.to_string(),
        EventKind::SubscriptionLost { address } => address.to_string(),
        EventKind::SubscriptionRestored { address, gap_ms } => {
            format!("{address} after {gap_ms} ms")
        }
        EventKind::SentinelMajorityLost { heard, known } => {
            format!("{heard} of {known} sentinels heard in time (writes wait)")
        }
        EventKind::SentinelMajorityRegained {
            primary,
            confirmed,
            known,
        } => format!("{confirmed} of {known} sentinels name {primary} (writes resume)"),
        _ => String::new(),
    };
    line(&format!("{} {} {detail}", stamp(e.at), e.kind.name()));
}

pub(crate) fn line(text: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (watch ... | head) just ends the output.
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// `HH:MM:SS.mmm` in UTC: enough to read a failover timeline without a date library.
fn stamp(unix_ms: u64) -> String {
    let ms = unix_ms % 1000;
    let secs = unix_ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{ms:03}",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}
