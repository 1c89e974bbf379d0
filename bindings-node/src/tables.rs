//! The core's error-code and event-kind tables, for the suite's check of `tables.js`.

use napi_derive::napi;
use sentinel_recovery::{ErrorCode, EventKind};

/// One entry of the core's error-code or event-kind table.
#[napi(object)]
pub struct TableEntry {
    /// The snake_case name shared by every language.
    pub name: String,
    /// Its integer (1-based, as the C ABI uses it).
    pub value: u32,
    /// What it means.
    pub description: String,
}

/// The core's error codes, in the order of their integers (for the suite's check of `tables.js`).
#[napi]
pub fn error_codes() -> Vec<TableEntry> {
    ErrorCode::ALL
        .iter()
        .map(|c| TableEntry {
            name: c.as_str().to_string(),
            value: c.as_i32() as u32,
            description: c.description().to_string(),
        })
        .collect()
}

/// The core's event kinds, in the order of their integers (for the suite's check of `tables.js`).
#[napi]
pub fn event_kinds() -> Vec<TableEntry> {
    EventKind::TABLE
        .iter()
        .zip(1..)
        .map(|((name, description), value)| TableEntry {
            name: name.to_string(),
            value,
            description: description.to_string(),
        })
        .collect()
}
