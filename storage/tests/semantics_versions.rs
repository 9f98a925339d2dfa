//! Versions, ordering, re-puts and time ranges.
mod common;
use common::*;
use kura_storage::*;

#[test]
fn highest_timestamp_wins_regardless_of_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(&mut s, "r", vec![put("one", "q", Some(20), "new")]);
    mutate(&mut s, "r", vec![put("one", "q", Some(10), "old")]);
    assert_eq!(cells(&s, "r", &read(1)), vec![c("one:q", 20, "new")]);
}

#[test]
fn versions_are_returned_newest_first_capped_by_family_max() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for ts in 1..=5 {
        mutate(
            &mut s,
            "r",
            vec![put("cf", "q", Some(ts), &format!("v{ts}"))],
        );
    }
    assert_eq!(
        cells(&s, "r", &read(10)),
        vec![c("cf:q", 5, "v5"), c("cf:q", 4, "v4"), c("cf:q", 3, "v3")]
    );
    assert_eq!(
        cells(&s, "r", &read(2)),
        vec![c("cf:q", 5, "v5"), c("cf:q", 4, "v4")]
    );
}

#[test]
fn re_put_of_the_same_timestamp_overwrites_also_across_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(&mut s, "r", vec![put("cf", "q", Some(7), "first")]);
    s.flush().unwrap();
    mutate(&mut s, "r", vec![put("cf", "q", Some(7), "second")]);
    assert_eq!(cells(&s, "r", &read(3)), vec![c("cf:q", 7, "second")]);
    s.flush().unwrap();
    s.compact(false).unwrap();
    assert_eq!(cells(&s, "r", &read(3)), vec![c("cf:q", 7, "second")]);
}

#[test]
fn cells_are_ordered_by_family_qualifier_then_timestamp_descending() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(
        &mut s,
        "r",
        vec![
            put("one", "b", Some(1), "x"),
            put("cf", "b", Some(1), "x"),
            put("cf", "a", Some(1), "x"),
            put("cf", "a", Some(2), "y"),
        ],
    );
    let got: Vec<_> = cells(&s, "r", &read(3))
        .into_iter()
        .map(|(col, ts, _)| (col, ts))
        .collect();
    assert_eq!(
        got,
        vec![
            ("cf:a".to_string(), 2),
            ("cf:a".to_string(), 1),
            ("cf:b".to_string(), 1),
            ("one:b".to_string(), 1)
        ]
    );
}

#[test]
fn time_range_is_half_open_and_applies_before_the_version_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for ts in [10, 20, 30] {
        mutate(&mut s, "r", vec![put("cf", "q", Some(ts), &ts.to_string())]);
    }
    let spec = ReadSpec {
        time_range: TimeRange { min: 10, max: 30 },
        max_versions: 1,
        ..read(1)
    };
    assert_eq!(cells(&s, "r", &spec), vec![c("cf:q", 20, "20")]);
    let spec = ReadSpec {
        time_range: TimeRange { min: 10, max: 30 },
        max_versions: 5,
        ..read(1)
    };
    assert_eq!(
        cells(&s, "r", &spec),
        vec![c("cf:q", 20, "20"), c("cf:q", 10, "10")]
    );
}

#[test]
fn column_selection_restricts_and_unknown_family_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(
        &mut s,
        "r",
        vec![put("cf", "a", Some(1), "1"), put("cf", "b", Some(1), "2")],
    );
    let spec = ReadSpec {
        columns: ColumnSelection(vec![ColumnSpec::Column(b"cf".to_vec(), b"b".to_vec())]),
        ..read(1)
    };
    assert_eq!(cells(&s, "r", &spec), vec![c("cf:b", 1, "2")]);
    let bad = ReadSpec {
        columns: ColumnSelection(vec![ColumnSpec::Family(b"nope".to_vec())]),
        ..read(1)
    };
    assert!(matches!(s.get(b"r", &bad), Err(Error::NoSuchFamily { .. })));
    let err = s.mutate_row(RowMutation {
        row: b"r".to_vec(),
        mutations: vec![put("nope", "q", None, "v")],
    });
    assert!(matches!(err, Err(Error::NoSuchFamily { .. })));
    let err = s.mutate_row(RowMutation {
        row: Vec::new(),
        mutations: vec![put("cf", "q", None, "v")],
    });
    assert!(matches!(err, Err(Error::InvalidArgument(_))));
}

