//! Increment, append and check-and-mutate.
mod common;
use common::*;
use kura_storage::*;

fn inc(row: &str, cols: &[(&str, &str, i64)]) -> Increment {
    Increment {
        row: row.into(),
        columns: cols
            .iter()
            .map(|(f, q, n)| (f.as_bytes().to_vec(), q.as_bytes().to_vec(), *n))
            .collect(),
    }
}

#[test]
fn increment_counts_from_zero_across_families_and_returns_new_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let out = s
        .increment(inc("r", &[("cf", "a", 5), ("one", "b", -2)]))
        .unwrap();
    assert_eq!(out[0].value, 5i64.to_be_bytes());
    assert_eq!(out[1].value, (-2i64).to_be_bytes());
    let out = s.increment(inc("r", &[("cf", "a", 1)])).unwrap();
    assert_eq!(out[0].value, 6i64.to_be_bytes());
    let stored = s.get(b"r", &read(1)).unwrap().unwrap();
    assert_eq!(stored.cells[0].value, 6i64.to_be_bytes());
}

#[test]
fn a_column_named_twice_in_one_increment_counts_both_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.increment(inc("r", &[("cf", "a", 10)])).unwrap();
    let out = s
        .increment(inc("r", &[("cf", "a", 5), ("one", "b", 1), ("cf", "a", 2)]))
        .unwrap();
    assert_eq!(out[0].value, 15i64.to_be_bytes());
    assert_eq!(out[1].value, 1i64.to_be_bytes());
    assert_eq!(out[2].value, 17i64.to_be_bytes());
    assert!(
        out[2].timestamp > out[0].timestamp,
        "the second is the newer version"
    );
    let stored = s.get(b"r", &read(1)).unwrap().unwrap();
    let a = stored.cells.iter().find(|c| c.family == b"cf").unwrap();
    assert_eq!(a.value, 17i64.to_be_bytes());
    // And it survives a restart (the log holds both effects, the newer wins).
    drop(s);
    let s = open(dir.path());
    let stored = s.get(b"r", &read(1)).unwrap().unwrap();
    let a = stored.cells.iter().find(|c| c.family == b"cf").unwrap();
    assert_eq!(a.value, 17i64.to_be_bytes());
}

#[test]
fn increment_is_never_hidden_by_a_newer_existing_version() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let future = 9_000_000_000_000i64;
    mutate(
        &mut s,
        "r",
        vec![Mutation::Put {
            family: b"one".to_vec(),
            qualifier: b"n".to_vec(),
            timestamp: Some(future),
            value: 1i64.to_be_bytes().to_vec(),
        }],
    );
    let out = s.increment(inc("r", &[("one", "n", 1)])).unwrap();
    assert_eq!(out[0].timestamp, future + 1);
    assert_eq!(
        s.get(b"r", &read(1)).unwrap().unwrap().cells[0].value,
        2i64.to_be_bytes()
    );
}

#[test]
fn increment_rejects_non_counters_and_overflow_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(&mut s, "r", vec![put("one", "s", Some(1), "abc")]);
    assert!(matches!(
        s.increment(inc("r", &[("one", "s", 1)])),
        Err(Error::NotACounter { len: 3, .. })
    ));
    s.increment(inc("r", &[("cf", "n", i64::MAX)])).unwrap();
    assert!(matches!(
        s.increment(inc("r", &[("cf", "m", 1), ("cf", "n", 1)])),
        Err(Error::CounterOverflow { .. })
    ));
    assert!(
        cells(&s, "r", &read(1))
            .iter()
            .all(|(col, _, _)| col != "cf:m"),
        "atomic: nothing written"
    );
    assert!(matches!(
        s.increment(inc("r", &[("zz", "n", 1)])),
        Err(Error::NoSuchFamily { .. })
    ));
}

#[test]
fn append_concatenates_onto_the_current_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let app = |suffix: &str| Append {
        row: b"r".to_vec(),
        columns: vec![(b"one".to_vec(), b"q".to_vec(), suffix.as_bytes().to_vec())],
        max_value: None,
    };
    assert_eq!(s.append(app("ab")).unwrap()[0].value, b"ab");
    assert_eq!(s.append(app("cd")).unwrap()[0].value, b"abcd");
    assert_eq!(cells(&s, "r", &read(1))[0].2, "abcd");
}

