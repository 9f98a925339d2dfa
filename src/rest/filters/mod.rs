//! HBase server-side filters for the REST gateway: parsing (scanner JSON and the Thrift filter
//! language) and evaluation inside the store's scan loop.
//!
//! # Layout
//! - this file: the filter AST ([`Filter`], [`Comparator`], [`CompareOp`]), the public API the
//!   REST handlers use, and the [`RowFilter`] implementation.
//! - `eval`: HBase's per-cell filter protocol (`filterRowKey`, `filterCell` return codes,
//!   `transformCell`, `filterRowCells`, `filterRow`) replayed over one row's cells.
//! - `json`: the scanner's `FilterModel` JSON (`ScannerModel.FilterModel.build` in hbase-rest).
//! - `lang`: the filter language of `ParseFilter` (stateless scans and multiget `filter=`).
//!
//! # Supported filters
//! Both syntaxes: `PrefixFilter`, `RowFilter`, `FamilyFilter`, `QualifierFilter`, `ValueFilter`,
//! `SingleColumnValueFilter`, `SingleColumnValueExcludeFilter`, `DependentColumnFilter`,
//! `ColumnPrefixFilter`, `MultipleColumnPrefixFilter`, `ColumnRangeFilter`, `FirstKeyOnlyFilter`,
//! `KeyOnlyFilter`, `PageFilter`, `InclusiveStopFilter`, `TimestampsFilter`,
//! `ColumnCountGetFilter`, `ColumnPaginationFilter`, lists (`FilterList` with `MUST_PASS_ALL` /
//! `MUST_PASS_ONE`; the language's `AND`, `OR`, parentheses), `SkipFilter` / `WhileMatchFilter`
//! (the language's `SKIP` and `WHILE`).
//! JSON only (as in HBase): `MultiRowRangeFilter`, `FuzzyRowFilter`, `RandomRowFilter`.
//! Language only (as in HBase master): `ColumnValueFilter`.
//!
//! Comparators: `BinaryComparator` (`binary:`), `BinaryPrefixComparator` (`binaryprefix:`),
//! `RegexStringComparator` (`regexstring:`), `SubstringComparator` (`substring:`) in both; the
//! JSON form also has `BitComparator` (`op` = `AND|OR|XOR`) and `NullComparator`.
//!
//! # Semantics (HBase's, as read from its sources)
//! 1. A compare filter keeps what `op` says of the **cell's** bytes against the comparator's:
//!    `LESS` keeps cells whose value is less than the comparator's value (HBase evaluates
//!    `comparator.compareTo(cell)` and inverts). `NO_OP` keeps nothing.
//! 2. `RegexStringComparator` matches anywhere in the UTF-8-decoded bytes (`find`, `DOTALL`);
//!    `SubstringComparator` is case-insensitive; `NullComparator` never equals a stored value;
//!    `BitComparator` matches when lengths agree and `value OP cell` has a non-zero byte.
//! 3. A row is evaluated as a region scanner would: `filterRowKey`, then each cell in order
//!    (family, qualifier, timestamp descending) with HBase's return codes — `NEXT_COL` skips the
//!    column's other versions, `NEXT_ROW` skips the rest of the current **family** (as a store
//!    scanner does), seek hints skip to the hinted column — then `filterRowCells`, then
//!    `filterRow`. Lists merge return codes with HBase 2's tables (`FilterListWithAND`: every
//!    sub-filter sees every cell, the largest step wins; `FilterListWithOR`: the smallest step
//!    wins, a sub-filter that asked to skip a column or family is not asked again inside it).
//! 4. Filters never fail at evaluation time: every error is found when parsing.
//!
//! # Deviations from HBase (row-level evaluation, no state across rows)
//! 1. Filters see the versions the read returns. HBase filters see every version in the time
//!    range before `maxVersions` is applied; [`VersionCapped`] restores that when the caller
//!    reads every version. The REST paths do (`params::PreparedFilter::new`: stateless scans,
//!    multiget, stateful scanners) whenever [`Filter::needs_all_versions`].
//! 2. `PageFilter` accepts every row; the caller enforces the limit ([`Filter::page_limit`])
//!    over the whole scan, where HBase counts per region. Nested under `MUST_PASS_ONE`, `SKIP` or
//!    `WHILE` it is ignored.
//! 3. `WhileMatchFilter` cannot end the scan: a row on which the wrapped filter rejects anything
//!    (row key, a cell, or the row) is dropped, like `SkipFilter`. For a wrapped filter that holds
//!    on a prefix of the key space (the usual `WHILE RowFilter(<, ...)`) the rows returned are
//!    the same as HBase's; the scan just reads further.
//! 4. `InclusiveStopFilter` drops the rows past its key instead of ending the scan (the caller
//!    may stop early with [`Filter::stop_row`]). `ColumnCountGetFilter` keeps the first `n`
//!    columns of every row, as in a Get; in a scan HBase stops after the first row holding more.
//! 5. `RandomRowFilter` decides per row from a hash of the key and a per-filter seed, so a row
//!    gets the same answer from [`RowFilter::accept_key`] and [`RowFilter::accept_row`].
//! 6. Java regex features absent from the `regex` crate (backreferences, look-around) are
//!    rejected at parse time with the compiler's message.
//! 7. The language accepts any ASCII whitespace (HBase: space and tab) and `filter_b64` bytes
//!    through [`parse_filter_language_bytes`].
//! 8. `MultipleColumnPrefixFilter` keeps a qualifier that starts with any of its prefixes and
//!    ignores duplicates. HBase rejects duplicates and tests only the largest prefix not above
//!    the qualifier, so with prefixes `a` and `ab` it drops `ac`.
//! 9. [`Filter::extra_columns`] lets a `SingleColumnValue[Exclude]Filter` (or
//!    `DependentColumnFilter`) see its column when the read selects other columns; HBase's
//!    filter would not see it and would let every row through (unless `filterIfMissing`).
//!
//! # Invariants
//! 1. Parsing never panics, whatever the input; nesting deeper than [`MAX_DEPTH`] is an error.
//! 2. [`RowFilter::accept_key`] rejecting a row implies [`RowFilter::accept_row`] rejects it.
//! 3. `accept_row` only removes or rewrites cells; it never reorders or invents them.

