//! A fixed memtable workload, for counting instructions and cache misses with cachegrind:
//! timings on a shared 2-core VM move by more than the memtable's share of a request, counts
//! under a simulated cache do not.
//!
//! 50,000 one-cell puts into a store that never flushes (`Durability::None`, a 1 GiB budget),
//! then 200,000 point gets of them. Keys: `pe` (HBase PerformanceEvaluation's 26 digits,
//! zero-padded: every row shares its first 16 bytes) or `user` (`user` + 12 digits, the storage
//! bench's).
//!
//! Run: `cargo build --release -p kura-bench --example memtable_workload`, then
//! `valgrind --tool=cachegrind --cache-sim=yes --LL=4194304,16,64
//! target/release/examples/memtable_workload pe` (a 4 MiB last-level cache: the memtable does
//! not fit, as a loaded server's memtables and their neighbours do not).

use kura_storage::model::*;
use kura_storage::{Durability, RegionStore, StoreOptions};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ROWS: usize = 50_000;
const GETS: usize = 200_000;

fn main() {
    let key: fn(usize) -> Vec<u8> = match std::env::args().nth(1).as_deref() {
        Some("pe") => |i| format!("{i:026}").into_bytes(),
        Some("user") => |i| {
            let n = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000;
            format!("user{n:012}").into_bytes()
        },
        _ => {
            eprintln!("usage: memtable_workload pe|user");
            std::process::exit(2);
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = StoreOptions::new(vec![FamilyDescriptor::new("f")]);
    opts.durability = Durability::None;
    opts.memtable_budget = 1 << 30;
    let (mut store, _) = RegionStore::open(dir.path(), opts).expect("open store");
    // Rows in a scrambled order, as random writes arrive.
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(1024) {
        let ops = chunk
            .iter()
            .map(|i| {
                WriteOp::Mutate(RowMutation {
                    row: key((i * 7919) % ROWS),
                    mutations: vec![Mutation::Put {
                        family: b"f".to_vec(),
                        qualifier: b"q".to_vec(),
                        timestamp: None,
                        value: vec![7u8; 100],
                    }],
                })
            })
            .collect();
        for r in store.write_batch(ops) {
            r.expect("put");
        }
    }
    let read = ReadSpec::default();
    let mut found = 0;
    for i in 0..GETS {
        found += store
            .get(&key((i * 104_729) % ROWS), &read)
            .expect("get")
            .is_some() as usize;
    }
    assert_eq!(found, GETS, "every row is found");
    println!("{ROWS} puts, {GETS} gets");
}
