//! Collecting a bounded number of rows from a merged scan.
//!
//! # Invariants
//! 1. [`scan_rows`] returns rows in key order, drops the first `skip`, and returns at most `want`
//!    after them; it stops early only when the range is exhausted.
//! 2. Memory is bounded by `want` rows plus one scan page, whatever `skip` is.

use super::error::AppResult;
use kura_backend::{Row, ScanLimits, ScanRequest, ScanSpec, Store};

/// Rows of `spec` in order, skipping `skip` first and returning up to `want`.
pub async fn scan_rows(
    kura: &Store,
    table: &str,
    mut spec: ScanSpec,
    mut skip: usize,
    want: usize,
) -> AppResult<Vec<Row>> {
    let mut out = Vec::with_capacity(want.min(1024));
    while out.len() < want {
        let needed = skip.saturating_add(want - out.len());
        let page = ScanLimits {
            max_rows: needed.clamp(1, 1000),
            ..ScanLimits::default()
        };
        let got = kura
            .scan(
                table,
                ScanRequest {
                    spec: spec.clone(),
                    limit: Some(needed),
                    page,
                },
            )
            .await?;
        let Some(last) = got.rows.last().map(|r| r.key.clone()) else {
            break;
        };
        for row in got.rows {
            if skip > 0 {
                skip -= 1;
            } else if out.len() < want {
                out.push(row);
            }
        }
        if got.complete {
            break;
        }
        spec = spec.resume_after(&last);
    }
    Ok(out)
}
