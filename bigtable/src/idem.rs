//! Idempotency keys (BIGTABLE.md §6.2): a keyed increment, append or check-and-mutate is
//! applied at most once per (row, key) within the retention, and every reply for the key
//! reports the outcome of the attempt that completed first.
//!
//! # Record
//! The cell `_kura:idem/<key>` of the same row, so that it commits atomically with the data.
//! Its latest version is `P<attempt id>` while an attempt holds the key, then `D<outcome JSON>`.
//! Records older than [`RESERVED_RETENTION_SECS`] are ignored (and GC'd by `_kura`'s rule).
//!
//! # Invariants
//! 1. Data is written only by a CheckAndMutateRow whose predicate requires the record to be
//!    this attempt's `P` value, in the same call that writes `D`; so after a takeover a stalled
//!    attempt can no longer apply.
//! 2. A `P` record younger than [`LEASE`] (by its cell timestamp, against Kura's clock) is
//!    waited on; an older one is taken over with a CheckAndMutateRow on its exact value.
//! 3. Increments and appends compute new values in Kura from the latest *visible* cells (so an
//!    expired counter restarts at 0, and overflow and `max_value` are exact) and apply them
//!    only if none of those cells changed; a conflict re-reads and retries, boundedly.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bigtable_rs::google::bigtable::v2;
use kura_backend::{Append, Cell, CheckAndMutate, Error, Increment, Result};
use serde::{Deserialize, Serialize};
use v2::mutation::{Mutation as M, SetCell};
use v2::{CheckAndMutateRowRequest, RowFilter};

use crate::filters::{
    both, chain, column, interleave, now_ms, per_column, time_range, ts_micros, value_above,
    value_below, value_equals, value_non_empty, visible_column,
};
use crate::meta::{TableInfo, RESERVED_FAMILY, RESERVED_RETENTION_SECS};
use crate::write::{check_key, name};
use crate::BigtableBackend;

/// How long an attempt holds a key before another may take it over.
pub const LEASE: Duration = Duration::from_secs(30);
/// Longest key accepted (it is part of a qualifier).
const MAX_KEY: usize = 1024;
/// Conflicting writers an increment or append retries past before answering `Unavailable`.
const MAX_CONFLICTS: u32 = 50;

/// The new value of request column `i` from its old value (`family, qualifier, old, i`).
type Combine<'a> = dyn Fn(&[u8], &[u8], Option<&[u8]>, usize) -> Result<Vec<u8>> + Sync + 'a;

/// Latest cells by column: `(family, qualifier) → (value, timestamp ms)`.
type Cells = HashMap<(Vec<u8>, Vec<u8>), (Vec<u8>, i64)>;

/// What a key's first completed attempt answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Outcome {
    Cells(Vec<Cell>),
    Checked(bool),
}

/// The state of a claim.
enum Claim {
    Mine,
    Done(Outcome),
}

fn qualifier(key: &[u8]) -> Result<Vec<u8>> {
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(Error::InvalidArgument(format!(
            "an idempotency key must be 1..={MAX_KEY} bytes, got {}",
            key.len()
        )));
    }
    Ok([b"idem/".as_slice(), key].concat())
}

/// A fresh attempt id, unique across processes in practice (pid, clock, counter).
fn pending_value() -> Vec<u8> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "P{:x}-{nanos:x}-{:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
    .into_bytes()
}

fn done_value(o: &Outcome) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(o)
        .map_err(|e| Error::Internal(format!("idempotency outcome to JSON: {e}")))?;
    Ok([b"D".as_slice(), &json].concat())
}

fn set_record(q: &[u8], value: Vec<u8>) -> v2::Mutation {
    v2::Mutation {
        mutation: Some(M::SetCell(SetCell {
            family_name: RESERVED_FAMILY.into(),
            column_qualifier: q.to_vec(),
            timestamp_micros: -1,
            value,
        })),
    }
}

fn set_cell(c: &Cell) -> Result<v2::Mutation> {
    Ok(v2::Mutation {
        mutation: Some(M::SetCell(SetCell {
            family_name: name(&c.family),
            column_qualifier: c.qualifier.clone(),
            timestamp_micros: ts_micros(c.timestamp)?,
            value: c.value.clone(),
        })),
    })
}

