//! HBase PerformanceEvaluation operations over the REST API.
//!
//! Table `TestTable`, family `info`, qualifier `0`, row keys zero-padded to 26 decimal digits
//! (as `hbase pe` does). Read, scan, multi-get and check-and-put runs first load `--rows` rows.
//!
//! # Invariants
//! 1. Reads and scans only touch keys `0..rows`, all written by the load phase, so a 404 or a
//!    short scan is counted as an error (`invalid` for a short scan).
//! 2. A prefix scan asks for the 100 keys sharing their first 24 digits, a reverse scan for the
//!    100 keys from a start downwards, a filtered scan for the keys ending in 0 or 5 of a
//!    500-key range with only column `info:0` (`RowFilter` + `QualifierFilter`): each answer
//!    must hold exactly those rows, in order (and, filtered, exactly that one column).
//! 3. checkAndPut compares column `info:cas` with the row key, which the load phase wrote and
//!    every put writes again, so every check must pass: a 304 is an error.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng;

use super::{recreate_table, Op, Params, Worker, WorkloadName};
use crate::cellset::{self, CellRef};
use crate::client::Conn;
use crate::error::Result;
use crate::stats::{Outcome, Recorder};

const TABLE: &str = "TestTable";
const COL: &[u8] = b"info:0";
const CAS_COL: &[u8] = b"info:cas";
const COUNTER_COL: &[u8] = b"info:counter";

/// The filtered scan's filter (Thrift filter language): rows whose key ends in 0 or 5, column
/// `info:0` only.
pub const FILTER: &str = "RowFilter(=,'regexstring:[05]$') AND QualifierFilter(=,'binary:0')";

/// [`FILTER`] percent-encoded for the query string.
const FILTER_ENCODED: &str =
    "RowFilter%28%3D%2C%27regexstring%3A%5B05%5D%24%27%29%20AND%20QualifierFilter%28%3D%2C%27binary%3A0%27%29";

/// Format key number `i` the way PE does.
pub fn pe_key(i: u64) -> String {
    format!("{i:026}")
}

/// A PE workload.
pub struct Pe {
    name: WorkloadName,
    rows: u64,
    value_size: usize,
    multiget: usize,
    regions: Option<u32>,
    no_load: bool,
    load_batch: usize,
    seq: AtomicU64,
}

impl Pe {
    /// A PE workload from the CLI knobs.
    pub fn new(name: WorkloadName, p: &Params) -> Pe {
        Pe {
            name,
            rows: p.rows.max(1),
            value_size: p.value_size,
            multiget: p.multiget.max(1),
            regions: p.regions,
            no_load: p.no_load,
            load_batch: p.load_batch.max(1),
            seq: AtomicU64::new(0),
        }
    }

