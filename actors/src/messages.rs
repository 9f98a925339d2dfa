//! The messages a region actor handles, one small documented struct per operation.
//!
//! Client requests (get, multi-get, scan, write) and control messages (flush, split, stats,
//! close...) are all actix messages with a `Handler` each, sent to the actor's `Addr` with
//! `do_send`: one mailbox per region carries both kinds, in the order they were sent.
//!
//! Every message carries its own responder (a tokio oneshot) instead of using actix's built-in
//! reply: a write is answered only after the group commit that makes it durable, which happens
//! after the handler has returned, and the handle bounds in-flight client requests itself (see
//! [`crate::routing::RegionHandle`]).
//!
//! Requests that address rows carry the salt bucket the sender routed them by (or, for scans, the
//! bucket range the sender believes the region owns). A region that no longer owns it answers
//! [`Reject::NotOwner`]: the handle re-reads the routing table and retries.

use crate::catalog::RegionId;
use crate::error::ActorError;
use crate::salt::{BucketRange, SaltBucket};
use actix::Message;
use kura_storage::model::*;
use kura_storage::RegionStats;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::oneshot;

/// Why a region did not serve a request.
#[derive(Debug)]
pub(crate) enum Reject {
    /// The region does not own the bucket (range) the request was routed by: a split moved it.
    NotOwner,
    /// A real answer: the request failed.
    Failed(ActorError),
}

impl From<ActorError> for Reject {
    fn from(e: ActorError) -> Self {
        Reject::Failed(e)
    }
}

/// The responder of a request. It holds the request's in-flight slot (requests that came
/// through the region's gate, [`crate::routing::RegionHandle::call`]): the slot is freed when the
/// answer is sent or the request is dropped unanswered, not when the caller stops waiting, so
/// requests their callers abandoned (a client that hung up) still count against the region's
/// bound until the region is done with them.
#[derive(Debug)]
pub(crate) struct Reply<T> {
    tx: oneshot::Sender<Result<T, Reject>>,
    _slot: Option<InFlightSlot>,
}

impl<T> Reply<T> {
    pub(crate) fn new(tx: oneshot::Sender<Result<T, Reject>>, slot: Option<InFlightSlot>) -> Self {
        Reply { tx, _slot: slot }
    }

    /// Answer; gives the answer back if the caller is gone.
    pub(crate) fn send(self, answer: Result<T, Reject>) -> Result<(), Result<T, Reject>> {
        self.tx.send(answer)
    }
}

/// One unit of a region's in-flight count, given back when dropped.
#[derive(Debug)]
pub(crate) struct InFlightSlot(pub(crate) Arc<std::sync::atomic::AtomicUsize>);

impl Drop for InFlightSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Read one row.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Get {
    pub bucket: SaltBucket,
    pub row: Vec<u8>,
    pub read: ReadSpec,
    pub filter: Option<Arc<dyn RowFilter>>,
    pub reply: Reply<Option<Row>>,
}

/// Read several rows of this region, answered in request order.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct MultiGet {
    pub rows: OneOrMore<(SaltBucket, Vec<u8>)>,
    pub read: ReadSpec,
    pub reply: Reply<Vec<Option<Row>>>,
}

/// One page of this region's part of a scan. `expect` is the bucket range the sender believes
/// the region owns; if it differs the region answers `NotOwner` (rows may have moved).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct ScanRegion {
    pub expect: BucketRange,
    pub spec: ScanSpec,
    pub limits: ScanLimits,
    pub reply: Reply<ScanPage>,
}

/// The result of one write of a [`Write`] batch.
#[derive(Debug)]
pub(crate) enum OpResult {
    /// Committed (or refused by the store).
    Done(Result<WriteOutcome, ActorError>),
    /// The region does not own the row's bucket: the op is handed back for re-routing.
    NotOwner(KeyedWrite),
}

/// The ops of a [`Write`], or its results: most writes carry one, held inline.
///
/// A region runs on another thread than most of its callers, and a heap block freed on
/// another thread than the one that allocated it costs the allocator's cross-thread free
/// (an atomic push, then the owner's collection), ~0.1 µs on a 2-vCPU VM (benches/README.md,
/// "what a crossing costs"). A one-op `Vec` would be allocated by the caller and freed by the region, and
/// its answer the other way round.
pub(crate) type OneOrMore<T> = smallvec::SmallVec<[T; 1]>;

/// Writes (puts, deletes, increments, appends, check-and-mutates), each tagged with its row's
/// bucket. Queued and committed with the other waiting writes under one fsync.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Write {
    pub ops: OneOrMore<(SaltBucket, KeyedWrite)>,
    pub reply: Reply<OneOrMore<OpResult>>,
}

/// Flush the memtable to a segment.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Flush {
    pub reply: Reply<()>,
}

/// Compact the segments (major: also drop masked, expired and excess versions).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Compact {
    pub major: bool,
    pub reply: Option<Reply<()>>,
}

/// Figures of the region, with the buckets it serves.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Stats {
    pub reply: Reply<(BucketRange, RegionStats)>,
}

/// Replace the region's column families (alter table).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct SetFamilies {
    pub families: Vec<FamilyDescriptor>,
    pub reply: Reply<()>,
}

/// First half of a split: commit waiting writes, flush, export the rows of buckets
/// `[at, end)` into a new store in `new_dir`, then stop serving those buckets.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct PrepareSplit {
    pub at: SaltBucket,
    pub new_dir: PathBuf,
    pub reply: Reply<()>,
}

/// Second half of a split, after the catalog commit: the narrowing of a prepared split is
/// final, and the region's background compactions drop the moved rows as they rewrite its
/// reference segments.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct CommitSplit {
    pub reply: Reply<()>,
}

/// Undo a prepared split whose catalog commit failed: serve `range` again.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct AbortSplit {
    pub range: BucketRange,
    pub reply: Reply<()>,
}

/// Commit waiting writes, then write a consistent copy of the region as of now into `dest`
/// (see `RegionStore::checkpoint`); the region goes on serving afterwards.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Checkpoint {
    pub dest: PathBuf,
    pub reply: Reply<kura_storage::CheckpointReport>,
}

/// Commit waiting writes, close the store (flush + sync) and stop the actor.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Close {
    pub reply: Reply<()>,
}

/// Internal: commit the writes queued so far (scheduled with `ctx.notify`, so it runs after the
/// messages already waiting in the mailbox have been handled).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Commit;

/// From a region to the router: my data passed the split threshold.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct AutoSplit {
    pub table: String,
    pub region: RegionId,
}

/// From the router to a region: the split it asked for failed; it may ask again later.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct AutoSplitFailed;
