//! `Interval` durability: writes reach the OS at once and are fsynced when the interval is due.
mod common;
use common::*;
use kura_storage::*;
use std::time::Duration;

#[test]
fn interval_mode_defers_fsync_until_due() {
    let fs = SimFs::new();
    let mut opts = server_options(families());
    opts.durability = Durability::Interval(Duration::from_secs(3600));
    let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
    mutate(&mut s, "a", vec![put("one", "q", Some(1), "v")]);
    assert_eq!(s.stats().fsyncs, 0, "not due yet");
    s.sync_if_due().unwrap();
    assert_eq!(s.stats().fsyncs, 0);
    drop(s);
    fs.power_cut(None);
    let (s, _) = open_sim(&fs, opts).unwrap();
    assert!(
        s.get(b"a", &read(1)).unwrap().is_none(),
        "an unsynced write is lost by a power cut"
    );
}

#[test]
fn zero_interval_fsyncs_every_batch() {
    let fs = SimFs::new();
    let mut opts = server_options(families());
    opts.durability = Durability::Interval(Duration::ZERO);
    let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
    mutate(&mut s, "a", vec![put("one", "q", Some(1), "v")]);
    assert_eq!(s.stats().fsyncs, 1);
    assert_eq!(s.stats().synced_writes, 1);
    drop(s);
    fs.power_cut(None);
    let (s, _) = open_sim(&fs, opts).unwrap();
    assert!(s.get(b"a", &read(1)).unwrap().is_some());
}

#[test]
fn none_mode_survives_a_process_crash() {
    let fs = SimFs::new();
    let mut opts = server_options(families());
    opts.durability = Durability::None;
    let (mut s, _) = open_sim(&fs, opts.clone()).unwrap();
    mutate(&mut s, "a", vec![put("one", "q", Some(1), "v")]);
    assert_eq!(s.stats().fsyncs, 0);
    drop(s); // a kill -9 keeps what reached the OS
    let (s, _) = open_sim(&fs, opts).unwrap();
    assert!(s.get(b"a", &read(1)).unwrap().is_some());
}
