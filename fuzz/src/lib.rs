//! Shared set-up of the storage fuzz targets: a small valid region store in a simulated file
//! system (one flushed segment, a manifest, and a log holding writes made after the flush), so
//! a target can replace exactly one file with the fuzzer's bytes and reopen the store.
//!
//! # Invariant checked by every storage target
//! Opening a store over damaged files, then reading all of it, returns values or an error; it
//! never panics, never allocates without bound, and never returns a value that was not written.

use kura_storage::model::*;
use kura_storage::{FileSystem, RegionStore, SimFs, StoreOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The region directory inside the simulated file system.
pub const DIR: &str = "/region";

/// Options of the fuzzed store: one family keeping 3 versions.
pub fn options() -> StoreOptions {
    StoreOptions::new(vec![FamilyDescriptor::new("f").with_max_versions(3)])
}

/// Every value the set-up writes; a read may return only these.
pub fn written_values() -> Vec<Vec<u8>> {
    (0..40u32).map(|i| format!("value-{i}").into_bytes()).collect()
}

/// Builds the valid store and returns its file system and the paths of its files.
pub fn valid_store() -> (SimFs, Vec<PathBuf>) {
    let fs = SimFs::new();
    let dir = Path::new(DIR);
    let arc: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let (mut store, _) = RegionStore::open_with_fs(arc, dir, options()).expect("open a new store");
    let values = written_values();
    for (i, v) in values.iter().enumerate() {
        if i == 20 {
            store.flush().expect("flush");
        }
        let m = RowMutation {
            row: format!("row{:02}", i % 12).into_bytes(),
            mutations: vec![Mutation::Put {
                family: b"f".to_vec(),
                qualifier: format!("q{}", i % 3).into_bytes(),
                timestamp: Some(1000 + i as i64),
                value: v.clone(),
            }],
        };
        store.mutate_row(m).expect("put");
    }
    store
        .mutate_row(RowMutation {
            row: b"row03".to_vec(),
            mutations: vec![Mutation::DeleteColumn {
                family: b"f".to_vec(),
                qualifier: b"q0".to_vec(),
                timestamp: Some(1010),
            }],
        })
        .expect("delete");
    // Dropped without close: the log keeps the writes made after the flush.
    drop(store);
    let files = fs
        .list(dir)
        .expect("list the region dir")
        .into_iter()
        .map(|n| dir.join(n))
        .collect();
    (fs, files)
}

/// Replaces the first file whose name ends with `suffix` by `bytes`, reopens the store in both
/// recovery modes and reads everything, checking that only written values come back.
pub fn reopen_with(suffix: &str, bytes: &[u8]) {
    let (fs, files) = valid_store();
    let Some(target) = files.iter().find(|p| p.to_string_lossy().ends_with(suffix)) else {
        return;
    };
    fs.write_file(target, bytes).expect("replace the file");
    for strict in [false, true] {
        let mut opts = options();
        if strict {
            opts.recovery = kura_storage::RecoveryMode::Strict;
        }
        let arc: Arc<dyn FileSystem> = Arc::new(fs.clone());
        let Ok((store, _)) = RegionStore::open_with_fs(arc, Path::new(DIR), opts) else {
            continue;
        };
        let written = written_values();
        let mut spec = ScanSpec::all();
        spec.read.max_versions = 3;
        if let Ok(page) = store.scan(&spec, ScanLimits { max_rows: 100, max_bytes: 1 << 20 }) {
            for row in &page.rows {
                for cell in &row.cells {
                    assert!(written.contains(&cell.value), "a value that was never written");
                }
                let _ = store.get(&row.key, &ReadSpec::default());
            }
        }
        let mut rev = ScanSpec::all();
        rev.reversed = true;
        let _ = store.scan(&rev, ScanLimits::default());
    }
}
