//! I/O errors at every step of a short workload (RELIABILITY.md "I/O error injection").
//!
//! The workload (single writes, group-committed batches, increments, two flushes, a minor and a
//! major compaction, background flushes with writes while they run and one a synchronous flush
//! overtakes, more writes, all in `Sync` mode) is first run without faults to count the
//! file operations it makes. Then, for every kind of operation (write, partial write, fsync,
//! rename, create, directory fsync) and every N up to that count, it is run again with the N-th
//! such operation failing, once (transient) or from then on (persistent). In every run:
//! - nothing panics;
//! - once a write or a flush has failed, every later write is refused with `Poisoned` (a failed
//!   fsync is never retried: PostgreSQL's "fsyncgate");
//! - after a reopen, both as after a process crash (everything handed to the OS kept) and as
//!   after a power cut (only fsynced bytes and directory entries kept), every acknowledged write
//!   is there, and an unacknowledged one is either absent or whole and correct (never a wrong
//!   value); the reopened store accepts writes again.
//!
//! A second test injects the same faults while the store recovers: opening fails cleanly or
//! succeeds, and a later fault-free open still finds every acknowledged write.
mod common;
use common::*;
use kura_storage::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/region";
const OPS: [FaultOp; 6] = [
    FaultOp::Write,
    FaultOp::PartialWrite,
    FaultOp::Sync,
    FaultOp::Rename,
    FaultOp::Create,
    FaultOp::SyncDir,
];

enum Step {
    /// Put `one:q = "v-<row>"` into each row, in one group-committed batch.
    Puts(Vec<&'static str>),
    /// Add `2^bit` to the counter `ctr/cf:n` (bits tell which increments were applied).
    Increment(u32),
    Flush,
    /// Freeze the memtable for a background flush (`flush_task`).
    Freeze,
    /// Run the frozen memtable's flush task and install its output.
    Install,
    Compact {
        major: bool,
    },
}

fn workload() -> Vec<Step> {
    use Step::*;
    vec![
        Puts(vec!["r00"]),
        Puts(vec!["r01", "r02", "r03"]),
        Increment(0),
        Puts(vec!["r04"]),
        Flush,
        Puts(vec!["r05"]),
        Increment(1),
        Puts(vec!["r06", "r07"]),
        Flush,
        Compact { major: false },
        Puts(vec!["r08"]),
        Increment(2),
        Compact { major: true },
        Puts(vec!["r09"]),
        Freeze,
        Puts(vec!["r10", "r11", "r12"]),
        Increment(3),
        Install,
        Puts(vec!["r13"]),
        Freeze,
        Puts(vec!["r14"]),
        // A synchronous flush overtakes the background one, whose output is then discarded.
        Flush,
        Install,
        Puts(vec!["r15"]),
    ]
}

fn value_of(row: &str) -> String {
    format!("v-{row}")
}

fn options() -> StoreOptions {
    server_options(families()) // Sync durability, point-in-time recovery
}

fn open_at(fs: &SimFs) -> Result<(RegionStore, RecoveryReport)> {
    RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new(DIR), options())
}

/// What the client was told.
#[derive(Default, Debug)]
struct Ledger {
    /// row -> acknowledged?
    rows: BTreeMap<&'static str, bool>,
    acked_bits: i64,
    attempted_bits: i64,
}

