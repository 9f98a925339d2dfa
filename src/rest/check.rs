//! `PUT`/`POST /{t}/{row}?check=put|delete|append|increment[&rr=true]` (spec §5,
//! `R/RowResource.java` checkAndPut, checkAndDelete, append, increment).
//!
//! # Invariants
//! 1. The body holds exactly one row; otherwise 400.
//! 2. check=put / check=delete: the last cell is the check (`fam:qual` and the expected value;
//!    an empty expected value matches an absent or empty cell). A failed check is a 304 and
//!    changes nothing; a passed one applies every other cell atomically.
//! 3. check=delete with only the check cell deletes every version of the checked column.
//! 4. check=increment amounts are decimal ASCII; stored counters are 8-byte big-endian.
//! 5. `rr=true` answers the new values of an append or increment as a CellSet.
//! 6. An `Idempotency-Key` header (1 to 256 bytes, else 400) makes the write idempotent: a retry
//!    with the same key on the same table and row, within the store's window (10 minutes,
//!    100,000 keys per region, surviving restarts), is not applied again and gets the first
//!    answer (same status, same new values). The key is scoped by the row in the store.

use super::cellset::{self, RowIn};
use super::media::{negotiate, Repr};
use super::params::{check_key, check_qualifier, check_value, split_column};
use super::rowspec::{parse_column, RowSpec};
use super::{check_families, table_or_404};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use actix_web::{HttpRequest, HttpResponse};
use kura_backend::{Append, CheckAndMutate, ColumnSpec, Increment, Mutation, Row};

/// The request header carrying an idempotency key.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// Longest idempotency key accepted, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 256;

/// The request's idempotency key, if any; 400 if it is empty or too long.
fn idempotency_key(req: &HttpRequest) -> ApiResult<Option<Vec<u8>>> {
    const NAME: actix_web::http::header::HeaderName =
        actix_web::http::header::HeaderName::from_static("idempotency-key");
    let mut values = req.headers().get_all(NAME);
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::bad("more than one Idempotency-Key header"));
    }
    let bytes = v.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_IDEMPOTENCY_KEY {
        return Err(ApiError::bad(format!(
            "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} bytes, got {}",
            bytes.len()
        )));
    }
    Ok(Some(bytes.to_vec()))
}

/// What a `?check=` write does (HBase's `RowResource` names them in the query, in any case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckMode {
    /// `check=put`: check-and-put.
    Put,
    /// `check=delete`: check-and-delete.
    Delete,
    /// `check=append`.
    Append,
    /// `check=increment`.
    Increment,
}

impl CheckMode {
    /// Parses the query value; 400 naming the four modes for anything else.
    pub fn parse(value: &str) -> ApiResult<CheckMode> {
        match value.to_ascii_lowercase().as_str() {
            "put" => Ok(CheckMode::Put),
            "delete" => Ok(CheckMode::Delete),
            "append" => Ok(CheckMode::Append),
            "increment" => Ok(CheckMode::Increment),
            _ => Err(ApiError::bad(format!(
                "Invalid check value '{value}'; use put, delete, append or increment"
            ))),
        }
    }

    /// The mode as the query names it.
    pub fn name(self) -> &'static str {
        match self {
            CheckMode::Put => "put",
            CheckMode::Delete => "delete",
            CheckMode::Append => "append",
            CheckMode::Increment => "increment",
        }
    }
}

