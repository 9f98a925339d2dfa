//! Helpers shared by the actor tests: a server over a real store in a temp dir, and
//! [`HookedFs`], a `SimFs` whose file creations a test can intercept (to hold a background job
//! or an fsync at a gate of its own).
#![allow(dead_code)]

use kura_actors::storage::fs::{FileBytes, WritableFile};
use kura_actors::storage::{FileSystem, SimFs};
use kura_actors::*;
use std::io;
use std::ops::AsyncFnMut;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A config for tests: 2 arbiters, no fsync (speed), no automatic splits.
pub fn config(dir: &Path) -> KuraConfig {
    let mut c = KuraConfig::new(dir);
    c.arbiters = 2;
    c.durability = storage::Durability::None;
    c.split_threshold = None;
    c.memtable_budget = 1 << 20;
    c
}

/// A table with one family `cf`, `buckets` salt buckets and `regions` regions.
pub fn table(name: &str, buckets: u32, regions: u32) -> TableDescriptor {
    let mut d = TableDescriptor::new(name, vec![FamilyDescriptor::new("cf")]);
    d.salt = SaltConfig {
        buckets,
        prefix_len: None,
    };
    d.initial_regions = Some(regions);
    d
}

pub fn put(row: &[u8], value: &[u8]) -> RowMutation {
    RowMutation {
        row: row.to_vec(),
        mutations: vec![Mutation::Put {
            family: b"cf".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: None,
            value: value.to_vec(),
        }],
    }
}

pub fn key(i: usize) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

/// The single value of `cf:q` of a row.
pub fn value(row: &Row) -> &[u8] {
    &row.cells[0].value
}

/// Scan the whole table page by page (`page` rows per call), resuming after the last row.
pub async fn scan_all(kura: &Kura, table: &str, spec: ScanSpec, page: usize) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    let mut spec = spec;
    loop {
        let req = ScanRequest {
            spec: spec.clone(),
            limit: Some(page),
            page: ScanLimits::default(),
        };
        let got = kura.scan(table, req).await.expect("scan");
        assert!(got.rows.len() <= page, "a page never exceeds its limit");
        if !got.complete {
            assert_eq!(got.rows.len(), page, "an incomplete page is a full page");
        }
        if let Some(last) = got.rows.last() {
            spec = spec.resume_after(&last.key);
        }
        keys.extend(got.rows.into_iter().map(|r| r.key));
        if got.complete {
            return keys;
        }
    }
}

/// Wait until `cond` holds, checking it every 10 ms (the actix system runs meanwhile); panics
/// naming `what` if it does not hold within `within`. For what the server does in the
/// background (a split, a compaction, a timer's fsync): the deadline only bounds a test that
/// would otherwise hang, it is no assertion on speed.
pub async fn wait_until(what: &str, within: Duration, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Bounds a wait that only a bug makes endless (a minute: no assertion on speed).
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    actix_rt::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} never happened"))
}

/// The segments of the first region of `table`.
pub async fn segments(kura: &Kura, table: &str) -> u64 {
    kura.regions(table).await.expect("regions")[0]
        .stats
        .segments
}

/// Whether any region of `table` has a compaction under way (or not yet installed).
pub async fn compacting(kura: &Kura, table: &str) -> bool {
    let regions = kura.regions(table).await.expect("regions");
    regions.iter().any(|r| r.stats.compacting)
}

/// The methods of a [`HookedFs`] a test intercepts; each default passes straight to the
/// `SimFs`. A hook that overrides one does what it must first (wait at a gate) or wraps what
/// the `SimFs` returns, and calls the `SimFs` itself.
pub trait FsHook: Send + Sync {
    /// Instead of `fs.create(path)`.
    fn create(&self, fs: &SimFs, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        fs.create(path)
    }
    /// Instead of `fs.open_write(path)`.
    fn open_write(&self, fs: &SimFs, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        fs.open_write(path)
    }
}

/// A `SimFs` (`inner`) with a test's [`FsHook`] (`hook`) on the methods it intercepts; every
/// other `FileSystem` method goes to the `SimFs` unchanged. The trait's provided methods
/// (`map_prefix`, `link_or_copy`) are not forwarded: as for a plain `SimFs`, they are the
/// trait's defaults, built on `map` and `create`, so a copy's creation meets the hook too.
pub struct HookedFs<H> {
    pub inner: SimFs,
    pub hook: H,
}

impl<H: FsHook> HookedFs<H> {
    /// A fresh, empty `SimFs` behind `hook`.
    pub fn new(hook: H) -> Self {
        HookedFs {
            inner: SimFs::new(),
            hook,
        }
    }
}

impl<H: FsHook> FileSystem for HookedFs<H> {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn len(&self, path: &Path) -> io::Result<u64> {
        self.inner.len(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.hook.create(&self.inner, path)
    }
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.hook.open_write(&self.inner, path)
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn io::Read + Send>> {
        self.inner.open_read(path)
    }
    fn map(&self, path: &Path) -> io::Result<Arc<dyn FileBytes>> {
        self.inner.map(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.inner.truncate(path, len)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
}
