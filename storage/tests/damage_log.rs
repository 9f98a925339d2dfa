//! Log damage, exhaustively on small logs (RELIABILITY.md "log damage"): truncation at every
//! offset, every single-bit flip, zeroed ranges, garbage appended.
//!
//! The fixture is a store in `SimFs` that applies ten operations of different kinds (puts,
//! overwrites, increments, a column delete, an append, a check-and-delete), one log frame each,
//! and is dropped without `close`. After each operation the visible state (every version of
//! every cell) is recorded: `states[k]` is what a reader saw after `k` acknowledged writes.
//! Every damaged copy of the log is then recovered, and the recovered state must be exactly
//! `states[k]` where `k` is the number of frames wholly before the damage: never a wrong
//! value, never a write from after a gap, never a panic.
mod common;
use common::*;
use kura_storage::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Every version of every visible cell: `(row, family, qualifier, ts, value)`.
type State = Vec<(Vec<u8>, Vec<u8>, Vec<u8>, i64, Vec<u8>)>;

fn state(s: &RegionStore) -> State {
    let mut spec = ScanSpec::all();
    spec.read.max_versions = 100;
    let page = s
        .scan(
            &spec,
            ScanLimits {
                max_rows: 100_000,
                max_bytes: usize::MAX,
            },
        )
        .expect("scan");
    assert!(page.complete);
    page.rows
        .into_iter()
        .flat_map(|r| {
            let key = r.key;
            r.cells
                .into_iter()
                .map(move |c| (key.clone(), c.family, c.qualifier, c.timestamp, c.value))
        })
        .collect()
}

fn row_mutation(row: &str, mutations: Vec<Mutation>) -> WriteOp {
    WriteOp::Mutate(RowMutation {
        row: row.into(),
        mutations,
    })
}

/// Ten operations, one log frame each, each changing the visible state. `pad` lengthens the
/// put values (to build logs larger than a 4 KiB range).
fn workload(pad: usize) -> Vec<WriteOp> {
    let v = |s: &str| format!("{s}{}", "p".repeat(pad));
    vec![
        row_mutation("r1", vec![put("cf", "a", None, &v("v1"))]),
        row_mutation("r2", vec![put("one", "q", Some(5), &v("x"))]),
        row_mutation("r1", vec![put("cf", "a", Some(7), &v("v2"))]),
        WriteOp::Increment(Increment {
            row: b"r3".to_vec(),
            columns: vec![(b"cf".to_vec(), b"n".to_vec(), 5)],
        }),
        row_mutation(
            "r2",
            vec![Mutation::DeleteColumn {
                family: b"one".to_vec(),
                qualifier: b"q".to_vec(),
                timestamp: None,
            }],
        ),
        row_mutation(
            "r4",
            vec![
                put("cf", "a", None, &v("a4")),
                put("one", "q", None, &v("q4")),
            ],
        ),
        WriteOp::Increment(Increment {
            row: b"r3".to_vec(),
            columns: vec![(b"cf".to_vec(), b"n".to_vec(), 7)],
        }),
        WriteOp::Append(Append {
            row: b"r1".to_vec(),
            columns: vec![(b"one".to_vec(), b"s".to_vec(), b"abc".to_vec())],
            max_value: None,
        }),
        WriteOp::CheckAndMutate(CheckAndMutate {
            row: b"r4".to_vec(),
            family: b"one".to_vec(),
            qualifier: b"q".to_vec(),
            expected: v("q4").into_bytes(),
            mutations: vec![Mutation::DeleteRow { timestamp: None }],
        }),
        row_mutation("r5", vec![put("one", "q", None, &v("last"))]),
    ]
}

struct Fixture {
    /// Every file but the log, as left by the dropped store.
    others: Vec<(PathBuf, Vec<u8>)>,
    log_path: PathBuf,
    log: Vec<u8>,
    /// `[start, end)` of each frame, in order.
    frames: Vec<(usize, usize)>,
    /// `states[k]`: the visible state after `k` acknowledged operations.
    states: Vec<State>,
}

const DIR: &str = "/region";

