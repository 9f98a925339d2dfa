//! The actors crate's error type.

/// Result alias for the actors crate.
pub type Result<T, E = ActorError> = std::result::Result<T, E>;

/// Everything a request through [`crate::Kura`] can fail with. The HTTP edge maps these with an
/// exhaustive match: caller mistakes to 4xx, `Overloaded`/`RegionUnavailable` to 503.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ActorError {
    /// No table of that name.
    #[error("table not found: {0}")]
    TableNotFound(String),
    /// `create_table` on a name that exists.
    #[error("table already exists: {0}")]
    TableExists(String),
    /// A request named a family the table does not have.
    #[error("no such column family: {family} in table {table}")]
    NoSuchFamily { table: String, family: String },
    /// The request can never succeed as written (bad name, bad argument, over a limit).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An increment found a value that is not an 8-byte counter.
    #[error("{0}")]
    NotACounter(String),
    /// An increment would take a counter past the 64-bit signed range; nothing was changed.
    #[error("{0}")]
    CounterOverflow(String),
    /// The region's mailbox is full: retry later.
    #[error("region {region} is overloaded; retry later")]
    Overloaded { region: u64 },
    /// The region's store failed (poisoned by an fsync error, corrupt file) or is closed.
    #[error("region {region} is unavailable: {reason}")]
    RegionUnavailable { region: u64, reason: String },
    /// The server is shutting down.
    #[error("server is shutting down")]
    ShuttingDown,
    /// Another process (or another `Kura` in this one) has the data directory open.
    #[error(
        "data directory {0} is in use by another Kura server (it holds the lock on {0}/LOCK); \
         stop that server or choose another --data-dir"
    )]
    DataDirInUse(String),
    /// A broken invariant (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

impl ActorError {
    /// Map a store error of region `region` of `table`. The boolean is true when the error
    /// means the store can no longer be trusted (poisoned, corrupt, I/O): the region then fails
    /// closed until it is reopened.
    pub(crate) fn from_store(
        e: kura_storage::Error,
        table: &str,
        region: u64,
    ) -> (ActorError, bool) {
        use kura_storage::Error as E;
        match e {
            E::NoSuchFamily { family } => (
                ActorError::NoSuchFamily {
                    table: table.to_string(),
                    family,
                },
                false,
            ),
            E::InvalidArgument(m) => (ActorError::InvalidArgument(m), false),
            e @ E::NotACounter { .. } => (ActorError::NotACounter(e.to_string()), false),
            e @ E::CounterOverflow { .. } => (ActorError::CounterOverflow(e.to_string()), false),
            e @ (E::Poisoned(_) | E::Corruption { .. } | E::Io { .. }) => (
                ActorError::RegionUnavailable {
                    region,
                    reason: e.to_string(),
                },
                true,
            ),
            E::Codec(m) => (
                ActorError::Internal(format!("region {region}: codec: {m}")),
                false,
            ),
            // `kura_storage::Error` is non-exhaustive: an unknown kind is treated as fatal for
            // the region, the safe side.
            e => (
                ActorError::RegionUnavailable {
                    region,
                    reason: e.to_string(),
                },
                true,
            ),
        }
    }
}
