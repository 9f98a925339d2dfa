//! Reads against Google's Bigtable emulator. No test here calls ModifyColumnFamilies, so the
//! emulator never garbage-collects: every VERSIONS/TTL cut seen is Kura's own.

mod common;

use std::ops::Bound;
use std::sync::Arc;

use bigtable_rs::bigtable::BigTableConnection;
use bigtable_rs::google::bigtable::v2;
use common::{table, Emulator};
use kura_backend::{
    Backend, Cell, ColumnSelection, ColumnSpec, Mutation, ReadSpec, Row, RowFilter, RowMutation,
    ScanLimits, ScanRequest, ScanSpec, TimeRange,
};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn put(fam: &str, q: &str, ts: Option<i64>, v: &str) -> Mutation {
    Mutation::Put {
        family: fam.into(),
        qualifier: q.into(),
        timestamp: ts,
        value: v.into(),
    }
}

fn rm(row: &str, mutations: Vec<Mutation>) -> RowMutation {
    RowMutation {
        row: row.into(),
        mutations,
    }
}

fn versions(n: u32) -> ReadSpec {
    ReadSpec {
        max_versions: n,
        ..ReadSpec::default()
    }
}

fn values(row: &Row) -> Vec<(String, String, i64, String)> {
    row.cells
        .iter()
        .map(|c| {
            (
                String::from_utf8_lossy(&c.family).into_owned(),
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                c.timestamp,
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect()
}

fn keys(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|r| String::from_utf8_lossy(&r.key).into_owned())
        .collect()
}

fn scan(spec: ScanSpec, limit: Option<usize>, max_rows: usize) -> ScanRequest {
    ScanRequest {
        spec,
        limit,
        page: ScanLimits {
            max_rows,
            max_bytes: 4 << 20,
        },
    }
}

#[tokio::test]
async fn reads_return_at_most_the_family_versions_without_gc() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("two", 2, None), ("one", 1, None)]))
        .await
        .unwrap();
    let muts = (1..=5)
        .flat_map(|i| {
            [
                put("two", "q", Some(i * 1000), &format!("v{i}")),
                put("one", "q", Some(i * 1000), &format!("v{i}")),
            ]
        })
        .collect();
    b.mutate_rows("t", vec![rm("r", muts)]).await.unwrap();
    let row = b
        .get("t", b"r", &versions(10), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        values(&row),
        vec![
            ("one".into(), "q".into(), 5000, "v5".into()),
            ("two".into(), "q".into(), 5000, "v5".into()),
            ("two".into(), "q".into(), 4000, "v4".into()),
        ]
    );
    // The requested versions cap further; the newest inside a time range is returned.
    let read = ReadSpec {
        time_range: TimeRange { min: 0, max: 3500 },
        max_versions: 1,
        ..ReadSpec::default()
    };
    let row = b.get("t", b"r", &read, None).await.unwrap().unwrap();
    assert_eq!(
        values(&row),
        vec![
            ("one".into(), "q".into(), 3000, "v3".into()),
            ("two".into(), "q".into(), 3000, "v3".into()),
        ]
    );
}

#[tokio::test]
async fn reads_hide_cells_older_than_the_family_ttl() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("short", 3, Some(3600)), ("keep", 3, None)]))
        .await
        .unwrap();
    let old = now_ms() - 2 * 3600 * 1000;
    let recent = now_ms() - 60 * 1000;
    b.mutate_rows(
        "t",
        vec![
            rm(
                "r",
                vec![
                    put("short", "q", Some(old), "old"),
                    put("short", "q", Some(recent), "recent"),
                    put("keep", "q", Some(old), "kept"),
                ],
            ),
            rm("expired", vec![put("short", "q", Some(old), "old")]),
        ],
    )
    .await
    .unwrap();
    let row = b.get("t", b"r", &versions(3), None).await.unwrap().unwrap();
    assert_eq!(
        values(&row),
        vec![
            ("keep".into(), "q".into(), old, "kept".into()),
            ("short".into(), "q".into(), recent, "recent".into()),
        ]
    );
    assert_eq!(
        b.get("t", b"expired", &versions(3), None).await.unwrap(),
        None
    );
    let page = b.scan("t", scan(ScanSpec::all(), None, 100)).await.unwrap();
    assert_eq!(keys(&page.rows), vec!["r"]);
}

