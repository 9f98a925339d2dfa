//! Strict recovery refuses to open on damage that is not a torn tail; point-in-time recovery
//! keeps the valid prefix and never returns a wrong value.
mod common;
use common::*;
use kura_storage::*;
use std::path::{Path, PathBuf};

fn setup() -> (SimFs, PathBuf, Vec<u8>) {
    let fs = SimFs::new();
    {
        let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
        for i in 0..4 {
            mutate(
                &mut s,
                &format!("r{i}"),
                vec![put("one", "q", Some(1), &format!("value{i}"))],
            );
        }
    }
    let name = fs
        .list(Path::new("/region"))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".log"))
        .unwrap();
    let log = Path::new("/region").join(name);
    let bytes = fs.read_file(&log).unwrap();
    (fs, log, bytes)
}

#[test]
fn strict_mode_refuses_a_flipped_bit_in_the_middle_of_the_log() {
    let (fs, log, good) = setup();
    let mut bad = good.clone();
    bad[20] ^= 0x01; // inside the first frame
    fs.write_file(&log, &bad).unwrap();
    let mut opts = server_options(families());
    opts.recovery = RecoveryMode::Strict;
    match open_sim(&fs, opts) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, log);
            assert_eq!(offset, 8, "the first frame starts after the 8-byte header");
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
    assert_eq!(
        fs.read_file(&log).unwrap(),
        bad,
        "strict mode does not touch the file"
    );
}

#[test]
fn every_single_bit_flip_is_detected_or_harmless_never_a_wrong_value() {
    let (fs, log, good) = setup();
    for i in 0..good.len() {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[i] ^= 1 << bit;
            fs.write_file(&log, &bad).unwrap();
            if i == 7 && bad[7] > good[7] {
                // The header's version byte now names a newer format: refused, not truncated.
                assert!(matches!(
                    open_sim(&fs, server_options(families())),
                    Err(Error::Corruption { offset: 7, .. })
                ));
                assert_eq!(fs.read_file(&log).unwrap(), bad, "left alone");
                fs.write_file(&log, &good).unwrap();
                continue;
            }
            let (s, report) = open_sim(&fs, server_options(families())).unwrap();
            assert!(report.truncated_at.is_some(), "flip at {i}.{bit} detected");
            for k in 0..4 {
                if let Some(row) = s.get(format!("r{k}").as_bytes(), &read(1)).unwrap() {
                    assert_eq!(row.cells[0].value, format!("value{k}").into_bytes());
                }
            }
            drop(s);
            fs.write_file(&log, &good).unwrap();
        }
    }
}

#[test]
fn zeroed_range_in_the_middle_is_refused_by_strict_mode() {
    let (fs, log, good) = setup();
    let mut bad = good.clone();
    for b in &mut bad[8..30] {
        *b = 0;
    }
    fs.write_file(&log, &bad).unwrap();
    let mut opts = server_options(families());
    opts.recovery = RecoveryMode::Strict;
    assert!(matches!(open_sim(&fs, opts), Err(Error::Corruption { .. })));
}

fn log_files(fs: &SimFs) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs
        .list(Path::new("/region"))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .map(|n| Path::new("/region").join(n))
        .collect();
    v.sort();
    v
}

#[test]
fn strict_refuses_damage_at_the_end_of_a_log_that_a_later_log_follows() {
    // A background flush froze log 1 (fsynced) and acknowledged writes went on into the next
    // log; the crash came before the flush was installed. A flipped bit in log 1's last frame
    // cannot be a torn write: strict recovery must refuse, not drop the later log.
    let (fs, opts) = two_logs_the_first_damaged();
    let logs = log_files(&fs);
    assert!(logs.len() >= 2, "{logs:?}");
    let mut strict = opts.clone();
    strict.recovery = RecoveryMode::Strict;
    match open_sim(&fs, strict) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, logs[0]),
        other => panic!("strict recovery must refuse: {:?}", other.map(|(_, r)| r)),
    }
    assert_eq!(log_files(&fs), logs, "nothing deleted");
    // Point-in-time recovery drops the later log, but keeps it aside, whole.
    let later = fs.read_file(&logs[1]).unwrap();
    let (_, report) = open_sim(&fs, opts).unwrap();
    let aside = PathBuf::from(format!("{}.dropped", logs[1].display()));
    assert!(
        report.kept_dropped.contains(&aside),
        "{:?}",
        report.kept_dropped
    );
    assert_eq!(fs.read_file(&aside).unwrap(), later);
}

/// The frames' `[start, end)` in a log's bytes (stopping at the preallocated zeros).
fn frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let (mut out, mut at) = (Vec::new(), 8);
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        out.push((at, at + 8 + len));
        at += 8 + len;
    }
    out
}

