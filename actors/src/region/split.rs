//! Splits: asking the router for one when the region grows past the threshold, giving the
//! half that moves to a new store on a thread of its own, and committing or aborting as the
//! router decides.
//!
//! The new store starts on this region's segment files
//! ([`kura_storage::RegionStore::link_rows`]: hard links, flagged as reference segments on both
//! sides), so the region pauses for one flush of its memtable and a few manifest writes,
//! whatever its size. That flush is kept small: a memtable holding more than
//! [`SPLIT_FLUSH_BYTES`] is first frozen and flushed in the background while the region serves
//! on (up to [`FLUSH_ROUNDS`] times, as writes refill it), and only then does the split take
//! the store. Those flushes run unpaced and at the requests' priority: paced at 32 MiB/s, or
//! starved at low priority by a load keeping every core busy, they fell behind the writes
//! refilling the memtable, and the split then flushed what had piled up inline (pauses of
//! 170–190 ms in the 4 GB load). Both regions then rewrite their reference segments in the
//! background (after the merges that are due, one at a time in the server, at the lowest
//! priority: `background::CompactionSlots`), paced like any compaction.
//!
//! A region asks after every write, flush and installed compaction, also while compactions
//! run: a split links whatever segments the store has, and a compaction that was running
//! installs its output as a reference segment (`RegionStore::install_compaction`).

use super::*;

/// How long a region waits before asking again for a split that failed.
pub(super) const SPLIT_RETRY: Duration = Duration::from_secs(30);

/// A split takes the store (pausing the region) only once the memtable holds at most this
/// much: the flush it then runs inline is a few tens of milliseconds, not a whole memtable's.
pub(super) const SPLIT_FLUSH_BYTES: u64 = 4 << 20;

/// Background flushes a split starts before it goes ahead with whatever the memtable holds.
pub(super) const FLUSH_ROUNDS: u8 = 3;

impl Handler<AutoSplitFailed> for RegionActor {
    type Result = ();

    fn handle(&mut self, _: AutoSplitFailed, _: &mut Context<Self>) {
        self.split_requested = false;
        self.split_retry_at = Some(std::time::Instant::now() + SPLIT_RETRY);
    }
}

impl Handler<PrepareSplit> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: PrepareSplit, ctx: &mut Context<Self>) {
        self.prepare_split(msg, 0, ctx);
    }
}

impl RegionActor {
    /// Prepare a split, after `rounds` background flushes started for it: flush in the
    /// background first while the memtable is large (module docs), else give the upper half
    /// to the new store now.
    pub(super) fn prepare_split(&mut self, msg: PrepareSplit, rounds: u8, ctx: &mut Context<Self>) {
        if rounds < FLUSH_ROUNDS && self.flush_before_split(ctx) {
            self.split_after_flush = Some((msg, rounds + 1));
            return;
        }
        let Some((lower, upper)) = self.range.split_at(msg.at) else {
            let _ = msg.reply.send(Err(Reject::NotOwner));
            return;
        };
        // Invariant 2: every acknowledged write is in the store before the export reads it.
        self.settle(ctx);
        let families = match self.store() {
            Ok(store) => store.families().to_vec(),
            Err(e) => {
                let _ = msg.reply.send(Err(e.into()));
                return;
            }
        };
        let options = self.options(families, upper);
        let Some(pred) = owns_row_predicate(&self.salt, upper) else {
            let _ = msg.reply.send(Err(Reject::Failed(ActorError::Internal(
                "split upper half covers the whole table".into(),
            ))));
            return;
        };
        if let Err(e) = self.store() {
            let _ = msg.reply.send(Err(e.into()));
            return;
        }
        // A flush of the memtable (bounded by its budget), a link per segment and a few
        // manifests: not on the arbiter's thread, but independent of the region's size.
        let new_dir = msg.new_dir;
        let reply = msg.reply;
        self.with_store_off_thread(
            "split",
            ctx,
            move |store| store.link_rows(&*pred, &new_dir, options),
            move |act, res, _| act.split_exported(res, lower, reply),
        );
    }

    /// Start a background flush for a split if the memtable is large; true if one is under
    /// way (started now or before), whose installation `flush_done` follows with the split.
    fn flush_before_split(&mut self, ctx: &mut Context<Self>) -> bool {
        self.settle(ctx);
        let Ok(store) = self.store() else {
            // The split reports the error.
            return false;
        };
        let stats = store.stats();
        if stats.flushing {
            // Started before the split: unpaced from now on.
            store.hurry_flush();
            return true;
        }
        if stats.memtable_bytes <= SPLIT_FLUSH_BYTES {
            return false;
        }
        match store.flush_task() {
            Ok(Some(task)) => {
                store.hurry_flush();
                self.run_flush_at(task, true, ctx);
                true
            }
            Ok(None) => false,
            Err(e) => {
                let _ = self.store_err(e);
                false
            }
        }
    }
}

impl Handler<CommitSplit> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: CommitSplit, ctx: &mut Context<Self>) {
        // The catalog now gives the moved buckets to the new region: the narrowing is final,
        // and the moved rows can leave this region's segments (in the background).
        let pred = owns_row_predicate(&self.salt, self.range);
        if let Some(store) = self.store.as_mut() {
            store.set_owns_row(pred);
        }
        // Its size counts the reference segments by their owned share, so it may ask for a
        // split again; the moved rows leave as its reference segments are rewritten.
        self.split_requested = false;
        let _ = msg.reply.send(Ok(()));
        self.maybe_compact(ctx);
    }
}

impl Handler<AbortSplit> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: AbortSplit, _: &mut Context<Self>) {
        self.range = msg.range;
        let pred = owns_row_predicate(&self.salt, self.range);
        if let Some(store) = self.store.as_mut() {
            store.set_owns_row(pred);
        }
        self.split_requested = false;
        let _ = msg.reply.send(Ok(()));
    }
}

impl RegionActor {
    pub(super) fn maybe_request_split(&mut self) {
        let Some(threshold) = self.settings.split_threshold else {
            return;
        };
        if self.split_requested || self.range.bucket_count() < 2 {
            return;
        }
        if self
            .split_retry_at
            .is_some_and(|t| std::time::Instant::now() < t)
        {
            return;
        }
        let Some(store) = self.store.as_ref() else {
            return;
        };
        if store.approximate_size() > threshold {
            self.split_requested = true;
            self.router.do_send(AutoSplit {
                table: self.table.clone(),
                region: self.id,
            });
        }
    }
    /// The upper half of the range was given to the new store (or not): narrow to `lower`
    /// and answer.
    pub(super) fn split_exported(
        &mut self,
        res: Result<(), ActorError>,
        lower: BucketRange,
        reply: Reply<()>,
    ) {
        if let Err(e) = res {
            let _ = reply.send(Err(e.into()));
            return;
        }
        // From here on requests for the moved buckets are answered NotOwner and retried by the
        // handle until the router publishes the new layout. Reads only: until the catalog
        // commit (`CommitSplit`) the split may still be undone (`AbortSplit`), so no compaction
        // may drop the moved rows yet.
        self.range = lower;
        let lower = owns_row_predicate(&self.salt, self.range);
        if let Ok(store) = self.store() {
            store.narrow_reads(lower);
        }
        self.split_requested = true;
        let _ = reply.send(Ok(()));
    }
}
