//! Criterion benches of the storage engine (`kura-storage`), on the real file system (a temporary
//! directory under `$TMPDIR`).
//!
//! Run: `cargo bench -p kura-bench --bench storage` (about two minutes; a group alone:
//! `cargo bench -p kura-bench --bench storage -- log_append`). Figures are kept in
//! the one figure table of `benches/README.md`.
//!
//! Every workload uses 100-byte values, one family `f`, qualifier `q`, and the row keys of the
//! fjall comparison (`benches/fjall-compare`): `user` + 12 digits, in a scrambled order. Sample
//! counts are small (10 samples, 3 s each) to keep the run short on a shared 2-core machine;
//! read the confidence intervals criterion prints.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kura_storage::model::*;
use kura_storage::row_filter::RowFilter;
use kura_storage::{Durability, RegionStore, StoreOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

/// The allocator the `kura` server ships with (`src/main.rs`), so that the figures are the
/// server's: the memtable allocates a value (and a long key) per put.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const VALUE: usize = 100;
const LOADED: usize = 100_000;

fn row_key(i: usize) -> Vec<u8> {
    format!(
        "user{:012}",
        (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000
    )
    .into_bytes()
}

fn put(row: Vec<u8>) -> RowMutation {
    put_sized(row, VALUE)
}

/// A one-cell put of a `value_len`-byte value.
fn put_sized(row: Vec<u8>, value_len: usize) -> RowMutation {
    RowMutation {
        row,
        mutations: vec![Mutation::Put {
            family: b"f".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: None,
            value: vec![7u8; value_len],
        }],
    }
}

/// The options of every bench store: one family `f`.
fn options(durability: Durability, memtable_budget: usize) -> StoreOptions {
    let mut opts = StoreOptions::new(vec![FamilyDescriptor::new("f")]);
    opts.durability = durability;
    opts.memtable_budget = memtable_budget;
    opts
}

/// A store in a fresh temporary directory (removed when the returned guard drops).
fn store(durability: Durability, memtable_budget: usize) -> (tempfile::TempDir, RegionStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s, _) =
        RegionStore::open(dir.path(), options(durability, memtable_budget)).expect("open store");
    (dir, s)
}

/// A store holding rows `0..n`, flushed to segments if `flush`.
fn loaded(n: usize, flush: bool) -> (tempfile::TempDir, RegionStore) {
    loaded_with(n, flush, row_key, VALUE)
}

/// HBase PE's row key for row `i` (`%026d`).
fn pe_key(i: usize) -> Vec<u8> {
    format!("{i:026}").into_bytes()
}

/// [`loaded`] with other row keys and values of `value_len` bytes.
fn loaded_with(
    n: usize,
    flush: bool,
    key: fn(usize) -> Vec<u8>,
    value_len: usize,
) -> (tempfile::TempDir, RegionStore) {
    let (dir, mut s) = store(Durability::None, 1 << 30);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1024) {
        let ops = chunk
            .iter()
            .map(|i| WriteOp::Mutate(put_sized(key(*i), value_len)))
            .collect();
        for r in s.write_batch(ops) {
            r.expect("load");
        }
    }
    if flush {
        s.flush().expect("flush");
    }
    (dir, s)
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

/// Log append through `RegionStore::write_batch`, batches of 1, 16 and 256 one-cell puts, with
/// `Durability::Sync` (one fsync per batch: group commit) and `Durability::None` (written to
/// the OS, never fsynced). The memtable never flushes here, so this is the log plus the
/// memtable insert.
///
/// Watch: `sync/1` is the fsync latency of the disk (operations/s = fsyncs/s); `sync/256`
/// against `sync/1` is what group commit buys (should be close to 256x until encoding and the
/// write dominate); `none/256` is the CPU ceiling of the write path (encode, CRC, one `write`,
/// memtable insert), and `none/1` minus that is the per-`write` syscall cost.
fn log_append(c: &mut Criterion) {
    let mut g = c.benchmark_group("log_append");
    for (name, durability) in [("sync", Durability::Sync), ("none", Durability::None)] {
        for batch in [1usize, 16, 256] {
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_with_input(BenchmarkId::new(name, batch), &batch, |b, &batch| {
                b.iter_custom(|iters| {
                    let (_dir, mut s) = store(durability, 1 << 30);
                    let mut next = 0usize;
                    let batches: Vec<Vec<WriteOp>> = (0..iters)
                        .map(|_| {
                            (0..batch)
                                .map(|_| {
                                    next += 1;
                                    WriteOp::Mutate(put(row_key(next)))
                                })
                                .collect()
                        })
                        .collect();
                    let t = Instant::now();
                    for ops in batches {
                        for r in s.write_batch(ops) {
                            r.expect("write");
                        }
                    }
                    t.elapsed()
                });
            });
        }
    }
    g.finish();
}

/// The memtable through the store: puts that never flush (`Durability::None`, a 1 GiB budget)
/// and point gets of 100,000 rows that are all in the memtable (no segment).
///
/// Watch: `put` (ns per one-cell put, log write included) and `get` (ns per hit); `get` is the
/// floor every read pays before any segment is consulted.
fn memtable(c: &mut Criterion) {
    let mut g = c.benchmark_group("memtable");
    g.throughput(Throughput::Elements(1));
    g.bench_function("put", |b| {
        b.iter_custom(|iters| {
            let (_dir, mut s) = store(Durability::None, 1 << 30);
            let rows: Vec<RowMutation> = (0..iters as usize).map(|i| put(row_key(i))).collect();
            let t = Instant::now();
            for m in rows {
                s.mutate_row(m).expect("put");
            }
            t.elapsed()
        });
    });
    let (_dir, s) = loaded(LOADED, false);
    assert_eq!(s.stats().segments, 0, "all in the memtable");
    let mut rng = SmallRng::seed_from_u64(1);
    let read = ReadSpec::default();
    g.bench_function("get", |b| {
        b.iter(|| {
            let key = row_key(rng.gen_range(0..LOADED));
            black_box(s.get(&key, &read).expect("get").expect("present"))
        });
    });
    // HBase PE's rows: 26 digits, zero-padded, so every key shares its first 16 bytes.
    let (_dir, s) = loaded_with(LOADED, false, pe_key, VALUE);
    g.bench_function("get_pe_keys", |b| {
        b.iter(|| {
            let key = pe_key(rng.gen_range(0..LOADED));
            black_box(s.get(&key, &read).expect("get").expect("present"))
        });
    });
    g.finish();
}

/// Reads from one segment (100,000 rows flushed, empty memtable): point gets of present rows,
/// point gets of absent rows (answered by the row filter), and forward scans of 100 rows.
///
/// Watch: `get_hit` (block index binary search + in-block search through the memory map),
/// `get_miss` (should be a fraction of `get_hit`: the Bloom filter skips the segment), and
/// `scan_100` in rows/s (sequential decoding speed).
fn segment(c: &mut Criterion) {
    let mut g = c.benchmark_group("segment");
    let (_dir, s) = loaded(LOADED, true);
    assert_eq!(s.stats().segments, 1, "one segment");
    assert_eq!(s.stats().memtable_cells, 0, "nothing in the memtable");
    let mut rng = SmallRng::seed_from_u64(2);
    let read = ReadSpec::default();
    g.throughput(Throughput::Elements(1));
    g.bench_function("get_hit", |b| {
        b.iter(|| {
            let key = row_key(rng.gen_range(0..LOADED));
            black_box(s.get(&key, &read).expect("get").expect("present"))
        });
    });
    g.bench_function("get_miss", |b| {
        b.iter(|| {
            let key = row_key(LOADED + rng.gen_range(0..LOADED));
            black_box(s.get(&key, &read).expect("get"))
        });
    });
    scan_bench(&mut g, &s, &mut rng);
    g.finish();
}

fn scan_bench(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    s: &RegionStore,
    rng: &mut SmallRng,
) {
    const ROWS: usize = 100;
    let limits = ScanLimits {
        max_rows: ROWS,
        max_bytes: usize::MAX,
    };
    g.throughput(Throughput::Elements(ROWS as u64));
    g.bench_function("scan_100", |b| {
        b.iter(|| {
            // Starting from a random key: `user` + a random 12-digit prefix.
            let start = format!("user{:012}", rng.gen_range(0..990_000_000_000u64));
            let page = s
                .scan(&ScanSpec::forward(start.as_bytes(), b""), limits)
                .expect("scan");
            black_box(page.rows.len())
        });
    });
}

/// The whole store as a region actor uses it, with the default 64 MiB memtable budget (so
/// flushes and tiered compactions happen inside the put figure): one-cell puts
/// (`Durability::None`), gets and 100-row scans over 100,000 flushed rows plus 20,000 in the
/// memtable (a merged read), and increments of 1,000 counters.
///
/// Watch: these four are the engine's share of the HTTP figures; compare with fjall
/// (`benches/fjall-compare`) and with the `memtable`/`segment` groups to see what merging and
/// the read-modify-write cost.
fn region_store(c: &mut Criterion) {
    let mut g = c.benchmark_group("region_store");
    g.throughput(Throughput::Elements(1));
    g.bench_function("put", |b| {
        let (_dir, mut s) = store(Durability::None, 64 << 20);
        let mut i = 0usize;
        b.iter(|| {
            i += 1;
            s.mutate_row(put(row_key(i))).expect("put");
        });
    });
    let (_dir, mut s) = loaded(LOADED, true);
    for i in LOADED..LOADED + 20_000 {
        s.mutate_row(put(row_key(i))).expect("put");
    }
    let mut rng = SmallRng::seed_from_u64(3);
    let read = ReadSpec::default();
    g.bench_function("get", |b| {
        b.iter(|| {
            let key = row_key(rng.gen_range(0..LOADED + 20_000));
            black_box(s.get(&key, &read).expect("get").expect("present"))
        });
    });
    g.bench_function("increment", |b| {
        let (_dir, mut s) = store(Durability::None, 64 << 20);
        let mut rng = SmallRng::seed_from_u64(4);
        b.iter(|| {
            let inc = Increment {
                row: row_key(rng.gen_range(0..1000)),
                columns: vec![(b"f".to_vec(), b"q".to_vec(), 1)],
            };
            black_box(s.increment(inc).expect("increment"))
        });
    });
    scan_bench(&mut g, &s, &mut rng);
    g.finish();
}

/// Rows of the `cold_reads` group's segment: 300 MB of 1,000-byte values, HBase PE's keys.
const COLD_ROWS: usize = 300_000;
/// Reads between two reopenings of the `cold_reads` store: fewer than its blocks, so that most
/// reads find their block not yet checked.
const COLD_READS_PER_OPEN: u64 = 2_048;

/// Point reads of a segment as the first reads after a flush, a compaction or a restart find
/// it: every block not yet CRC-checked nor parsed, its pages in the page cache but not yet in
/// the process's page tables. One 300 MB segment of 1,000-byte values under PE's keys; the
/// store is reopened (not timed) every 2,048 reads.
///
/// `get_checked` reads the same segment once every block has been read.
///
/// Watch: `get_first_touch` against `get_checked`: the difference is the
/// first read's block check (CRC of the whole block, its entries parsed once) and its page
/// faults, which the GETs right after a large load pay on almost every read.
fn cold_reads(c: &mut Criterion) {
    let mut g = c.benchmark_group("cold_reads");
    let (dir, s) = loaded_with(COLD_ROWS, true, pe_key, 1000);
    assert_eq!(s.stats().segments, 1, "one segment");
    drop(s);
    let opts = || options(Durability::None, 1 << 30);
    let mut rng = SmallRng::seed_from_u64(6);
    let read = ReadSpec::default();
    g.throughput(Throughput::Elements(1));
    g.bench_function("get_first_touch", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let (s, _) = RegionStore::open(dir.path(), opts()).expect("reopen store");
                let n = left.min(COLD_READS_PER_OPEN);
                let start = Instant::now();
                for _ in 0..n {
                    let key = pe_key(rng.gen_range(0..COLD_ROWS));
                    black_box(s.get(&key, &read).expect("get").expect("present"));
                }
                took += start.elapsed();
                left -= n;
            }
            took
        });
    });
    let (s, _) = RegionStore::open(dir.path(), opts()).expect("reopen store");
    for i in 0..COLD_ROWS {
        s.get(&pe_key(i), &read).expect("get").expect("present");
    }
    g.bench_function("get_checked", |b| {
        b.iter(|| {
            let key = pe_key(rng.gen_range(0..COLD_ROWS));
            black_box(s.get(&key, &read).expect("get").expect("present"))
        });
    });
    g.finish();
}

