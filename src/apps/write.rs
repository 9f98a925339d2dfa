//! Every store write the applications make goes through this module, in the order each
//! application documents (see "Crashes between writes" in [`super`]), so that a crash between
//! two writes can be placed on purpose by a test.
//!
//! # The crash test hook
//! `KURA_TEST_CRASH_AFTER_APP_WRITES=N` in the server's environment is a **test hook**: the
//! process kills itself with `SIGKILL` (kill -9: no destructor, no flush, no reply sent; on
//! other systems [`std::process::abort`]) right after the `N`-th store write made by
//! `/apps/` requests since it started (counted from 1: a successful check-and-mutate, an
//! increment, a one-row mutation; a failed check writes nothing and is not counted). While
//! the variable is set, a batch of rows ([`rows`]) is written one row at a time, each counted,
//! so that a crash can land between any two rows of it, as it can on a backend whose batches
//! are not atomic (Bigtable's `MutateRows`). `tests/crash_apps_repair.rs` loops `N` over every
//! write of each multi-row operation.
//!
//! # Invariants
//! 1. Unset (or not a positive integer), the hook does nothing but one relaxed load per write
//!    (the variable is read once, at the first write): batches go to the store as one
//!    `mutate_rows`.
//! 2. A write returns only after the store acknowledged it, so "the `N`-th write happened" is
//!    exactly what a restarted server finds (the tests run with `sync` durability).

use kura_backend::{CheckAndMutate, Increment, RowMutation, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The test hook's environment variable (see the module docs).
pub const CRASH_ENV: &str = "KURA_TEST_CRASH_AFTER_APP_WRITES";

/// The write after which the hook kills the process, if set.
fn crash_after() -> Option<u64> {
    static AT: OnceLock<Option<u64>> = OnceLock::new();
    *AT.get_or_init(|| {
        std::env::var(CRASH_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|n| *n > 0)
    })
}

/// Store writes made by application requests since the process started (counted only while
/// the hook is set).
static WRITES: AtomicU64 = AtomicU64::new(0);

/// Counts one acknowledged write and, if it is the hook's `N`-th, kills the process.
fn wrote() {
    let Some(at) = crash_after() else {
        return;
    };
    if WRITES.fetch_add(1, Ordering::SeqCst) + 1 == at {
        die();
    }
}

/// kill -9 of this process: nothing after this line runs.
fn die() -> ! {
    #[cfg(target_os = "linux")]
    {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
    std::process::abort()
}

/// One row's mutation.
pub async fn mutate(kura: &Store, table: &str, m: RowMutation) -> kura_backend::Result<()> {
    kura.mutate(table, m).await?;
    wrote();
    Ok(())
}

/// Several rows with no order among them (one `mutate_rows`; row by row under the hook).
pub async fn rows(kura: &Store, table: &str, ms: Vec<RowMutation>) -> kura_backend::Result<()> {
    if crash_after().is_none() {
        return kura.mutate_rows(table, ms).await;
    }
    for m in ms {
        mutate(kura, table, m).await?;
    }
    Ok(())
}

/// A check-and-mutate; counted when its check passed (only then did it write).
pub async fn check_and_mutate(
    kura: &Store,
    table: &str,
    cam: CheckAndMutate,
) -> kura_backend::Result<bool> {
    let applied = kura.check_and_mutate(table, cam).await?;
    if applied {
        wrote();
    }
    Ok(applied)
}

/// An increment, optionally keyed ([`Store::increment_keyed`]).
pub async fn increment(
    kura: &Store,
    table: &str,
    inc: Increment,
    key: Option<Vec<u8>>,
) -> kura_backend::Result<Vec<kura_backend::Cell>> {
    let cells = kura.increment_keyed(table, inc, key).await?;
    wrote();
    Ok(cells)
}
