//! The transaction handle (`sr_transaction_t`), which a completion hands to the host through a
//! callback or a mailbox delivery; below both `mailbox` and `transaction`, which take it.

use sr::host::HostTransaction;

use crate::ffi::{Castable, OwnedBox};

/// A transaction on a dedicated connection to the primary it began on.
///
/// Opaque, owned by the caller from the sr_transaction_cb or the mailbox delivery that handed it
/// over (or from sr_client_transaction_begin_blocking()): free it with
/// sr_transaction_free() (which discards it if EXEC has not run). Use it from one thread at a
/// time or from callbacks; steps run in the order they were started. After
/// sr_transaction_exec(), further steps fail with SR_ERR_CONFIG ("the transaction has ended").
pub struct sr_transaction_t {
    _private: [u8; 0],
}

impl Castable for sr_transaction_t {
    type Ownership = OwnedBox;
    type RustType = HostTransaction;
}