#[test]
fn server_timestamps_never_go_backwards_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = open(dir.path());
        // A delete with a server timestamp pushes the next one past it.
        mutate(&mut s, "r", vec![put("one", "q", None, "a")]);
        let t1 = cells(&s, "r", &read(1))[0].1;
        mutate(&mut s, "r", vec![Mutation::DeleteRow { timestamp: None }]);
        mutate(&mut s, "r", vec![put("one", "q", None, "b")]);
        let t2 = cells(&s, "r", &read(1))[0].1;
        assert!(
            t2 > t1,
            "put after a delete is visible with a later timestamp"
        );
        s.close().unwrap();
    }
    let mut s = open(dir.path());
    let before = cells(&s, "r", &read(1))[0].1;
    mutate(&mut s, "r2", vec![put("one", "q", None, "c")]);
    assert!(cells(&s, "r2", &read(1))[0].1 >= before);
}

fn del_version(ts: i64) -> Mutation {
    Mutation::DeleteVersion {
        family: "one".into(),
        qualifier: "q".into(),
        timestamp: Some(ts),
    }
}

#[test]
fn a_flush_keeps_only_the_versions_reads_can_see() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for ts in 1..=50 {
        mutate(
            &mut s,
            "r",
            vec![put("one", "q", Some(ts), &format!("v{ts}"))],
        );
        mutate(
            &mut s,
            "r",
            vec![put("cf", "q", Some(ts), &format!("v{ts}"))],
        );
    }
    s.flush().unwrap();
    // `one` keeps 1 version, `cf` 3: a counter's every increment does not reach the segment.
    assert_eq!(s.stats().segment_cells, 4);
    assert_eq!(cells(&s, "r", &read(5)).len(), 4);
    assert_eq!(cells(&s, "r", &read(1))[1], c("one:q", 50, "v50"));
}

#[test]
fn a_version_marker_in_an_older_segment_keeps_the_versions_it_unmasks() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(&mut s, "r", vec![del_version(5)]);
    s.flush().unwrap();
    for ts in [5, 4, 3] {
        mutate(
            &mut s,
            "r",
            vec![put("one", "q", Some(ts), &format!("v{ts}"))],
        );
    }
    // The put at 5 is masked by the older marker: 4 is the visible version.
    assert_eq!(cells(&s, "r", &read(1)), vec![c("one:q", 4, "v4")]);
    s.flush().unwrap();
    assert_eq!(cells(&s, "r", &read(1)), vec![c("one:q", 4, "v4")]);
    drop(s);
    let s = open(dir.path());
    assert_eq!(cells(&s, "r", &read(1)), vec![c("one:q", 4, "v4")]);
}

#[test]
fn a_version_marker_written_during_a_background_flush_unmasks_the_older_version() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for ts in [3, 4, 5] {
        mutate(
            &mut s,
            "r",
            vec![put("one", "q", Some(ts), &format!("v{ts}"))],
        );
    }
    let task = s.flush_task().unwrap().expect("a memtable to flush");
    mutate(&mut s, "r", vec![del_version(5)]);
    assert_eq!(cells(&s, "r", &read(1)), vec![c("one:q", 4, "v4")]);
    // The task left 4 out, not knowing of the marker: the install flushes again.
    let _ = s.install_flush(task.run()).unwrap();
    assert_eq!(cells(&s, "r", &read(1)), vec![c("one:q", 4, "v4")]);
    assert_eq!(s.stats().memtable_cells, 0, "both memtables were flushed");
    drop(s);
    let s = open(dir.path());
    assert_eq!(cells(&s, "r", &read(1)), vec![c("one:q", 4, "v4")]);
}
