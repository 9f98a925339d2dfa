//! Golden hashes: Kura's HashTable batches of the cells a real HBase 2.x stored equal the
//! hashes that HBase's own `HashTable` wrote for them (`tests/fixtures/hbase-2x/`), batch for
//! batch, without a server in between: the cells come straight from the fixture's HFiles.
//!
//! What a user relies on:
//! 1. With the same region starts (`""`, `1` … `9`) and batch size (10 bytes), Kura's 101 batch
//!    keys and MD5s are HBase's.
//! 2. Batches of several rows (a batch size the fixture does not exercise) hash the
//!    concatenation of their cells' `row | family | qualifier | ts (LE) | value`, computed
//!    here independently of Kura's hasher.

use kura::copy::hash::BatchHasher;
use kura_backend::{Cell, Row};
use kura_formats::hashtable::{HashDir, EMPTY_MD5};
use kura_formats::hfile::{HFile, TYPE_PUT};
use md5::{Digest, Md5};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hbase-2x")
}

/// The fixture table's rows, in key order, every cell from the nine HFiles.
fn fixture_rows() -> Vec<Row> {
    let mut cells = Vec::new();
    for entry in std::fs::read_dir(fixtures().join("hfiles")).expect("hfiles") {
        let f = HFile::open(&entry.expect("entry").path()).expect("an HFile");
        cells.extend(f.cells().expect("cells"));
    }
    assert_eq!(cells.len(), 100);
    // HBase cell order: row, family, qualifier ascending, timestamp descending.
    cells.sort_by(|a, b| {
        (
            &a.row,
            &a.family,
            &a.qualifier,
            std::cmp::Reverse(a.timestamp),
        )
            .cmp(&(
                &b.row,
                &b.family,
                &b.qualifier,
                std::cmp::Reverse(b.timestamp),
            ))
    });
    let mut rows: Vec<Row> = Vec::new();
    for c in cells {
        assert_eq!(c.kind, TYPE_PUT);
        let cell = Cell {
            family: c.family,
            qualifier: c.qualifier,
            timestamp: c.timestamp,
            value: c.value,
        };
        match rows.last_mut() {
            Some(r) if r.key == c.row => r.cells.push(cell),
            _ => rows.push(Row {
                key: c.row,
                cells: vec![cell],
            }),
        }
    }
    rows
}

/// HBase's batches from the fixture's hash files.
fn hbase_batches() -> Vec<(Vec<u8>, [u8; 16])> {
    let dir = HashDir::open(fixtures().join("hashtable")).expect("the fixture hash dir");
    let mut b = dir.batches();
    let mut out = Vec::new();
    while let Some(x) = b.next().expect("a batch") {
        out.push(x);
    }
    out
}

/// Kura's batches of `rows` over regions starting at `starts` (sorted, first empty).
fn kura_batches(rows: &[Row], starts: &[Vec<u8>], target: u64) -> Vec<(Vec<u8>, [u8; 16])> {
    let mut out = Vec::new();
    for (i, start) in starts.iter().enumerate() {
        let end = starts.get(i + 1);
        let mut h = BatchHasher::new(start, target);
        for r in rows
            .iter()
            .filter(|r| r.key >= *start && end.is_none_or(|e| r.key < *e))
        {
            if let Some(b) = h.add_row(r) {
                out.push((b.start, b.digest));
            }
        }
        let b = h.finish();
        out.push((b.start, b.digest));
    }
    out
}

fn fixture_region_starts() -> Vec<Vec<u8>> {
    std::iter::once(Vec::new())
        .chain((1..=9).map(|i: u8| vec![b'0' + i]))
        .collect()
}

#[test]
fn kuras_batches_of_the_fixture_cells_equal_hbases_hashtable_batch_for_batch() {
    let rows = fixture_rows();
    let ours = kura_batches(&rows, &fixture_region_starts(), 10);
    let theirs = hbase_batches();
    assert_eq!(theirs.len(), 101);
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(&theirs) {
        assert_eq!(
            o,
            t,
            "batch {:?}",
            String::from_utf8_lossy(&t.0) //
        );
    }
    // The first region holds no row: one batch, the MD5 of nothing.
    assert_eq!(theirs[0], (Vec::new(), EMPTY_MD5));
}

/// An independent reference: HashTable's loop written out over the rows, one region.
fn reference_batches(rows: &[Row], target: u64) -> Vec<(Vec<u8>, [u8; 16], usize)> {
    let mut out = Vec::new();
    let (mut key, mut bytes, mut size, mut n) = (Vec::new(), Vec::<u8>::new(), 0u64, 0usize);
    for r in rows {
        if n > 0 && size >= target {
            out.push((key.clone(), Md5::digest(&bytes).into(), n));
            key = r.key.clone();
            bytes.clear();
            size = 0;
            n = 0;
        }
        for c in &r.cells {
            let before = bytes.len();
            bytes.extend_from_slice(&r.key);
            bytes.extend_from_slice(&c.family);
            bytes.extend_from_slice(&c.qualifier);
            bytes.extend_from_slice(&c.timestamp.to_le_bytes());
            bytes.extend_from_slice(&c.value);
            size += (bytes.len() - before) as u64;
        }
        n += 1;
    }
    out.push((key, Md5::digest(&bytes).into(), n));
    out
}

#[test]
fn a_batch_of_several_rows_hashes_the_concatenation_of_their_cells() {
    let rows = fixture_rows();
    // Rows are 20–22 bytes: a 100-byte batch closes after 5 rows.
    let expected = reference_batches(&rows, 100);
    assert!(
        expected.iter().any(|(_, _, n)| *n >= 5),
        "multi-row batches"
    );
    let ours = kura_batches(&rows, &[Vec::new()], 100);
    let expected: Vec<(Vec<u8>, [u8; 16])> = expected.into_iter().map(|(k, d, _)| (k, d)).collect();
    assert_eq!(ours, expected);
    assert_eq!(ours[0].0, b"", "the first batch starts at the region start");
    assert_eq!(ours[1].0, rows[5].key, "the second at the sixth row");
}