fn fixture(pad: usize) -> Fixture {
    let fs = SimFs::new();
    let (mut s, _) = open_sim(&fs, opts()).expect("open");
    let mut states = vec![state(&s)];
    for op in workload(pad) {
        let res = s.write_batch(vec![op]);
        assert!(res.iter().all(Result::is_ok), "{res:?}");
        states.push(state(&s));
    }
    for w in states.windows(2) {
        assert_ne!(w[0], w[1], "every operation changes the visible state");
    }
    drop(s); // no close: the log is all there is
    let mut others = Vec::new();
    let mut logs = Vec::new();
    for name in fs.list(Path::new(DIR)).expect("list") {
        let path = Path::new(DIR).join(&name);
        let bytes = fs.read_file(&path).expect("read");
        if name.ends_with(".log") {
            logs.push((path, bytes));
        } else {
            others.push((path, bytes));
        }
    }
    assert_eq!(logs.len(), 1, "one log");
    let (log_path, log) = logs.pop().expect("one log");
    let mut frames = Vec::new();
    let mut at = 8;
    while at < log.len() {
        let len = u32::from_le_bytes(log[at..at + 4].try_into().expect("4 bytes")) as usize;
        frames.push((at, at + 8 + len));
        at += 8 + len;
    }
    assert_eq!(at, log.len(), "the log is whole frames");
    assert_eq!(frames.len(), 10, "one frame per operation");
    Fixture {
        others,
        log_path,
        log,
        frames,
        states,
    }
}

impl Fixture {
    /// A file system holding the fixture's files with `log` as the log's bytes.
    fn fs_with_log(&self, log: &[u8]) -> SimFs {
        let fs = SimFs::new();
        for (p, b) in &self.others {
            fs.write_file(p, b).expect("write");
        }
        fs.write_file(&self.log_path, log).expect("write");
        fs
    }

    /// Index of the frame holding byte `offset` (0 for the file header).
    fn frame_of(&self, offset: usize) -> usize {
        self.frames
            .iter()
            .position(|(s, e)| offset >= *s && offset < *e)
            .unwrap_or(0)
    }

    /// Offset at which recovery must cut when frame `k` is the first bad one.
    fn cut_for(&self, offset: usize) -> u64 {
        if offset < 8 {
            0
        } else {
            self.frames[self.frame_of(offset)].0 as u64
        }
    }

    /// For a copy of the log of the same length: `(k, offset)` of the first changed frame (the
    /// header counts as frame 0 at offset 0), or `None` if no byte changed.
    fn first_change(&self, bad: &[u8]) -> Option<(usize, u64)> {
        let byte = (0..self.log.len()).find(|i| bad[*i] != self.log[*i])?;
        let k = if byte < 8 { 0 } else { self.frame_of(byte) };
        Some((k, self.cut_for(byte)))
    }
}

/// The stores of these tests write their log without preallocated zeros, so that the log is
/// frames only and every byte of it is worth damaging; the preallocated tail has tests of its
/// own (the last ones of this file).
fn opts() -> StoreOptions {
    let mut o = server_options(families());
    o.log_prealloc = 0;
    o
}

fn open(fs: &SimFs, mode: RecoveryMode) -> Result<(RegionStore, RecoveryReport)> {
    let mut opts = opts();
    opts.recovery = mode;
    RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new(DIR), opts)
}

/// After a recovery: a new acknowledged write, then a crash (drop, power cut) and a second
/// recovery that must find the recovered state plus the new write, with no damage left.
fn writes_after_recovery_survive(fs: &SimFs, mut s: RegionStore, what: &str) {
    mutate(&mut s, "r9", vec![put("one", "q", Some(1), "after")]);
    let expected = state(&s);
    drop(s);
    fs.power_cut(None);
    let (s, report) = open(fs, RecoveryMode::Strict)
        .unwrap_or_else(|e| panic!("{what}: second recovery failed: {e}"));
    assert_eq!(
        report.truncated_at, None,
        "{what}: the first recovery cut cleanly"
    );
    assert_eq!(state(&s), expected, "{what}: writes after recovery survive");
}

/// What recovery reports as the cut when the first bad frame of `bytes` starts at `at`: nothing
/// when only zeros follow it (a preallocated tail is the end of the log, FORMAT.md), else `at`.
fn reported_cut(bytes: &[u8], at: u64) -> Option<u64> {
    let zeros_only = at >= 8 && bytes[at as usize..].iter().all(|b| *b == 0);
    (!zeros_only).then_some(at)
}

