//! `durable-write`: a ledger of acknowledged writes, read back in full at the end. Meant for
//! `--kill-after` (the server killed with SIGKILL mid-run and restarted on its data dir): no
//! acknowledged write may be lost.
//!
//! Every operation PUTs a row of its own (`{worker}-{seq}`, one cell `f:v` of `--value-size`
//! random bytes) into table `kura_load_durable`, re-created for every run.
//!
//! # Invariants
//! 1. A write answered 200 is in the ledger with its value; at the end each one must read back
//!    with exactly that value, from every server.
//! 2. A write that never reached the server (the connection could not be made) is counted as
//!    `refused` and not checked: it cannot have been applied.
//! 3. A write whose answer was lost (broken connection, timeout, an error status) may or may not
//!    be there: it is in `unknown` with its value; at the end it is counted as present or absent,
//!    and a present one must carry its value.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{judge, recreate_table, server_tags, Op, Params, Verification, Worker};
use crate::cellset::{self, CellRef};
use crate::client::Conn;
use crate::error::{LoadError, Result};
use crate::stats::Recorder;

/// The table of the ledger (re-created by every run).
pub const TABLE: &str = "kura_load_durable";
const COL: &[u8] = b"f:v";

/// The acknowledged-write ledger workload.
pub struct Durable {
    value_size: usize,
    regions: Option<u32>,
    acked: Mutex<HashMap<String, Vec<u8>>>,
    unknown: Mutex<HashMap<String, Vec<u8>>>,
}

/// What reading the ledger back found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LedgerCheck {
    /// Acknowledged writes read back with their value.
    pub intact: u64,
    /// Acknowledged writes missing.
    pub lost: Vec<String>,
    /// Acknowledged (or unknown) writes read back with another value.
    pub changed: Vec<String>,
    /// Writes with an unknown outcome found.
    pub unknown_present: u64,
    /// Writes with an unknown outcome not found.
    pub unknown_absent: u64,
}

impl Durable {
    /// The ledger workload.
    pub fn new(p: &Params) -> Durable {
        Durable {
            value_size: p.value_size.max(1),
            regions: p.regions,
            acked: Mutex::new(HashMap::new()),
            unknown: Mutex::new(HashMap::new()),
        }
    }

    /// Re-create the table.
    pub async fn prepare(&self, conn: &mut Conn) -> Result<()> {
        recreate_table(conn, TABLE, &["f"], self.regions).await
    }

    /// One write of a row of its own.
    pub async fn op(&self, w: &mut Worker, conn: &mut Conn, rec: &mut Recorder) -> Op {
        w.seq += 1;
        let key = format!("{:04}-{:010}", w.idx, w.seq);
        let value = w.value(self.value_size).to_vec();
        let body = cellset::one_row(
            key.as_bytes(),
            &[CellRef {
                column: COL,
                value: &value,
            }],
        );
        let r = conn.put_json(&format!("/{TABLE}/{key}"), body).await;
        let outcome = judge(&r, &[200]);
        match &r {
            Ok(resp) if resp.status == 200 => {
                self.acked
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, value);
            }
            Err(LoadError::Connect { .. }) => rec.count("refused", 1),
            _ => {
                rec.count("unknown", 1);
                self.unknown
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, value);
            }
        }
        Op {
            kind: "put",
            outcome,
            rows: 0,
        }
    }

    /// Read `keys` back from one server: the value of `f:v` of each row it has, by row key.
    async fn read_back(
        conn: &mut Conn,
        keys: &[&String],
    ) -> Result<HashMap<Vec<u8>, Option<Vec<u8>>>> {
        let keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
        let rows = super::read_rows(conn, TABLE, &keys).await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let v = row.value(COL).map(<[u8]>::to_vec);
                (row.key, v)
            })
            .collect())
    }

    /// Read every acknowledged and unknown write back from each server.
    pub async fn verify(&self, conns: &mut [Conn]) -> Result<Verification> {
        let mut v = Verification {
            checked: true,
            ..Verification::default()
        };
        let acked = self.acked.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let unknown = self
            .unknown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let tags = server_tags(conns);
        for (conn, tag) in conns.iter_mut().zip(&tags) {
            let keys: Vec<&String> = acked.keys().chain(unknown.keys()).collect();
            let got = Self::read_back(conn, &keys).await?;
            let c = check_ledger(&acked, &unknown, &got);
            for (keys, what) in [
                (&c.lost, "acknowledged writes lost"),
                (&c.changed, "writes read back with another value"),
            ] {
                if !keys.is_empty() {
                    let some = keys.iter().take(5).cloned().collect::<Vec<_>>();
                    v.failures.push(format!(
                        "{tag}{} {what}, e.g. {}",
                        keys.len(),
                        some.join(", ")
                    ));
                }
            }
            v.notes.push(format!(
                "{tag}{} acknowledged writes: {} read back intact, {} lost; {} writes with an \
                 unknown outcome: {} present, {} absent",
                acked.len(),
                c.intact,
                c.lost.len(),
                unknown.len(),
                c.unknown_present,
                c.unknown_absent
            ));
        }
        Ok(v)
    }
}

/// Compare what was read back (`key -> value of f:v`, absent rows missing) with the ledger.
pub fn check_ledger(
    acked: &HashMap<String, Vec<u8>>,
    unknown: &HashMap<String, Vec<u8>>,
    got: &HashMap<Vec<u8>, Option<Vec<u8>>>,
) -> LedgerCheck {
    let mut c = LedgerCheck::default();
    for (k, want) in acked {
        match got.get(k.as_bytes()) {
            Some(Some(v)) if v == want => c.intact += 1,
            Some(Some(_)) => c.changed.push(k.clone()),
            _ => c.lost.push(k.clone()),
        }
    }
    for (k, want) in unknown {
        match got.get(k.as_bytes()) {
            Some(Some(v)) if v == want => c.unknown_present += 1,
            Some(Some(_)) => c.changed.push(k.clone()),
            _ => c.unknown_absent += 1,
        }
    }
    c.lost.sort();
    c.changed.sort();
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn a_lost_or_altered_acknowledged_write_is_flagged() {
        let acked = map(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let unknown = map(&[("u1", "x"), ("u2", "y")]);
        let mut got: HashMap<Vec<u8>, Option<Vec<u8>>> = [
            (b"a".to_vec(), Some(b"1".to_vec())),
            (b"b".to_vec(), Some(b"2".to_vec())),
            (b"c".to_vec(), Some(b"3".to_vec())),
            (b"u1".to_vec(), Some(b"x".to_vec())),
        ]
        .into_iter()
        .collect();
        let ok = check_ledger(&acked, &unknown, &got);
        assert_eq!(
            (ok.intact, ok.unknown_present, ok.unknown_absent),
            (3, 1, 1)
        );
        assert!(ok.lost.is_empty() && ok.changed.is_empty());
        got.remove(b"b".as_slice());
        got.insert(b"c".to_vec(), Some(b"old".to_vec()));
        got.insert(b"u2".to_vec(), Some(b"other".to_vec()));
        let bad = check_ledger(&acked, &unknown, &got);
        assert_eq!(bad.lost, vec!["b".to_string()]);
        assert_eq!(bad.changed, vec!["c".to_string(), "u2".to_string()]);
    }
}
