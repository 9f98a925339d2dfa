//! Kura's region store against fjall on the same put / get / scan / increment workload.
//!
//! Both engines run in one process, one after the other, on the same machine and disk, over the
//! same keys and values, and every figure is reported as Kura / fjall. Each workload runs
//! `--rounds` times (default 3) and the median is kept. What each row measures:
//!
//! | workload | Kura | fjall |
//! |---|---|---|
//! | put (buffered) | `mutate_row`, `Durability::None` | `insert`, no persist |
//! | put (kill -9 safe) | the same | `insert` + `persist(Buffer)` |
//! | put (sync, batch 64) | `write_batch` of 64 puts, one fsync | 64 `insert` + `persist(SyncAll)` |
//! | get | `get` of a random loaded row, after a flush | `get` of the same key |
//! | scan 100 | `scan` of 100 rows from a random start | `range(start..).take(100)` |
//! | increment | `increment` (read-modify-write inside the store) | `get` + `insert` of an 8-byte value |
//! | increment (kill -9 safe) | the same | the same + `persist(Buffer)` |
//!
//! "Buffered" fjall keeps its journal writes in a user-space buffer: an acknowledged write is
//! lost by a process crash. Kura's weakest mode (`none`) never acknowledges before the
//! `write()` call (RELIABILITY.md), so the "kill -9 safe" rows, where fjall also hands each
//! write to the OS (`PersistMode::Buffer`), compare equal guarantees.
//!
//! fjall is a key-value store: a Kura cell `(row, cf:q)` maps to fjall key `row`, value `value`.
//! Kura does strictly more work per operation (timestamps, versions, delete markers); the
//! ratio says what that costs.

use fjall::{Database, KeyspaceCreateOptions, PersistMode};

/// With the `mimalloc` feature (the default), both engines run on the `kura` server's allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use kura_storage::model::*;
use kura_storage::{Durability, RegionStore, StoreOptions};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::time::{Duration, Instant};

const LOADED_ROWS: usize = 200_000;
const OPS: usize = 50_000;
const VALUE: usize = 100;

