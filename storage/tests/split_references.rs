//! Splits by reference (`RegionStore::link_rows`): the new store starts on hard links to the
//! parent's segments, both sides serve only the rows they own, sizes count only owned rows,
//! compaction rewrites reference segments (an asked-for one first, the background after a due
//! tier merge, one batch at a time), and a crash at any step of a split loses no
//! acknowledged row and never serves one twice or from the wrong side.
mod common;
use common::*;
use kura_storage::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// A stand-in for the salt bucket (a hash of the key, so that every segment and every block
/// holds rows of every bucket): FNV-1a, 16 buckets.
fn bucket(row: &[u8]) -> u64 {
    row.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    }) % 16
}

/// The upper half: buckets 8..16.
fn upper(row: &[u8]) -> bool {
    bucket(row) >= 8
}

fn lower(row: &[u8]) -> bool {
    !upper(row)
}

fn owning(pred: fn(&[u8]) -> bool) -> StoreOptions {
    let mut o = server_options(families());
    o.owns_row = Some(Arc::new(pred));
    o
}

fn value(row: &str) -> String {
    format!("v-{row}-{}", "x".repeat(200))
}

/// Write rows `from..to` (`r00000`...), one batch of 50 at a time.
fn write_rows(s: &mut RegionStore, from: usize, to: usize) {
    let keys: Vec<usize> = (from..to).collect();
    for chunk in keys.chunks(50) {
        let ops: Vec<WriteOp> = chunk
            .iter()
            .map(|i| {
                let row = format!("r{i:05}");
                WriteOp::Mutate(RowMutation {
                    row: row.clone().into_bytes(),
                    mutations: vec![put("one", "q", Some(1), &value(&row))],
                })
            })
            .collect();
        for r in s.write_batch(ops) {
            r.expect("write");
        }
    }
}

/// Every row a store serves, with its `one:q` value.
fn all_rows(s: &RegionStore) -> BTreeMap<String, String> {
    let page = s
        .scan(
            &ScanSpec::all(),
            ScanLimits {
                max_rows: usize::MAX,
                max_bytes: usize::MAX,
            },
        )
        .expect("scan");
    assert!(page.complete, "one page");
    page.rows
        .into_iter()
        .map(|r| {
            let key = String::from_utf8(r.key).unwrap();
            let v = String::from_utf8(r.cells[0].value.clone()).unwrap();
            (key, v)
        })
        .collect()
}

fn expected(from: usize, to: usize, pred: fn(&[u8]) -> bool) -> BTreeMap<String, String> {
    (from..to)
        .map(|i| format!("r{i:05}"))
        .filter(|r| pred(r.as_bytes()))
        .map(|r| {
            let v = value(&r);
            (r, v)
        })
        .collect()
}

/// A parent with two flushed segments and rows in its memtable, split into `child`.
fn split_parent(dir: &Path) -> (RegionStore, RegionStore) {
    let mut s = RegionStore::open(&dir.join("parent"), server_options(families()))
        .unwrap()
        .0;
    write_rows(&mut s, 0, 1000);
    s.flush().unwrap();
    write_rows(&mut s, 1000, 2000);
    s.flush().unwrap();
    write_rows(&mut s, 2000, 2100);
    s.link_rows(&upper, &dir.join("child"), server_options(Vec::new()))
        .unwrap();
    s.set_owns_row(Some(Arc::new(lower)));
    let child = RegionStore::open(&dir.join("child"), owning(upper))
        .unwrap()
        .0;
    (s, child)
}

