//! Workloads: what one operation is, how a table is prepared and loaded, and what is checked
//! at the end.
//!
//! # Layout
//! - `pe.rs`: HBase PerformanceEvaluation operations on `TestTable` (family `info`).
//! - `ycsb.rs`: YCSB core workloads A–F on `usertable` (family `f`, `field0..field9`).
//! - `cas.rs`: append, check-and-delete and check-and-mutate with their oracles.
//! - `durable.rs`: the ledger of acknowledged writes read back at the end (`--kill-after`).
//! - `apps.rs`: the four applications under `/apps/` with their correctness oracles.
//!
//! # Invariants
//! 1. `op` performs exactly one logical operation (YCSB's read-modify-write counts as one) and
//!    reports its kind, outcome and rows; the runner times it.
//! 2. A workload never reads a key before the load phase or an acknowledged insert wrote it,
//!    so a 404 on a read is an error, never an expected miss.
//! 3. `verify` only passes when every server's final state equals what the acknowledged
//!    operations imply; an operation whose outcome is unknown (timeout, broken connection)
//!    widens the accepted range instead of being assumed either way.

pub mod apps;
pub mod cas;
pub mod durable;
pub mod pe;
pub mod ycsb;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::client::{Conn, Resp};
use crate::error::{LoadError, Result};
use crate::keygen::{Distribution, KeyChooser};
use crate::stats::{Outcome, Recorder};

/// The workloads the CLI offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadName {
    /// `GET /healthz` only: the HTTP ceiling of this machine.
    Health,
    /// PE sequentialWrite: one cell per row, keys in order.
    #[value(alias = "sequentialWrite")]
    SequentialWrite,
    /// PE randomWrite: one cell per row, random keys.
    #[value(alias = "randomWrite")]
    RandomWrite,
    /// PE sequentialRead: one-cell GETs in key order.
    #[value(alias = "sequentialRead")]
    SequentialRead,
    /// PE randomRead: one-cell GETs of random keys.
    #[value(alias = "randomRead")]
    RandomRead,
    /// PE randomRead with `--multiGet`: one multiget of `--multiget` random rows.
    #[value(alias = "multiGet")]
    MultiGet,
    /// PE scanRange10: stateless scan of 10 rows from a random start.
    #[value(alias = "scanRange10")]
    Scan10,
    /// PE scanRange100.
    #[value(alias = "scanRange100")]
    Scan100,
    /// PE scanRange1000.
    #[value(alias = "scanRange1000")]
    Scan1000,
    /// Prefix scan `GET /TestTable/{prefix}*`: the 100 keys sharing their first 24 digits.
    PrefixScan,
    /// Reverse scan `GET /TestTable/*?startrow=..&reversed=true&limit=100`.
    ReverseScan,
    /// Filtered scan: `RowFilter` (keys ending in 0 or 5) and `QualifierFilter` (`info:0`)
    /// over a 500-key range.
    FilteredScan,
    /// PE increment: `check=increment` of one counter column on overlapping keys.
    Increment,
    /// PE checkAndPut: `check=put` that always matches (the value it compares is the row key).
    #[value(alias = "checkAndPut")]
    CheckAndPut,
    /// `check=append` of unique tokens; every acknowledged token must be in its row once.
    Append,
    /// Leases claimed with `check=put` and released with `check=delete` (a delete checked on
    /// a value never written must fail).
    CheckAndDelete,
    /// Compare-and-set loops: a multi-cell `check=put` of a generation and two cells; retries
    /// per loop are reported.
    CheckAndMutate,
    /// Unique one-row PUTs kept in a ledger and read back in full at the end: with
    /// `--kill-after`, no acknowledged write may be lost across the kill and restart.
    DurableWrite,
    /// YCSB A: 50% read / 50% update, zipfian.
    YcsbA,
    /// YCSB B: 95% read / 5% update, zipfian.
    YcsbB,
    /// YCSB C: 100% read, zipfian.
    YcsbC,
    /// YCSB D: 95% read / 5% insert, latest.
    YcsbD,
    /// YCSB E: 95% scan (1..=100 rows) / 5% insert, zipfian.
    YcsbE,
    /// YCSB F: 50% read / 50% read-modify-write, zipfian.
    YcsbF,
    /// Blog: post articles and read pages; pages must never skip or repeat.
    Blog,
    /// User action log: record actions and read pages with offset; counts must match.
    Actions,
    /// Access counter: zipfian hot URLs; totals must equal the hits sent.
    Counter,
    /// Graph: CAS storm of PATCH/DELETE/re-create on one relationship; adjacency must match.
    Graph,
}

