//! What a fence is: a failover in progress (the primary being demoted and the replica promoted)
//! and the primaries failovers replaced, with how long each stays fenced.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Address;

/// How long writes stay fenced while the replica the leader promotes has not answered ROLE
/// `master`; then they resume on the old primary (the failover did not happen).
pub(super) const PROMOTION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a primary replaced by a failover stays fenced: sentinels that have not heard of the
/// switch yet may still name it, and it may still answer ROLE `master` until it is reconfigured.
pub(super) const RETIRED_FOR: Duration = Duration::from_secs(60);

/// A failover the leader has started: the replica it promotes, and the primary it demotes.
pub(super) struct Fence {
    pub(super) old: Address,
    pub(super) promoting: Address,
    pub(super) since: Instant,
    pub(super) cancel: CancellationToken,
}

/// A primary that a failover replaced, with the config epoch it had then.
pub(super) struct Retired {
    pub(super) address: Address,
    pub(super) epoch: u64,
    pub(super) since: Instant,
}