#[test]
fn a_split_links_the_parents_segments_and_each_side_serves_its_own_rows() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (parent, child) = split_parent(dir.path());
    assert_eq!(all_rows(&parent), expected(0, 2100, lower));
    assert_eq!(all_rows(&child), expected(0, 2100, upper));
    let segs: Vec<_> = std::fs::read_dir(dir.path().join("child"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    assert_eq!(
        segs.len(),
        3,
        "every parent segment, the flushed memtable too"
    );
    for seg in &segs {
        let twin = dir.path().join("parent").join(seg.file_name().unwrap());
        assert_eq!(
            std::fs::metadata(seg).unwrap().ino(),
            std::fs::metadata(&twin).unwrap().ino(),
            "{} is a link, not a copy",
            seg.display()
        );
    }
    assert_eq!(child.reference_segments(), 3);
    assert_eq!(parent.reference_segments(), 3);
    // A point get of a row the side does not own is never answered from the shared files.
    assert!(parent.get(b"r00001", &read(1)).unwrap().is_none());
    assert!(child.get(b"r00002", &read(1)).unwrap().is_none());
    let manifest = std::fs::read(dir.path().join("child/MANIFEST")).unwrap();
    assert_eq!(&manifest[..8], b"KURAMAN\x02", "manifest format 2");
}

#[test]
fn sizes_count_only_the_owned_share_of_reference_segments() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let mut s = RegionStore::open(dir.path(), server_options(families()))
            .unwrap()
            .0;
        write_rows(&mut s, 0, 4000);
        s.flush().unwrap();
        s.approximate_size()
    };
    let (parent, child) = {
        let mut s = RegionStore::open(dir.path(), server_options(families()))
            .unwrap()
            .0;
        s.link_rows(
            &upper,
            &dir.path().join("child"),
            server_options(Vec::new()),
        )
        .unwrap();
        s.set_owns_row(Some(Arc::new(lower)));
        let c = RegionStore::open(&dir.path().join("child"), owning(upper))
            .unwrap()
            .0;
        (s, c)
    };
    for (side, s) in [("parent", &parent), ("child", &child)] {
        let share = s.approximate_size() as f64 / before as f64;
        assert!((0.4..0.6).contains(&share), "{side}: {share}");
        let cells = s.stats().segment_cells as f64 / 4000.0;
        assert!((0.4..0.6).contains(&cells), "{side}: {cells}");
    }
}

#[test]
fn compaction_rewrites_reference_segments_first_and_keeps_only_owned_rows() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (mut parent, mut child) = split_parent(dir.path());
    for (s, pred) in [
        (&mut parent, lower as fn(&[u8]) -> bool),
        (&mut child, upper),
    ] {
        assert!(s.wants_reference_compaction());
        let task = s.compaction_task(false).expect("a reference compaction");
        let out = task.run().unwrap();
        assert!(out.entries_out < out.entries_in, "shared rows dropped");
        drop(s.install_compaction(out).unwrap());
        assert_eq!(s.reference_segments(), 0);
        assert!(!s.wants_reference_compaction());
        assert_eq!(all_rows(s), expected(0, 2100, pred));
    }
    // The shared files are gone from both directories; what is left is each side's own.
    for side in ["parent", "child"] {
        for e in std::fs::read_dir(dir.path().join(side)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|e| e == "seg") {
                assert_eq!(std::fs::metadata(&p).unwrap().nlink(), 1, "{}", p.display());
            }
        }
    }
    drop((parent, child));
    let parent = RegionStore::open(&dir.path().join("parent"), owning(lower))
        .unwrap()
        .0;
    let child = RegionStore::open(&dir.path().join("child"), owning(upper))
        .unwrap()
        .0;
    assert_eq!(parent.reference_segments(), 0, "the flag is durable");
    assert_eq!(all_rows(&parent), expected(0, 2100, lower));
    assert_eq!(all_rows(&child), expected(0, 2100, upper));
}

#[test]
fn background_compactions_merge_a_due_tier_first_and_rewrite_references_one_batch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let (mut parent, _child) = split_parent(dir.path());
    assert_eq!(parent.reference_segments(), 3);
    assert_eq!(parent.stats().reference_segments, 3, "shown to operators");
    // Three segments are no full tier: the references are rewritten, one task at a time.
    let rewrite = parent.background_compaction_task().expect("a rewrite");
    assert!(rewrite.rewrites_references());
    assert_eq!(rewrite.input_count(), 3);
    assert!(
        parent.background_compaction_task().is_none(),
        "no second rewrite while one holds references"
    );
    drop(rewrite);
    // Two flushes more make a tier of five small segments: the merge comes first, takes the
    // references with the rest, and keeps only the rows the store owns.
    write_rows(&mut parent, 2100, 2200);
    parent.flush().unwrap();
    write_rows(&mut parent, 2200, 2300);
    parent.flush().unwrap();
    let merge = parent.background_compaction_task().expect("a merge");
    assert!(!merge.rewrites_references());
    assert_eq!(merge.input_count(), 5);
    drop(parent.install_compaction(merge.run().unwrap()).unwrap());
    assert_eq!(parent.reference_segments(), 0);
    assert_eq!(parent.stats().reference_segments, 0);
    assert_eq!(all_rows(&parent), expected(0, 2300, lower));
}