/// A power cut in the middle of a batch written over preallocated zeros can keep a later page
/// of the batch and lose an earlier one: zeros, then valid frames, none of which was ever
/// fsynced or acknowledged. Strict recovery takes that for the torn tail it is (the frames
/// record that nothing past the previous batch was known fsynced), and still refuses the same
/// damage inside a batch that a later batch proves was fsynced.
#[test]
fn strict_mode_tells_an_unsynced_torn_batch_from_damage_to_synced_frames() {
    let fs = SimFs::new();
    let opts = || StoreOptions {
        log_prealloc: DEFAULT_LOG_PREALLOC,
        ..server_options(families())
    };
    {
        let (mut s, _) = open_sim(&fs, opts()).unwrap();
        mutate(&mut s, "a", vec![put("one", "q", Some(1), "first")]);
        mutate(&mut s, "b", vec![put("one", "q", Some(1), "second")]);
        // The last batch: 20 operations, one write, one fsync.
        let ops = (0..20)
            .map(|i| {
                WriteOp::Mutate(RowMutation {
                    row: format!("c{i:02}").into_bytes(),
                    mutations: vec![put("one", "q", Some(1), &"x".repeat(1000))],
                })
            })
            .collect();
        for r in s.write_batch(ops) {
            r.unwrap();
        }
    }
    let log = log_files(&fs).pop().unwrap();
    let good = fs.read_file(&log).unwrap();
    let f = frames(&good);
    assert_eq!(f.len(), 22);
    let strict = || StoreOptions {
        recovery: RecoveryMode::Strict,
        ..opts()
    };
    // A page of the last batch never reached the disk: a 4 KiB-aligned page back to the
    // preallocated zeros, the frames after it whole.
    let page = (f[8].0 / 4096 + 1) * 4096;
    assert!(page + 4096 < f[21].0, "the page lies inside the batch");
    let torn_frame = f.iter().position(|r| r.1 > page).unwrap();
    let mut torn = good.clone();
    torn[page..page + 4096].fill(0);
    fs.write_file(&log, &torn).unwrap();
    let (s, report) = open_sim(&fs, strict()).expect("a torn unsynced batch is a tail");
    assert_eq!(report.truncated_at, Some(f[torn_frame].0 as u64));
    assert_eq!(cells(&s, "b", &read(1)).len(), 1);
    let last_kept = format!("c{:02}", torn_frame - 3);
    assert_eq!(
        cells(&s, &last_kept, &read(1)).len(),
        1,
        "frames before the tear kept"
    );
    drop(s);
    // The first two batches lost the same way: the last batch proves they were fsynced.
    let mut bad = good.clone();
    bad[f[0].0..f[1].1].fill(0);
    fs.write_file(&log, &bad).unwrap();
    match open_sim(&fs, strict()) {
        Err(Error::Corruption { offset, .. }) => assert_eq!(offset, f[0].0 as u64),
        other => panic!("expected corruption, got {:?}", other.map(|(_, r)| r)),
    }
}

/// A flipped bit is never what a power cut leaves: Strict refuses it when valid frames follow,
/// even in the last acknowledged batches, which no later frame proves were fsynced (from an
/// audit of log format 4).
#[test]
fn strict_mode_refuses_a_flipped_bit_in_acknowledged_frames_that_nothing_proves_fsynced() {
    let ops = |p: &str, n: usize| -> Vec<WriteOp> {
        (0..n)
            .map(|i| {
                WriteOp::Mutate(RowMutation {
                    row: format!("{p}{i}").into_bytes(),
                    mutations: vec![put("one", "q", Some(1), "v")],
                })
            })
            .collect()
    };
    let strict = || StoreOptions {
        recovery: RecoveryMode::Strict,
        ..server_options(families())
    };
    let flip_and_open = |fs: &SimFs, frame: usize| {
        let log = log_files(fs).pop().unwrap();
        let mut b = fs.read_file(&log).unwrap();
        let f = frames(&b);
        b[f[frame].1 - 2] ^= 0x10;
        fs.write_file(&log, &b).unwrap();
        open_sim(fs, strict()).map(|(_, r)| r)
    };
    // The last acknowledged batch.
    let fs = SimFs::new();
    {
        let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
        mutate(&mut s, "a", vec![put("one", "q", Some(1), "x")]);
        for r in s.write_batch(ops("b", 5)) {
            r.unwrap();
        }
    }
    assert!(matches!(
        flip_and_open(&fs, 2),
        Err(Error::Corruption { .. })
    ));
    // Two pipelined batches, both fsynced and acknowledged.
    let fs = SimFs::new();
    {
        let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
        mutate(&mut s, "a", vec![put("one", "q", Some(1), "x")]);
        let (r1, s1) = s.write_batch_deferred(ops("b", 1));
        let (r2, s2) = s.write_batch_deferred(ops("c", 1));
        let (s1, s2) = (s1.unwrap(), s2.unwrap());
        let (o1, o2) = (s1.run(), s2.run());
        s.finish_sync(s1, o1).unwrap();
        s.finish_sync(s2, o2).unwrap();
        r1.into_iter().chain(r2).for_each(|r| {
            r.unwrap();
        });
    }
    assert!(matches!(
        flip_and_open(&fs, 1),
        Err(Error::Corruption { .. })
    ));
    // A write after a reopen, the flip before it.
    let fs = SimFs::new();
    {
        let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
        mutate(&mut s, "a", vec![put("one", "q", Some(1), "x")]);
        mutate(&mut s, "b", vec![put("one", "q", Some(1), "x")]);
    }
    {
        let (mut s, _) = open_sim(&fs, strict()).unwrap();
        mutate(&mut s, "c", vec![put("one", "q", Some(1), "x")]);
    }
    assert!(matches!(
        flip_and_open(&fs, 1),
        Err(Error::Corruption { .. })
    ));
}

