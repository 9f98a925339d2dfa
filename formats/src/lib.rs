//! Hadoop and HBase file formats that Kura reads and writes, byte for byte as
//! `shared/HBASE_FORMATS.md` specifies them: the files of HBase's `Export`/`Import`, Google's
//! Bigtable import and HBase's `HashTable`.
//!
//! Synchronous and free of actix/tokio: it only turns bytes into records and back. The HTTP side
//! (`kura export`, `kura import`, `kura verify`) lives in the `kura` crate.
//!
//! # Layout
//! - [`vint`]: Hadoop's VLong/VInt variable-length integers (§1).
//! - [`writable`]: the Hadoop `Writable`s used in these files (`ImmutableBytesWritable`,
//!   `NullWritable`, `LongWritable`) and the class-name constants.
//! - [`seqfile`]: SequenceFile version 6: a [`seqfile::Writer`] (NONE, RECORD, BLOCK) and a
//!   streaming [`seqfile::Reader`] (§2).
//! - [`mapfile`]: Hadoop MapFiles keyed by `ImmutableBytesWritable` (§5).
//! - [`hashtable`]: HBase `HashTable`'s output directory: manifest, partitions, hash MapFiles
//!   (§6.1).
//! - [`hfile`]: the cells of an HBase HFile v2/v3 (§8; read only, for tests against HBase's
//!   own files).
//! - [`error`]: the crate's one error enum.
//!
//! # Invariants
//! 1. No input can make this crate panic: a truncated or corrupt file is an [`Error`] naming the
//!    file and the byte offset.
//! 2. Memory is bounded by the largest record (NONE/RECORD) or block (BLOCK), never by the file.

pub mod error;
pub mod hashtable;
pub mod hfile;
pub mod mapfile;
pub mod seqfile;
pub mod vint;
pub mod writable;

pub use error::Error;

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