/// A flip of the header's version byte that reads as a newer format version: refused in
/// every mode (it may be a log a newer build wrote), never truncated as damage.
fn reads_as_newer_version(bad: &[u8]) -> bool {
    bad.len() >= 8 && &bad[..7] == b"KURALOG" && bad[7] > 4
}

fn assert_refused_as_newer(fs: &SimFs, fx_log: &Path, bad: &[u8], what: &str) {
    for mode in [RecoveryMode::Strict, RecoveryMode::PointInTime] {
        assert_corruption_at(open(fs, mode), fx_log, 7, what);
        assert_eq!(
            fs.read_file(fx_log).expect("log"),
            bad,
            "{what}: a log refused as newer is left alone"
        );
    }
}

fn assert_corruption_at(
    res: Result<(RegionStore, RecoveryReport)>,
    log: &Path,
    at: u64,
    what: &str,
) {
    match res {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, log, "{what}: the error names the log");
            assert_eq!(offset, at, "{what}: the error names the first bad frame");
        }
        Err(e) => panic!("{what}: strict recovery failed with a non-corruption error: {e}"),
        Ok(_) => panic!("{what}: strict recovery accepted mid-log damage"),
    }
}

#[test]
fn truncation_at_every_offset_recovers_exactly_the_whole_frames_before_it() {
    let fx = fixture(0);
    let boundaries: Vec<usize> = std::iter::once(8)
        .chain(fx.frames.iter().map(|f| f.1))
        .collect();
    for cut in 0..=fx.log.len() {
        let what = format!("cut at {cut} of {}", fx.log.len());
        let k = fx.frames.iter().filter(|f| f.1 <= cut).count();
        // A torn tail is tolerated in strict mode too, and gives the same state.
        let fs = fx.fs_with_log(&fx.log[..cut]);
        let (s, _) = open(&fs, RecoveryMode::Strict).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(state(&s), fx.states[k], "{what}: strict");
        drop(s);

        let fs = fx.fs_with_log(&fx.log[..cut]);
        let (s, report) =
            open(&fs, RecoveryMode::PointInTime).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(state(&s), fx.states[k], "{what}: exactly the whole frames");
        let expected_cut = if boundaries.contains(&cut) {
            None
        } else if cut < 8 {
            Some(0)
        } else {
            Some(fx.frames[k].0 as u64)
        };
        let expected_cut = expected_cut.and_then(|c| reported_cut(&fx.log[..cut], c));
        assert_eq!(report.truncated_at, expected_cut, "{what}: reported");
        assert_eq!(
            report.bytes_dropped,
            expected_cut.map_or(0, |c| cut as u64 - c),
            "{what}: bytes dropped"
        );
        writes_after_recovery_survive(&fs, s, &what);
    }
}

#[test]
fn every_single_bit_flip_is_detected_and_never_yields_a_wrong_value() {
    let fx = fixture(0);
    let last = fx.frames.len() - 1;
    for byte in 0..fx.log.len() {
        for bit in 0..8 {
            let what = format!("flip of bit {bit} of byte {byte}");
            let mut bad = fx.log.clone();
            bad[byte] ^= 1 << bit;
            let k = if byte < 8 { 0 } else { fx.frame_of(byte) };
            let at = fx.cut_for(byte);

            let fs = fx.fs_with_log(&bad);
            if reads_as_newer_version(&bad) {
                assert_refused_as_newer(&fs, &fx.log_path, &bad, &what);
                continue;
            }
            let strict = open(&fs, RecoveryMode::Strict);
            if byte < 8 || k < last {
                assert_corruption_at(strict, &fx.log_path, at, &what);
                assert_eq!(
                    fs.read_file(&fx.log_path).expect("log"),
                    bad,
                    "{what}: a refused strict recovery leaves the log alone"
                );
            } else {
                // In the final frame the flip may be taken for a torn tail, or refused.
                match strict {
                    Ok((s, report)) => {
                        assert_eq!(state(&s), fx.states[k], "{what}: strict");
                        assert_eq!(report.truncated_at, Some(at), "{what}: strict");
                    }
                    Err(e) => assert_corruption_at(Err(e), &fx.log_path, at, &what),
                }
            }

            let fs = fx.fs_with_log(&bad);
            let (s, report) =
                open(&fs, RecoveryMode::PointInTime).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                state(&s),
                fx.states[k],
                "{what}: the frames before the flip"
            );
            assert_eq!(
                report.truncated_at,
                Some(at),
                "{what}: detected and reported"
            );
            assert_eq!(report.bytes_dropped, bad.len() as u64 - at, "{what}");
            writes_after_recovery_survive(&fs, s, &what);
        }
    }
}

