//! Writes, counters, check-and-mutate and operations against Google's Bigtable emulator.

mod common;

use common::{table, Emulator};
use kura_backend::{
    Append, Backend, CheckAndMutate, Error, Increment, Mutation, ReadSpec, Row, RowMutation,
};

fn put(fam: &str, q: &str, ts: Option<i64>, v: &[u8]) -> Mutation {
    Mutation::Put {
        family: fam.into(),
        qualifier: q.into(),
        timestamp: ts,
        value: v.to_vec(),
    }
}

fn rm(row: &str, mutations: Vec<Mutation>) -> RowMutation {
    RowMutation {
        row: row.into(),
        mutations,
    }
}

fn all_versions() -> ReadSpec {
    ReadSpec {
        max_versions: 10,
        ..ReadSpec::default()
    }
}

fn cells(row: Option<Row>) -> Vec<(String, String, i64)> {
    row.map(|r| r.cells)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                String::from_utf8_lossy(&c.family).into_owned(),
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                c.timestamp,
            )
        })
        .collect()
}

async fn setup(emu: &Emulator) -> kura_bigtable::BigtableBackend {
    let b = emu.backend().await;
    b.create_table(table("t", &[("a", 10, None), ("b", 10, None)]))
        .await
        .unwrap();
    b
}

fn c(f: &str, q: &str, ts: i64) -> (String, String, i64) {
    (f.into(), q.into(), ts)
}

#[tokio::test]
async fn increments_and_appends_return_the_new_cells() {
    let emu = Emulator::start();
    let b = setup(&emu).await;
    let inc = |n: i64| Increment {
        row: b"r".to_vec(),
        columns: vec![
            (b"a".to_vec(), b"n".to_vec(), n),
            (b"b".to_vec(), b"m".to_vec(), 1),
        ],
    };
    let got = b.increment("t", inc(5), None).await.unwrap();
    assert_eq!(got[0].value, 5i64.to_be_bytes());
    assert_eq!(got[1].value, 1i64.to_be_bytes());
    let got = b.increment("t", inc(-7), None).await.unwrap();
    assert_eq!(got[0].value, (-2i64).to_be_bytes());
    assert_eq!(
        (got[0].family.as_slice(), got[0].qualifier.as_slice()),
        (&b"a"[..], &b"n"[..])
    );
    assert!(
        got[0].timestamp > 1_600_000_000_000,
        "ms, not µs: {}",
        got[0].timestamp
    );
    assert!(
        got[0].timestamp < 10_000_000_000_000,
        "ms, not µs: {}",
        got[0].timestamp
    );
    // The same column twice: each entry answers its own step.
    let twice = Increment {
        row: b"r".to_vec(),
        columns: vec![
            (b"a".to_vec(), b"n".to_vec(), 10),
            (b"a".to_vec(), b"n".to_vec(), 100),
        ],
    };
    let got = b.increment("t", twice, None).await.unwrap();
    assert_eq!(got[0].value, 8i64.to_be_bytes());
    assert_eq!(got[1].value, 108i64.to_be_bytes());
    let row = b
        .get("t", b"r", &ReadSpec::default(), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.cells[0].value, 108i64.to_be_bytes());

    let app = Append {
        row: b"r".to_vec(),
        columns: vec![(b"a".to_vec(), b"s".to_vec(), b"ab".to_vec())],
        max_value: None,
    };
    assert_eq!(
        b.append("t", app.clone(), None).await.unwrap()[0].value,
        b"ab"
    );
    assert_eq!(
        b.append("t", app.clone(), None).await.unwrap()[0].value,
        b"abab"
    );
    let limited = Append {
        max_value: Some(5),
        ..app
    };
    let err = b.append("t", limited, None).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");

    // A value that is not an 8-byte counter.
    let err = b
        .increment(
            "t",
            Increment {
                row: b"r".to_vec(),
                columns: vec![(b"a".to_vec(), b"s".to_vec(), 1)],
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::NotACounter("column a:s holds a 4-byte value, not an 8-byte counter".into())
    );
    let err = b
        .increment(
            "t",
            Increment {
                row: b"r".to_vec(),
                columns: vec![(b"zz".to_vec(), b"s".to_vec(), 1)],
            },
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoSuchFamily { .. }), "{err:?}");
}

