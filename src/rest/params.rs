//! Request parameters shared by the row, check-and-mutate and scanner resources: the limits on
//! keys, qualifiers and values, `family:qualifier` columns, `v=` and the `filter=` parameter with
//! its [`PreparedFilter`].
//!
//! # Invariants
//! 1. Every key, qualifier and value is checked against [`Limits`] before it reaches the store:
//!    at the limit works, one past is a 4xx that names the limit.
//! 2. A filter that judges cells sees every retained version; the requested count is applied
//!    after it ([`filters::VersionCapped`]), as in HBase.

use super::filters::{self, Filter};
use super::media::{KeyEncoding, Query};
use super::rowspec::parse_column;
use crate::error::{ApiError, ApiResult};
use crate::state::Limits;
use kura_backend::{ColumnSelection, ColumnSpec, ReadSpec, Row, RowFilter, ScanSpec};
use std::ops::Bound;
use std::sync::Arc;

/// 400 unless the row key is within the limit and not empty.
pub fn check_key(limits: &Limits, key: &[u8]) -> ApiResult<()> {
    if key.is_empty() {
        return Err(ApiError::bad("the row key is empty"));
    }
    if key.len() > limits.max_row_key {
        return Err(ApiError::bad(format!(
            "the row key is {} bytes; the limit is {}",
            key.len(),
            limits.max_row_key
        )));
    }
    Ok(())
}

/// 400 unless the qualifier is within the limit.
pub fn check_qualifier(limits: &Limits, qualifier: &[u8]) -> ApiResult<()> {
    if qualifier.len() > limits.max_qualifier {
        return Err(ApiError::bad(format!(
            "the column qualifier is {} bytes; the limit is {}",
            qualifier.len(),
            limits.max_qualifier
        )));
    }
    Ok(())
}

/// 413 unless the value is within the limit.
pub fn check_value(limits: &Limits, value: &[u8]) -> ApiResult<()> {
    if value.len() > limits.max_value {
        return Err(ApiError::PayloadTooLarge(format!(
            "a cell value is {} bytes; the limit is {}",
            value.len(),
            limits.max_value
        )));
    }
    Ok(())
}

/// Splits a `family:qualifier` column that must name a qualifier (possibly empty).
pub fn split_column(col: &[u8]) -> ApiResult<(Vec<u8>, Vec<u8>)> {
    match parse_column(col) {
        ColumnSpec::Column(f, q) if !f.is_empty() => Ok((f, q)),
        _ => Err(ApiError::bad(format!(
            "column {:?} must be family:qualifier",
            String::from_utf8_lossy(col)
        ))),
    }
}

/// `v=N`: versions to read (default `default`); must be at least 1.
pub fn versions_param(query: &Query, name: &str, default: u32) -> ApiResult<u32> {
    match query.number::<i64>(name)? {
        None => Ok(default),
        Some(n) if n >= 1 => Ok(n.min(u32::MAX as i64) as u32),
        Some(n) => Err(ApiError::bad(format!(
            "{name}={n}: versions must be at least 1"
        ))),
    }
}

/// A filter prepared for a read: the columns it needs are added to the read, and the cells the
/// caller did not ask for are stripped afterwards.
#[derive(Debug, Default)]
pub struct PreparedFilter {
    pub filter: Option<Arc<dyn RowFilter>>,
    /// A `PageFilter`'s row limit, enforced over the whole scan by the caller.
    pub page_limit: Option<usize>,
    /// An `InclusiveStopFilter`'s last row, enforced as a scan bound by the caller.
    pub stop_row: Option<Vec<u8>>,
    strip_to: Option<ColumnSelection>,
}

impl PreparedFilter {
    /// Wraps `filter`, widening `read.columns` with the filter's extra columns if needed.
    /// `reversed` tells direction-aware filters which way the scan walks.
    ///
    /// A filter that judges cells sees every retained version, as in HBase: `read.max_versions`
    /// is raised to the families' maximum and the requested count is applied after the filter
    /// ([`filters::VersionCapped`]), so `ValueFilter` with `v=1` finds an older matching version.
    pub fn new(filter: Option<Filter>, read: &mut ReadSpec, reversed: bool) -> Self {
        let Some(mut filter) = filter else {
            return PreparedFilter::default();
        };
        filter.set_reversed(reversed);
        let page_limit = filter.page_limit();
        let stop_row = filter.stop_row();
        let mut strip_to = None;
        if !read.columns.0.is_empty() {
            let original = read.columns.clone();
            for (f, q) in filter.extra_columns() {
                if !original.selects(&f, &q) {
                    read.columns.0.push(ColumnSpec::Column(f, q));
                    strip_to = Some(original.clone());
                }
            }
        }
        let requested = read.max_versions;
        let filter: Arc<dyn RowFilter> = if filter.needs_all_versions() && requested < u32::MAX {
            // The store caps this by each family's VERSIONS.
            read.max_versions = u32::MAX;
            Arc::new(filters::VersionCapped::new(filter, requested))
        } else {
            Arc::new(filter)
        };
        PreparedFilter {
            filter: Some(filter),
            page_limit,
            stop_row,
            strip_to,
        }
    }

    /// Narrows a scan to end at the filter's inclusive stop row, if it has one.
    pub fn bound_scan(&self, spec: &mut ScanSpec) {
        let Some(stop) = &self.stop_row else { return };
        if spec.reversed {
            let below = match &spec.low {
                Bound::Unbounded => true,
                Bound::Included(k) | Bound::Excluded(k) => k < stop,
            };
            if below {
                spec.low = Bound::Included(stop.clone());
            }
        } else {
            let above = match &spec.high {
                Bound::Unbounded => true,
                Bound::Included(k) | Bound::Excluded(k) => k > stop,
            };
            if above {
                spec.high = Bound::Included(stop.clone());
            }
        }
    }

    /// Whether [`finish`](Self::finish) may drop rows the store returned (the filter needed
    /// columns the request did not ask for): a row limit must then count finished rows, not
    /// the store's.
    pub fn strips(&self) -> bool {
        self.strip_to.is_some()
    }

    /// Drops the cells only the filter needed; `None` if the row is left empty.
    pub fn finish(&self, mut row: Row) -> Option<Row> {
        if let Some(sel) = &self.strip_to {
            row.cells.retain(|c| sel.selects(&c.family, &c.qualifier));
        }
        (!row.cells.is_empty()).then_some(row)
    }
}

/// Parses `filter=` (Thrift filter language) or `filter_b64=` (URL-safe base64 of it).
pub fn filter_param(query: &Query) -> ApiResult<Option<Filter>> {
    let bytes = match (query.first("filter_b64"), query.first("filter")) {
        (Some(b), _) if !b.is_empty() => {
            KeyEncoding::Base64Url.decode(b.as_bytes().to_vec(), "filter_b64")?
        }
        (_, Some(f)) if !f.is_empty() => f.as_bytes().to_vec(),
        _ => return Ok(None),
    };
    filters::parse_filter_language_bytes(&bytes)
        .map(Some)
        .map_err(|e| ApiError::bad(format!("invalid filter: {e}")))
}
