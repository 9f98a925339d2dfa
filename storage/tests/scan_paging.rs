//! Scans: bounds, reversed order, limits and resuming, across memtable and segments.
mod common;
use common::*;
use kura_storage::*;
use std::ops::Bound;

fn fill(s: &mut RegionStore, n: usize) {
    for i in 0..n {
        mutate(
            s,
            &format!("row{i:04}"),
            vec![put("one", "q", Some(1), &i.to_string())],
        );
        if i % 37 == 0 {
            s.flush().unwrap();
        }
    }
    // Deleted rows must not appear.
    mutate(
        s,
        "row0005",
        vec![Mutation::DeleteRow {
            timestamp: Some(10),
        }],
    );
}

fn keys(page: &ScanPage) -> Vec<String> {
    page.rows
        .iter()
        .map(|r| String::from_utf8_lossy(&r.key).into_owned())
        .collect()
}

fn all_pages(s: &RegionStore, mut spec: ScanSpec, max_rows: usize) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let page = s
            .scan(
                &spec,
                ScanLimits {
                    max_rows,
                    max_bytes: usize::MAX,
                },
            )
            .unwrap();
        assert!(page.rows.len() <= max_rows);
        out.extend(keys(&page));
        if page.complete {
            return out;
        }
        let last = page
            .rows
            .last()
            .expect("an incomplete page has rows")
            .key
            .clone();
        spec = spec.resume_after(&last);
    }
}

#[test]
fn forward_scan_respects_bounds_and_skips_deleted_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    fill(&mut s, 100);
    let page = s
        .scan(
            &ScanSpec::forward(b"row0003", b"row0008"),
            ScanLimits::default(),
        )
        .unwrap();
    assert_eq!(
        keys(&page),
        vec!["row0003", "row0004", "row0006", "row0007"]
    );
    assert!(page.complete);
}

#[test]
fn paged_scans_resume_exactly_forward_and_reversed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    fill(&mut s, 200);
    let mut expected: Vec<String> = (0..200)
        .filter(|i| *i != 5)
        .map(|i| format!("row{i:04}"))
        .collect();
    assert_eq!(all_pages(&s, ScanSpec::all(), 7), expected);
    expected.reverse();
    let rev = ScanSpec {
        reversed: true,
        ..ScanSpec::all()
    };
    assert_eq!(all_pages(&s, rev, 7), expected);
}

#[test]
fn reversed_scan_honours_inclusive_and_exclusive_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    fill(&mut s, 20);
    let spec = ScanSpec {
        low: Bound::Excluded(b"row0010".to_vec()),
        high: Bound::Included(b"row0013".to_vec()),
        reversed: true,
        ..ScanSpec::all()
    };
    let page = s.scan(&spec, ScanLimits::default()).unwrap();
    assert_eq!(keys(&page), vec!["row0013", "row0012", "row0011"]);
}

#[test]
fn byte_limit_still_returns_one_row_and_complete_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    fill(&mut s, 3);
    let page = s
        .scan(
            &ScanSpec::all(),
            ScanLimits {
                max_rows: 10,
                max_bytes: 1,
            },
        )
        .unwrap();
    assert_eq!(page.rows.len(), 1);
    assert!(!page.complete);
    let page = s
        .scan(
            &ScanSpec::all(),
            ScanLimits {
                max_rows: 3,
                max_bytes: usize::MAX,
            },
        )
        .unwrap();
    assert_eq!(page.rows.len(), 3);
    assert!(page.complete, "no row follows the last one");
}

#[derive(Debug)]
struct EvenOnly;

impl RowFilter for EvenOnly {
    fn accept_key(&self, row: &[u8]) -> bool {
        row.last().is_some_and(|b| b % 2 == 0)
    }
    fn accept_row(&self, _row: &[u8], cells: &mut Vec<Cell>) -> bool {
        for c in cells.iter_mut() {
            c.value.clear();
        }
        true
    }
}

#[test]
fn filter_hook_skips_rows_and_rewrites_cells() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    fill(&mut s, 10);
    let spec = ScanSpec {
        filter: Some(std::sync::Arc::new(EvenOnly)),
        ..ScanSpec::all()
    };
    let page = s.scan(&spec, ScanLimits::default()).unwrap();
    assert_eq!(
        keys(&page),
        vec!["row0000", "row0002", "row0004", "row0006", "row0008"]
    );
    assert!(page
        .rows
        .iter()
        .all(|r| r.cells.iter().all(|c| c.value.is_empty())));
}

#[test]
fn zero_row_limit_returns_nothing_and_says_whether_rows_remain() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let empty = s
        .scan(
            &ScanSpec::all(),
            ScanLimits {
                max_rows: 0,
                max_bytes: usize::MAX,
            },
        )
        .unwrap();
    assert!(empty.rows.is_empty() && empty.complete);
    fill(&mut s, 2);
    let page = s
        .scan(
            &ScanSpec::all(),
            ScanLimits {
                max_rows: 0,
                max_bytes: usize::MAX,
            },
        )
        .unwrap();
    assert!(page.rows.is_empty());
    assert!(!page.complete);
}
