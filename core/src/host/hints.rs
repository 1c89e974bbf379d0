//! Error hints in the words of each binding: the core's refusals of MULTI, WATCH and the like
//! name the Rust API (`Client::transaction()`); a binding says once how its users spell it.

use crate::error::{Error, ErrorCode};

/// How a binding's users spell the APIs that error hints point to.
#[derive(Debug)]
pub struct ApiNames {
    /// The transaction call, e.g. `client.transaction(commands, watch=[...])`.
    pub transaction: &'static str,
    /// The same, with WATCH, e.g. `client.transaction(commands, watch=[keys])`.
    pub watch: &'static str,
}

/// The Rust API's own names: hints stay as the core wrote them.
pub static RUST: ApiNames = ApiNames {
    transaction: "Client::transaction()",
    watch: "Client::transaction() and its watch()",
};

impl ApiNames {
    /// `error` with the Rust names in its hint replaced by these (only `config` errors carry
    /// such hints).
    pub fn localize(&self, error: Error) -> Error {
        if std::ptr::eq(self, &RUST) || error.code() != ErrorCode::Config {
            return error;
        }
        let message = error.message();
        if !message.contains(RUST.transaction) {
            return error;
        }
        let message = message
            .replace(RUST.watch, self.watch)
            .replace(RUST.transaction, self.transaction);
        Error::new(ErrorCode::Config, message)
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
        let local = PY.localize(multi);
        assert!(
            local
                .message()
                .contains("await client.transaction(commands)")
                && !local.message().contains("Client::"),
            "{local}"
        );
        let watch = PY.localize(crate::client::classify_for_tests(&["WATCH", "k"]).unwrap_err());
        assert!(watch.message().contains("watch=[...]"), "{watch}");
        let other = Error::server("ERR Client::transaction()");
        assert_eq!(PY.localize(other.clone()), other);
    }
}
