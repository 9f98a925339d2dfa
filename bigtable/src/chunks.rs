//! The ReadRows chunk merger: turns the `CellChunk`s of a `ReadRows` response stream back into
//! whole rows.
//!
//! Bigtable may split a row, and a cell's value, across any number of chunks and across
//! `ReadRowsResponse` messages, and may take back a row it started (`reset_row`). This module
//! owns that decoding; it keeps its state across messages (bigtable_rs's decoder does not,
//! which breaks on rows split across messages).
//!
//! # Invariants
//! 1. A row is emitted only on `commit_row`, with every cell it received since its start or
//!    its last `reset_row`, cells in the order they arrived.
//! 2. Committed row keys strictly increase (strictly decrease for a reversed read); anything
//!    else is a protocol error, as is a chunk that contradicts the state (a value continuation
//!    that names a column, a commit in the middle of a value, a stream ending mid-row).
//! 3. Family and qualifier carry over from the previous cell of the same row when a chunk does
//!    not set them; a new family always comes with a qualifier.

use bigtable_rs::google::bigtable::v2::read_rows_response::cell_chunk::RowStatus;
use bigtable_rs::google::bigtable::v2::read_rows_response::CellChunk;

/// One cell as Bigtable stores it (timestamp in microseconds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawCell {
    pub family: String,
    pub qualifier: Vec<u8>,
    pub timestamp_micros: i64,
    pub value: Vec<u8>,
}

/// A committed row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawRow {
    pub key: Vec<u8>,
    pub cells: Vec<RawCell>,
}

/// Where the merger is between chunks.
#[derive(Debug, PartialEq, Eq)]
enum State {
    /// Between rows: the next chunk starts a row.
    NewRow,
    /// Inside a row, between cells.
    RowInProgress,
    /// Inside a cell whose value continues in the next chunk.
    CellInProgress,
}

/// The decoder. Feed it every chunk of every message of one stream, in order, then call
/// [`ChunkMerger::finish`].
#[derive(Debug)]
pub struct ChunkMerger {
    reversed: bool,
    state: State,
    last_key: Option<Vec<u8>>,
    key: Vec<u8>,
    family: Option<String>,
    qualifier: Option<Vec<u8>>,
    timestamp: i64,
    value: Vec<u8>,
    cells: Vec<RawCell>,
}

fn protocol(msg: impl Into<String>) -> String {
    format!("ReadRows stream: {}", msg.into())
}

impl ChunkMerger {
    /// A merger for a stream whose rows come in ascending (or, if `reversed`, descending) order.
    pub fn new(reversed: bool) -> ChunkMerger {
        ChunkMerger {
            reversed,
            state: State::NewRow,
            last_key: None,
            key: Vec::new(),
            family: None,
            qualifier: None,
            timestamp: 0,
            value: Vec::new(),
            cells: Vec::new(),
        }
    }

    /// A merger for a stream resumed after `last_key` was committed (keys must move past it).
    pub fn resume(reversed: bool, last_key: Option<Vec<u8>>) -> ChunkMerger {
        ChunkMerger {
            last_key,
            ..ChunkMerger::new(reversed)
        }
    }

