//! A tiny driver for profiling the store's hot paths under `perf` (not a benchmark: the
//! criterion benches in `benches/` are). Usage: `cargo run --release -p kura-storage --example
//! profile_ops -- increment|put|scan|get`.

use kura_storage::*;
use std::time::Instant;

fn main() {
    let what = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "increment".into());
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
                let limits = ScanLimits {
                    max_rows: 100,
                    max_bytes: usize::MAX,
                };
                for i in 0..20_000 {
                    if what == "scan" {
                        let page = s
                            .scan(&ScanSpec::forward(&key(i), b""), limits)
                            .expect("scan");
                        assert!(!page.rows.is_empty());
                    } else {
                        s.get(&key(i), &ReadSpec::default()).expect("get");
                    }
                }
                println!("{what}: {:.0} ops/s", 20_000.0 / t.elapsed().as_secs_f64());
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
