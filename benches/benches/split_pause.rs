//! How long a region split pauses the region, by the size of the region.
//!
//! The pause is what the region actor runs while it holds the store off its thread for a split
//! (`actors/src/region/split.rs`): flush the memtable, then give the moved half to the new
//! region's store (`RegionStore::link_rows`: a hard link per segment; before it, the moved
//! rows were copied into a new segment, so the pause grew with the region). This bench builds a store with about `S` MB of segments (1000-byte values,
//! one family) plus 8 MB of unflushed writes, then times that step once per size, three times
//! (a fresh 8 MB memtable before each), and prints the median per size and the ratio of the
//! largest size's pause to the smallest's. A pause independent of the region's size gives a
//! ratio near 1.
//!
//! Run: `cargo bench -p kura-bench --bench split_pause` (sizes in MB: `-- 50 500`, the
//! default). It writes the stores under `$TMPDIR` (about twice the largest size at most).

use kura_storage::model::*;
use kura_storage::{Durability, RegionStore, StoreOptions};
use std::time::{Duration, Instant};

const VALUE: usize = 1000;
const MEMTABLE: usize = 8 << 20;

fn put(i: u64) -> WriteOp {
    WriteOp::Mutate(RowMutation {
        row: format!(
            "row{:012}",
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000
        )
        .into_bytes(),
        mutations: vec![Mutation::Put {
            family: b"f".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: None,
            value: vec![(i % 251) as u8; VALUE],
        }],
    })
}

/// The upper half of a split: rows whose key ends in an odd digit.
fn upper(row: &[u8]) -> bool {
    row.last().is_some_and(|b| b % 2 == 1)
}

fn write_bytes(s: &mut RegionStore, next: &mut u64, bytes: usize) {
    let rows = bytes / (VALUE + 32);
    for _ in 0..rows.div_ceil(512) {
        let ops: Vec<WriteOp> = (0..512)
            .map(|_| {
                *next += 1;
                put(*next)
            })
            .collect();
        for r in s.write_batch(ops) {
            r.expect("write");
        }
    }
}

/// The split step's pause on a store with about `mb` MB of segments.
fn pauses(mb: usize) -> Vec<Duration> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = StoreOptions::new(vec![FamilyDescriptor::new("f")]);
    opts.durability = Durability::None;
    opts.memtable_budget = 64 << 20;
    // As the server runs its stores: flushes never compact inline.
    opts.background_flush = true;
    let (mut s, _) = RegionStore::open(&dir.path().join("parent"), opts.clone()).expect("open");
    let mut next = 0;
    write_bytes(&mut s, &mut next, mb << 20);
    s.flush().expect("flush");
    let mut out = Vec::new();
    for round in 0..3 {
        write_bytes(&mut s, &mut next, MEMTABLE);
        let dest = dir.path().join(format!("daughter{round}"));
        let started = Instant::now();
        // Flushes, then links every segment into `dest` (`RegionStore::link_rows`).
        s.link_rows(&upper, &dest, opts.clone()).expect("split");
        out.push(started.elapsed());
        std::fs::remove_dir_all(&dest).expect("remove daughter");
    }
    out.sort();
    out
}

fn main() {
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if sizes.is_empty() {
        sizes = vec![50, 500];
    }
    let mut medians = Vec::new();
    for mb in &sizes {
        let p = pauses(*mb);
        println!(
            "split pause, {mb} MB of segments + {} MB memtable: median {:.1} ms (min {:.1}, max {:.1})",
            MEMTABLE >> 20,
            p[1].as_secs_f64() * 1e3,
            p[0].as_secs_f64() * 1e3,
            p[2].as_secs_f64() * 1e3
        );
        medians.push(p[1]);
    }
    if let (Some(first), Some(last)) = (medians.first(), medians.last()) {
        println!(
            "ratio of the pause at {} MB to the pause at {} MB: {:.2}",
            sizes[sizes.len() - 1],
            sizes[0],
            last.as_secs_f64() / first.as_secs_f64().max(1e-9)
        );
    }
}
