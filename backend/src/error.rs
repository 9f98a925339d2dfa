//! The one error type every backend answers with.
//!
//! The HTTP edge maps it with an exhaustive match (no wildcard arm, no `#[non_exhaustive]`): a
//! new variant does not compile until every caller has decided its status code.

/// Result alias for backend calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a request through a [`crate::Backend`] can fail with: caller mistakes (4xx at the
/// HTTP edge), `Overloaded`/`RegionUnavailable`/`Unavailable` (503), bugs (`Internal`, 500).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
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
    /// The operation exists in HBase but this backend does not offer it (a region split on
    /// Bigtable, whose tablets are Bigtable's business). The message names the backend.
    #[error("{0}")]
    Unsupported(String),
    /// A region's in-flight gate is full (`--region-in-flight` client requests already waiting
    /// or being served): retry later.
    #[error("region {region} is overloaded; retry later")]
    Overloaded { region: u64 },
    /// A region's store failed (poisoned by an fsync error, corrupt file) or is closed.
    #[error("region {region} is unavailable: {reason}")]
    RegionUnavailable { region: u64, reason: String },
    /// The remote store could not be reached or answered with a transient error (Bigtable
    /// `UNAVAILABLE`, a deadline); retry later.
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    /// The server is shutting down.
    #[error("server is shutting down")]
    ShuttingDown,
    /// Another process (or another handle in this one) has the data directory open.
    #[error(
        "data directory {0} is in use by another Kura server (it holds the lock on {0}/LOCK); \
         stop that server or choose another --data-dir"
    )]
    DataDirInUse(String),
    /// A broken invariant (a bug), or a remote answer that makes no sense.
    #[error("internal error: {0}")]
    Internal(String),
}
