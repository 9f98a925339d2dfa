//! Checkpoints: a consistent, self-contained copy of a store as of one moment, which opens with
//! exactly that moment's state whatever the live store does afterwards (writes, flushes,
//! compactions that delete the segments the checkpoint shares).
mod common;
use common::*;
use kura_storage::*;

type Rows = Vec<(String, Vec<(String, i64, String)>)>;

fn everything(s: &RegionStore) -> Rows {
    let spec = ScanSpec {
        read: read(10),
        ..ScanSpec::all()
    };
    let page = s.scan(&spec, ScanLimits::default()).unwrap();
    assert!(page.complete, "one page holds this test's rows");
    page.rows
        .iter()
        .map(|r| {
            let row = String::from_utf8_lossy(&r.key).into_owned();
            (row.clone(), cells(s, &row, &read(10)))
        })
        .collect()
}

#[test]
fn a_checkpoint_opens_with_exactly_the_state_it_was_taken_at() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let copy = dir.path().join("copy");
    let mut s = open(&live);
    // Two segments, a delete marker and an unflushed memtable.
    for i in 0..3 {
        mutate(
            &mut s,
            &format!("r{i}"),
            vec![put("cf", "q", Some(1), "v1")],
        );
    }
    s.flush().unwrap();
    mutate(&mut s, "r1", vec![put("cf", "q", Some(2), "v2")]);
    mutate(
        &mut s,
        "r2",
        vec![Mutation::DeleteRow { timestamp: Some(1) }],
    );
    s.flush().unwrap();
    mutate(&mut s, "r3", vec![put("one", "q", Some(5), "mem")]);
    let before = everything(&s);

    let report = s.checkpoint(&copy).unwrap();
    assert_eq!(
        report.linked + report.copied,
        2,
        "both segments carried over"
    );
    assert_eq!(report.written, 1, "the memtable written out");

    // The live store moves on: more writes, a flush, a major compaction that deletes the
    // segments the checkpoint links to.
    mutate(&mut s, "r0", vec![put("cf", "q", Some(9), "later")]);
    mutate(&mut s, "r9", vec![put("cf", "q", Some(1), "later")]);
    s.flush().unwrap();
    s.compact(true).unwrap();
    assert_ne!(everything(&s), before);

    let (c, rec) = RegionStore::open(&copy, server_options(Vec::new())).unwrap();
    assert_eq!(rec.log_records_replayed, 0, "nothing to replay");
    assert_eq!(
        c.families(),
        s.families(),
        "families travel in the manifest"
    );
    assert_eq!(everything(&c), before);
    c.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_checkpoint_leaves_the_live_store_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let mut s = open(&live);
    mutate(&mut s, "a", vec![put("cf", "q", Some(1), "x")]);
    s.flush().unwrap();
    mutate(&mut s, "b", vec![put("cf", "q", Some(1), "y")]);
    let files = |p: &std::path::Path| {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let before = files(&live);
    s.checkpoint(&dir.path().join("copy")).unwrap();
    assert_eq!(
        files(&live),
        before,
        "no file of the live store added or removed"
    );
    assert_eq!(s.stats().segments, 1, "the memtable was not flushed");
    drop(s); // a crash: the live log still replays the memtable
    let s = open(&live);
    assert_eq!(cells(&s, "b", &read(1)), vec![c("cf:q", 1, "y")]);
}

#[test]
fn a_checkpoint_keeps_the_idempotency_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("live"));
    let inc = || {
        WriteOp::Increment(Increment {
            row: b"n".to_vec(),
            columns: vec![(b"cf".to_vec(), b"n".to_vec(), 5)],
        })
    };
    let first = s.write_batch_keyed(vec![inc().with_key(Some(b"k1".to_vec()))]);
    assert!(first[0].is_ok());
    let copy = dir.path().join("copy");
    s.checkpoint(&copy).unwrap();
    let mut c = open(&copy);
    assert_eq!(c.idempotency_keys(), 1);
    let retried = c.write_batch_keyed(vec![inc().with_key(Some(b"k1".to_vec()))]);
    assert_eq!(format!("{:?}", retried[0]), format!("{:?}", first[0]));
    let r = c.get(b"n", &read(1)).unwrap().unwrap();
    assert_eq!(r.cells[0].value, 5i64.to_be_bytes(), "applied once");
}

#[test]
fn a_checkpoint_refuses_a_directory_holding_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(&dir.path().join("live"));
    let copy = dir.path().join("copy");
    s.checkpoint(&copy).unwrap();
    assert!(matches!(
        s.checkpoint(&copy),
        Err(Error::InvalidArgument(_))
    ));
}
