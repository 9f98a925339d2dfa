//! The server's memtable budget: the memtables of all its regions together, as HBase bounds a
//! region server's memstores (`hbase.regionserver.global.memstore.size`) and RocksDB a
//! process's write buffers (`WriteBufferManager`). Without it each region is bounded by its own
//! budget only, and a server's memory grows with its number of regions.
//!
//! Each region reports the size of its memtables (active and frozen) through a
//! [`MemtableShare`] after its commits and its flushes. A region that commits while the total is
//! over the budget flushes its active memtable if that holds at least its fair share of the
//! budget (the budget over the regions) and at least [`MIN_FORCED_FLUSH`]: as in RocksDB, the
//! writer that finds the buffers full flushes, and while the total is over the budget some
//! region holds more than its share, so the total comes back under it as writes go on. That
//! region may have stopped writing: every region also checks the budget every
//! [`IDLE_CHECK`], as HBase's flusher picks a region when the region server is over its limit.
//!
//! # Invariants
//! 1. `total` is the sum of the sizes last reported by the live shares, and `regions` their
//!    number: a share gives its size and its count back when dropped (its region stopped).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A memtable smaller than this is never flushed for the server's budget: a segment that
/// small would cost its compactions more than the memory it frees.
pub(crate) const MIN_FORCED_FLUSH: usize = 1 << 20;

/// How often a region checks the server's budget without a write of its own.
pub(crate) const IDLE_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// The memtables of a server's regions together (see the module doc).
#[derive(Debug)]
pub(crate) struct MemtableBudget {
    /// Bytes; 0 = no budget.
    limit: usize,
    total: AtomicUsize,
    regions: AtomicUsize,
}

impl MemtableBudget {
    /// A budget of `limit` bytes (0 = none).
    pub(crate) fn new(limit: usize) -> Arc<MemtableBudget> {
        Arc::new(MemtableBudget {
            limit,
            total: AtomicUsize::new(0),
            regions: AtomicUsize::new(0),
        })
    }

    /// The memtables' bytes the live regions last reported.
    pub(crate) fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }
}

/// One region's part of the [`MemtableBudget`].
#[derive(Debug)]
pub(crate) struct MemtableShare {
    budget: Arc<MemtableBudget>,
    reported: usize,
}

impl MemtableShare {
    /// A new region's share, holding nothing yet.
    pub(crate) fn new(budget: Arc<MemtableBudget>) -> MemtableShare {
        budget.regions.fetch_add(1, Ordering::Relaxed);
        MemtableShare {
            budget,
            reported: 0,
        }
    }

    /// The region's memtables now hold `bytes`.
    pub(crate) fn report(&mut self, bytes: usize) {
        let total = &self.budget.total;
        if bytes >= self.reported {
            total.fetch_add(bytes - self.reported, Ordering::Relaxed);
        } else {
            total.fetch_sub(self.reported - bytes, Ordering::Relaxed);
        }
        self.reported = bytes;
    }

    /// Whether the server has a budget at all.
    pub(crate) fn budgeted(&self) -> bool {
        self.budget.limit > 0
    }

    /// Whether the memtables of all regions together are over the budget.
    pub(crate) fn over(&self) -> bool {
        self.budgeted() && self.budget.total() > self.budget.limit
    }

    /// Whether a region whose active memtable holds `active` bytes should flush it for the
    /// server's budget: the total is over the budget and `active` is at least the region's
    /// fair share of the budget and [`MIN_FORCED_FLUSH`].
    pub(crate) fn should_flush(&self, active: usize) -> bool {
        let b = &self.budget;
        let regions = b.regions.load(Ordering::Relaxed).max(1);
        self.over() && active >= MIN_FORCED_FLUSH.max(b.limit / regions)
    }
}

impl Drop for MemtableShare {
    fn drop(&mut self) {
        self.report(0);
        self.budget.regions.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_give_back_what_they_held_when_dropped() {
        let budget = MemtableBudget::new(10 << 20);
        let mut a = MemtableShare::new(budget.clone());
        let mut b = MemtableShare::new(budget.clone());
        a.report(4 << 20);
        b.report(3 << 20);
        a.report(1 << 20);
        assert_eq!(budget.total(), 4 << 20);
        drop(a);
        assert_eq!(budget.total(), 3 << 20);
        drop(b);
        assert_eq!(budget.total(), 0);
    }

    #[test]
    fn only_a_region_holding_its_fair_share_flushes_and_only_over_the_budget() {
        let budget = MemtableBudget::new(8 << 20);
        let mut big = MemtableShare::new(budget.clone());
        let mut small = MemtableShare::new(budget.clone());
        big.report(6 << 20);
        small.report(2 << 20);
        // 8 MiB: at the budget, not over it.
        assert!(!big.should_flush(6 << 20));
        small.report(3 << 20);
        // 9 MiB, over the budget: 4 MiB is each region's share of it.
        assert!(big.should_flush(6 << 20));
        assert!(!small.should_flush(3 << 20));
        // Never a tiny memtable, however over the budget.
        let tiny = MemtableBudget::new(1);
        let mut t = MemtableShare::new(tiny);
        t.report(MIN_FORCED_FLUSH - 1);
        assert!(!t.should_flush(MIN_FORCED_FLUSH - 1));
        t.report(MIN_FORCED_FLUSH);
        assert!(t.should_flush(MIN_FORCED_FLUSH));
    }

    #[test]
    fn no_budget_never_flushes() {
        let mut s = MemtableShare::new(MemtableBudget::new(0));
        s.report(1 << 30);
        assert!(!s.should_flush(1 << 30));
    }
}
