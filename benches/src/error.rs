//! The one error type of the load generator.

use thiserror::Error;

/// Everything that can stop a load run before it produces a result.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The target could not be reached or the connection broke.
    #[error("connection to {addr} failed: {source}")]
    Connect {
        /// `host:port` that was dialled.
        addr: String,
        /// The socket or handshake error.
        source: std::io::Error,
    },
    /// The HTTP exchange itself failed (broken connection, protocol error).
    #[error("http: {0}")]
    Http(String),
    /// A request did not complete within the configured timeout.
    #[error("request timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// A setup step (table creation, load phase, seed data) got an unexpected answer.
    #[error("setup step `{step}` failed: HTTP {status}: {body}")]
    Setup {
        /// What was being done.
        step: String,
        /// The status received (0 when no response arrived).
        status: u16,
        /// The response body, truncated.
        body: String,
    },
    /// The command line asked for something inconsistent.
    #[error("invalid arguments: {0}")]
    Args(String),
    /// The server answered with a body the tool could not decode.
    #[error("could not decode {what}: {detail}")]
    Decode {
        /// Which response was being read.
        what: String,
        /// The decoder's complaint.
        detail: String,
    },
    /// Writing results or starting a server failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// Result serialization failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// The chart could not be drawn.
    #[error("chart: {0}")]
    Chart(String),
}

impl LoadError {
    /// Whether the request may have reached the server (and a write been applied): false
    /// only when no connection could be made, so nothing was sent.
    pub fn may_have_arrived(&self) -> bool {
        !matches!(self, LoadError::Connect { .. })
    }
}

/// Result alias for the load generator.
pub type Result<T> = std::result::Result<T, LoadError>;
