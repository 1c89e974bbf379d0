//! The plain types at the bottom of the crate: addresses, credentials, protocol, roles, the
//! topology snapshot and its events. They depend on nothing else in the crate but the error type
//! (an event can carry one), so every other module may use them without import cycles.

mod address;
mod credentials;
mod message;
mod protocol;
mod role;
mod side;
mod topology;

pub use address::Address;
pub use credentials::{Credentials, Secret};
pub use message::Message;
pub use protocol::Protocol;
pub use role::Role;
pub use side::Side;
pub use topology::{unix_ms, Event, EventKind, SentinelInfo, Topology};