mod eval;
mod json;
mod lang;
#[cfg(test)]
mod tests;

use kura_backend::{Cell, RowFilter};
use std::cmp::Ordering;

pub use json::parse_filter_json;
pub use lang::{parse_filter_language, parse_filter_language_bytes};

/// Deepest nesting of lists and wrappers either parser accepts.
pub const MAX_DEPTH: usize = 64;

/// Largest compiled regular expression a `RegexStringComparator` may build (bytes).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// HBase's `CompareOperator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Less,
    LessOrEqual,
    Equal,
    NotEqual,
    GreaterOrEqual,
    Greater,
    NoOp,
}

impl CompareOp {
    /// The JSON names (`EQUAL`, `NOT_EQUAL`, ...). Case-insensitive.
    pub fn from_name(name: &str) -> Result<CompareOp, String> {
        Ok(match name.to_ascii_uppercase().as_str() {
            "LESS" => CompareOp::Less,
            "LESS_OR_EQUAL" => CompareOp::LessOrEqual,
            "EQUAL" => CompareOp::Equal,
            "NOT_EQUAL" => CompareOp::NotEqual,
            "GREATER_OR_EQUAL" => CompareOp::GreaterOrEqual,
            "GREATER" => CompareOp::Greater,
            "NO_OP" => CompareOp::NoOp,
            _ => {
                return Err(format!(
                    "invalid compare op '{name}' (expected one of LESS, LESS_OR_EQUAL, EQUAL, \
                     NOT_EQUAL, GREATER_OR_EQUAL, GREATER, NO_OP)"
                ))
            }
        })
    }

    /// The language's symbols (`<`, `<=`, `=`, `!=`, `>=`, `>`).
    pub fn from_symbol(symbol: &[u8]) -> Result<CompareOp, String> {
        Ok(match symbol {
            b"<" => CompareOp::Less,
            b"<=" => CompareOp::LessOrEqual,
            b"=" => CompareOp::Equal,
            b"!=" => CompareOp::NotEqual,
            b">=" => CompareOp::GreaterOrEqual,
            b">" => CompareOp::Greater,
            _ => {
                return Err(format!(
                    "invalid compare operator '{}' (expected one of <, <=, =, !=, >=, >)",
                    String::from_utf8_lossy(symbol)
                ))
            }
        })
    }

