//! The findings a diagnosis collects, which every rule adds to, and the hints they carry.

use super::report::{Finding, Mode, Severity};
use crate::types::Address;

/// The findings of one diagnosis, in the order the rules found them.
pub(super) struct Findings(pub(super) Vec<Finding>);

impl Findings {
    /// Adds a finding with its mode's hint.
    pub(super) fn add(
        &mut self,
        severity: Severity,
        mode: Mode,
        code: &str,
        subject: Option<String>,
        message: String,
    ) {
        self.0.push(Finding {
            severity,
            mode,
            code: code.to_string(),
            subject,
            message,
            hint: mode.hint().to_string(),
        });
    }

    /// The last finding added gets this hint instead of its mode's.
    pub(super) fn hint(&mut self, hint: String) {
        if let Some(last) = self.0.last_mut() {
            last.hint = hint;
        }
    }
}

/// An announced address that does not answer from here is what `address_map` is for (NAT,
/// Docker, port forwards); a mapped one that does not answer has a wrong map entry.
/// `announce` names the server setting that chose the announced address.
pub(super) fn unreachable_hint(
    announced: &Address,
    mapped: Option<&Address>,
    announce: &str,
) -> String {
    match mapped {
        Some(to) => format!(
            "address_map sends {announced} to {to}, which does not answer: fix that entry (or \
             the function) so it names an address reachable from here"
        ),
        None => format!(
            "if it is reachable from here under another address (NAT, Docker, port forward), \
             map it: address_map={announced}>HOST:PORT in the URL, or an address_map function; \
             else make it announce a reachable address ({announce})"
        ),
    }
}
