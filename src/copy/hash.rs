//! HBase `HashTable`'s batch hashes (`shared/HBASE_FORMATS.md` §6.2 and §6.3), so that both ends
//! of a copy can be compared without moving the data twice.
//!
//! Per cell, in HBase cell order, MD5 is fed `row | family | qualifier | timestamp as 8 bytes
//! little-endian | value`: no lengths, separators, type byte or tags. A batch starts at the
//! region start key (empty: `kura copy` hashes a table as one region) and closes when the
//! *next* row arrives while the batch already holds at least `target` bytes, each cell counting
//! `rowLen + famLen + qualLen + 8 + valueLen`; the next batch starts at that row. The last batch
//! is always emitted, even empty (MD5 of nothing, `d41d8cd98f00b204e9800998ecf8427e`).
//!
//! # Invariants
//! 1. A batch ends only at a row boundary: every row's cells are in exactly one batch.
//! 2. Equal cell sequences give equal batch keys and digests, whatever the page sizes they were
//!    read in (the hasher sees rows, not pages).

use kura_backend::Row;
use md5::{Digest, Md5};

/// HashTable's default `targetBatchSize`, bytes.
pub const DEFAULT_BATCH_BYTES: u64 = 8000;

/// One closed batch: the rows from `start` (inclusive) up to the next batch's start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchHash {
    /// The batch key: the region start (empty) for the first batch, else its first row.
    pub start: Vec<u8>,
    /// MD5 of the batch's cells (§6.3).
    pub digest: [u8; 16],
    /// Rows and cells hashed into it (for reports, not part of HashTable's output).
    pub rows: u64,
    pub cells: u64,
}

impl BatchHash {
    /// The digest in lower-case hex, as HBase prints it.
    pub fn hex(&self) -> String {
        hex(&self.digest)
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Feeds rows, in key order, into HashTable's batches.
pub struct BatchHasher {
    target: u64,
    start: Vec<u8>,
    size: u64,
    md5: Md5,
    rows: u64,
    cells: u64,
    ignore_timestamps: bool,
}

impl BatchHasher {
    /// A hasher over one region starting at `region_start`, closing batches past `target` bytes.
    pub fn new(region_start: &[u8], target: u64) -> BatchHasher {
        BatchHasher {
            target,
            start: region_start.to_vec(),
            size: 0,
            md5: Md5::new(),
            rows: 0,
            cells: 0,
            ignore_timestamps: false,
        }
    }

    /// Leaves the timestamps out of the MD5 (HashTable's `--ignoreTimestamps`); the 8 bytes
    /// still count towards the batch size.
    pub fn ignoring_timestamps(mut self, ignore: bool) -> BatchHasher {
        self.ignore_timestamps = ignore;
        self
    }

    /// Adds one whole row (rows must come in increasing key order, each once); returns the
    /// batch this row closed, if it closed one.
    pub fn add_row(&mut self, row: &Row) -> Option<BatchHash> {
        let closed = if self.rows > 0 && self.size >= self.target {
            Some(self.take(row.key.clone()))
        } else {
            None
        };
        for c in &row.cells {
            self.md5.update(&row.key);
            self.md5.update(&c.family);
            self.md5.update(&c.qualifier);
            if !self.ignore_timestamps {
                self.md5.update(c.timestamp.to_le_bytes());
            }
            self.md5.update(&c.value);
            self.size +=
                (row.key.len() + c.family.len() + c.qualifier.len() + 8 + c.value.len()) as u64;
            self.cells += 1;
        }
        self.rows += 1;
        closed
    }

    /// The last batch (emitted even when empty, as at a region's end).
    pub fn finish(mut self) -> BatchHash {
        self.take(Vec::new())
    }

    fn take(&mut self, next_start: Vec<u8>) -> BatchHash {
        let md5 = std::mem::replace(&mut self.md5, Md5::new());
        let out = BatchHash {
            start: std::mem::replace(&mut self.start, next_start),
            digest: md5.finalize().into(),
            rows: self.rows,
            cells: self.cells,
        };
        self.size = 0;
        self.rows = 0;
        self.cells = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kura_backend::Cell;

    fn row(key: &str, cells: &[(&str, &str, i64, &str)]) -> Row {
        Row {
            key: key.as_bytes().to_vec(),
            cells: cells
                .iter()
                .map(|(f, q, ts, v)| Cell {
                    family: f.as_bytes().to_vec(),
                    qualifier: q.as_bytes().to_vec(),
                    timestamp: *ts,
                    value: v.as_bytes().to_vec(),
                })
                .collect(),
        }
    }

    #[test]
    fn one_cell_hashes_to_hbase_hashtable_fixture_digest() {
        // HBASE_FORMATS.md §9 (a): row `1`, cf:a @ 1609291279317 = value1, checked against a
        // real HashTable output file.
        let mut h = BatchHasher::new(b"1", 10);
        assert!(h
            .add_row(&row("1", &[("cf", "a", 1609291279317, "value1")]))
            .is_none());
        let b = h.finish();
        assert_eq!(b.start, b"1");
        assert_eq!(b.hex(), "89f1afb9350445279bee733c46cbd446");
        assert_eq!((b.rows, b.cells), (1, 1));
    }

    #[test]
    fn ignoring_timestamps_leaves_them_out_of_the_md5_but_not_the_size() {
        let mut h = BatchHasher::new(b"", 14).ignoring_timestamps(true);
        assert!(h.add_row(&row("a", &[("cf", "q", 5, "v1")])).is_none());
        let first = h
            .add_row(&row("b", &[("cf", "q", 9, "v2")]))
            .expect("14 bytes close it");
        // printf 'acfqv1' | md5sum
        assert_eq!(first.hex(), "e2bd0d2dae72d838614cd13ae6209093");
    }

    #[test]
    fn an_empty_region_emits_one_batch_with_the_md5_of_nothing() {
        let b = BatchHasher::new(b"", DEFAULT_BATCH_BYTES).finish();
        assert_eq!(b.start, b"");
        assert_eq!(b.hex(), "d41d8cd98f00b204e9800998ecf8427e");
    }

    #[test]
    fn batches_close_at_the_row_that_arrives_past_the_target_size() {
        // Each cell is 1 + 2 + 1 + 8 + 2 = 14 bytes; target 20: a batch closes once it holds
        // two cells, when the next row arrives.
        let mut h = BatchHasher::new(b"", 20);
        assert!(h.add_row(&row("a", &[("cf", "q", 5, "v1")])).is_none());
        assert!(h.add_row(&row("b", &[("cf", "q", 5, "v2")])).is_none());
        let first = h
            .add_row(&row("c", &[("cf", "q", 5, "v3")]))
            .expect("closed");
        let last = h.finish();
        assert_eq!(
            first.start, b"",
            "the first batch starts at the region start"
        );
        assert_eq!((first.rows, first.cells), (2, 2));
        assert_eq!(last.start, b"c");
        // printf "acfq\x05\0\0\0\0\0\0\0v1bcfq\x05\0\0\0\0\0\0\0v2" | md5sum
        assert_eq!(first.hex(), "cdc52e38776adfff5e5219c85e00fd20");
        // 'ccfq' + 05 00 00 00 00 00 00 00 + 'v3'
        assert_eq!(last.hex(), "37507fc37910ed6859a7b98e141e5de0");
    }
}
