//! Recovery speed of a large log against the disk's sequential read speed, measured in the same
//! run on the same file (RELIABILITY.md / issue 2 target: recovery of a 1 GiB log at more than
//! half the disk's sequential read speed).
//!
//! Not a correctness test and ignored by default (it writes a 1 GiB file); run it with
//! `cargo test --release -p kura-storage --test recovery_speed -- --ignored --nocapture`.
//! It prints figures and asserts only that recovery found every record (no timed assertion:
//! speed is for benches). Environment knobs: `KURA_RECOVERY_DIR` (default: the temp dir),
//! `KURA_RECOVERY_MIB` (log size, default 1024), `KURA_RECOVERY_VALUE` (value bytes, default
//! 1000), `KURA_RECOVERY_SCATTER=1` (rows written in scattered order, as salted keys arrive,
//! instead of ascending: replay must then sort; `=2`: scattered rows that share their first 20
//! bytes, as HBase PerformanceEvaluation's 26-digit zero-padded keys do).
//!
//! Method: write the log with `Durability::None` and a memtable budget larger than the log, so
//! nothing is flushed and the whole log must be replayed; drop the store without closing it.
//! Then, as root, drop the page cache (`echo 3 > /proc/sys/vm/drop_caches`) before each cold
//! measurement: (1) read the log file sequentially in 1 MiB reads (what `dd bs=1M` does),
//! (2) `RegionStore::open` (recovery). Then the same two with the file in the page cache.

mod common;
use common::server_options;
use kura_storage::*;
use std::io::Read;

// The allocator of the `kura` binary, so that this measures recovery as the server runs it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn drop_caches() -> bool {
    // Best effort: needs root; without it the figures are page-cache figures.
    std::process::Command::new("sync").status().is_ok()
        && std::fs::write("/proc/sys/vm/drop_caches", b"3\n").is_ok()
}

fn read_sequentially(path: &Path) -> (u64, Duration) {
    let t = Instant::now();
    let mut f = std::fs::File::open(path).expect("open log");
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let got = f.read(&mut buf).expect("read");
        if got == 0 {
            break;
        }
        n += got as u64;
    }
    (n, t.elapsed())
}

/// CPU time (user + system) this process has used, from `/proc/self/stat` (Linux; clock ticks
/// of 10 ms). On a loaded machine the wall time of a CPU-bound step includes waiting for a core;
/// its CPU time does not.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn options() -> StoreOptions {
    let mut opts = server_options(vec![FamilyDescriptor::new("f")]);
    opts.durability = Durability::None;
    opts.memtable_budget = 1 << 40; // never flush: the log is all there is
    opts
}

fn mib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / d.as_secs_f64()
}