    /// HBase's `CompareFilter.compare`: given `comparator.compareTo(cell)`, true when the cell
    /// (or row) is filtered **out**.
    fn filters_out(self, compare_result: Ordering) -> bool {
        use Ordering::*;
        match self {
            CompareOp::Less => compare_result != Greater,
            CompareOp::LessOrEqual => compare_result == Less,
            CompareOp::Equal => compare_result != Equal,
            CompareOp::NotEqual => compare_result == Equal,
            CompareOp::GreaterOrEqual => compare_result == Greater,
            CompareOp::Greater => compare_result != Less,
            CompareOp::NoOp => true,
        }
    }
}

/// `BitComparator`'s bitwise operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
}

/// HBase's `ByteArrayComparable` family.
#[derive(Debug, Clone)]
pub enum Comparator {
    /// Lexicographic unsigned comparison with the whole value.
    Binary(Vec<u8>),
    /// Lexicographic comparison with the value's first `len` bytes.
    BinaryPrefix(Vec<u8>),
    /// Matches (compares equal) when the regex is found anywhere in the UTF-8-decoded bytes.
    RegexString(Box<regex::Regex>),
    /// Matches when the lower-cased bytes contain this (already lower-cased) string.
    Substring(String),
    /// Matches when lengths agree and `mask OP bytes` has a non-zero byte.
    Bit { mask: Vec<u8>, op: BitOp },
    /// Never matches a stored value (values are never null).
    Null,
}

impl Comparator {
    /// A `RegexStringComparator` with HBase's default flags (`DOTALL`).
    pub fn regex(pattern: &str) -> Result<Comparator, String> {
        regex::RegexBuilder::new(pattern)
            .dot_matches_new_line(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map(|re| Comparator::RegexString(Box::new(re)))
            .map_err(|e| format!("invalid regular expression '{pattern}': {e}"))
    }

    /// A `SubstringComparator` (case-insensitive, as HBase lower-cases both sides).
    pub fn substring(needle: &str) -> Comparator {
        Comparator::Substring(needle.to_lowercase())
    }

    /// True for the comparators the language allows only with `=` and `!=`.
    fn is_string_matcher(&self) -> bool {
        matches!(self, Comparator::RegexString(_) | Comparator::Substring(_))
    }

    /// HBase's `compareTo(data)`: the comparator's value against the cell's bytes;
    /// `Equal` means "matches".
    fn compare_to(&self, data: &[u8]) -> Ordering {
        match self {
            Comparator::Binary(value) => value.as_slice().cmp(data),
            Comparator::BinaryPrefix(value) => {
                let n = value.len().min(data.len());
                value.as_slice().cmp(&data[..n])
            }
            Comparator::RegexString(re) => {
                match_to_ordering(re.is_match(&String::from_utf8_lossy(data)))
            }
            Comparator::Substring(needle) => match_to_ordering(contains_ignore_case(data, needle)),
            Comparator::Bit { mask, op } => {
                if mask.len() != data.len() {
                    return Ordering::Greater;
                }
                let hit = mask.iter().zip(data).any(|(m, d)| match op {
                    BitOp::And => m & d != 0,
                    BitOp::Or => m | d != 0,
                    BitOp::Xor => m ^ d != 0,
                });
                match_to_ordering(hit)
            }
            Comparator::Null => Ordering::Greater,
        }
    }
}

fn match_to_ordering(matched: bool) -> Ordering {
    if matched {
        Ordering::Equal
    } else {
        Ordering::Greater
    }
}

/// `SubstringComparator`: `Bytes.toString(data).toLowerCase(Locale.ROOT).contains(needle)`.
fn contains_ignore_case(data: &[u8], needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    if data.is_ascii() {
        // Lower-casing ASCII stays ASCII, so a needle with other characters cannot occur.
        let n = needle.as_bytes();
        return needle.is_ascii()
            && data.len() >= n.len()
            && data
                .windows(n.len())
                .any(|w| w.iter().zip(n).all(|(a, b)| a.to_ascii_lowercase() == *b));
    }
    String::from_utf8_lossy(data)
        .to_lowercase()
        .contains(needle)
}

/// HBase's `CompareFilter.compare*`: true when `data` is filtered **out**.
fn filters_out(op: CompareOp, comparator: &Comparator, data: &[u8]) -> bool {
    if op == CompareOp::NoOp {
        return true;
    }
    op.filters_out(comparator.compare_to(data))
}

/// `FilterList`'s operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOp {
    /// `MUST_PASS_ALL`, the language's `AND`.
    MustPassAll,
    /// `MUST_PASS_ONE`, the language's `OR`.
    MustPassOne,
}