impl WorkloadName {
    /// The CLI spelling.
    pub fn as_str(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// One of the four applications, whose tables the server creates with its own layout
    /// (`--regions` and the region sweep do not apply to them).
    pub fn is_application(self) -> bool {
        matches!(
            self,
            WorkloadName::Blog
                | WorkloadName::Actions
                | WorkloadName::Counter
                | WorkloadName::Graph
        )
    }
}

/// Workload knobs from the command line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// PE: rows loaded / key space.
    pub rows: u64,
    /// PE: value bytes per cell.
    pub value_size: usize,
    /// PE: rows per multiget.
    pub multiget: usize,
    /// YCSB: records loaded (`recordcount`).
    pub records: u64,
    /// YCSB: field length (`fieldlength`).
    pub field_length: usize,
    /// Override of the workload's key distribution.
    pub distribution: Option<Distribution>,
    /// Regions to create the table with (`KURA_REGIONS`); `None` = server default.
    pub regions: Option<u32>,
    /// Skip table creation and loading (reuse what a previous run loaded).
    pub no_load: bool,
    /// Rows per PUT in the load phase.
    pub load_batch: usize,
    /// Operations the run is expected to make (sizes YCSB's zipfian key space for inserts).
    pub expected_ops: u64,
    /// Apps: users (blog, actions).
    pub users: u64,
    /// Counter: distinct URLs.
    pub urls: u64,
    /// Counter: sites the URLs are spread over.
    pub sites: u64,
    /// Graph: relationships in the storm.
    pub edges: u64,
    /// Counter: hits carry a time spread over this many hours before now (0: now).
    #[serde(default)]
    pub counter_hours: u64,
    /// check-and-delete / check-and-mutate: rows (leases, generations) contended for.
    #[serde(default)]
    pub cas_rows: u64,
    /// Unique tag of this run, used to keep app data of different runs apart.
    pub nonce: u64,
}

/// What one operation did.
#[derive(Debug, Clone, Copy)]
pub struct Op {
    /// Operation kind for the per-kind histogram.
    pub kind: &'static str,
    /// How it ended.
    pub outcome: Outcome,
    /// Rows it returned (scans, multigets, pages).
    pub rows: u64,
}

impl Op {
    /// An op of `kind` judged by `resp` against the expected statuses.
    pub fn judged(kind: &'static str, resp: &Result<Resp>, ok: &[u16]) -> Op {
        Op {
            kind,
            outcome: judge(resp, ok),
            rows: 0,
        }
    }
}

/// The outcome of a response given the statuses that mean success.
pub fn judge(resp: &Result<Resp>, ok: &[u16]) -> Outcome {
    match resp {
        Ok(r) if ok.contains(&r.status) => Outcome::Ok,
        Ok(r) => Outcome::Status(r.status),
        Err(LoadError::Timeout(_)) => Outcome::Timeout,
        Err(_) => Outcome::Transport,
    }
}

/// Per-worker state: its own RNG, key chooser and value bytes.
pub struct Worker {
    /// Worker index (0-based).
    pub idx: usize,
    /// Worker-private RNG.
    pub rng: SmallRng,
    /// Key chooser for this workload's distribution.
    pub chooser: KeyChooser,
    /// Random printable bytes; values are slices of it.
    pub noise: Vec<u8>,
    /// Per-worker sequence number.
    pub seq: u64,
}

impl Worker {
    /// A worker with a deterministic seed.
    pub fn new(idx: usize, seed: u64, dist: Distribution, expected_keys: u64) -> Worker {
        let mut rng =
            SmallRng::seed_from_u64(seed ^ (idx as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let noise = (0..8192).map(|_| rng.gen_range(b' '..=b'~')).collect();
        Worker {
            idx,
            rng,
            chooser: KeyChooser::new(dist, expected_keys),
            noise,
            seq: 0,
        }
    }

    /// `len` random printable bytes.
    pub fn value(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.noise.len());
        let start = self.rng.gen_range(0..=self.noise.len() - len);
        &self.noise[start..start + len]
    }
}

/// What the end-of-run check found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// Whether this workload has a correctness check.
    pub checked: bool,
    /// Every failed assertion, in words.
    pub failures: Vec<String>,
    /// What was checked, in words (counts compared etc.).
    pub notes: Vec<String>,
}

