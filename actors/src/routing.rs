//! The shared routing table: table name -> immutable snapshot of its layout.
//!
//! Readers (every request through [`crate::Kura`]) take an `Arc` clone of a table's snapshot
//! from a `DashMap` shard and route without any further locking; only the router writes it, by
//! replacing a whole snapshot. A `DashMap` and not an `RwLock<HashMap>` because reads vastly
//! outnumber layout changes and its sharded locks keep concurrent readers off one cache line.
//!
//! # Invariants
//! 1. A snapshot's regions are sorted by `bucket_start` and tile `[0, buckets)`.
//! 2. Snapshots are replaced only by the router, after the catalog change they reflect is
//!    durable.
//! 3. A request holds at most `capacity` in-flight slots per region; past that it is refused
//!    with `Overloaded` instead of queueing without bound.

use crate::catalog::TableDescriptor;
use crate::error::ActorError;
use crate::messages::{ClientRequest, InFlightSlot, Reject, Reply, RequestSender};
use crate::region::RegionActor;
use actix::{Addr, Handler, Message};
use dashmap::DashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Cumulative reads and writes of one salt bucket (relaxed atomics: counters, not sync).
#[derive(Debug, Default)]
pub(crate) struct BucketActivity {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
}

/// The ways into a region actor (its request queue for client requests, its mailbox for control
/// messages) plus its in-flight gate.
#[derive(Clone)]
pub(crate) struct RegionHandle {
    pub id: u64,
    /// The actor's mailbox: control messages.
    pub addr: Addr<RegionActor>,
    /// The actor's request queue: client requests (see [`RegionHandle::call`]).
    requests: RequestSender,
    inflight: Arc<AtomicUsize>,
    capacity: usize,
}

impl RegionHandle {
    pub fn new(id: u64, addr: Addr<RegionActor>, requests: RequestSender, capacity: usize) -> Self {
        RegionHandle {
            id,
            addr,
            requests,
            inflight: Arc::new(AtomicUsize::new(0)),
            capacity: capacity.max(1),
        }
    }

    /// Send a client request built around a fresh responder and wait for its answer. Refused
    /// with `Overloaded` when `capacity` requests are already in flight to this region.
    ///
    /// Client requests travel on a queue of their own, a tokio channel the actor drains as it
    /// would its mailbox (`RequestQueue` in `region/requests.rs`), rather than through the actix mailbox:
    /// the mailbox boxes every message and links it in a node of its own, two heap blocks the
    /// caller's thread allocates and the region's thread frees, per request, where the tokio
    /// channel stores requests in place in blocks of 32 slots it recycles.
    pub async fn call<M, T>(&self, make: impl FnOnce(Reply<T>) -> M) -> Result<T, Reject>
    where
        M: Into<ClientRequest>,
    {
        if self.inflight.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.inflight.fetch_sub(1, Ordering::AcqRel);
            return Err(Reject::Failed(ActorError::Overloaded { region: self.id }));
        }
        // The slot travels with the responder: freed when the region answers or drops the
        // request, even if this caller stops waiting first.
        let slot = InFlightSlot(self.inflight.clone());
        let (tx, rx) = oneshot::channel();
        // A closed queue (the actor stopped) drops the request, and with it the responder.
        let _ = self.requests.send(make(Reply::new(tx, Some(slot))).into());
        self.answer(rx).await
    }

    /// A control message, through the actor's mailbox, without the gate: the router's and
    /// the operators' messages must get through even when clients saturate the region.
    pub async fn call_unbounded<M, T>(&self, make: impl FnOnce(Reply<T>) -> M) -> Result<T, Reject>
    where
        M: Message<Result = ()> + Send + 'static,
        RegionActor: Handler<M>,
    {
        let (tx, rx) = oneshot::channel();
        // `do_send` never parks: actix's mailbox bound is for senders that wait, and the
        // router's messages are few.
        self.addr.do_send(make(Reply::new(tx, None)));
        self.answer(rx).await
    }

    async fn answer<T>(&self, rx: oneshot::Receiver<Result<T, Reject>>) -> Result<T, Reject> {
        match rx.await {
            Ok(answer) => answer,
            Err(_) => Err(Reject::Failed(ActorError::RegionUnavailable {
                region: self.id,
                reason: "region actor stopped".into(),
            })),
        }
    }
}

/// One region in a snapshot.
#[derive(Clone)]
pub(crate) struct RegionRoute {
    pub bucket_start: u32,
    pub bucket_end: u32,
    pub arbiter: usize,
    pub handle: RegionHandle,
}

impl RegionRoute {
    pub fn id(&self) -> u64 {
        self.handle.id
    }

    pub fn range(&self) -> (u32, u32) {
        (self.bucket_start, self.bucket_end)
    }
}

/// An immutable snapshot of one table's layout.
pub(crate) struct TableRoute {
    pub desc: TableDescriptor,
    pub regions: Vec<RegionRoute>,
    /// Shared across snapshots of the same table so counts survive splits.
    pub activity: Arc<[BucketActivity]>,
}

impl TableRoute {
    /// The region owning `bucket`.
    pub fn region_for(&self, bucket: u32) -> Option<&RegionRoute> {
        let i = self.regions.partition_point(|r| r.bucket_end <= bucket);
        self.regions.get(i).filter(|r| r.bucket_start <= bucket)
    }

    /// Regions whose ranges intersect `[start, end)`.
    pub fn overlapping(&self, (start, end): (u32, u32)) -> impl Iterator<Item = &RegionRoute> {
        self.regions
            .iter()
            .filter(move |r| r.bucket_start < end && start < r.bucket_end)
    }

    pub fn count_read(&self, bucket: u32) {
        if let Some(a) = self.activity.get(bucket as usize) {
            a.reads.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn count_write(&self, bucket: u32) {
        if let Some(a) = self.activity.get(bucket as usize) {
            a.writes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Table name -> current snapshot.
#[derive(Default)]
pub(crate) struct RoutingTable {
    pub tables: DashMap<String, Arc<TableRoute>>,
}

impl RoutingTable {
    pub fn get(&self, table: &str) -> Option<Arc<TableRoute>> {
        self.tables.get(table).map(|r| Arc::clone(r.value()))
    }
}
