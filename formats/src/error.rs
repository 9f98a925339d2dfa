//! The crate's one error enum: every variant names the file (or stream) it is about, and the
//! integrity errors the byte offset where reading stopped.

use std::io;

/// What went wrong reading or writing a file of these formats.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused a read or write.
    #[error("{file}: {source}")]
    Io {
        /// The file (or stream name) concerned.
        file: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The file ends in the middle of something.
    #[error("{file}: truncated at byte {offset}: {what}")]
    Truncated {
        /// The file concerned.
        file: String,
        /// Where the incomplete item starts or where the data ran out.
        offset: u64,
        /// What was being read.
        what: String,
    },
    /// The bytes do not follow the format.
    #[error("{file}: corrupt at byte {offset}: {what}")]
    Corrupt {
        /// The file concerned.
        file: String,
        /// Where the bad item starts.
        offset: u64,
        /// What is wrong with it.
        what: String,
    },
    /// The file does not start with `SEQ`.
    #[error("{file}: not a Hadoop SequenceFile (it does not start with \"SEQ\")")]
    NotSequenceFile {
        /// The file concerned.
        file: String,
    },
    /// A SequenceFile version other than 6.
    #[error("{file}: SequenceFile version {version} is not supported (Kura reads version 6, which Hadoop has written since 0.20)")]
    UnsupportedVersion {
        /// The file concerned.
        file: String,
        /// The version byte found.
        version: u8,
    },
    /// A compression codec other than zlib (`DefaultCodec`).
    #[error("{file}: unsupported codec {codec}: Kura reads only org.apache.hadoop.io.compress.DefaultCodec (zlib); write the files uncompressed or with DefaultCodec")]
    UnsupportedCodec {
        /// The file concerned.
        file: String,
        /// The codec class named in the header.
        codec: String,
    },
    /// The file holds other key/value classes than the caller expects.
    #[error(
        "{file}: holds {found_key}/{found_value} records, expected {expected_key}/{expected_value}"
    )]
    WrongClasses {
        /// The file concerned.
        file: String,
        /// Key class in the header.
        found_key: String,
        /// Value class in the header.
        found_value: String,
        /// Key class expected.
        expected_key: String,
        /// Value class expected.
        expected_value: String,
    },
    /// A value that cannot be written in the format (too long, a bad class name, …).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// An I/O error on `file`.
    pub fn io(file: &str, source: io::Error) -> Error {
        Error::Io {
            file: file.to_string(),
            source,
        }
    }
}
