//! Writes: mutations (MutateRow / MutateRows, or one CheckAndMutateRow where a delete needs a
//! timestamp bound Bigtable lacks), increment and append (ReadModifyWriteRow), and
//! check-and-mutate (CheckAndMutateRow with the exact predicate of BIGTABLE.md §4).
//!
//! # Invariants
//! 1. Each row's mutations are sent in one atomic call, in their order; nothing is sent before
//!    every row, family and timestamp of the request has been checked.
//! 2. A put without a timestamp is sent with `-1` (Bigtable's clock, whole ms); explicit ones as
//!    `ms * 1000`.
//! 3. Deletes without a timestamp use unbounded ranges; a row delete deletes each user family,
//!    never `DeleteFromRow` (it would erase `_kura`).
//! 4. A family delete bounded by a timestamp reads the family's columns up to it first, then
//!    sends one CheckAndMutateRow: `DeleteFromFamily` when the family has no newer cell,
//!    per-column range deletes otherwise. Inside a check-and-mutate only the per-column form
//!    exists. (A column written between the read and the call survives.)

use std::collections::HashMap;

use bigtable_rs::google::bigtable::v2;
use kura_backend::{
    Append, Cell, CheckAndMutate, Error, FamilyDescriptor, Increment, Mutation, Result,
    RowMutation, LATEST_TIMESTAMP,
};
use v2::mutation::{DeleteFromColumn, DeleteFromFamily, Mutation as M, SetCell};
use v2::read_modify_write_rule::Rule as RmwRule;
use v2::{
    CheckAndMutateRowRequest, MutateRowRequest, MutateRowsRequest, ReadModifyWriteRowRequest,
    ReadModifyWriteRule, ReadRowsRequest, RowFilter, RowSet, TimestampRange,
};

use crate::conn::map_status;
use crate::filters::{
    chain, column, family, interleave, latest_of, per_column, strip_value, time_range, ts_micros,
    ts_millis, value_equals, value_non_empty, MAX_TS_MS,
};
use crate::meta::TableInfo;
use crate::read::{read_rows, to_cells};
use crate::BigtableBackend;

/// Bigtable's limits (BIGTABLE.md §5.6); the emulator enforces none of them.
const MAX_KEY: usize = 4096;
const MAX_QUALIFIER: usize = 16 << 10;
const MAX_VALUE: usize = 100 << 20;
const MAX_MUTATIONS: usize = 100_000;

/// A row key Bigtable accepts: non-empty, at most 4 KiB.
pub(crate) fn check_key(row: &[u8]) -> Result<()> {
    if row.is_empty() {
        return Err(Error::InvalidArgument("empty row key".into()));
    }
    if row.len() > MAX_KEY {
        return Err(Error::InvalidArgument(format!(
            "a {}-byte row key is over Bigtable's {MAX_KEY}-byte limit",
            row.len()
        )));
    }
    Ok(())
}

/// Merge the mutations of a row named several times, in order: MutateRows applies its
/// entries in any order, so a row's mutations must travel in one entry.
fn merge_rows(ms: Vec<RowMutation>) -> Vec<RowMutation> {
    let mut at: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut out: Vec<RowMutation> = Vec::with_capacity(ms.len());
    for rm in ms {
        match at.get(&rm.row) {
            Some(&i) => out[i].mutations.extend(rm.mutations),
            None => {
                at.insert(rm.row.clone(), out.len());
                out.push(rm);
            }
        }
    }
    out
}

pub(crate) fn name(f: &[u8]) -> String {
    String::from_utf8_lossy(f).into_owned()
}

fn m(x: M) -> v2::Mutation {
    v2::Mutation { mutation: Some(x) }
}

fn delete_column(f: &[u8], q: &[u8], range: Option<(i64, i64)>) -> v2::Mutation {
    m(M::DeleteFromColumn(DeleteFromColumn {
        family_name: name(f),
        column_qualifier: q.to_vec(),
        time_range: range.map(|(s, e)| TimestampRange {
            start_timestamp_micros: s,
            end_timestamp_micros: e,
        }),
    }))
}