impl Verification {
    /// True when nothing failed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// What operations found wrong during the run phase, for the end-of-run check: every one
/// counted, the first [`RunFailures::KEPT`] kept in words.
#[derive(Debug, Default)]
pub(crate) struct RunFailures {
    kept: std::sync::Mutex<Vec<String>>,
    count: std::sync::atomic::AtomicU64,
}

impl RunFailures {
    /// Failures kept in words (more are counted, not stored).
    const KEPT: usize = 20;

    pub(crate) fn note(&self, msg: String) {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < Self::KEPT {
            kept.push(msg);
        }
    }

    /// Add them to `v`'s failures, after a line `"{count} {what}:"`; nothing if there were none.
    pub(crate) fn report(&self, what: &str, v: &mut Verification) {
        let n = self.count.load(std::sync::atomic::Ordering::Relaxed);
        if n == 0 {
            return;
        }
        v.failures.push(format!("{n} {what}:"));
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        v.failures.extend(kept.iter().cloned());
    }
}

/// The prefix that names each server in a check's words (`"[addr] "`), empty for one server.
pub(crate) fn server_tags(conns: &[Conn]) -> Vec<String> {
    if conns.len() < 2 {
        return vec![String::new(); conns.len()];
    }
    conns.iter().map(|c| format!("[{}] ", c.addr())).collect()
}

/// Read rows `keys` of `table` back from one server, 100 to a multiget; rows it does not have
/// are left out.
pub(crate) async fn read_rows(
    conn: &mut Conn,
    table: &str,
    keys: &[&str],
) -> Result<Vec<crate::cellset::RowCells>> {
    use std::fmt::Write as _;
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(100) {
        let mut path = format!("/{table}/multiget");
        for (n, k) in chunk.iter().enumerate() {
            let _ = write!(path, "{}row={k}", if n == 0 { '?' } else { '&' });
        }
        let r = conn.get(&path).await?;
        match r.status {
            200 => out.extend(crate::cellset::rows_with_cells(&r.body)?),
            404 => {}
            s => {
                return Err(LoadError::Setup {
                    step: format!("read back {table}"),
                    status: s,
                    body: r.body_snippet(),
                })
            }
        }
    }
    Ok(out)
}

/// A prepared workload.
pub enum Workload {
    /// `GET /healthz`.
    Health,
    /// PerformanceEvaluation.
    Pe(pe::Pe),
    /// YCSB core.
    Ycsb(ycsb::Ycsb),
    /// Blog application.
    Blog(apps::Blog),
    /// Action log application.
    Actions(apps::Actions),
    /// Access counter application.
    Counter(apps::Counter),
    /// Graph application.
    Graph(apps::Graph),
    /// Append, check-and-delete, check-and-mutate.
    Cas(cas::Cas),
    /// The acknowledged-write ledger.
    Durable(durable::Durable),
}

impl Workload {
    /// Build the workload `name` with `params`.
    pub fn new(name: WorkloadName, params: &Params) -> Workload {
        use WorkloadName as W;
        match name {
            W::Health => Workload::Health,
            W::SequentialWrite
            | W::RandomWrite
            | W::SequentialRead
            | W::RandomRead
            | W::MultiGet
            | W::Scan10
            | W::Scan100
            | W::Scan1000
            | W::Increment
            | W::CheckAndPut
            | W::PrefixScan
            | W::ReverseScan
            | W::FilteredScan => Workload::Pe(pe::Pe::new(name, params)),
            W::YcsbA | W::YcsbB | W::YcsbC | W::YcsbD | W::YcsbE | W::YcsbF => {
                Workload::Ycsb(ycsb::Ycsb::new(name, params))
            }
            W::Append | W::CheckAndDelete | W::CheckAndMutate => {
                Workload::Cas(cas::Cas::new(name, params))
            }
            W::DurableWrite => Workload::Durable(durable::Durable::new(params)),
            W::Blog => Workload::Blog(apps::Blog::new(params)),
            W::Actions => Workload::Actions(apps::ListApp::new_actions(params)),
            W::Counter => Workload::Counter(apps::Counter::new(params)),
            W::Graph => Workload::Graph(apps::Graph::new(params)),
        }
    }

