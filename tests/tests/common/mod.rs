//! Helpers shared by the end-to-end tests of the core against real topologies.
#![allow(dead_code)]

pub mod history;

use std::time::{Duration, Instant};

use sentinel_recovery::{Address, Client, Event, EventKind, EventStream, Topology};
use sentinel_recovery_testkit::Node;

/// A runtime for the test's own async code (the core runs on its own runtime).
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The loopback address of a testkit node, as the core reports it.
pub fn addr(node: &Node) -> Address {
    Address::new("127.0.0.1", node.port())
}

/// URL with extra query keys.
pub fn url_with(url: &str, query: &str) -> String {
    if query.is_empty() {
        url.to_string()
    } else {
        format!("{url}?{query}")
    }
}

/// Waits for the first event matching `pred`; panics with the events seen if none comes in time.
pub async fn wait_event(
    events: &mut EventStream,
    timeout: Duration,
    pred: impl Fn(&Event) -> bool,
) -> Event {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.next()).await {
            Ok(Some(e)) if pred(&e) => return e,
            Ok(Some(e)) => seen.push(format!("{} {:?}", e.kind.name(), e.kind)),
            Ok(None) => panic!("event stream ended; seen: {seen:#?}"),
            Err(_) => panic!("no matching event within {timeout:?}; seen: {seen:#?}"),
        }
    }
}

/// Polls the client's topology until `pred` holds.
pub async fn wait_topology(
    client: &Client,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&Topology) -> bool,
) -> Topology {
    let deadline = Instant::now() + timeout;
    loop {
        let t = client.topology().unwrap();
        if pred(&t) {
            return t;
        }
        if Instant::now() > deadline {
            panic!("{what}: not reached within {timeout:?}; topology now: {t:#?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The new primary of a `primary_changed` event.
pub fn new_primary(e: &Event) -> Option<&Address> {
    match &e.kind {
        EventKind::PrimaryChanged { new, .. } => Some(new),
        _ => None,
    }
}

/// The rows of a shared cases file (`tests/cases/NAME`, which every binding's suite reads): its
/// lines that are neither blank nor comments, split at tabs, each checked to have `fields`
/// fields, and at least `at_least` of them.
pub fn case_rows(name: &str, fields: usize, at_least: usize) -> Vec<Vec<String>> {
    let path = format!("{}/cases/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|line| {
            let row: Vec<String> = line.split('\t').map(str::to_string).collect();
            assert_eq!(
                row.len(),
                fields,
                "{path}: {fields} tab-separated fields in {line:?}"
            );
            row
        })
        .collect();
    assert!(rows.len() >= at_least, "{path}: {} cases", rows.len());
    rows
}
