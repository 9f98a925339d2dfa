//! Kura's actor topology: the router, the region actors, salting, merged scans, region splits.
//!
//! (API contract; the implementation fills it in. HTTP handlers and applications use only
//! [`Kura`], the cloneable client handle, and the types re-exported here.)
//!
//! # Layering rule
//! This crate knows nothing of HTTP. It depends on `kura-storage` and actix only.

pub mod catalog;
pub mod client;
pub mod error;

pub use catalog::{SaltConfig, TableDescriptor};
pub use client::{AlterMode, Kura, KuraConfig, RegionInfo, ScanRequest};
pub use error::{ActorError, Result};
pub use kura_storage as storage;
pub use kura_storage::model::*;