fn delete_family(f: &[u8]) -> v2::Mutation {
    m(M::DeleteFromFamily(DeleteFromFamily {
        family_name: name(f),
    }))
}

/// An explicit timestamp (`None` for "now": absent or HBase's LATEST_TIMESTAMP).
fn explicit(ts: Option<i64>) -> Option<i64> {
    ts.filter(|&t| t != LATEST_TIMESTAMP)
}

/// A row's mutations as Bigtable mutations.
#[derive(Default)]
pub(crate) struct Plan {
    /// Sent when no family delete is bounded, or when no bounded family has newer cells.
    pub(crate) exact: Vec<v2::Mutation>,
    /// Sent when some bounded family has newer cells: per-column deletes instead.
    pub(crate) per_column: Vec<v2::Mutation>,
    /// "Some bounded family has cells newer than its bound".
    pub(crate) newer: Vec<RowFilter>,
}

impl Plan {
    fn both(&mut self, x: v2::Mutation) {
        self.exact.push(x.clone());
        self.per_column.push(x);
    }
}

impl BigtableBackend {
    pub(crate) fn data_table_error(&self, table: &str, s: &tonic::Status) -> Error {
        let e = map_status(table, s);
        if let Error::TableNotFound(_) = e {
            self.schemas.forget(table);
        }
        e
    }

    /// Read one row's cells with a filter.
    pub(crate) async fn read_row(
        &self,
        table: &str,
        info: &TableInfo,
        row: &[u8],
        filter: RowFilter,
    ) -> Result<Vec<Cell>> {
        let req = ReadRowsRequest {
            table_name: info.full_name.clone(),
            app_profile_id: self.conn.app_profile.clone(),
            rows: Some(RowSet {
                row_keys: vec![row.to_vec()],
                row_ranges: vec![],
            }),
            filter: Some(filter),
            rows_limit: 1,
            ..Default::default()
        };
        let rows = read_rows(&self.conn, table, req).await?;
        Ok(rows
            .into_iter()
            .next()
            .map(|r| to_cells(r).1)
            .unwrap_or_default())
    }

    /// Check a row mutation's key, families and timestamps.
    pub(crate) fn check_row_mutation(
        info: &TableInfo,
        table: &str,
        rm: &RowMutation,
    ) -> Result<()> {
        check_key(&rm.row)?;
        if rm.mutations.len() > MAX_MUTATIONS {
            return Err(Error::InvalidArgument(format!(
                "{} mutations of one row; Bigtable takes at most {MAX_MUTATIONS}",
                rm.mutations.len()
            )));
        }
        for mu in &rm.mutations {
            if let Mutation::Put {
                qualifier, value, ..
            } = mu
            {
                if qualifier.len() > MAX_QUALIFIER || value.len() > MAX_VALUE {
                    return Err(Error::InvalidArgument(format!(
                        "a {}-byte qualifier or {}-byte value is over Bigtable's limits \
                         ({MAX_QUALIFIER} and {MAX_VALUE} bytes)",
                        qualifier.len(),
                        value.len()
                    )));
                }
            }
            if let Some(f) = mu.family() {
                if info.family(f).is_none() {
                    return Err(Error::NoSuchFamily {
                        table: table.to_string(),
                        family: name(f),
                    });
                }
            }
            if let Mutation::Put { timestamp, .. } = mu {
                if let Some(t) = explicit(*timestamp) {
                    ts_micros(t)?;
                }
            }
        }
        Ok(())
    }

