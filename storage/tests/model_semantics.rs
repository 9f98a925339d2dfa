//! The store against a brute-force model of HBase's version and delete semantics, with flush,
//! background flush (freeze, then install, possibly overtaken), compaction and reopen steps
//! mixed in (a compact version of the exhaustive suite).
mod common;
use common::*;
use kura_storage::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Put(u8, u8, u8, i64, u8),
    DeleteVersion(u8, u8, u8, i64),
    DeleteColumn(u8, u8, u8, i64),
    DeleteFamily(u8, u8, i64),
    DeleteRow(u8, i64),
    Flush,
    /// Freeze the memtable for a background flush; `Install` runs the task and installs it.
    Freeze,
    Install,
    Minor,
    Major,
    Reopen,
}

const ROWS: [&str; 3] = ["a", "b", "c"];
const FAMS: [&str; 2] = ["cf", "one"]; // max versions 3 and 1
const QUALS: [&str; 2] = ["x", "y"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..3u8, 0..2u8, 0..2u8, 1..8i64, any::<u8>()).prop_map(|(r, f, q, t, v)| Op::Put(r, f, q, t, v)),
        2 => (0..3u8, 0..2u8, 0..2u8, 1..8i64).prop_map(|(r, f, q, t)| Op::DeleteVersion(r, f, q, t)),
        2 => (0..3u8, 0..2u8, 0..2u8, 1..8i64).prop_map(|(r, f, q, t)| Op::DeleteColumn(r, f, q, t)),
        1 => (0..3u8, 0..2u8, 1..8i64).prop_map(|(r, f, t)| Op::DeleteFamily(r, f, t)),
        1 => (0..3u8, 1..8i64).prop_map(|(r, t)| Op::DeleteRow(r, t)),
        1 => Just(Op::Flush),
        1 => Just(Op::Freeze),
        1 => Just(Op::Install),
        1 => Just(Op::Minor),
        1 => Just(Op::Major),
        1 => Just(Op::Reopen),
    ]
}

/// Model entry: (row, fam, qual (None = family marker), ts, kind, seq, value).
#[derive(Clone, Debug)]
struct E {
    row: u8,
    fam: u8,
    qual: Option<u8>,
    ts: i64,
    kind: u8, // 0 fam del, 1 col del, 2 version del, 3 put
    seq: u64,
    value: u8,
}

fn max_versions(fam: u8) -> usize {
    if fam == 0 {
        3
    } else {
        1
    }
}

/// Retained versions of a column, newest first: (ts, value).
fn retained(model: &[E], row: u8, fam: u8, q: u8) -> Vec<(i64, u8)> {
    let fam_del = model
        .iter()
        .filter(|e| e.row == row && e.fam == fam && e.kind == 0)
        .map(|e| e.ts)
        .max();
    let col = |k: u8| {
        model
            .iter()
            .filter(move |e| e.row == row && e.fam == fam && e.qual == Some(q) && e.kind == k)
    };
    let col_del = col(1).map(|e| e.ts).max();
    let mut puts: Vec<&E> = col(3).collect();
    puts.sort_by(|a, b| b.ts.cmp(&a.ts).then(b.seq.cmp(&a.seq)));
    puts.dedup_by(|later, first| later.ts == first.ts);
    puts.into_iter()
        .filter(|p| fam_del.is_none_or(|d| p.ts > d) && col_del.is_none_or(|d| p.ts > d))
        .filter(|p| !col(2).any(|d| d.ts == p.ts))
        .take(max_versions(fam))
        .map(|p| (p.ts, p.value))
        .collect()
}

fn expected_row(
    model: &[E],
    row: u8,
    tr: TimeRange,
    versions: usize,
) -> Vec<(String, i64, String)> {
    let mut out = Vec::new();
    for f in 0..2u8 {
        for q in 0..2u8 {
            for (ts, v) in retained(model, row, f, q)
                .into_iter()
                .filter(|(ts, _)| tr.contains(*ts))
                .take(versions)
            {
                out.push((
                    format!("{}:{}", FAMS[f as usize], QUALS[q as usize]),
                    ts,
                    v.to_string(),
                ));
            }
        }
    }
    out
}

