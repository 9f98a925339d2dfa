//! Compactions prepared on the store, run on another thread and installed later.
mod common;
use common::*;
use kura_storage::*;
use std::sync::Arc;

fn setup(segments: usize) -> (tempfile::TempDir, RegionStore) {
    setup_with(segments, server_options(families()))
}

/// A store of `segments` flushes, one row each.
fn setup_with(segments: usize, options: StoreOptions) -> (tempfile::TempDir, RegionStore) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RegionStore::open(dir.path(), options).unwrap().0;
    for i in 0..segments {
        mutate(
            &mut s,
            &format!("r{i}"),
            vec![
                put("cf", "q", Some(1), "old"),
                put("cf", "q", Some(2), "new"),
            ],
        );
        s.flush().unwrap();
    }
    (dir, s)
}

#[test]
fn task_runs_on_another_thread_while_writes_continue() {
    let (_dir, mut s) = setup(3);
    let task = s.compaction_task(false).expect("three segments to merge");
    let worker = std::thread::spawn(move || task.run());
    mutate(&mut s, "during", vec![put("one", "q", Some(1), "x")]);
    s.flush().unwrap();
    let out = worker.join().unwrap().unwrap();
    assert_eq!(out.entries_in, 6);
    drop(s.install_compaction(out).unwrap());
    assert_eq!(
        s.stats().segments,
        2,
        "the merged segment and the one flushed meanwhile"
    );
    assert_eq!(
        cells(&s, "r1", &read(3)),
        vec![c("cf:q", 2, "new"), c("cf:q", 1, "old")]
    );
    assert_eq!(cells(&s, "during", &read(1)), vec![c("one:q", 1, "x")]);
}

#[test]
fn an_outstanding_task_holds_its_inputs_until_installed_or_dropped() {
    let (_dir, mut s) = setup(2);
    let held = s.compaction_task(false).unwrap().run().unwrap();
    assert!(s.compaction_task(false).is_none(), "its inputs are held");
    assert!(s.stats().compacting, "a compaction waits to be installed");
    s.compact(false).unwrap(); // nothing to do, must not disturb the held inputs
    drop(s.install_compaction(held).unwrap());
    assert!(!s.stats().compacting);
    assert_eq!(s.stats().segments, 1);
    assert_eq!(cells(&s, "r0", &read(3)).len(), 2);
    mutate(&mut s, "x", vec![put("one", "q", Some(1), "v")]);
    s.flush().unwrap();
    let abandoned = s.compaction_task(false).unwrap();
    drop(abandoned);
    assert!(
        s.compaction_task(false).is_some(),
        "a dropped task releases its inputs"
    );
}

#[test]
fn rows_the_store_no_longer_owns_are_invisible_and_dropped_by_compaction() {
    let (dir, mut s) = setup(3);
    s.set_owns_row(Some(Arc::new(|r: &[u8]| r < b"r1".as_slice())));
    assert!(s.get(b"r2", &read(1)).unwrap().is_none());
    let page = s.scan(&ScanSpec::all(), ScanLimits::default()).unwrap();
    assert_eq!(page.rows.len(), 1);
    s.compact(true).unwrap();
    s.set_owns_row(None);
    assert!(
        s.get(b"r2", &read(1)).unwrap().is_none(),
        "dropped for good"
    );
    assert_eq!(cells(&s, "r0", &read(1)), vec![c("cf:q", 2, "new")]);
    drop(s);
    let s = open(dir.path());
    assert!(s.get(b"r2", &read(1)).unwrap().is_none());
}

#[test]
fn a_narrowing_of_reads_only_keeps_the_hidden_rows_through_compaction_until_undone() {
    let (dir, mut s) = setup(3);
    s.narrow_reads(Some(Arc::new(|r: &[u8]| r < b"r1".as_slice())));
    assert!(
        s.get(b"r2", &read(1)).unwrap().is_none(),
        "hidden from reads"
    );
    s.compact(true).unwrap();
    let background = s.compaction_task(true);
    if let Some(task) = background {
        let out = task.run().unwrap();
        drop(s.install_compaction(out).unwrap());
    }
    // The split that hid them was abandoned: the rows are all still there.
    s.set_owns_row(None);
    assert_eq!(cells(&s, "r2", &read(1)).len(), 1, "kept by compaction");
    drop(s);
    let s = open(dir.path());
    assert_eq!(cells(&s, "r2", &read(1)).len(), 1, "and after a restart");
}

