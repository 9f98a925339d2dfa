//! A failed fsync poisons the store: the batch is not acknowledged and every later call is
//! refused until the store is reopened, which recovers what is on disk.
mod common;
use common::*;
use kura_storage::*;

#[test]
fn failed_fsync_fails_the_whole_batch_and_poisons() {
    let fs = SimFs::new();
    let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
    mutate(&mut s, "before", vec![put("one", "q", Some(1), "ok")]);
    fs.inject(Fault {
        op: FaultOp::Sync,
        nth: 1,
        persistent: false,
    });
    let res = s.write_batch(vec![
        WriteOp::Mutate(RowMutation {
            row: b"a".to_vec(),
            mutations: vec![put("one", "q", None, "1")],
        }),
        WriteOp::Mutate(RowMutation {
            row: b"b".to_vec(),
            mutations: vec![put("one", "q", None, "2")],
        }),
    ]);
    assert!(res.iter().all(|r| matches!(r, Err(Error::Poisoned(_)))));
    assert!(s.stats().poisoned);
    let later = s.mutate_row(RowMutation {
        row: b"c".to_vec(),
        mutations: vec![put("one", "q", None, "3")],
    });
    assert!(
        matches!(later, Err(Error::Poisoned(_))),
        "writes refused after a failed fsync"
    );
    assert!(matches!(s.get(b"a", &read(1)), Err(Error::Poisoned(_))));
    drop(s);
    fs.power_cut(None);
    let (s, _) = open_sim(&fs, server_options(families())).unwrap();
    assert_eq!(cells(&s, "before", &read(1)), vec![c("one:q", 1, "ok")]);
    assert!(s.get(b"c", &read(1)).unwrap().is_none());
}

#[test]
fn failed_log_write_poisons_without_acknowledging() {
    let fs = SimFs::new();
    let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
    fs.inject(Fault {
        op: FaultOp::Write,
        nth: 1,
        persistent: false,
    });
    let res = s.mutate_row(RowMutation {
        row: b"a".to_vec(),
        mutations: vec![put("one", "q", None, "1")],
    });
    assert!(matches!(res, Err(Error::Poisoned(_))));
    drop(s);
    let (s, _) = open_sim(&fs, server_options(families())).unwrap();
    assert!(s.get(b"a", &read(1)).unwrap().is_none());
}

#[test]
fn every_injected_fault_in_a_short_workload_never_loses_an_acknowledged_write() {
    for op in [
        FaultOp::Write,
        FaultOp::PartialWrite,
        FaultOp::Sync,
        FaultOp::Rename,
        FaultOp::Create,
        FaultOp::SyncDir,
    ] {
        for nth in 1..12 {
            let fs = SimFs::new();
            let mut opts = server_options(families());
            opts.memtable_budget = 300; // flush often: exercise renames and the manifest
            let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
            fs.inject(Fault {
                op,
                nth,
                persistent: false,
            });
            let (mut acked, mut flusher) = (Vec::new(), Flusher::default());
            for i in 0..12 {
                let row = format!("r{i:02}");
                let m = RowMutation {
                    row: row.clone().into_bytes(),
                    mutations: vec![put("one", "q", Some(1), "v")],
                };
                if s.mutate_row(m).is_ok() {
                    acked.push(row);
                }
                // A failed flush poisons the store: the next writes are refused.
                let _ = flusher.after_write_and_wait(&mut s);
            }
            drop(s);
            fs.clear_faults();
            fs.power_cut(None);
            let (s, _) = open_sim(&fs, opts).unwrap_or_else(|e| panic!("{op:?} #{nth}: {e}"));
            for row in &acked {
                assert!(
                    s.get(row.as_bytes(), &read(1)).unwrap().is_some(),
                    "{op:?} #{nth}: {row} lost"
                );
            }
        }
    }
}

fn put_op(row: &str, v: &str) -> WriteOp {
    WriteOp::Mutate(RowMutation {
        row: row.into(),
        mutations: vec![put("one", "q", Some(1), v)],
    })
}