    /// Create tables and seed data the run phase needs (not the bulk load).
    pub async fn prepare(&self, conn: &mut Conn) -> Result<()> {
        match self {
            Workload::Health => Ok(()),
            Workload::Pe(w) => w.prepare(conn).await,
            Workload::Ycsb(w) => w.prepare(conn).await,
            Workload::Blog(_) | Workload::Actions(_) | Workload::Counter(_) => Ok(()),
            Workload::Graph(w) => w.prepare(conn).await,
            Workload::Cas(w) => w.prepare(conn).await,
            Workload::Durable(w) => w.prepare(conn).await,
        }
    }

    /// Rows the load phase must write before the run (0 = no load phase).
    pub fn load_rows(&self) -> u64 {
        match self {
            Workload::Pe(w) => w.load_rows(),
            Workload::Ycsb(w) => w.load_rows(),
            _ => 0,
        }
    }

    /// Path and body of the load batch covering key numbers `from..to`.
    pub fn load_batch(&self, w: &mut Worker, from: u64, to: u64) -> (String, String) {
        match self {
            Workload::Pe(p) => p.load_batch(w, from, to),
            Workload::Ycsb(y) => y.load_batch(w, from, to),
            _ => (String::from("/healthz"), String::new()),
        }
    }

    /// The key distribution workers use and the key space it spans.
    pub fn distribution(&self) -> (Distribution, u64) {
        match self {
            Workload::Pe(w) => (Distribution::Uniform, w.rows()),
            Workload::Ycsb(w) => w.distribution(),
            Workload::Counter(w) => (Distribution::Zipfian, w.urls()),
            _ => (Distribution::Uniform, 1),
        }
    }

    /// One operation.
    pub async fn op(&self, w: &mut Worker, conn: &mut Conn, rec: &mut Recorder) -> Op {
        match self {
            Workload::Health => {
                let r = conn.get("/healthz").await;
                Op::judged("health", &r, &[200])
            }
            Workload::Pe(p) => p.op(w, conn, rec).await,
            Workload::Ycsb(y) => y.op(w, conn, rec).await,
            Workload::Blog(b) => b.op(w, conn, rec).await,
            Workload::Actions(a) => a.op(w, conn, rec).await,
            Workload::Counter(c) => c.op(w, conn, rec).await,
            Workload::Graph(g) => g.op(w, conn, rec).await,
            Workload::Cas(c) => c.op(w, conn, rec).await,
            Workload::Durable(d) => d.op(w, conn, rec).await,
        }
    }

    /// The end-of-run correctness check, on every server of `conns` (one connection each).
    pub async fn verify(&self, conns: &mut [Conn]) -> Result<Verification> {
        match self {
            Workload::Health | Workload::Pe(_) | Workload::Ycsb(_) => Ok(Verification::default()),
            Workload::Blog(b) => b.verify(conns).await,
            Workload::Actions(a) => a.verify(conns).await,
            Workload::Counter(c) => c.verify(conns).await,
            Workload::Graph(g) => g.verify(conns).await,
            Workload::Cas(c) => c.verify(conns).await,
            Workload::Durable(d) => d.verify(conns).await,
        }
    }
}

/// Drop `table` if present and create it with `families` (and `KURA_REGIONS` if given).
pub async fn recreate_table(
    conn: &mut Conn,
    table: &str,
    families: &[&str],
    regions: Option<u32>,
) -> Result<()> {
    let r = conn.delete(&format!("/{table}/schema")).await?;
    if !matches!(r.status, 200 | 204 | 404) {
        return Err(LoadError::Setup {
            step: format!("drop table {table}"),
            status: r.status,
            body: r.body_snippet(),
        });
    }
    let fams: Vec<serde_json::Value> = families
        .iter()
        .map(|f| serde_json::json!({ "name": f }))
        .collect();
    let mut schema = serde_json::json!({ "name": table, "ColumnSchema": fams });
    if let Some(n) = regions {
        schema["KURA_REGIONS"] = serde_json::Value::String(n.to_string());
    }
    let r = conn
        .put_json(&format!("/{table}/schema"), schema.to_string())
        .await?;
    if !matches!(r.status, 200 | 201) {
        return Err(LoadError::Setup {
            step: format!("create table {table}"),
            status: r.status,
            body: r.body_snippet(),
        });
    }
    Ok(())
}

/// Fail with a setup error unless `resp` has one of the `ok` statuses.
pub fn expect_status(step: &str, resp: Result<Resp>, ok: &[u16]) -> Result<Resp> {
    let r = resp?;
    if ok.contains(&r.status) {
        Ok(r)
    } else {
        Err(LoadError::Setup {
            step: step.to_string(),
            status: r.status,
            body: r.body_snippet(),
        })
    }
}