#[test]
fn log_zeroed_from_any_offset_is_a_torn_tail() {
    let fx = fixture(0);
    for from in 0..fx.log.len() {
        let what = format!("zeroed from {from}");
        let mut bad = fx.log.clone();
        bad[from..].fill(0);
        // Bytes that were zero already change nothing: the damage starts at the first change.
        let Some((k, at)) = fx.first_change(&bad) else {
            continue;
        };

        let fs = fx.fs_with_log(&bad);
        let strict = open(&fs, RecoveryMode::Strict);
        if at == 0 {
            assert_corruption_at(strict, &fx.log_path, 0, &what);
        } else {
            let (s, _) = strict.unwrap_or_else(|e| panic!("{what}: zeros are a torn tail: {e}"));
            assert_eq!(state(&s), fx.states[k], "{what}: strict");
        }

        let fs = fx.fs_with_log(&bad);
        let (s, report) =
            open(&fs, RecoveryMode::PointInTime).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(state(&s), fx.states[k], "{what}");
        assert_eq!(report.truncated_at, reported_cut(&bad, at), "{what}");
        writes_after_recovery_survive(&fs, s, &what);
    }
}

#[test]
fn a_zeroed_4k_range_in_a_larger_log_is_detected_and_never_yields_a_wrong_value() {
    let fx = fixture(2000);
    assert!(fx.log.len() > 3 * 4096, "{}", fx.log.len());
    // Every 17th offset, and every offset within a frame header (and the file header).
    let starts = (0..fx.log.len())
        .filter(|o| o % 17 == 0 || *o < 8 || fx.frames.iter().any(|f| (f.0..f.0 + 8).contains(o)));
    for from in starts {
        let to = (from + 4096).min(fx.log.len());
        let what = format!("zeroed {from}..{to} of {}", fx.log.len());
        let mut bad = fx.log.clone();
        bad[from..to].fill(0);
        let Some((k, at)) = fx.first_change(&bad) else {
            continue;
        };
        let intact_frame_after = fx.frames.iter().any(|f| f.0 >= to);

        let fs = fx.fs_with_log(&bad);
        match open(&fs, RecoveryMode::Strict) {
            Ok((s, _)) => {
                assert!(
                    !intact_frame_after && at > 0,
                    "{what}: strict accepted damage followed by valid frames"
                );
                assert_eq!(state(&s), fx.states[k], "{what}: strict");
            }
            Err(e) => {
                assert!(
                    at == 0 || to < fx.log.len(),
                    "{what}: a zeroed tail must be accepted in strict mode: {e}"
                );
                assert_corruption_at(Err(e), &fx.log_path, at, &what);
            }
        }

        let fs = fx.fs_with_log(&bad);
        let (s, report) =
            open(&fs, RecoveryMode::PointInTime).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(state(&s), fx.states[k], "{what}");
        assert_eq!(report.truncated_at, reported_cut(&bad, at), "{what}");
        writes_after_recovery_survive(&fs, s, &what);
    }
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn garbage_appended_is_dropped_reported_and_later_writes_survive() {
    let fx = fixture(0);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut garbages: Vec<Vec<u8>> = Vec::new();
    for len in 1..=40 {
        garbages.push(vec![0xAB; len]);
        garbages.push(vec![0xFF; len]);
        garbages.push((0..len).map(|_| rng.next() as u8).collect());
    }
    // A plausible frame header (small length, wrong CRC) followed by noise.
    for len in [1u32, 8, 30, 200] {
        let mut g = len.to_le_bytes().to_vec();
        g.extend_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
        g.extend((0..len + 5).map(|_| rng.next() as u8));
        garbages.push(g);
    }
    // A copy of the last frame's header with a truncated payload.
    let (s9, e9) = fx.frames[9];
    garbages.push(fx.log[s9..e9 - 1].to_vec());
    for (i, g) in garbages.iter().enumerate() {
        let what = format!("garbage #{i} ({} bytes)", g.len());
        let mut bad = fx.log.clone();
        bad.extend_from_slice(g);

        let fs = fx.fs_with_log(&bad);
        match open(&fs, RecoveryMode::Strict) {
            Ok((s, _)) => assert_eq!(state(&s), fx.states[10], "{what}: strict"),
            Err(e) => assert_corruption_at(Err(e), &fx.log_path, fx.log.len() as u64, &what),
        }

        let fs = fx.fs_with_log(&bad);
        let (s, report) =
            open(&fs, RecoveryMode::PointInTime).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(state(&s), fx.states[10], "{what}: every write kept");
        assert_eq!(report.truncated_at, Some(fx.log.len() as u64), "{what}");
        assert_eq!(report.bytes_dropped, g.len() as u64, "{what}");
        assert_eq!(
            fs.read_file(&fx.log_path).expect("log"),
            fx.log,
            "{what}: the garbage was cut off"
        );
        writes_after_recovery_survive(&fs, s, &what);
    }
}

/// Open with a memtable budget of a few hundred bytes: replay spills segments while it reads the
/// damaged log (FORMAT.md §7 "Replay spill") and the store flushes after opening.
fn open_spilling(fs: &SimFs) -> Result<(RegionStore, RecoveryReport)> {
    let mut opts = opts();
    opts.memtable_budget = 200;
    RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new(DIR), opts)
}