/// `SingleColumnValueFilter` / `SingleColumnValueExcludeFilter`.
#[derive(Debug, Clone)]
pub struct SingleColumnValue {
    pub family: Vec<u8>,
    pub qualifier: Vec<u8>,
    pub op: CompareOp,
    pub comparator: Comparator,
    /// Drop rows that lack the column (default false: they pass).
    pub filter_if_missing: bool,
    /// Test only the newest version (default true).
    pub latest_version_only: bool,
    /// The Exclude variant: the tested column is removed from the rows returned.
    pub exclude: bool,
}

/// One range of `MultiRowRangeFilter`; an empty bound is open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRange {
    pub start: Vec<u8>,
    pub start_inclusive: bool,
    pub stop: Vec<u8>,
    pub stop_inclusive: bool,
}

impl RowRange {
    fn contains(&self, row: &[u8]) -> bool {
        let above = self.start.is_empty()
            || match row.cmp(&self.start) {
                Ordering::Greater => true,
                Ordering::Equal => self.start_inclusive,
                Ordering::Less => false,
            };
        let below = self.stop.is_empty()
            || match row.cmp(&self.stop) {
                Ordering::Less => true,
                Ordering::Equal => self.stop_inclusive,
                Ordering::Greater => false,
            };
        above && below
    }
}

/// One key of `FuzzyRowFilter`: `mask[i] == 0` fixes byte `i` to `key[i]`, anything else is a
/// wildcard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuzzyKey {
    pub key: Vec<u8>,
    pub mask: Vec<u8>,
}

impl FuzzyKey {
    /// HBase's `satisfiesNoUnsafe`: positions past either end are not checked.
    fn matches(&self, row: &[u8]) -> bool {
        row.iter()
            .zip(&self.key)
            .zip(&self.mask)
            .all(|((r, k), m)| *m != 0 || r == k)
    }
}

/// A parsed HBase filter. Build one with [`parse_filter_json`] or [`parse_filter_language`];
/// wrap it in an `Arc` and hand it to the store as a [`RowFilter`].
#[derive(Debug, Clone)]
pub enum Filter {
    /// Rows whose key starts with the prefix.
    Prefix(Vec<u8>),
    /// Rows whose key passes the comparison.
    Row(CompareOp, Comparator),
    /// Cells whose family passes (a failing family is skipped).
    Family(CompareOp, Comparator),
    /// Cells whose qualifier passes.
    Qualifier(CompareOp, Comparator),
    /// Cells whose value passes.
    Value(CompareOp, Comparator),
    /// Whole rows, by the value of one column.
    SingleColumnValue(Box<SingleColumnValue>),
    /// Only the cells of one column whose value passes (HBase 2.1+ `ColumnValueFilter`).
    ColumnValue {
        family: Vec<u8>,
        qualifier: Vec<u8>,
        op: CompareOp,
        comparator: Comparator,
    },
    /// Cells whose timestamp equals that of a (passing) cell of the dependent column.
    DependentColumn {
        family: Vec<u8>,
        qualifier: Vec<u8>,
        drop_dependent: bool,
        compare: Option<(CompareOp, Comparator)>,
    },
    /// Cells whose qualifier starts with the prefix.
    ColumnPrefix(Vec<u8>),
    /// Cells whose qualifier starts with any of the prefixes (sorted, deduplicated; empty = all).
    MultipleColumnPrefix(Vec<Vec<u8>>),
    /// Cells whose qualifier lies in the range; `None` is unbounded.
    ColumnRange {
        min: Option<Vec<u8>>,
        min_inclusive: bool,
        max: Option<Vec<u8>>,
        max_inclusive: bool,
    },
    /// The first cell of each row.
    FirstKeyOnly,
    /// Every cell with its value emptied, or replaced by its length (4 bytes, big-endian).
    KeyOnly { len_as_val: bool },
    /// At most this many rows (enforced by the caller, see [`Filter::page_limit`]).
    Page(u64),
    /// Rows up to and including this key (down to it when reversed).
    InclusiveStop { stop: Vec<u8>, reversed: bool },
    /// Cells with one of these timestamps (sorted, deduplicated).
    Timestamps(Vec<i64>),
    /// The first `n` columns of each row, newest version only.
    ColumnCountGet(u32),
    /// Columns `offset .. offset + limit` of each row, newest version only.
    ColumnPagination { limit: u32, offset: u32 },
    /// Rows inside any of the ranges.
    MultiRowRange(Vec<RowRange>),
    /// Rows matching any fuzzy key.
    FuzzyRow(Vec<FuzzyKey>),
    /// Each row with probability `chance`.
    RandomRow { chance: f32, seed: u64 },
    /// Drops the whole row when the wrapped filter rejects any of its cells.
    Skip(Box<Filter>),
    /// See the module docs: a row-level approximation of HBase's scan-ending wrapper.
    WhileMatch(Box<Filter>),
    /// `FilterList`.
    List(ListOp, Vec<Filter>),
}

