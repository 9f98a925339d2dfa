//! Bigtable filters and conversions: the visibility filter F of BIGTABLE.md §3 (each family's
//! VERSIONS and TTL, the requested columns, time range and versions), the check-and-mutate
//! predicates of §4, row ranges, and ms ↔ µs timestamps.
//!
//! # Invariants
//! 1. F lists the requested user families explicitly, so `_kura` never comes back, and puts
//!    the time range before the version limit (the newest version *inside* the range).
//! 2. `Chain`/`Interleave` always get at least two members; a single filter is sent unwrapped.
//! 3. Every timestamp sent is a whole number of milliseconds in µs (`ms * 1000`); an end at or
//!    past the largest storable timestamp is sent as 0 (infinity).

use bigtable_rs::google::bigtable::v2;
use kura_backend::{ColumnSpec, Error, FamilyDescriptor, ReadSpec, Result, Timestamp};
use v2::column_range::{EndQualifier, StartQualifier};
use v2::row_filter::{Chain, Filter, Interleave};
use v2::value_range::{EndValue, StartValue};
use v2::{ColumnRange, RowFilter, TimestampRange, ValueRange};

/// The largest HBase timestamp Bigtable can store (µs must fit an i64 and be a multiple of
/// 1000).
pub const MAX_TS_MS: Timestamp = i64::MAX / 1000;

/// ms → µs for a stored timestamp (`InvalidArgument` outside `[0, MAX_TS_MS]`).
pub fn ts_micros(ms: Timestamp) -> Result<i64> {
    if (0..=MAX_TS_MS).contains(&ms) {
        Ok(ms * 1000)
    } else {
        Err(Error::InvalidArgument(format!(
            "timestamp {ms} is outside what Bigtable stores (0..={MAX_TS_MS} ms)"
        )))
    }
}

/// µs → ms (Kura writes whole milliseconds; anything finer is truncated).
pub fn ts_millis(us: i64) -> Timestamp {
    us.div_euclid(1000)
}

/// The µs end of a half-open range ending at `ms` (0 = infinity).
pub fn end_micros(ms: Timestamp) -> i64 {
    if ms > MAX_TS_MS {
        0
    } else {
        ms.max(0) * 1000
    }
}

/// Wrap a filter.
pub fn rf(f: Filter) -> RowFilter {
    RowFilter { filter: Some(f) }
}

/// Chain of filters (unwrapped when there is one).
pub fn chain(mut fs: Vec<RowFilter>) -> RowFilter {
    if fs.len() == 1 {
        return fs.pop().unwrap_or_default();
    }
    rf(Filter::Chain(Chain { filters: fs }))
}

/// Interleave (union) of filters (unwrapped when there is one; block-all when none).
pub fn interleave(mut fs: Vec<RowFilter>) -> RowFilter {
    match fs.len() {
        0 => rf(Filter::BlockAllFilter(true)),
        1 => fs.pop().unwrap_or_default(),
        _ => rf(Filter::Interleave(Interleave { filters: fs })),
    }
}

/// Exactly one column.
pub fn column(family: &str, qualifier: &[u8]) -> RowFilter {
    rf(Filter::ColumnRangeFilter(ColumnRange {
        family_name: family.to_string(),
        start_qualifier: Some(StartQualifier::StartQualifierClosed(qualifier.to_vec())),
        end_qualifier: Some(EndQualifier::EndQualifierClosed(qualifier.to_vec())),
    }))
}

/// Exactly one family (names are `[-_.a-zA-Z0-9]`, so escaping `.` and `-` suffices).
pub fn family(name: &str) -> RowFilter {
    let mut re = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() && c != '_' {
            re.push('\\');
        }
        re.push(c);
    }
    rf(Filter::FamilyNameRegexFilter(re))
}

/// Cells with `start_us <= ts < end_us` (end 0 = infinity).
pub fn time_range(start_us: i64, end_us: i64) -> RowFilter {
    rf(Filter::TimestampRangeFilter(TimestampRange {
        start_timestamp_micros: start_us,
        end_timestamp_micros: end_us,
    }))
}

/// The newest `n` cells of each column.
pub fn per_column(n: u32) -> RowFilter {
    rf(Filter::CellsPerColumnLimitFilter(
        i32::try_from(n.max(1)).unwrap_or(i32::MAX),
    ))
}

/// Values exactly equal to `v`.
pub fn value_equals(v: &[u8]) -> RowFilter {
    rf(Filter::ValueRangeFilter(ValueRange {
        start_value: Some(StartValue::StartValueClosed(v.to_vec())),
        end_value: Some(EndValue::EndValueClosed(v.to_vec())),
    }))
}

/// Values strictly below `v`.
pub fn value_below(v: &[u8]) -> RowFilter {
    rf(Filter::ValueRangeFilter(ValueRange {
        start_value: None,
        end_value: Some(EndValue::EndValueOpen(v.to_vec())),
    }))
}

/// Values strictly above `v`.
pub fn value_above(v: &[u8]) -> RowFilter {
    rf(Filter::ValueRangeFilter(ValueRange {
        start_value: Some(StartValue::StartValueOpen(v.to_vec())),
        end_value: None,
    }))
}

