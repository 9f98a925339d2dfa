//! The HBase REST read-modify-write operations as workloads, each with a correctness oracle:
//! `check=append`, `check=delete` and check-and-mutate (a multi-cell `check=put`), on table
//! `kura_load_cas` (family `f`), re-created for every run.
//!
//! - `append`: every operation appends a token unique to it (`{worker}.{seq};`) to `f:log` of
//!   one of `--rows` rows, with `rr=true`; the answer must end with that token. At the end each
//!   row must hold every acknowledged token exactly once, a worker's tokens in the order it sent
//!   them, and no more tokens it does not know of than appends whose outcome is unknown.
//! - `check-and-delete`: `--cas-rows` leases. A worker claims a free lease with
//!   `check=put` (expected value empty: the cell is absent) writing a token of its own, and
//!   releases it with `check=delete` expecting that token, which must succeed (200: nobody else
//!   can delete it). Half of the other operations send `check=delete` with a token never
//!   written, which must fail (304). At the end every lease holds exactly the token of the
//!   worker that holds it, or nothing.
//! - `check-and-mutate`: `--cas-rows` rows with a generation `f:gen` and two cells `f:a`, `f:b`
//!   that must always carry the same `{gen}:{token}`. One operation is a compare-and-set loop:
//!   read the row, then `check=put` of gen+1, a and b checked on the gen it read; a 304 (another
//!   worker won) re-reads and retries, up to [`MAX_RETRIES`] times. Every read must show a and b
//!   of its gen (the check=put is atomic); at the end each row's gen must equal its
//!   acknowledged loops (plus at most its unknown outcomes). Retries per loop are reported.
//!
//! # Invariants
//! 1. A write whose outcome is unknown (timeout, broken connection) widens what the final
//!    check accepts for its row (or, for a lease, stops checking that lease); it is never
//!    assumed to have happened or not. One whose connection could not be made sent nothing.
//! 2. A well-formed answer that contradicts what was acknowledged is an `invalid` operation
//!    and a stored failure, which fails the run.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rand::Rng;

use super::{
    judge, recreate_table, server_tags, Op, Params, RunFailures, Verification, Worker, WorkloadName,
};
use crate::cellset::{self, CellRef, RowCells};
use crate::client::Conn;
use crate::error::Result;
use crate::stats::{Outcome, Recorder};

/// The table these workloads write (re-created by every run).
pub const TABLE: &str = "kura_load_cas";
const LOG: &[u8] = b"f:log";
const OWNER: &[u8] = b"f:owner";
const GEN: &[u8] = b"f:gen";
const A: &[u8] = b"f:a";
const B: &[u8] = b"f:b";
/// Compare-and-set attempts one check-and-mutate loop makes before it gives up.
pub const MAX_RETRIES: u64 = 64;

/// Which read-modify-write operation a [`Cas`] workload drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CasKind {
    /// `check=append` of unique tokens.
    Append,
    /// Leases claimed with `check=put` and released with `check=delete`.
    CheckAndDelete,
    /// Generation compare-and-set loops with a multi-cell `check=put`.
    CheckAndMutate,
}

#[derive(Default)]
struct AppendRow {
    acked: Vec<String>,
    unknown: u64,
}

#[derive(Default, Clone)]
struct Lease {
    holder: Option<String>,
    tainted: bool,
}

/// An append, check-and-delete or check-and-mutate workload.
pub struct Cas {
    kind: CasKind,
    rows: u64,
    regions: Option<u32>,
    appends: Mutex<HashMap<u64, AppendRow>>,
    leases: Mutex<HashMap<u64, Lease>>,
    gens_acked: Vec<AtomicU64>,
    gens_unknown: Vec<AtomicU64>,
    failures: RunFailures,
}

fn append_key(i: u64) -> String {
    format!("a{i:08}")
}
fn lease_key(i: u64) -> String {
    format!("l{i:06}")
}
fn gen_key(i: u64) -> String {
    format!("m{i:06}")
}

