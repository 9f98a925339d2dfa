//! Client requests: the region's request queue ([`RequestQueue`]), gets, multi-gets and scans
//! served at once, and writes queued until the queue is drained, then committed as one batch
//! (group commit) and answered once durable.

use super::*;

/// Reads the region's request queue ([`RegionActor::requests`]) as the actor's mailbox is read:
/// every request waiting is handled, one at a time, before the actor's notified items run (so
/// a group commit takes in every write already queued), and none while the actor waits.
/// (actix's `add_stream` would do, except that it yields after 16 items: a group commit would
/// then take at most 16 writes.) `poll_recv` keeps to the task's cooperative budget (128
/// requests a poll, then the actor's other items and the arbiter's other tasks run) and reads a
/// send still being written as empty; `try_recv` would do neither (it parks the thread until
/// that send completes).
///
/// Found empty, the queue is looked at again on the arbiter's next few passes over its tasks
/// ([`RequestQueue::IDLE_POLLS`], `is_empty`, which registers nothing) before the actor goes
/// to sleep on it. A request sent to a region that sleeps wakes its task, and from another
/// thread that wake is the dearest part of a crossing (the task's state, the arbiter's run
/// queue and its parker change cores); a region under load finds its next request on one of
/// those passes, and its senders find no waker to wake. An idle region pays a few looks at an
/// empty queue, then sleeps as before. (Measured in alternating rounds of the actors bench's
/// `point_ops_alternating`: ~5% less time per round on 2 arbiters.)
pub(super) struct RequestQueue {
    /// Consecutive polls that found the queue empty.
    pub(super) idle: u32,
}

impl RequestQueue {
    /// Polls of an empty queue before the region sleeps on it.
    const IDLE_POLLS: u32 = 8;
}

impl ActorFuture<RegionActor> for RequestQueue {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        act: &mut RegionActor,
        ctx: &mut Context<RegionActor>,
        task: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        // Paused (`ctx.wait`): actix polls this again once the wait is over.
        while !ctx.waiting() {
            if self.idle < Self::IDLE_POLLS && act.requests.is_empty() {
                // Polled again after the arbiter's other ready tasks, without a wake.
                self.idle += 1;
                task.waker().wake_by_ref();
                return std::task::Poll::Pending;
            }
            match act.requests.poll_recv(task) {
                std::task::Poll::Ready(Some(request)) => {
                    self.idle = 0;
                    act.handle_request(request, ctx);
                }
                // Every handle is gone (the region left the routing table): nothing more will
                // come. The actor stops when it is closed, not here.
                std::task::Poll::Ready(None) => return std::task::Poll::Ready(()),
                // Asleep on the queue (a sender wakes the task), or the budget is spent (tokio
                // has woken the task already), or a send is still being written (its sender
                // wakes the task when done).
                std::task::Poll::Pending => return std::task::Poll::Pending,
            }
        }
        std::task::Poll::Pending
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
    /// durable here and now and answer it, take in the requests already waiting in the request
    /// queue (they were sent before the control message being handled, or with it), then
    /// commit every queued write synchronously.
    pub(super) fn settle(&mut self, ctx: &mut Context<Self>) {
        if let Some(f) = self.in_flight.take() {
            let outcome = match self.store.as_mut() {
                Some(store) => store.sync(),
                None => Err(kura_storage::Error::Poisoned("store is not open".into())),
            };
            let outcome = outcome.map_err(|e| self.store_err(e));
            self.land(f, outcome);
        }
        self.drain_requests(ctx);
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
    /// Handle every request already waiting in the queue: what a control message finds queued
    /// ahead of it is served before it, as one mailbox would have ordered them.
    pub(super) fn drain_requests(&mut self, ctx: &mut Context<Self>) {
        while let Ok(request) = self.requests.try_recv() {
            self.handle_request(request, ctx);
        }
    }
    pub(super) fn handle_request(&mut self, request: ClientRequest, ctx: &mut Context<Self>) {
        match request {
            ClientRequest::Get(msg) => self.read(Read::Get(msg)),
            ClientRequest::MultiGet(msg) => self.read(Read::MultiGet(msg)),
            ClientRequest::Scan(msg) => self.read(Read::Scan(msg)),
            ClientRequest::Write(msg) => self.write(msg, ctx),
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