#[test]
#[ignore = "writes a 1 GiB log; run with --release --ignored --nocapture"]
fn recovery_of_a_large_log_compared_with_sequential_read_speed() {
    let base: PathBuf = env_or("KURA_RECOVERY_DIR", std::env::temp_dir());
    let target_mib: u64 = env_or("KURA_RECOVERY_MIB", 1024);
    let value_len: usize = env_or("KURA_RECOVERY_VALUE", 1000);
    let scatter: u8 = env_or("KURA_RECOVERY_SCATTER", 0);
    // Row `i`: ascending, or scattered by an odd multiplier modulo 2^40 (a bijection).
    let row = |i: u64| {
        let k = if scatter > 0 {
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & ((1 << 40) - 1)
        } else {
            i
        };
        if scatter == 2 {
            format!("{:026}", k % 10_000_000).into_bytes()
        } else {
            format!("row{k:013}").into_bytes()
        }
    };
    let dir = tempfile::tempdir_in(&base).expect("tempdir");

    let t = Instant::now();
    let mut records = 0u64;
    {
        let (mut s, _) = RegionStore::open(dir.path(), options()).expect("open");
        let value = vec![0x5Au8; value_len];
        while s.stats().log_bytes < target_mib << 20 {
            let ops = (0..256)
                .map(|i| {
                    WriteOp::Mutate(RowMutation {
                        row: row(records + i),
                        mutations: vec![Mutation::Put {
                            family: b"f".to_vec(),
                            qualifier: b"q".to_vec(),
                            timestamp: None,
                            value: value.clone(),
                        }],
                    })
                })
                .collect();
            for r in s.write_batch(ops) {
                r.expect("write");
            }
            records += 256;
        }
        assert_eq!(s.stats().segments, 0, "nothing flushed");
    } // dropped without close
    let write_time = t.elapsed();
    let log = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .expect("a log");
    let log_len = std::fs::metadata(&log).expect("stat").len();
    println!(
        "log: {} MiB, {records} records of {value_len}-byte values ({} rows), written in {:.1} s",
        log_len >> 20,
        ["ascending", "scattered", "scattered, 20-byte common prefix"][scatter.min(2) as usize],
        write_time.as_secs_f64()
    );

    // Alternate cold reads and cold recoveries, three rounds, so that a noisy neighbour or a
    // cache warming up in the host does not favour one of the two.
    let mut cold = true;
    let (mut reads, mut recoveries, mut cpus) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..3 {
        cold &= drop_caches();
        let (n, d) = read_sequentially(&log);
        assert_eq!(n, log_len);
        reads.push(d);
        cold &= drop_caches();
        let (t, cpu) = (Instant::now(), cpu_time());
        let (s, report) = RegionStore::open(dir.path(), options()).expect("recover");
        recoveries.push(t.elapsed());
        cpus.push(cpu_time() - cpu);
        assert_eq!(
            report.log_records_replayed, records,
            "every record replayed"
        );
        assert_eq!(report.truncated_at, None);
        assert!(s
            .get(&row(records - 1), &ReadSpec::default())
            .expect("get")
            .is_some());
        drop(s);
        println!(
            "round {round}: read {:.2} s, recovery {:.2} s (CPU {:.2} s)",
            reads[round].as_secs_f64(),
            recoveries[round].as_secs_f64(),
            cpus[round].as_secs_f64()
        );
    }
    reads.sort();
    recoveries.sort();
    cpus.sort();
    let (read_cold, recover_cold) = (reads[1], recoveries[1]);

    let (_, read_warm) = read_sequentially(&log);
    let (t, cpu) = (Instant::now(), cpu_time());
    let (s, report) = RegionStore::open(dir.path(), options()).expect("recover");
    let recover_warm = t.elapsed();
    let recover_warm_cpu = cpu_time() - cpu;
    assert_eq!(report.log_records_replayed, records);
    drop(s);
    // The same with the log decoded on the opening thread only (`replay_threads` = 1).
    let one_thread = StoreOptions {
        replay_threads: 1,
        ..options()
    };
    let t = Instant::now();
    let (s, report) = RegionStore::open(dir.path(), one_thread).expect("recover");
    let recover_warm_one = t.elapsed();
    assert_eq!(report.log_records_replayed, records);
    drop(s);

    let label = if cold {
        "cold (page cache dropped)"
    } else {
        "page cache NOT dropped (not root)"
    };
    println!("| measurement | time | MiB/s |");
    println!("|---|---:|---:|");
    let row = |what: &str, d: Duration| {
        println!(
            "| {what} | {:.2} s | {:.0} |",
            d.as_secs_f64(),
            mib_per_s(log_len, d)
        )
    };
    row(&format!("sequential read, {label}"), read_cold);
    row(
        &format!("recovery (RegionStore::open), {label}"),
        recover_cold,
    );
    row("sequential read, warm", read_warm);
    row("recovery, warm", recover_warm);
    row(
        "recovery CPU time (user + system), median of the cold runs",
        cpus[1],
    );
    row("recovery CPU time, warm", recover_warm_cpu);
    row(
        "recovery, warm, log decoded on one thread",
        recover_warm_one,
    );
    println!(
        "recovery / sequential read: cold {:.2}, warm {:.2}",
        read_cold.as_secs_f64() / recover_cold.as_secs_f64(),
        read_warm.as_secs_f64() / recover_warm.as_secs_f64()
    );
    println!(
        "recovery speed, decode threads per core / one thread: {:.2}",
        recover_warm_one.as_secs_f64() / recover_warm.as_secs_f64()
    );
}
