//! HBase's per-cell filter protocol, replayed over the cells of one row.
//!
//! HBase drives a filter with `filterRowKey`, then `filterCell` for each cell the store scanner
//! presents (the return code decides what is presented next), `transformCell` on included
//! cells, `filterRowCells` on the row's result and `filterRow` last. Stateful filters keep their
//! per-row state in the filter object and clear it in `reset()`; here the state lives in a
//! [`State`] tree built fresh for every row, so one [`Filter`] can be shared by concurrent scans.
//!
//! # Invariants
//! 1. A `State` has the shape of the `Filter` it was built from ([`Filter::new_state`]); a
//!    mismatch (impossible by construction) degrades to "include", never to a panic.
//! 2. The cell walk always advances: every return code moves the cursor forward by at least one.

use super::{filters_out, Filter, ListOp};
use kura_backend::Cell;
use std::hash::{Hash, Hasher};

/// HBase's `Filter.ReturnCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rc {
    Include,
    IncludeAndNextCol,
    /// No supported filter returns it; kept so that the merge tables are HBase's.
    #[allow(dead_code)]
    IncludeAndSeekNextRow,
    Skip,
    NextCol,
    NextRow,
    SeekHint,
}

impl Rc {
    fn is_include(self) -> bool {
        matches!(
            self,
            Rc::Include | Rc::IncludeAndNextCol | Rc::IncludeAndSeekNextRow
        )
    }
}

/// What `KeyOnlyFilter.transformCell` does to a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyOnlyMode {
    Empty,
    Length,
}

/// Per-row state of one filter node.
#[derive(Debug)]
pub(super) enum State {
    None,
    /// Row-key filters: `filterRowKey` rejected the row.
    RowOut(bool),
    /// `FirstKeyOnlyFilter` (found a cell), `ColumnValueFilter` (found the column).
    Found(bool),
    /// `ColumnCountGetFilter`, `ColumnPaginationFilter`.
    Count(u64),
    Scv {
        found: bool,
        matched: bool,
    },
    /// `DependentColumnFilter`: timestamps of the dependent column's passing cells.
    Stamps(Vec<i64>),
    /// `SkipFilter` / `WhileMatchFilter`: the wrapped filter rejected something.
    Wrap {
        rejected: bool,
        inner: Box<State>,
    },
    And {
        children: Vec<State>,
        included: Vec<bool>,
        hinted: Vec<bool>,
    },
    Or {
        children: Vec<State>,
        included: Vec<bool>,
        /// The last code of each sub-filter that asked to skip ahead, with the cell's index.
        prev: Vec<Option<(Rc, usize)>>,
    },
}

/// Evaluates `filter` over one row; see [`kura_backend::RowFilter::accept_row`].
pub(super) fn filter_row(filter: &Filter, row: &[u8], cells: &mut Vec<Cell>) -> bool {
    if filter.is_key_only() {
        return !filter.rejects_key(row);
    }
    let mut st = filter.new_state();
    if filter.filter_row_key(&mut st, row) {
        return false;
    }
    let n = cells.len();
    let mut kept: Vec<(usize, Vec<KeyOnlyMode>)> = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        let rc = filter.filter_cell(&mut st, cells, i);
        if rc.is_include() {
            let mut modes = Vec::new();
            filter.transform(&st, &mut modes);
            kept.push((i, modes));
        }
        i = match rc {
            Rc::Include | Rc::Skip => i + 1,
            Rc::IncludeAndNextCol | Rc::NextCol => next_column(cells, i),
            Rc::IncludeAndSeekNextRow | Rc::NextRow => next_family(cells, i),
            Rc::SeekHint => match filter.hint(&st, &cells[i]) {
                Some(hint) => seek(cells, i, hint),
                None => i + 1,
            },
        };
    }
    let mut out = Vec::with_capacity(kept.len());
    let mut kept = kept.into_iter().peekable();
    for (idx, mut cell) in std::mem::take(cells).into_iter().enumerate() {
        if kept.peek().map(|(k, _)| *k) != Some(idx) {
            continue;
        }
        if let Some((_, modes)) = kept.next() {
            for mode in modes {
                cell.value = match mode {
                    KeyOnlyMode::Empty => Vec::new(),
                    KeyOnlyMode::Length => {
                        let len = i32::try_from(cell.value.len()).unwrap_or(i32::MAX);
                        len.to_be_bytes().to_vec()
                    }
                };
            }
            out.push(cell);
        }
    }
    filter.filter_row_cells(&st, &mut out);
    if out.is_empty() || filter.filter_row(&mut st) {
        return false;
    }
    *cells = out;
    true
}

