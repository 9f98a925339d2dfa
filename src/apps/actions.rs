//! The user action log (SEED_REQUIREMENTS.md §1.3): one row per action, read newest first with
//! the SQL's `LIMIT .. OFFSET ..` paging or with cursors.
//!
//! # Table `useractions`, family `content`
//! Every row of user `u` starts with `P(u) = hash4(u as 8 BE bytes) (4) | u (8, BE)`.
//!
//! | row | bytes | cells |
//! |---|---|---|
//! | action | `P(u) (12) \| 0x00 \| u64::MAX - stamp (8, BE) \| action_id (8, BE)` = 29 B | `content:name` = UTF-8 name |
//! | id sequence | `P(u) (12) \| 0x01` = 13 B | `content:seq` = 8-byte BE last action id, at cell timestamp = the last server stamp ([`super::sequence`]) |
//!
//! The list is the partial scan `[P(u)|0x00, P(u)|0x01)`: `stamp` descending, ties by
//! `action_id` ascending. `stamp` and `action_id` are read back from the key; only the name is a
//! cell (the document reads only `content:name`).
//!
//! # Invariants
//! 1. `action_id` and the server's stamp are taken together from the user's sequence row by a
//!    check-and-mutate loop ([`super::sequence`]), whichever of any number of servers takes
//!    them: ids are unique and increasing per user, and server-stamped actions (no `stamp` in
//!    the body) get strictly increasing stamps in id order. A client's `stamp` is stored as
//!    given.
//! 2. Every action has a row of its own: the key ends with the unique `action_id`, so actions
//!    posted in the same millisecond (on one server or several, or with the same client
//!    `stamp`) never overwrite each other. Equal stamps list by `action_id` ascending.
//! 3. One user's rows share the 4-byte salt prefix (table salt `prefix_len = 4`): one region, and
//!    a list request scans inside it.
//! 4. `offset` skips rows in the scan (cost O(offset + limit) rows read, as the document says);
//!    `after` starts strictly after the cursor's key, and `offset` then skips from there.

use super::clock;
use super::cursor;
use super::error::{AppError, AppResult};
use super::idempotency::{self, Record};
use super::keys::{hash4_u64, prefix_end, rev_time, unrev_time, KeyReader};
use super::request;
use super::scan::scan_rows;
use super::sequence::{self, Sequence};
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use kura_backend::{ColumnSelection, ColumnSpec, Mutation, ReadSpec, RowMutation, ScanSpec};
use serde::{Deserialize, Serialize};
use std::ops::Bound;

/// The action log's table.
pub const TABLE: &str = "useractions";
/// Its one family.
pub const FAMILY: &str = "content";
const NAME: &[u8] = b"name";
const SEQ: &[u8] = b"seq";

const ACTION: u8 = 0x00;
const SEQUENCE: u8 = 0x01;

/// An action as served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    pub action_id: u64,
    pub user_id: u64,
    pub name: String,
    pub stamp: u64,
}

fn user_prefix(user: u64, kind: u8) -> Vec<u8> {
    let mut k = Vec::with_capacity(29);
    k.extend_from_slice(&hash4_u64(user));
    k.extend_from_slice(&user.to_be_bytes());
    k.push(kind);
    k
}

fn action_key(user: u64, stamp: u64, id: u64) -> Vec<u8> {
    let mut k = user_prefix(user, ACTION);
    k.extend_from_slice(&rev_time(stamp));
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// `(stamp, action_id)` from an action key.
fn decode_key(key: &[u8]) -> Option<(u64, u64)> {
    let mut r = KeyReader::new(key, 13);
    let rev = r.u64()?;
    let id = r.u64()?;
    r.at_end().then(|| (unrev_time(rev.to_be_bytes()), id))
}

/// Registers the action log's routes (relative to `/apps`).
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/actions/users/{user_id}")
            .route(web::post().to(create))
            .route(request::get_or_head().to(list))
            .default_service(request::allow_only("POST, GET, HEAD")),
    );
}

#[derive(Deserialize)]
struct NewAction {
    name: String,
    stamp: Option<u64>,
}

