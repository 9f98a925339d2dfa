//! The disk's own fsync latency, measured beside a run (`kura-load --disk-probe DIR`).
//!
//! In `sync` durability a write is acknowledged after its log's fsync, so no server can answer
//! a write faster than the disk fsyncs, and the disk's fsync tail is the floor of a write
//! workload's tail. The probe appends 4 KiB to a file in `DIR` and `fdatasync`s it, again and
//! again, for the given time: a log's pattern with nothing else around it. Run it on the file
//! system of the server's data directory; the file is deleted afterwards.
//!
//! # Invariants
//! 1. The probe runs alone (before the run's phases), so it measures the disk, not the server.
//! 2. Latencies are the `fdatasync` call alone, in microseconds, in an HdrHistogram.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// What the probe measured.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DiskProbe {
    /// Directory probed.
    pub dir: String,
    /// Seconds probed.
    pub seconds: f64,
    /// fsyncs made.
    pub fsyncs: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// fsyncs that took more than 10 ms (each one stalls every write waiting on it).
    pub over_10ms: u64,
}

/// Append-and-fdatasync 4 KiB in a fresh file of `dir` for `duration`.
pub fn fsync_probe(dir: &Path, duration: Duration) -> std::io::Result<DiskProbe> {
    let path = dir.join(format!(".kura-load-probe-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let block = vec![0x5au8; 4096];
    let started = Instant::now();
    let mut over_10ms = 0;
    let result = (|| {
        while started.elapsed() < duration {
            file.write_all(&block)?;
            let t = Instant::now();
            file.sync_data()?;
            let us = t.elapsed().as_micros() as u64;
            over_10ms += u64::from(us > 10_000);
            hist.saturating_record(us.max(1));
        }
        Ok::<(), std::io::Error>(())
    })();
    drop(file);
    let _ = std::fs::remove_file(&path);
    result?;
    Ok(DiskProbe {
        dir: dir.display().to_string(),
        seconds: started.elapsed().as_secs_f64(),
        fsyncs: hist.len(),
        p50_us: hist.value_at_quantile(0.5),
        p99_us: hist.value_at_quantile(0.99),
        p999_us: hist.value_at_quantile(0.999),
        max_us: hist.max(),
        over_10ms,
    })
}

impl DiskProbe {
    /// One markdown line.
    pub fn describe(&self) -> String {
        format!(
            "disk ({} fdatasyncs of 4 KiB appends in `{}` over {:.0} s, before the run): \
             p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms; {} over 10 ms",
            self.fsyncs,
            self.dir,
            self.seconds,
            self.p50_us as f64 / 1000.0,
            self.p99_us as f64 / 1000.0,
            self.p999_us as f64 / 1000.0,
            self.max_us as f64 / 1000.0,
            self.over_10ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_measures_fsyncs_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = fsync_probe(dir.path(), Duration::from_millis(200)).unwrap();
        assert!(p.fsyncs > 0);
        assert!(p.p50_us <= p.p99_us && p.p99_us <= p.max_us);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(p.describe().contains("fdatasyncs"));
    }
}