#[test]
fn a_deferred_batch_is_durable_only_once_its_sync_ran() {
    let fs = SimFs::new();
    let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
    let (res, sync) = s.write_batch_deferred(vec![put_op("a", "1")]);
    assert!(res[0].is_ok());
    let sync = sync.expect("sync mode hands the fsync back");
    // Not synced yet: a power cut loses it (it was never acknowledged).
    drop(s);
    fs.power_cut(None);
    let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
    assert!(s.get(b"a", &read(1)).unwrap().is_none());
    drop(sync);

    let (_, sync) = s.write_batch_deferred(vec![put_op("b", "2")]);
    let sync = sync.unwrap();
    let took = sync.run();
    s.finish_sync(sync, took).unwrap();
    assert_eq!(s.stats().synced_writes, 1);
    drop(s);
    fs.power_cut(None);
    let (s, _) = open_sim(&fs, server_options(families())).unwrap();
    assert_eq!(cells(&s, "b", &read(1)), vec![c("one:q", 1, "2")]);
}

#[test]
fn a_failed_deferred_sync_poisons_the_store() {
    let fs = SimFs::new();
    let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
    let (_, sync) = s.write_batch_deferred(vec![put_op("a", "1")]);
    fs.inject(Fault {
        op: FaultOp::Sync,
        nth: 1,
        persistent: false,
    });
    let sync = sync.unwrap();
    let outcome = sync.run();
    assert!(outcome.is_err());
    assert!(s.finish_sync(sync, outcome).is_err());
    assert!(s.stats().poisoned);
    let (later, none) = s.write_batch_deferred(vec![put_op("b", "2")]);
    assert!(matches!(later[0], Err(Error::Poisoned(_))));
    assert!(none.is_none());
}

#[test]
fn only_sync_durability_defers_the_fsync() {
    let fs = SimFs::new();
    let mut opts = server_options(families());
    opts.durability = Durability::None;
    let (mut s, _) = open_sim(&fs, opts).unwrap();
    let (res, sync) = s.write_batch_deferred(vec![put_op("a", "1")]);
    assert!(res[0].is_ok() && sync.is_none());
}

#[test]
fn a_batch_answered_with_a_failed_fsync_is_not_there_after_a_reopen_without_a_crash() {
    // RELIABILITY.md: a failure reply means the write was not applied. Its frames reached the
    // OS before the fsync failed; reopened in the same process (no power cut), recovery must
    // not replay them.
    let fs = SimFs::new();
    let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
    mutate(&mut s, "before", vec![put("one", "q", Some(1), "ok")]);
    fs.inject(Fault {
        op: FaultOp::Sync,
        nth: 1,
        persistent: false,
    });
    let res = s.mutate_row(RowMutation {
        row: b"x".to_vec(),
        mutations: vec![put("one", "q", Some(1), "failed")],
    });
    assert!(matches!(res, Err(Error::Poisoned(_))));
    drop(s);
    let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
    assert!(
        s.get(b"x", &read(1)).unwrap().is_none(),
        "failed write replayed"
    );
    assert_eq!(cells(&s, "before", &read(1)), vec![c("one:q", 1, "ok")]);
    // And the log goes on from there.
    mutate(&mut s, "after", vec![put("one", "q", Some(1), "v")]);
    drop(s);
    let (s, _) = open_sim(&fs, server_options(families())).unwrap();
    assert_eq!(cells(&s, "after", &read(1)), vec![c("one:q", 1, "v")]);
}

#[test]
fn writes_answered_before_a_failed_interval_fsync_stay_after_a_reopen() {
    // In `Interval` durability a write is answered before its fsync: a later failed fsync
    // must not take it back.
    let fs = SimFs::new();
    let mut opts = server_options(families());
    opts.durability = Durability::Interval(std::time::Duration::from_secs(3600));
    let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
    mutate(&mut s, "acked", vec![put("one", "q", Some(1), "v")]);
    fs.inject(Fault {
        op: FaultOp::Sync,
        nth: 1,
        persistent: false,
    });
    assert!(s.sync().is_err(), "the periodic fsync fails");
    drop(s);
    let (s, _) = open_sim(&fs, opts).unwrap();
    assert_eq!(cells(&s, "acked", &read(1)), vec![c("one:q", 1, "v")]);
}
