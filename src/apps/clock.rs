//! The applications' clock: wall-clock milliseconds, kept above every timestamp the
//! applications have written.
//!
//! Why not the bare wall clock: the graph and the blog write versions at computed timestamps
//! (`max(now, u + 1)`), which may run a few ms ahead of the wall clock when one row is updated
//! several times within a millisecond. A delete marker at such a timestamp masks every put at or
//! below it (HBase semantics), so an entity re-created right after its delete with
//! `now <= delete ts` would be invisible. Every computed timestamp goes through [`observe`], and
//! [`tick`] never returns a value at or below an observed one.
//!
//! Creation times come from [`tick_unique`], strictly increasing, so that "newest first" lists
//! (articles, actions stamped by the server, adjacency lists) show items created within one
//! millisecond in creation order too. Under more than 1,000 creations per second they run
//! ahead of the wall clock, and fall back to it when the rate drops. Updates and deletes use
//! [`tick`], which does not advance by itself, so they never push the clock ahead beyond what
//! same-millisecond updates of one row require.
//!
//! # Invariants
//! 1. [`tick`] never goes backwards within the process, nor below a value [`tick_unique`]
//!    returned; successive [`tick_unique`] results are strictly increasing.
//! 2. After `observe(t)` returns, every later `tick()` and `tick_unique()` is `> t`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// One more than the highest timestamp observed.
static FLOOR: AtomicI64 = AtomicI64::new(0);
/// The highest value handed out, so that a wall clock stepping back does not show.
static LAST: AtomicI64 = AtomicI64::new(0);

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The current time: the wall clock, but never below a time already handed out or observed.
pub fn tick() -> i64 {
    let t = wall_ms().max(FLOOR.load(Ordering::Acquire));
    LAST.fetch_max(t, Ordering::AcqRel).max(t)
}

/// A time strictly greater than every time handed out before (for creation times).
pub fn tick_unique() -> i64 {
    let wall = wall_ms();
    let mut last = LAST.load(Ordering::Acquire);
    loop {
        let next = wall
            .max(FLOOR.load(Ordering::Acquire))
            .max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// Records that `ts` was written, so later ticks exceed it.
pub fn observe(ts: i64) {
    FLOOR.fetch_max(ts.saturating_add(1), Ordering::AcqRel);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_do_not_go_back_and_pass_observed_times() {
        let a = tick();
        let b = tick();
        assert!(b >= a);
        observe(b + 1000);
        assert!(tick() > b + 1000);
        let u = tick_unique();
        assert!(tick_unique() > u);
        assert!(tick() >= u);
    }

    #[test]
    fn ticks_stay_near_the_wall_clock_under_many_calls() {
        for _ in 0..100_000 {
            tick();
        }
        // A counter would be 100 s ahead; the other test may have observed up to ~1 s ahead.
        assert!(tick() < wall_ms() + 5_000);
    }
}
