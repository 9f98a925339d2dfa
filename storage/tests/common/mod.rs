//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

use kura_storage::*;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

pub fn families() -> Vec<FamilyDescriptor> {
    vec![
        FamilyDescriptor::new("cf").with_max_versions(3),
        FamilyDescriptor::new("one"),
    ]
}

/// The tests' default options: flushes as the server runs them (`RegionActor::options` in
/// actors/src/region: `background_flush`, segment writes paced at the server's default rate),
/// so a write never flushes inline below twice the budget and a flush never compacts inline;
/// [`Flusher`] drives the flushes as the region actor does. Everything else is
/// [`StoreOptions::new`]'s; log preallocation stays off unless a test sets it, since the
/// damage tests walk every byte of a log.
pub fn server_options(families: Vec<FamilyDescriptor>) -> StoreOptions {
    StoreOptions {
        background_flush: true,
        background_write_rate: 32 << 20,
        ..StoreOptions::new(families)
    }
}

/// Inline flush: a write that fills the memtable flushes it (and compacts tiers) before it
/// returns. For tests that need a flush, and its I/O, at a fixed point of a workload.
pub fn inline_flush_options(families: Vec<FamilyDescriptor>) -> StoreOptions {
    StoreOptions::new(families)
}

pub fn open(dir: &Path) -> RegionStore {
    RegionStore::open(dir, server_options(families()))
        .expect("open")
        .0
}

pub fn open_sim(fs: &SimFs, options: StoreOptions) -> Result<(RegionStore, RecoveryReport)> {
    RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new("/region"), options)
}

pub fn put(fam: &str, q: &str, ts: Option<i64>, v: &str) -> Mutation {
    Mutation::Put {
        family: fam.into(),
        qualifier: q.into(),
        timestamp: ts,
        value: v.into(),
    }
}

pub fn mutate(store: &mut RegionStore, row: &str, ms: Vec<Mutation>) {
    store
        .mutate_row(RowMutation {
            row: row.into(),
            mutations: ms,
        })
        .expect("mutate");
}

pub fn read(versions: u32) -> ReadSpec {
    ReadSpec {
        max_versions: versions,
        ..ReadSpec::default()
    }
}

/// `(family:qualifier, ts, value)` of the visible cells of a row.
pub fn cells(store: &RegionStore, row: &str, spec: &ReadSpec) -> Vec<(String, i64, String)> {
    store
        .get(row.as_bytes(), spec)
        .expect("get")
        .map(|r| {
            r.cells
                .into_iter()
                .map(|c| {
                    (
                        format!(
                            "{}:{}",
                            String::from_utf8_lossy(&c.family),
                            String::from_utf8_lossy(&c.qualifier)
                        ),
                        c.timestamp,
                        String::from_utf8_lossy(&c.value).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn c(col: &str, ts: i64, v: &str) -> (String, i64, String) {
    (col.to_string(), ts, v.to_string())
}

/// Runs a store's flushes as the region actor does (actors/src/region/maintenance.rs): once
/// the memtable is full, freeze it and write it to a segment on a thread of its own while
/// writes go on; install the segment once that thread is done. At most one flush at a time.
#[derive(Default)]
pub struct Flusher {
    running: Option<JoinHandle<FlushOutput>>,
}

impl Flusher {
    /// After a write: install a flush that has finished, and start one if the memtable is
    /// full.
    pub fn after_write(&mut self, store: &mut RegionStore) -> Result<()> {
        if self.running.as_ref().is_some_and(JoinHandle::is_finished) {
            self.wait(store)?;
        }
        if self.running.is_none() && store.wants_flush() {
            if let Some(task) = store.flush_task()? {
                self.running = Some(std::thread::spawn(move || task.run()));
            }
        }
        Ok(())
    }

    /// Wait until the running flush, if any, has written its segment, and install it.
    pub fn wait(&mut self, store: &mut RegionStore) -> Result<()> {
        match self.running.take() {
            Some(job) => {
                let out = job.join().expect("the flush thread panicked");
                store.install_flush(out).map(drop)
            }
            None => Ok(()),
        }
    }

    /// [`Flusher::after_write`], then [`Flusher::wait`]: the flush the write started, if any,
    /// runs on its thread and is installed before the next step of the workload, so that a
    /// fault or a power cut lands at the same point of it on every run.
    pub fn after_write_and_wait(&mut self, store: &mut RegionStore) -> Result<()> {
        self.after_write(store)?;
        self.wait(store)
    }
}
