//! Structured hints: an error that tells its caller what to use instead (MULTI refused on the
//! shared connection: "use Client::transaction()") keeps which API it points to, so each binding
//! renders the hint with its own spelling of that API ([`ApiNames`]) instead of rewriting text.

/// An API an error hint points to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Api {
    /// The transaction call (MULTI..EXEC on a connection of its own).
    Transaction,
    /// The transaction call with its WATCH keys.
    Watch,
}

/// How a binding's users spell the APIs that error hints point to.
#[derive(Debug)]
pub struct ApiNames {
    /// The transaction call, e.g. `client.transaction(commands, watch=[...])`.
    pub transaction: &'static str,
    /// The same, with WATCH, e.g. `client.transaction(commands, watch=[keys])`.
    pub watch: &'static str,
}

/// The Rust API's own names: the message of a hinted [`Error`](crate::Error) as the core makes it.
pub static RUST: ApiNames = ApiNames {
    transaction: "Client::transaction()",
    watch: "Client::transaction() and its watch()",
};

impl ApiNames {
    /// How these users spell `api`.
    pub fn spell(&self, api: Api) -> &'static str {
        match api {
            Api::Transaction => self.transaction,
            Api::Watch => self.watch,
        }
    }
}

/// A hint: the text before the API's name, the API, the text after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    before: String,
    api: Api,
    after: &'static str,
}

impl Hint {
    /// `before`, then the API's name, then `after`.
    pub fn new(before: impl Into<String>, api: Api, after: &'static str) -> Hint {
        Hint {
            before: before.into(),
            api,
            after,
        }
    }

    /// The API the hint points to.
    pub fn api(&self) -> Api {
        self.api
    }

    /// The hint in the words of `names`' users.
    pub fn render(&self, names: &ApiNames) -> String {
        format!("{}{}{}", self.before, names.spell(self.api), self.after)
    }

    /// The same hint with `context` put in front (as [`Error::context`](crate::Error::context)
    /// does to the message).
    pub(crate) fn context(&mut self, context: &str) {
        self.before.insert_str(0, context);
    }
}
