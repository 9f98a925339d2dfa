//! Manifest damage: a flipped bit or a truncation anywhere in `MANIFEST` makes opening fail
//! with an `Error::Corruption` naming the manifest, in every recovery mode (without it the store
//! cannot know which files hold its data), never a panic, never an empty or wrong store.
mod common;
use common::*;
use kura_storage::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "/region";

/// A store with a segment (so the manifest lists one) and a few cells in the log, dropped.
/// Returns every file and the manifest's path.
fn fixture() -> (Vec<(PathBuf, Vec<u8>)>, PathBuf) {
    let fs = SimFs::new();
    let (mut s, _) = open_sim(&fs, server_options(families())).expect("open");
    mutate(&mut s, "a", vec![put("cf", "q", Some(1), "in-segment")]);
    s.flush().expect("flush");
    mutate(&mut s, "b", vec![put("one", "q", Some(2), "in-log")]);
    drop(s);
    let files: Vec<(PathBuf, Vec<u8>)> = fs
        .list(Path::new(DIR))
        .expect("list")
        .into_iter()
        .map(|n| {
            let p = Path::new(DIR).join(n);
            let b = fs.read_file(&p).expect("read");
            (p, b)
        })
        .collect();
    let manifest = Path::new(DIR).join("MANIFEST");
    assert!(files.iter().any(|(p, _)| *p == manifest), "{files:?}");
    (files, manifest)
}

fn open_with_manifest(
    files: &[(PathBuf, Vec<u8>)],
    manifest: &Path,
    bytes: &[u8],
    mode: RecoveryMode,
) -> Result<(RegionStore, RecoveryReport)> {
    let fs = SimFs::new();
    for (p, b) in files {
        fs.write_file(p, if p == manifest { bytes } else { b })
            .expect("write");
    }
    let mut opts = server_options(families());
    opts.recovery = mode;
    RegionStore::open_with_fs(Arc::new(fs), Path::new(DIR), opts)
}

fn assert_manifest_corruption(res: Result<(RegionStore, RecoveryReport)>, m: &Path, what: &str) {
    match res {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, m, "{what}"),
        Err(e) => panic!("{what}: expected a corruption of the manifest, got {e}"),
        Ok(_) => panic!("{what}: a damaged manifest was accepted"),
    }
}

#[test]
fn the_undamaged_fixture_opens_with_both_cells() {
    let (files, manifest) = fixture();
    let bytes = files
        .iter()
        .find(|(p, _)| *p == manifest)
        .expect("m")
        .1
        .clone();
    let (s, _) = open_with_manifest(&files, &manifest, &bytes, RecoveryMode::Strict).expect("open");
    assert_eq!(cells(&s, "a", &read(1)), vec![c("cf:q", 1, "in-segment")]);
    assert_eq!(cells(&s, "b", &read(1)), vec![c("one:q", 2, "in-log")]);
}

#[test]
fn every_bit_flip_in_the_manifest_is_a_corruption_error_naming_it() {
    let (files, manifest) = fixture();
    let good = files
        .iter()
        .find(|(p, _)| *p == manifest)
        .expect("m")
        .1
        .clone();
    for byte in 0..good.len() {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[byte] ^= 1 << bit;
            let what = format!("flip of bit {bit} of byte {byte} of {}", good.len());
            for mode in [RecoveryMode::PointInTime, RecoveryMode::Strict] {
                let res = open_with_manifest(&files, &manifest, &bad, mode);
                assert_manifest_corruption(res, &manifest, &what);
            }
        }
    }
}

