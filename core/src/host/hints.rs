//! Error hints in the words of each binding: the core's refusals of MULTI, WATCH and the like
//! point to an API (`Client::transaction()`) as a structured [`Hint`](crate::error::hint::Hint);
//! a binding says once how its users spell it ([`ApiNames`]) and the hint is rendered with those
//! names.

use crate::error::Error;

pub use crate::error::hint::{ApiNames, RUST};

impl ApiNames {
    /// `error` with its hint, if it has one, in these names.
    pub fn localize(&self, error: Error) -> Error {
        error.with_api_names(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static PY: ApiNames = ApiNames {
        transaction: "await client.transaction(commands)",
        watch: "await client.transaction(commands, watch=[...])",
    };

    #[test]
    fn hints_name_the_bindings_api() {
        let multi = crate::client::classify_for_tests(&["MULTI"]).unwrap_err();
        assert!(multi.message().contains("Client::transaction()"), "{multi}");
        assert_eq!(
            multi.message(),
            "MULTI can't run on the shared connection: use Client::transaction(), which runs \
             MULTI..EXEC on one connection"
        );
        let local = PY.localize(multi.context("command 2"));
        assert_eq!(
            local.message(),
            "command 2: MULTI can't run on the shared connection: use await \
             client.transaction(commands), which runs MULTI..EXEC on one connection"
        );
        let watch = PY.localize(crate::client::classify_for_tests(&["WATCH", "k"]).unwrap_err());
        assert!(watch.message().contains("watch=[...]"), "{watch}");
        assert!(!watch.message().contains("Client::"), "{watch}");
        let other = Error::server("ERR Client::transaction()");
        assert_eq!(PY.localize(other.clone()), other);
    }
}
