//! The storage crate's error type.

use std::path::PathBuf;

/// Result alias for the storage crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the store. Caller mistakes (`NoSuchFamily`,
/// `InvalidArgument`, `NotACounter`) are distinguished from integrity and I/O failures so the
/// layers above can map them to 4xx and 5xx answers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A mutation or read named a family the region does not have.
    #[error("no such column family: {family}")]
    NoSuchFamily { family: String },
    /// A request that can never succeed as written (empty row key, over a size limit, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An increment hit a value that is not an 8-byte big-endian integer.
    #[error("column {column} holds a {len}-byte value, not an 8-byte counter")]
    NotACounter { column: String, len: usize },
    /// An increment would overflow a signed 64-bit integer.
    #[error("increment of {column} overflows a 64-bit signed integer")]
    CounterOverflow { column: String },
    /// A file is damaged: the file, the byte offset and what was wrong.
    #[error("corruption in {file} at offset {offset}: {reason}")]
    Corruption {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    /// An fsync (or another write whose failure leaves the log in doubt) failed earlier; the
    /// store refuses every operation until it is reopened and recovered from disk.
    #[error("region store is poisoned after a failed write or fsync: {0}")]
    Poisoned(String),
    /// An operating-system I/O error, with the file it concerned.
    #[error("I/O error on {file}: {source}")]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A record could not be encoded or decoded (a bug or a version mismatch).
    #[error("codec error: {0}")]
    Codec(String),
}

impl Error {
    /// An I/O error on `file`.
    pub(crate) fn io(file: &std::path::Path, source: std::io::Error) -> Error {
        Error::Io {
            file: file.to_path_buf(),
            source,
        }
    }
}
