//! Delete markers: versions, columns, families, rows; masking of later-arriving puts.
mod common;
use common::*;
use kura_storage::*;

fn del_col(ts: i64) -> Mutation {
    Mutation::DeleteColumn {
        family: b"cf".to_vec(),
        qualifier: b"q".to_vec(),
        timestamp: Some(ts),
    }
}

#[test]
fn delete_marker_masks_a_later_put_with_an_older_timestamp_until_major_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(&mut s, "r", vec![del_col(100)]);
    mutate(&mut s, "r", vec![put("cf", "q", Some(50), "late")]);
    mutate(&mut s, "r", vec![put("cf", "q", Some(100), "equal")]);
    assert!(cells(&s, "r", &read(3)).is_empty());
    s.flush().unwrap();
    assert!(
        cells(&s, "r", &read(3)).is_empty(),
        "still masked after a flush"
    );
    s.compact(false).unwrap();
    assert!(
        cells(&s, "r", &read(3)).is_empty(),
        "still masked after a minor compaction"
    );
    mutate(&mut s, "r", vec![put("cf", "q", Some(101), "newer")]);
    assert_eq!(cells(&s, "r", &read(3)), vec![c("cf:q", 101, "newer")]);
    s.compact(true).unwrap();
    mutate(&mut s, "r", vec![put("cf", "q", Some(50), "after major")]);
    assert_eq!(
        cells(&s, "r", &read(3)),
        vec![c("cf:q", 101, "newer"), c("cf:q", 50, "after major")]
    );
}

#[test]
fn delete_version_removes_exactly_one_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for ts in [1, 2, 3] {
        mutate(&mut s, "r", vec![put("cf", "q", Some(ts), &ts.to_string())]);
    }
    let dv = |ts| Mutation::DeleteVersion {
        family: b"cf".to_vec(),
        qualifier: b"q".to_vec(),
        timestamp: ts,
    };
    mutate(&mut s, "r", vec![dv(Some(2))]);
    assert_eq!(
        cells(&s, "r", &read(3)),
        vec![c("cf:q", 3, "3"), c("cf:q", 1, "1")]
    );
    // No timestamp: the latest visible version.
    mutate(&mut s, "r", vec![dv(None)]);
    assert_eq!(cells(&s, "r", &read(3)), vec![c("cf:q", 1, "1")]);
    mutate(&mut s, "r", vec![dv(None)]);
    assert!(cells(&s, "r", &read(3)).is_empty());
    // On an empty column it is a no-op, not an error.
    mutate(&mut s, "r", vec![dv(None)]);
}

#[test]
fn delete_column_masks_versions_at_or_below_its_timestamp_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for ts in [1, 2, 3] {
        mutate(&mut s, "r", vec![put("cf", "q", Some(ts), &ts.to_string())]);
    }
    mutate(&mut s, "r", vec![del_col(2)]);
    assert_eq!(cells(&s, "r", &read(3)), vec![c("cf:q", 3, "3")]);
}

#[test]
fn family_and_row_deletes_mask_every_column_at_or_below() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(
        &mut s,
        "r",
        vec![
            put("cf", "a", Some(5), "a"),
            put("cf", "b", Some(9), "b"),
            put("one", "x", Some(5), "x"),
        ],
    );
    mutate(
        &mut s,
        "r",
        vec![Mutation::DeleteFamily {
            family: b"cf".to_vec(),
            timestamp: Some(5),
        }],
    );
    assert_eq!(
        cells(&s, "r", &read(3)),
        vec![c("cf:b", 9, "b"), c("one:x", 5, "x")]
    );
    s.flush().unwrap();
    mutate(
        &mut s,
        "r",
        vec![Mutation::DeleteRow { timestamp: Some(9) }],
    );
    assert!(s.get(b"r", &read(3)).unwrap().is_none());
    mutate(&mut s, "r", vec![put("one", "x", Some(8), "late")]);
    assert!(
        s.get(b"r", &read(3)).unwrap().is_none(),
        "row marker masks a later older put"
    );
}

#[test]
fn delete_row_with_server_timestamp_then_put_leaves_the_put_visible() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(&mut s, "r", vec![put("one", "q", None, "v1")]);
    mutate(&mut s, "r", vec![Mutation::DeleteRow { timestamp: None }]);
    assert!(s.get(b"r", &read(1)).unwrap().is_none());
    mutate(&mut s, "r", vec![put("one", "q", None, "v2")]);
    assert_eq!(cells(&s, "r", &read(1))[0].2, "v2");
}

#[test]
fn major_compaction_drops_excess_versions_without_changing_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for ts in 1..=6 {
        mutate(&mut s, "r", vec![put("cf", "q", Some(ts), &ts.to_string())]);
        s.flush().unwrap();
    }
    let before = cells(&s, "r", &read(10));
    s.compact(true).unwrap();
    assert_eq!(cells(&s, "r", &read(10)), before);
    assert_eq!(s.stats().segment_cells, 3);
}

#[test]
fn dropped_family_cells_are_invisible_even_when_re_added() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    mutate(&mut s, "r", vec![put("one", "q", Some(1), "v")]);
    s.set_families(vec![FamilyDescriptor::new("cf")]).unwrap();
    assert!(s.get(b"r", &read(1)).unwrap().is_none());
    s.set_families(families()).unwrap();
    assert!(s.get(b"r", &read(1)).unwrap().is_none());
    mutate(&mut s, "r", vec![put("one", "q", Some(1), "again")]);
    assert_eq!(cells(&s, "r", &read(1)), vec![c("one:q", 1, "again")]);
}

#[test]
fn ttl_hides_expired_cells() {
    let dir = tempfile::tempdir().unwrap();
    let fams = vec![FamilyDescriptor::new("t").with_ttl_secs(Some(60))];
    let mut s = RegionStore::open(dir.path(), server_options(fams))
        .unwrap()
        .0;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    mutate(
        &mut s,
        "r",
        vec![
            put("t", "old", Some(now - 120_000), "x"),
            put("t", "new", Some(now), "y"),
        ],
    );
    assert_eq!(cells(&s, "r", &read(1)), vec![c("t:new", now, "y")]);
    s.compact(true).unwrap();
    assert_eq!(cells(&s, "r", &read(1)), vec![c("t:new", now, "y")]);
    assert_eq!(s.stats().segment_cells, 1);
}