/// The record's latest version, if inside the retention.
fn record(q: &[u8]) -> RowFilter {
    let floor = (now_ms() - RESERVED_RETENTION_SECS * 1000).max(0);
    chain(vec![
        column(RESERVED_FAMILY, q),
        time_range(floor * 1000, 0),
        per_column(1),
    ])
}

/// The record is exactly `value`.
fn record_is(q: &[u8], value: &[u8]) -> RowFilter {
    chain(vec![
        column(RESERVED_FAMILY, q),
        per_column(1),
        value_equals(value),
    ])
}

/// The record exists and is not `value`.
fn record_is_not(q: &[u8], value: &[u8]) -> Vec<RowFilter> {
    [value_below(value), value_above(value)]
        .into_iter()
        .map(|v| chain(vec![column(RESERVED_FAMILY, q), per_column(1), v]))
        .collect()
}

fn different_operation() -> Error {
    Error::InvalidArgument(
        "this idempotency key was used on this row for a different kind of request".into(),
    )
}

impl BigtableBackend {
    async fn cam(
        &self,
        table: &str,
        info: &TableInfo,
        row: &[u8],
        predicate: RowFilter,
        true_mutations: Vec<v2::Mutation>,
        false_mutations: Vec<v2::Mutation>,
    ) -> Result<bool> {
        let req = CheckAndMutateRowRequest {
            table_name: info.full_name.clone(),
            app_profile_id: self.conn.app_profile.clone(),
            row_key: row.to_vec(),
            predicate_filter: Some(predicate),
            true_mutations,
            false_mutations,
            ..Default::default()
        };
        Ok(self
            .conn
            .data()
            .get_client()
            .check_and_mutate_row(self.conn.data_request(&info.full_name, req, true))
            .await
            .map_err(|s| self.data_table_error(table, &s))?
            .into_inner()
            .predicate_matched)
    }

