//! A store whose log is log format version 2 (`tests/fixtures/v2/`: a segment, a manifest and a
//! log tail, written by e8aa9c0, the last build writing version 2; records without `durable`)
//! must keep opening with the same contents. `write_fixture` is how it was made (run it only
//! with that build: `KURA_WRITE_FIXTURE=1 cargo test -p kura-storage --test format_fixture_v2`).
mod common;
use common::*;
use kura_storage::*;
use std::path::PathBuf;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2")
}

fn write_fixture() {
    let dir = fixture_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let mut s = open(&dir);
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

#[test]
fn version_2_fixture_opens_with_its_contents() {
    if std::env::var_os("KURA_WRITE_FIXTURE").is_some() {
        write_fixture();
    }
    // Work on a copy: opening may rewrite the manifest or create a log.
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture_dir()).expect("fixture present") {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    let mut opts = StoreOptions::new(Vec::new());
    opts.recovery = RecoveryMode::Strict;
    let (s, report) = RegionStore::open(tmp.path(), opts).unwrap();
    assert_eq!(report.segments, 1);
    assert_eq!(report.log_records_replayed, 2);
    assert_eq!(s.families(), families().as_slice());
    assert_eq!(cells(&s, "row1", &read(3)), vec![c("cf:a", 10, "a10")]);
    assert_eq!(cells(&s, "row2", &read(3)), vec![c("one:b", 6, "b6")]);
    assert!(s.get(b"row3", &read(3)).unwrap().is_none());
}