impl Cas {
    /// The workload `name` (append, check-and-delete or check-and-mutate).
    pub fn new(name: WorkloadName, p: &Params) -> Cas {
        let kind = match name {
            WorkloadName::Append => CasKind::Append,
            WorkloadName::CheckAndDelete => CasKind::CheckAndDelete,
            _ => CasKind::CheckAndMutate,
        };
        let rows = match kind {
            CasKind::Append => p.rows.max(1),
            _ => p.cas_rows.max(1),
        };
        let gens = if kind == CasKind::CheckAndMutate {
            rows as usize
        } else {
            0
        };
        Cas {
            kind,
            rows,
            regions: p.regions,
            appends: Mutex::new(HashMap::new()),
            leases: Mutex::new(HashMap::new()),
            gens_acked: (0..gens).map(|_| AtomicU64::new(0)).collect(),
            gens_unknown: (0..gens).map(|_| AtomicU64::new(0)).collect(),
            failures: RunFailures::default(),
        }
    }

    /// Re-create the table (these workloads check the whole state of their rows).
    pub async fn prepare(&self, conn: &mut Conn) -> Result<()> {
        recreate_table(conn, TABLE, &["f"], self.regions).await
    }

    fn fail(&self, msg: String) {
        self.failures.note(msg);
    }

    /// One operation.
    pub async fn op(&self, w: &mut Worker, conn: &mut Conn, rec: &mut Recorder) -> Op {
        match self.kind {
            CasKind::Append => self.append(w, conn).await,
            CasKind::CheckAndDelete => self.lease_op(w, conn, rec).await,
            CasKind::CheckAndMutate => self.mutate_loop(w, conn, rec).await,
        }
    }

    async fn append(&self, w: &mut Worker, conn: &mut Conn) -> Op {
        let i = w.rng.gen_range(0..self.rows);
        let key = append_key(i);
        w.seq += 1;
        let token = format!("{}.{};", w.idx, w.seq);
        let body = cellset::one_row(
            key.as_bytes(),
            &[CellRef {
                column: LOG,
                value: token.as_bytes(),
            }],
        );
        let r = conn
            .put_json(&format!("/{TABLE}/{key}?check=append&rr=true"), body)
            .await;
        let outcome = judge(&r, &[200]);
        let mut op = Op {
            kind: "append",
            outcome,
            rows: 0,
        };
        match (&r, outcome) {
            (Ok(resp), Outcome::Ok) => {
                let mut a = self.appends.lock().unwrap_or_else(|p| p.into_inner());
                a.entry(i).or_default().acked.push(token.clone());
                drop(a);
                // The new value is the value right after this append: it ends with its token.
                let new = cellset::rows_with_cells(&resp.body).ok().and_then(|rows| {
                    rows.into_iter()
                        .find(|r| r.key == key.as_bytes())
                        .and_then(|r| r.value(LOG).map(<[u8]>::to_vec))
                });
                if !new.is_some_and(|v| v.ends_with(token.as_bytes())) {
                    self.fail(format!(
                        "{key}: the answer of append {token} does not end with it"
                    ));
                    op.outcome = Outcome::Invalid;
                }
            }
            (Err(e), _) if e.may_have_arrived() => {
                let mut a = self.appends.lock().unwrap_or_else(|p| p.into_inner());
                a.entry(i).or_default().unknown += 1;
            }
            _ => {}
        }
        op
    }