    /// Translate one row's mutations (reading first where Bigtable needs it).
    pub(crate) async fn plan(
        &self,
        table: &str,
        info: &TableInfo,
        rm: &RowMutation,
    ) -> Result<Plan> {
        let mut plan = Plan::default();
        for (i, mu) in rm.mutations.iter().enumerate() {
            match mu {
                Mutation::Put {
                    family,
                    qualifier,
                    timestamp,
                    value,
                } => {
                    let ts = match explicit(*timestamp) {
                        Some(t) => ts_micros(t)?,
                        None => -1,
                    };
                    plan.both(m(M::SetCell(SetCell {
                        family_name: name(family),
                        column_qualifier: qualifier.clone(),
                        timestamp_micros: ts,
                        value: value.clone(),
                    })));
                }
                Mutation::DeleteVersion {
                    family,
                    qualifier,
                    timestamp,
                } => {
                    let ts = match explicit(*timestamp) {
                        Some(t) => t,
                        None => {
                            let Some(f) = info.family(family) else {
                                continue;
                            };
                            let cells = self
                                .read_row(table, info, &rm.row, latest_of(f, qualifier, true))
                                .await?;
                            match cells.first() {
                                Some(c) => c.timestamp,
                                None => continue,
                            }
                        }
                    };
                    if (0..=MAX_TS_MS).contains(&ts) {
                        let us = ts * 1000;
                        plan.both(delete_column(family, qualifier, Some((us, us + 1000))));
                    }
                }
                Mutation::DeleteColumn {
                    family,
                    qualifier,
                    timestamp,
                } => match explicit(*timestamp) {
                    Some(t) if t < 0 => {}
                    Some(t) if t < MAX_TS_MS => {
                        plan.both(delete_column(family, qualifier, Some((0, (t + 1) * 1000))))
                    }
                    _ => plan.both(delete_column(family, qualifier, None)),
                },
                Mutation::DeleteFamily { family, timestamp } => {
                    if let Some(f) = info.family(family) {
                        self.plan_family(table, info, rm, i, f, explicit(*timestamp), &mut plan)
                            .await?;
                    }
                }
                Mutation::DeleteRow { timestamp } => {
                    for f in &info.desc.families {
                        self.plan_family(table, info, rm, i, f, explicit(*timestamp), &mut plan)
                            .await?;
                    }
                }
            }
        }
        Ok(plan)
    }

    /// A family delete (`ts`: every cell `<=` it; `None`: every cell).
    #[allow(clippy::too_many_arguments)]
    async fn plan_family(
        &self,
        table: &str,
        info: &TableInfo,
        rm: &RowMutation,
        index: usize,
        f: &FamilyDescriptor,
        ts: Option<i64>,
        plan: &mut Plan,
    ) -> Result<()> {
        let t = match ts {
            Some(t) if t < 0 => return Ok(()),
            Some(t) if t < MAX_TS_MS => t,
            _ => {
                plan.both(delete_family(&f.name));
                return Ok(());
            }
        };
        let end = (t + 1) * 1000;
        let fam = name(&f.name);
        let filter = chain(vec![
            family(&fam),
            time_range(0, end),
            per_column(1),
            strip_value(),
        ]);
        let mut qualifiers: Vec<Vec<u8>> = self
            .read_row(table, info, &rm.row, filter)
            .await?
            .into_iter()
            .map(|c| c.qualifier)
            .collect();
        // Columns this same request writes before the delete.
        for earlier in &rm.mutations[..index] {
            if let Mutation::Put {
                family, qualifier, ..
            } = earlier
            {
                if *family == f.name {
                    qualifiers.push(qualifier.clone());
                }
            }
        }
        qualifiers.sort();
        qualifiers.dedup();
        plan.exact.push(delete_family(&f.name));
        for q in qualifiers {
            plan.per_column
                .push(delete_column(&f.name, &q, Some((0, end))));
        }
        plan.newer
            .push(chain(vec![family(&fam), time_range(end, 0)]));
        Ok(())
    }

