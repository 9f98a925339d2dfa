//! Idempotency keys: a retried keyed write is answered with its first outcome and applied once,
//! across retries, flushes (log rotation), a crash (drop without close) and a region export,
//! until the window passes or the key count bound pushes the key out.
mod common;
use common::*;
use kura_storage::*;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn inc(row: &str, n: i64) -> WriteOp {
    WriteOp::Increment(Increment {
        row: row.into(),
        columns: vec![(b"cf".to_vec(), b"n".to_vec(), n)],
    })
}

fn keyed(store: &mut RegionStore, op: WriteOp, key: &str) -> WriteOutcome {
    store
        .write_batch_keyed(vec![op.with_key(Some(key.as_bytes().to_vec()))])
        .pop()
        .expect("one result")
        .expect("write ok")
}

fn counter(outcome: &WriteOutcome) -> i64 {
    match outcome {
        WriteOutcome::Cells(c) => i64::from_be_bytes(c[0].value.as_slice().try_into().unwrap()),
        other => panic!("not cells: {other:?}"),
    }
}

fn stored(store: &RegionStore, row: &str) -> i64 {
    let r = store.get(row.as_bytes(), &read(1)).unwrap().unwrap();
    i64::from_be_bytes(r.cells[0].value.as_slice().try_into().unwrap())
}

#[test]
fn a_retried_keyed_increment_is_applied_once_and_answers_the_first_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let first = keyed(&mut s, inc("r", 5), "k1");
    assert_eq!(counter(&first), 5);
    for _ in 0..3 {
        assert_eq!(keyed(&mut s, inc("r", 5), "k1"), first);
    }
    assert_eq!(stored(&s, "r"), 5);
    // Another key applies again; the same key on another row is another key.
    assert_eq!(counter(&keyed(&mut s, inc("r", 5), "k2")), 10);
    assert_eq!(counter(&keyed(&mut s, inc("other", 1), "k1")), 1);
    assert_eq!(stored(&s, "r"), 10);
    // Unkeyed writes are never deduplicated.
    s.write_batch(vec![inc("r", 1), inc("r", 1)]);
    assert_eq!(stored(&s, "r"), 12);
}

#[test]
fn the_same_key_twice_in_one_batch_applies_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let k = Some(b"k".to_vec());
    let out = s.write_batch_keyed(vec![
        inc("r", 2).with_key(k.clone()),
        inc("r", 2).with_key(k),
    ]);
    assert_eq!(counter(out[0].as_ref().unwrap()), 2);
    assert_eq!(out[0].as_ref().unwrap(), out[1].as_ref().unwrap());
    assert_eq!(stored(&s, "r"), 2);
}

#[test]
fn a_keyed_write_in_a_plain_batch_is_deduplicated_and_an_empty_key_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let op = || inc("r", 3).with_key(Some(b"k".to_vec()));
    let a = s.write_batch(vec![op()]).pop().unwrap().unwrap();
    let b = s.write_batch(vec![op()]).pop().unwrap().unwrap();
    assert_eq!(a, b);
    assert_eq!(stored(&s, "r"), 3);
    assert!(matches!(
        s.write_batch_keyed(vec![inc("r", 1).with_key(Some(Vec::new()))])
            .pop()
            .unwrap(),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(stored(&s, "r"), 3);
}

#[test]
fn a_failed_check_is_remembered_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let cam = || {
        WriteOp::CheckAndMutate(CheckAndMutate {
            row: b"r".to_vec(),
            family: b"cf".to_vec(),
            qualifier: b"q".to_vec(),
            expected: b"old".to_vec(),
            mutations: vec![put("cf", "q", None, "new")],
        })
    };
    assert_eq!(keyed(&mut s, cam(), "k"), WriteOutcome::Checked(false));
    mutate(&mut s, "r", vec![put("cf", "q", None, "old")]);
    // The retry answers the first outcome and does not apply, though the check would pass now.
    assert_eq!(keyed(&mut s, cam(), "k"), WriteOutcome::Checked(false));
    let r = s.get(b"r", &read(1)).unwrap().unwrap();
    assert_eq!(r.cells[0].value, b"old");
    assert_eq!(keyed(&mut s, cam(), "k2"), WriteOutcome::Checked(true));
    assert_eq!(keyed(&mut s, cam(), "k2"), WriteOutcome::Checked(true));
}

#[test]
fn a_keyed_append_survives_a_flush_and_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let app = || {
        WriteOp::Append(Append {
            row: b"r".to_vec(),
            columns: vec![(b"cf".to_vec(), b"a".to_vec(), b"x".to_vec())],
            max_value: None,
        })
    };
    let first = {
        let mut s = open(dir.path());
        let first = keyed(&mut s, app(), "k");
        s.flush().unwrap();
        assert_eq!(keyed(&mut s, app(), "k"), first);
        s.flush().unwrap(); // the key is re-logged into each new log
        s.close().unwrap();
        first
    };
    let mut s = open(dir.path());
    assert_eq!(s.idempotency_keys(), 1);
    assert_eq!(keyed(&mut s, app(), "k"), first);
    let r = s.get(b"r", &read(1)).unwrap().unwrap();
    assert_eq!(r.cells[0].value, b"x");
}

#[test]
fn keys_survive_a_crash_without_close() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let mut s = open(dir.path());
        keyed(&mut s, inc("r", 7), "a");
        s.flush().unwrap();
        keyed(&mut s, inc("r", 7), "b")
        // dropped without close: the log tail is all there is (Sync durability).
    };
    let mut s = open(dir.path());
    assert_eq!(keyed(&mut s, inc("r", 7), "b"), first);
    assert_eq!(counter(&keyed(&mut s, inc("r", 7), "a")), 7);
    assert_eq!(stored(&s, "r"), 14);
}

