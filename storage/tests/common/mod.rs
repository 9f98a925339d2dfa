//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

use kura_storage::*;
use std::path::Path;
use std::sync::Arc;

pub fn families() -> Vec<FamilyDescriptor> {
    vec![
        FamilyDescriptor::new("cf").with_max_versions(3),
        FamilyDescriptor::new("one"),
    ]
}

pub fn open(dir: &Path) -> RegionStore {
    RegionStore::open(dir, StoreOptions::new(families()))
        .expect("open")
        .0
}

pub fn open_sim(fs: &SimFs, options: StoreOptions) -> Result<(RegionStore, RecoveryReport)> {
    RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new("/region"), options)
}

pub fn put(fam: &str, q: &str, ts: Option<i64>, v: &str) -> Mutation {
    Mutation::Put {
        family: fam.into(),
        qualifier: q.into(),
        timestamp: ts,
        value: v.into(),
    }
}

pub fn mutate(store: &mut RegionStore, row: &str, ms: Vec<Mutation>) {
    store
        .mutate_row(RowMutation {
            row: row.into(),
            mutations: ms,
        })
        .expect("mutate");
}

pub fn read(versions: u32) -> ReadSpec {
    ReadSpec {
        max_versions: versions,
        ..ReadSpec::default()
    }
}

/// `(family:qualifier, ts, value)` of the visible cells of a row.
pub fn cells(store: &RegionStore, row: &str, spec: &ReadSpec) -> Vec<(String, i64, String)> {
    store
        .get(row.as_bytes(), spec)
        .expect("get")
        .map(|r| {
            r.cells
                .into_iter()
                .map(|c| {
                    (
                        format!(
                            "{}:{}",
                            String::from_utf8_lossy(&c.family),
                            String::from_utf8_lossy(&c.qualifier)
                        ),
                        c.timestamp,
                        String::from_utf8_lossy(&c.value).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn c(col: &str, ts: i64, v: &str) -> (String, i64, String) {
    (col.to_string(), ts, v.to_string())
}