/// Run the workload; returns the ledger. Asserts that once a write or a flush failed, every
/// later write is refused with `Poisoned`.
fn run(s: &mut RegionStore, what: &str) -> Ledger {
    let mut ledger = Ledger::default();
    let mut failed: Option<String> = None;
    let mut task: Option<FlushTask> = None;
    for (i, step) in workload().into_iter().enumerate() {
        let what = format!("{what}, step {i}");
        match step {
            Step::Puts(rows) => {
                let ops = rows
                    .iter()
                    .map(|r| {
                        WriteOp::Mutate(RowMutation {
                            row: r.as_bytes().to_vec(),
                            mutations: vec![put("one", "q", Some(1), &value_of(r))],
                        })
                    })
                    .collect();
                let results = s.write_batch(ops);
                assert_eq!(results.len(), rows.len(), "{what}");
                for (r, res) in rows.iter().zip(&results) {
                    ledger.rows.insert(r, res.is_ok());
                }
                check_refusal(&results, &failed, &what);
                if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
                    assert!(
                        matches!(e, Error::Poisoned(_)),
                        "{what}: a failed write poisons the store: {e}"
                    );
                    assert!(
                        results.iter().all(Result::is_err),
                        "{what}: a failed batch acknowledges none of its operations"
                    );
                    failed.get_or_insert(e.to_string());
                }
            }
            Step::Increment(bit) => {
                ledger.attempted_bits |= 1 << bit;
                let res = s.write_batch(vec![WriteOp::Increment(Increment {
                    row: b"ctr".to_vec(),
                    columns: vec![(b"cf".to_vec(), b"n".to_vec(), 1 << bit)],
                })]);
                check_refusal(&res, &failed, &what);
                match &res[0] {
                    Ok(_) => ledger.acked_bits |= 1 << bit,
                    Err(e) => {
                        failed.get_or_insert(e.to_string());
                    }
                }
            }
            Step::Flush => {
                let res = s.flush();
                if failed.is_some() {
                    assert!(res.is_err(), "{what}: a poisoned store does not flush");
                }
                if let Err(e) = res {
                    failed.get_or_insert(e.to_string());
                    assert!(s.stats().poisoned, "{what}: a failed flush poisons: {e}");
                }
            }
            Step::Freeze => match s.flush_task() {
                Ok(t) => {
                    assert!(failed.is_none(), "{what}: a poisoned store does not freeze");
                    task = t;
                }
                Err(e) => {
                    failed.get_or_insert(e.to_string());
                    assert!(s.stats().poisoned, "{what}: a failed freeze poisons: {e}");
                }
            },
            Step::Install => {
                if let Some(t) = task.take() {
                    if let Err(e) = s.install_flush(t.run()).map(drop) {
                        failed.get_or_insert(e.to_string());
                        assert!(s.stats().poisoned, "{what}: a failed flush poisons: {e}");
                    }
                }
            }
            Step::Compact { major } => {
                let res = s.compact(major);
                if failed.is_some() {
                    assert!(res.is_err(), "{what}: a poisoned store does not compact");
                }
                // A failed compaction leaves the live files as they were: writes may go on.
                if res.is_err() && s.stats().poisoned {
                    failed.get_or_insert(format!("{res:?}"));
                }
            }
        }
    }
    ledger
}

fn check_refusal(results: &[Result<WriteOutcome>], failed: &Option<String>, what: &str) {
    if let Some(first) = failed {
        for r in results {
            assert!(
                matches!(r, Err(Error::Poisoned(_))),
                "{what}: after a failure ({first}) writes are refused with Poisoned, got {r:?}"
            );
        }
    }
}

/// After a reopen: every acknowledged write is there, nothing else is wrong, and the store
/// takes writes again.
fn verify(s: &mut RegionStore, ledger: &Ledger, what: &str) {
    for (row, acked) in &ledger.rows {
        let got = s.get(row.as_bytes(), &read(1)).expect("get");
        match got {
            Some(r) => {
                assert_eq!(r.cells.len(), 1, "{what}: {row}");
                assert_eq!(
                    r.cells[0].value,
                    value_of(row).into_bytes(),
                    "{what}: {row} has a wrong value"
                );
            }
            None => assert!(!acked, "{what}: acknowledged write to {row} lost"),
        }
    }
    let counter = match s.get(b"ctr", &read(1)).expect("get") {
        None => 0,
        Some(r) => {
            let v: [u8; 8] = r.cells[0].value.as_slice().try_into().expect("8 bytes");
            i64::from_be_bytes(v)
        }
    };
    assert_eq!(
        counter & ledger.acked_bits,
        ledger.acked_bits,
        "{what}: an acknowledged increment is lost (counter {counter:#b})"
    );
    assert_eq!(
        counter & !ledger.attempted_bits,
        0,
        "{what}: counter {counter:#b} holds an increment never made"
    );
    let page = s
        .scan(
            &ScanSpec::all(),
            ScanLimits {
                max_rows: 1000,
                max_bytes: usize::MAX,
            },
        )
        .expect("scan");
    for r in &page.rows {
        let key = String::from_utf8_lossy(&r.key);
        assert!(
            key == "ctr" || key == "after" || ledger.rows.contains_key(key.as_ref()),
            "{what}: a row nobody wrote: {key}"
        );
    }
    mutate(s, "after", vec![put("one", "q", Some(1), "x")]);
    assert!(s.get(b"after", &read(1)).expect("get").is_some(), "{what}");
}

/// A copy of what a process crash leaves: every byte and name handed to the OS.
fn crash_copy(fs: &SimFs) -> SimFs {
    let copy = SimFs::new();
    for name in fs.list(Path::new(DIR)).expect("list") {
        let p = Path::new(DIR).join(name);
        copy.write_file(&p, &fs.read_file(&p).expect("read"))
            .expect("write");
    }
    copy
}

