//! Stores written by older formats must keep opening with the same contents. Each fixture
//! (`tests/fixtures/<version>/`: a segment, a manifest and a log tail) was made by
//! `write_fixture` with the last build writing that format:
//! - `v1`: format version 1 (log records without `idem`);
//! - `v2`: log format version 2 (records without `durable`), written by e8aa9c0.
//!
//! Both hold a segment of format version 1 (the legacy row filter, FORMAT.md §5.4).
//!
//! Regenerate one only with such a build:
//! `KURA_WRITE_FIXTURE=v2 cargo test -p kura-storage --test format_fixtures`.
mod common;
use common::*;
use kura_storage::*;
use std::path::{Path, PathBuf};

fn write_fixture(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    let mut s = open(dir);
    mutate(
        &mut s,
        "row1",
        vec![
            put("cf", "a", Some(10), "a10"),
            put("cf", "a", Some(20), "a20"),
        ],
    );
    mutate(&mut s, "row2", vec![put("one", "b", Some(5), "b5")]);
    mutate(&mut s, "row3", vec![put("cf", "c", Some(7), "c7")]);
    mutate(
        &mut s,
        "row3",
        vec![Mutation::DeleteFamily {
            family: b"cf".to_vec(),
            timestamp: Some(8),
        }],
    );
    s.flush().unwrap();
    // The log tail: never flushed.
    mutate(&mut s, "row2", vec![put("one", "b", Some(6), "b6")]);
    mutate(
        &mut s,
        "row1",
        vec![Mutation::DeleteVersion {
            family: b"cf".to_vec(),
            qualifier: b"a".to_vec(),
            timestamp: Some(20),
        }],
    );
}

/// Open a copy of fixture `version` (`tests/fixtures/<version>/`) and check its contents.
fn opens_with_its_contents(version: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(version);
    if std::env::var_os("KURA_WRITE_FIXTURE").is_some_and(|v| v == version) {
        write_fixture(&dir);
    }
    // Work on a copy: opening may rewrite the manifest or create a log.
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&dir).expect("fixture present") {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    let mut opts = server_options(Vec::new());
    opts.recovery = RecoveryMode::Strict;
    let (s, report) = RegionStore::open(tmp.path(), opts).unwrap();
    assert_eq!(report.segments, 1);
    assert_eq!(report.log_records_replayed, 2);
    assert_eq!(s.families(), families().as_slice());
    assert_eq!(cells(&s, "row1", &read(3)), vec![c("cf:a", 10, "a10")]);
    assert_eq!(cells(&s, "row2", &read(3)), vec![c("one:b", 6, "b6")]);
    assert!(s.get(b"row3", &read(3)).unwrap().is_none());
    // New writes go to a log of the current format: an old log is never appended to.
    let mut s = s;
    mutate(&mut s, "row4", vec![put("one", "d", Some(1), "d1")]);
    let newest = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .expect("a log");
    let header = std::fs::read(&newest).unwrap();
    assert_eq!(header[7], codec::LOG_FORMAT_VERSION, "{}", newest.display());
    // The fixture's segment is of segment format 1 (the legacy row filter); a flush writes
    // the current format beside it, and point reads answer from both.
    assert_eq!(segment_versions(tmp.path()), vec![1]);
    s.flush().unwrap();
    assert_eq!(segment_versions(tmp.path()), vec![1, codec::FORMAT_VERSION]);
    assert_eq!(cells(&s, "row1", &read(3)), vec![c("cf:a", 10, "a10")]);
    assert_eq!(cells(&s, "row4", &read(3)), vec![c("one:d", 1, "d1")]);
    assert!(s.get(b"row5", &read(3)).unwrap().is_none());
}

/// The format version of each segment in `dir`, by file name.
fn segment_versions(dir: &Path) -> Vec<u8> {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    segs.iter().map(|p| std::fs::read(p).unwrap()[7]).collect()
}

#[test]
fn version_1_fixture_opens_with_its_contents() {
    opens_with_its_contents("v1");
}

#[test]
fn version_2_fixture_opens_with_its_contents() {
    opens_with_its_contents("v2");
}