#[test]
fn an_append_past_the_value_limit_fails_whole_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let app = |q: &str, suffix: &str| Append {
        row: b"r".to_vec(),
        columns: vec![(
            b"one".to_vec(),
            q.as_bytes().to_vec(),
            suffix.as_bytes().to_vec(),
        )],
        max_value: Some(4),
    };
    assert_eq!(s.append(app("q", "abc")).unwrap()[0].value, b"abc");
    assert_eq!(
        s.append(app("q", "d")).unwrap()[0].value,
        b"abcd",
        "exactly at the limit"
    );
    let two = Append {
        columns: vec![
            (b"one".to_vec(), b"p".to_vec(), b"x".to_vec()),
            (b"one".to_vec(), b"q".to_vec(), b"e".to_vec()),
        ],
        ..app("q", "")
    };
    match s.append(two) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("limit"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(
        cells(&s, "r", &read(1)),
        vec![c("one:q", cells(&s, "r", &read(1))[0].1, "abcd")]
    );
}

#[test]
fn check_and_mutate_compares_the_latest_visible_version() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let cam = |expected: &str, v: &str| CheckAndMutate {
        row: b"r".to_vec(),
        family: b"one".to_vec(),
        qualifier: b"q".to_vec(),
        expected: expected.as_bytes().to_vec(),
        mutations: vec![put("one", "q", None, v)],
    };
    assert!(
        !s.check_and_mutate(cam("x", "never")).unwrap(),
        "absent does not equal x"
    );
    assert!(
        s.check_and_mutate(cam("", "first")).unwrap(),
        "empty expected matches absent"
    );
    assert!(
        !s.check_and_mutate(cam("", "second")).unwrap(),
        "empty expected does not match a value"
    );
    assert!(s.check_and_mutate(cam("first", "second")).unwrap());
    assert_eq!(cells(&s, "r", &read(1))[0].2, "second");
    let mut bad = cam("", "v");
    bad.family = b"zz".to_vec();
    assert!(matches!(
        s.check_and_mutate(bad),
        Err(Error::NoSuchFamily { .. })
    ));
}

#[test]
fn write_batch_returns_one_result_per_op_and_sees_earlier_ops() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let res = s.write_batch(vec![
        WriteOp::Increment(inc("r", &[("cf", "n", 1)])),
        WriteOp::Mutate(RowMutation {
            row: b"r".to_vec(),
            mutations: vec![put("zz", "q", None, "v")],
        }),
        WriteOp::Increment(inc("r", &[("cf", "n", 1)])),
    ]);
    assert!(matches!(res[1], Err(Error::NoSuchFamily { .. })));
    match &res[2] {
        Ok(WriteOutcome::Cells(c)) => assert_eq!(c[0].value, 2i64.to_be_bytes()),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(s.stats().fsyncs, 1, "one fsync for the whole batch");
}

#[test]
fn a_hot_counter_in_a_one_version_family_keeps_two_memtable_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for _ in 0..100 {
        s.increment(inc("r", &[("one", "n", 1)])).unwrap();
    }
    assert_eq!(
        s.stats().memtable_cells,
        2,
        "the newest put and the one before"
    );
    // A family keeping three versions keeps every increment until a flush, as HBase's does.
    for _ in 0..100 {
        s.increment(inc("r", &[("cf", "n", 1)])).unwrap();
    }
    assert_eq!(s.stats().memtable_cells, 102);
    let value = |s: &RegionStore, fam: &str| {
        let row = s.get(b"r", &read(1)).unwrap().unwrap();
        row.cells
            .into_iter()
            .find(|c| c.family == fam.as_bytes())
            .unwrap()
            .value
    };
    assert_eq!(value(&s, "one"), 100i64.to_be_bytes());
    assert_eq!(value(&s, "cf"), 100i64.to_be_bytes());
    drop(s);
    let s = open(dir.path());
    assert_eq!(
        value(&s, "one"),
        100i64.to_be_bytes(),
        "after a restart too"
    );
}

#[test]
fn a_version_delete_after_increments_brings_back_only_the_previous_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let mut stamps = Vec::new();
    for _ in 0..3 {
        stamps.push(s.increment(inc("r", &[("one", "n", 1)])).unwrap()[0].timestamp);
    }
    let del = |ts: i64| Mutation::DeleteVersion {
        family: "one".into(),
        qualifier: "n".into(),
        timestamp: Some(ts),
    };
    mutate(&mut s, "r", vec![del(stamps[2])]);
    let got = s.get(b"r", &read(1)).unwrap().unwrap().cells;
    assert_eq!(
        got[0].value,
        2i64.to_be_bytes(),
        "the put kept beside the newest"
    );
    // The first count was upserted away, as in HBase's memstore: nothing resurfaces.
    mutate(&mut s, "r", vec![del(stamps[1])]);
    assert!(s.get(b"r", &read(1)).unwrap().is_none());
}