    pub(crate) async fn do_mutate_rows(&self, table: &str, ms: Vec<RowMutation>) -> Result<()> {
        let families: Vec<&[u8]> = ms
            .iter()
            .flat_map(|rm| rm.mutations.iter().filter_map(|mu| mu.family()))
            .collect();
        let info = self.schemas.with_families(table, &families).await?;
        let ms = merge_rows(ms);
        for rm in &ms {
            Self::check_row_mutation(&info, table, rm)?;
        }
        let mut entries = Vec::new();
        for rm in &ms {
            let plan = self.plan(table, &info, rm).await?;
            if plan.exact.is_empty() && plan.per_column.is_empty() {
                continue;
            }
            if plan.newer.is_empty() {
                entries.push(v2::mutate_rows_request::Entry {
                    row_key: rm.row.clone(),
                    mutations: plan.exact,
                    idempotency: None,
                });
                continue;
            }
            let req = CheckAndMutateRowRequest {
                table_name: info.full_name.clone(),
                app_profile_id: self.conn.app_profile.clone(),
                row_key: rm.row.clone(),
                predicate_filter: Some(interleave(plan.newer)),
                true_mutations: plan.per_column,
                false_mutations: plan.exact,
                ..Default::default()
            };
            self.conn
                .data()
                .get_client()
                .check_and_mutate_row(self.conn.data_request(&info.full_name, req, true))
                .await
                .map_err(|s| self.data_table_error(table, &s))?;
        }
        match entries.len() {
            0 => Ok(()),
            1 => {
                let e = entries.pop().unwrap_or_default();
                let req = MutateRowRequest {
                    table_name: info.full_name.clone(),
                    app_profile_id: self.conn.app_profile.clone(),
                    row_key: e.row_key,
                    mutations: e.mutations,
                    ..Default::default()
                };
                self.conn
                    .data()
                    .get_client()
                    .mutate_row(self.conn.data_request(&info.full_name, req, true))
                    .await
                    .map_err(|s| self.data_table_error(table, &s))?;
                Ok(())
            }
            _ => {
                let req = MutateRowsRequest {
                    table_name: info.full_name.clone(),
                    app_profile_id: self.conn.app_profile.clone(),
                    entries,
                    ..Default::default()
                };
                let mut stream = self
                    .conn
                    .data()
                    .get_client()
                    .mutate_rows(self.conn.data_request(&info.full_name, req, false))
                    .await
                    .map_err(|s| self.data_table_error(table, &s))?
                    .into_inner();
                let mut first_error = None;
                while let Some(resp) = stream
                    .message()
                    .await
                    .map_err(|s| self.data_table_error(table, &s))?
                {
                    for e in resp.entries {
                        let Some(st) = e.status else { continue };
                        if st.code != 0 && first_error.is_none() {
                            let s = tonic::Status::new(tonic::Code::from(st.code), st.message);
                            first_error = Some(self.data_table_error(table, &s));
                        }
                    }
                }
                first_error.map_or(Ok(()), Err)
            }
        }
    }

    /// ReadModifyWriteRow; returns the new cell of every column it touched.
    async fn rmw(
        &self,
        table: &str,
        info: &TableInfo,
        row: &[u8],
        rules: Vec<ReadModifyWriteRule>,
    ) -> std::result::Result<HashMap<(Vec<u8>, Vec<u8>), Cell>, tonic::Status> {
        let req = ReadModifyWriteRowRequest {
            table_name: info.full_name.clone(),
            app_profile_id: self.conn.app_profile.clone(),
            row_key: row.to_vec(),
            rules,
            ..Default::default()
        };
        let resp = self
            .conn
            .data()
            .get_client()
            .read_modify_write_row(self.conn.data_request(&info.full_name, req, true))
            .await?
            .into_inner();
        let _ = table;
        let mut out = HashMap::new();
        for fam in resp.row.map(|r| r.families).unwrap_or_default() {
            for col in fam.columns {
                if let Some(c) = col.cells.into_iter().next() {
                    let key = (fam.name.clone().into_bytes(), col.qualifier.clone());
                    out.insert(
                        key,
                        Cell {
                            family: fam.name.clone().into_bytes(),
                            qualifier: col.qualifier,
                            timestamp: ts_millis(c.timestamp_micros),
                            value: c.value,
                        },
                    );
                }
            }
        }
        Ok(out)
    }