/// AND of two predicates that each yield cells of their own columns (BIGTABLE.md §1): a cell
/// comes out iff both yield one.
pub fn both(a: RowFilter, b: RowFilter) -> RowFilter {
    let first = |f: RowFilter| chain(vec![f, rf(Filter::CellsPerRowLimitFilter(1))]);
    chain(vec![
        interleave(vec![first(a), first(b)]),
        rf(Filter::CellsPerRowOffsetFilter(1)),
    ])
}

/// Non-empty values (the oneof set explicitly to empty bytes).
pub fn value_non_empty() -> RowFilter {
    rf(Filter::ValueRangeFilter(ValueRange {
        start_value: Some(StartValue::StartValueOpen(Vec::new())),
        end_value: None,
    }))
}

/// Values replaced by empty ones.
pub fn strip_value() -> RowFilter {
    rf(Filter::StripValueTransformer(true))
}

/// Now, in ms since the epoch, by Kura's clock (TTL cut-offs only).
pub fn now_ms() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The earliest visible timestamp (ms) of a family at `now`.
pub fn ttl_floor(f: &FamilyDescriptor, now: Timestamp) -> Timestamp {
    match f.ttl_secs {
        Some(t) => now.saturating_sub(i64::try_from(t).unwrap_or(i64::MAX).saturating_mul(1000)),
        None => 0,
    }
}

/// Filter F: the visible cells of the requested columns. `None` when the request can select
/// nothing (empty time range), so that the caller answers without a round trip. `families` are
/// the table's user families; the caller has checked that the request names only those.
pub fn visibility(families: &[FamilyDescriptor], read: &ReadSpec) -> Option<RowFilter> {
    let now = now_ms();
    let mut branches = Vec::new();
    for f in families {
        if !read.columns.touches_family(&f.name) {
            continue;
        }
        let name = String::from_utf8_lossy(&f.name).into_owned();
        let whole = read.columns.0.is_empty()
            || read
                .columns
                .0
                .iter()
                .any(|c| matches!(c, ColumnSpec::Family(g) if *g == f.name));
        let start = read.time_range.min.max(ttl_floor(f, now)).max(0);
        let end = read.time_range.max;
        if start >= end || start > MAX_TS_MS {
            continue;
        }
        let mut parts = vec![family(&name)];
        if !whole {
            let mut qs: Vec<&[u8]> = read
                .columns
                .0
                .iter()
                .filter_map(|c| match c {
                    ColumnSpec::Column(g, q) if *g == f.name => Some(q.as_slice()),
                    _ => None,
                })
                .collect();
            qs.sort();
            qs.dedup();
            parts.push(interleave(
                qs.into_iter().map(|q| column(&name, q)).collect(),
            ));
        }
        if start > 0 || end <= MAX_TS_MS {
            parts.push(time_range(start * 1000, end_micros(end)));
        }
        parts.push(per_column(read.max_versions.min(f.max_versions)));
        branches.push(chain(parts));
    }
    if branches.is_empty() {
        None
    } else {
        Some(interleave(branches))
    }
}

/// The visible cells of one column (the column, then the TTL cut if the family has one).
pub fn visible_column(f: &FamilyDescriptor, qualifier: &[u8]) -> Vec<RowFilter> {
    let name = String::from_utf8_lossy(&f.name).into_owned();
    let mut parts = vec![column(&name, qualifier)];
    let floor = ttl_floor(f, now_ms());
    if floor > 0 {
        parts.push(time_range(floor.min(MAX_TS_MS) * 1000, 0));
    }
    parts
}

/// The latest visible cell of one column (value kept or stripped).
pub fn latest_of(f: &FamilyDescriptor, qualifier: &[u8], strip: bool) -> RowFilter {
    let mut parts = visible_column(f, qualifier);
    parts.push(per_column(1));
    if strip {
        parts.push(strip_value());
    }
    chain(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kura_backend::{ColumnSelection, TimeRange};

    #[test]
    fn timestamps_convert_exactly() {
        assert_eq!(ts_micros(1_700_000_000_123).unwrap(), 1_700_000_000_123_000);
        assert_eq!(ts_millis(1_700_000_000_123_000), 1_700_000_000_123);
        assert!(ts_micros(-1).is_err());
        assert!(ts_micros(MAX_TS_MS + 1).is_err());
        assert_eq!(end_micros(i64::MAX), 0);
        assert_eq!(end_micros(5), 5000);
    }

    #[test]
    fn family_names_are_escaped_for_the_regex() {
        let RowFilter {
            filter: Some(Filter::FamilyNameRegexFilter(re)),
        } = family("a.b-c_d")
        else {
            panic!("not a family filter")
        };
        assert_eq!(re, "a\\.b\\-c_d");
    }

    #[test]
    fn an_empty_time_range_selects_nothing() {
        let fams = vec![FamilyDescriptor::new("cf")];
        let read = ReadSpec {
            columns: ColumnSelection::all(),
            time_range: TimeRange { min: 10, max: 10 },
            max_versions: 1,
        };
        assert!(visibility(&fams, &read).is_none());
        assert!(visibility(&fams, &ReadSpec::default()).is_some());
    }
}
