//! A torn log tail is cut off at the first bad frame, and writes made after that recovery
//! survive the next one.
mod common;
use common::*;
use kura_storage::*;
use std::path::{Path, PathBuf};

fn only_log(fs: &SimFs) -> PathBuf {
    let logs: Vec<_> = fs
        .list(Path::new("/region"))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    Path::new("/region").join(&logs[0])
}

fn write_rows(s: &mut RegionStore, from: usize, to: usize) {
    for i in from..to {
        mutate(
            s,
            &format!("r{i:03}"),
            vec![put("one", "q", Some(1), &format!("v{i}"))],
        );
    }
}

fn visible_rows(s: &RegionStore) -> Vec<String> {
    let page = s.scan(
        &ScanSpec::all(),
        ScanLimits {
            max_rows: 10_000,
            max_bytes: usize::MAX,
        },
    );
    page.unwrap()
        .rows
        .iter()
        .map(|r| String::from_utf8_lossy(&r.key).into_owned())
        .collect()
}

#[test]
fn truncated_log_recovers_a_prefix_and_later_writes_survive_a_second_recovery() {
    let fs = SimFs::new();
    {
        let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
        write_rows(&mut s, 0, 5);
    }
    let log = only_log(&fs);
    let good = fs.read_file(&log).unwrap();
    for cut in (8..good.len()).step_by(3) {
        let fs = SimFs::new();
        {
            let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
            write_rows(&mut s, 0, 5);
        }
        fs.write_file(&log, &good[..cut]).unwrap();
        let (mut s, report) = open_sim(&fs, server_options(families())).unwrap();
        let survivors = visible_rows(&s);
        let n = survivors.len();
        assert_eq!(
            survivors,
            (0..n).map(|i| format!("r{i:03}")).collect::<Vec<_>>(),
            "a prefix"
        );
        assert_eq!(
            report.log_bytes_replayed + report.bytes_dropped,
            cut as u64,
            "every byte is either replayed or reported dropped"
        );
        write_rows(&mut s, 100, 103);
        drop(s);
        let (s, report) = open_sim(&fs, server_options(families())).unwrap();
        assert_eq!(report.truncated_at, None, "the log was cut cleanly");
        let rows = visible_rows(&s);
        assert_eq!(rows.len(), n + 3, "writes after recovery survive: {rows:?}");
    }
}

#[test]
fn garbage_appended_to_the_log_is_dropped_and_reported() {
    let fs = SimFs::new();
    {
        let (mut s, _) = open_sim(&fs, server_options(families())).unwrap();
        write_rows(&mut s, 0, 3);
    }
    let log = only_log(&fs);
    let mut bytes = fs.read_file(&log).unwrap();
    let good_len = bytes.len() as u64;
    bytes.extend_from_slice(&[0xAB; 100]);
    fs.write_file(&log, &bytes).unwrap();
    let mut opts = server_options(families());
    opts.recovery = RecoveryMode::Strict;
    let (s, report) = open_sim(&fs, opts).unwrap();
    assert_eq!(report.truncated_at, Some(good_len));
    assert_eq!(report.bytes_dropped, 100);
    assert_eq!(visible_rows(&s).len(), 3);
    assert_eq!(
        fs.read_file(&log).unwrap().len() as u64,
        good_len,
        "the log was truncated"
    );
}