fn counts(fs: &SimFs) -> BTreeMap<FaultOp, u64> {
    OPS.iter().map(|op| (*op, fs.op_count(*op))).collect()
}

/// How many operations of each kind the workload makes after the store is open.
fn workload_counts() -> BTreeMap<FaultOp, u64> {
    let fs = SimFs::new();
    let (mut s, _) = open_at(&fs).expect("open");
    let before = counts(&fs);
    let ledger = run(&mut s, "fault-free");
    assert!(
        ledger.rows.values().all(|a| *a),
        "fault-free run acknowledges everything"
    );
    let after = counts(&fs);
    OPS.iter().map(|op| (*op, after[op] - before[op])).collect()
}

#[test]
fn a_failure_at_every_step_never_loses_an_acknowledged_write_and_poisons_the_store() {
    let totals = workload_counts();
    for op in [
        FaultOp::Write,
        FaultOp::Sync,
        FaultOp::Rename,
        FaultOp::Create,
    ] {
        assert!(
            totals[&op] > 0,
            "the workload makes {op:?} operations: {totals:?}"
        );
    }
    eprintln!("operations of the workload: {totals:?}");
    let mut failures_seen = 0;
    for op in OPS {
        for nth in 1..=totals[&op] {
            for persistent in [false, true] {
                let what = format!(
                    "{op:?} #{nth} of {} (persistent: {persistent})",
                    totals[&op]
                );
                let fs = SimFs::new();
                let (mut s, _) = open_at(&fs).expect("open");
                fs.inject(Fault {
                    op,
                    nth,
                    persistent,
                });
                let ledger = run(&mut s, &what);
                if s.stats().poisoned {
                    failures_seen += 1;
                    let later = s.mutate_row(RowMutation {
                        row: b"late".to_vec(),
                        mutations: vec![put("one", "q", Some(1), "late")],
                    });
                    assert!(
                        matches!(later, Err(Error::Poisoned(_))),
                        "{what}: refused until reopened"
                    );
                }
                drop(s);
                fs.clear_faults();

                // Process crash: everything handed to the OS survives.
                let crashed = crash_copy(&fs);
                let (mut s, _) =
                    open_at(&crashed).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
                verify(&mut s, &ledger, &format!("{what}, after a crash"));
                drop(s);

                // Power cut: only fsynced bytes and directory entries survive.
                fs.power_cut(None);
                let (mut s, _) = open_at(&fs)
                    .unwrap_or_else(|e| panic!("{what}: reopen after a power cut: {e}"));
                verify(&mut s, &ledger, &format!("{what}, after a power cut"));
            }
        }
    }
    assert!(failures_seen > 0, "some injected faults poisoned the store");
}

#[test]
fn a_failure_during_recovery_fails_the_open_cleanly_and_loses_nothing() {
    // A store to recover: the workload, then a crash without close, with a torn tail appended
    // to the log so that recovery has to truncate it.
    let base = SimFs::new();
    let ledger = {
        let (mut s, _) = open_at(&base).expect("open");
        run(&mut s, "fault-free")
    };
    let log = base
        .list(Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .max()
        .expect("a log");
    let log = Path::new(DIR).join(log);
    let mut bytes = base.read_file(&log).expect("read");
    bytes.extend_from_slice(&[7, 0, 0, 0, 1, 2]);
    base.write_file(&log, &bytes).expect("write");

    let probe = crash_copy(&base);
    let before = counts(&probe);
    let (s, _) = open_at(&probe).expect("fault-free recovery");
    drop(s);
    let after = counts(&probe);
    for op in OPS {
        let total = after[&op] - before[&op];
        for nth in 1..=total {
            for persistent in [false, true] {
                let what = format!("recovery, {op:?} #{nth} of {total} (persistent: {persistent})");
                let fs = crash_copy(&base);
                fs.inject(Fault {
                    op,
                    nth,
                    persistent,
                });
                if let Ok((mut s, _)) = open_at(&fs) {
                    // Opened despite the fault (e.g. a failed delete of an orphan): correct.
                    fs.clear_faults();
                    verify(&mut s, &ledger, &what);
                    continue;
                }
                fs.clear_faults();
                let (mut s, _) =
                    open_at(&fs).unwrap_or_else(|e| panic!("{what}: second open: {e}"));
                verify(&mut s, &ledger, &format!("{what}, second open"));
                drop(s);
                fs.power_cut(None);
                let (mut s, _) =
                    open_at(&fs).unwrap_or_else(|e| panic!("{what}: open after a power cut: {e}"));
                verify(&mut s, &ledger, &format!("{what}, after a power cut"));
            }
        }
    }
}