/// Index of the first cell after `i` in another column.
fn next_column(cells: &[Cell], i: usize) -> usize {
    let c = &cells[i];
    let mut j = i + 1;
    while j < cells.len() && cells[j].family == c.family && cells[j].qualifier == c.qualifier {
        j += 1;
    }
    j
}

/// Index of the first cell after `i` in another family (a store scanner's "next row").
fn next_family(cells: &[Cell], i: usize) -> usize {
    let mut j = i + 1;
    while j < cells.len() && cells[j].family == cells[i].family {
        j += 1;
    }
    j
}

/// Index of the first cell after `i` at or past column `(family of cells[i], hint)`.
fn seek(cells: &[Cell], i: usize, hint: &[u8]) -> usize {
    let mut j = i + 1;
    while j < cells.len()
        && cells[j].family == cells[i].family
        && cells[j].qualifier.as_slice() < hint
    {
        j += 1;
    }
    j
}

/// `RandomRowFilter`: a stable pseudo-random draw in `[0, 1)` per (seed, row).
fn random_pass(chance: f32, seed: u64, row: &[u8]) -> bool {
    if chance < 0.0 || chance.is_nan() {
        return false;
    }
    if chance > 1.0 {
        return true;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    seed.hash(&mut h);
    row.hash(&mut h);
    let draw = (h.finish() >> 40) as f32 / (1u64 << 24) as f32;
    draw < chance
}

/// `ColumnPrefixFilter.filterColumn`.
fn column_prefix_rc(qualifier: &[u8], prefix: &[u8]) -> Rc {
    let n = qualifier.len().min(prefix.len());
    match qualifier[..n].cmp(&prefix[..n]) {
        std::cmp::Ordering::Less => Rc::SeekHint,
        std::cmp::Ordering::Greater => Rc::NextRow,
        std::cmp::Ordering::Equal if qualifier.len() < prefix.len() => Rc::SeekHint,
        std::cmp::Ordering::Equal => Rc::Include,
    }
}

/// `FilterListWithAND.mergeReturnCode`: the largest step wins.
fn merge_and(rc: Rc, local: Rc) -> Rc {
    use Rc::*;
    if rc == SeekHint || local == SeekHint {
        return SeekHint;
    }
    match local {
        Include => rc,
        IncludeAndNextCol => match rc {
            Include | IncludeAndNextCol => IncludeAndNextCol,
            IncludeAndSeekNextRow => IncludeAndSeekNextRow,
            Skip | NextCol => NextCol,
            NextRow | SeekHint => NextRow,
        },
        IncludeAndSeekNextRow => match rc {
            Include | IncludeAndNextCol | IncludeAndSeekNextRow => IncludeAndSeekNextRow,
            Skip | NextCol | NextRow | SeekHint => NextRow,
        },
        Skip => match rc {
            Include | Skip => Skip,
            IncludeAndNextCol | NextCol => NextCol,
            IncludeAndSeekNextRow | NextRow | SeekHint => NextRow,
        },
        NextCol => match rc {
            Include | IncludeAndNextCol | Skip | NextCol => NextCol,
            IncludeAndSeekNextRow | NextRow | SeekHint => NextRow,
        },
        NextRow | SeekHint => NextRow,
    }
}

/// `FilterListWithOR.mergeReturnCode`: the smallest step wins.
fn merge_or(rc: Option<Rc>, local: Rc) -> Rc {
    use Rc::*;
    let Some(rc) = rc else {
        return local;
    };
    match local {
        Include => Include,
        IncludeAndNextCol => match rc {
            Include | Skip | SeekHint => Include,
            IncludeAndNextCol | IncludeAndSeekNextRow | NextCol | NextRow => IncludeAndNextCol,
        },
        IncludeAndSeekNextRow => match rc {
            Include | Skip | SeekHint => Include,
            IncludeAndNextCol | NextCol => IncludeAndNextCol,
            IncludeAndSeekNextRow | NextRow => IncludeAndSeekNextRow,
        },
        Skip => match rc {
            Include | IncludeAndNextCol | IncludeAndSeekNextRow => Include,
            Skip | NextCol | NextRow | SeekHint => Skip,
        },
        NextCol => match rc {
            Include => Include,
            IncludeAndNextCol | IncludeAndSeekNextRow => IncludeAndNextCol,
            Skip | SeekHint => Skip,
            NextCol | NextRow => NextCol,
        },
        NextRow => match rc {
            Include => Include,
            IncludeAndNextCol => IncludeAndNextCol,
            IncludeAndSeekNextRow => IncludeAndSeekNextRow,
            Skip | SeekHint => Skip,
            NextCol => NextCol,
            NextRow => NextRow,
        },
        SeekHint => match rc {
            Include | IncludeAndNextCol | IncludeAndSeekNextRow => Include,
            Skip | NextCol | NextRow => Skip,
            SeekHint => SeekHint,
        },
    }
}

fn same_column(a: &Cell, b: &Cell) -> bool {
    a.family == b.family && a.qualifier == b.qualifier
}

impl Filter {
    /// True when, once the row key passes, every cell passes untouched: the row's cells need
    /// not be walked at all.
    pub(super) fn is_key_only(&self) -> bool {
        match self {
            Filter::Prefix(_)
            | Filter::Row(..)
            | Filter::InclusiveStop { .. }
            | Filter::MultiRowRange(_)
            | Filter::FuzzyRow(_)
            | Filter::RandomRow { .. }
            | Filter::Page(_) => true,
            Filter::Skip(inner) | Filter::WhileMatch(inner) => inner.is_key_only(),
            Filter::List(_, filters) => filters.iter().all(Filter::is_key_only),
            _ => false,
        }
    }

    /// `filterRowKey` without state: true when the row is rejected by its key alone.
    pub(super) fn rejects_key(&self, row: &[u8]) -> bool {
        match self {
            Filter::Prefix(prefix) => !row.starts_with(prefix),
            Filter::Row(op, comparator) => filters_out(*op, comparator, row),
            Filter::InclusiveStop { stop, reversed } => {
                if *reversed {
                    row < stop.as_slice()
                } else {
                    row > stop.as_slice()
                }
            }
            Filter::MultiRowRange(ranges) => !ranges.iter().any(|r| r.contains(row)),
            Filter::FuzzyRow(keys) => !keys.iter().any(|k| k.matches(row)),
            Filter::RandomRow { chance, seed } => !random_pass(*chance, *seed, row),
            // SkipFilter does not pass filterRowKey on (HBase's SkipFilter.filterRowKey).
            Filter::Skip(_) => false,
            Filter::WhileMatch(inner) => inner.rejects_key(row),
            Filter::List(ListOp::MustPassAll, filters) => {
                filters.iter().any(|f| f.rejects_key(row))
            }
            Filter::List(ListOp::MustPassOne, filters) => {
                !filters.is_empty() && filters.iter().all(|f| f.rejects_key(row))
            }
            _ => false,
        }
    }

    pub(super) fn new_state(&self) -> State {
        match self {
            Filter::Prefix(_)
            | Filter::Row(..)
            | Filter::InclusiveStop { .. }
            | Filter::MultiRowRange(_)
            | Filter::FuzzyRow(_)
            | Filter::RandomRow { .. } => State::RowOut(false),
            Filter::FirstKeyOnly | Filter::ColumnValue { .. } => State::Found(false),
            Filter::ColumnCountGet(_) | Filter::ColumnPagination { .. } => State::Count(0),
            Filter::SingleColumnValue(_) => State::Scv {
                found: false,
                matched: false,
            },
            Filter::DependentColumn { .. } => State::Stamps(Vec::new()),
            Filter::Skip(inner) | Filter::WhileMatch(inner) => State::Wrap {
                rejected: false,
                inner: Box::new(inner.new_state()),
            },
            Filter::List(op, filters) => {
                let children = filters.iter().map(Filter::new_state).collect();
                let n = filters.len();
                match op {
                    ListOp::MustPassAll => State::And {
                        children,
                        included: vec![false; n],
                        hinted: vec![false; n],
                    },
                    ListOp::MustPassOne => State::Or {
                        children,
                        included: vec![false; n],
                        prev: vec![None; n],
                    },
                }
            }
            _ => State::None,
        }
    }

    /// `filterRowKey`: true rejects the row; records the answer where `filterCell` needs it.
    fn filter_row_key(&self, st: &mut State, row: &[u8]) -> bool {
        match (self, st) {
            (Filter::List(ListOp::MustPassAll, filters), State::And { children, .. }) => {
                let mut out = false;
                for (f, s) in filters.iter().zip(children.iter_mut()) {
                    out |= f.filter_row_key(s, row);
                }
                out
            }
            (Filter::List(ListOp::MustPassOne, filters), State::Or { children, .. }) => {
                let mut out = !filters.is_empty();
                for (f, s) in filters.iter().zip(children.iter_mut()) {
                    if !f.filter_row_key(s, row) {
                        out = false;
                    }
                }
                out
            }
            (Filter::Skip(_), _) => false,
            (Filter::WhileMatch(inner), State::Wrap { rejected, inner: s }) => {
                let out = inner.filter_row_key(s, row);
                *rejected |= out;
                out
            }
            (_, State::RowOut(out)) => {
                *out = self.rejects_key(row);
                *out
            }
            _ => self.rejects_key(row),
        }
    }

    /// `filterCell` for `cells[i]`.
    fn filter_cell(&self, st: &mut State, cells: &[Cell], i: usize) -> Rc {
        let c = &cells[i];
        match self {
            Filter::Prefix(_)
            | Filter::Row(..)
            | Filter::InclusiveStop { .. }
            | Filter::MultiRowRange(_)
            | Filter::FuzzyRow(_)
            | Filter::RandomRow { .. } => {
                if matches!(st, State::RowOut(true)) {
                    Rc::NextRow
                } else {
                    Rc::Include
                }
            }
            Filter::Family(op, cmp) => {
                if filters_out(*op, cmp, &c.family) {
                    Rc::NextRow
                } else {
                    Rc::Include
                }
            }
            Filter::Qualifier(op, cmp) => skip_if(filters_out(*op, cmp, &c.qualifier)),
            Filter::Value(op, cmp) => skip_if(filters_out(*op, cmp, &c.value)),
            Filter::SingleColumnValue(s) => {
                let State::Scv { found, matched } = st else {
                    return Rc::Include;
                };
                if *matched {
                    return Rc::Include;
                }
                if s.latest_version_only && *found {
                    return Rc::NextRow;
                }
                if c.family != s.family || c.qualifier != s.qualifier {
                    return Rc::Include;
                }
                *found = true;
                if filters_out(s.op, &s.comparator, &c.value) {
                    return if s.latest_version_only {
                        Rc::NextRow
                    } else {
                        Rc::Include
                    };
                }
                *matched = true;
                Rc::Include
            }
            Filter::ColumnValue {
                family,
                qualifier,
                op,
                comparator,
            } => {
                let State::Found(found) = st else {
                    return Rc::Include;
                };
                if c.family != *family || c.qualifier != *qualifier {
                    return if *found { Rc::NextRow } else { Rc::NextCol };
                }
                *found = true;
                skip_if(filters_out(*op, comparator, &c.value))
            }
            Filter::DependentColumn {
                family,
                qualifier,
                drop_dependent,
                compare,
            } => {
                if c.family != *family || c.qualifier != *qualifier {
                    return Rc::Include;
                }
                if let Some((op, cmp)) = compare {
                    if filters_out(*op, cmp, &c.value) {
                        return Rc::Skip;
                    }
                }
                if let State::Stamps(stamps) = st {
                    stamps.push(c.timestamp);
                }
                if *drop_dependent {
                    Rc::Skip
                } else {
                    Rc::Include
                }
            }
            Filter::ColumnPrefix(prefix) => column_prefix_rc(&c.qualifier, prefix),
            Filter::MultipleColumnPrefix(prefixes) => {
                if prefixes.is_empty() || prefixes.iter().any(|p| c.qualifier.starts_with(p)) {
                    Rc::Include
                } else if prefixes
                    .iter()
                    .any(|p| p.as_slice() > c.qualifier.as_slice())
                {
                    Rc::SeekHint
                } else {
                    Rc::NextRow
                }
            }
            Filter::ColumnRange {
                min,
                min_inclusive,
                max,
                max_inclusive,
            } => {
                let cmp_min = min
                    .as_ref()
                    .map_or(std::cmp::Ordering::Greater, |m| c.qualifier.cmp(m));
                if cmp_min.is_lt() {
                    return Rc::SeekHint;
                }
                if !*min_inclusive && cmp_min.is_eq() {
                    return Rc::NextCol;
                }
                let Some(max) = max else {
                    return Rc::Include;
                };
                let cmp_max = c.qualifier.cmp(max);
                if (*max_inclusive && cmp_max.is_le()) || (!*max_inclusive && cmp_max.is_lt()) {
                    Rc::Include
                } else {
                    Rc::NextRow
                }
            }
            Filter::FirstKeyOnly => {
                let State::Found(found) = st else {
                    return Rc::Include;
                };
                if *found {
                    return Rc::NextRow;
                }
                *found = true;
                Rc::Include
            }
            Filter::KeyOnly { .. } | Filter::Page(_) => Rc::Include,
            Filter::Timestamps(stamps) => {
                if stamps.binary_search(&c.timestamp).is_ok() {
                    Rc::Include
                } else if stamps.first().is_none_or(|min| c.timestamp < *min) {
                    Rc::NextCol
                } else {
                    Rc::Skip
                }
            }
            Filter::ColumnCountGet(limit) => {
                let State::Count(count) = st else {
                    return Rc::Include;
                };
                *count += 1;
                if *count > u64::from(*limit) {
                    Rc::NextCol
                } else {
                    Rc::IncludeAndNextCol
                }
            }
            Filter::ColumnPagination { limit, offset } => {
                let State::Count(count) = st else {
                    return Rc::Include;
                };
                if *count >= u64::from(*offset) + u64::from(*limit) {
                    return Rc::NextRow;
                }
                let rc = if *count < u64::from(*offset) {
                    Rc::NextCol
                } else {
                    Rc::IncludeAndNextCol
                };
                *count += 1;
                rc
            }
            Filter::Skip(inner) | Filter::WhileMatch(inner) => {
                let State::Wrap { rejected, inner: s } = st else {
                    return Rc::Include;
                };
                let rc = inner.filter_cell(s, cells, i);
                *rejected |= rc != Rc::Include;
                rc
            }
            Filter::List(ListOp::MustPassAll, filters) => {
                let State::And {
                    children,
                    included,
                    hinted,
                } = st
                else {
                    return Rc::Include;
                };
                let mut rc = Rc::Include;
                let mut any_hint = false;
                for (k, f) in filters.iter().enumerate() {
                    let local = f.filter_cell(&mut children[k], cells, i);
                    rc = merge_and(rc, local);
                    included[k] = local.is_include();
                    hinted[k] = local == Rc::SeekHint;
                    any_hint |= hinted[k];
                }
                if any_hint {
                    Rc::SeekHint
                } else {
                    rc
                }
            }
            Filter::List(ListOp::MustPassOne, filters) => {
                let State::Or {
                    children,
                    included,
                    prev,
                } = st
                else {
                    return Rc::Include;
                };
                if filters.is_empty() {
                    return Rc::Include;
                }
                let mut rc = None;
                for (k, f) in filters.iter().enumerate() {
                    let known = prev[k].and_then(|(code, j)| {
                        f.code_from_previous(&children[k], code, &cells[j], c)
                    });
                    let local = match known {
                        Some(code) => code,
                        None => f.filter_cell(&mut children[k], cells, i),
                    };
                    prev[k] = match local {
                        Rc::Include | Rc::Skip => None,
                        _ => Some((local, i)),
                    };
                    included[k] = local.is_include();
                    rc = Some(merge_or(rc, local));
                }
                rc.unwrap_or(Rc::Skip)
            }
        }
    }

    /// `FilterListWithOR.calculateReturnCodeByPrevCellAndRC`: a sub-filter that asked to skip a
    /// column (family, hinted range) is not asked about the cells it skipped.
    fn code_from_previous(&self, st: &State, prev_code: Rc, prev: &Cell, cur: &Cell) -> Option<Rc> {
        match prev_code {
            Rc::Include | Rc::Skip => None,
            Rc::SeekHint => {
                let hint = self.hint(st, prev)?;
                (cur.family == prev.family && cur.qualifier.as_slice() < hint)
                    .then_some(Rc::SeekHint)
            }
            Rc::NextCol | Rc::IncludeAndNextCol => same_column(prev, cur).then_some(Rc::NextCol),
            Rc::NextRow | Rc::IncludeAndSeekNextRow => {
                (prev.family == cur.family).then_some(Rc::NextRow)
            }
        }
    }

    /// `getNextCellHint`: the qualifier (in the cell's family) to seek to.
    fn hint<'a>(&'a self, st: &State, cell: &Cell) -> Option<&'a [u8]> {
        match self {
            Filter::ColumnPrefix(prefix) => Some(prefix),
            Filter::ColumnRange { min, .. } => min.as_deref(),
            Filter::MultipleColumnPrefix(prefixes) => prefixes
                .iter()
                .find(|p| p.as_slice() > cell.qualifier.as_slice())
                .map(Vec::as_slice),
            Filter::Skip(inner) | Filter::WhileMatch(inner) => match st {
                State::Wrap { inner: s, .. } => inner.hint(s, cell),
                _ => None,
            },
            Filter::List(ListOp::MustPassAll, filters) => {
                let State::And {
                    children, hinted, ..
                } = st
                else {
                    return None;
                };
                filters
                    .iter()
                    .zip(children)
                    .zip(hinted)
                    .filter(|(_, h)| **h)
                    .filter_map(|((f, s), _)| f.hint(s, cell))
                    .max()
            }
            Filter::List(ListOp::MustPassOne, filters) => {
                let State::Or { children, .. } = st else {
                    return None;
                };
                let mut min: Option<&[u8]> = None;
                for (f, s) in filters.iter().zip(children) {
                    let h = f.hint(s, cell)?;
                    min = Some(min.map_or(h, |m| m.min(h)));
                }
                min
            }
            _ => None,
        }
    }

    /// `transformCell` of the cell last passed to `filter_cell` (which included it).
    fn transform(&self, st: &State, modes: &mut Vec<KeyOnlyMode>) {
        match (self, st) {
            (Filter::KeyOnly { len_as_val }, _) => {
                modes.push(if *len_as_val {
                    KeyOnlyMode::Length
                } else {
                    KeyOnlyMode::Empty
                });
            }
            (Filter::Skip(inner) | Filter::WhileMatch(inner), State::Wrap { inner: s, .. }) => {
                inner.transform(s, modes);
            }
            (
                Filter::List(_, filters),
                State::And {
                    children, included, ..
                },
            )
            | (
                Filter::List(_, filters),
                State::Or {
                    children, included, ..
                },
            ) => {
                for ((f, s), inc) in filters.iter().zip(children).zip(included) {
                    if *inc {
                        f.transform(s, modes);
                    }
                }
            }
            _ => {}
        }
    }

    /// `filterRowCells`: final edits of the row's included cells.
    fn filter_row_cells(&self, st: &State, cells: &mut Vec<Cell>) {
        match (self, st) {
            (Filter::SingleColumnValue(s), _) if s.exclude => {
                cells.retain(|c| c.family != s.family || c.qualifier != s.qualifier);
            }
            (Filter::DependentColumn { .. }, State::Stamps(stamps)) => {
                cells.retain(|c| stamps.contains(&c.timestamp));
            }
            (Filter::List(_, filters), State::And { children, .. })
            | (Filter::List(_, filters), State::Or { children, .. }) => {
                for (f, s) in filters.iter().zip(children) {
                    f.filter_row_cells(s, cells);
                }
            }
            _ => {}
        }
    }

    /// `filterRow`: true rejects the row after its cells were seen.
    fn filter_row(&self, st: &mut State) -> bool {
        match (self, st) {
            (
                Filter::Prefix(_) | Filter::Row(..) | Filter::RandomRow { .. },
                State::RowOut(out),
            ) => *out,
            (Filter::SingleColumnValue(s), State::Scv { found, matched }) => {
                if *found {
                    !*matched
                } else {
                    s.filter_if_missing
                }
            }
            (Filter::Skip(_), State::Wrap { rejected, .. }) => *rejected,
            (Filter::WhileMatch(inner), State::Wrap { rejected, inner: s }) => {
                inner.filter_row(s) || *rejected
            }
            (Filter::List(ListOp::MustPassAll, filters), State::And { children, .. }) => {
                let mut out = false;
                for (f, s) in filters.iter().zip(children.iter_mut()) {
                    out |= f.filter_row(s);
                }
                out
            }
            (Filter::List(ListOp::MustPassOne, filters), State::Or { children, .. }) => {
                let mut out = !filters.is_empty();
                for (f, s) in filters.iter().zip(children.iter_mut()) {
                    if !f.filter_row(s) {
                        out = false;
                    }
                }
                out
            }
            _ => false,
        }
    }
}

fn skip_if(filtered_out: bool) -> Rc {
    if filtered_out {
        Rc::Skip
    } else {
        Rc::Include
    }
}
