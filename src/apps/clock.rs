//! The applications' clock: wall-clock milliseconds, made strictly increasing per process.
//!
//! Why not the bare wall clock: the graph and the blog write versions at computed timestamps
//! (`max(now, u + 1)`), which may run ahead of the wall clock by a few ms under bursts. A delete
//! marker at such a timestamp masks every put at or below it (HBase semantics), so an entity
//! re-created right after its delete with `now <= delete ts` would be invisible. Every timestamp
//! an application writes goes through [`observe`], and [`tick`] returns a value above all of
//! them, so anything written after a delete returned lands above its marker.
//!
//! # Invariants
//! 1. Successive [`tick`] results are strictly increasing within the process.
//! 2. After `observe(t)` returns, every later `tick()` is `> t`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static LAST: AtomicI64 = AtomicI64::new(0);

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A timestamp strictly greater than every one handed out or observed before.
pub fn tick() -> i64 {
    let wall = wall_ms();
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = wall.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// Records that `ts` was written, so later ticks exceed it.
pub fn observe(ts: i64) {
    LAST.fetch_max(ts, Ordering::AcqRel);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_increase_and_pass_observed_times() {
        let a = tick();
        let b = tick();
        assert!(b > a);
        observe(b + 1000);
        assert!(tick() > b + 1000);
    }
}
