//! Reopening a store gives back every acknowledged write, from the log, segments or both.
mod common;
use common::*;
use kura_storage::*;

#[test]
fn reopen_after_drop_replays_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = open(dir.path());
        mutate(
            &mut s,
            "a",
            vec![put("cf", "q", Some(1), "v1"), put("cf", "q", Some(2), "v2")],
        );
        mutate(
            &mut s,
            "b",
            vec![Mutation::DeleteColumn {
                family: b"cf".to_vec(),
                qualifier: b"q".to_vec(),
                timestamp: Some(9),
            }],
        );
        // Dropped without close: like a kill -9 after the acknowledgements.
    }
    let (s, report) = RegionStore::open(dir.path(), server_options(families())).unwrap();
    assert_eq!(report.log_records_replayed, 2);
    assert_eq!(report.truncated_at, None);
    assert_eq!(
        cells(&s, "a", &read(3)),
        vec![c("cf:q", 2, "v2"), c("cf:q", 1, "v1")]
    );
}

#[test]
fn reopen_after_flushes_and_compaction_keeps_segments_log_and_markers() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = open(dir.path());
        mutate(&mut s, "a", vec![put("cf", "q", Some(1), "seg")]);
        s.flush().unwrap();
        mutate(
            &mut s,
            "a",
            vec![Mutation::DeleteColumn {
                family: b"cf".to_vec(),
                qualifier: b"q".to_vec(),
                timestamp: Some(5),
            }],
        );
        s.flush().unwrap();
        s.compact(false).unwrap();
        mutate(&mut s, "a", vec![put("cf", "q", Some(3), "masked")]);
        mutate(&mut s, "b", vec![put("one", "x", Some(1), "log")]);
    }
    let (s, report) = RegionStore::open(dir.path(), server_options(families())).unwrap();
    assert_eq!(report.segments, 1);
    assert!(
        s.get(b"a", &read(3)).unwrap().is_none(),
        "marker survives reopen"
    );
    assert_eq!(cells(&s, "b", &read(1)), vec![c("one:x", 1, "log")]);
    s.close().unwrap();
    let (s, report) = RegionStore::open(dir.path(), server_options(families())).unwrap();
    assert_eq!(report.log_records_replayed, 0, "close flushed everything");
    assert_eq!(cells(&s, "b", &read(1)), vec![c("one:x", 1, "log")]);
}

#[test]
fn families_are_persisted_and_adopted_when_options_name_none() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = open(dir.path());
        s.set_families(vec![
            FamilyDescriptor::new("cf"),
            FamilyDescriptor::new("extra"),
        ])
        .unwrap();
    }
    let (s, _) = RegionStore::open(dir.path(), server_options(Vec::new())).unwrap();
    let names: Vec<_> = s.families().iter().map(|f| f.name.clone()).collect();
    assert_eq!(names, vec![b"cf".to_vec(), b"extra".to_vec()]);
}

#[test]
fn linked_rows_open_as_a_store_with_markers_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("child");
    let mut s = open(&dir.path().join("parent"));
    for row in ["a", "m", "z"] {
        mutate(
            &mut s,
            row,
            vec![
                put("cf", "q", Some(1), "old"),
                put("cf", "q", Some(2), "new"),
            ],
        );
    }
    s.flush().unwrap();
    mutate(
        &mut s,
        "m",
        vec![Mutation::DeleteColumn {
            family: b"cf".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: Some(3),
        }],
    );
    s.link_rows(
        &|r: &[u8]| r >= b"m".as_slice(),
        &dest,
        server_options(Vec::new()),
    )
    .unwrap();
    let mut opts = server_options(families());
    opts.owns_row = Some(std::sync::Arc::new(|r: &[u8]| r >= b"m".as_slice()));
    let (child, _) = RegionStore::open(&dest, opts).unwrap();
    assert!(
        child.get(b"a", &read(3)).unwrap().is_none(),
        "not the child's"
    );
    assert!(
        child.get(b"m", &read(3)).unwrap().is_none(),
        "marker linked"
    );
    let mut child = child;
    mutate(&mut child, "m", vec![put("cf", "q", Some(3), "late")]);
    assert!(
        child.get(b"m", &read(3)).unwrap().is_none(),
        "marker still masks later puts"
    );
    assert_eq!(
        cells(&child, "z", &read(3)),
        vec![c("cf:q", 2, "new"), c("cf:q", 1, "old")]
    );
}

#[test]
fn replaying_a_log_larger_than_the_memtable_budget_spills_to_segments() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = open(dir.path());
        for i in 0..500 {
            mutate(
                &mut s,
                &format!("r{i:04}"),
                vec![put("one", "q", Some(1), &"x".repeat(100))],
            );
        }
    }
    let mut opts = server_options(families());
    opts.memtable_budget = 8 << 10;
    let (s, report) = RegionStore::open(dir.path(), opts.clone()).unwrap();
    assert_eq!(report.log_records_replayed, 500);
    assert!(s.stats().segments >= 1, "replay spilled to segments");
    assert!(s.stats().memtable_bytes <= 8 << 10);
    drop(s);
    let (s, _) = RegionStore::open(dir.path(), opts).unwrap();
    let page = s.scan(
        &ScanSpec::all(),
        ScanLimits {
            max_rows: 1000,
            max_bytes: usize::MAX,
        },
    );
    assert_eq!(page.unwrap().rows.len(), 500);
}

/// Writes that go on while background flushes run (each started once the memtable is full,
/// as the region actor starts them): every row reads back at once, from whichever memtable or
/// segment holds it, and again after the store is dropped mid-flush and reopened.
#[test]
fn writes_during_background_flushes_read_back_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = server_options(families());
    opts.memtable_budget = 4 << 10;
    let row = |i: usize| format!("r{i:04}");
    {
        let (mut s, _) = RegionStore::open(dir.path(), opts.clone()).unwrap();
        let mut flusher = Flusher::default();
        for i in 0..400 {
            mutate(
                &mut s,
                &row(i),
                vec![put("one", "q", Some(1), &"x".repeat(64))],
            );
            flusher.after_write(&mut s).unwrap();
            let back = i / 2;
            assert_eq!(
                cells(&s, &row(back), &read(1)).len(),
                1,
                "{} during flushes",
                row(back)
            );
        }
        flusher.wait(&mut s).unwrap();
        assert!(s.stats().flushes > 1, "{:?}", s.stats());
        // A last flush under way when the store goes: its segment is never installed.
        mutate(&mut s, "last", vec![put("one", "q", Some(1), "v")]);
        if let Some(task) = s.flush_task().unwrap() {
            drop(task.run());
        }
    }
    let (s, _) = RegionStore::open(dir.path(), opts).unwrap();
    for i in 0..400 {
        assert_eq!(
            cells(&s, &row(i), &read(1)).len(),
            1,
            "{} after reopen",
            row(i)
        );
    }
    assert_eq!(cells(&s, "last", &read(1)), vec![c("one:q", 1, "v")]);
}