    /// Step 1: own the key with `pending`, or learn the outcome of the attempt that completed.
    async fn claim(
        &self,
        table: &str,
        info: &TableInfo,
        row: &[u8],
        q: &[u8],
        pending: &[u8],
    ) -> Result<Claim> {
        let deadline = tokio::time::Instant::now() + LEASE + LEASE / 2;
        let mut pause = Duration::from_millis(20);
        loop {
            let exists = self
                .cam(
                    table,
                    info,
                    row,
                    record(q),
                    vec![],
                    vec![set_record(q, pending.to_vec())],
                )
                .await?;
            if !exists {
                return Ok(Claim::Mine);
            }
            let cells = self.read_row(table, info, row, record(q)).await?;
            let Some(rec) = cells.into_iter().next() else {
                continue;
            };
            match rec.value.first() {
                Some(b'D') => {
                    let o = serde_json::from_slice(&rec.value[1..]).map_err(|e| {
                        Error::Internal(format!("idempotency record is not an outcome: {e}"))
                    })?;
                    return Ok(Claim::Done(o));
                }
                _ if rec.value == pending => return Ok(Claim::Mine),
                _ => {}
            }
            let age_ms = now_ms().saturating_sub(rec.timestamp);
            if age_ms >= i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX) {
                // The holder stalled or died: take over its exact record.
                let took = self
                    .cam(
                        table,
                        info,
                        row,
                        record_is(q, &rec.value),
                        vec![set_record(q, pending.to_vec())],
                        vec![],
                    )
                    .await?;
                if took {
                    return Ok(Claim::Mine);
                }
                continue;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Unavailable(
                    "another attempt with the same idempotency key is still running; retry later"
                        .into(),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Is the record still this attempt's?
    async fn still_mine(
        &self,
        table: &str,
        info: &TableInfo,
        row: &[u8],
        q: &[u8],
        pending: &[u8],
    ) -> Result<bool> {
        let cells = self.read_row(table, info, row, record(q)).await?;
        Ok(cells.first().is_some_and(|c| c.value == pending))
    }

    pub(crate) async fn keyed_check_and_mutate(
        &self,
        table: &str,
        cam: CheckAndMutate,
        key: &[u8],
    ) -> Result<bool> {
        let q = qualifier(key)?;
        let (info, latest, muts) = self.prepare_check(table, &cam).await?;
        let pending = pending_value();
        loop {
            match self.claim(table, &info, &cam.row, &q, &pending).await? {
                Claim::Done(Outcome::Checked(b)) => return Ok(b),
                Claim::Done(_) => return Err(different_operation()),
                Claim::Mine => {}
            }
            let mut apply = muts.clone();
            apply.push(set_record(&q, done_value(&Outcome::Checked(true))?));
            let applied = if cam.expected.is_empty() {
                // Failure form: not mine, or the latest value is non-empty.
                let mut fails = record_is_not(&q, &pending);
                fails.push(chain(vec![latest.clone(), value_non_empty()]));
                !self
                    .cam(table, &info, &cam.row, interleave(fails), vec![], apply)
                    .await?
            } else {
                // Positive form: mine AND the latest value equals the expected one.
                let pass = both(
                    record_is(&q, &pending),
                    chain(vec![latest.clone(), value_equals(&cam.expected)]),
                );
                self.cam(table, &info, &cam.row, pass, apply, vec![])
                    .await?
            };
            if applied {
                return Ok(true);
            }
            // The check failed, or another attempt took the key over: record the failure if
            // the key is still ours, else learn the other attempt's outcome.
            let recorded = self
                .cam(
                    table,
                    &info,
                    &cam.row,
                    record_is(&q, &pending),
                    vec![set_record(&q, done_value(&Outcome::Checked(false))?)],
                    vec![],
                )
                .await?;
            if recorded {
                return Ok(false);
            }
        }
    }

    pub(crate) async fn keyed_increment(
        &self,
        table: &str,
        inc: Increment,
        key: &[u8],
    ) -> Result<Vec<Cell>> {
        let columns: Vec<(Vec<u8>, Vec<u8>)> = inc
            .columns
            .iter()
            .map(|(f, q, _)| (f.clone(), q.clone()))
            .collect();
        let combine = |f: &[u8], q: &[u8], old: Option<&[u8]>, i: usize| -> Result<Vec<u8>> {
            let old = match old {
                None => 0,
                Some(v) => i64::from_be_bytes(v.try_into().map_err(|_| {
                    Error::NotACounter(format!(
                        "column {}:{} holds a {}-byte value, not an 8-byte counter",
                        name(f),
                        name(q),
                        v.len()
                    ))
                })?),
            };
            let new = old.checked_add(inc.columns[i].2).ok_or_else(|| {
                Error::CounterOverflow(format!(
                    "increment of {}:{} overflows a 64-bit signed integer",
                    name(f),
                    name(q)
                ))
            })?;
            Ok(new.to_be_bytes().to_vec())
        };
        self.keyed_rmw(table, &inc.row, &columns, &combine, key)
            .await
    }

    pub(crate) async fn keyed_append(
        &self,
        table: &str,
        app: Append,
        key: &[u8],
    ) -> Result<Vec<Cell>> {
        let columns: Vec<(Vec<u8>, Vec<u8>)> = app
            .columns
            .iter()
            .map(|(f, q, _)| (f.clone(), q.clone()))
            .collect();
        let max = app.max_value.unwrap_or(usize::MAX);
        let combine = |f: &[u8], q: &[u8], old: Option<&[u8]>, i: usize| -> Result<Vec<u8>> {
            let old = old.unwrap_or_default();
            let suffix = &app.columns[i].2;
            if old.len().saturating_add(suffix.len()) > max {
                return Err(Error::InvalidArgument(format!(
                    "appending {} bytes to {}:{} ({} bytes) would pass the {max}-byte value limit",
                    suffix.len(),
                    name(f),
                    name(q),
                    old.len()
                )));
            }
            Ok([old, suffix.as_slice()].concat())
        };
        self.keyed_rmw(table, &app.row, &columns, &combine, key)
            .await
    }

    /// A keyed read-modify-write of `columns` (family, qualifier) of `row`: check the row and
    /// the families, claim, then read the columns' latest visible cells, compute the new ones,
    /// and write them with the outcome only if no column changed meanwhile.
    async fn keyed_rmw(
        &self,
        table: &str,
        row: &[u8],
        columns: &[(Vec<u8>, Vec<u8>)],
        combine: &Combine<'_>,
        key: &[u8],
    ) -> Result<Vec<Cell>> {
        check_key(row)?;
        let families: Vec<&[u8]> = columns.iter().map(|(f, _)| f.as_slice()).collect();
        let info = &self.schemas.with_families(table, &families).await?;
        let q = qualifier(key)?;
        let pending = pending_value();
        let mut distinct = columns.to_vec();
        distinct.sort();
        distinct.dedup();
        'claim: loop {
            match self.claim(table, info, row, &q, &pending).await? {
                Claim::Done(Outcome::Cells(c)) => return Ok(c),
                Claim::Done(_) => return Err(different_operation()),
                Claim::Mine => {}
            }
            let mut conflicts = 0;
            loop {
                // The latest visible cell of each column.
                let mut current: Cells = HashMap::new();
                let mut visible = Vec::new();
                for (f, cq) in &distinct {
                    let fam = info
                        .family(f)
                        .ok_or_else(|| Error::Internal("family vanished".into()))?;
                    let mut parts = visible_column(fam, cq);
                    parts.push(per_column(1));
                    visible.push((fam, chain(parts)));
                }
                let all = interleave(visible.iter().map(|(_, f)| f.clone()).collect());
                for c in self.read_row(table, info, row, all).await? {
                    current.insert((c.family, c.qualifier), (c.value, c.timestamp));
                }
                // New values, in request order (a column named twice combines onto itself).
                let now = now_ms();
                let mut results: Vec<Cell> = Vec::with_capacity(columns.len());
                let mut latest: Cells = current.clone();
                for (i, (f, cq)) in columns.iter().enumerate() {
                    let k = (f.clone(), cq.clone());
                    let old = latest.get(&k).cloned();
                    let value = combine(f, cq, old.as_ref().map(|(v, _)| v.as_slice()), i)?;
                    let ts = match old {
                        Some((_, t)) if t >= now => t.saturating_add(1),
                        _ => now,
                    };
                    latest.insert(k, (value.clone(), ts));
                    results.push(Cell {
                        family: f.clone(),
                        qualifier: cq.clone(),
                        timestamp: ts,
                        value,
                    });
                }
                // Fail if the key is not ours, or if any column changed since the read.
                let mut fails = record_is_not(&q, &pending);
                for ((f, cq), (_, filter)) in distinct.iter().zip(&visible) {
                    match current.get(&(f.clone(), cq.clone())) {
                        None => {
                            let fam = info
                                .family(f)
                                .ok_or_else(|| Error::Internal("family vanished".into()))?;
                            fails.push(chain(visible_column(fam, cq)));
                        }
                        Some((v, t)) => {
                            let t_us = ts_micros(*t)?;
                            for cond in [
                                value_below(v),
                                value_above(v),
                                time_range(t_us + 1000, 0),
                                time_range(0, t_us),
                            ] {
                                fails.push(chain(vec![filter.clone(), cond]));
                            }
                        }
                    }
                }
                let mut apply = Vec::new();
                for ((f, cq), (value, ts)) in &latest {
                    if !current
                        .get(&(f.clone(), cq.clone()))
                        .is_some_and(|c| c.0 == *value && c.1 == *ts)
                    {
                        apply.push(set_cell(&Cell {
                            family: f.clone(),
                            qualifier: cq.clone(),
                            timestamp: *ts,
                            value: value.clone(),
                        })?);
                    }
                }
                apply.push(set_record(
                    &q,
                    done_value(&Outcome::Cells(results.clone()))?,
                ));
                let failed = self
                    .cam(table, info, row, interleave(fails), vec![], apply)
                    .await?;
                if !failed {
                    return Ok(results);
                }
                if !self.still_mine(table, info, row, &q, &pending).await? {
                    continue 'claim;
                }
                conflicts += 1;
                if conflicts >= MAX_CONFLICTS {
                    return Err(Error::Unavailable(
                        "the row's counters kept changing under a keyed request; retry later"
                            .into(),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(5 * u64::from(conflicts.min(20)))).await;
            }
        }
    }
}
