//! Shared helpers of this crate's tests, which run against Google's real Bigtable emulator
//! ([`kura_bigtable::emulator`]).

#![allow(dead_code)]

use kura_backend::{FamilyDescriptor, TableDescriptor};
pub use kura_bigtable::emulator::Emulator;

/// A table with the given `(family, versions, ttl)`.
pub fn table(name: &str, families: &[(&str, u32, Option<u64>)]) -> TableDescriptor {
    TableDescriptor::new(
        name,
        families
            .iter()
            .map(|(f, v, t)| {
                FamilyDescriptor::new(f.as_bytes())
                    .with_max_versions(*v)
                    .with_ttl_secs(*t)
            })
            .collect(),
    )
}
