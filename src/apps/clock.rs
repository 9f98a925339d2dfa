//! The applications' clock of one server: wall-clock milliseconds, kept above every timestamp
//! this server's applications have written, in this process and (embedded backend) in every
//! earlier one on the same data dir. Each server owns its own ([`crate::state::AppState`]'s
//! `clock`): two servers in one process (tests) share nothing through it.
//!
//! # What the clock is for, and what it is not
//! With any number of servers on one store (Bigtable), no guarantee may rest on one process's
//! clock. Every ordering and uniqueness promise of the applications therefore lives in the
//! data, where any server reads it:
//! - per-row timestamps are `max(tick, stored + 1)` inside check-and-mutate loops on the row
//!   (graph and blog updates and deletes), so they increase per row whatever clock each server
//!   has;
//! - a graph create lands above the tombstone of the row's last delete (`graph.rs`);
//! - article and action ids and their creation times come from the owner's sequence row
//!   (`sequence.rs`), so a later id never gets an earlier time whichever server takes it.
//!
//! The clock only supplies "now" to those formulas, and keeps one server's own results tidy:
//! computed timestamps go through [`Clock::observe`] and [`Clock::tick`] never returns a value
//! at or below an observed one (the embedded store's delete markers mask every put at or below
//! them: a marker at a computed time a few ms ahead of the wall clock must not hide this
//! server's next write), and [`Clock::tick_unique`] hands out strictly increasing times, so the
//! graph's adjacency lists (newest created first) show the relationships one server creates in
//! one millisecond in creation order. Across servers those two are per server only: two
//! servers may create relationships of one node in the same millisecond (ties sort by the
//! other node's id), and a server whose clock runs behind creates items that sort below what a
//! server ahead created earlier. Under more than 1,000 creations per second `tick_unique` runs
//! ahead of the wall clock, and falls back to it when the rate drops.
//!
//! **Across restarts** (embedded backend only: [`Clock::open`], called by the server's `main`
//! before it serves): a clock that ran ahead, or a wall clock stepped back, must not hand out
//! after a restart times below those handed out before it, or an item created after the
//! restart would sort below older ones in every "newest first" list. The clock keeps a lease
//! in `<data dir>/apps-clock` (one decimal number): no time above it is handed out before the
//! file says so (written to a temporary file, fsynced, renamed over it, directory fsynced). A
//! thread extends the lease to [`LEASE_MS`] past the clock when the clock comes within half of
//! that of it, so requests wait for the disk only when the clock outruns the thread (a burst of
//! creations). A restart starts above the lease; a clean shutdown ([`Clock::close`]) writes the
//! exact last time, so that the next start need not run ahead of the wall clock by up to
//! [`LEASE_MS`]. On Bigtable there is no data dir and no lease: the sequence rows and
//! tombstones above carry what must survive a restart.
//!
//! # Invariants
//! 1. [`Clock::tick`] never goes backwards within one clock, nor below a value
//!    [`Clock::tick_unique`] returned; successive `tick_unique` results are strictly increasing.
//! 2. After `observe(t)` returns, every later `tick()` and `tick_unique()` of that clock is `> t`.
//! 3. With a lease open, every time handed out is at most the lease the file holds, so after a
//!    restart (crash included) on the same data dir every time is above every earlier one. If
//!    the file cannot be written the clock keeps serving (the applications must not stop for
//!    it) and logs an error: invariant 3 then holds only until the next restart.
//! 4. A clock built with [`Clock::skewed`] reads the wall clock shifted by a fixed offset (tests
//!    of servers whose clocks disagree); every other clock reads it as is.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far past the clock a lease extension reaches, in ms: the most a start after a crash
/// may run ahead of the wall clock.
pub const LEASE_MS: i64 = 2_000;

/// The lease file, in the data dir.
pub const LEASE_FILE: &str = "apps-clock";

/// The latest time the applications accept from a client, 9999-12-31T23:59:59.999Z: times
/// are shown with 4-digit years, and stay far inside JSON's exact integers.
pub const LATEST_MS: i64 = 253_402_300_799_999;

/// The clock of one server's applications (see the module docs).
pub struct Clock {
    /// Added to the wall clock (0 but in tests of skewed servers).
    offset: i64,
    /// One more than the highest timestamp observed.
    floor: AtomicI64,
    /// The highest value handed out, so that a wall clock stepping back does not show.
    last: AtomicI64,
    /// Unset: no persistence (tests that build the applications without `main`).
    lease: OnceLock<Arc<Lease>>,
}

/// The persisted upper bound of the times handed out, and the thread that extends it.
struct Lease {
    path: PathBuf,
    /// What the file holds: no time above it may be handed out.
    bound: AtomicI64,
    /// The highest time a tick is waiting to hand out (or is about to), for the extender.
    wanted: Mutex<Wanted>,
    /// Signalled when `wanted` rises (to the extender) and when `bound` rises (to waiters).
    changed: Condvar,
    /// Held while the file is written (the extender and `close` share its temporary file).
    /// Taken after `wanted` when both are held, never before.
    writing: Mutex<()>,
}

