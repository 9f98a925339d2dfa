//! Flushes and compactions: when the region starts them, how they run off the region's
//! thread, and how their results are installed.

use super::*;

/// Compactions a region runs at once by itself. Two, as HBase's small and large compaction
/// threads: a merge of the small tier never waits behind a long one of the large, so flushed
/// segments do not pile up while a gigabyte is rewritten.
pub(super) const MAX_BACKGROUND_COMPACTIONS: u8 = 2;

impl Handler<Flush> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Flush, ctx: &mut Context<Self>) {
        self.settle(ctx);
        if let Err(e) = self.store() {
            let _ = msg.reply.send(Err(e.into()));
            return;
        }
        // Up to a whole memtable written out: not on the arbiter's thread.
        let reply = msg.reply;
        self.with_store_off_thread(
            "flush",
            ctx,
            |store| store.flush(),
            move |act, res, ctx| {
                let _ = reply.send(res.map_err(Reject::from));
                act.maybe_compact(ctx);
            },
        );
    }
}

impl Handler<Compact> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Compact, ctx: &mut Context<Self>) {
        if self.compactions > 0 {
            // An asked-for compaction covers every segment: it waits until none is held by a
            // running one (no background one starts meanwhile, see `maybe_compact`).
            self.asked_compactions.push(msg);
            return;
        }
        self.settle(ctx);
        self.start_compaction(msg.major, msg.reply, ctx);
    }
}

impl RegionActor {
    /// How often a region that may not write looks whether it should flush: every
    /// [`crate::memory::IDLE_CHECK`] under a server's memtable budget, and every tenth of the
    /// memtable age limit, between 10 ms and 10 s (HBase's periodic flusher wakes every 10
    /// s), so that an old memtable flushes at most a tenth (and its jitter) past the limit;
    /// the shorter of the two. `None`: neither applies.
    pub(super) fn idle_check_period(&self) -> Option<Duration> {
        let budget = self
            .memtables
            .budgeted()
            .then_some(crate::memory::IDLE_CHECK);
        let age = self
            .settings
            .memtable_max_age
            .map(|max| (max / 10).clamp(Duration::from_millis(10), Duration::from_secs(10)));
        budget.into_iter().chain(age).min()
    }