/// Dispatches a `?check=` request whose body has been parsed into `rows`.
pub async fn handle(
    req: &HttpRequest,
    state: &AppState,
    table: &str,
    spec: &Result<RowSpec, ApiError>,
    rows: Vec<RowIn>,
    mode: CheckMode,
    rr: bool,
) -> ApiResult<HttpResponse> {
    let idem = idempotency_key(req)?;
    let desc = table_or_404(state, table).await?;
    let mut rows = rows;
    if rows.len() != 1 {
        return Err(ApiError::bad(format!(
            "check={} needs exactly one row in the body, found {}",
            mode.name(),
            rows.len()
        )));
    }
    let row = rows.remove(0);
    let mut key = match row.key {
        Some(k) => k,
        None => match spec {
            Ok(s) => s.write_row()?,
            Err(_) => return Err(ApiError::bad("Row key found to be null.")),
        },
    };
    check_key(&state.limits, &key)?;
    let url_columns: &[Vec<u8>] = spec.as_ref().map(|s| s.columns.as_slice()).unwrap_or(&[]);
    let mut cells = row.cells;
    let kura = &state.kura;
    match mode {
        CheckMode::Put => {
            if cells.len() < 2 {
                return Err(ApiError::bad(
                    "Either row key is null or no data found for columns specified: check=put \
                     needs the cells to put followed by the check cell",
                ));
            }
            let mut check = cells.pop().expect("at least two cells");
            let expected = check.value()?;
            let check_col = check
                .column
                .or_else(|| url_columns.first().cloned())
                .ok_or_else(|| ApiError::bad("Column not specified for check."))?;
            let (cf, cq) = match parse_column(&check_col) {
                ColumnSpec::Column(f, q) if !q.is_empty() => (f, q),
                _ => return Err(ApiError::bad("Column incorrectly specified.")),
            };
            let mut mutations = Vec::with_capacity(cells.len());
            let mut matched = false;
            for mut c in cells {
                let value = c.value()?;
                let col = c
                    .column
                    .ok_or_else(|| ApiError::bad("Column found to be null."))?;
                matched |= col == check_col;
                let (family, qualifier) = split_column(&col)?;
                check_families(&desc, [family.as_slice()])?;
                check_qualifier(&state.limits, &qualifier)?;
                check_value(&state.limits, &value)?;
                mutations.push(Mutation::Put {
                    family,
                    qualifier,
                    timestamp: c.timestamp,
                    value,
                });
            }
            if !matched {
                return Err(ApiError::bad("The column to put and check do not match."));
            }
            check_families(&desc, [cf.as_slice()])?;
            let cam = CheckAndMutate {
                row: key,
                family: cf,
                qualifier: cq,
                expected,
                mutations,
            };
            checked(kura.check_and_mutate_keyed(table, cam, idem).await?)
        }
        CheckMode::Delete => {
            let mut check = cells.pop().ok_or_else(|| {
                ApiError::bad("check=delete needs at least the check cell in the body")
            })?;
            // The cells to delete need no value (HBase's checkAndDelete reads only their
            // columns and timestamps); the check cell's value is the expected one.
            let expected = check.value()?;
            let check_col = check
                .column
                .or_else(|| url_columns.first().cloned())
                .ok_or_else(|| ApiError::bad("Column not specified for check."))?;
            let (cf, cq) = match parse_column(&check_col) {
                ColumnSpec::Column(f, q) => (f, q),
                ColumnSpec::Family(_) => {
                    return Err(ApiError::bad("Column to check incorrectly specified."))
                }
            };
            check_families(&desc, [cf.as_slice()])?;
            check_qualifier(&state.limits, &cq)?;
            let mut mutations = Vec::with_capacity(cells.len().max(1));
            if cells.is_empty() {
                mutations.push(Mutation::DeleteColumn {
                    family: cf.clone(),
                    qualifier: cq.clone(),
                    timestamp: None,
                });
            }
            for c in cells {
                let col = c
                    .column
                    .ok_or_else(|| ApiError::bad("Column found to be null."))?;
                match parse_column(&col) {
                    ColumnSpec::Family(family) => {
                        check_families(&desc, [family.as_slice()])?;
                        mutations.push(Mutation::DeleteFamily {
                            family,
                            timestamp: c.timestamp,
                        });
                    }
                    ColumnSpec::Column(family, qualifier) => {
                        check_families(&desc, [family.as_slice()])?;
                        check_qualifier(&state.limits, &qualifier)?;
                        mutations.push(Mutation::DeleteVersion {
                            family,
                            qualifier,
                            timestamp: c.timestamp,
                        });
                    }
                }
            }
            let cam = CheckAndMutate {
                row: key,
                family: cf,
                qualifier: cq,
                expected,
                mutations,
            };
            checked(kura.check_and_mutate_keyed(table, cam, idem).await?)
        }
        CheckMode::Append => {
            let mut columns = Vec::with_capacity(cells.len());
            for (i, mut c) in cells.into_iter().enumerate() {
                let value = c.value()?;
                let col = c
                    .column
                    .or_else(|| url_columns.get(i).cloned())
                    .ok_or_else(|| ApiError::bad("Column found to be null."))?;
                let (family, qualifier) = split_column(&col)?;
                check_families(&desc, [family.as_slice()])?;
                check_qualifier(&state.limits, &qualifier)?;
                check_value(&state.limits, &value)?;
                columns.push((family, qualifier, value));
            }
            if columns.is_empty() {
                return Err(ApiError::bad("check=append needs at least one cell"));
            }
            let new = kura
                .append_keyed(
                    table,
                    Append {
                        // The key is needed again only to answer the new values.
                        row: if rr {
                            key.clone()
                        } else {
                            std::mem::take(&mut key)
                        },
                        columns,
                        max_value: Some(state.limits.max_value),
                    },
                    idem,
                )
                .await?;
            result(req, rr, key, new)
        }
        CheckMode::Increment => {
            let mut columns = Vec::with_capacity(cells.len());
            for (i, mut c) in cells.into_iter().enumerate() {
                let value = c.value()?;
                let col = c
                    .column
                    .or_else(|| url_columns.get(i).cloned())
                    .ok_or_else(|| ApiError::bad("Column found to be null."))?;
                let (family, qualifier) = split_column(&col)?;
                check_families(&desc, [family.as_slice()])?;
                check_qualifier(&state.limits, &qualifier)?;
                let amount: i64 = std::str::from_utf8(&value)
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .ok_or_else(|| {
                        let text = String::from_utf8_lossy(&value);
                        ApiError::bad(format!(
                            "increment amount {text:?} is not a decimal integer (send the \
                             base64 of its ASCII digits, e.g. \"NQ==\" for 5)"
                        ))
                    })?;
                columns.push((family, qualifier, amount));
            }
            if columns.is_empty() {
                return Err(ApiError::bad("check=increment needs at least one cell"));
            }
            let new = kura
                .increment_keyed(
                    table,
                    Increment {
                        // The key is needed again only to answer the new values.
                        row: if rr {
                            key.clone()
                        } else {
                            std::mem::take(&mut key)
                        },
                        columns,
                    },
                    idem,
                )
                .await?;
            result(req, rr, key, new)
        }
    }
}

fn checked(passed: bool) -> ApiResult<HttpResponse> {
    if passed {
        Ok(HttpResponse::Ok().finish())
    } else {
        Err(ApiError::NotModified)
    }
}

fn result(
    req: &HttpRequest,
    rr: bool,
    key: Vec<u8>,
    cells: Vec<kura_backend::Cell>,
) -> ApiResult<HttpResponse> {
    if !rr {
        return Ok(HttpResponse::Ok().finish());
    }
    if cells.is_empty() {
        return Err(ApiError::NotModified);
    }
    let repr = negotiate(req, &[Repr::Json, Repr::Xml], Repr::Json)?;
    let body = cellset::render(repr, &[Row { key, cells }]);
    Ok(HttpResponse::Ok()
        .content_type(repr.header_value())
        .body(body))
}