impl Filter {
    /// The row limit of a `PageFilter` at the top level or inside `MUST_PASS_ALL` lists (the
    /// smallest if several); the caller stops the scan after that many rows.
    pub fn page_limit(&self) -> Option<usize> {
        match self {
            Filter::Page(n) => Some(usize::try_from(*n).unwrap_or(usize::MAX)),
            Filter::List(ListOp::MustPassAll, filters) => {
                filters.iter().filter_map(Filter::page_limit).min()
            }
            _ => None,
        }
    }

    /// Columns a `SingleColumnValue[Exclude]Filter` or `DependentColumnFilter` must see even if
    /// the read did not select them: the caller adds them to the read and strips them from the
    /// rows returned. Deduplicated, in first-seen order.
    pub fn extra_columns(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        self.collect_extra_columns(&mut out);
        out
    }

    fn collect_extra_columns(&self, out: &mut Vec<(Vec<u8>, Vec<u8>)>) {
        let mut push = |f: &[u8], q: &[u8]| {
            if !out.iter().any(|(of, oq)| of == f && oq == q) {
                out.push((f.to_vec(), q.to_vec()));
            }
        };
        match self {
            Filter::SingleColumnValue(s) => push(&s.family, &s.qualifier),
            Filter::DependentColumn {
                family, qualifier, ..
            } => push(family, qualifier),
            Filter::Skip(inner) | Filter::WhileMatch(inner) => inner.collect_extra_columns(out),
            Filter::List(_, filters) => {
                for f in filters {
                    f.collect_extra_columns(out);
                }
            }
            _ => {}
        }
    }

    /// The key of an `InclusiveStopFilter` at the top level or inside `MUST_PASS_ALL` lists: the
    /// caller may stop the scan after this row (inclusive; the nearest one if several).
    pub fn stop_row(&self) -> Option<Vec<u8>> {
        match self {
            Filter::InclusiveStop { stop, .. } => Some(stop.clone()),
            Filter::List(ListOp::MustPassAll, filters) => {
                let stops = filters.iter().filter_map(Filter::stop_row);
                let reversed = self.is_reversed_stop();
                if reversed {
                    stops.max()
                } else {
                    stops.min()
                }
            }
            _ => None,
        }
    }

    fn is_reversed_stop(&self) -> bool {
        match self {
            Filter::InclusiveStop { reversed, .. } => *reversed,
            Filter::List(_, filters) => filters.iter().any(Filter::is_reversed_stop),
            _ => false,
        }
    }

    /// Tells direction-aware filters (`InclusiveStopFilter`) that the scan walks backwards, as
    /// HBase's `Filter.setReversed`. Call before sharing the filter.
    pub fn set_reversed(&mut self, reversed: bool) {
        match self {
            Filter::InclusiveStop { reversed: r, .. } => *r = reversed,
            Filter::Skip(inner) | Filter::WhileMatch(inner) => inner.set_reversed(reversed),
            Filter::List(_, filters) => {
                for f in filters {
                    f.set_reversed(reversed);
                }
            }
            _ => {}
        }
    }

    /// True when the filter looks at cells, so that which versions it sees changes its answer;
    /// see [`VersionCapped`]. False for filters that only judge row keys.
    pub fn needs_all_versions(&self) -> bool {
        !self.is_key_only()
    }

