//! Sequence rows: per-owner ids and creation times that hold whichever server hands them out
//! (any number of Kura servers on one store), using only the store's per-row check-and-mutate.
//!
//! A sequence row (the blog's and the action log's per-user row, see their key tables) holds
//! one column: the last id handed out, an 8-byte big-endian counter. The timestamp of that
//! cell is the creation time that went with the id. [`next`] reads the cell (value `v`, cell
//! timestamp `w`) and hands out
//!
//! `id = v + 1`, `time = max(now, w + 1)`
//!
//! by `check_and_mutate(column == v, put column = id @ time)`, retrying on a failed check.
//!
//! # Invariants
//! 1. Ids of one row are unique and consecutive from 1 (the counter of rows written before by
//!    an atomic increment continues): of two concurrent calls that read the same `v` exactly
//!    one passes its check, the other re-reads. The counter only grows, so a check can never
//!    pass against a value that changed and came back (no ABA).
//! 2. Times of one row strictly increase with ids: a later id never gets an earlier or equal
//!    time, whatever the clocks of the servers that took them. A server whose clock runs behind
//!    takes `w + 1`; one running ahead pulls the row's later times along with it.
//! 3. Every version of the counter is written at an explicit timestamp above the one before,
//!    so the latest version is always the last one written, on both backends (nothing rests on
//!    server-assigned timestamps, which Bigtable does not promise to be monotonic per row).
//! 4. The cost is a read plus a check-and-mutate per id (an increment before), plus one more of
//!    each per concurrent call on the same row that won first.
//! 5. With an idempotency key ([`next_recorded`]), the record of the request's answer is
//!    written by the same check-and-mutate that takes the id, and read by the same read that
//!    the check is computed from: a key takes at most one id, and a call that finds the key's
//!    record returns it instead of taking an id.

use super::clock::Clock;
use super::error::{AppError, AppResult};
use super::idempotency::{self, Record};
use kura_backend::{CheckAndMutate, ColumnSelection, ColumnSpec, Mutation, ReadSpec, Store};

/// Where a sequence lives: a table, a row and one column.
pub struct Sequence<'a> {
    pub table: &'a str,
    pub row: Vec<u8>,
    pub family: &'a str,
    pub qualifier: &'a [u8],
}

/// The next `(id, time)` of `seq` (see the module docs). `clock` supplies "now" and observes
/// the time handed out, so that this server's later ticks exceed it.
pub async fn next(kura: &Store, clock: &Clock, seq: &Sequence<'_>) -> AppResult<(u64, i64)> {
    match next_recorded(kura, clock, seq, None).await? {
        Taken::New { id, time, .. } => Ok((id, time)),
        Taken::Recorded(_) => Err(AppError::Internal(
            "a sequence without a key found a record".into(),
        )),
    }
}

/// What [`next_recorded`] found or took.
pub enum Taken {
    /// A new id and time; with a key, `record` is the answer stored along with them.
    New {
        id: u64,
        time: i64,
        record: Option<Record>,
    },
    /// The key's record: the request was applied before (its id was taken then).
    Recorded(Record),
}

/// The function that builds a request's answer from its `(id, time)`, to be stored with them.
pub type Answer<'a> = &'a (dyn Fn(u64, i64) -> AppResult<Record> + Sync);

/// [`next`] with an optional idempotency key and the answer builder (invariant 5).
pub async fn next_recorded(
    kura: &Store,
    clock: &Clock,
    seq: &Sequence<'_>,
    keyed: Option<(&[u8], Answer<'_>)>,
) -> AppResult<Taken> {
    let mut columns = vec![ColumnSpec::Column(
        seq.family.into(),
        seq.qualifier.to_vec(),
    )];
    if let Some((key, _)) = keyed {
        columns.push(idempotency::column(key));
    }
    let read = ReadSpec {
        columns: ColumnSelection(columns),
        ..ReadSpec::default()
    };
    loop {
        let row = kura.get(seq.table, &seq.row, &read).await?;
        if let (Some((key, _)), Some(row)) = (keyed, &row) {
            if let Some(found) = idempotency::find(row, key)? {
                return Ok(Taken::Recorded(found));
            }
        }
        let cell = row.and_then(|row| {
            row.cells
                .into_iter()
                .find(|c| c.family == seq.family.as_bytes() && c.qualifier == seq.qualifier)
        });
        let (expected, last, written) = match cell {
            None => (Vec::new(), 0, i64::MIN),
            Some(c) => {
                let last = <[u8; 8]>::try_from(c.value.as_slice())
                    .map(i64::from_be_bytes)
                    .ok()
                    .filter(|v| *v >= 0)
                    .ok_or_else(|| {
                        AppError::Internal(format!(
                            "the {} id sequence holds no counter ({} bytes)",
                            seq.table,
                            c.value.len()
                        ))
                    })?;
                (c.value, last, c.timestamp)
            }
        };
        let id = last.checked_add(1).ok_or_else(|| {
            AppError::Internal(format!("the {} id sequence is exhausted", seq.table))
        })?;
        let time = clock.tick().max(written.saturating_add(1));
        // Before it is stored: the lease (embedded) must cover it, and this server's later
        // ticks exceed it even if another server wins this round.
        clock.observe(time);
        let mut mutations = vec![Mutation::Put {
            family: seq.family.into(),
            qualifier: seq.qualifier.to_vec(),
            timestamp: Some(time),
            value: id.to_be_bytes().to_vec(),
        }];
        // `id` is positive: `last >= 0` and the addition did not overflow.
        let id = id as u64;
        let mut record = None;
        if let Some((key, answer)) = keyed {
            let r = answer(id, time)?;
            mutations.push(r.put(key, time.saturating_add(1))?);
            record = Some(r);
        }
        let cam = CheckAndMutate {
            row: seq.row.clone(),
            family: seq.family.into(),
            qualifier: seq.qualifier.to_vec(),
            expected,
            mutations,
        };
        if super::write::check_and_mutate(kura, seq.table, cam).await? {
            return Ok(Taken::New { id, time, record });
        }
    }
}
