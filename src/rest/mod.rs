//! The HBase REST ("Stargate") compatible API: `/`, `/version`, `/status/cluster`,
//! `/namespaces`, and per table `schema`, `exists`, `regions`, rows, `multiget`, stateful
//! `scanner`s and stateless scans (`/{t}/*`). The spec is `docs/spec/HBASE_REST.md`.
//!
//! # Layout
//! - [`media`]: content negotiation, base64, URL decoding, query strings, body limits.
//! - [`rowspec`]: the path grammar `{row}[,{end}]/{cols}/{ts}[,{ts2}]`.
//! - [`cellset`]: the CellSet model in JSON and XML; [`cellset_json`] reads a JSON body.
//! - [`meta`]: table list, versions, cluster status, namespaces.
//! - [`schema`]: `/{t}/schema`, `/{t}/exists`, `/{t}/regions`.
//! - [`params`]: request parameters shared by rows, `check=` and scanners (limits, columns,
//!   `v=`, `filter=`).
//! - [`rows`]: row GET/PUT/POST/DELETE and `multiget`.
//! - [`check`]: the `check=` modes: put, delete, append, increment.
//! - [`scanners`]: stateful scanners and stateless scans.
//! - [`filters`]: the scanner JSON filter model and the Thrift filter language.
//!
//! Representations: JSON, XML, `text/plain` where HBase offers it, and
//! `application/octet-stream` for single cells. Protobuf (used only by HBase's Java test client)
//! is not offered: a request for it is a 406, a protobuf body a 415.
//!
//! # Invariants
//! 1. Routing works on the raw request path: the first segment is the table, the rest is split
//!    before any URL decoding (see [`rowspec`]).
//! 2. Reserved first segments ([`crate::RESERVED_NAMES`]) are never tables: a 400.
//! 3. Every mutation and read goes through [`kura_backend::Store`]; nothing here holds data except
//!    the open scanners' positions.

pub mod cellset;
pub mod cellset_json;
pub mod check;
pub mod filters;
pub mod media;
pub mod meta;
pub mod params;
pub mod rows;
pub mod rowspec;
pub mod scanners;
pub mod schema;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use actix_web::http::Method;
use actix_web::{web, HttpRequest, HttpResponse};
use kura_backend::ColumnSpec;
use kura_backend::TableDescriptor;

/// Registers the REST API: the default service, dispatched on the raw path, so it gets every
/// request no fixed prefix of another module matched (and costs no pattern match of its own).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.default_service(web::to(dispatch));
}

/// True if `name` can be a table: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}` and not reserved.
pub fn check_table_name(name: &str) -> ApiResult<()> {
    if crate::RESERVED_NAMES.contains(&name) {
        return Err(ApiError::bad(format!(
            "'{name}' is a reserved path segment and cannot be a table name"
        )));
    }
    let b = name.as_bytes();
    let valid = !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
    if !valid {
        return Err(ApiError::bad(format!(
            "invalid table name {name:?}: use 1 to 128 of [A-Za-z0-9_.-], not starting with . or -"
        )));
    }
    Ok(())
}

/// The table's descriptor, or 404.
pub async fn table_or_404(
    state: &AppState,
    table: &str,
) -> ApiResult<std::sync::Arc<TableDescriptor>> {
    state.kura.table(table).await?.ok_or(ApiError::NotFound)
}

/// 404 if a column names a family the table does not have (HBase's NoSuchColumnFamily).
pub fn check_families<'a>(
    desc: &TableDescriptor,
    families: impl IntoIterator<Item = &'a [u8]>,
) -> ApiResult<()> {
    for f in families {
        if !desc.families.iter().any(|d| d.name == f) {
            return Err(ApiError::Actor(kura_backend::Error::NoSuchFamily {
                table: desc.name.clone(),
                family: String::from_utf8_lossy(f).into_owned(),
            }));
        }
    }
    Ok(())
}

/// The family of a column spec.
pub fn spec_family(c: &ColumnSpec) -> &[u8] {
    match c {
        ColumnSpec::Family(f) | ColumnSpec::Column(f, _) => f,
    }
}

async fn dispatch(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> ApiResult<HttpResponse> {
    let path = req.uri().path();
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let (first_raw, rest) = match trimmed.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (trimmed, None),
    };
    let method = req.method().clone();
    if first_raw.is_empty() {
        return if rest.is_none() {
            only_get(&method, meta::root(&req, &state).await)
        } else {
            Err(ApiError::NotFound)
        };
    }
    let first = media::url_decode_str(first_raw)?;
    match &*first {
        "version" => return only_get(&method, meta::version(&req, rest.unwrap_or(""))),
        "status" => {
            return only_get(
                &method,
                meta::status(&req, &state, rest.unwrap_or("")).await,
            )
        }
        "namespaces" => return meta::namespaces(&req, &state, rest.unwrap_or("")).await,
        _ => {}
    }
    // `default:t` is the same table as `t` (HBase's default namespace).
    let table = first.strip_prefix("default:").unwrap_or(&first);
    check_table_name(table)?;
    let rest = rest.unwrap_or("");
    let (second, after) = match rest.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (rest, None),
    };
    match second {
        "" if after.is_none() => Err(ApiError::NotFound),
        "schema" => schema::handle(&req, payload, &state, table).await,
        "exists" => only_get(&method, schema::exists(&state, table).await),
        "regions" => only_get(&method, schema::regions(&req, &state, table).await),
        "scanner" => scanners::handle(&req, payload, &state, table, after.unwrap_or("")).await,
        s if s.starts_with("multiget") => {
            if method != Method::GET && method != Method::HEAD {
                return Err(ApiError::MethodNotAllowed("GET, HEAD"));
            }
            rows::multiget(&req, &state, table, after.unwrap_or("")).await
        }
        _ if rest.ends_with('*') => {
            if method != Method::GET && method != Method::HEAD {
                return Err(ApiError::MethodNotAllowed("GET, HEAD"));
            }
            scanners::stateless(&req, &state, table, &rest[..rest.len() - 1]).await
        }
        _ => match method {
            Method::GET | Method::HEAD => rows::get(&req, &state, table, rest).await,
            Method::PUT | Method::POST => rows::put(&req, payload, &state, table, rest).await,
            Method::DELETE => rows::delete(&req, &state, table, rest).await,
            _ => Err(ApiError::MethodNotAllowed("GET, HEAD, PUT, POST, DELETE")),
        },
    }
}

fn only_get(method: &Method, resp: ApiResult<HttpResponse>) -> ApiResult<HttpResponse> {
    if method == Method::GET || method == Method::HEAD {
        resp
    } else {
        Err(ApiError::MethodNotAllowed("GET, HEAD"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_follow_the_reliability_rules() {
        assert!(check_table_name("users_v1.2-x").is_ok());
        assert!(check_table_name(&"a".repeat(128)).is_ok());
        assert!(check_table_name(&"a".repeat(129)).is_err());
        assert!(check_table_name("..").is_err());
        assert!(check_table_name("-x").is_err());
        assert!(check_table_name("a/b").is_err());
        assert!(check_table_name("apps").is_err());
        assert!(check_table_name("healthz").is_err());
    }
}