    /// Feed one chunk; returns the row it committed, if any. Errors describe the violation.
    pub fn push(&mut self, chunk: CellChunk) -> Result<Option<RawRow>, String> {
        if matches!(chunk.row_status, Some(RowStatus::ResetRow(true))) {
            if self.state == State::NewRow {
                return Err(protocol("reset_row outside a row"));
            }
            if !chunk.row_key.is_empty()
                || chunk.family_name.is_some()
                || chunk.qualifier.is_some()
                || !chunk.value.is_empty()
                || chunk.timestamp_micros != 0
            {
                return Err(protocol("reset_row chunk carries data"));
            }
            self.reset();
            return Ok(None);
        }
        match self.state {
            State::NewRow => {
                if chunk.row_key.is_empty() {
                    return Err(protocol("a new row without a row key"));
                }
                if let Some(last) = &self.last_key {
                    let ordered = if self.reversed {
                        chunk.row_key < *last
                    } else {
                        chunk.row_key > *last
                    };
                    if !ordered {
                        return Err(protocol("row keys out of order"));
                    }
                }
                if chunk.family_name.is_none() || chunk.qualifier.is_none() {
                    return Err(protocol("a new row without a family and qualifier"));
                }
                self.key = chunk.row_key.clone();
                self.start_cell(chunk)
            }
            State::RowInProgress => {
                if !chunk.row_key.is_empty() && chunk.row_key != self.key {
                    return Err(protocol("a different row key inside a row"));
                }
                if chunk.family_name.is_some() && chunk.qualifier.is_none() {
                    return Err(protocol("a new family without a qualifier"));
                }
                self.start_cell(chunk)
            }
            State::CellInProgress => {
                if (!chunk.row_key.is_empty() && chunk.row_key != self.key)
                    || chunk.family_name.is_some()
                    || chunk.qualifier.is_some()
                    || chunk.timestamp_micros != 0
                {
                    return Err(protocol("a value continuation that starts a new cell"));
                }
                self.value.extend_from_slice(&chunk.value);
                self.end_chunk(chunk.value_size, chunk.row_status)
            }
        }
    }

    /// The stream ended: it must not end inside a row.
    pub fn finish(&self) -> Result<(), String> {
        if self.state == State::NewRow {
            Ok(())
        } else {
            Err(protocol("the stream ended inside a row"))
        }
    }

    fn reset(&mut self) {
        self.state = State::NewRow;
        self.key.clear();
        self.family = None;
        self.qualifier = None;
        self.timestamp = 0;
        self.value.clear();
        self.cells.clear();
    }

    fn start_cell(&mut self, chunk: CellChunk) -> Result<Option<RawRow>, String> {
        if let Some(f) = chunk.family_name {
            self.family = Some(f);
        }
        if let Some(q) = chunk.qualifier {
            self.qualifier = Some(q);
        }
        self.timestamp = chunk.timestamp_micros;
        self.value = chunk.value;
        self.end_chunk(chunk.value_size, chunk.row_status)
    }

