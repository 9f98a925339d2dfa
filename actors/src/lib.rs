//! Kura's actor topology: the router, the region actors, salting, merged scans, region splits.
//!
//! HTTP handlers and applications use only [`Kura`], the cloneable client handle, and the types
//! re-exported here.
//!
//! # Layering rule
//! This crate knows nothing of HTTP. It depends on `kura-storage` and actix only.
//!
//! # Layout
//! - [`client`]: [`Kura`], the handle: routes requests with the shared routing table.
//! - [`router`]: [`router::RouterActor`], the only writer of the layout (create, alter, drop,
//!   split) and of the catalog.
//! - [`region`]: [`region::RegionActor`], one per region, the sole owner of its store; group
//!   commit.
//! - `messages`: one struct per region request. `routing`: the shared routing table.
//!   `scan_merge`: fan-out and k-way merge of scans. `background`: the regions' flush,
//!   compaction and log-sync threads. `memory`: the server's memtable budget over all regions.
//! - [`catalog`]: tables and region layout, persisted atomically; [`RegionId`]. [`salt`]: the
//!   bucket hash; [`SaltBucket`] and [`BucketRange`]. A region id and a bucket are distinct
//!   types, raw numbers only at the edges (the catalog file, directory names, errors, the
//!   operators' views).
//! - [`error`]: the crate's error enum.
//!
//! # Message flow
//! ```text
//!   caller (HTTP handler, app)
//!     │ Kura::get / mutate / scan ...            Kura::create_table / split_region ...
//!     │ 1. bucket = xxh3(key or prefix) % buckets      │
//!     │ 2. region = routing[table].region_for(bucket)  ▼
//!     │    (DashMap read, no actor hop)          RouterActor ── catalog.json (atomic rewrite)
//!     │                                              │  publishes new snapshots into
//!     ▼                                              ▼
//!   RegionHandle (in-flight gate: Overloaded)    routing table (DashMap<table, Arc<TableRoute>>)
//!     │ request + oneshot responder, an actix message (do_send) into the region's
//!     │ one mailbox; control messages (flush, split, stats, close) queue there too
//!     ▼
//!   RegionActor on arbiter k ── RegionStore (log, memtable, segments)
//!     reads: answered in the handler
//!     writes: queued; ctx.notify(Commit) runs after the waiting messages:
//!             one write_batch = one fsync for every queued write, then all answered
//!     NotOwner (bucket moved by a split) ──► handle re-reads the routing table and retries
//! ```
//!
//! # Concurrency decisions
//! 1. The region actor is the lock for its data: no mutex guards a store; linearizability of a
//!    row's writes (increments, check-and-mutate) follows from one actor owning the row.
//! 2. Each region actor is started with `Actor::start_in_arbiter` on the least loaded of a pool
//!    of arbiters (one thread each, one per core by default). `SyncArbiter` would run N copies
//!    of one actor and break single ownership.
//! 3. The router does no request work and no I/O on its thread (the catalog is written on a
//!    blocking thread); requests never pass through it: a caller routes on its own thread,
//!    with a read of the shared routing table. The router applies one layout change at a
//!    time because it is an actor handling one message at a time (`AtomicResponse`), not
//!    because of a lock.
//! 4. A region has one inbox, its actix mailbox, for client requests and control messages
//!    alike, so one order holds between them. What waits there is bounded by an in-flight
//!    gate per region in the handle, not by actix's mailbox capacity (messages go in with
//!    `do_send`): past `in_flight_limit` client requests a caller gets `Overloaded` at once
//!    rather than queueing without bound. A request holds its slot until the region answers
//!    or drops it (the slot travels in its `Reply`), even if its caller stopped waiting.
//! 5. Background work stays off the region's thread where it can: compactions run on threads
//!    of their own (`background.rs`; `compaction_task` is `Send`) and are installed back on the actor; a region
//!    starts a minor compaction by itself once it holds 6 segments, and a major one right
//!    after a split to drop the rows that moved away (until then its size would ask for
//!    another split).
//! 6. Scans are stateless: the handle pages every region and merges; a continuation is just
//!    `ScanSpec::resume_after(last key)`, so nothing expires and nothing is held between pages.
//!
//! # Invariants
//! 1. Every row key maps to exactly one salt bucket, forever ([`salt`]); every bucket of a table
//!    is owned by exactly one region at any time.
//! 2. A write is acknowledged only after it is durable to the durability mode.
//! 3. Layout changes are durable (catalog rewritten) before any request is routed by them.
//! 4. A split loses no acknowledged write and a scan spanning it returns every row once.
//! 5. A region whose store failed answers `RegionUnavailable`; other regions keep serving.

mod backend;
mod background;
pub mod catalog;
pub mod client;
pub mod error;
mod memory;
mod messages;
pub mod region;
pub mod router;
mod routing;
pub mod salt;
mod scan_merge;

pub use catalog::{RegionId, SaltConfig, TableDescriptor};
pub use client::{AlterMode, Kura, KuraConfig, RegionInfo, ScanRequest};
pub use error::{ActorError, Result};
pub use kura_storage as storage;
pub use kura_storage::model::*;
pub use salt::{BucketRange, SaltBucket};

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}

    /// The handle is shared across actix-web workers (threads) and its futures may be spawned
    /// on multi-threaded runtimes.
    #[allow(dead_code)]
    fn handle_and_futures_are_thread_safe(kura: &Kura) {
        send_sync(kura);
        send(kura.get("t", b"r", &ReadSpec::default()));
        send(kura.mutate(
            "t",
            RowMutation {
                row: vec![],
                mutations: vec![],
            },
        ));
        send(kura.scan(
            "t",
            ScanRequest {
                spec: ScanSpec::all(),
                limit: None,
                page: ScanLimits::default(),
            },
        ));
        send(kura.multi_get("t", vec![], &ReadSpec::default()));
        send(kura.create_table(TableDescriptor::new("t", vec![])));
        send(kura.split_region("t", RegionId::new(1), None));
        send(kura.regions("t"));
    }
}