#[derive(Default)]
struct Wanted {
    time: i64,
    closed: bool,
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    pub const fn new() -> Clock {
        Clock::skewed(0)
    }

    /// A clock that reads the wall clock `offset` ms ahead (behind if negative): a server whose
    /// clock disagrees with the others', for tests.
    pub const fn skewed(offset: i64) -> Clock {
        Clock {
            offset,
            floor: AtomicI64::new(0),
            last: AtomicI64::new(0),
            lease: OnceLock::new(),
        }
    }

    /// This clock's reading of the wall clock (no floor, no lease): what the counter stamps a
    /// hit with when the client gives no time.
    pub fn wall(&self) -> i64 {
        wall_ms().saturating_add(self.offset)
    }

    /// The current time: the wall clock, but never below a time already handed out or observed.
    pub fn tick(&self) -> i64 {
        let t = self.wall().max(self.floor.load(Ordering::Acquire));
        self.cover(t);
        self.last.fetch_max(t, Ordering::AcqRel).max(t)
    }

    /// A time strictly greater than every time handed out before (for creation times).
    pub fn tick_unique(&self) -> i64 {
        let wall = self.wall();
        let mut last = self.last.load(Ordering::Acquire);
        loop {
            let next = wall
                .max(self.floor.load(Ordering::Acquire))
                .max(last.saturating_add(1));
            self.cover(next);
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    /// Records that `ts` was written, so later ticks exceed it.
    pub fn observe(&self, ts: i64) {
        let floor = ts.saturating_add(1);
        self.cover(floor);
        self.floor.fetch_max(floor, Ordering::AcqRel);
    }

    /// Starts persisting the clock in `data_dir`: every later time exceeds the times handed out
    /// by earlier processes on that directory. Called once, before the first request; a second
    /// call is an error.
    pub fn open(&self, data_dir: &Path) -> Result<(), String> {
        let path = data_dir.join(LEASE_FILE);
        // Temporary files a crash left behind (`write_lease`).
        if let Ok(entries) = std::fs::read_dir(data_dir) {
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with(&format!("{LEASE_FILE}.")) && name.ends_with(".tmp") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let stored = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<i64>().map_err(|_| {
                format!(
                    "{} should hold one number (the applications' clock lease), found {:?}: \
                     restore it, or delete it to restart the clock from the wall clock (items \
                     created next may then sort below the last ones created before)",
                    path.display(),
                    text.chars().take(40).collect::<String>()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        self.floor
            .fetch_max(stored.saturating_add(1), Ordering::AcqRel);
        let start = self
            .wall()
            .max(self.floor.load(Ordering::Acquire))
            .max(self.last.load(Ordering::Acquire));
        let bound = start.saturating_add(LEASE_MS);
        write_lease(&path, bound).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let lease = Arc::new(Lease {
            path,
            bound: AtomicI64::new(bound),
            wanted: Mutex::new(Wanted::default()),
            changed: Condvar::new(),
            writing: Mutex::new(()),
        });
        self.lease
            .set(Arc::clone(&lease))
            .map_err(|_| "the applications' clock is already open".to_string())?;
        std::thread::Builder::new()
            .name("apps-clock".into())
            .spawn(move || lease.extend_forever())
            .map_err(|e| format!("cannot start the clock's lease thread: {e}"))?;
        Ok(())
    }

    /// Writes the last time handed out as the lease and stops extending it (a clean shutdown:
    /// the next start then begins at the wall clock, or just above this time). Times handed
    /// out after this are not covered: call it once nothing will be stored any more.
    pub fn close(&self) {
        let Some(lease) = self.lease.get() else {
            return;
        };
        let mut wanted = lease.wanted.lock().unwrap_or_else(|p| p.into_inner());
        wanted.closed = true;
        let last = self
            .last
            .load(Ordering::Acquire)
            .max(self.floor.load(Ordering::Acquire) - 1);
        // Never below what the clock handed out: the extender is stopped (closed), and a
        // lower lease is still above every time handed out.
        match lease.write(last) {
            Ok(()) => lease.bound.store(last, Ordering::Release),
            Err(e) => {
                tracing::error!(path = %lease.path.display(), "cannot write the applications' clock lease at shutdown: {e}")
            }
        }
        lease.changed.notify_all();
    }

    /// Makes sure the lease covers `t` before `t` is handed out: asks the extender for more
    /// when `t` comes within half a lease of it, waits for it when `t` is past it.
    fn cover(&self, t: i64) {
        let Some(lease) = self.lease.get() else {
            return;
        };
        let bound = lease.bound.load(Ordering::Acquire);
        if t <= bound - LEASE_MS / 2 {
            return;
        }
        let mut wanted = lease.wanted.lock().unwrap_or_else(|p| p.into_inner());
        if t > wanted.time {
            wanted.time = t;
            lease.changed.notify_all();
        }
        // Wait only for a time past the lease; a shut-down clock no longer extends it.
        while t > lease.bound.load(Ordering::Acquire) && !wanted.closed {
            wanted = lease
                .changed
                .wait_timeout(wanted, Duration::from_secs(1))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl Lease {
    /// Writes `bound` as the lease.
    fn write(&self, bound: i64) -> std::io::Result<()> {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        write_lease(&self.path, bound)
    }

    /// The extender: writes a lease [`LEASE_MS`] past the highest wanted time whenever a tick
    /// comes within half a lease of the current one. On a write error it logs, lets waiting
    /// ticks through (the clock must keep serving) and retries on the next request.
    fn extend_forever(&self) {
        let mut wanted = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if wanted.closed {
                return;
            }
            let bound = self.bound.load(Ordering::Acquire);
            if wanted.time <= bound - LEASE_MS / 2 {
                wanted = self.changed.wait(wanted).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let next = wanted.time.max(wall_ms()).saturating_add(LEASE_MS);
            drop(wanted);
            let written = self.write(next);
            wanted = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
            if wanted.closed {
                // `close` wrote the exact last time meanwhile: keep that one.
                return;
            }
            match written {
                Ok(()) => self.bound.store(next, Ordering::Release),
                Err(e) => {
                    tracing::error!(path = %self.path.display(), "cannot extend the applications' clock lease (times may go back after a restart): {e}");
                    self.bound.store(next, Ordering::Release);
                }
            }
            self.changed.notify_all();
        }
    }
}

/// Replaces the lease file atomically and durably: temporary file, fsync, rename, directory
/// fsync.
fn write_lease(path: &Path, bound: i64) -> std::io::Result<()> {
    use std::io::Write;
    // A name of its own per write: two clocks on one directory (a test's crashed one and its
    // successor) never rename each other's half-written file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_file_name(format!("{LEASE_FILE}.{}-{n}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    writeln!(f, "{bound}")?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_do_not_go_back_and_pass_observed_times() {
        let clock = Clock::new();
        let a = clock.tick();
        let b = clock.tick();
        assert!(b >= a);
        clock.observe(b + 1000);
        assert!(clock.tick() > b + 1000);
        let u = clock.tick_unique();
        assert!(clock.tick_unique() > u);
        assert!(clock.tick() >= u);
    }

    #[test]
    fn ticks_stay_near_the_wall_clock_under_many_calls() {
        let clock = Clock::new();
        for _ in 0..100_000 {
            clock.tick();
        }
        // A counter would be 100 s ahead.
        assert!(clock.tick() < wall_ms() + 5_000);
    }

    #[test]
    fn two_clocks_share_nothing_and_a_skewed_one_reads_ahead() {
        let a = Clock::new();
        let b = Clock::skewed(60_000);
        a.observe(wall_ms() + 30_000);
        assert!(Clock::new().tick() < wall_ms() + 5_000, "no global state");
        assert!(b.tick() >= wall_ms() + 59_000);
        assert!(b.wall() >= wall_ms() + 59_000);
        assert!(a.tick() > wall_ms() + 25_000);
    }

    #[test]
    fn a_clock_restarted_after_a_crash_starts_above_every_time_handed_out_before() {
        let dir = tempfile::tempdir().expect("tempdir");
        let before = Clock::new();
        before.open(dir.path()).expect("open");
        // A burst of creations ran the clock 10 s ahead of the wall clock, through several
        // lease extensions.
        let mut last = 0;
        for ahead in (0..=10_000).step_by(500) {
            before.observe(wall_ms() + ahead);
            last = before.tick_unique();
        }
        assert!(last > wall_ms() + 8_000, "{last}");
        // The process dies without closing its clock; the next one opens the same directory.
        let after = Clock::new();
        after.open(dir.path()).expect("reopen");
        let first = after.tick_unique();
        assert!(first > last, "{first} after {last}");
        assert!(after.tick() > last);
        // Never further ahead than one lease past what was handed out.
        assert!(first <= last + LEASE_MS + 1, "{first} after {last}");
    }

    #[test]
    fn a_clock_closed_cleanly_restarts_just_above_its_last_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let before = Clock::new();
        before.open(dir.path()).expect("open");
        before.observe(wall_ms() + 60_000);
        let last = before.tick_unique();
        before.close();
        let stored: i64 = std::fs::read_to_string(dir.path().join(LEASE_FILE))
            .expect("lease")
            .trim()
            .parse()
            .expect("a number");
        assert_eq!(stored, last);
        let after = Clock::new();
        after.open(dir.path()).expect("reopen");
        assert_eq!(after.tick_unique(), last + 1);
    }

    #[test]
    fn a_damaged_lease_file_stops_the_start_with_a_message_that_names_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(LEASE_FILE), "12x\n").expect("write");
        let e = Clock::new().open(dir.path()).expect_err("refused");
        assert!(e.contains(LEASE_FILE) && e.contains("delete it"), "{e}");
    }
}