/// Point-in-time recovery past damage that no crash causes (a flipped bit in the first frame,
/// valid frames after it) keeps the valid prefix and keeps what it drops aside, byte for byte,
/// as `<log>.dropped-at-<offset>`, which the store never reads: an operator can salvage the
/// acknowledged writes in it. A crash's torn tail is dropped without a copy.
#[test]
fn point_in_time_recovery_keeps_what_it_drops_after_mid_log_damage() {
    let (fs, log, good) = setup();
    let mut bad = good.clone();
    bad[20] ^= 0x01; // inside the first frame
    fs.write_file(&log, &bad).unwrap();
    let (s, report) = open_sim(&fs, server_options(families())).unwrap();
    assert_eq!(report.truncated_at, Some(8));
    let kept = PathBuf::from(format!("{}.dropped-at-8", log.display()));
    assert_eq!(report.kept_dropped, vec![kept.clone()]);
    assert_eq!(fs.read_file(&kept).unwrap(), bad[8..].to_vec());
    assert!(
        s.get(b"r3", &read(1)).unwrap().is_none(),
        "only the prefix is served"
    );
    drop(s);
    // The copy is not replayed by later opens, and stays.
    let (s, report) = open_sim(&fs, server_options(families())).unwrap();
    assert!(report.kept_dropped.is_empty());
    assert!(s.get(b"r3", &read(1)).unwrap().is_none());
    assert!(fs.read_file(&kept).is_ok());
    // New writes land where the damage was, and the same sector goes bad again: the second
    // copy does not replace the first.
    let mut s = s;
    for i in 0..3 {
        mutate(
            &mut s,
            &format!("n{i}"),
            vec![put("one", "q", Some(1), "new")],
        );
    }
    drop(s);
    let mut again = fs.read_file(&log).unwrap();
    again[20] ^= 0x01;
    fs.write_file(&log, &again).unwrap();
    let (_, report) = open_sim(&fs, server_options(families())).unwrap();
    let second = PathBuf::from(format!("{}.dropped-at-8.1", log.display()));
    assert_eq!(report.kept_dropped, vec![second.clone()]);
    assert_eq!(
        fs.read_file(&kept).unwrap(),
        bad[8..].to_vec(),
        "the first copy"
    );
    assert!(fs.read_file(&second).is_ok());

    // A torn tail (the log cut short, as a crash leaves it): dropped, no copy.
    let (fs, log, good) = setup();
    fs.write_file(&log, &good[..good.len() - 3]).unwrap();
    let (_, report) = open_sim(&fs, server_options(families())).unwrap();
    assert!(report.truncated_at.is_some());
    assert!(report.kept_dropped.is_empty(), "{:?}", report.kept_dropped);
}

/// Two logs, the first damaged in its last frame (`a4`), acknowledged writes `b*` in the
/// second: what a point-in-time recovery must cut at `a4`.
fn two_logs_the_first_damaged() -> (SimFs, StoreOptions) {
    let fs = SimFs::new();
    let opts = server_options(families());
    let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
    for i in 0..5 {
        mutate(
            &mut s,
            &format!("a{i}"),
            vec![put("one", "q", Some(1), "old")],
        );
    }
    let _pending = s.flush_task().unwrap().expect("a frozen memtable");
    for i in 0..5 {
        mutate(
            &mut s,
            &format!("b{i}"),
            vec![put("one", "q", Some(1), "acked")],
        );
    }
    drop(s);
    let logs = log_files(&fs);
    let mut bytes = fs.read_file(&logs[0]).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0x01;
    fs.write_file(&logs[0], &bytes).unwrap();
    (fs, opts)
}

/// A power cut in the middle of a point-in-time recovery (its directory fsync fails, then the
/// power goes) must not leave the damaged log cut short while the later log is still in place:
/// the next open would replay the later writes past the hole. The later log is set aside, and
/// durably, before the damaged one is truncated, so the next recovery gives the same prefix.
#[test]
fn a_power_cut_during_point_in_time_recovery_keeps_the_prefix() {
    let (fs, opts) = two_logs_the_first_damaged();
    fs.inject(Fault {
        op: FaultOp::SyncDir,
        nth: 0,
        persistent: true,
    });
    assert!(
        open_sim(&fs, opts.clone()).is_err(),
        "the directory fsyncs fail"
    );
    fs.power_cut(None);
    fs.clear_faults();
    let (s, report) = open_sim(&fs, opts).unwrap();
    assert!(report.truncated_at.is_some());
    assert!(
        s.get(b"a0", &read(1)).unwrap().is_some(),
        "before the damage"
    );
    for i in 0..5 {
        let row = format!("b{i}");
        assert!(
            s.get(row.as_bytes(), &read(1)).unwrap().is_none(),
            "{row}: after the damage, not served past the hole"
        );
    }
}