#[test]
fn damage_recovered_while_replay_spills_segments_gives_the_same_prefix_and_survives_a_crash() {
    let fx = fixture(0);
    let (s, _) = open_spilling(&fx.fs_with_log(&fx.log)).expect("open");
    assert!(
        s.stats().segments > 1,
        "replay spilled segments: {:?}",
        s.stats()
    );
    assert_eq!(state(&s), fx.states[10]);
    drop(s);
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for cut in 0..fx.log.len() {
        cases.push((format!("cut at {cut}"), fx.log[..cut].to_vec()));
    }
    for byte in 0..fx.log.len() {
        let mut bad = fx.log.clone();
        bad[byte] ^= 1 << (byte % 8);
        cases.push((format!("flip of bit {} of byte {byte}", byte % 8), bad));
    }
    for (what, bad) in cases {
        if reads_as_newer_version(&bad) {
            assert_refused_as_newer(&fx.fs_with_log(&bad), &fx.log_path, &bad, &what);
            continue;
        }
        let k = if bad.len() < fx.log.len() {
            fx.frames.iter().filter(|f| f.1 <= bad.len()).count()
        } else {
            fx.first_change(&bad).map_or(fx.frames.len(), |(k, _)| k)
        };
        let fs = fx.fs_with_log(&bad);
        let (mut s, _) = open_spilling(&fs).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            state(&s),
            fx.states[k],
            "{what}: exactly the frames before the damage"
        );
        mutate(&mut s, "r9", vec![put("one", "q", Some(1), "after")]);
        let expected = state(&s);
        drop(s);
        fs.power_cut(None);
        let (s, _) = open_spilling(&fs).unwrap_or_else(|e| panic!("{what}: second: {e}"));
        assert_eq!(state(&s), expected, "{what}: writes after recovery survive");
    }
}

// ---------------------------------------------------------------------------------------------
// A preallocated log: zeros ahead of the frames (FORMAT.md, "Preallocated tail").

const PREALLOC: u64 = 64;

fn open_prealloc(fs: &SimFs, mode: RecoveryMode) -> Result<(RegionStore, RecoveryReport)> {
    let mut o = opts();
    o.recovery = mode;
    o.log_prealloc = PREALLOC;
    RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new(DIR), o)
}