    fn lease_body(key: &str, cells: &[CellRef<'_>]) -> String {
        cellset::one_row(key.as_bytes(), cells)
    }

    async fn lease_op(&self, w: &mut Worker, conn: &mut Conn, rec: &mut Recorder) -> Op {
        let i = w.rng.gen_range(0..self.rows);
        let key = lease_key(i);
        w.seq += 1;
        let mine_prefix = format!("w{}.", w.idx);
        let lease = {
            let l = self.leases.lock().unwrap_or_else(|p| p.into_inner());
            l.get(&i).cloned().unwrap_or_default()
        };
        let held = lease
            .holder
            .as_deref()
            .filter(|h| h.starts_with(&mine_prefix) && !lease.tainted)
            .map(str::to_string);
        let path = format!("/{TABLE}/{key}?check=delete");
        if let Some(token) = held {
            // Release: only this worker can have changed its own lease.
            let body = Self::lease_body(
                &key,
                &[CellRef {
                    column: OWNER,
                    value: token.as_bytes(),
                }],
            );
            let r = conn.put_json(&path, body).await;
            let mut outcome = judge(&r, &[200]);
            let mut l = self.leases.lock().unwrap_or_else(|p| p.into_inner());
            let e = l.entry(i).or_default();
            match &r {
                Ok(resp) if resp.status == 200 => {
                    rec.count("released", 1);
                    if e.holder.as_deref() == Some(token.as_str()) {
                        e.holder = None;
                    }
                }
                Ok(resp) if resp.status == 304 => {
                    drop(l);
                    self.fail(format!(
                        "{key}: check=delete of the holder's own token {token} answered 304"
                    ));
                    outcome = Outcome::Invalid;
                }
                Ok(_) => {}
                Err(err) if err.may_have_arrived() => {
                    e.tainted = true;
                    e.holder = None;
                }
                Err(_) => {}
            }
            return Op {
                kind: "release",
                outcome,
                rows: 0,
            };
        }
        if w.rng.gen_bool(0.5) {
            // A delete checked on a value nobody ever wrote can never apply.
            let never = format!("x{}.{}", w.idx, w.seq);
            let body = Self::lease_body(
                &key,
                &[CellRef {
                    column: OWNER,
                    value: never.as_bytes(),
                }],
            );
            let r = conn.put_json(&path, body).await;
            let mut outcome = judge(&r, &[304]);
            if matches!(&r, Ok(resp) if resp.status == 304) {
                rec.count("foreign_delete_refused", 1);
            }
            if matches!(&r, Ok(resp) if resp.status == 200) {
                self.fail(format!(
                    "{key}: check=delete expecting {never}, a value never written, answered 200"
                ));
                let mut l = self.leases.lock().unwrap_or_else(|p| p.into_inner());
                l.entry(i).or_default().tainted = true;
                outcome = Outcome::Invalid;
            }
            return Op {
                kind: "foreign_delete",
                outcome,
                rows: 0,
            };
        }
        let token = format!("w{}.{}", w.idx, w.seq);
        let body = Self::lease_body(
            &key,
            &[
                CellRef {
                    column: OWNER,
                    value: token.as_bytes(),
                },
                CellRef {
                    column: OWNER,
                    value: b"",
                },
            ],
        );
        let r = conn
            .put_json(&format!("/{TABLE}/{key}?check=put"), body)
            .await;
        let outcome = judge(&r, &[200, 304]);
        let mut l = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let e = l.entry(i).or_default();
        match &r {
            Ok(resp) if resp.status == 200 => {
                rec.count("claimed", 1);
                e.holder = Some(token);
                e.tainted = false;
            }
            Ok(resp) if resp.status == 304 => rec.count("claim_taken", 1),
            Ok(_) => {}
            Err(err) if err.may_have_arrived() => {
                e.tainted = true;
                e.holder = None;
            }
            Err(_) => {}
        }
        Op {
            kind: "claim",
            outcome,
            rows: 0,
        }
    }

    async fn mutate_loop(&self, w: &mut Worker, conn: &mut Conn, rec: &mut Recorder) -> Op {
        let i = w.rng.gen_range(0..self.rows);
        let key = gen_key(i);
        let mut retries = 0u64;
        loop {
            let r = conn.get(&format!("/{TABLE}/{key}")).await;
            let row = match &r {
                Ok(resp) if resp.status == 404 => None,
                Ok(resp) if resp.status == 200 => match cellset::rows_with_cells(&resp.body) {
                    Ok(rows) => rows.into_iter().find(|r| r.key == key.as_bytes()),
                    Err(e) => {
                        self.fail(format!("{key}: unreadable row: {e}"));
                        return Op {
                            kind: "check_and_mutate",
                            outcome: Outcome::Invalid,
                            rows: 0,
                        };
                    }
                },
                _ => {
                    return Op {
                        kind: "check_and_mutate",
                        outcome: judge(&r, &[200, 404]),
                        rows: 0,
                    }
                }
            };
            let gen = match generation(row.as_ref()) {
                Ok(g) => g,
                Err(e) => {
                    self.fail(format!("{key}: {e}"));
                    return Op {
                        kind: "check_and_mutate",
                        outcome: Outcome::Invalid,
                        rows: 0,
                    };
                }
            };
            w.seq += 1;
            let new_gen = gen + 1;
            let value = format!("{new_gen}:{}.{}", w.idx, w.seq);
            let expected = if gen == 0 {
                String::new()
            } else {
                gen.to_string()
            };
            let new_gen_s = new_gen.to_string();
            let body = cellset::one_row(
                key.as_bytes(),
                &[
                    CellRef {
                        column: GEN,
                        value: new_gen_s.as_bytes(),
                    },
                    CellRef {
                        column: A,
                        value: value.as_bytes(),
                    },
                    CellRef {
                        column: B,
                        value: value.as_bytes(),
                    },
                    CellRef {
                        column: GEN,
                        value: expected.as_bytes(),
                    },
                ],
            );
            let r = conn
                .put_json(&format!("/{TABLE}/{key}?check=put"), body)
                .await;
            match &r {
                Ok(resp) if resp.status == 200 => {
                    self.gens_acked[i as usize].fetch_add(1, Ordering::Relaxed);
                    rec.cas.finished(retries, true);
                    return Op {
                        kind: "check_and_mutate",
                        outcome: Outcome::Ok,
                        rows: 0,
                    };
                }
                Ok(resp) if resp.status == 304 => {
                    rec.cas.conflict();
                    retries += 1;
                    if retries >= MAX_RETRIES {
                        rec.cas.finished(retries, false);
                        return Op {
                            kind: "check_and_mutate_gave_up",
                            outcome: Outcome::Ok,
                            rows: 0,
                        };
                    }
                }
                Ok(_) => {
                    return Op {
                        kind: "check_and_mutate",
                        outcome: judge(&r, &[200]),
                        rows: 0,
                    }
                }
                Err(e) => {
                    if e.may_have_arrived() {
                        self.gens_unknown[i as usize].fetch_add(1, Ordering::Relaxed);
                    }
                    return Op {
                        kind: "check_and_mutate",
                        outcome: judge(&r, &[200]),
                        rows: 0,
                    };
                }
            }
        }
    }

    /// Read `keys` back from one server, by row key.
    async fn read_rows(conn: &mut Conn, keys: &[String]) -> Result<HashMap<Vec<u8>, RowCells>> {
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let rows = super::read_rows(conn, TABLE, &keys).await?;
        Ok(rows.into_iter().map(|r| (r.key.clone(), r)).collect())
    }

    /// Read every touched row back from every server and compare it with what was acknowledged.
    pub async fn verify(&self, conns: &mut [Conn]) -> Result<Verification> {
        let mut v = Verification {
            checked: true,
            ..Verification::default()
        };
        let tags = server_tags(conns);
        for (conn, tag) in conns.iter_mut().zip(&tags) {
            match self.kind {
                CasKind::Append => self.verify_appends(conn, tag, &mut v).await?,
                CasKind::CheckAndDelete => self.verify_leases(conn, tag, &mut v).await?,
                CasKind::CheckAndMutate => self.verify_gens(conn, tag, &mut v).await?,
            }
        }
        self.failures.report(
            "answers during the run contradicted what was acknowledged",
            &mut v,
        );
        Ok(v)
    }

    async fn verify_appends(&self, conn: &mut Conn, tag: &str, v: &mut Verification) -> Result<()> {
        let rows: Vec<(u64, Vec<String>, u64)> = {
            let a = self.appends.lock().unwrap_or_else(|p| p.into_inner());
            a.iter()
                .map(|(i, r)| (*i, r.acked.clone(), r.unknown))
                .collect()
        };
        let keys: Vec<String> = rows.iter().map(|(i, _, _)| append_key(*i)).collect();
        let got = Self::read_rows(conn, &keys).await?;
        let (mut acked_total, mut unknown_total) = (0usize, 0u64);
        for ((_, acked, unknown), key) in rows.iter().zip(&keys) {
            acked_total += acked.len();
            unknown_total += unknown;
            let value = got
                .get(key.as_bytes())
                .and_then(|r| r.value(LOG))
                .unwrap_or(b"");
            for f in check_append_log(value, acked, *unknown) {
                v.failures.push(format!("{tag}{key}: {f}"));
            }
        }
        v.notes.push(format!(
            "{tag}{} rows appended to: {acked_total} acknowledged appends each found once and in \
             each worker's order, {unknown_total} unknown outcomes",
            rows.len()
        ));
        Ok(())
    }

    async fn verify_leases(&self, conn: &mut Conn, tag: &str, v: &mut Verification) -> Result<()> {
        let leases: Vec<(u64, Lease)> = {
            let l = self.leases.lock().unwrap_or_else(|p| p.into_inner());
            l.iter().map(|(i, x)| (*i, x.clone())).collect()
        };
        let keys: Vec<String> = leases.iter().map(|(i, _)| lease_key(*i)).collect();
        let got = Self::read_rows(conn, &keys).await?;
        let (mut held, mut tainted) = (0, 0);
        for ((_, lease), key) in leases.iter().zip(&keys) {
            if lease.tainted {
                tainted += 1;
                continue;
            }
            held += usize::from(lease.holder.is_some());
            let owner = got.get(key.as_bytes()).and_then(|r| r.value(OWNER));
            if let Some(f) = check_lease(owner, lease.holder.as_deref()) {
                v.failures.push(format!("{tag}{key}: {f}"));
            }
        }
        v.notes.push(format!(
            "{tag}{} leases used: {held} held at the end, each by exactly its holder's token; the \
             others free; {tainted} not checked (a write with an unknown outcome)",
            leases.len()
        ));
        Ok(())
    }

    async fn verify_gens(&self, conn: &mut Conn, tag: &str, v: &mut Verification) -> Result<()> {
        let keys: Vec<String> = (0..self.rows).map(gen_key).collect();
        let got = Self::read_rows(conn, &keys).await?;
        let mut acked_total = 0;
        for (i, key) in keys.iter().enumerate() {
            let acked = self.gens_acked[i].load(Ordering::Relaxed);
            let unknown = self.gens_unknown[i].load(Ordering::Relaxed);
            acked_total += acked;
            let gen = match generation(got.get(key.as_bytes())) {
                Ok(g) => g,
                Err(e) => {
                    v.failures.push(format!("{tag}{key}: {e}"));
                    continue;
                }
            };
            if gen < acked || gen > acked + unknown {
                v.failures.push(format!(
                    "{tag}{key}: generation {gen}, {acked} compare-and-sets acknowledged \
                     ({unknown} unknown)"
                ));
            }
        }
        v.notes.push(format!(
            "{tag}{} rows: generations equal the {acked_total} acknowledged compare-and-sets, \
             a and b of every row read carry its generation",
            self.rows
        ));
        Ok(())
    }
}

/// The generation of a check-and-mutate row (0 when absent), or what is wrong with it: `f:a`
/// and `f:b` must both be `{gen}:{token}` with the same token.
pub fn generation(row: Option<&RowCells>) -> std::result::Result<u64, String> {
    let Some(row) = row else { return Ok(0) };
    let (gen, a, b) = (row.value(GEN), row.value(A), row.value(B));
    let Some(gen) = gen else {
        return match (a, b) {
            (None, None) => Ok(0),
            _ => Err("a and b written without a generation".into()),
        };
    };
    let gen_s = String::from_utf8_lossy(gen);
    let g: u64 = gen_s
        .parse()
        .map_err(|_| format!("generation {gen_s:?} is not a number"))?;
    let prefix = format!("{g}:");
    match (a, b) {
        (Some(a), Some(b)) if a == b && a.starts_with(prefix.as_bytes()) => Ok(g),
        _ => Err(format!(
            "generation {g} but a = {:?}, b = {:?} (a multi-cell check=put applied in part)",
            a.map(String::from_utf8_lossy),
            b.map(String::from_utf8_lossy)
        )),
    }
}

/// What is wrong with a lease's final owner cell given the tracked holder (`None` if right).
pub fn check_lease(owner: Option<&[u8]>, holder: Option<&str>) -> Option<String> {
    match (owner, holder) {
        (None, None) => None,
        (Some(o), Some(h)) if o == h.as_bytes() => None,
        (Some(o), None) => Some(format!(
            "held by {:?}, but its last holder released it",
            String::from_utf8_lossy(o)
        )),
        (o, Some(h)) => Some(format!(
            "held by {h} (claim acknowledged, never released), the server has {:?}",
            o.map(String::from_utf8_lossy)
        )),
    }
}

/// What is wrong with an appended log given the acknowledged tokens and the number of appends
/// with an unknown outcome: each token at most once, every acknowledged one present, a
/// worker's tokens in increasing sequence, no more unknown tokens than unknown appends.
pub fn check_append_log(value: &[u8], acked: &[String], unknown: u64) -> Vec<String> {
    let mut errs = Vec::new();
    let text = String::from_utf8_lossy(value);
    let tokens: Vec<&str> = text.split_terminator(';').collect();
    let mut seen = HashSet::new();
    let mut last_seq: HashMap<&str, u64> = HashMap::new();
    for t in &tokens {
        if !seen.insert(*t) {
            errs.push(format!("token {t} appended twice"));
        }
        if let Some((w, s)) = t.split_once('.') {
            let s: u64 = s.parse().unwrap_or(0);
            if let Some(prev) = last_seq.insert(w, s) {
                if prev > s {
                    errs.push(format!("worker {w}'s append {s} after its append {prev}"));
                }
            }
        } else {
            errs.push(format!("{t:?} is not a token this run appended"));
        }
    }
    let mut acked_set = HashSet::new();
    for a in acked {
        let t = a.trim_end_matches(';');
        acked_set.insert(t);
        if !seen.contains(t) {
            errs.push(format!("acknowledged append {t} is missing"));
        }
    }
    let extra = seen.iter().filter(|t| !acked_set.contains(*t)).count() as u64;
    if extra > unknown {
        errs.push(format!(
            "{extra} tokens were never acknowledged (only {unknown} appends had an unknown outcome)"
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[(&[u8], &str)]) -> RowCells {
        RowCells {
            key: b"m000001".to_vec(),
            cells: cells
                .iter()
                .map(|(c, v)| (c.to_vec(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn a_generation_is_read_only_when_a_and_b_carry_it() {
        assert_eq!(generation(None), Ok(0));
        assert_eq!(
            generation(Some(&row(&[(GEN, "3"), (A, "3:1.9"), (B, "3:1.9")]))),
            Ok(3)
        );
        // A torn multi-cell write: a of one generation, b of another.
        assert!(generation(Some(&row(&[(GEN, "3"), (A, "3:1.9"), (B, "2:0.4")]))).is_err());
        assert!(generation(Some(&row(&[(GEN, "3"), (A, "2:1.9"), (B, "2:1.9")]))).is_err());
        assert!(generation(Some(&row(&[(A, "1:1.1")]))).is_err());
    }

    #[test]
    fn a_lost_duplicated_or_reordered_append_is_flagged() {
        let acked = vec!["1.1;".to_string(), "2.1;".to_string(), "1.2;".to_string()];
        assert!(check_append_log(b"1.1;2.1;1.2;", &acked, 0).is_empty());
        assert!(check_append_log(b"2.1;1.1;1.2;", &acked, 0).is_empty());
        assert_eq!(check_append_log(b"1.1;2.1;", &acked, 0).len(), 1);
        assert!(!check_append_log(b"1.1;2.1;1.2;1.2;", &acked, 1).is_empty());
        assert!(!check_append_log(b"1.2;2.1;1.1;", &acked, 0).is_empty());
        // One token the client never saw acknowledged: fine with one unknown outcome only.
        assert!(check_append_log(b"1.1;2.1;1.2;3.1;", &acked, 1).is_empty());
        assert!(!check_append_log(b"1.1;2.1;1.2;3.1;", &acked, 0).is_empty());
    }

    #[test]
    fn a_lease_must_hold_exactly_its_holders_token() {
        assert_eq!(check_lease(None, None), None);
        assert_eq!(check_lease(Some(b"w1.5"), Some("w1.5")), None);
        assert!(check_lease(Some(b"w2.7"), Some("w1.5")).is_some());
        assert!(check_lease(None, Some("w1.5")).is_some());
        assert!(check_lease(Some(b"w1.5"), None).is_some());
    }
}
