//! Segment damage: a flipped bit or a truncation anywhere in a segment file gives an
//! `Error::Corruption` naming that file (at open, or at the first read of the damaged block),
//! never a panic and never a wrong value.
//!
//! The fixture writes rows with several versions and delete markers, flushes them into one
//! segment and drops the store (the log left behind is empty, so the segment is the only copy).
//! Each damaged copy is opened, then read in every way a user reads (a get of each row, a
//! forward and a reversed scan); every answer must be the undamaged answer or a corruption
//! error naming the segment.
mod common;
use common::*;
use kura_storage::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "/region";

struct Fixture {
    others: Vec<(PathBuf, Vec<u8>)>,
    seg_path: PathBuf,
    seg: Vec<u8>,
    rows: Vec<Vec<u8>>,
    /// The answer to each read of `reads()` on the undamaged store.
    answers: Vec<Answer>,
}

#[derive(Debug, PartialEq)]
enum Answer {
    Get(Option<Row>),
    Scan(Vec<Row>),
}

fn all_versions() -> ReadSpec {
    read(100)
}

/// The reads a user makes, on the fixture: a get of the first, a middle and the last row and
/// of an absent one (the point-read path: row filter, block index, in-block search), a full
/// forward scan, a full reversed scan, a scan from the middle.
fn reads(s: &RegionStore, rows: &[Vec<u8>]) -> Vec<Result<Answer>> {
    let limits = ScanLimits {
        max_rows: 100_000,
        max_bytes: usize::MAX,
    };
    let mid_row = &rows[rows.len() / 2];
    let absent = b"absent".to_vec();
    let gets = [&rows[0], mid_row, &rows[rows.len() - 1], &absent];
    let mut out: Vec<Result<Answer>> = gets
        .iter()
        .map(|r| s.get(r, &all_versions()).map(Answer::Get))
        .collect();
    let mut fwd = ScanSpec::all();
    fwd.read = all_versions();
    out.push(s.scan(&fwd, limits).map(|p| Answer::Scan(p.rows)));
    let mut rev = fwd.clone();
    rev.reversed = true;
    out.push(s.scan(&rev, limits).map(|p| Answer::Scan(p.rows)));
    let mut mid = ScanSpec::forward(mid_row, b"");
    mid.read = all_versions();
    out.push(s.scan(&mid, limits).map(|p| Answer::Scan(p.rows)));
    out
}

fn files(fs: &SimFs) -> Vec<(PathBuf, Vec<u8>)> {
    fs.list(Path::new(DIR))
        .expect("list")
        .into_iter()
        .map(|n| {
            let p = Path::new(DIR).join(n);
            let b = fs.read_file(&p).expect("read");
            (p, b)
        })
        .collect()
}

/// `rows` rows of `value_len`-byte values, with versions and delete markers, flushed into one
/// segment.
fn fixture(rows: usize, value_len: usize) -> Fixture {
    let fs = SimFs::new();
    let (mut s, _) = open_sim(&fs, server_options(families())).expect("open");
    let keys: Vec<Vec<u8>> = (0..rows)
        .map(|i| format!("row{i:04}").into_bytes())
        .collect();
    for (i, key) in keys.iter().enumerate() {
        let row = String::from_utf8_lossy(key).into_owned();
        let v = |t: usize| format!("{i}-{t}-{}", "x".repeat(value_len));
        mutate(
            &mut s,
            &row,
            vec![
                put("cf", "a", Some(10), &v(1)),
                put("cf", "a", Some(20), &v(2)),
                put("cf", "b", Some(10), &v(3)),
                put("one", "q", Some(10), &v(4)),
            ],
        );
        match i % 3 {
            0 => mutate(
                &mut s,
                &row,
                vec![Mutation::DeleteColumn {
                    family: b"cf".to_vec(),
                    qualifier: b"b".to_vec(),
                    timestamp: Some(10),
                }],
            ),
            1 => mutate(
                &mut s,
                &row,
                vec![Mutation::DeleteVersion {
                    family: b"cf".to_vec(),
                    qualifier: b"a".to_vec(),
                    timestamp: Some(20),
                }],
            ),
            _ => {}
        }
    }
    s.flush().expect("flush");
    let answers: Vec<Answer> = reads(&s, &keys)
        .into_iter()
        .map(|r| r.expect("undamaged read"))
        .collect();
    drop(s);
    let mut others = Vec::new();
    let mut segs = Vec::new();
    for (p, b) in files(&fs) {
        if p.extension().is_some_and(|e| e == "seg") {
            segs.push((p, b));
        } else {
            others.push((p, b));
        }
    }
    assert_eq!(segs.len(), 1, "one segment");
    let (seg_path, seg) = segs.pop().expect("one segment");
    Fixture {
        others,
        seg_path,
        seg,
        rows: keys,
        answers,
    }
}

