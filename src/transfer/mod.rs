//! `kura export` and `kura import`: a table to and from the files of HBase's `Export`/`Import`
//! (`shared/HBASE_FORMATS.md` §3): SequenceFiles `part-m-NNNNN` of (`ImmutableBytesWritable`
//! row key, `Result`) records, `_SUCCESS`, and Kura's own `kura-export.json` beside them.
//! Both speak the HBase REST API (through [`crate::copy::http`]), so either end may be Kura or a
//! real HBase REST gateway. The files are what HBase's `Import` and Google's Bigtable import
//! (bigtable-beam-import, the Dataflow "SequenceFile to Bigtable" template) read.
//!
//! # Layout
//! - [`export`]: `kura export`: scans, writes parts, checkpoints completed parts.
//! - [`import`]: `kura import`: reads parts (Kura's or HBase's), writes batches, checkpoints.
//! - [`manifest`]: `kura-export.json` (schema, counts, per-part SHA-256, create commands).
//! - [`files`]: atomic file replacement, directory fsync, a SHA-256-computing sink.
//!
//! # Invariants
//! 1. Memory is bounded by one scan page (export) or one write batch (import) plus one record,
//!    whatever the table's size.
//! 2. A file another program may read is only ever complete: parts are written under a
//!    `.`-prefixed temporary name and renamed when whole and fsynced; `_SUCCESS` comes last.
//! 3. Resume files are replaced atomically (temp file, fsync, rename) after the work they
//!    record is durable (export) or acknowledged by the server (import).

pub mod export;
pub mod files;
pub mod import;
pub mod manifest;

pub(crate) use crate::copy::{parse_table, progress};

/// Exit code for bad arguments (as clap and `kura copy` use).
pub const EXIT_USAGE: u8 = 2;

/// Lower-case hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