#[tokio::test]
async fn check_and_mutate_applies_only_when_the_latest_value_matches() {
    let emu = Emulator::start();
    let b = setup(&emu).await;
    let cam = |expected: &[u8], v: &[u8]| CheckAndMutate {
        row: b"r".to_vec(),
        family: b"a".to_vec(),
        qualifier: b"q".to_vec(),
        expected: expected.to_vec(),
        mutations: vec![put("a", "q", None, v), put("b", "log", None, v)],
    };
    // Expected empty: an absent column passes.
    assert!(b
        .check_and_mutate("t", cam(b"", b"one"), None)
        .await
        .unwrap());
    assert_eq!(value(&b, "r").await, Some(b"one".to_vec()));
    // Expected empty: a non-empty value fails.
    assert!(!b.check_and_mutate("t", cam(b"", b"x"), None).await.unwrap());
    // Exact value: a mismatch fails and changes nothing, a match applies.
    assert!(!b
        .check_and_mutate("t", cam(b"two", b"x"), None)
        .await
        .unwrap());
    assert_eq!(value(&b, "r").await, Some(b"one".to_vec()));
    assert!(b
        .check_and_mutate("t", cam(b"one", b"two"), None)
        .await
        .unwrap());
    assert_eq!(value(&b, "r").await, Some(b"two".to_vec()));
    // Only the latest version counts, not an older equal one.
    assert!(!b
        .check_and_mutate("t", cam(b"one", b"x"), None)
        .await
        .unwrap());
    // Expected empty: an empty value passes.
    b.mutate_rows(
        "t",
        vec![rm("r", vec![put("a", "q", Some(9_000_000_000_000), b"")])],
    )
    .await
    .unwrap();
    assert!(b
        .check_and_mutate(
            "t",
            CheckAndMutate {
                mutations: vec![Mutation::DeleteColumn {
                    family: b"b".to_vec(),
                    qualifier: b"log".to_vec(),
                    timestamp: None
                }],
                ..cam(b"", b"")
            },
            None
        )
        .await
        .unwrap());
    assert_eq!(
        cells(b.get("t", b"r", &ReadSpec::default(), None).await.unwrap()).len(),
        1
    );
    // An absent column never equals a non-empty value.
    let absent = CheckAndMutate {
        row: b"other".to_vec(),
        ..cam(b"one", b"x")
    };
    assert!(!b.check_and_mutate("t", absent, None).await.unwrap());
}

#[tokio::test]
async fn deletes_remove_columns_up_to_a_timestamp_families_and_rows() {
    let emu = Emulator::start();
    let b = setup(&emu).await;
    let base = |row: &str| {
        rm(
            row,
            vec![
                put("a", "x", Some(1), b"1"),
                put("a", "x", Some(2), b"2"),
                put("a", "x", Some(3), b"3"),
                put("a", "y", Some(1), b"1"),
                put("a", "y", Some(5), b"5"),
                put("b", "z", Some(2), b"2"),
            ],
        )
    };
    let rows = ["col", "ver", "latest", "fam", "famts", "row", "rowts"];
    b.mutate_rows("t", rows.iter().map(|r| base(r)).collect())
        .await
        .unwrap();
    let del = |row: &str, m: Mutation| {
        let b = &b;
        let row = row.to_string();
        async move { b.mutate_rows("t", vec![rm(&row, vec![m])]).await.unwrap() }
    };
    let get = |row: &'static str| {
        let b = &b;
        async move {
            cells(
                b.get("t", row.as_bytes(), &all_versions(), None)
                    .await
                    .unwrap(),
            )
        }
    };
    del(
        "col",
        Mutation::DeleteColumn {
            family: b"a".to_vec(),
            qualifier: b"x".to_vec(),
            timestamp: Some(2),
        },
    )
    .await;
    assert_eq!(
        get("col").await,
        vec![
            c("a", "x", 3),
            c("a", "y", 5),
            c("a", "y", 1),
            c("b", "z", 2)
        ]
    );
    del(
        "ver",
        Mutation::DeleteVersion {
            family: b"a".to_vec(),
            qualifier: b"x".to_vec(),
            timestamp: Some(2),
        },
    )
    .await;
    assert_eq!(
        get("ver").await,
        vec![
            c("a", "x", 3),
            c("a", "x", 1),
            c("a", "y", 5),
            c("a", "y", 1),
            c("b", "z", 2)
        ]
    );
    del(
        "latest",
        Mutation::DeleteVersion {
            family: b"a".to_vec(),
            qualifier: b"x".to_vec(),
            timestamp: None,
        },
    )
    .await;
    assert_eq!(
        get("latest").await,
        vec![
            c("a", "x", 2),
            c("a", "x", 1),
            c("a", "y", 5),
            c("a", "y", 1),
            c("b", "z", 2)
        ]
    );
    del(
        "fam",
        Mutation::DeleteFamily {
            family: b"a".to_vec(),
            timestamp: None,
        },
    )
    .await;
    assert_eq!(get("fam").await, vec![c("b", "z", 2)]);
    del(
        "famts",
        Mutation::DeleteFamily {
            family: b"a".to_vec(),
            timestamp: Some(2),
        },
    )
    .await;
    assert_eq!(
        get("famts").await,
        vec![c("a", "x", 3), c("a", "y", 5), c("b", "z", 2)]
    );
    del("row", Mutation::DeleteRow { timestamp: None }).await;
    assert_eq!(get("row").await, vec![]);
    del("rowts", Mutation::DeleteRow { timestamp: Some(3) }).await;
    assert_eq!(get("rowts").await, vec![c("a", "y", 5)]);
    // A bounded family delete with no newer cells takes the whole family.
    del(
        "famts",
        Mutation::DeleteFamily {
            family: b"a".to_vec(),
            timestamp: Some(10),
        },
    )
    .await;
    assert_eq!(get("famts").await, vec![c("b", "z", 2)]);
    let err = b
        .mutate_rows(
            "t",
            vec![rm(
                "r",
                vec![Mutation::DeleteFamily {
                    family: b"zz".to_vec(),
                    timestamp: None,
                }],
            )],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoSuchFamily { .. }), "{err:?}");
}

