//! What stays mapped after a recovery (RELIABILITY.md: never truncate or rewrite a memory-mapped
//! file). The memtable reads replayed entries in place from the log's map; that map must cover
//! only the log's valid frames, never the damaged tail recovery truncates nor the preallocated
//! zeros new frames are written over.
mod common;

use common::*;
use kura_storage::*;
use std::path::{Path, PathBuf};

fn options() -> StoreOptions {
    StoreOptions {
        log_prealloc: DEFAULT_LOG_PREALLOC,
        ..server_options(families())
    }
}

fn the_log(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .expect("a log")
}

/// Sizes of this process's mappings of `path`, from `/proc/self/maps`.
fn mapped_sizes(path: &Path) -> Vec<u64> {
    let path = path.canonicalize().expect("canonical path");
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines()
        .filter(|l| l.ends_with(path.to_str().expect("utf-8 path")))
        .map(|l| {
            let range = l.split_whitespace().next().expect("range");
            let (a, b) = range.split_once('-').expect("a-b");
            u64::from_str_radix(b, 16).expect("hex") - u64::from_str_radix(a, 16).expect("hex")
        })
        .collect()
}

#[test]
fn a_recovered_log_stays_mapped_only_over_its_valid_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let value = "v".repeat(100);
    {
        let (mut s, _) = RegionStore::open(dir.path(), options()).expect("open");
        for i in 0..200 {
            mutate(
                &mut s,
                &format!("row{i:03}"),
                vec![put("cf", "a", None, &value)],
            );
        }
    } // dropped without close: the log is all there is
    let log = the_log(dir.path());
    let file_len = std::fs::metadata(&log).expect("stat").len();
    assert!(file_len >= DEFAULT_LOG_PREALLOC, "zeros preallocated");
    // Damage the last frame: find where the frames end (the zeros start) and flip a byte of
    // the last value, so recovery truncates the log at that frame.
    let mut bytes = std::fs::read(&log).expect("read");
    let end = bytes.len() - bytes.iter().rev().take_while(|b| **b == 0).count();
    bytes[end - 10] ^= 0xff;
    std::fs::write(&log, &bytes).expect("write");

    let (mut s, report) = RegionStore::open(dir.path(), options()).expect("recover");
    let cut = report.truncated_at.expect("the damaged frame was cut");
    assert_eq!(report.log_records_replayed, 199);
    let page = 4096;
    let sizes = mapped_sizes(&log);
    assert!(
        !sizes.is_empty(),
        "the replayed entries are read from the log's map"
    );
    for size in sizes {
        assert!(
            size <= cut.div_ceil(page) * page,
            "a map of {size} bytes reaches past the valid frames (cut at {cut} of {file_len})"
        );
    }
    // Writes land after the valid frames; the replayed entries read the same.
    for i in 0..200 {
        mutate(
            &mut s,
            &format!("new{i:03}"),
            vec![put("cf", "a", None, &value)],
        );
    }
    for i in 0..199 {
        let got = cells(&s, &format!("row{i:03}"), &read(1));
        assert_eq!(got.len(), 1, "row{i:03}");
        assert_eq!(got[0].2, value);
    }
    assert!(
        cells(&s, "row199", &read(1)).is_empty(),
        "the cut write is gone"
    );
    drop(s);
    let (s, report) = RegionStore::open(dir.path(), options()).expect("reopen");
    assert_eq!(report.truncated_at, None);
    assert_eq!(cells(&s, "new199", &read(1)).len(), 1);
    assert_eq!(cells(&s, "row000", &read(1)).len(), 1);
}
