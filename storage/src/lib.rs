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
//! - [`error`]: the crate's one error enum.
//!
//! # Guarantees
//! See `storage/FORMAT.md` for the byte-level formats and the recovery steps.

pub mod error;
pub mod model;
pub mod region_store;

pub use error::{Error, Result};
pub use model::*;
pub use region_store::{Durability, RecoveryMode, RecoveryReport, RegionStats, RegionStore, StoreOptions};
