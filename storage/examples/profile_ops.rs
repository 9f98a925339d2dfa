//! A tiny driver for profiling the store's hot paths under `perf` (not a benchmark: the
//! criterion benches in `benches/` are). Usage: `cargo run --release -p kura-storage --example
//! profile_ops -- increment|put|scan|get`.

use kura_storage::*;
use std::time::Instant;

fn main() {
    let what = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "increment".into());
    if what == "recover" {
        recover();
        return;
    }
    if what == "syncbatch" {
        sync_batches();
        return;
    }
    let dir = std::env::temp_dir().join(format!("kura-profile-{}", std::process::id()));
    let mut opts = StoreOptions::new(vec![FamilyDescriptor::new("f")]);
    opts.durability = Durability::None;
    let (mut s, _) = RegionStore::open(&dir, opts).expect("open");
    let n = 200_000usize;
    let key = |i: usize| {
        format!(
            "user{:012}",
            (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000
        )
        .into_bytes()
    };
    let t = Instant::now();
    match what.as_str() {
        "increment" => {
            for i in 0..n {
                s.increment(Increment {
                    row: key(i % 1000),
                    columns: vec![(b"f".to_vec(), b"q".to_vec(), 1)],
                })
                .expect("increment");
            }
        }
        _ => {
            for i in 0..n {
                s.mutate_row(RowMutation {
                    row: key(i),
                    mutations: vec![Mutation::Put {
                        family: b"f".to_vec(),
                        qualifier: b"q".to_vec(),
                        timestamp: None,
                        value: vec![7; 100],
                    }],
                })
                .expect("put");
            }
            if what != "put" {
                s.flush().expect("flush");
                let t = Instant::now();
                let iters: usize = std::env::args()
                    .nth(2)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(20_000);
                let limits = ScanLimits {
                    max_rows: 100,
                    max_bytes: usize::MAX,
                };
                let mut rows = 0usize;
                for i in 0..iters {
                    if what == "scan" || what == "rscan" {
                        let spec = ScanSpec {
                            reversed: what == "rscan",
                            ..ScanSpec::forward(&key(i), b"")
                        };
                        let page = s.scan(&spec, limits).expect("scan");
                        rows += page.rows.len();
                    } else {
                        s.get(&key(i), &ReadSpec::default()).expect("get");
                    }
                }
                println!("{what}: {:.1} rows per call", rows as f64 / iters as f64);
                println!(
                    "{what}: {:.0} ops/s",
                    iters as f64 / t.elapsed().as_secs_f64()
                );
            }
        }
    }
    println!(
        "{what} phase: {:.0} writes/s",
        n as f64 / t.elapsed().as_secs_f64()
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Write a log of about `MB` MiB (1000-byte values, no flush), then time its recovery.
fn recover() {
    let mb: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    // Kept between runs (delete it by hand) so that a profile can cover the recovery alone.
    let dir = std::env::temp_dir().join(format!("kura-recover-{mb}"));
    let mut opts = StoreOptions::new(vec![FamilyDescriptor::new("f")]);
    opts.durability = Durability::None;
    opts.memtable_budget = usize::MAX;
    if !dir.join("MANIFEST").exists() {
        let (mut s, _) = RegionStore::open(&dir, opts.clone()).expect("open");
        let rows = mb * 1024 * 1024 / 1060;
        for start in (0..rows).step_by(256) {
            let ops = (start..(start + 256).min(rows))
                .map(|i| {
                    WriteOp::Mutate(RowMutation {
                        row: format!("row{i:012}").into_bytes(),
                        mutations: vec![Mutation::Put {
                            family: b"f".to_vec(),
                            qualifier: b"q".to_vec(),
                            timestamp: None,
                            value: vec![(i % 251) as u8; 1000],
                        }],
                    })
                })
                .collect();
            for r in s.write_batch(ops) {
                r.expect("write");
            }
        }
        std::mem::forget(s); // like a crash: no close, no flush
    }
    // The budget the log was written under (a log never outgrows it in normal operation);
    // `spill` recovers under 64 MiB instead, writing segments as it goes (and so changes the
    // directory: delete it afterwards).
    let spill = std::env::args().nth(3).as_deref() == Some("spill");
    if spill {
        opts.memtable_budget = 64 << 20;
    }
    let t = Instant::now();
    let (s, report) = RegionStore::open(&dir, opts).expect("recover");
    let secs = t.elapsed().as_secs_f64();
    let mib = report.log_bytes_replayed as f64 / 1048576.0;
    println!(
        "recovered {} records, {mib:.0} MiB of log in {secs:.2} s = {:.0} MiB/s ({} segments after)",
        report.log_records_replayed,
        mib / secs,
        s.stats().segments
    );
    std::mem::forget(s);
    if spill {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// 200 batches of 64 puts in `Sync` mode: one write and one fsync per batch.
fn sync_batches() {
    let dir = std::env::temp_dir().join(format!("kura-sync-{}", std::process::id()));
    let (mut s, _) =
        RegionStore::open(&dir, StoreOptions::new(vec![FamilyDescriptor::new("f")])).expect("open");
    let t = Instant::now();
    for b in 0..200usize {
        let ops = (0..64usize)
            .map(|i| {
                WriteOp::Mutate(RowMutation {
                    row: format!("row{:08}", b * 64 + i).into_bytes(),
                    mutations: vec![Mutation::Put {
                        family: b"f".to_vec(),
                        qualifier: b"q".to_vec(),
                        timestamp: None,
                        value: vec![7; 100],
                    }],
                })
            })
            .collect();
        for r in s.write_batch(ops) {
            r.expect("write");
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "sync batches of 64: {:.0} puts/s, {:.2} ms per batch",
        12800.0 / secs,
        secs * 5.0
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