    /// Key space size.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn needs_data(&self) -> bool {
        use WorkloadName as W;
        matches!(
            self.name,
            W::SequentialRead
                | W::RandomRead
                | W::MultiGet
                | W::Scan10
                | W::Scan100
                | W::Scan1000
                | W::CheckAndPut
                | W::PrefixScan
                | W::ReverseScan
                | W::FilteredScan
        )
    }

    /// Create `TestTable` (unless `--no-load`).
    pub async fn prepare(&self, conn: &mut Conn) -> Result<()> {
        if self.no_load {
            return Ok(());
        }
        recreate_table(conn, TABLE, &["info"], self.regions).await
    }

    /// Rows to load before the run.
    pub fn load_rows(&self) -> u64 {
        if self.needs_data() && !self.no_load {
            self.rows
        } else {
            0
        }
    }

    /// Rows per load request.
    pub fn batch(&self) -> usize {
        self.load_batch
    }

    /// One multi-row PUT for keys `from..to`.
    pub fn load_batch(&self, w: &mut Worker, from: u64, to: u64) -> (String, String) {
        let mut body = String::from("{\"Row\":[");
        for i in from..to {
            if i > from {
                body.push(',');
            }
            let key = pe_key(i);
            let value = w.value(self.value_size).to_vec();
            let cells = [
                CellRef {
                    column: COL,
                    value: &value,
                },
                CellRef {
                    column: CAS_COL,
                    value: key.as_bytes(),
                },
            ];
            cellset::push_row(&mut body, key.as_bytes(), &cells);
        }
        body.push_str("]}");
        (format!("/{TABLE}/$multiput"), body)
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) % self.rows
    }

    /// One PE operation.
    pub async fn op(&self, w: &mut Worker, conn: &mut Conn, rec: &mut Recorder) -> Op {
        use WorkloadName as W;
        match self.name {
            W::SequentialWrite | W::RandomWrite => {
                let i = if self.name == W::SequentialWrite {
                    self.next_seq()
                } else {
                    w.rng.gen_range(0..self.rows)
                };
                let key = pe_key(i);
                let value = w.value(self.value_size).to_vec();
                let body = cellset::one_row(
                    key.as_bytes(),
                    &[CellRef {
                        column: COL,
                        value: &value,
                    }],
                );
                let r = conn.put_json(&format!("/{TABLE}/{key}"), body).await;
                Op::judged("put", &r, &[200])
            }
            W::SequentialRead | W::RandomRead => {
                let i = if self.name == W::SequentialRead {
                    self.next_seq()
                } else {
                    w.rng.gen_range(0..self.rows)
                };
                let r = conn.get(&format!("/{TABLE}/{}/info:0", pe_key(i))).await;
                Op::judged("get", &r, &[200])
            }
            W::MultiGet => {
                let want = self.multiget.min(self.rows as usize);
                let mut keys = HashSet::with_capacity(want);
                while keys.len() < want {
                    keys.insert(w.rng.gen_range(0..self.rows));
                }
                let mut path = format!("/{TABLE}/multiget");
                for (n, k) in keys.iter().enumerate() {
                    let sep = if n == 0 { '?' } else { '&' };
                    let _ = write!(path, "{sep}row={}", pe_key(*k));
                }
                let r = conn.get(&path).await;
                let expected: HashSet<String> = keys.iter().map(|k| pe_key(*k)).collect();
                check_keys("multiget", r, |got| {
                    got.len() == expected.len() && got.iter().all(|k| expected.contains(k))
                })
            }
            W::Scan10 | W::Scan100 | W::Scan1000 => {
                let (kind, n) = match self.name {
                    W::Scan10 => ("scan10", 10),
                    W::Scan100 => ("scan100", 100),
                    _ => ("scan1000", 1000),
                };
                let start = w.rng.gen_range(0..=self.rows.saturating_sub(n));
                let expect = n.min(self.rows - start);
                let r = conn
                    .get(&format!("/{TABLE}/*?startrow={}&limit={n}", pe_key(start)))
                    .await;
                // Every key from `start` on exists (the load wrote 0..rows): exactly the next
                // `expect` keys, in order.
                check_keys(kind, r, |got| {
                    got.len() as u64 == expect
                        && got
                            .iter()
                            .zip(start..)
                            .all(|(k, i)| k.as_str() == pe_key(i))
                })
            }
            W::PrefixScan => {
                // Keys sharing their first 24 digits: the block of 100 around a random key.
                let block = w.rng.gen_range(0..self.rows) / 100 * 100;
                let expect: Vec<String> =
                    (block..(block + 100).min(self.rows)).map(pe_key).collect();
                let prefix = &expect[0][..24];
                let r = conn.get(&format!("/{TABLE}/{prefix}*")).await;
                check_keys("prefix_scan", r, |got| got == expect.as_slice())
            }
            W::ReverseScan => {
                let start = w.rng.gen_range(0..self.rows);
                let expect: Vec<String> = (start.saturating_sub(99)..=start)
                    .rev()
                    .map(pe_key)
                    .collect();
                let r = conn
                    .get(&format!(
                        "/{TABLE}/*?startrow={}&reversed=true&limit=100",
                        pe_key(start)
                    ))
                    .await;
                check_keys("reverse_scan", r, |got| got == expect.as_slice())
            }
            W::FilteredScan => {
                let start = w.rng.gen_range(0..self.rows);
                let end = (start + 500).min(self.rows);
                let expect: Vec<String> = (start..end).filter(|i| i % 5 == 0).map(pe_key).collect();
                let r = conn
                    .get(&format!(
                        "/{TABLE}/*?startrow={}&endrow={}&filter={FILTER_ENCODED}",
                        pe_key(start),
                        pe_key(end)
                    ))
                    .await;
                check_cells("filtered_scan", r, |rows| filtered_answer_ok(rows, &expect))
            }
            W::Increment => {
                let key = pe_key(w.rng.gen_range(0..self.rows));
                let body = cellset::one_row(
                    key.as_bytes(),
                    &[CellRef {
                        column: COUNTER_COL,
                        value: b"1",
                    }],
                );
                let r = conn
                    .put_json(&format!("/{TABLE}/{key}?check=increment"), body)
                    .await;
                Op::judged("increment", &r, &[200])
            }
            W::CheckAndPut => {
                let key = pe_key(w.rng.gen_range(0..self.rows));
                let cells = [
                    CellRef {
                        column: CAS_COL,
                        value: key.as_bytes(),
                    },
                    CellRef {
                        column: CAS_COL,
                        value: key.as_bytes(),
                    },
                ];
                let body = cellset::one_row(key.as_bytes(), &cells);
                let r = conn
                    .put_json(&format!("/{TABLE}/{key}?check=put"), body)
                    .await;
                // One attempt, never retried: a 304 is both a conflict and a loop given up.
                match &r {
                    Ok(resp) if resp.status == 304 => {
                        rec.count("cas_miss", 1);
                        rec.cas.conflict();
                        rec.cas.finished(1, false);
                    }
                    Ok(resp) if resp.status == 200 => rec.cas.finished(0, true),
                    _ => {}
                }
                Op::judged("check_and_put", &r, &[200])
            }
            _ => Op {
                kind: "unsupported",
                outcome: Outcome::Invalid,
                rows: 0,
            },
        }
    }
}