/// The workload written one acknowledged operation at a time into a preallocated log: the
/// other files, the log's path and bytes, each frame's end, the state after each operation.
#[allow(clippy::type_complexity)]
fn prealloc_fixture() -> (
    Vec<(PathBuf, Vec<u8>)>,
    PathBuf,
    Vec<u8>,
    Vec<usize>,
    Vec<State>,
) {
    let fs = SimFs::new();
    let (mut s, _) = open_prealloc(&fs, RecoveryMode::PointInTime).expect("open");
    let mut states = vec![state(&s)];
    for op in workload(0) {
        let res = s.write_batch(vec![op]);
        assert!(res.iter().all(Result::is_ok), "{res:?}");
        states.push(state(&s));
    }
    drop(s);
    let mut others = Vec::new();
    let mut log = None;
    for name in fs.list(Path::new(DIR)).expect("list") {
        let path = Path::new(DIR).join(&name);
        let bytes = fs.read_file(&path).expect("read");
        if name.ends_with(".log") {
            log = Some((path, bytes));
        } else {
            others.push((path, bytes));
        }
    }
    let (log_path, log) = log.expect("one log");
    let mut ends = Vec::new();
    let mut at = 8;
    while at + 8 <= log.len() && log[at..at + 8] != [0u8; 8] {
        let len = u32::from_le_bytes(log[at..at + 4].try_into().expect("4 bytes")) as usize;
        at += 8 + len;
        ends.push(at);
    }
    assert_eq!(ends.len(), 10, "one frame per operation");
    assert!(log.len() > at, "zeros follow the frames");
    assert!(log[at..].iter().all(|b| *b == 0));
    assert_eq!(
        (log.len() as u64 - 8) % PREALLOC,
        0,
        "grown {PREALLOC} bytes at a time"
    );
    (others, log_path, log, ends, states)
}

#[test]
fn a_preallocated_log_cut_or_zeroed_anywhere_recovers_exactly_the_whole_frames_before_it() {
    let (others, log_path, log, ends, states) = prealloc_fixture();
    let frames_end = *ends.last().expect("frames");
    let mut cases: Vec<(String, Vec<u8>, usize)> = Vec::new();
    for cut in 0..=log.len() {
        let k = ends.iter().filter(|e| **e <= cut).count();
        cases.push((format!("cut at {cut}"), log[..cut].to_vec(), k));
    }
    for from in 8..log.len() {
        let mut bad = log.clone();
        bad[from..].fill(0);
        let changed = (from..log.len()).find(|i| bad[*i] != log[*i]);
        let k = changed.map_or(10, |c| ends.iter().filter(|e| **e <= c).count());
        cases.push((format!("zeroed from {from}"), bad, k));
    }
    for (what, bad, k) in cases {
        let fs = SimFs::new();
        for (p, b) in &others {
            fs.write_file(p, b).expect("write");
        }
        fs.write_file(&log_path, &bad).expect("write");
        let (mut s, report) = open_prealloc(&fs, RecoveryMode::Strict)
            .unwrap_or_else(|e| panic!("{what}: a torn or zeroed tail is not corruption: {e}"));
        assert_eq!(state(&s), states[k], "{what}");
        if bad.len() >= frames_end && bad[..frames_end] == log[..frames_end] {
            assert_eq!(report.truncated_at, None, "{what}: only zeros were lost");
            assert_eq!(report.bytes_dropped, 0, "{what}");
        }
        // A write after recovery lands after the recovered frames and survives a power cut.
        mutate(&mut s, "r9", vec![put("one", "q", Some(1), "after")]);
        let expected = state(&s);
        drop(s);
        fs.power_cut(None);
        let (s, report) = open_prealloc(&fs, RecoveryMode::Strict)
            .unwrap_or_else(|e| panic!("{what}: second recovery failed: {e}"));
        assert_eq!(
            report.truncated_at, None,
            "{what}: the first recovery cut cleanly"
        );
        assert_eq!(state(&s), expected, "{what}: writes after recovery survive");
    }
}

#[test]
fn a_write_torn_over_the_preallocated_zeros_loses_only_that_unacknowledged_write() {
    let fs = SimFs::new();
    let (mut s, _) = open_prealloc(&fs, RecoveryMode::PointInTime).expect("open");
    mutate(&mut s, "r1", vec![put("cf", "a", Some(1), "acked")]);
    let acked = state(&s);
    drop(s);
    for torn in [1, 5, 9, 20, 60] {
        let mut o = opts();
        o.log_prealloc = PREALLOC;
        // An hour between fsyncs: the write goes over the zeros and is never fsynced; then a
        // power cut keeps only its first `torn` bytes.
        o.durability = Durability::Interval(std::time::Duration::from_secs(3600));
        let (mut s, _) =
            RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new(DIR), o).expect("open");
        mutate(&mut s, "r2", vec![put("cf", "a", Some(1), &"x".repeat(40))]);
        drop(s);
        fs.power_cut(Some(torn));
        let (s, _) =
            open_prealloc(&fs, RecoveryMode::Strict).unwrap_or_else(|e| panic!("torn {torn}: {e}"));
        assert_eq!(state(&s), acked, "torn {torn}: only the acknowledged write");
    }
}

