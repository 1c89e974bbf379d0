//! The argument text policy the core keeps once, for languages whose numbers the generated
//! bindings cannot carry as bytes themselves (Ruby's `Float`).

use crate::codes::SentinelError;

/// The text every binding sends for a floating-point argument at `index` (0 is the command's
/// name): the shortest text that reads back as the same double, laid out as JavaScript writes
/// numbers (`2`, `0.1`, `1e+21`), infinities as `inf` / `-inf`; NaN is refused with `config`
/// naming the argument.
#[uniffi::export]
pub fn float_argument_text(value: f64, index: u32) -> Result<String, SentinelError> {
    sentinel_recovery::arguments::float_text(value, index as usize)
        .map_err(|e| SentinelError::from(&e))
}