/// Judge a multi-row answer: 200 whose row keys (decoded) satisfy `ok`.
pub fn check_keys(
    kind: &'static str,
    r: Result<crate::client::Resp>,
    ok: impl FnOnce(&[String]) -> bool,
) -> Op {
    let outcome = super::judge(&r, &[200]);
    let resp = match (outcome, r) {
        (Outcome::Ok, Ok(resp)) => resp,
        (o, _) => {
            return Op {
                kind,
                outcome: o,
                rows: 0,
            }
        }
    };
    let keys: Option<Vec<String>> = cellset::row_keys(&resp.body).ok().and_then(|keys| {
        keys.iter()
            .map(|k| {
                cellset::decode_key(k)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
            })
            .collect()
    });
    match keys {
        Some(keys) => Op {
            kind,
            outcome: if ok(&keys) {
                Outcome::Ok
            } else {
                Outcome::Invalid
            },
            rows: keys.len() as u64,
        },
        None => Op {
            kind,
            outcome: Outcome::Invalid,
            rows: 0,
        },
    }
}

/// Whether a filtered scan answered exactly the `expect` keys, in order, each with the one
/// column `info:0`.
pub fn filtered_answer_ok(rows: &[cellset::RowCells], expect: &[String]) -> bool {
    rows.len() == expect.len()
        && rows.iter().zip(expect).all(|(r, k)| {
            r.key == k.as_bytes() && r.cells.len() == 1 && r.cells[0].0.as_slice() == COL
        })
}

/// Judge a multi-row answer by its decoded rows and cells: 200 whose rows satisfy `ok`.
pub fn check_cells(
    kind: &'static str,
    r: Result<crate::client::Resp>,
    ok: impl FnOnce(&[cellset::RowCells]) -> bool,
) -> Op {
    let outcome = super::judge(&r, &[200]);
    let resp = match (outcome, r) {
        (Outcome::Ok, Ok(resp)) => resp,
        (o, _) => {
            return Op {
                kind,
                outcome: o,
                rows: 0,
            }
        }
    };
    match cellset::rows_with_cells(&resp.body) {
        Ok(rows) => Op {
            kind,
            outcome: if ok(&rows) {
                Outcome::Ok
            } else {
                Outcome::Invalid
            },
            rows: rows.len() as u64,
        },
        Err(_) => Op {
            kind,
            outcome: Outcome::Invalid,
            rows: 0,
        },
    }
}

/// Judge a multi-row answer: 200 with exactly `expect` rows.
pub fn count_rows(kind: &'static str, r: Result<crate::client::Resp>, expect: u64) -> Op {
    check_keys(kind, r, |keys| keys.len() as u64 == expect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoded_filter_decodes_to_the_filter() {
        let decoded = percent_encoding::percent_decode_str(FILTER_ENCODED)
            .decode_utf8()
            .expect("utf-8");
        assert_eq!(decoded, FILTER);
    }

    fn row(key: &str, cols: &[&[u8]]) -> cellset::RowCells {
        cellset::RowCells {
            key: key.as_bytes().to_vec(),
            cells: cols.iter().map(|c| (c.to_vec(), b"v".to_vec())).collect(),
        }
    }

    #[test]
    fn a_filtered_scan_with_a_missing_row_or_an_extra_column_is_flagged() {
        let expect = vec![pe_key(5), pe_key(10)];
        let good = vec![row(&pe_key(5), &[COL]), row(&pe_key(10), &[COL])];
        assert!(filtered_answer_ok(&good, &expect));
        assert!(!filtered_answer_ok(&good[..1], &expect));
        let extra_col = vec![row(&pe_key(5), &[COL, CAS_COL]), row(&pe_key(10), &[COL])];
        assert!(!filtered_answer_ok(&extra_col, &expect));
        let unfiltered = vec![
            row(&pe_key(5), &[COL]),
            row(&pe_key(6), &[COL]),
            row(&pe_key(10), &[COL]),
        ];
        assert!(!filtered_answer_ok(&unfiltered, &expect));
    }
}