#[test]
fn a_truncated_or_extended_manifest_is_a_corruption_error_naming_it() {
    let (files, manifest) = fixture();
    let good = files
        .iter()
        .find(|(p, _)| *p == manifest)
        .expect("m")
        .1
        .clone();
    for cut in 0..good.len() {
        let what = format!("manifest cut at {cut} of {}", good.len());
        let res = open_with_manifest(&files, &manifest, &good[..cut], RecoveryMode::PointInTime);
        assert_manifest_corruption(res, &manifest, &what);
    }
    for extra in [&[0u8][..], &[0xFF; 17][..]] {
        let mut bad = good.clone();
        bad.extend_from_slice(extra);
        let res = open_with_manifest(&files, &manifest, &bad, RecoveryMode::PointInTime);
        assert_manifest_corruption(res, &manifest, "bytes appended");
    }
}

/// A `MANIFEST` deleted from a store that has flushed fails the open, changing no file: opening
/// as new would delete the segments no manifest names and serve their rows as absent. Putting
/// the file back brings every cell back.
#[test]
fn a_missing_manifest_next_to_segments_fails_closed_and_deletes_nothing() {
    let (files, manifest) = fixture();
    let fs = SimFs::new();
    for (p, b) in files.iter().filter(|(p, _)| *p != manifest) {
        fs.write_file(p, b).expect("write");
    }
    let fs = Arc::new(fs);
    for mode in [RecoveryMode::PointInTime, RecoveryMode::Strict] {
        let mut opts = server_options(families());
        opts.recovery = mode;
        let res = RegionStore::open_with_fs(fs.clone(), Path::new(DIR), opts);
        assert_manifest_corruption(res, &manifest, "manifest deleted");
        for (p, b) in files.iter().filter(|(p, _)| *p != manifest) {
            assert_eq!(fs.read_file(p).ok().as_ref(), Some(b), "{p:?} changed");
        }
    }
    let good = &files.iter().find(|(p, _)| *p == manifest).expect("m").1;
    fs.write_file(&manifest, good).expect("restore");
    let (s, _) = RegionStore::open_with_fs(fs, Path::new(DIR), server_options(families()))
        .expect("open with the manifest restored");
    assert_eq!(cells(&s, "a", &read(1)), vec![c("cf:q", 1, "in-segment")]);
    assert_eq!(cells(&s, "b", &read(1)), vec![c("one:q", 2, "in-log")]);
}

/// The log the manifest names as its first live one, deleted: the open fails closed naming it,
/// changing nothing, instead of replaying the later logs (or none) and serving its writes as
/// absent. Putting it back brings every cell back.
#[test]
fn a_missing_first_live_log_fails_closed_and_deletes_nothing() {
    let (files, manifest) = fixture();
    let mut logs: Vec<&PathBuf> = files
        .iter()
        .map(|(p, _)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let first = logs[0].clone();
    let fs = SimFs::new();
    for (p, b) in files.iter().filter(|(p, _)| *p != first) {
        fs.write_file(p, b).expect("write");
    }
    let fs = Arc::new(fs);
    for mode in [RecoveryMode::PointInTime, RecoveryMode::Strict] {
        let mut opts = server_options(families());
        opts.recovery = mode;
        match RegionStore::open_with_fs(fs.clone(), Path::new(DIR), opts) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, first),
            Err(e) => panic!("expected a corruption naming {first:?}, got {e}"),
            Ok(_) => panic!("opened without its first live log"),
        }
        for (p, b) in files.iter().filter(|(p, _)| *p != first) {
            assert_eq!(fs.read_file(p).ok().as_ref(), Some(b), "{p:?} changed");
        }
        assert!(fs.read_file(&manifest).is_ok());
    }
    let lost = &files.iter().find(|(p, _)| *p == first).expect("log").1;
    fs.write_file(&first, lost).expect("restore");
    let (s, _) = RegionStore::open_with_fs(fs, Path::new(DIR), server_options(families()))
        .expect("open with the log restored");
    assert_eq!(cells(&s, "a", &read(1)), vec![c("cf:q", 1, "in-segment")]);
    assert_eq!(cells(&s, "b", &read(1)), vec![c("one:q", 2, "in-log")]);
}
