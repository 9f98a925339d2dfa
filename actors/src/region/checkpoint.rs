//! Checkpoints: a consistent copy of the region's store for an online backup, taken between
//! two requests so that every row is as of one moment.

use super::*;

impl Handler<Checkpoint> for RegionActor {
    type Result = ();

    fn handle(&mut self, msg: Checkpoint, ctx: &mut Context<Self>) {
        // Every acknowledged write (the in-flight batch, the queued ones) is in the store
        // before the copy is taken.
        self.settle(ctx);
        if let Err(e) = self.store() {
            let _ = msg.reply.send(Err(e.into()));
            return;
        }
        let (dest, reply) = (msg.dest, msg.reply);
        let (table, id) = (self.table.clone(), self.id);
        // Up to a whole memtable written out: not on the arbiter's thread. A failed
        // checkpoint (a full disk under the staging directory) changed nothing in the store:
        // it is answered, not taken as the store's failure.
        self.with_store_off_thread(
            "checkpoint",
            ctx,
            move |store| Ok(store.checkpoint(&dest)),
            move |_, res, _| {
                let res =
                    res.and_then(|r| r.map_err(|e| crate::error::from_store(e, &table, id).0));
                let _ = reply.send(res.map_err(Reject::from));
            },
        );
    }
}
