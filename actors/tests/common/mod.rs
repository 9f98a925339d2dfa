//! Helpers shared by the actor tests: a server over a real store in a temp dir.
#![allow(dead_code)]

use kura_actors::*;
use std::ops::AsyncFnMut;
use std::path::Path;
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

/// Whether any region of `table` has a compaction under way (or not yet installed).
pub async fn compacting(kura: &Kura, table: &str) -> bool {
    let regions = kura.regions(table).await.expect("regions");
    regions.iter().any(|r| r.stats.compacting)
}
