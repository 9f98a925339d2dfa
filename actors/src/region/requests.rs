//! Client requests, a `Handler` each: gets, multi-gets and scans served at once, and writes
//! queued until the messages waiting in the mailbox have been handled, then committed as one
//! batch (group commit) and answered once durable.

use super::*;

impl Handler<Get> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Get, _: &mut Context<Self>) {
        self.read(Read::Get(msg));
    }
}

impl Handler<MultiGet> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: MultiGet, _: &mut Context<Self>) {
        self.read(Read::MultiGet(msg));
    }
}

impl Handler<ScanRegion> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: ScanRegion, _: &mut Context<Self>) {
        self.read(Read::Scan(msg));
    }
}

impl Handler<Write> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Write, ctx: &mut Context<Self>) {
        self.write(msg, ctx);
    }
}

impl Handler<Commit> for RegionActor {
    type Result = ();

    fn handle(&mut self, _: Commit, ctx: &mut Context<Self>) {
        self.commit(true, ctx);
    }
}

impl RegionActor {
    /// Before anything that changes what the region owns or holds: make the in-flight batch
    /// durable here and now and answer it, then commit every queued write synchronously. The
    /// requests sent before the control message being handled were handled before it (one
    /// mailbox, one order): their writes are among the queued ones.
    pub(super) fn settle(&mut self, ctx: &mut Context<Self>) {
        if let Some(f) = self.in_flight.take() {
            let outcome = match self.store.as_mut() {
                Some(store) => store.sync(),
                None => Err(kura_storage::Error::Poisoned("store is not open".into())),
            };
            let outcome = outcome.map_err(|e| self.store_err(e));
            self.land(f, outcome);
        }
        self.commit(false, ctx);
    }
    /// Hand every queued write to the store in one batch; answer them all once it is durable:
    /// now, or (`pipelined`, with a sync thread, in `sync` durability) when the sync thread
    /// has fsynced it. Nothing happens while a batch is in flight: its end commits the queue.
    pub(super) fn commit(&mut self, pipelined: bool, ctx: &mut Context<Self>) {
        self.commit_scheduled = false;
        if self.pending_replies.is_empty() || self.in_flight.is_some() {
            return;
        }
        let ops = std::mem::take(&mut self.pending_ops);
        let replies = std::mem::take(&mut self.pending_replies);
        let deferred = pipelined && self.syncer.is_some();
        let rows: HashSet<Vec<u8>> = if deferred {
            ops.iter().map(|op| op.row().to_vec()).collect()
        } else {
            HashSet::new()
        };
        let n = ops.len();
        let (results, sync) = match self.store() {
            Ok(_) if n == 0 => (Vec::new(), None),
            Ok(store) => {
                let (raw, sync) = if deferred {
                    store.write_batch_deferred(ops)
                } else {
                    (store.write_batch(ops), None)
                };
                // Mapping may fail the region closed (poisoned by a failed fsync).
                let results = raw
                    .into_iter()
                    .map(|r| Some(r.map_err(|e| self.store_err(e))))
                    .collect();
                (results, sync)
            }
            Err(e) => (vec![Some(Err(e)); n], None),
        };
        // Before answering: a caller that saw its write acknowledged can rely on the router
        // having been told about the size.
        self.maybe_request_split();
        match (sync, &self.syncer) {
            (Some(sync), Some(syncer)) => {
                self.sync_gen += 1;
                let gen = self.sync_gen;
                let job = syncer.sync(sync);
                self.in_flight = Some(InFlight {
                    gen,
                    replies,
                    results,
                    rows,
                });
                ctx.spawn(
                    job.into_actor(self)
                        .map(move |res, act, ctx| act.synced(gen, res, ctx)),
                );
            }
            _ => self.answer(replies, results),
        }
        self.maybe_compact(ctx);
        // From `settle` (not pipelined) the caller goes on using the store: freeze inline.
        self.maybe_flush(ctx, pipelined);
    }
    /// The sync thread fsynced batch `gen` (or failed to).
    pub(super) fn synced(&mut self, gen: u64, res: SyncResult, ctx: &mut Context<Self>) {
        let outcome = match res {
            Ok((sync, took)) => match self.store.as_mut() {
                // Recorded even for a batch a settle answered already: a failed fsync
                // poisons the store whichever batch it was for.
                Some(store) => store.finish_sync(sync, took).map_err(|e| self.store_err(e)),
                None => Err(self.unavailable()),
            },
            Err(e) => {
                self.fail(e.to_string());
                Err(e)
            }
        };
        let Some(f) = self.in_flight.take_if(|f| f.gen == gen) else {
            return;
        };
        self.land(f, outcome);
        self.commit(true, ctx);
    }
    /// Answer an in-flight batch once its fsync ended, then serve the reads it held back.
    pub(super) fn land(&mut self, f: InFlight, outcome: Result<(), ActorError>) {
        let results = match outcome {
            Ok(()) => f.results,
            Err(e) => f.results.iter().map(|_| Some(Err(e.clone()))).collect(),
        };
        self.answer(f.replies, results);
        for read in std::mem::take(&mut self.held_reads) {
            self.read(read);
        }
    }
    /// Serve `read`, or hold it back if it touches a row of the in-flight batch (invariant 5).
    pub(super) fn read(&mut self, read: Read) {
        let held = self
            .in_flight
            .as_ref()
            .is_some_and(|f| read.touches(&f.rows));
        match read {
            read if held => self.held_reads.push(read),
            Read::Get(msg) => self.get(msg),
            Read::MultiGet(msg) => self.multi_get(msg),
            Read::Scan(msg) => self.scan(msg),
        }
    }
    pub(super) fn answer(
        &mut self,
        replies: Vec<(Reply<OneOrMore<OpResult>>, Vec<Slot>)>,
        mut results: Vec<Option<Result<WriteOutcome, ActorError>>>,
    ) {
        for (reply, slots) in replies {
            let answer = slots
                .into_iter()
                .map(|slot| match slot {
                    Slot::Ready(r) => r,
                    Slot::Op(i) => {
                        OpResult::Done(results.get_mut(i).and_then(Option::take).unwrap_or_else(
                            || Err(ActorError::Internal("write result missing".into())),
                        ))
                    }
                })
                .collect();
            let _ = reply.send(Ok(answer));
        }
    }
    pub(super) fn get(&mut self, msg: Get) {
        if !self.owns(msg.bucket) {
            let _ = msg.reply.send(Err(Reject::NotOwner));
            return;
        }
        let res = match self.store() {
            Ok(store) => store.get_filtered(&msg.row, &msg.read, msg.filter.as_deref()),
            Err(e) => {
                let _ = msg.reply.send(Err(e.into()));
                return;
            }
        };
        let mut res = res.map_err(|e| self.store_err(e).into());
        if let Ok(Some(row)) = &mut res {
            // The caller's own copy of the key goes back to its thread (see `home`).
            home(&mut row.key, msg.row);
        }
        let _ = msg.reply.send(res);
    }
    pub(super) fn multi_get(&mut self, msg: MultiGet) {
        if msg.rows.iter().any(|(b, _)| !self.owns(*b)) {
            let _ = msg.reply.send(Err(Reject::NotOwner));
            return;
        }
        let mut out = Vec::with_capacity(msg.rows.len());
        for (_, row) in &msg.rows {
            let res = match self.store() {
                Ok(store) => store.get(row, &msg.read),
                Err(e) => {
                    let _ = msg.reply.send(Err(e.into()));
                    return;
                }
            };
            match res {
                Ok(r) => out.push(r),
                Err(e) => {
                    let e = self.store_err(e);
                    let _ = msg.reply.send(Err(e.into()));
                    return;
                }
            }
        }
        for (found, (_, key)) in out.iter_mut().zip(msg.rows) {
            if let Some(row) = found {
                home(&mut row.key, key);
            }
        }
        let _ = msg.reply.send(Ok(out));
    }
    pub(super) fn scan(&mut self, msg: ScanRegion) {
        if msg.expect != self.range {
            let _ = msg.reply.send(Err(Reject::NotOwner));
            return;
        }
        let res = match self.store() {
            Ok(store) => store.scan(&msg.spec, msg.limits),
            Err(e) => {
                let _ = msg.reply.send(Err(e.into()));
                return;
            }
        };
        let res = res.map_err(|e| self.store_err(e).into());
        let _ = msg.reply.send(res);
    }
    /// Queue a client's writes for the next group commit.
    pub(super) fn write(&mut self, msg: Write, ctx: &mut Context<Self>) {
        if self.failed.is_some() || self.store.is_none() {
            let _ = msg.reply.send(Err(self.unavailable().into()));
            return;
        }
        let mut slots = Vec::with_capacity(msg.ops.len());
        for (bucket, op) in msg.ops {
            if self.owns(bucket) {
                slots.push(Slot::Op(self.pending_ops.len()));
                self.pending_ops.push(op);
            } else {
                slots.push(Slot::Ready(OpResult::NotOwner(op)));
            }
        }
        self.pending_replies.push((msg.reply, slots));
        if !self.commit_scheduled {
            self.commit_scheduled = true;
            ctx.notify(Commit);
        }
    }
}
