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
//! - `key`: internal key order; `memtable`; `segment`; `log`; `manifest`; `merge` (k-way merge);
//!   `resolve` (HBase visibility rules, shared by reads and major compaction).
//! - [`error`]: the crate's one error enum.
//!
//! # Guarantees
//! See `storage/FORMAT.md` for the byte-level formats and the recovery steps.

pub mod codec;
pub mod error;
pub mod fs;
mod key;
mod log;
mod manifest;
mod memtable;
mod merge;
pub mod model;
pub mod region_store;
mod resolve;
mod segment;

pub use error::{Error, Result};
pub use fs::{Fault, FaultOp, FileSystem, SimFs, StdFs};
pub use model::*;
pub use region_store::{
    CompactionOutput, CompactionTask, Durability, RecoveryMode, RecoveryReport, RegionStats,
    RegionStore, RowPredicate, StoreOptions,
};

/// The store moves into its region actor's thread and compactions run on another one.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<RegionStore>();
    assert_send::<CompactionTask>();
    assert_send::<CompactionOutput>();
};