#[tokio::test]
async fn explicit_timestamps_round_trip_in_milliseconds() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("cf", 5, None)]))
        .await
        .unwrap();
    let stamps = [0, 1, 1_700_000_000_123, 9_223_372_036_854_775];
    let muts = stamps
        .iter()
        .map(|&t| put("cf", "q", Some(t), &t.to_string()))
        .collect();
    b.mutate_rows("t", vec![rm("r", muts)]).await.unwrap();
    let row = b.get("t", b"r", &versions(5), None).await.unwrap().unwrap();
    let got: Vec<i64> = row.cells.iter().map(|c| c.timestamp).collect();
    assert_eq!(got, vec![9_223_372_036_854_775, 1_700_000_000_123, 1, 0]);
    for c in &row.cells {
        assert_eq!(c.value, c.timestamp.to_string().into_bytes());
    }
    // Past what Bigtable stores: refused, nothing written.
    let err = b
        .mutate_rows("t", vec![rm("r", vec![put("cf", "q", Some(-5), "x")])])
        .await
        .unwrap_err();
    assert!(
        matches!(err, kura_backend::Error::InvalidArgument(_)),
        "{err:?}"
    );
    // No timestamp: the server's clock, in whole ms near ours.
    let before = now_ms();
    b.mutate_rows("t", vec![rm("s", vec![put("cf", "q", None, "now")])])
        .await
        .unwrap();
    let row = b.get("t", b"s", &versions(1), None).await.unwrap().unwrap();
    assert!((row.cells[0].timestamp - before).abs() < 60_000, "{row:?}");
}

#[tokio::test]
async fn scans_walk_both_ways_with_exact_limits_and_pages() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("cf", 1, None)]))
        .await
        .unwrap();
    let rows = (0..10)
        .map(|i| {
            rm(
                &format!("k{i}"),
                vec![put("cf", "q", Some(1000), &i.to_string())],
            )
        })
        .collect();
    b.mutate_rows("t", rows).await.unwrap();

    let page = b
        .scan("t", scan(ScanSpec::forward(b"k2", b"k6"), None, 100))
        .await
        .unwrap();
    assert_eq!(keys(&page.rows), vec!["k2", "k3", "k4", "k5"]);
    assert!(page.complete);

    let mut rev = ScanSpec::forward(b"k2", b"k6");
    rev.reversed = true;
    let page = b.scan("t", scan(rev.clone(), None, 100)).await.unwrap();
    assert_eq!(keys(&page.rows), vec!["k5", "k4", "k3", "k2"]);
    assert!(page.complete);

    // Exact limit, counted from the scan's own start in both directions.
    let page = b.scan("t", scan(rev.clone(), Some(2), 100)).await.unwrap();
    assert_eq!(keys(&page.rows), vec!["k5", "k4"]);
    assert!(!page.complete);
    let page = b
        .scan("t", scan(ScanSpec::all(), Some(3), 100))
        .await
        .unwrap();
    assert_eq!(keys(&page.rows), vec!["k0", "k1", "k2"]);
    let page = b
        .scan("t", scan(ScanSpec::all(), Some(10), 100))
        .await
        .unwrap();
    assert_eq!(page.rows.len(), 10);
    assert!(page.complete);

    // Pages of 3, resumed after the last row, reversed.
    let mut spec = ScanSpec::all();
    spec.reversed = true;
    let mut seen = Vec::new();
    loop {
        let page = b.scan("t", scan(spec.clone(), None, 3)).await.unwrap();
        seen.extend(keys(&page.rows));
        if page.complete {
            break;
        }
        spec = spec.resume_after(&page.rows.last().unwrap().key);
    }
    assert_eq!(
        seen,
        (0..10).rev().map(|i| format!("k{i}")).collect::<Vec<_>>()
    );

    // A byte budget stops early, but always returns a row.
    let req = ScanRequest {
        spec: ScanSpec::all(),
        limit: None,
        page: ScanLimits {
            max_rows: 100,
            max_bytes: 1,
        },
    };
    let page = b.scan("t", req).await.unwrap();
    assert_eq!(keys(&page.rows), vec!["k0"]);
    assert!(!page.complete);

    // Inclusive and exclusive bounds, and an empty range.
    let spec = ScanSpec {
        low: Bound::Excluded(b"k2".to_vec()),
        high: Bound::Included(b"k4".to_vec()),
        ..ScanSpec::all()
    };
    let page = b.scan("t", scan(spec, None, 100)).await.unwrap();
    assert_eq!(keys(&page.rows), vec!["k3", "k4"]);
    let page = b
        .scan("t", scan(ScanSpec::forward(b"k5", b"k1"), None, 100))
        .await
        .unwrap();
    assert!(page.rows.is_empty() && page.complete);
}

#[derive(Debug)]
struct EvenValues;

impl RowFilter for EvenValues {
    fn accept_key(&self, row: &[u8]) -> bool {
        row != b"k8"
    }

    fn accept_row(&self, _row: &[u8], cells: &mut Vec<Cell>) -> bool {
        cells.retain(|c| c.value[0] % 2 == 0);
        true
    }
}