/// Rows the `row_filter` group's filters hold: 1.25 MB of filter each, more than a core's L2,
/// as the filters of a server's many segments are together.
const FILTER_ROWS: usize = 1_000_000;
/// Lookups per measured iteration of the `row_filter` group.
const LOOKUPS: usize = 1024;

/// A segment's row filter alone: `may_contain` on the legacy filter (version-1 segments: 7
/// probes anywhere in the bit array, a 64-bit `%` each) and on the blocked one written today
/// (6 probes in one 64-byte line), both over the same 1,000,000 rows at 10 bits per row, asked
/// about rows present and absent (batches of 1,024 pre-built keys, in random order).
///
/// Watch: blocked / legacy per kind of lookup. A present row runs every probe (7 cache misses
/// against 1); an absent one stops at the first clear bit, so its ratio is smaller.
fn row_filter(c: &mut Criterion) {
    let mut g = c.benchmark_group("row_filter");
    let mut rng = SmallRng::seed_from_u64(5);
    let present: Vec<Vec<u8>> = (0..1 << 16)
        .map(|_| row_key(rng.gen_range(0..FILTER_ROWS)))
        .collect();
    let absent: Vec<Vec<u8>> = (0..1 << 16)
        .map(|_| row_key(FILTER_ROWS + rng.gen_range(0..FILTER_ROWS)))
        .collect();
    g.throughput(Throughput::Elements(LOOKUPS as u64));
    for (kind, mut filter) in [
        ("legacy", RowFilter::legacy(FILTER_ROWS as u64)),
        ("blocked", RowFilter::blocked(FILTER_ROWS as u64)),
    ] {
        for i in 0..FILTER_ROWS {
            filter.insert(&row_key(i));
        }
        for (which, keys) in [("present", &present), ("absent", &absent)] {
            let mut at = 0usize;
            g.bench_function(BenchmarkId::new(kind, which), |b| {
                b.iter(|| {
                    let mut passed = 0usize;
                    for _ in 0..LOOKUPS {
                        at = (at + 1) & (keys.len() - 1);
                        passed += usize::from(filter.may_contain(&keys[at]));
                    }
                    black_box(passed)
                });
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = log_append, memtable, segment, region_store, row_filter, cold_reads
}
criterion_main!(benches);