#[test]
fn references_are_not_rewritten_while_a_narrowing_may_be_undone() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RegionStore::open(dir.path(), server_options(families()))
        .unwrap()
        .0;
    write_rows(&mut s, 0, 300);
    s.link_rows(
        &upper,
        &dir.path().join("child"),
        server_options(Vec::new()),
    )
    .unwrap();
    s.narrow_reads(Some(Arc::new(lower)));
    assert!(!s.wants_reference_compaction(), "the split may still abort");
    // A compaction made meanwhile keeps every row, so its output is a reference segment still.
    let out = s.compaction_task(true).unwrap().run().unwrap();
    drop(s.install_compaction(out).unwrap());
    assert_eq!(s.reference_segments(), 1);
    // The split aborts: every row is served again.
    s.set_owns_row(None);
    assert_eq!(all_rows(&s), expected(0, 300, |_| true));
    assert!(s.wants_reference_compaction());
    let out = s.compaction_task(false).unwrap().run().unwrap();
    drop(s.install_compaction(out).unwrap());
    assert_eq!(s.reference_segments(), 0);
    assert_eq!(all_rows(&s), expected(0, 300, |_| true));
}

#[test]
fn a_region_holding_references_splits_again_by_narrowing() {
    let dir = tempfile::tempdir().unwrap();
    let (parent, mut child) = split_parent(dir.path());
    fn upper_high(row: &[u8]) -> bool {
        bucket(row) >= 12
    }
    fn upper_low(row: &[u8]) -> bool {
        upper(row) && !upper_high(row)
    }
    child
        .link_rows(
            &upper_high,
            &dir.path().join("grandchild"),
            server_options(Vec::new()),
        )
        .unwrap();
    child.set_owns_row(Some(Arc::new(upper_low)));
    let grandchild = RegionStore::open(&dir.path().join("grandchild"), owning(upper_high))
        .unwrap()
        .0;
    let mut union = all_rows(&parent);
    for side in [all_rows(&child), all_rows(&grandchild)] {
        for (k, v) in side {
            assert!(union.insert(k.clone(), v).is_none(), "{k} served twice");
        }
    }
    assert_eq!(union, expected(0, 2100, |_| true));
    assert!(!all_rows(&grandchild).is_empty() && !all_rows(&child).is_empty());
}

// -------------------------------------------------------------------------------------------
// A crash at every step.

const OPS: [FaultOp; 5] = [
    FaultOp::Write,
    FaultOp::Sync,
    FaultOp::Rename,
    FaultOp::Create,
    FaultOp::SyncDir,
];
const PARENT: &str = "/regions/1";
const CHILD: &str = "/regions/2";
/// The commit point of a split, as the catalog is for the router.
const CATALOG: &str = "/catalog";

fn sim_open(fs: &SimFs, dir: &str, opts: StoreOptions) -> Result<RegionStore> {
    RegionStore::open_with_fs(Arc::new(fs.clone()), Path::new(dir), opts).map(|(s, _)| s)
}

/// Write the catalog durably (a new file, fsynced, renamed into place, directory fsynced).
fn commit(fs: &SimFs) -> std::io::Result<()> {
    let tmp = Path::new("/catalog.tmp");
    let mut f = fs.create(tmp)?;
    f.write_all(b"split")?;
    f.sync()?;
    drop(f);
    fs.rename(tmp, Path::new(CATALOG))?;
    fs.sync_dir(Path::new("/"))
}

/// Rewrite every reference segment of `s`.
fn compact_references(s: &mut RegionStore) -> Result<()> {
    while s.wants_reference_compaction() {
        let out = s.compaction_task(false).expect("a task").run()?;
        drop(s.install_compaction(out)?);
    }
    Ok(())
}