/// Inline flush: the tiered compaction after a flush is inline flush's own (under background
/// flush the owner compacts, see `task_runs_on_another_thread_while_writes_continue`).
#[test]
fn many_flushes_are_merged_by_the_tiered_compaction() {
    let (_dir, s) = setup_with(20, inline_flush_options(families()));
    assert!(s.stats().segments < 8, "{} segments", s.stats().segments);
    for i in 0..20 {
        assert_eq!(
            cells(&s, &format!("r{i}"), &read(1)),
            vec![c("cf:q", 2, "new")]
        );
    }
}

#[test]
fn a_reopened_store_never_reuses_the_id_of_a_half_written_file() {
    // A compaction of a closed store may still be writing `<id>.seg.tmp` when the directory
    // is opened again: the new store must not write a file of that id (the old job's rename
    // would replace it, or its own would fail).
    let (dir, s) = setup(1);
    drop(s);
    let stale = 40u64;
    std::fs::write(dir.path().join(format!("{stale:016}.seg.tmp")), b"half").unwrap();
    let mut s = open(dir.path());
    mutate(&mut s, "late", vec![put("cf", "q", Some(1), "v")]);
    s.flush().unwrap();
    let ids: Vec<u64> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".seg").and_then(|n| n.parse().ok())
        })
        .collect();
    assert!(ids.iter().any(|id| *id > stale), "new segment ids: {ids:?}");
    assert!(!dir.path().join(format!("{stale:016}.seg.tmp")).exists());
}

#[test]
fn a_compaction_task_that_outlives_its_store_never_replaces_a_segment_of_the_next_one() {
    // The region's store is dropped without a close (a failed region) while a compaction task
    // is still pending, and the directory is opened again in the same process.
    let fs = SimFs::new();
    let opts = server_options(families());
    let (mut a, _) = open_sim(&fs, opts.clone()).unwrap();
    for r in ["r1", "r2"] {
        mutate(&mut a, r, vec![put("one", "q", Some(1), "a")]);
        a.flush().unwrap();
    }
    let task = a.compaction_task(false).expect("two segments");
    drop(a);
    let (mut b, _) = open_sim(&fs, opts.clone()).unwrap();
    mutate(&mut b, "r3", vec![put("one", "q", Some(1), "b3")]);
    b.flush().unwrap();
    let _ = task.run(); // the old task finishes now: whatever it writes must not replace b's
    drop(b);
    let (b, _) = open_sim(&fs, opts).unwrap();
    assert_eq!(cells(&b, "r3", &read(1)), vec![c("one:q", 1, "b3")]);
    assert_eq!(cells(&b, "r1", &read(1)), vec![c("one:q", 1, "a")]);
}

/// Flush `rows` rows of 64 KiB values, `first` on, into one segment.
fn flush_rows(s: &mut RegionStore, first: usize, rows: usize) {
    let value = "v".repeat(64 << 10);
    for i in first..first + rows {
        mutate(
            s,
            &format!("big{i:05}"),
            vec![put("cf", "q", Some(1), &value)],
        );
    }
    s.flush().unwrap();
}

/// The compaction a region runs by itself merges segments of about one size, four of them, and
/// leaves a larger segment out until its own tier fills: a merge rewrites about its own size,
/// not the whole region.
#[test]
fn the_background_compaction_merges_a_tier_of_similar_segments_and_leaves_a_larger_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    // One large segment (20 MiB), then three flushes of 5 MiB: no tier holds four.
    flush_rows(&mut s, 0, 320);
    let large = s.stats().segment_bytes;
    for n in 0..3 {
        flush_rows(&mut s, 1000 + n * 80, 80);
    }
    assert!(
        s.background_compaction_task().is_none(),
        "three small segments and a large one wait"
    );
    // A fourth small flush fills the tier: the four small ones merge, the large one stays.
    flush_rows(&mut s, 2000, 80);
    let task = s.background_compaction_task().expect("a full tier");
    assert_eq!(task.input_count(), 4, "{task:?}");
    let out = task.run().unwrap();
    drop(s.install_compaction(out).unwrap());
    let stats = s.stats();
    assert_eq!(stats.segments, 2, "the large one and the merged tier");
    assert!(stats.segment_bytes > large, "nothing dropped");
    assert!(s.background_compaction_task().is_none());
    let written = (0..320).chain(1000..1240).chain(2000..2080);
    for row in written.map(|i| format!("big{i:05}")) {
        assert_eq!(cells(&s, &row, &read(1)).len(), 1, "{row}");
    }
}