#[tokio::test]
async fn row_filters_run_after_the_cells_come_back() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("cf", 1, None)]))
        .await
        .unwrap();
    let rows = (0..10)
        .map(|i| {
            rm(
                &format!("k{i}"),
                vec![put("cf", "q", Some(1000), &i.to_string())],
            )
        })
        .collect();
    b.mutate_rows("t", rows).await.unwrap();
    let filter: Arc<dyn RowFilter> = Arc::new(EvenValues);
    let mut spec = ScanSpec::all();
    spec.filter = Some(filter.clone());
    let page = b.scan("t", scan(spec.clone(), Some(3), 100)).await.unwrap();
    assert_eq!(keys(&page.rows), vec!["k0", "k2", "k4"]);
    assert!(!page.complete);
    let page = b
        .scan("t", scan(spec.resume_after(b"k4"), None, 100))
        .await
        .unwrap();
    assert_eq!(keys(&page.rows), vec!["k6"]);
    assert!(page.complete);
    let read = ReadSpec::default();
    assert!(b
        .get("t", b"k2", &read, Some(filter.clone()))
        .await
        .unwrap()
        .is_some());
    assert!(b
        .get("t", b"k3", &read, Some(filter.clone()))
        .await
        .unwrap()
        .is_none());
    assert!(b
        .get("t", b"k8", &read, Some(filter))
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn multi_get_answers_in_request_order_and_columns_select() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("a", 1, None), ("b", 1, None)]))
        .await
        .unwrap();
    b.mutate_rows(
        "t",
        vec![
            rm(
                "x",
                vec![
                    put("a", "1", Some(1), "x1"),
                    put("a", "2", Some(1), "x2"),
                    put("b", "1", Some(1), "xb"),
                ],
            ),
            rm("y", vec![put("a", "1", Some(1), "y1")]),
        ],
    )
    .await
    .unwrap();
    let got = b
        .multi_get(
            "t",
            vec![
                b"y".to_vec(),
                b"missing".to_vec(),
                b"x".to_vec(),
                b"y".to_vec(),
            ],
            &ReadSpec::default(),
        )
        .await
        .unwrap();
    let got: Vec<Option<String>> = got
        .iter()
        .map(|r| {
            r.as_ref()
                .map(|r| String::from_utf8_lossy(&r.key).into_owned())
        })
        .collect();
    assert_eq!(
        got,
        vec![Some("y".into()), None, Some("x".into()), Some("y".into())]
    );

    let read = ReadSpec {
        columns: ColumnSelection(vec![
            ColumnSpec::Column(b"a".to_vec(), b"2".to_vec()),
            ColumnSpec::Family(b"b".to_vec()),
        ]),
        ..ReadSpec::default()
    };
    let row = b.get("t", b"x", &read, None).await.unwrap().unwrap();
    assert_eq!(
        values(&row),
        vec![
            ("a".into(), "2".into(), 1, "x2".into()),
            ("b".into(), "1".into(), 1, "xb".into())
        ]
    );
    // A row without the selected columns is absent.
    assert_eq!(b.get("t", b"y", &read, None).await.unwrap(), None);
}

#[tokio::test]
async fn the_reserved_family_is_never_shown() {
    let emu = Emulator::start();
    let b = emu.backend().await;
    b.create_table(table("t", &[("cf", 1, None)]))
        .await
        .unwrap();
    b.mutate_rows("t", vec![rm("both", vec![put("cf", "q", Some(1), "v")])])
        .await
        .unwrap();
    // Write _kura cells the way the backend's own records would be.
    let conn = BigTableConnection::new_with_emulator(&emu.host, "p", "i", false, 1, None).unwrap();
    let mut bt = conn.client();
    for row in [&b"both"[..], b"only"] {
        bt.mutate_row(v2::MutateRowRequest {
            table_name: "projects/p/instances/i/tables/t".into(),
            row_key: row.to_vec(),
            mutations: vec![v2::Mutation {
                mutation: Some(v2::mutation::Mutation::SetCell(v2::mutation::SetCell {
                    family_name: "_kura".into(),
                    column_qualifier: b"idem/x".to_vec(),
                    timestamp_micros: 1000,
                    value: b"DONE".to_vec(),
                })),
            }],
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let row = b
        .get("t", b"both", &ReadSpec::default(), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(values(&row), vec![("cf".into(), "q".into(), 1, "v".into())]);
    assert_eq!(
        b.get("t", b"only", &ReadSpec::default(), None)
            .await
            .unwrap(),
        None
    );
    let page = b.scan("t", scan(ScanSpec::all(), None, 100)).await.unwrap();
    assert_eq!(keys(&page.rows), vec!["both"]);
}