impl Fixture {
    fn fs_with_segment(&self, seg: &[u8]) -> SimFs {
        let fs = SimFs::new();
        for (p, b) in &self.others {
            fs.write_file(p, b).expect("write");
        }
        fs.write_file(&self.seg_path, seg).expect("write");
        fs
    }

    /// Open and read a damaged copy; returns true if the damage was reported. Panics on a
    /// wrong answer or an error that is not a corruption of the segment.
    fn check(&self, seg: &[u8], mode: RecoveryMode, what: &str) -> bool {
        let fs = self.fs_with_segment(seg);
        let mut opts = server_options(families());
        opts.recovery = mode;
        let s = match RegionStore::open_with_fs(Arc::new(fs), Path::new(DIR), opts) {
            Ok((s, _)) => s,
            Err(e) => {
                self.assert_names_segment(&e, what);
                return true;
            }
        };
        let mut detected = false;
        for (i, (got, want)) in reads(&s, &self.rows)
            .into_iter()
            .zip(&self.answers)
            .enumerate()
        {
            match got {
                Ok(a) => assert_eq!(&a, want, "{what}: read #{i} returned a wrong answer"),
                Err(e) => {
                    self.assert_names_segment(&e, what);
                    detected = true;
                }
            }
        }
        detected
    }

    fn assert_names_segment(&self, e: &Error, what: &str) {
        match e {
            Error::Corruption { file, offset, .. } => {
                assert_eq!(file, &self.seg_path, "{what}: {e}");
                assert!(
                    *offset < self.seg.len() as u64,
                    "{what}: offset in the file: {e}"
                );
            }
            other => panic!("{what}: expected a corruption error naming the segment: {other}"),
        }
    }
}

#[test]
fn every_bit_flip_in_a_small_segment_is_reported_and_never_read_as_a_wrong_value() {
    let fx = fixture(8, 4);
    let mut undetected = Vec::new();
    for byte in 0..fx.seg.len() {
        for bit in 0..8 {
            let mut bad = fx.seg.clone();
            bad[byte] ^= 1 << bit;
            let what = format!("flip of bit {bit} of byte {byte} of {}", fx.seg.len());
            if !fx.check(&bad, RecoveryMode::PointInTime, &what) {
                undetected.push((byte, bit));
            }
        }
    }
    // Every byte of a segment is under a checksum (blocks, row filter, index, footer) or is
    // the magic and version: a flip is always reported, in point-in-time mode too.
    assert!(
        undetected.is_empty(),
        "flips read as if nothing happened: {undetected:?}"
    );
}

#[test]
fn flips_in_a_multi_block_segment_are_reported_and_never_read_as_a_wrong_value() {
    let fx = fixture(40, 400);
    // Every byte of the row filter, index and footer (located through the footer, FORMAT.md
    // §5.5), sparse in the data blocks.
    let f_at = fx.seg.len() - 64;
    let word = |at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&fx.seg[at..at + n]);
        u64::from_le_bytes(b) as usize
    };
    let filter_at = word(f_at, 8) - word(f_at + 40, 4);
    assert!(filter_at > 3 * 16 * 1024, "several blocks: {filter_at}");
    assert!(filter_at < f_at, "{filter_at}");
    let bytes = (0..fx.seg.len()).filter(|b| *b >= filter_at || b % 509 == 0 || *b < 64);
    for byte in bytes {
        let bit = byte % 8;
        let mut bad = fx.seg.clone();
        bad[byte] ^= 1 << bit;
        let what = format!("flip of bit {bit} of byte {byte} of {}", fx.seg.len());
        assert!(
            fx.check(&bad, RecoveryMode::PointInTime, &what),
            "{what}: not reported"
        );
    }
}

#[test]
fn a_truncated_segment_is_reported_at_open_in_every_mode() {
    let fx = fixture(8, 4);
    for cut in 0..fx.seg.len() {
        let what = format!("segment cut at {cut} of {}", fx.seg.len());
        for mode in [RecoveryMode::PointInTime, RecoveryMode::Strict] {
            let fs = fx.fs_with_segment(&fx.seg[..cut]);
            let mut opts = server_options(families());
            opts.recovery = mode;
            match RegionStore::open_with_fs(Arc::new(fs), Path::new(DIR), opts) {
                Ok(_) => panic!("{what}: a truncated segment opened ({mode:?})"),
                Err(e) => fx.assert_names_segment(&e, &what),
            }
        }
    }
}

#[test]
fn a_missing_segment_is_an_error_not_an_empty_store() {
    let fx = fixture(8, 4);
    let fs = SimFs::new();
    for (p, b) in &fx.others {
        fs.write_file(p, b).expect("write");
    }
    let res = open_sim(&fs, server_options(families()));
    let Err(err) = res else {
        panic!("opening without a live segment must fail");
    };
    assert!(
        err.to_string().contains(&*fx.seg_path.to_string_lossy()),
        "the error names the missing segment: {err}"
    );
}