    /// The latest stored cells (no TTL cut: what ReadModifyWriteRow sees) of some columns.
    async fn latest_stored(
        &self,
        table: &str,
        info: &TableInfo,
        row: &[u8],
        columns: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<Vec<Cell>> {
        let filter = chain(vec![
            interleave(columns.iter().map(|(f, q)| column(&name(f), q)).collect()),
            per_column(1),
        ]);
        self.read_row(table, info, row, filter).await
    }

    pub(crate) async fn do_increment(&self, table: &str, inc: Increment) -> Result<Vec<Cell>> {
        check_key(&inc.row)?;
        let info = self
            .schemas
            .with_families(
                table,
                &inc.columns
                    .iter()
                    .map(|(f, _, _)| f.as_slice())
                    .collect::<Vec<_>>(),
            )
            .await?;
        if inc.columns.is_empty() {
            return Ok(Vec::new());
        }
        let rules = inc
            .columns
            .iter()
            .map(|(f, q, n)| ReadModifyWriteRule {
                family_name: name(f),
                column_qualifier: q.clone(),
                rule: Some(RmwRule::IncrementAmount(*n)),
            })
            .collect();
        let finals = match self.rmw(table, &info, &inc.row, rules).await {
            Ok(c) => c,
            Err(s) => {
                let e = self.data_table_error(table, &s);
                if !matches!(e, Error::Internal(_) | Error::InvalidArgument(_)) {
                    return Err(e);
                }
                // A value that is not 8 bytes (the emulator says UNKNOWN "increment on
                // non-64-bit value"): find which, to say so as the embedded store does.
                let cols: Vec<_> = inc
                    .columns
                    .iter()
                    .map(|(f, q, _)| (f.clone(), q.clone()))
                    .collect();
                let cells = self.latest_stored(table, &info, &inc.row, &cols).await?;
                return Err(match cells.iter().find(|c| c.value.len() != 8) {
                    Some(c) => Error::NotACounter(format!(
                        "column {}:{} holds a {}-byte value, not an 8-byte counter",
                        name(&c.family),
                        name(&c.qualifier),
                        c.value.len()
                    )),
                    None => e,
                });
            }
        };
        // A column named twice: earlier entries answer the value before the later amounts.
        let mut out = Vec::with_capacity(inc.columns.len());
        for (i, (f, q, _)) in inc.columns.iter().enumerate() {
            let Some(last) = finals.get(&(f.clone(), q.clone())) else {
                return Err(Error::Internal(format!(
                    "ReadModifyWriteRow did not return {}:{}",
                    name(f),
                    name(q)
                )));
            };
            let later: i64 = inc.columns[i + 1..]
                .iter()
                .filter(|(g, r, _)| g == f && r == q)
                .fold(0i64, |acc, (_, _, n)| acc.wrapping_add(*n));
            let mut cell = last.clone();
            if later != 0 {
                let v: [u8; 8] = cell.value.as_slice().try_into().unwrap_or_default();
                cell.value = i64::from_be_bytes(v)
                    .wrapping_sub(later)
                    .to_be_bytes()
                    .to_vec();
            }
            out.push(cell);
        }
        Ok(out)
    }

    pub(crate) async fn do_append(&self, table: &str, app: Append) -> Result<Vec<Cell>> {
        check_key(&app.row)?;
        let info = self
            .schemas
            .with_families(
                table,
                &app.columns
                    .iter()
                    .map(|(f, _, _)| f.as_slice())
                    .collect::<Vec<_>>(),
            )
            .await?;
        if app.columns.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(max) = app.max_value {
            // Best effort: checked on a read just before the append, not atomically with it.
            let cols: Vec<_> = app
                .columns
                .iter()
                .map(|(f, q, _)| (f.clone(), q.clone()))
                .collect();
            let cells = self.latest_stored(table, &info, &app.row, &cols).await?;
            let mut len: HashMap<(&[u8], &[u8]), usize> = cells
                .iter()
                .map(|c| ((c.family.as_slice(), c.qualifier.as_slice()), c.value.len()))
                .collect();
            for (f, q, suffix) in &app.columns {
                let l = len.entry((f.as_slice(), q.as_slice())).or_insert(0);
                let old = *l;
                *l = l.saturating_add(suffix.len());
                if *l > max {
                    return Err(Error::InvalidArgument(format!(
                        "appending {} bytes to {}:{} ({old} bytes) would pass the {max}-byte value limit",
                        suffix.len(),
                        name(f),
                        name(q),
                    )));
                }
            }
        }
        let rules = app
            .columns
            .iter()
            .map(|(f, q, s)| ReadModifyWriteRule {
                family_name: name(f),
                column_qualifier: q.clone(),
                rule: Some(RmwRule::AppendValue(s.clone())),
            })
            .collect();
        let finals = self
            .rmw(table, &info, &app.row, rules)
            .await
            .map_err(|s| self.data_table_error(table, &s))?;
        let mut out = Vec::with_capacity(app.columns.len());
        for (i, (f, q, _)) in app.columns.iter().enumerate() {
            let Some(last) = finals.get(&(f.clone(), q.clone())) else {
                return Err(Error::Internal(format!(
                    "ReadModifyWriteRow did not return {}:{}",
                    name(f),
                    name(q)
                )));
            };
            let later: usize = app.columns[i + 1..]
                .iter()
                .filter(|(g, r, _)| g == f && r == q)
                .map(|(_, _, s)| s.len())
                .sum();
            let mut cell = last.clone();
            cell.value.truncate(cell.value.len().saturating_sub(later));
            out.push(cell);
        }
        Ok(out)
    }

    /// Check a check-and-mutate and translate its mutations: the table, the "latest visible
    /// cell of the checked column" filter, and the mutations to apply if the check passes.
    pub(crate) async fn prepare_check(
        &self,
        table: &str,
        cam: &CheckAndMutate,
    ) -> Result<(std::sync::Arc<TableInfo>, RowFilter, Vec<v2::Mutation>)> {
        check_key(&cam.row)?;
        let families: Vec<&[u8]> = std::iter::once(cam.family.as_slice())
            .chain(cam.mutations.iter().filter_map(|mu| mu.family()))
            .collect();
        let info = self.schemas.with_families(table, &families).await?;
        let rm = RowMutation {
            row: cam.row.clone(),
            mutations: cam.mutations.clone(),
        };
        Self::check_row_mutation(&info, table, &rm)?;
        let Some(f) = info.family(&cam.family) else {
            return Err(Error::NoSuchFamily {
                table: table.to_string(),
                family: name(&cam.family),
            });
        };
        let latest = latest_of(f, &cam.qualifier, false);
        let plan = self.plan(table, &info, &rm).await?;
        // Inside a check only the per-column form of a bounded family delete exists.
        let muts = if plan.newer.is_empty() {
            plan.exact
        } else {
            plan.per_column
        };
        Ok((info, latest, muts))
    }

    pub(crate) async fn do_check_and_mutate(
        &self,
        table: &str,
        cam: CheckAndMutate,
    ) -> Result<bool> {
        let (info, latest, muts) = self.prepare_check(table, &cam).await?;
        if muts.is_empty() {
            let cells = self.read_row(table, &info, &cam.row, latest).await?;
            let current = cells.first();
            return Ok(if cam.expected.is_empty() {
                current.is_none_or(|c| c.value.is_empty())
            } else {
                current.is_some_and(|c| c.value == cam.expected)
            });
        }
        let mut req = CheckAndMutateRowRequest {
            table_name: info.full_name.clone(),
            app_profile_id: self.conn.app_profile.clone(),
            row_key: cam.row.clone(),
            ..Default::default()
        };
        let expect_empty = cam.expected.is_empty();
        if expect_empty {
            // Matched = the latest value is non-empty = the check failed.
            req.predicate_filter = Some(chain(vec![latest, value_non_empty()]));
            req.false_mutations = muts;
        } else {
            req.predicate_filter = Some(chain(vec![latest, value_equals(&cam.expected)]));
            req.true_mutations = muts;
        }
        let matched = self
            .conn
            .data()
            .get_client()
            .check_and_mutate_row(self.conn.data_request(&info.full_name, req, true))
            .await
            .map_err(|s| self.data_table_error(table, &s))?
            .into_inner()
            .predicate_matched;
        Ok(matched != expect_empty)
    }
}
