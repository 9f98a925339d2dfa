//! The shared routing table: table name -> immutable snapshot of its layout.
//!
//! Readers (every request through [`crate::Kura`]) take an `Arc` clone of a table's snapshot
//! from a `DashMap` shard and route without any further locking, on their own thread: no actor
//! is asked, the router included. Only the router writes it, by replacing a whole snapshot. A `DashMap` and not an `RwLock<HashMap>` because reads vastly
//! outnumber layout changes and its sharded locks keep concurrent readers off one cache line.
//!
//! # Invariants
//! 1. A snapshot's regions are sorted by bucket and their ranges tile `[0, buckets)`.
//! 2. Snapshots are replaced only by the router, after the catalog change they reflect is
//!    durable.
//! 3. A region has at most `capacity` client requests in flight (waiting in its mailbox or
//!    being served); past that a request is refused with `Overloaded` instead of queueing
//!    without bound.

use crate::catalog::{RegionId, TableDescriptor};
use crate::error::ActorError;
use crate::messages::{InFlightSlot, Reject, Reply};
use crate::region::RegionActor;
use crate::salt::{BucketRange, SaltBucket};
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

/// The way into a region actor (its address: one mailbox for client requests and control
/// messages) plus its in-flight gate.
#[derive(Clone)]
pub(crate) struct RegionHandle {
    pub id: RegionId,
    /// The actor's address.
    pub addr: Addr<RegionActor>,
    inflight: Arc<AtomicUsize>,
    capacity: usize,
}

impl RegionHandle {
    pub fn new(id: RegionId, addr: Addr<RegionActor>, capacity: usize) -> Self {
        RegionHandle {
            id,
            addr,
            inflight: Arc::new(AtomicUsize::new(0)),
            capacity: capacity.max(1),
        }
    }

    /// Send a client request built around a fresh responder and wait for its answer. Refused
    /// with `Overloaded` when `capacity` requests are already in flight to this region: the
    /// gate is the bound on what waits in the region's mailbox.
    pub async fn call<M, T>(&self, make: impl FnOnce(Reply<T>) -> M) -> Result<T, Reject>
    where
        M: Message<Result = ()> + Send + 'static,
        RegionActor: Handler<M>,
    {
        if self.inflight.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.inflight.fetch_sub(1, Ordering::AcqRel);
            return Err(Reject::Failed(ActorError::Overloaded {
                region: self.id.get(),
            }));
        }
        // The slot travels with the responder: freed when the region answers or drops the
        // request, even if this caller stops waiting first.
        let slot = InFlightSlot(self.inflight.clone());
        self.send(make, Some(slot)).await
    }

    /// A control message, without the gate: the router's and the operators' messages must get
    /// through even when clients saturate the region. It queues behind the client requests
    /// sent before it, which the region handles first.
    pub async fn call_unbounded<M, T>(&self, make: impl FnOnce(Reply<T>) -> M) -> Result<T, Reject>
    where
        M: Message<Result = ()> + Send + 'static,
        RegionActor: Handler<M>,
    {
        self.send(make, None).await
    }

    async fn send<M, T>(
        &self,
        make: impl FnOnce(Reply<T>) -> M,
        slot: Option<InFlightSlot>,
    ) -> Result<T, Reject>
    where
        M: Message<Result = ()> + Send + 'static,
        RegionActor: Handler<M>,
    {
        let (tx, rx) = oneshot::channel();
        // `do_send` queues whatever actix's mailbox capacity (a bound for senders that wait,
        // `Addr::send`): the in-flight gate is the bound here. A stopped actor's mailbox drops
        // the message, and with it the responder: the answer is then `RegionUnavailable`.
        self.addr.do_send(make(Reply::new(tx, slot)));
        self.answer(rx).await
    }

    async fn answer<T>(&self, rx: oneshot::Receiver<Result<T, Reject>>) -> Result<T, Reject> {
        match rx.await {
            Ok(answer) => answer,
            Err(_) => Err(Reject::Failed(ActorError::RegionUnavailable {
                region: self.id.get(),
                reason: "region actor stopped".into(),
            })),
        }
    }
}

/// One region in a snapshot.
#[derive(Clone)]
pub(crate) struct RegionRoute {
    pub range: BucketRange,
    pub arbiter: usize,
    pub handle: RegionHandle,
}

impl RegionRoute {
    pub fn id(&self) -> RegionId {
        self.handle.id
    }
}

/// An immutable snapshot of one table's layout.
pub(crate) struct TableRoute {
    pub desc: Arc<TableDescriptor>,
    pub regions: Vec<RegionRoute>,
    /// Shared across snapshots of the same table so counts survive splits.
    pub activity: Arc<[BucketActivity]>,
}

impl TableRoute {
    /// The region owning `bucket`.
    pub fn region_for(&self, bucket: SaltBucket) -> Option<&RegionRoute> {
        let i = self.regions.partition_point(|r| r.range.is_below(bucket));
        self.regions.get(i).filter(|r| r.range.contains(bucket))
    }

    /// Regions whose ranges intersect `range`.
    pub fn overlapping(&self, range: BucketRange) -> impl Iterator<Item = &RegionRoute> {
        self.regions.iter().filter(move |r| r.range.overlaps(range))
    }

    pub fn count_read(&self, bucket: SaltBucket) {
        if let Some(a) = self.activity.get(bucket.index()) {
            a.reads.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn count_write(&self, bucket: SaltBucket) {
        if let Some(a) = self.activity.get(bucket.index()) {
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
