//! The applications' clock: wall-clock milliseconds, kept above every timestamp the
//! applications have written, in this process and in every earlier one on the same data dir.
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
//! **Across restarts** ([`open`], called by the server's `main` before it serves): a clock that
//! ran ahead, or a wall clock stepped back, must not hand out after a restart times below those
//! handed out before it, or an item created after the restart would sort below older ones in
//! every "newest first" list. The clock keeps a lease in `<data dir>/apps-clock` (one decimal
//! number): no time above it is handed out before the file says so (written to a temporary
//! file, fsynced, renamed over it, directory fsynced). A thread extends the lease to
//! [`LEASE_MS`] past the clock when the clock comes within half of that of it, so requests
//! wait for the disk only when the clock outruns the thread (a burst of creations). A restart
//! starts above the lease; a clean shutdown ([`close`]) writes the exact last time, so that the
//! next start need not run ahead of the wall clock by up to [`LEASE_MS`].
//!
//! # Invariants
//! 1. [`tick`] never goes backwards within the process, nor below a value [`tick_unique`]
//!    returned; successive [`tick_unique`] results are strictly increasing.
//! 2. After `observe(t)` returns, every later `tick()` and `tick_unique()` is `> t`.
//! 3. With a lease open, every time handed out is at most the lease the file holds, so after a
//!    restart (crash included) on the same data dir every time is above every earlier one. If
//!    the file cannot be written the clock keeps serving (the applications must not stop for
//!    it) and logs an error: invariant 3 then holds only until the next restart.

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

/// The clock of the applications: one per process ([`global`]), its own instances in tests.
pub struct Clock {
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

static GLOBAL: Clock = Clock::new();

/// The process's clock.
pub fn global() -> &'static Clock {
    &GLOBAL
}

/// The current time of the process's clock (see [`Clock::tick`]).
pub fn tick() -> i64 {
    GLOBAL.tick()
}

/// A creation time from the process's clock (see [`Clock::tick_unique`]).
pub fn tick_unique() -> i64 {
    GLOBAL.tick_unique()
}

/// Records on the process's clock that `ts` was written (see [`Clock::observe`]).
pub fn observe(ts: i64) {
    GLOBAL.observe(ts)
}

/// Opens the process's clock lease in `data_dir` (see the module docs).
pub fn open(data_dir: &Path) -> Result<(), String> {
    GLOBAL.open(data_dir)
}

/// Writes the process's last time as its lease, at a clean shutdown.
pub fn close() {
    GLOBAL.close()
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
        Clock {
            floor: AtomicI64::new(0),
            last: AtomicI64::new(0),
            lease: OnceLock::new(),
        }
    }

    /// The current time: the wall clock, but never below a time already handed out or observed.
    pub fn tick(&self) -> i64 {
        let t = wall_ms().max(self.floor.load(Ordering::Acquire));
        self.cover(t);
        self.last.fetch_max(t, Ordering::AcqRel).max(t)
    }

    /// A time strictly greater than every time handed out before (for creation times).
    pub fn tick_unique(&self) -> i64 {
        let wall = wall_ms();
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
        let start = wall_ms()
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
