//! Kura's HTTP load generator (`kura-load`) and the shared pieces of its benches.
//!
//! # Layout
//! - `cli.rs`: the command line and what one invocation does (ceiling and baseline → load →
//!   run → rounds → check).
//! - `client.rs`: keep-alive HTTP/1.1 client, one connection per worker (hyper 1).
//! - `runner.rs`: closed-loop and open-loop drivers, the load phase, the progress bar.
//! - `stats.rs`: HdrHistogram bookkeeping and the per-second timeline.
//! - `keygen.rs`: YCSB key choosers (scrambled zipfian, uniform, latest).
//! - `cellset.rs`: building and reading HBase REST CellSet JSON.
//! - `workload/`: PE operations and scans, append / check-and-delete / check-and-mutate,
//!   YCSB A–F, the four apps, the acknowledged-write ledger; each with its correctness oracle.
//! - `report.rs`: `result.json`, `summary.md`, SVG charts, the sweep table.
//! - `server.rs`: starting a server binary on a free port for a run or a sweep.
//! - `probe.rs`: the disk's own fsync latency (`--disk-probe`), the floor of a synced write.
//! - `cpu.rs`: CPU time per operation of the servers kura-load started and of itself.
//!
//! # Invariants
//! 1. Latency is always measured from when the operation should have started: the send time
//!    in closed loop, the scheduled time in open loop (no coordinated omission).
//! 2. Every run measures `/healthz` with the same connections and bounds first, so its figures
//!    are stated as ratios to the HTTP ceiling of the same machine and server.
//! 3. A correctness failure makes the process exit non-zero (1); a run that could not be made
//!    exits 2.

pub mod cellset;
pub mod cli;
pub mod client;
pub mod cpu;
pub mod error;
pub mod keygen;
pub mod probe;
pub mod report;
pub mod runner;
pub mod server;
pub mod stats;
pub mod workload;

pub use error::{LoadError, Result};