#[test]
fn a_crash_after_a_power_cut_keeps_key_and_effect_together() {
    // A power cut drops unsynced bytes; the key travels in the write's own frame, so
    // after recovery either both the increment and its key are present or neither is.
    let fs = SimFs::new();
    let mut opts = server_options(families());
    opts.durability = Durability::None;
    let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
    keyed(&mut s, inc("r", 1), "k");
    drop(s);
    fs.power_cut(None);
    let (mut s, _) = open_sim(&fs, opts).unwrap();
    let before = s
        .get(b"r", &read(1))
        .unwrap()
        .map(|r| i64::from_be_bytes(r.cells[0].value.as_slice().try_into().unwrap()))
        .unwrap_or(0);
    let out = counter(&keyed(&mut s, inc("r", 1), "k"));
    assert_eq!(
        out, 1,
        "applied exactly once in total (before crash: {before})"
    );
    assert_eq!(stored(&s, "r"), 1);
}

#[test]
fn a_key_expires_after_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicI64::new(1_000_000));
    let clock = now.clone();
    let opts = IdempotencyOptions {
        window: Duration::from_secs(60),
        clock: Some(Arc::new(move || clock.load(Ordering::SeqCst))),
        ..IdempotencyOptions::default()
    };
    let mut s = open(dir.path());
    s.set_idempotency_options(opts.clone());
    let first = keyed(&mut s, inc("r", 1), "k");
    now.fetch_add(59_999, Ordering::SeqCst);
    assert_eq!(keyed(&mut s, inc("r", 1), "k"), first);
    now.fetch_add(1, Ordering::SeqCst);
    assert_eq!(counter(&keyed(&mut s, inc("r", 1), "k")), 2);
    assert_eq!(stored(&s, "r"), 2);
    // Expired keys are not carried across a reopen either.
    now.fetch_add(60_000, Ordering::SeqCst);
    s.close().unwrap();
    let mut s = open(dir.path());
    s.set_idempotency_options(opts);
    assert_eq!(s.idempotency_keys(), 0);
    assert_eq!(counter(&keyed(&mut s, inc("r", 1), "k")), 3);
}

#[test]
fn the_oldest_keys_go_beyond_the_count_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.set_idempotency_options(IdempotencyOptions {
        max_keys: 2,
        ..IdempotencyOptions::default()
    });
    keyed(&mut s, inc("r", 1), "a");
    keyed(&mut s, inc("r", 1), "b");
    keyed(&mut s, inc("r", 1), "c");
    assert_eq!(s.idempotency_keys(), 2);
    assert_eq!(counter(&keyed(&mut s, inc("r", 1), "c")), 3); // remembered
    assert_eq!(counter(&keyed(&mut s, inc("r", 1), "a")), 4); // forgotten: applied again
}

#[test]
fn linked_rows_take_their_keys_along() {
    let dir = tempfile::tempdir().unwrap();
    let child = dir.path().join("child");
    let mut s = open(&dir.path().join("parent"));
    let first = keyed(&mut s, inc("z", 4), "k");
    keyed(&mut s, inc("a", 4), "k");
    s.link_rows(
        &|row: &[u8]| row >= b"m".as_slice(),
        &child,
        server_options(families()),
    )
    .unwrap();
    let mut opts = server_options(families());
    opts.owns_row = Some(std::sync::Arc::new(|row: &[u8]| row >= b"m".as_slice()));
    let (mut c, _) = RegionStore::open(&child, opts).unwrap();
    assert_eq!(c.idempotency_keys(), 1);
    assert_eq!(keyed(&mut c, inc("z", 4), "k"), first);
    assert_eq!(stored(&c, "z"), 4);
}

#[test]
fn a_version_1_log_is_replayed_but_never_appended_to() {
    let fixture = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    let v1_log = tmp.path().join("0000000000000003.log");
    let v1_bytes = std::fs::read(&v1_log).unwrap();
    let first = {
        let mut s = open(tmp.path());
        keyed(&mut s, inc("row9", 2), "k")
    };
    assert_eq!(
        std::fs::read(&v1_log).unwrap(),
        v1_bytes,
        "v1 log untouched"
    );
    let mut s = open(tmp.path());
    assert_eq!(keyed(&mut s, inc("row9", 2), "k"), first);
    assert_eq!(cells(&s, "row2", &read(3)), vec![c("one:b", 6, "b6")]);
    assert_eq!(stored(&s, "row9"), 2);
}

#[test]
fn large_outcomes_are_bounded_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.set_idempotency_options(IdempotencyOptions {
        max_bytes: 64 << 10,
        ..IdempotencyOptions::default()
    });
    let big = vec![b'x'; 10 << 10];
    for i in 0..20 {
        let app = WriteOp::Append(Append {
            row: format!("r{i}").into_bytes(),
            columns: vec![(b"cf".to_vec(), b"a".to_vec(), big.clone())],
            max_value: None,
        });
        keyed(&mut s, app, "k");
    }
    // Six 10 KiB outcomes fit in 64 KiB: the newest are remembered, the oldest forgotten.
    assert_eq!(s.idempotency_keys(), 6);
    let retry = |i: usize| {
        WriteOp::Append(Append {
            row: format!("r{i}").into_bytes(),
            columns: vec![(b"cf".to_vec(), b"a".to_vec(), b"y".to_vec())],
            max_value: None,
        })
    };
    let newest = keyed(&mut s, retry(19), "k");
    assert!(matches!(&newest, WriteOutcome::Cells(c) if c[0].value.len() == 10 << 10));
    let oldest = keyed(&mut s, retry(0), "k");
    assert!(matches!(&oldest, WriteOutcome::Cells(c) if c[0].value.len() == (10 << 10) + 1));
}