async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Payload,
) -> AppResult<HttpResponse> {
    let user = request::path_u64(&req, "user_id")?;
    let new: NewAction = request::read_json(&req, body, &state.limits).await?;
    request::check_value(&state.limits, "the action's name", new.name.as_bytes())?;
    if let Some(s) = new.stamp.filter(|s| *s > clock::LATEST_MS as u64) {
        return Err(AppError::bad(format!(
            "stamp must be in 0..={} ms since the Unix epoch, got {s}",
            clock::LATEST_MS
        )));
    }
    let key = idempotency::key(&req)?;
    let kura = state.kura.clone();
    let clock = state.clock.clone();
    super::ensure_table(&kura, TABLE).await?;
    let answer = request::run_detached(async move {
        // The id and the server's stamp together from the user's sequence row: unique ids,
        // and server-stamped actions in id order, whichever server takes them.
        let seq = Sequence {
            table: TABLE,
            row: user_prefix(user, SEQUENCE),
            family: FAMILY,
            qualifier: SEQ,
        };
        let build = |id: u64, time: i64| Action {
            action_id: id,
            user_id: user,
            name: new.name.clone(),
            stamp: new.stamp.unwrap_or(time.max(0) as u64),
        };
        let record = |id: u64, time: i64| Record::new(StatusCode::CREATED, &build(id, time));
        let keyed = key.as_deref().map(|k| (k, &record as sequence::Answer<'_>));
        let (action, record, time) =
            match sequence::next_recorded(&kura, &clock, &seq, keyed).await? {
                sequence::Taken::New { id, time, record } => (build(id, time), record, time),
                sequence::Taken::Recorded(r) if r.done => return Ok(r.response()),
                sequence::Taken::Recorded(r) => {
                    let action: Action = r.body_as()?;
                    let time = action.stamp as i64;
                    (action, Some(r), time)
                }
            };
        // The action row, from the answer alone: writing it again (a retry that finds the
        // record not done) puts the same cell.
        let m = RowMutation {
            row: action_key(user, action.stamp, action.action_id),
            mutations: vec![Mutation::Put {
                family: FAMILY.into(),
                qualifier: NAME.to_vec(),
                timestamp: Some(action.stamp as i64),
                value: action.name.clone().into_bytes(),
            }],
        };
        super::write::mutate(&kura, TABLE, m).await?;
        if let (Some(k), Some(r)) = (key.as_deref(), record) {
            let response = r.response();
            idempotency::finish(&kura, TABLE, seq.row.clone(), k, r, time.saturating_add(2))
                .await?;
            return Ok(response);
        }
        Ok(HttpResponse::Created().json(action))
    })
    .await?;
    Ok(answer)
}

async fn list(state: web::Data<AppState>, req: HttpRequest) -> AppResult<HttpResponse> {
    let user = request::path_u64(&req, "user_id")?;
    let q = request::query(&req)?;
    let limit = request::limit(&q)?;
    let offset = usize::try_from(request::query_u64(&q, "offset", 0)?)
        .map_err(|_| AppError::bad("offset is too large"))?;
    let prefix = user_prefix(user, ACTION);
    let low = match q.get("after").filter(|c| !c.is_empty()) {
        None => Bound::Included(prefix.clone()),
        Some(after) => {
            let key = cursor::decode(after, &prefix)?;
            if decode_key(&key).is_none() {
                return Err(AppError::bad(
                    "malformed cursor: it is not a position in this list",
                ));
            }
            Bound::Excluded(key)
        }
    };
    let high = prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let read = ReadSpec {
        columns: ColumnSelection(vec![ColumnSpec::Column(FAMILY.into(), NAME.to_vec())]),
        ..ReadSpec::default()
    };
    let spec = ScanSpec {
        low,
        high,
        read,
        ..ScanSpec::all()
    };
    super::ensure_table(&state.kura, TABLE).await?;
    let rows = scan_rows(&state.kura, TABLE, spec, offset, limit + 1).await?;
    let next = (rows.len() > limit).then(|| cursor::encode(&rows[limit - 1].key));
    let mut actions = Vec::with_capacity(limit);
    for row in rows.iter().take(limit) {
        let (stamp, id) = decode_key(&row.key)
            .ok_or_else(|| AppError::Internal("useractions row key of the wrong shape".into()))?;
        let name = row
            .cells
            .iter()
            .find(|c| c.qualifier == NAME)
            .map(|c| String::from_utf8_lossy(&c.value).into_owned())
            .unwrap_or_default();
        actions.push(Action {
            action_id: id,
            user_id: user,
            name,
            stamp,
        });
    }
    Ok(HttpResponse::Ok().json(serde_json::json!({ "actions": actions, "next": next })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_keys_order_newest_first_then_by_id() {
        let a = action_key(5, 100, 1);
        let b = action_key(5, 200, 2);
        let c = action_key(5, 200, 3);
        assert!(b < c && c < a);
        assert_eq!(a.len(), 29);
        assert_eq!(decode_key(&a), Some((100, 1)));
        assert!(a < user_prefix(5, SEQUENCE));
    }
}
