//! Kura's storage engine: one region's durable, versioned, sorted cell store.
//!
//! Synchronous by design: no actix, no tokio. A [`RegionStore`] is owned by exactly one region
//! actor, which serializes every call; the store itself therefore needs no internal locking on
//! its write path.
//!
//! # Layering rule
//! This crate must not depend on actix, tokio or anything HTTP. Everything above it talks to it
//! only through [`RegionStore`] and the types of [`model`].
//!
//! # Layout
//! - [`model`]: cells, mutations, read and scan specifications (the public vocabulary).
//! - [`region_store`]: log + memtable + segments behind the public operations.
//! - [`fs`]: the file-system layer ([`fs::StdFs`], and [`fs::SimFs`] for crash and fault tests).
//! - [`codec`]: the bincode configuration and the format version.
//! - [`row_filter`]: the segments' row filters (public for the storage benches).
//! - `key`: internal key order; `memtable`; `segment`; `log`; `manifest`; `merge` (k-way merge);
//!   `resolve` (HBase visibility rules, shared by reads and major compaction).
//! - [`error`]: the crate's one error enum.
//!
//! # Guarantees
//! See `storage/FORMAT.md` for the byte-level formats and the recovery steps; the visibility
//! rules (versions, delete markers, TTL) are stated in [`model`] and in `resolve.rs`.
//!
//! # Example
//! ```
//! use kura_storage::*;
//! let dir = tempfile::tempdir()?;
//! let families = vec![FamilyDescriptor::new("cf").with_max_versions(3)];
//! let (mut store, _report) = RegionStore::open(dir.path(), StoreOptions::new(families))?;
//! let put = |ts, v: &str| Mutation::Put {
//!     family: b"cf".to_vec(),
//!     qualifier: b"q".to_vec(),
//!     timestamp: Some(ts),
//!     value: v.as_bytes().to_vec(),
//! };
//! store.mutate_row(RowMutation { row: b"r1".to_vec(), mutations: vec![put(2, "new"), put(1, "old")] })?;
//! let read = ReadSpec { max_versions: 3, ..ReadSpec::default() };
//! let row = store.get(b"r1", &read)?.expect("written");
//! assert_eq!(row.cells.len(), 2);
//! assert_eq!(row.cells[0].value, b"new"); // newest first
//! store.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod codec;
pub mod error;
pub mod fs;
pub mod idempotency;
mod key;
mod log;
mod manifest;
mod memtable;
mod merge;
pub mod model;
pub mod region_store;
mod replayed;
mod resolve;
pub mod row_filter;
mod segment;

pub use error::{Error, Result};
pub use fs::{Fault, FaultOp, FileSystem, SimFs, StdFs};
pub use idempotency::IdempotencyOptions;
pub use kura_backend::RegionStats;
pub use model::*;
pub use region_store::{
    CheckpointReport, CompactionOutput, CompactionTask, Durability, FlushOutput, FlushTask,
    LogSync, RecoveryMode, RecoveryReport, RegionStore, RetiredMemtable, RetiredSegments,
    RowPredicate, StoreOptions, DEFAULT_LOG_PREALLOC,
};

/// The store moves into its region actor's thread and compactions run on another one.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<RegionStore>();
    assert_send::<CompactionTask>();
    assert_send::<CompactionOutput>();
    assert_send::<FlushTask>();
    assert_send::<FlushOutput>();
    assert_send::<RetiredMemtable>();
    assert_send::<RetiredSegments>();
    assert_send::<LogSync>();
};