fn row_key(i: usize) -> Vec<u8> {
    format!(
        "user{:012}",
        (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000
    )
    .into_bytes()
}

fn put(row: Vec<u8>, value: Vec<u8>) -> RowMutation {
    RowMutation {
        row,
        mutations: vec![Mutation::Put {
            family: b"f".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: None,
            value,
        }],
    }
}

fn kura_open(dir: &std::path::Path, durability: Durability) -> RegionStore {
    let mut opts = StoreOptions::new(vec![FamilyDescriptor::new("f")]);
    opts.durability = durability;
    // The log as the server writes it (preallocated, storage/FORMAT.md §4.5).
    opts.log_prealloc = kura_storage::DEFAULT_LOG_PREALLOC;
    RegionStore::open(dir, opts).expect("open kura store").0
}

fn fjall_open(dir: &std::path::Path) -> (Database, fjall::Keyspace) {
    let db = Database::builder(dir).open().expect("open fjall");
    let ks = db
        .keyspace("f", KeyspaceCreateOptions::default)
        .expect("fjall keyspace");
    (db, ks)
}

/// Ops per second of `n` operations.
fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

struct Figures {
    name: &'static str,
    kura: f64,
    fjall: f64,
}

fn bench_put_buffered(persist: Option<PersistMode>) -> (f64, f64) {
    let value = vec![7u8; VALUE];
    let kd = tempfile::tempdir().expect("tempdir");
    let mut k = kura_open(kd.path(), Durability::None);
    let t = Instant::now();
    for i in 0..OPS {
        k.mutate_row(put(row_key(i), value.clone()))
            .expect("kura put");
    }
    let kr = rate(OPS, t.elapsed());
    let fd = tempfile::tempdir().expect("tempdir");
    let (db, f) = fjall_open(fd.path());
    let t = Instant::now();
    for i in 0..OPS {
        f.insert(row_key(i), value.clone()).expect("fjall insert");
        if let Some(mode) = persist {
            db.persist(mode).expect("fjall persist");
        }
    }
    (kr, rate(OPS, t.elapsed()))
}

fn bench_put_sync_batch() -> (f64, f64) {
    const BATCH: usize = 64;
    const BATCHES: usize = 100;
    let value = vec![7u8; VALUE];
    let kd = tempfile::tempdir().expect("tempdir");
    let mut k = kura_open(kd.path(), Durability::Sync);
    let t = Instant::now();
    for b in 0..BATCHES {
        let ops = (0..BATCH)
            .map(|i| WriteOp::Mutate(put(row_key(b * BATCH + i), value.clone())))
            .collect();
        for r in k.write_batch(ops) {
            r.expect("kura batch put");
        }
    }
    let kr = rate(BATCH * BATCHES, t.elapsed());
    let fd = tempfile::tempdir().expect("tempdir");
    let (db, f) = fjall_open(fd.path());
    let t = Instant::now();
    for b in 0..BATCHES {
        for i in 0..BATCH {
            f.insert(row_key(b * BATCH + i), value.clone())
                .expect("fjall insert");
        }
        db.persist(PersistMode::SyncAll).expect("fjall persist");
    }
    (kr, rate(BATCH * BATCHES, t.elapsed()))
}

struct Loaded {
    _kd: tempfile::TempDir,
    _fd: tempfile::TempDir,
    kura: RegionStore,
    _db: Database,
    fjall: fjall::Keyspace,
    keys: Vec<Vec<u8>>,
}

fn load() -> Loaded {
    let value = vec![7u8; VALUE];
    let kd = tempfile::tempdir().expect("tempdir");
    let mut kura = kura_open(kd.path(), Durability::None);
    let fd = tempfile::tempdir().expect("tempdir");
    let (db, fjall) = fjall_open(fd.path());
    let keys: Vec<Vec<u8>> = (0..LOADED_ROWS).map(row_key).collect();
    for k in &keys {
        kura.mutate_row(put(k.clone(), value.clone()))
            .expect("kura load");
        fjall.insert(k.clone(), value.clone()).expect("fjall load");
    }
    kura.flush().expect("kura flush");
    db.persist(PersistMode::SyncAll).expect("fjall persist");
    Loaded {
        _kd: kd,
        _fd: fd,
        kura,
        _db: db,
        fjall,
        keys,
    }
}

fn bench_get(l: &Loaded, rng: &mut StdRng) -> (f64, f64) {
    let picks: Vec<usize> = (0..OPS).map(|_| rng.gen_range(0..l.keys.len())).collect();
    let read = ReadSpec::default();
    let t = Instant::now();
    for &i in &picks {
        let r = l.kura.get(&l.keys[i], &read).expect("kura get");
        assert!(r.is_some(), "kura lost a loaded row");
    }
    let kr = rate(OPS, t.elapsed());
    let t = Instant::now();
    for &i in &picks {
        let r = l.fjall.get(&l.keys[i]).expect("fjall get");
        assert!(r.is_some());
    }
    (kr, rate(OPS, t.elapsed()))
}

fn bench_scan(l: &Loaded, rng: &mut StdRng) -> (f64, f64) {
    const SCANS: usize = 2_000;
    const ROWS: usize = 100;
    let mut sorted = l.keys.clone();
    sorted.sort();
    let starts: Vec<Vec<u8>> = (0..SCANS)
        .map(|_| sorted[rng.gen_range(0..sorted.len() - ROWS)].clone())
        .collect();
    let limits = ScanLimits {
        max_rows: ROWS,
        max_bytes: usize::MAX,
    };
    let t = Instant::now();
    for s in &starts {
        let page = l
            .kura
            .scan(&ScanSpec::forward(s, b""), limits)
            .expect("kura scan");
        assert_eq!(page.rows.len(), ROWS);
    }
    let kr = rate(SCANS * ROWS, t.elapsed());
    let t = Instant::now();
    for s in &starts {
        let n = l
            .fjall
            .range(s.clone()..)
            .take(ROWS)
            .map(|g| g.into_inner().expect("kv"))
            .count();
        assert_eq!(n, ROWS);
    }
    (kr, rate(SCANS * ROWS, t.elapsed()))
}

fn bench_increment(rng: &mut StdRng, persist: Option<PersistMode>) -> (f64, f64) {
    const COUNTERS: usize = 1_000;
    let picks: Vec<usize> = (0..OPS).map(|_| rng.gen_range(0..COUNTERS)).collect();
    let kd = tempfile::tempdir().expect("tempdir");
    let mut k = kura_open(kd.path(), Durability::None);
    let t = Instant::now();
    for &i in &picks {
        k.increment(Increment {
            row: row_key(i),
            columns: vec![(b"f".to_vec(), b"q".to_vec(), 1)],
        })
        .expect("kura increment");
    }
    let kr = rate(OPS, t.elapsed());
    let fd = tempfile::tempdir().expect("tempdir");
    let (db, f) = fjall_open(fd.path());
    let t = Instant::now();
    for &i in &picks {
        let key = row_key(i);
        let old = f
            .get(&key)
            .expect("fjall get")
            .map(|v| i64::from_be_bytes(v.as_ref().try_into().expect("8 bytes")))
            .unwrap_or(0);
        f.insert(key, (old + 1).to_be_bytes())
            .expect("fjall insert");
        if let Some(mode) = persist {
            db.persist(mode).expect("fjall persist");
        }
    }
    (kr, rate(OPS, t.elapsed()))
}

fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let mut rng = StdRng::seed_from_u64(42);
    let mut results: Vec<(&'static str, Vec<f64>, Vec<f64>)> = vec![
        ("put (fjall buffered in user space)", vec![], vec![]),
        ("put (both kill -9 safe)", vec![], vec![]),
        ("put (sync, batch 64)", vec![], vec![]),
        ("get", vec![], vec![]),
        ("scan 100 (rows/s)", vec![], vec![]),
        ("increment (fjall buffered in user space)", vec![], vec![]),
        ("increment (both kill -9 safe)", vec![], vec![]),
    ];
    let loaded = load();
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        let figures = [
            bench_put_buffered(None),
            bench_put_buffered(Some(PersistMode::Buffer)),
            bench_put_sync_batch(),
            bench_get(&loaded, &mut rng),
            bench_scan(&loaded, &mut rng),
            bench_increment(&mut rng, None),
            bench_increment(&mut rng, Some(PersistMode::Buffer)),
        ];
        for (slot, (k, f)) in results.iter_mut().zip(figures) {
            slot.1.push(k);
            slot.2.push(f);
        }
    }
    let figures: Vec<Figures> = results
        .into_iter()
        .map(|(name, k, f)| Figures {
            name,
            kura: median(k),
            fjall: median(f),
        })
        .collect();
    println!("| workload | Kura ops/s | fjall ops/s | Kura / fjall |");
    println!("|---|---:|---:|---:|");
    for f in &figures {
        println!(
            "| {} | {:.0} | {:.0} | {:.2} |",
            f.name,
            f.kura,
            f.fjall,
            f.kura / f.fjall
        );
    }
}