    /// Once the memtable is full (or the server's memtables together are past their budget and
    /// this one holds its share of it, `memory.rs`, or its oldest write is older than the
    /// server's limit, [`RegionActor::memtable_too_old`]), freeze it and write it to a segment on a
    /// blocking thread; writes go on into a fresh memtable and log meanwhile, reads see both.
    /// One flush at a time: if the new memtable fills up before this one is installed, the
    /// store flushes inline at twice the budget (backpressure instead of unbounded memory).
    ///
    /// `off_thread`: the freeze itself (sync the log, create the next one: a file and a
    /// directory fsync, milliseconds) also runs off the arbiter, the region paused meanwhile
    /// (invariant 6). Only where nothing after this call uses the store synchronously: not
    /// inside `settle`, whose callers go on with the store.
    pub(super) fn maybe_flush(&mut self, ctx: &mut Context<Self>, off_thread: bool) {
        let frozen = self.report_memtables();
        let Ok((active, wanted)) = self
            .store()
            .map(|s| (s.memtable_bytes().0, s.wants_flush()))
        else {
            return;
        };
        // Past the server's memtable budget, a region holding its share flushes (memory.rs).
        let for_budget = frozen.is_none() && self.memtables.should_flush(active);
        let for_age = frozen.is_none() && self.memtable_too_old();
        if !wanted && !for_budget && !for_age {
            return;
        }
        let Ok(store) = self.store() else {
            return;
        };
        if off_thread {
            self.with_store_off_thread(
                "freeze",
                ctx,
                |store| store.flush_task(),
                |act, res, ctx| {
                    // An error was mapped (failing the region closed if fatal) on the way.
                    if let Ok(Some(task)) = res {
                        act.run_flush(task, ctx);
                    }
                },
            );
            return;
        }
        match store.flush_task() {
            Ok(Some(task)) => self.run_flush(task, ctx),
            Ok(None) => {}
            Err(e) => {
                let _ = self.store_err(e);
            }
        }
    }
    /// Whether the memtable writes go to has held its oldest write longer than the server's
    /// limit (`--memtable-max-age-secs`) plus this region's jitter: a share of up to a twelfth
    /// of the limit, fixed per region, so that the regions a burst of writes filled together
    /// do not all flush in the same tick (HBase delays its periodic flushes at random by up to
    /// five minutes of its hour, for the same reason).
    pub(super) fn memtable_too_old(&self) -> bool {
        let (Some(max), Some(age)) = (
            self.settings.memtable_max_age,
            self.store.as_ref().and_then(|s| s.memtable_age()),
        ) else {
            return false;
        };
        // A fraction in [0, 1) from the region's id, spread by Fibonacci hashing.
        let share =
            (self.id.get().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
        age >= max + (max / 12).mul_f64(share)
    }
    /// Tell the server's memtable budget what this region's memtables hold now (nothing
    /// without a store); the frozen memtable's bytes, if one is being flushed.
    pub(super) fn report_memtables(&mut self) -> Option<usize> {
        let (active, frozen) = self
            .store
            .as_ref()
            .map_or((0, None), |s| s.memtable_bytes());
        self.memtables.report(active + frozen.unwrap_or(0));
        frozen
    }
    /// Write a frozen memtable to a segment on a background thread, then install it.
    pub(super) fn run_flush(&mut self, task: kura_storage::FlushTask, ctx: &mut Context<Self>) {
        self.run_flush_at(task, false, ctx);
    }
    /// [`RegionActor::run_flush`], at normal priority if `urgent` (a split waits for it).
    pub(super) fn run_flush_at(
        &mut self,
        task: kura_storage::FlushTask,
        urgent: bool,
        ctx: &mut Context<Self>,
    ) {
        let job = crate::background::run_at("flush", !urgent, move || task.run());
        ctx.spawn(
            job.into_actor(self)
                .map(|res, act, ctx| act.flush_done(res, ctx)),
        );
    }
    /// A background flush finished: install its segment (once the store is back, if a job
    /// has it on another thread now).
    pub(super) fn flush_done(
        &mut self,
        res: Result<kura_storage::FlushOutput, ActorError>,
        ctx: &mut Context<Self>,
    ) {
        if self.store_away {
            self.deferred
                .push(Box::new(move |act, ctx| act.flush_done(res, ctx)));
            return;
        }
        match res {
            // The store may have been closed or reopened meanwhile: then the output is stale
            // and the store deletes it. Installing writes the manifest (a file, its fsync, a
            // rename, the directory's fsync): off the arbiter, the region paused meanwhile.
            Ok(output) if self.store.is_some() => {
                self.with_store_off_thread(
                    "install",
                    ctx,
                    move |store| store.install_flush(output),
                    |act, res, ctx| {
                        // An error was mapped (failing the region closed if fatal) on the way.
                        if let Ok(retired) = res {
                            // Freeing the memtable takes a while: not on the actor's thread.
                            crate::background::drop_later(retired);
                        }
                        act.flush_installed(ctx);
                    },
                );
                return;
            }
            Ok(_) => {}
            Err(e) => self.fail(e.to_string()),
        }
        self.flush_installed(ctx);
    }
    /// What follows a flush's install (or its failure): a split waiting for it, then the
    /// next split, compaction or flush the region is due.
    fn flush_installed(&mut self, ctx: &mut Context<Self>) {
        if let Some((split, rounds)) = self.split_after_flush.take() {
            // A split waited for this flush (split.rs): it goes on, flushing again first if
            // writes refilled the memtable meanwhile.
            self.prepare_split(split, rounds, ctx);
        }
        self.maybe_request_split();
        self.maybe_compact(ctx);
        self.maybe_flush(ctx, true);
    }
    /// Merge segments in the background (the store flushes on its own but never compacts on
    /// its own): a tier of segments of about one size once it holds enough of them, else a
    /// split's reference segments (`RegionStore::background_compaction_task`), up to
    /// `MAX_BACKGROUND_COMPACTIONS` at once on disjoint segments. Not while an asked-for
    /// compaction waits for the running ones to finish.
    pub(super) fn maybe_compact(&mut self, ctx: &mut Context<Self>) {
        if !self.asked_compactions.is_empty() || self.split_cleanup_due {
            return;
        }
        while self.compactions < MAX_BACKGROUND_COMPACTIONS {
            let Some(task) = self
                .store
                .as_ref()
                .and_then(|s| s.background_compaction_task())
            else {
                return;
            };
            self.run_compaction(task, false, None, ctx);
        }
    }
    /// Compact on a blocking thread, then install the result on the actor's thread.
    pub(super) fn start_compaction(
        &mut self,
        major: bool,
        reply: Option<Reply<()>>,
        ctx: &mut Context<Self>,
    ) {
        let task = match self.store() {
            Ok(store) => store.compaction_task(major),
            Err(e) => {
                if let Some(r) = reply {
                    let _ = r.send(Err(e.into()));
                }
                return;
            }
        };
        // A major compaction task made now filters with the narrowed ownership predicate.
        let cleanup = major && std::mem::take(&mut self.split_cleanup_due);
        let Some(task) = task else {
            // Nothing to compact: the size already reflects only what the region holds.
            if cleanup {
                self.split_requested = false;
            }
            if let Some(r) = reply {
                let _ = r.send(Ok(()));
            }
            return;
        };
        self.run_compaction(task, cleanup, reply, ctx);
    }
    fn run_compaction(
        &mut self,
        task: kura_storage::CompactionTask,
        cleanup: bool,
        reply: Option<Reply<()>>,
        ctx: &mut Context<Self>,
    ) {
        self.compactions += 1;
        let job = crate::background::run_compaction(
            self.settings.compaction_slots.clone(),
            crate::background::CompactionKind::of(&task),
            move || task.run(),
        );
        ctx.spawn(
            job.into_actor(self)
                .map(move |res, act, ctx| act.compaction_done(res, cleanup, reply, ctx)),
        );
    }
    /// A background compaction finished: install its segment (once the store is back, if a
    /// job has it on another thread now) and answer whoever asked for it.
    pub(super) fn compaction_done(
        &mut self,
        res: Result<kura_storage::Result<kura_storage::CompactionOutput>, ActorError>,
        cleanup: bool,
        reply: Option<Reply<()>>,
        ctx: &mut Context<Self>,
    ) {
        if self.store_away {
            self.deferred.push(Box::new(move |act, ctx| {
                act.compaction_done(res, cleanup, reply, ctx)
            }));
            return;
        }
        self.compactions -= 1;
        let output = match res {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => {
                let e = self.store_err(e);
                return self.compaction_installed(Err(e), cleanup, reply, ctx);
            }
            Err(e) => return self.compaction_installed(Err(e), cleanup, reply, ctx),
        };
        if let Err(e) = self.store() {
            return self.compaction_installed(Err(e), cleanup, reply, ctx);
        }
        // Installing writes the manifest (a file, its fsync, a rename, the directory's fsync):
        // off the arbiter, the region paused meanwhile (invariant 6), so that the arbiter's
        // other regions and connections are served during those fsyncs, which wait behind
        // the compaction's own writeback.
        self.with_store_off_thread(
            "install",
            ctx,
            move |store| store.install_compaction(output),
            move |act, res, ctx| {
                // Unmapping and deleting the old files takes a while: not on the actor's
                // thread either.
                let out = res.map(crate::background::drop_later);
                act.compaction_installed(out, cleanup, reply, ctx);
            },
        );
    }
    /// What follows a compaction's install (or its failure): the answer to whoever asked for
    /// it, then the cleanup, asked-for and background compactions and the split it allows.
    fn compaction_installed(
        &mut self,
        out: Result<(), ActorError>,
        cleanup: bool,
        reply: Option<Reply<()>>,
        ctx: &mut Context<Self>,
    ) {
        let installed = out.is_ok();
        if let Some(r) = reply {
            let _ = r.send(out.map_err(Reject::Failed));
        }
        if self.compactions > 0 {
            // The cleanup and asked-for compactions below wait for the last one; a background
            // one may start beside the one still running.
            if installed {
                self.maybe_compact(ctx);
            }
            return;
        }
        if self.split_cleanup_due {
            // A split of a store from an older build, whose moved rows this region's plain
            // segments still hold (`opened`).
            self.start_compaction(true, None, ctx);
            return;
        }
        if cleanup {
            // The rows a split moved away are gone, so the size now reflects what the region
            // owns: it may ask for a split again.
            self.split_requested = false;
        }
        if !self.asked_compactions.is_empty() {
            for msg in std::mem::take(&mut self.asked_compactions) {
                // The first one starts; the others wait for it (the handler queues them).
                self.handle(msg, ctx);
            }
            return;
        }
        // Not after a failure: the next flush tries again.
        if installed {
            self.maybe_request_split();
            self.maybe_compact(ctx);
        }
    }
}
