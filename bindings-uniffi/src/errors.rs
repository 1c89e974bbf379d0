//! Conversions into [`SentinelError`] (the enum itself is generated from the core's table, in
//! `codes.rs`).

use std::fmt;

use sentinel_recovery::Error;

use crate::codes::SentinelError;

impl From<&Error> for SentinelError {
    fn from(e: &Error) -> SentinelError {
        SentinelError::of(
            e.code(),
            e.message().to_string(),
            e.server_code().map(str::to_string),
        )
    }
}

impl fmt::Display for SentinelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (code, detail) = self.parts();
        write!(f, "{code}: {detail}")
    }
}

impl std::error::Error for SentinelError {}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_recovery::ErrorCode;

    #[test]
    fn every_code_of_the_core_has_its_own_variant_carrying_its_name() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let e = SentinelError::from(&Error::new(code, "why"));
            assert_eq!(e.parts(), (code.as_str(), "why"));
            assert!(
                seen.insert(std::mem::discriminant(&e)),
                "{code} shares a variant"
            );
        }
    }
}
