//! [`AppError`]: the one error type of the applications, rendered as the contract's JSON body
//! `{"error": {"code": "<snake_case>", "message": "<what to fix>"}}`.
//!
//! # Invariants
//! 1. Every response an application handler produces on failure goes through
//!    [`AppError::error_response`], so no actix default text body ever leaks out of `/apps/`.
//! 2. Caller mistakes are 4xx with a message that says what to fix; overload and unavailable
//!    regions are 503; a broken invariant is 500.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use kura_backend::Error as BackendError;

/// Result alias for the applications.
pub type AppResult<T> = Result<T, AppError>;

/// Everything an application request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Bad input: missing field, wrong type, limit out of range, bad cursor, bad time.
    #[error("{0}")]
    BadRequest(String),
    /// The entity the request names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The entity exists already, or still has dependants.
    #[error("{0}")]
    Conflict(String),
    /// The path exists but not with this method.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The request body is larger than the server accepts.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The client stopped sending the request body (slow-body protection).
    #[error("{0}")]
    RequestTimeout(String),
    /// The store refused or failed the request.
    #[error(transparent)]
    Store(#[from] BackendError),
    /// A broken invariant (a bug, or data written by someone else in a shape we do not read).
    #[error("{0}")]
    Internal(String),
}

impl AppError {
    /// Shorthand for [`AppError::BadRequest`].
    pub fn bad(msg: impl Into<String>) -> Self {
        AppError::BadRequest(msg.into())
    }

    /// The `code` field of the error body.
    pub fn code(&self) -> &'static str {
        match self {
            AppError::BadRequest(_) => "bad_request",
            AppError::NotFound(_) => "not_found",
            AppError::Conflict(_) => "conflict",
            AppError::MethodNotAllowed(_) => "method_not_allowed",
            AppError::PayloadTooLarge(_) => "payload_too_large",
            AppError::RequestTimeout(_) => "request_timeout",
            AppError::Internal(_) => "internal",
            AppError::Store(e) => match e {
                BackendError::TableNotFound(_) => "table_not_found",
                BackendError::TableExists(_) => "table_exists",
                BackendError::NoSuchFamily { .. } => "schema_mismatch",
                BackendError::InvalidArgument(_) => "invalid_argument",
                BackendError::NotACounter(_) => "not_a_counter",
                BackendError::CounterOverflow(_) => "counter_overflow",
                BackendError::Overloaded { .. } => "overloaded",
                BackendError::RegionUnavailable { .. } => "unavailable",
                BackendError::ShuttingDown => "shutting_down",
                BackendError::DataDirInUse(_) => "data_dir_in_use",
                BackendError::Unsupported(_) => "unsupported",
                BackendError::Unavailable(_) => "unavailable",
                BackendError::Internal(_) => "internal",
            },
        }
    }
}

impl ResponseError for AppError {
    fn status_code(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AppError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            AppError::Store(e) => match e {
                // The row key or value the request leads to is over a store limit, or an
                // increment overflowed: the caller can fix the input.
                BackendError::InvalidArgument(_)
                | BackendError::NotACounter(_)
                | BackendError::CounterOverflow(_)
                | BackendError::Unsupported(_) => StatusCode::BAD_REQUEST,
                BackendError::Overloaded { .. }
                | BackendError::Unavailable(_)
                | BackendError::RegionUnavailable { .. }
                | BackendError::ShuttingDown
                | BackendError::DataDirInUse(_) => StatusCode::SERVICE_UNAVAILABLE,
                // The application's own table is missing or has the wrong families: ours.
                BackendError::TableNotFound(_)
                | BackendError::TableExists(_)
                | BackendError::NoSuchFamily { .. }
                | BackendError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code()).json(serde_json::json!({
            "error": { "code": self.code(), "message": self.to_string() }
        }))
    }
}