#[test]
fn a_log_that_is_never_fsynced_is_not_preallocated() {
    let fs = SimFs::new();
    let mut o = opts();
    o.log_prealloc = PREALLOC;
    o.durability = Durability::None;
    let (mut s, _) =
        RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new(DIR), o).expect("open");
    mutate(&mut s, "r1", vec![put("cf", "a", Some(1), "v")]);
    let log_bytes = s.stats().log_bytes;
    let log = fs
        .list(Path::new(DIR))
        .expect("list")
        .into_iter()
        .find(|n| n.ends_with(".log"))
        .expect("a log");
    let on_disk = fs.len(&Path::new(DIR).join(log)).expect("len");
    assert_eq!(on_disk, log_bytes, "no zeros ahead of the frames");
}

/// A log with one frame whose checksum is right but whose record breaks the format.
fn crafted_log(seq: u64, kind: u8) -> Vec<u8> {
    fn varint(v: u64, out: &mut Vec<u8>) {
        if v < 251 {
            out.push(v as u8);
        } else {
            out.push(253);
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    fn bytes(b: &[u8], out: &mut Vec<u8>) {
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }
    let mut p = Vec::new();
    varint(seq, &mut p);
    p.push(2); // clock 1 (zigzag)
    bytes(b"r", &mut p);
    p.push(1); // one cell
    bytes(b"one", &mut p);
    p.push(1); // Some(qualifier)
    bytes(b"q", &mut p);
    p.push(10); // ts 5 (zigzag)
    p.push(kind);
    bytes(b"v", &mut p);
    p.push(0); // no idempotency key
    let mut f = b"KURALOG\x02".to_vec();
    f.extend_from_slice(&(p.len() as u32).to_le_bytes());
    f.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    f.extend_from_slice(&p);
    f
}

#[test]
fn a_checksummed_frame_with_an_impossible_record_is_damage_not_a_panic() {
    for (seq, kind, what) in [(u64::MAX, 3, "sequence number"), (1, 9, "entry kind")] {
        let fs = SimFs::new();
        fs.create_dir_all(std::path::Path::new("/region")).unwrap();
        let log = std::path::Path::new("/region/0000000000000001.log");
        fs.write_file(log, &crafted_log(seq, kind)).unwrap();
        // Point in time: the bad frame is where the log ends.
        let (s, report) = open_sim(&fs, server_options(families()))
            .unwrap_or_else(|e| panic!("{what}: point-in-time recovery opens: {e}"));
        assert_eq!(report.truncated_at, Some(8), "{what}");
        assert!(s.get(b"r", &read(1)).unwrap().is_none(), "{what}");
        drop(s);
        // Strict: refused, naming the file and the offset.
        fs.write_file(log, &crafted_log(seq, kind)).unwrap();
        let mut strict = server_options(families());
        strict.recovery = RecoveryMode::Strict;
        match open_sim(&fs, strict) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file.as_path(), offset), (log, 8), "{what}")
            }
            other => panic!("{what}: strict must refuse: {:?}", other.map(|(_, r)| r)),
        }
    }
}

#[test]
fn strict_recovery_refuses_mid_log_damage_before_a_replay_spill_touches_the_manifest() {
    let fx = fixture(0);
    // A flipped bit in the last frame's payload but one: mid-log damage, found only after the
    // replay (budget 200 bytes) has spilled the frames before it.
    let mut bad = fx.log.clone();
    let (start, _) = fx.frames[fx.frames.len() - 2];
    bad[start + 10] ^= 0x10;
    let fs = fx.fs_with_log(&bad);
    let manifest = Path::new(DIR).join("MANIFEST");
    let before = fs.read_file(&manifest).ok();
    let mut o = opts();
    o.memtable_budget = 200;
    o.recovery = RecoveryMode::Strict;
    let r = RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new(DIR), o);
    assert!(
        matches!(r, Err(Error::Corruption { .. })),
        "{:?}",
        r.map(|(_, rep)| rep)
    );
    assert_eq!(
        fs.read_file(&manifest).ok(),
        before,
        "the manifest was rewritten"
    );
}
