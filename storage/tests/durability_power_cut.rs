//! Power cut at every step of a short workload in sync mode: no acknowledged write is lost,
//! with or without a torn last write, with the log preallocated (frames written over zeros,
//! 64 bytes of zeros at a time so that the workload extends it often) or not.
mod common;
use common::*;
use kura_storage::*;

#[test]
fn power_cut_after_every_step_keeps_every_acknowledged_write() {
    for (steps, prealloc) in (0..25).flat_map(|s| [(s, 0), (s, 64)]) {
        for torn in [None, Some(5), Some(1 << 20)] {
            let fs = SimFs::new();
            let mut opts = server_options(families());
            opts.memtable_budget = 400;
            opts.log_prealloc = prealloc;
            let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
            let (mut acked, mut flusher) = (Vec::new(), Flusher::default());
            for i in 0..steps {
                let row = format!("r{i:02}");
                let m = RowMutation {
                    row: row.clone().into_bytes(),
                    mutations: vec![put("cf", "q", Some(i as i64), &format!("v{i}"))],
                };
                s.mutate_row(m).unwrap();
                acked.push(row);
                flusher.after_write_and_wait(&mut s).unwrap();
                if i % 7 == 6 {
                    s.compact(i % 14 == 13).unwrap();
                }
            }
            assert!(steps < 12 || s.stats().flushes > 0, "the workload flushed");
            drop(s);
            cut_and_check(
                &fs,
                opts,
                torn,
                &acked,
                &format!("{steps} steps, torn {torn:?}, prealloc {prealloc}"),
            );
        }
    }
}

#[test]
fn power_cut_during_background_flushes_keeps_every_acknowledged_write() {
    for (steps, prealloc) in (0..30).flat_map(|s| [(s, 0), (s, 64)]) {
        for torn in [None, Some(5)] {
            let fs = SimFs::new();
            let mut opts = server_options(families());
            opts.memtable_budget = 300;
            opts.log_prealloc = prealloc;
            let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
            let mut acked = Vec::new();
            let (mut task, mut out) = (None, None);
            for i in 0..steps {
                let row = format!("r{i:02}");
                mutate(
                    &mut s,
                    &row,
                    vec![put("cf", "q", Some(i as i64), &format!("v{i}"))],
                );
                acked.push(row);
                // Freeze, write on while the flush runs, install: the cut lands at every stage.
                match i % 6 {
                    1 => task = s.flush_task().unwrap(),
                    3 => out = task.take().map(FlushTask::run),
                    4 => {
                        if let Some(o) = out.take() {
                            let _ = s.install_flush(o).unwrap();
                        }
                    }
                    _ => {}
                }
            }
            drop((s, task, out));
            let s = cut_and_check(
                &fs,
                opts,
                torn,
                &acked,
                &format!("{steps} steps, torn {torn:?}, prealloc {prealloc}"),
            );
            assert_eq!(
                s.stats().segments as usize,
                fs_segments(&fs),
                "no orphan segment"
            );
        }
    }
}

/// Cut the power (keeping a torn last write of `torn` bytes), reopen: every acknowledged row
/// `r<i>` holds `v<i>`; the store then takes a write that survives a second cut. Returns the
/// store as reopened after that second cut.
fn cut_and_check(
    fs: &SimFs,
    opts: StoreOptions,
    torn: Option<usize>,
    acked: &[String],
    what: &str,
) -> RegionStore {
    fs.power_cut(torn);
    let (mut s, _) = open_sim(fs, opts.clone()).unwrap();
    for (i, row) in acked.iter().enumerate() {
        let got = s
            .get(row.as_bytes(), &read(1))
            .unwrap()
            .unwrap_or_else(|| panic!("{what}: acknowledged {row} lost"));
        assert_eq!(got.cells[0].value, format!("v{i}").into_bytes(), "{what}");
    }
    mutate(&mut s, "after", vec![put("one", "q", Some(1), "x")]);
    drop(s);
    fs.power_cut(None);
    let (s, _) = open_sim(fs, opts).unwrap();
    assert!(s.get(b"after", &read(1)).unwrap().is_some(), "{what}");
    s
}

/// Segment files in the store's directory.
fn fs_segments(fs: &SimFs) -> usize {
    fs.list(std::path::Path::new("/region"))
        .unwrap()
        .iter()
        .filter(|n| n.ends_with(".seg"))
        .count()
}

#[test]
fn none_mode_keeps_a_prefix_of_what_was_acknowledged() {
    let fs = SimFs::new();
    let mut opts = server_options(families());
    opts.durability = Durability::None;
    let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
    for i in 0..10 {
        mutate(
            &mut s,
            &format!("r{i}"),
            vec![put("one", "q", Some(1), "v")],
        );
    }
    drop(s);
    fs.power_cut(Some(13));
    let (s, _) = open_sim(&fs, opts).unwrap();
    let present: Vec<bool> = (0..10)
        .map(|i| {
            s.get(format!("r{i}").as_bytes(), &read(1))
                .unwrap()
                .is_some()
        })
        .collect();
    let n = present.iter().take_while(|p| **p).count();
    assert!(
        present[n..].iter().all(|p| !p),
        "a prefix survives: {present:?}"
    );
}
