//! What the handles ask of the monitor task, over its one queue.

/// Requests from clients to the monitor task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Run a discovery round as soon as the current one (if any) is over.
    Refresh(&'static str),
    /// The data path found the node of round `.1` unusable: run a round unless one has started
    /// since that round finished, or the monitor is already retrying on its backoff schedule.
    Report(&'static str, u64),
}
