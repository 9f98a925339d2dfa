//! [`ApiError`]: the one error type of the HTTP edge.
//!
//! Bodies are `text/plain`, worded as the HBase REST gateway words them (`R/ResourceBase.java`):
//! `Not found\r\n`, `Bad request: <what to fix>\r\n`, `Value not Modified\r\n`.
//!
//! # Invariants
//! 1. A caller mistake is always a 4xx whose message says what to fix; only a broken invariant
//!    is a 500, and only overload or an unavailable region is a 503.
//! 2. `status_code` is a `match` over every variant, with no catch-all arm of our own.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use kura_backend::Error as BackendError;

/// Everything a handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// An error from the store.
    #[error(transparent)]
    Actor(#[from] BackendError),
    /// No visible cells, no such table, scanner or resource.
    #[error("Not found")]
    NotFound,
    /// The request can never succeed as written; the text says what to fix.
    #[error("Bad request: {0}")]
    BadRequest(String),
    /// A check-and-mutate whose check failed (HBase answers 304).
    #[error("Value not Modified")]
    NotModified,
    /// The operation is not allowed on this resource.
    #[error("Forbidden: {0}")]
    Forbidden(String),
    /// The HTTP method is not supported on this path; the methods it takes, for `Allow`.
    #[error("Method not allowed: this path takes {0}")]
    MethodNotAllowed(&'static str),
    /// No representation the client accepts can be produced.
    #[error("Not acceptable: {0}")]
    NotAcceptable(String),
    /// The request body's Content-Type is not one this path reads.
    #[error("Unsupported media type: {0}")]
    UnsupportedMediaType(String),
    /// A body or a value over the configured limit.
    #[error("Payload too large: {0}")]
    PayloadTooLarge(String),
    /// The client stopped sending the request body (slow-body protection).
    #[error("Request timeout: {0}")]
    RequestTimeout(String),
    /// A request head (request line and headers) over the server's limit.
    #[error("Request header fields too large: {0}")]
    HeaderFieldsTooLarge(String),
    /// Too many open scanners.
    #[error("Too many requests: {0}")]
    TooManyRequests(String),
    /// Missing or wrong bearer token.
    #[error("Unauthorized")]
    Unauthorized,
    /// Temporarily unable to serve; retry later.
    #[error("Service unavailable: {0}")]
    Unavailable(String),
    /// A broken invariant: a bug in Kura.
    #[error("Internal error: {0}")]
    Internal(String),
}

/// Result alias of the HTTP edge.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// Shorthand for a 400 with a message.
    pub fn bad(msg: impl Into<String>) -> Self {
        ApiError::BadRequest(msg.into())
    }
}

fn actor_status(e: &BackendError) -> StatusCode {
    // Exhaustive: a new backend error does not compile until it has its status here.
    match e {
        BackendError::TableNotFound(_) | BackendError::NoSuchFamily { .. } => StatusCode::NOT_FOUND,
        BackendError::TableExists(_) => StatusCode::CONFLICT,
        BackendError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        // Incrementing a value that is not an 8-byte counter, or past the 64-bit range, is the
        // caller's mistake.
        BackendError::NotACounter(_) | BackendError::CounterOverflow(_) => StatusCode::BAD_REQUEST,
        // What this backend does not offer (a region split on Bigtable): the message names it.
        BackendError::Unsupported(_) => StatusCode::BAD_REQUEST,
        BackendError::Overloaded { .. }
        | BackendError::Unavailable(_)
        | BackendError::RegionUnavailable { .. }
        | BackendError::ShuttingDown
        | BackendError::DataDirInUse(_) => StatusCode::SERVICE_UNAVAILABLE,
        BackendError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::Actor(e) => actor_status(e),
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotModified => StatusCode::NOT_MODIFIED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::HeaderFieldsTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let text = match self {
            // HBase's wording: the store's detail is not needed to fix a 404.
            ApiError::Actor(BackendError::TableNotFound(t)) => format!("Not found: table {t}"),
            ApiError::Actor(e @ BackendError::NoSuchFamily { .. }) => format!("Not found: {e}"),
            ApiError::Actor(e) if status == StatusCode::BAD_REQUEST => format!("Bad request: {e}"),
            ApiError::Actor(e) if status == StatusCode::SERVICE_UNAVAILABLE => {
                format!("Unavailable: {e}")
            }
            other => other.to_string(),
        };
        let mut resp = HttpResponse::build(status);
        resp.insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/plain")));
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.insert_header((header::RETRY_AFTER, HeaderValue::from_static("1")));
        }
        if let ApiError::MethodNotAllowed(allow) = self {
            // RFC 9110 §15.5.6: a 405 lists the methods the resource takes.
            resp.insert_header((header::ALLOW, HeaderValue::from_static(allow)));
        }
        if matches!(self, ApiError::Unauthorized) {
            resp.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %self, "internal error answered 500");
        }
        if status == StatusCode::NOT_MODIFIED {
            // HTTP forbids a body on 304 (RFC 9110 §15.4.5): a keep-alive client would read it
            // as the start of the next response.
            return resp.finish();
        }
        resp.body(format!("{text}\r\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_mistakes_are_4xx_and_overload_is_503() {
        assert_eq!(ApiError::bad("x").status_code(), StatusCode::BAD_REQUEST);
        assert_eq!(
            ApiError::NotModified.status_code(),
            StatusCode::NOT_MODIFIED
        );
        let e = ApiError::Actor(BackendError::NoSuchFamily {
            table: "t".into(),
            family: "f".into(),
        });
        assert_eq!(e.status_code(), StatusCode::NOT_FOUND);
        let e = ApiError::Actor(BackendError::NotACounter("not a long".into()));
        assert_eq!(e.status_code(), StatusCode::BAD_REQUEST);
        let e = ApiError::Actor(BackendError::Overloaded { region: 1 });
        assert_eq!(e.status_code(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn bodies_are_hbase_worded_plain_text() {
        let resp = ApiError::NotFound.error_response();
        assert_eq!(
            resp.headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.as_bytes()),
            Some(&b"text/plain"[..])
        );
        assert_eq!(ApiError::bad("no key").to_string(), "Bad request: no key");
        assert_eq!(ApiError::NotModified.to_string(), "Value not Modified");
    }
}
