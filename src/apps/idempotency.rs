//! `Idempotency-Key` on the applications' writes: a retry within the window gets the first
//! answer (same status, same body) and applies nothing again, also across a crash and restart.
//!
//! # How
//! Every write under `/apps/` begins with one atomic single-row write (the "first row": a
//! sequence row's check-and-mutate for a create, the entity row's check-and-mutate for a PATCH
//! or DELETE, the URL row's increment for a counter hit). With a key, that same atomic write
//! also stores the **record** of the request: the cell `i:<key>` of the first row, holding the
//! answer the client will get (`{"status", "body", "done"}`), at a cell timestamp above the
//! write's own. A request first reads the first row with its record (in the same read its
//! check-and-mutate checks against); a record there means the request was already applied, and
//! its stored answer is returned. Two concurrent requests with one key both pass the read, but
//! only one passes the check-and-mutate: the other re-reads and finds the record.
//!
//! The rows a write changes after its first (list and index rows) are derived only from the
//! stored answer (ids, times and values it holds), written at explicit timestamps, so writing
//! them twice changes nothing. When they are all written, the record is rewritten with
//! `done: true`. A retry that finds a record not yet done (the server crashed between the first
//! row and the last, or the first attempt is still running) writes them again from the stored
//! answer, marks the record done, and returns the stored answer: after a crash mid-request the
//! retry completes the request, exactly once.
//!
//! The counter's hit is one row: it uses the store's own keyed increment
//! ([`kura_backend::Store::increment_keyed`], the REST API's mechanism), whose recorded outcome
//! (the counts after the hit) rebuilds the answer.
//!
//! # Invariants
//! 1. The record and the first row's change are one atomic write: both survive a crash or
//!    neither does (on both backends: a single-row check-and-mutate).
//! 2. Records live in family [`FAMILY`] of every application table, whose TTL is [`WINDOW_SECS`]
//!    (the REST API's default window): a key is remembered at least that long after its last
//!    write, then forgotten by reads and compactions.
//! 3. A key is scoped by the entity its first row belongs to (a user's sequence, an article,
//!    a node, a relationship, a URL), as the REST API's keys are scoped by row. Reusing a key for
//!    a different request on the same entity returns the first request's answer, as the REST
//!    API does; on another entity it is a new request.
//! 4. A key is 1 to 256 bytes (the REST API's limit); another length, or two `Idempotency-Key`
//!    headers, is a 400.

use super::error::{AppError, AppResult};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use kura_backend::{ColumnSpec, Mutation, Row};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The family holding idempotency records in every application table.
pub const FAMILY: &str = "i";
/// How long a record is kept: the family's TTL, in seconds.
pub const WINDOW_SECS: u64 = 600;
/// Longest accepted key, bytes.
pub const MAX_KEY: usize = 256;
const HEADER: &str = "Idempotency-Key";

/// The request's `Idempotency-Key`, if it has one.
pub fn key(req: &HttpRequest) -> AppResult<Option<Vec<u8>>> {
    let mut values = req.headers().get_all(HEADER);
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(AppError::bad("more than one Idempotency-Key header"));
    }
    let bytes = v.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_KEY {
        return Err(AppError::bad(format!(
            "Idempotency-Key must be 1 to {MAX_KEY} bytes, got {}",
            bytes.len()
        )));
    }
    Ok(Some(bytes.to_vec()))
}

/// The stored first answer of a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub status: u16,
    /// The answer's JSON text, byte for byte (`""` for none).
    pub body: String,
    /// Every row the request writes has been written.
    pub done: bool,
}

impl Record {
    /// A record of `body` answered with `status`, not yet done.
    pub fn new(status: StatusCode, body: &impl Serialize) -> AppResult<Record> {
        Ok(Record {
            status: status.as_u16(),
            body: serde_json::to_string(body)
                .map_err(|e| AppError::Internal(format!("cannot encode an answer: {e}")))?,
            done: false,
        })
    }

    /// The stored body as `T` (a record of this server's own writing).
    pub fn body_as<T: serde::de::DeserializeOwned>(&self) -> AppResult<T> {
        serde_json::from_str(&self.body)
            .map_err(|e| AppError::Internal(format!("an idempotency record is damaged: {e}")))
    }

    /// One field of the stored body (a JSON object).
    pub fn field(&self, name: &str) -> Option<Value> {
        serde_json::from_str::<Value>(&self.body)
            .ok()
            .and_then(|mut v| v.get_mut(name).map(Value::take))
    }

    /// The answer this record holds (a 204 has no body; its record's body is what finishing
    /// the request needs).
    pub fn response(&self) -> HttpResponse {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::OK);
        if self.body.is_empty() || status == StatusCode::NO_CONTENT {
            HttpResponse::build(status).finish()
        } else {
            HttpResponse::build(status)
                .content_type("application/json")
                .body(self.body.clone())
        }
    }

    /// The put that stores this record as `i:<key>` at `timestamp` (above the write it goes with,
    /// so a delete marker of that write never masks it).
    pub fn put(&self, key: &[u8], timestamp: i64) -> AppResult<Mutation> {
        let value = serde_json::to_vec(self)
            .map_err(|e| AppError::Internal(format!("cannot encode a record: {e}")))?;
        Ok(Mutation::Put {
            family: FAMILY.into(),
            qualifier: key.to_vec(),
            timestamp: Some(timestamp),
            value,
        })
    }

    /// The same record, marked done.
    pub fn finished(mut self) -> Record {
        self.done = true;
        self
    }
}

/// The column of `key`'s record, to read along with a first row.
pub fn column(key: &[u8]) -> ColumnSpec {
    ColumnSpec::Column(FAMILY.into(), key.to_vec())
}

/// The record of `key` in `row`, if there is one.
pub fn find(row: &Row, key: &[u8]) -> AppResult<Option<Record>> {
    let Some(cell) = row
        .cells
        .iter()
        .find(|c| c.family == FAMILY.as_bytes() && c.qualifier == key)
    else {
        return Ok(None);
    };
    serde_json::from_slice(&cell.value)
        .map(Some)
        .map_err(|e| AppError::Internal(format!("an idempotency record is damaged: {e}")))
}

/// Marks `record` done in `row` of `table` (after the request's last row is written), at
/// `timestamp` (above the record's first version) or now, whichever is later.
pub async fn finish(
    kura: &kura_backend::Store,
    table: &str,
    row: Vec<u8>,
    key: &[u8],
    record: Record,
    timestamp: i64,
) -> AppResult<()> {
    // Above the record's own version (`timestamp` is computed from it) and not in the past,
    // so that the family's TTL counts from now.
    let now = chrono::Utc::now().timestamp_millis();
    let put = record.finished().put(key, timestamp.max(now))?;
    super::write::mutate(
        kura,
        table,
        kura_backend::RowMutation {
            row,
            mutations: vec![put],
        },
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kura_backend::Cell;

    #[test]
    fn a_record_round_trips_through_its_cell() {
        let r = Record::new(StatusCode::CREATED, &serde_json::json!({"id": 7})).expect("record");
        let Ok(Mutation::Put { value, .. }) = r.put(b"k", 5) else {
            panic!("a put");
        };
        let row = Row {
            key: b"row".to_vec(),
            cells: vec![Cell {
                family: b"i".to_vec(),
                qualifier: b"k".to_vec(),
                timestamp: 5,
                value,
            }],
        };
        assert_eq!(find(&row, b"k").expect("readable"), Some(r));
        assert_eq!(find(&row, b"other").expect("readable"), None);
    }
}