/// The parent, loaded: rows `0..300` acknowledged in `Sync` mode, two segments and a memtable.
fn loaded(fs: &SimFs) -> RegionStore {
    let mut s = sim_open(fs, PARENT, server_options(families())).unwrap();
    write_rows(&mut s, 0, 100);
    s.flush().unwrap();
    write_rows(&mut s, 100, 200);
    s.flush().unwrap();
    write_rows(&mut s, 200, 300);
    s
}

/// Every step of a split and its clean-up, stopping at the first failure: link, commit, the
/// parent narrows, both sides rewrite their references, and the parent flushes a later write.
fn split_steps(fs: &SimFs, parent: &mut RegionStore) -> std::result::Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    parent
        .link_rows(&upper, Path::new(CHILD), server_options(Vec::new()))
        .map_err(|x| e(&x))?;
    parent.narrow_reads(Some(Arc::new(lower)));
    commit(fs).map_err(|x| e(&x))?;
    parent.set_owns_row(Some(Arc::new(lower)));
    let mut child = sim_open(fs, CHILD, owning(upper)).map_err(|x| e(&x))?;
    compact_references(parent).map_err(|x| e(&x))?;
    compact_references(&mut child).map_err(|x| e(&x))?;
    drop(child);
    parent.flush().map_err(|x| e(&x))
}

/// After a power cut: the side(s) the catalog names serve every acknowledged row exactly once,
/// each from the side that owns it, and keep doing so after their references are rewritten.
fn check_recovered(fs: &SimFs, what: &str) {
    let all = expected(0, 300, |_| true);
    if fs.exists(Path::new(CATALOG)) {
        let mut parent = sim_open(fs, PARENT, owning(lower)).expect("parent opens");
        let mut child = sim_open(fs, CHILD, owning(upper)).expect("child opens");
        for round in ["reopened", "references rewritten"] {
            let (p, c) = (all_rows(&parent), all_rows(&child));
            assert_eq!(p, expected(0, 300, lower), "{what}, {round}: parent");
            assert_eq!(c, expected(0, 300, upper), "{what}, {round}: child");
            compact_references(&mut parent).unwrap();
            compact_references(&mut child).unwrap();
        }
        // The child's files outlive the parent's rewrite (and the other way round).
        drop((parent, child));
        let child = sim_open(fs, CHILD, owning(upper)).unwrap();
        assert_eq!(all_rows(&child), expected(0, 300, upper), "{what}: child");
    } else {
        // No commit: the parent still owns every row; the new directory is an orphan.
        let mut parent = sim_open(fs, PARENT, server_options(families())).expect("parent opens");
        assert_eq!(all_rows(&parent), all, "{what}: parent");
        compact_references(&mut parent).unwrap();
        assert_eq!(
            all_rows(&parent),
            all,
            "{what}: parent, references rewritten"
        );
    }
}

#[test]
fn a_crash_at_any_step_of_a_split_loses_nothing_and_serves_each_row_once() {
    // Count the operations of each kind the split makes.
    let counts: Vec<(FaultOp, u64)> = {
        let fs = SimFs::new();
        let mut parent = loaded(&fs);
        let before: Vec<u64> = OPS.iter().map(|op| fs.op_count(*op)).collect();
        split_steps(&fs, &mut parent).expect("a split without faults");
        OPS.iter()
            .zip(before)
            .map(|(op, b)| (*op, fs.op_count(*op) - b))
            .collect()
    };
    let (mut committed, mut undone) = (0, 0);
    for (op, count) in counts {
        for nth in 1..=count {
            let fs = SimFs::new();
            let mut parent = loaded(&fs);
            fs.inject(Fault {
                op,
                nth,
                persistent: true,
            });
            let outcome = split_steps(&fs, &mut parent);
            drop(parent);
            fs.power_cut(None);
            fs.clear_faults();
            check_recovered(&fs, &format!("{op:?} #{nth} ({outcome:?})"));
            if fs.exists(Path::new(CATALOG)) {
                committed += 1;
            } else {
                undone += 1;
            }
        }
    }
    // Crashes on both sides of the commit point, at many steps of each.
    assert!(committed > 10 && undone > 10, "{committed} / {undone}");
}
