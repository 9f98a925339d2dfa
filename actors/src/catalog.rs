//! The catalog of tables: names, families, salting, region layout. Persisted; restored on restart.

use kura_storage::model::FamilyDescriptor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a table's row keys map to salt buckets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaltConfig {
    /// Number of salt buckets (fixed at creation). Regions own contiguous bucket ranges.
    pub buckets: u32,
    /// Hash only the first `prefix_len` bytes of the row key (rows sharing that prefix live in
    /// one region); `None` hashes the whole key.
    pub prefix_len: Option<u32>,
}

impl Default for SaltConfig {
    fn default() -> Self {
        SaltConfig { buckets: 256, prefix_len: None }
    }
}

/// A table as users declare it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableDescriptor {
    pub name: String,
    pub families: Vec<FamilyDescriptor>,
    pub salt: SaltConfig,
    /// Regions created with the table (buckets split evenly); `None` = the server default.
    pub initial_regions: Option<u32>,
    /// Table attributes the server does not interpret, echoed back in the schema.
    pub attributes: BTreeMap<String, String>,
    /// Per-family attributes the server does not interpret, keyed by family name.
    pub family_attributes: BTreeMap<String, BTreeMap<String, String>>,
}