    fn end_chunk(
        &mut self,
        value_size: i32,
        status: Option<RowStatus>,
    ) -> Result<Option<RawRow>, String> {
        if value_size > 0 {
            if matches!(status, Some(RowStatus::CommitRow(true))) {
                return Err(protocol("commit_row in the middle of a value"));
            }
            self.state = State::CellInProgress;
            return Ok(None);
        }
        let (Some(family), Some(qualifier)) = (self.family.clone(), self.qualifier.clone()) else {
            return Err(protocol("a cell without a family or qualifier"));
        };
        self.cells.push(RawCell {
            family,
            qualifier,
            timestamp_micros: self.timestamp,
            value: std::mem::take(&mut self.value),
        });
        self.state = State::RowInProgress;
        if matches!(status, Some(RowStatus::CommitRow(true))) {
            let row = RawRow {
                key: std::mem::take(&mut self.key),
                cells: std::mem::take(&mut self.cells),
            };
            self.last_key = Some(row.key.clone());
            self.reset();
            return Ok(Some(row));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(key: &str, fam: &str, q: &str, ts: i64, v: &str) -> CellChunk {
        CellChunk {
            row_key: key.as_bytes().to_vec(),
            family_name: Some(fam.into()),
            qualifier: Some(q.as_bytes().to_vec()),
            timestamp_micros: ts,
            value: v.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    fn next(fam: Option<&str>, q: &str, ts: i64, v: &str) -> CellChunk {
        CellChunk {
            family_name: fam.map(Into::into),
            qualifier: Some(q.as_bytes().to_vec()),
            timestamp_micros: ts,
            value: v.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    fn commit(mut c: CellChunk) -> CellChunk {
        c.row_status = Some(RowStatus::CommitRow(true));
        c
    }

    /// Feed messages (each a list of chunks); collect committed rows.
    fn run(reversed: bool, messages: Vec<Vec<CellChunk>>) -> Result<Vec<RawRow>, String> {
        let mut m = ChunkMerger::new(reversed);
        let mut rows = Vec::new();
        for msg in messages {
            for c in msg {
                if let Some(r) = m.push(c)? {
                    rows.push(r);
                }
            }
        }
        m.finish()?;
        Ok(rows)
    }

    fn cell(f: &str, q: &str, ts: i64, v: &str) -> RawCell {
        RawCell {
            family: f.into(),
            qualifier: q.as_bytes().to_vec(),
            timestamp_micros: ts,
            value: v.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_row_split_across_two_messages_is_one_row() {
        let rows = run(
            false,
            vec![
                vec![first("k", "cf", "q", 1000, "v1")],
                vec![commit(next(None, "q2", 1000, "v2"))],
            ],
        )
        .unwrap();
        assert_eq!(
            rows,
            vec![RawRow {
                key: b"k".to_vec(),
                cells: vec![cell("cf", "q", 1000, "v1"), cell("cf", "q2", 1000, "v2")],
            }]
        );
    }

    #[test]
    fn a_value_split_across_chunks_and_messages_is_joined() {
        let mut a = first("k", "cf", "q", 2000, "hel");
        a.value_size = 11;
        let mut b = next(None, "", 0, "lo wo");
        b.qualifier = None;
        b.value_size = 11;
        let mut c = next(None, "", 0, "rld");
        c.qualifier = None;
        let c = commit(c);
        let rows = run(false, vec![vec![a], vec![b], vec![c]]).unwrap();
        assert_eq!(rows[0].cells, vec![cell("cf", "q", 2000, "hello world")]);
    }

    #[test]
    fn reset_row_discards_the_cells_received_so_far() {
        let reset = CellChunk {
            row_status: Some(RowStatus::ResetRow(true)),
            ..Default::default()
        };
        let rows = run(
            false,
            vec![
                vec![first("k", "cf", "q", 1000, "stale"), reset],
                vec![commit(first("k", "cf", "q", 3000, "fresh"))],
            ],
        )
        .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].cells, vec![cell("cf", "q", 3000, "fresh")]);
    }

    #[test]
    fn family_and_qualifier_carry_over_and_change() {
        let rows = run(
            false,
            vec![vec![
                first("a", "f1", "x", 2000, "1"),
                next(None, "x", 1000, "2"),
                commit(next(Some("f2"), "y", 1000, "3")),
                commit(first("b", "f1", "x", 1000, "4")),
            ]],
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].cells,
            vec![
                cell("f1", "x", 2000, "1"),
                cell("f1", "x", 1000, "2"),
                cell("f2", "y", 1000, "3")
            ]
        );
        assert_eq!(rows[1].key, b"b");
    }

    #[test]
    fn reversed_streams_require_descending_keys() {
        let ok = run(
            true,
            vec![vec![
                commit(first("b", "f", "q", 0, "")),
                commit(first("a", "f", "q", 0, "")),
            ]],
        );
        assert_eq!(ok.unwrap().len(), 2);
        let bad = run(
            false,
            vec![vec![
                commit(first("b", "f", "q", 0, "")),
                commit(first("a", "f", "q", 0, "")),
            ]],
        );
        assert!(bad.is_err());
    }

    #[test]
    fn protocol_violations_are_errors() {
        // A stream that ends inside a row.
        assert!(run(false, vec![vec![first("k", "f", "q", 0, "")]]).is_err());
        // A reset outside a row.
        let reset = CellChunk {
            row_status: Some(RowStatus::ResetRow(true)),
            ..Default::default()
        };
        assert!(run(false, vec![vec![reset]]).is_err());
        // A commit in the middle of a value.
        let mut c = commit(first("k", "f", "q", 0, "ab"));
        c.value_size = 5;
        assert!(run(false, vec![vec![c]]).is_err());
        // A new family without a qualifier.
        let mut n = next(Some("g"), "", 0, "");
        n.qualifier = None;
        assert!(run(false, vec![vec![first("k", "f", "q", 0, ""), commit(n)]]).is_err());
    }
}