/// Bigtable keeps no delete markers: unlike HBase, a put with a timestamp older than an
/// earlier delete is visible.
#[tokio::test]
async fn a_delete_does_not_mask_a_later_put_with_an_older_timestamp() {
    let emu = Emulator::start();
    let b = setup(&emu).await;
    b.mutate_rows("t", vec![rm("r", vec![put("a", "q", Some(100), b"v")])])
        .await
        .unwrap();
    b.mutate_rows(
        "t",
        vec![rm("r", vec![Mutation::DeleteRow { timestamp: None }])],
    )
    .await
    .unwrap();
    b.mutate_rows("t", vec![rm("r", vec![put("a", "q", Some(1), b"old")])])
        .await
        .unwrap();
    assert_eq!(
        cells(b.get("t", b"r", &all_versions(), None).await.unwrap()),
        vec![c("a", "q", 1)]
    );
}

#[tokio::test]
async fn tablet_operations_are_unsupported_and_regions_come_from_samples() {
    let emu = Emulator::start();
    let b = setup(&emu).await;
    for e in [
        b.flush("t").await.unwrap_err(),
        b.compact("t", true).await.unwrap_err(),
        b.split_region("t", 0, None).await.unwrap_err(),
    ] {
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains("Bigtable")),
            "{e:?}"
        );
    }
    assert_eq!(
        b.flush("nope").await.unwrap_err(),
        Error::TableNotFound("nope".into())
    );
    assert!(b.bucket_activity("t").is_none());
    let regions = b.regions("t").await.unwrap();
    assert!(!regions.is_empty());
    // The key ranges tile the table: open at both ends, each starting where the last ended.
    let mut expected_start = Vec::new();
    for (i, r) in regions.iter().enumerate() {
        assert_eq!(r.id, i as u64);
        assert_eq!(r.table, "t");
        let (start, end) = r.key_range.clone().expect("a key range");
        assert_eq!(start, expected_start, "{regions:?}");
        assert_eq!(end.is_empty(), i + 1 == regions.len(), "{regions:?}");
        expected_start = end;
    }
    b.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    assert_eq!(
        b.get("t", b"r", &ReadSpec::default(), None)
            .await
            .unwrap_err(),
        Error::ShuttingDown
    );
    assert_eq!(b.list_tables().await.unwrap_err(), Error::ShuttingDown);
}

async fn value(b: &kura_bigtable::BigtableBackend, row: &str) -> Option<Vec<u8>> {
    b.get("t", row.as_bytes(), &ReadSpec::default(), None)
        .await
        .unwrap()
        .map(|r| r.cells[0].value.clone())
}

#[tokio::test]
async fn a_row_named_twice_in_one_batch_applies_in_order_and_limits_hold() {
    let emu = Emulator::start();
    let b = setup(&emu).await;
    let batch = vec![
        rm("r", vec![put("a", "q", Some(5), b"v")]),
        rm("s", vec![put("a", "q", Some(5), b"v")]),
        rm(
            "r",
            vec![Mutation::DeleteColumn {
                family: b"a".to_vec(),
                qualifier: b"q".to_vec(),
                timestamp: None,
            }],
        ),
        rm("r", vec![put("a", "p", Some(5), b"w")]),
    ];
    b.mutate_rows("t", batch).await.unwrap();
    assert_eq!(
        cells(b.get("t", b"r", &all_versions(), None).await.unwrap()),
        vec![c("a", "p", 5)]
    );
    assert_eq!(
        cells(b.get("t", b"s", &all_versions(), None).await.unwrap()),
        vec![c("a", "q", 5)]
    );
    let long_key = "k".repeat(4097);
    for bad in [
        rm(&long_key, vec![put("a", "q", None, b"v")]),
        rm("", vec![put("a", "q", None, b"v")]),
        rm("r", vec![put("a", &"q".repeat(16385), None, b"v")]),
    ] {
        let err = b.mutate_rows("t", vec![bad]).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    }
}
