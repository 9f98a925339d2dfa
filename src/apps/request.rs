//! Request helpers shared by the applications: JSON bodies, query strings, path segments,
//! `limit`, and running a write so that it finishes even if the client goes away.
//!
//! Bodies and query strings are parsed here rather than by actix extractors, so that every
//! malformed input is an [`AppError::BadRequest`] in the contract's JSON shape and actix's
//! default text errors never leak.
//!
//! # Invariants
//! 1. A body over the limit is a 413, an empty or malformed body a 400, a body that stops
//!    arriving for `Limits::body_idle_secs` a 408, all with a JSON body.
//! 2. Path segments are fully percent-decoded exactly once (actix leaves `%`, `/`, `+` encoded
//!    in `match_info`; decoding here finishes the job without double-decoding).
//! 3. A path or query string that is not UTF-8 once percent-decoded is a 400, never decoded
//!    lossily into another name.

use super::error::{AppError, AppResult};
use crate::rest::media::{collect_body, BodyError};
use crate::state::Limits;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

/// Default and bounds of `limit` (APPS_API.md "Common rules").
pub const DEFAULT_LIMIT: usize = 10;
pub const MAX_LIMIT: usize = 1000;

/// Reads the whole body (at most `limits.max_body` bytes, pausing at most
/// `limits.body_idle_secs` between chunks) and parses it as JSON. A `Content-Length` over the
/// limit is refused before any of the body is read.
pub async fn read_json<T: DeserializeOwned>(
    req: &HttpRequest,
    mut payload: web::Payload,
    limits: &Limits,
) -> AppResult<T> {
    let max = limits.max_body;
    let too_large = || AppError::PayloadTooLarge(format!("body is larger than {max} bytes"));
    let declared = crate::rest::media::declared_length(req);
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let idle = Duration::from_secs(limits.body_idle_secs);
    let capacity = declared.unwrap_or(0) as usize;
    let body = match collect_body(&mut payload, max, idle, capacity).await {
        Ok(body) => body,
        Err(BodyError::TooLarge) => return Err(too_large()),
        Err(BodyError::Stalled(m)) => return Err(AppError::RequestTimeout(m)),
        Err(BodyError::Read(e)) => {
            return Err(AppError::bad(format!("could not read the body: {e}")))
        }
    };
    if body.is_empty() {
        return Err(AppError::bad("a JSON body is required"));
    }
    serde_json::from_slice(&body).map_err(|e| AppError::bad(format!("invalid JSON body: {e}")))
}

/// 413 unless `value`, about to be stored as one cell, is within the server's limit on a cell
/// value (`--max-value`, RELIABILITY.md "Limits"): what the applications store stays readable
/// and writable through the HBase REST API, which holds every cell to it. `what` names the
/// value for the client ("the article", "the node's properties").
pub fn check_value(limits: &Limits, what: &str, value: &[u8]) -> AppResult<()> {
    if value.len() > limits.max_value {
        return Err(AppError::PayloadTooLarge(format!(
            "{what} would be stored as {} bytes, over the limit of {} bytes on a cell value",
            value.len(),
            limits.max_value
        )));
    }
    Ok(())
}

/// The query string as a map (the last of repeated names wins).
pub fn query(req: &HttpRequest) -> AppResult<HashMap<String, String>> {
    check_utf8(req.query_string(), "the query string")?;
    web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map(|q| q.into_inner().into_iter().collect())
        .map_err(|e| AppError::bad(format!("malformed query string: {e}")))
}

/// `limit`: default 10, must be an integer in 1..=1000.
pub fn limit(q: &HashMap<String, String>) -> AppResult<usize> {
    match q.get("limit") {
        None => Ok(DEFAULT_LIMIT),
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(AppError::bad(format!(
                "limit must be an integer in 1..={MAX_LIMIT}, got {s:?}"
            ))),
        },
    }
}

/// A non-negative integer query parameter with a default.
pub fn query_u64(q: &HashMap<String, String>, name: &str, default: u64) -> AppResult<u64> {
    match q.get(name) {
        None => Ok(default),
        Some(s) => s.parse::<u64>().map_err(|_| {
            AppError::bad(format!("{name} must be a non-negative integer, got {s:?}"))
        }),
    }
}

/// Refuses raw (still percent-encoded) URL text that is not UTF-8 once decoded. actix decodes
/// the path it matches routes on lossily (`%FF` becomes U+FFFD), and so does the query-string
/// parser: without this check `/nodes/%FF` would name the node `"\u{FFFD}"` (invariant 3).
fn check_utf8(raw: &str, what: &str) -> AppResult<()> {
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|_| ())
        .map_err(|_| AppError::bad(format!("{what} is not valid UTF-8 once percent-decoded")))
}

/// A path segment, percent-decoded, as UTF-8.
pub fn path_str(req: &HttpRequest, name: &str) -> AppResult<String> {
    check_utf8(req.uri().path(), "the request path")?;
    let raw = req
        .match_info()
        .get(name)
        .ok_or_else(|| AppError::Internal(format!("route has no segment {name}")))?;
    // A `%` must start an escape: `%zz` or a bare `%` would otherwise name the literal text,
    // and `/nodes/%` and `/nodes/%25` the same node.
    let bytes = raw.as_bytes();
    let malformed = bytes.iter().enumerate().any(|(i, &b)| {
        b == b'%'
            && !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if malformed {
        return Err(AppError::bad(format!(
            "{name} is not valid percent-encoding: write a '%' as %25"
        )));
    }
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| AppError::bad(format!("{name} is not valid UTF-8 once percent-decoded")))
}

/// A path segment that must be an unsigned 64-bit integer.
pub fn path_u64(req: &HttpRequest, name: &str) -> AppResult<u64> {
    let s = path_str(req, name)?;
    s.parse::<u64>().map_err(|_| {
        AppError::bad(format!(
            "{name} must be an unsigned 64-bit integer, got {s:?}"
        ))
    })
}

/// Runs a multi-step write on its own task and waits for it. Dropping the request (client gone)
/// does not cancel the task, so a write never stops between an entity row and its index rows.
pub async fn run_detached<T, F>(fut: F) -> AppResult<T>
where
    T: 'static,
    F: Future<Output = AppResult<T>> + 'static,
{
    actix_web::rt::spawn(fut)
        .await
        .map_err(|e| AppError::Internal(format!("request task failed: {e}")))?
}

/// `{"error": ...}` 404 for unknown paths under `/apps/`.
pub async fn not_found(req: HttpRequest) -> AppResult<HttpResponse> {
    Err(AppError::NotFound(format!(
        "no such application path: {}",
        req.path()
    )))
}

/// A route for `GET` that also answers `HEAD` (the same handler; actix sends no body for a
/// HEAD): RFC 9110 asks every server that supports GET on a resource to support HEAD.
pub fn get_or_head() -> actix_web::Route {
    use actix_web::guard;
    web::route().guard(guard::Any(guard::Get()).or(guard::Head()))
}

/// The default service of a resource whose routes take the methods `allow` (`"GET, POST"`):
/// a JSON 405 for any other method, with the `Allow` header RFC 9110 requires of a 405.
pub fn allow_only(allow: &'static str) -> actix_web::Route {
    web::to(move |req: HttpRequest| async move {
        let mut resp = AppError::MethodNotAllowed(format!(
            "{} is not supported on {}; use {allow}",
            req.method(),
            req.path()
        ))
        .error_response();
        resp.headers_mut().insert(
            actix_web::http::header::ALLOW,
            actix_web::http::header::HeaderValue::from_static(allow),
        );
        resp
    })
}