fn run(ops: Vec<Op>, tr: TimeRange, versions: u32) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = StoreOptions::new(families());
    opts.durability = Durability::None;
    let mut s = RegionStore::open(dir.path(), opts.clone()).unwrap().0;
    let mut model: Vec<E> = Vec::new();
    let mut seq = 0u64;
    let mut task: Option<FlushTask> = None;
    for op in ops {
        let mut push = |model: &mut Vec<E>, row, fam, qual, ts, kind, value| {
            seq += 1;
            model.push(E {
                row,
                fam,
                qual,
                ts,
                kind,
                seq,
                value,
            });
        };
        let m = |r: u8, mutations| RowMutation {
            row: ROWS[r as usize].into(),
            mutations,
        };
        match op {
            Op::Put(r, f, q, ts, v) => {
                s.mutate_row(m(
                    r,
                    vec![put(
                        FAMS[f as usize],
                        QUALS[q as usize],
                        Some(ts),
                        &v.to_string(),
                    )],
                ))
                .unwrap();
                push(&mut model, r, f, Some(q), ts, 3, v);
            }
            Op::DeleteVersion(r, f, q, ts) => {
                s.mutate_row(m(
                    r,
                    vec![Mutation::DeleteVersion {
                        family: FAMS[f as usize].into(),
                        qualifier: QUALS[q as usize].into(),
                        timestamp: Some(ts),
                    }],
                ))
                .unwrap();
                push(&mut model, r, f, Some(q), ts, 2, 0);
            }
            Op::DeleteColumn(r, f, q, ts) => {
                s.mutate_row(m(
                    r,
                    vec![Mutation::DeleteColumn {
                        family: FAMS[f as usize].into(),
                        qualifier: QUALS[q as usize].into(),
                        timestamp: Some(ts),
                    }],
                ))
                .unwrap();
                push(&mut model, r, f, Some(q), ts, 1, 0);
            }
            Op::DeleteFamily(r, f, ts) => {
                s.mutate_row(m(
                    r,
                    vec![Mutation::DeleteFamily {
                        family: FAMS[f as usize].into(),
                        timestamp: Some(ts),
                    }],
                ))
                .unwrap();
                push(&mut model, r, f, None, ts, 0, 0);
            }
            Op::DeleteRow(r, ts) => {
                s.mutate_row(m(
                    r,
                    vec![Mutation::DeleteRow {
                        timestamp: Some(ts),
                    }],
                ))
                .unwrap();
                for f in 0..2 {
                    push(&mut model, r, f, None, ts, 0, 0);
                }
            }
            Op::Flush => s.flush().unwrap(),
            Op::Freeze => {
                if let Some(t) = s.flush_task().unwrap() {
                    task = Some(t);
                }
            }
            Op::Install => {
                if let Some(t) = task.take() {
                    let _ = s.install_flush(t.run()).unwrap();
                }
            }
            Op::Minor => s.compact(false).unwrap(),
            Op::Major => {
                s.compact(true).unwrap();
                let mut kept = Vec::new();
                for r in 0..3u8 {
                    for f in 0..2u8 {
                        for q in 0..2u8 {
                            for (ts, v) in retained(&model, r, f, q) {
                                let e = model
                                    .iter()
                                    .find(|e| {
                                        e.row == r
                                            && e.fam == f
                                            && e.qual == Some(q)
                                            && e.kind == 3
                                            && e.ts == ts
                                            && e.value == v
                                    })
                                    .unwrap()
                                    .clone();
                                kept.push(e);
                            }
                        }
                    }
                }
                model = kept;
            }
            Op::Reopen => {
                drop(s);
                s = RegionStore::open(dir.path(), opts.clone()).unwrap().0;
            }
        }
        let read = ReadSpec {
            time_range: tr,
            max_versions: versions,
            ..ReadSpec::default()
        };
        let mut forward = Vec::new();
        for r in 0..3u8 {
            let want = expected_row(&model, r, tr, versions as usize);
            assert_eq!(
                cells(&s, ROWS[r as usize], &read),
                want,
                "row {}",
                ROWS[r as usize]
            );
            if !want.is_empty() {
                forward.push(ROWS[r as usize].to_string());
            }
        }
        for reversed in [false, true] {
            let spec = ScanSpec {
                reversed,
                read: read.clone(),
                ..ScanSpec::all()
            };
            let page = s.scan(&spec, ScanLimits::default()).unwrap();
            let mut got: Vec<String> = page
                .rows
                .iter()
                .map(|r| String::from_utf8_lossy(&r.key).into_owned())
                .collect();
            if reversed {
                got.reverse();
            }
            assert_eq!(got, forward, "scan reversed={reversed}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn store_matches_the_model_after_every_step(
        ops in prop::collection::vec(op(), 1..40),
        min in 0..4i64,
        width in 1..9i64,
        versions in 1..5u32,
    ) {
        let tr = if min == 0 { TimeRange::ALL } else { TimeRange { min, max: min + width } };
        run(ops, tr, versions);
    }
}