    /// The HBase class name of this filter, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Filter::Prefix(_) => "PrefixFilter",
            Filter::Row(..) => "RowFilter",
            Filter::Family(..) => "FamilyFilter",
            Filter::Qualifier(..) => "QualifierFilter",
            Filter::Value(..) => "ValueFilter",
            Filter::SingleColumnValue(s) if s.exclude => "SingleColumnValueExcludeFilter",
            Filter::SingleColumnValue(_) => "SingleColumnValueFilter",
            Filter::ColumnValue { .. } => "ColumnValueFilter",
            Filter::DependentColumn { .. } => "DependentColumnFilter",
            Filter::ColumnPrefix(_) => "ColumnPrefixFilter",
            Filter::MultipleColumnPrefix(_) => "MultipleColumnPrefixFilter",
            Filter::ColumnRange { .. } => "ColumnRangeFilter",
            Filter::FirstKeyOnly => "FirstKeyOnlyFilter",
            Filter::KeyOnly { .. } => "KeyOnlyFilter",
            Filter::Page(_) => "PageFilter",
            Filter::InclusiveStop { .. } => "InclusiveStopFilter",
            Filter::Timestamps(_) => "TimestampsFilter",
            Filter::ColumnCountGet(_) => "ColumnCountGetFilter",
            Filter::ColumnPagination { .. } => "ColumnPaginationFilter",
            Filter::MultiRowRange(_) => "MultiRowRangeFilter",
            Filter::FuzzyRow(_) => "FuzzyRowFilter",
            Filter::RandomRow { .. } => "RandomRowFilter",
            Filter::Skip(_) => "SkipFilter",
            Filter::WhileMatch(_) => "WhileMatchFilter",
            Filter::List(..) => "FilterList",
        }
    }
}

/// A filter applied before a read's version limit, as HBase does (its filters see every version
/// in the time range; `maxVersions` then counts the versions the filter included).
///
/// Use: when [`Filter::needs_all_versions`] is true, read with the largest version count the
/// families allow and pass `VersionCapped::new(filter, requested_versions)` to the store. E.g.
/// `ValueFilter(=, 'binary:old')` with `v=1` then returns the older version holding `old`,
/// and `TimestampsFilter` finds versions older than the newest.
#[derive(Debug)]
pub struct VersionCapped {
    filter: Filter,
    max_versions: usize,
}

impl VersionCapped {
    /// Wraps `filter`; at least one version per column is kept.
    pub fn new(filter: Filter, max_versions: u32) -> VersionCapped {
        let max_versions = usize::try_from(max_versions.max(1)).unwrap_or(usize::MAX);
        VersionCapped {
            filter,
            max_versions,
        }
    }

    /// The wrapped filter.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }
}

impl RowFilter for VersionCapped {
    fn accept_key(&self, row: &[u8]) -> bool {
        self.filter.accept_key(row)
    }

    fn accept_row(&self, row: &[u8], cells: &mut Vec<Cell>) -> bool {
        if !self.filter.accept_row(row, cells) {
            return false;
        }
        // Cells are newest first within a column: keep the first `max_versions` of each.
        let mut seen = 0usize;
        let mut keep = Vec::with_capacity(cells.len());
        for (i, c) in cells.iter().enumerate() {
            let same =
                i > 0 && cells[i - 1].family == c.family && cells[i - 1].qualifier == c.qualifier;
            seen = if same { seen + 1 } else { 1 };
            keep.push(seen <= self.max_versions);
        }
        let mut flags = keep.into_iter();
        cells.retain(|_| flags.next().unwrap_or(false));
        !cells.is_empty()
    }
}

impl RowFilter for Filter {
    fn accept_key(&self, row: &[u8]) -> bool {
        !self.rejects_key(row)
    }

    fn accept_row(&self, row: &[u8], cells: &mut Vec<Cell>) -> bool {
        eval::filter_row(self, row, cells)
    }
}

#[cfg(test)]
pub(crate) fn test_cell(family: &str, qualifier: &str, ts: i64, value: &str) -> Cell {
    Cell {
        family: family.as_bytes().to_vec(),
        qualifier: qualifier.as_bytes().to_vec(),
        timestamp: ts,
        value: value.as_bytes().to_vec(),
    }
}
