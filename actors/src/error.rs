//! The actors crate's error type.

/// Result alias for the actors crate.
pub type Result<T, E = ActorError> = std::result::Result<T, E>;

/// The actors crate answers with the backend interface's error type, so that the embedded
/// backend needs no conversion on its hot path.
pub use kura_backend::Error as ActorError;

/// Map a store error of region `region` of `table`. The boolean is true when the error
/// means the store can no longer be trusted (poisoned, corrupt, I/O): the region then fails
/// closed until it is reopened.
pub(crate) fn from_store(
    e: kura_storage::Error,
    table: &str,
    region: crate::RegionId,
) -> (ActorError, bool) {
    use kura_storage::Error as E;
    // The backend's error type names regions by number.
    let region = region.get();
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
    }
}
