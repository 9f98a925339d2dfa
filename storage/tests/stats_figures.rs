//! The figures `/metrics` exports from a store: group commit, fsync time, recovery.

mod common;
use common::server_options;

use kura_storage::*;

fn put(row: &str) -> RowMutation {
    RowMutation {
        row: row.as_bytes().to_vec(),
        mutations: vec![Mutation::Put {
            family: b"f".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: Some(1),
            value: b"v".to_vec(),
        }],
    }
}

#[test]
fn sync_writes_count_fsyncs_and_their_time_and_reopen_reports_the_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = server_options(vec![FamilyDescriptor::new("f")]);
    let (mut store, _) = RegionStore::open(dir.path(), opts.clone()).expect("open");
    for r in store.write_batch(vec![WriteOp::Mutate(put("a")), WriteOp::Mutate(put("b"))]) {
        r.expect("batch write");
    }
    store.mutate_row(put("c")).expect("write");
    let stats = store.stats();
    assert_eq!(stats.fsyncs, 2, "one fsync per batch");
    assert_eq!(stats.synced_writes, 3);
    assert!(stats.fsync_max_micros <= stats.fsync_micros);
    assert!(stats.fsyncs_slow <= stats.fsyncs);
    // Dropped without close: the next open replays the log.
    drop(store);
    let (store, report) = RegionStore::open(dir.path(), opts).expect("reopen");
    let stats = store.stats();
    assert_eq!(stats.recovery_log_records, report.log_records_replayed);
    assert!(
        stats.recovery_log_records >= 2,
        "both batches replayed: {report:?}"
    );
    assert_eq!(stats.recovery_bytes_dropped, 0);
    assert_eq!(stats.recovery_micros, report.duration.as_micros() as u64);
}
