//! Drives workers against the server: closed loop, open loop, and the load phase.
//!
//! # Invariants
//! 1. One worker = one task = one keep-alive connection = at most one request in flight.
//! 2. Closed loop: a worker issues its next operation as soon as the previous one returns;
//!    latency is measured from the send.
//! 3. Open loop: operation `i` is *intended* to start at `start + i / rate`. A worker takes the
//!    next slot and, if it is early, sleeps until [`EARLY_WAKE`] before the intended time and
//!    sends. Latency is measured from the earlier of the intended time and the send: a late
//!    start (every connection busy during a stall) is charged in full (no coordinated omission),
//!    and an early one is measured from its own send, never from a time before it. Slots are
//!    never skipped to "catch up". Sends later than [`EARLY_WAKE`] after their slot are counted
//!    (`late_start`): many of them mean the server, or this client, fell behind the schedule.
//! 4. A phase ends at whichever comes first: `duration` elapsed or `ops` operations issued.
//! 5. With several servers, worker `i` starts on server `i mod N`; with [`Spread::Request`] each
//!    of its requests goes to the next server in turn, with [`Spread::Connection`] all of them
//!    go to that one server.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::client::Conn;
use crate::cpu::{CpuPerOp, CpuSample};
use crate::error::{LoadError, Result};
use crate::stats::{Outcome, Recorder, Summary};
use crate::workload::{Worker, Workload};

/// How early an open-loop worker wakes for its slot. Tokio's timer rounds a deadline up to its
/// next 1 ms tick, so sleeping to the exact intended time added 0.8 ms to the median of every
/// operation (measured: `health` at 18,000/s, p50 1.19 ms, 0.26 ms with the early wake).
pub const EARLY_WAKE: Duration = Duration::from_millis(1);

/// How operations are paced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Mode {
    /// N connections, each sending back to back.
    Closed,
    /// A fixed schedule of `rate` operations per second over the connections.
    Open {
        /// Target operations per second.
        rate: f64,
    },
}

/// How requests are spread over several servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    /// Each request of a worker goes to the next server in turn (a page walk's pages, a write
    /// and the read after it land on different servers).
    Request,
    /// Each worker keeps to one server (worker `i` on server `i mod N`).
    Connection,
}

/// Worker `idx`'s connection over `addrs` (invariant 5).
pub fn worker_conn(
    addrs: &[String],
    spread: Spread,
    idx: usize,
    timeout: Duration,
) -> Result<Conn> {
    match spread {
        Spread::Request => Conn::rotating(addrs, idx, timeout),
        Spread::Connection => {
            let addr = addrs
                .get(idx % addrs.len().max(1))
                .ok_or_else(|| LoadError::Args("no server address".into()))?;
            Conn::new(addr, timeout)
        }
    }
}

/// Bounds and shape of one phase.
#[derive(Debug, Clone)]
pub struct PhaseConfig {
    /// Label (`baseline`, `load`, `run`, ...).
    pub name: String,
    /// The servers (`host:port`), one or more.
    pub addrs: Vec<String>,
    /// How requests are spread over them.
    pub spread: Spread,
    /// Connections (= workers).
    pub connections: usize,
    /// Time bound.
    pub duration: Option<Duration>,
    /// Operation bound.
    pub ops: Option<u64>,
    /// Pacing.
    pub mode: Mode,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Show a progress bar.
    pub progress: bool,
    /// RNG seed.
    pub seed: u64,
    /// Set when the server is killed during the phase (`--kill-after`): workers report their
    /// first success after the kill to it, and back off briefly after a failed connection.
    pub watch: Option<Arc<KillWatch>>,
    /// The local processes serving `addrs`, when kura-load started them: the phase reports
    /// their CPU per operation (and its own); empty when they are not known.
    pub server_pids: Vec<u32>,
    /// The number of the phase's first worker (its workers are this and the next
    /// `connections - 1`): a phase that goes on with a workload an earlier phase drove gives
    /// its workers numbers of their own, as workloads keep per-worker sequences (an append
    /// workload's tokens) that a second worker of the same number would repeat.
    pub first_worker: usize,
}

/// When the server was killed and when the first operation sent after that succeeded.
#[derive(Debug)]
pub struct KillWatch {
    origin: Instant,
    /// Microseconds after `origin` plus one; 0 while it has not happened.
    killed_us: AtomicU64,
    first_ok_us: AtomicU64,
}

impl Default for KillWatch {
    fn default() -> Self {
        KillWatch::new()
    }
}

impl KillWatch {
    /// A watch whose times count from now.
    pub fn new() -> KillWatch {
        KillWatch {
            origin: Instant::now(),
            killed_us: AtomicU64::new(0),
            first_ok_us: AtomicU64::new(0),
        }
    }

    fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_micros() as u64 + 1
    }

    /// The server is being killed now.
    pub fn mark_kill(&self) -> Instant {
        let now = Instant::now();
        self.killed_us.store(self.us(now), Ordering::SeqCst);
        now
    }

    /// An operation sent at `sent` succeeded: the first one sent after the kill ends the outage.
    pub fn succeeded(&self, sent: Instant) {
        let killed = self.killed_us.load(Ordering::SeqCst);
        if killed == 0 || self.us(sent) <= killed {
            return;
        }
        let _ = self.first_ok_us.compare_exchange(
            0,
            self.us(Instant::now()),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }

    /// Time from the kill to the end of the first successful operation sent after it.
    pub fn recovery(&self) -> Option<Duration> {
        let (k, ok) = (
            self.killed_us.load(Ordering::SeqCst),
            self.first_ok_us.load(Ordering::SeqCst),
        );
        (k > 0 && ok > 0).then(|| Duration::from_micros(ok.saturating_sub(k)))
    }
}

/// The outcome of one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// Label.
    pub name: String,
    /// Pacing used.
    pub mode: Mode,
    /// Connections used.
    pub connections: usize,
    /// What was measured.
    pub summary: Summary,
    /// The server's log fsyncs during the phase (from `/metrics`, when it serves them).
    #[serde(default)]
    pub server_fsyncs: Option<ServerFsyncs>,
    /// CPU time per completed operation of the servers (when kura-load started them) and of
    /// kura-load.
    #[serde(default)]
    pub cpu: Option<CpuPerOp>,
}

/// Log fsyncs a Kura server made during a phase: how many, and how many took over 10 ms (disk
/// stalls; every write waiting on one waits with it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ServerFsyncs {
    pub fsyncs: u64,
    pub slow: u64,
}

/// `kura_region_fsyncs_total` and `kura_region_fsyncs_slow_total` summed over every region of
/// every server, or `None` if a server has no such `/metrics` (another server, an older Kura,
/// the Bigtable backend).
async fn scrape_fsyncs(addrs: &[String], timeout: Duration) -> Option<(f64, f64)> {
    let mut sum = (0.0, 0.0);
    for addr in addrs {
        let mut conn = Conn::new(addr, timeout).ok()?;
        let resp = conn.get("/metrics").await.ok()?;
        if resp.status != 200 {
            return None;
        }
        let text = String::from_utf8_lossy(&resp.body);
        sum.0 += metric_sum(&text, "kura_region_fsyncs_total")?;
        sum.1 += metric_sum(&text, "kura_region_fsyncs_slow_total")?;
    }
    Some(sum)
}

/// The sum of every sample of metric `name` in a Prometheus text exposition (`None` if absent
/// or unreadable).
fn metric_sum(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue; // another metric whose name starts with this one
        }
        let value = rest.rsplit(' ').next()?.parse::<f64>().ok()?;
        *found.get_or_insert(0.0) += value;
    }
    found
}

fn progress_bar(cfg: &PhaseConfig) -> ProgressBar {
    if !cfg.progress {
        return ProgressBar::hidden();
    }
    let (len, unit) = match (cfg.ops, cfg.duration) {
        (Some(n), None) => (n, "ops"),
        (_, Some(d)) => (d.as_millis() as u64, "ms"),
        (None, None) => (0, "ops"),
    };
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr_with_hz(4));
    let template =
        format!("{{prefix:>9}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit} {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style);
    }
    pb.set_prefix(cfg.name.clone());
    pb
}

/// Run one phase of `workload` and merge every worker's recorder.
pub async fn run_phase(cfg: &PhaseConfig, workload: Arc<Workload>) -> Result<PhaseResult> {
    if cfg.connections == 0 {
        return Err(LoadError::Args("--connections must be at least 1".into()));
    }
    if cfg.duration.is_none() && cfg.ops.is_none() {
        return Err(LoadError::Args("give --duration or --ops".into()));
    }
    let (dist, keys) = workload.distribution();
    let issued = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // Before the clock starts: the scrape must not delay the phase's first operations.
    let fsyncs_before = scrape_fsyncs(&cfg.addrs, cfg.timeout).await;
    let cpu_before = CpuSample::take(&cfg.server_pids);
    let start = Instant::now();
    let deadline = cfg.duration.map(|d| start + d);
    let pb = progress_bar(cfg);
    let mut handles = Vec::with_capacity(cfg.connections);
    for idx in 0..cfg.connections {
        let workload = workload.clone();
        let (issued, done, errors, stop) =
            (issued.clone(), done.clone(), errors.clone(), stop.clone());
        let mut conn = worker_conn(&cfg.addrs, cfg.spread, idx, cfg.timeout)?;
        let mut worker = Worker::new(cfg.first_worker + idx, cfg.seed, dist, keys);
        let (mode, max_ops) = (cfg.mode, cfg.ops);
        let watch = cfg.watch.clone();
        handles.push(tokio::spawn(async move {
            let mut rec = Recorder::new();
            loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let slot = issued.fetch_add(1, Ordering::Relaxed);
                if max_ops.is_some_and(|m| slot >= m) {
                    break;
                }
                let intended = match mode {
                    Mode::Closed => None,
                    Mode::Open { rate } => {
                        Some(start + Duration::from_secs_f64(slot as f64 / rate))
                    }
                };
                if let (Some(t), Some(d)) = (intended, deadline) {
                    if t >= d {
                        break;
                    }
                }
                // Closed loop stops at the deadline; open loop drains every slot scheduled
                // before it (invariant 3: a backlog is latency, not something to drop).
                if intended.is_none() && deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                if let Some(t) = intended {
                    tokio::time::sleep_until(t.checked_sub(EARLY_WAKE).unwrap_or(t).into()).await;
                }
                let sent = Instant::now();
                if intended.is_some_and(|t| sent > t + EARLY_WAKE) {
                    rec.count("late_start", 1);
                }
                let op = workload.op(&mut worker, &mut conn, &mut rec).await;
                let now = Instant::now();
                let latency = now - intended.map_or(sent, |t| t.min(sent));
                rec.record(op.kind, latency, now - start, op.outcome, op.rows);
                done.fetch_add(1, Ordering::Relaxed);
                if op.outcome != Outcome::Ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(w) = &watch {
                    match op.outcome {
                        Outcome::Ok => w.succeeded(sent),
                        // The server is down: a connection refused comes back at once, and
                        // spinning on it would take the CPU the restarting server needs.
                        Outcome::Transport | Outcome::Timeout => {
                            tokio::time::sleep(Duration::from_millis(5)).await
                        }
                        _ => {}
                    }
                }
            }
            rec
        }));
    }
    // Progress ticker; also the place that notices the deadline for sleeping workers.
    let ticker = {
        let (done, errors, pb) = (done.clone(), errors.clone(), pb.clone());
        let ops_bound = cfg.ops.is_some() && cfg.duration.is_none();
        tokio::spawn(async move {
            let mut last = (Instant::now(), 0u64);
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let n = done.load(Ordering::Relaxed);
                let now = Instant::now();
                let rate = (n - last.1) as f64 / (now - last.0).as_secs_f64().max(1e-6);
                last = (now, n);
                pb.set_position(if ops_bound {
                    n
                } else {
                    start.elapsed().as_millis() as u64
                });
                pb.set_message(format!(
                    "{n} ops, {rate:.0} ops/s, {} errors",
                    errors.load(Ordering::Relaxed)
                ));
            }
        })
    };
    let mut total = Recorder::new();
    for h in handles {
        match h.await {
            Ok(rec) => total.merge(&rec),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                ticker.abort();
                return Err(LoadError::Http(format!("worker task failed: {e}")));
            }
        }
    }
    let cpu_after = CpuSample::take(&cfg.server_pids);
    let mut elapsed = start.elapsed();
    if let (Mode::Closed, Some(d)) = (cfg.mode, cfg.duration) {
        // A closed loop sends nothing after its deadline; the requests still in flight then
        // (at most one per connection) may take up to the timeout, which must not stretch the
        // time the throughput is divided by.
        elapsed = elapsed.min(d);
    }
    ticker.abort();
    pb.finish_and_clear();
    let server_fsyncs = match (fsyncs_before, scrape_fsyncs(&cfg.addrs, cfg.timeout).await) {
        (Some((f0, s0)), Some((f1, s1))) => Some(ServerFsyncs {
            fsyncs: (f1 - f0).max(0.0) as u64,
            slow: (s1 - s0).max(0.0) as u64,
        }),
        _ => None,
    };
    let summary = total.summary(elapsed);
    let cpu = cpu_before.per_op(&cpu_after, summary.ops);
    Ok(PhaseResult {
        name: cfg.name.clone(),
        mode: cfg.mode,
        connections: cfg.connections,
        summary,
        server_fsyncs,
        cpu,
    })
}

/// Load `rows` rows in batches of `batch` over `connections` workers.
pub async fn load_phase(
    cfg: &PhaseConfig,
    workload: Arc<Workload>,
    rows: u64,
    batch: u64,
) -> Result<PhaseResult> {
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let pb = if cfg.progress {
        let pb = ProgressBar::with_draw_target(Some(rows), ProgressDrawTarget::stderr_with_hz(4));
        if let Ok(s) = ProgressStyle::with_template(
            "{prefix:>9} [{elapsed_precise}] {bar:30} {pos}/{len} rows",
        ) {
            pb.set_style(s);
        }
        pb.set_prefix(cfg.name.clone());
        pb
    } else {
        ProgressBar::hidden()
    };
    let batch = batch.max(1);
    let mut handles = Vec::new();
    for idx in 0..cfg.connections {
        let (workload, next, done, pb) = (workload.clone(), next.clone(), done.clone(), pb.clone());
        let mut conn = worker_conn(&cfg.addrs, cfg.spread, idx, cfg.timeout)?;
        let mut worker = Worker::new(idx, cfg.seed, crate::keygen::Distribution::Uniform, 1);
        handles.push(tokio::spawn(async move {
            let mut rec = Recorder::new();
            let mut first_error: Option<LoadError> = None;
            loop {
                let from = next.fetch_add(batch, Ordering::Relaxed);
                if from >= rows {
                    break;
                }
                let to = (from + batch).min(rows);
                let (path, body) = workload.load_batch(&mut worker, from, to);
                let sent = Instant::now();
                let r = conn.put_json(&path, body).await;
                let now = Instant::now();
                let outcome = crate::workload::judge(&r, &[200]);
                rec.record("load_batch", now - sent, now - start, outcome, to - from);
                if outcome != Outcome::Ok && first_error.is_none() {
                    first_error = Some(match r {
                        Ok(resp) => LoadError::Setup {
                            step: format!("load rows {from}..{to}"),
                            status: resp.status,
                            body: resp.body_snippet(),
                        },
                        Err(e) => e,
                    });
                }
                pb.set_position(done.fetch_add(to - from, Ordering::Relaxed) + (to - from));
            }
            (rec, first_error)
        }));
    }
    let mut total = Recorder::new();
    for h in handles {
        let (rec, err) = h
            .await
            .map_err(|e| LoadError::Http(format!("load task failed: {e}")))?;
        if let Some(e) = err {
            pb.finish_and_clear();
            return Err(e);
        }
        total.merge(&rec);
    }
    pb.finish_and_clear();
    Ok(PhaseResult {
        name: cfg.name.clone(),
        mode: Mode::Closed,
        connections: cfg.connections,
        summary: total.summary(start.elapsed()),
        server_fsyncs: None,
        cpu: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A bare HTTP/1.1 responder whose first answer to the workload is delayed by `stall`
    /// (`/metrics`, which the runner scrapes around a phase, is answered at once).
    async fn stalling_server(stall: Duration) -> String {
        counting_server(stall, Arc::new(AtomicU64::new(0))).await
    }

    /// [`stalling_server`] that also counts the workload's requests in `hits`.
    async fn counting_server(stall: Duration, hits: Arc<AtomicU64>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let first = Arc::new(AtomicBool::new(true));
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (first, hits) = (first.clone(), hits.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let n = match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let scrape = buf.starts_with(b"GET /metrics ");
                            buf.drain(..end + 4);
                            if !scrape {
                                hits.fetch_add(1, Ordering::SeqCst);
                            }
                            if !scrape && first.swap(false, Ordering::SeqCst) {
                                tokio::time::sleep(stall).await;
                            }
                            let resp = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if sock.write_all(resp).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    fn config(addr: String, mode: Mode) -> PhaseConfig {
        PhaseConfig {
            name: "t".into(),
            addrs: vec![addr],
            spread: Spread::Request,
            connections: 1,
            duration: Some(Duration::from_secs(1)),
            ops: None,
            mode,
            timeout: Duration::from_secs(5),
            progress: false,
            seed: 1,
            watch: None,
            server_pids: Vec::new(),
            first_worker: 0,
        }
    }

    #[tokio::test]
    async fn open_loop_charges_a_stall_to_every_operation_scheduled_during_it() {
        let addr = stalling_server(Duration::from_millis(500)).await;
        let cfg = config(addr, Mode::Open { rate: 200.0 });
        let r = run_phase(&cfg, Arc::new(Workload::Health))
            .await
            .expect("run");
        // Every slot scheduled before the deadline is sent: 200/s for 1 s.
        assert_eq!(r.summary.ops, 200);
        assert_eq!(r.summary.errors, 0);
        // ~100 operations were due during the 500 ms stall; measured from their intended
        // start, the top 10% must all show at least half the stall.
        assert!(
            r.summary.latency.p90_us >= 250_000,
            "stall hidden: {:?}",
            r.summary.latency
        );
        // The one connection was busy through the stall, so those operations started late.
        let late = r.summary.counters.get("late_start").copied().unwrap_or(0);
        assert!(late >= 50, "late starts not counted: {late}");
    }

    #[tokio::test]
    async fn an_operation_bound_stops_the_phase_exactly() {
        let addr = stalling_server(Duration::ZERO).await;
        let mut cfg = config(addr, Mode::Closed);
        cfg.duration = None;
        cfg.ops = Some(123);
        cfg.connections = 3;
        let r = run_phase(&cfg, Arc::new(Workload::Health))
            .await
            .expect("run");
        assert_eq!(r.summary.ops, 123);
        assert_eq!(r.summary.kinds["health"].ops, 123);
    }

    #[tokio::test]
    async fn requests_spread_over_every_server() {
        for (spread, connections) in [(Spread::Request, 1), (Spread::Connection, 2)] {
            let hits = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
            let mut cfg = config(String::new(), Mode::Closed);
            cfg.addrs = vec![
                counting_server(Duration::ZERO, hits[0].clone()).await,
                counting_server(Duration::ZERO, hits[1].clone()).await,
            ];
            cfg.spread = spread;
            cfg.connections = connections;
            cfg.duration = None;
            cfg.ops = Some(100);
            let r = run_phase(&cfg, Arc::new(Workload::Health))
                .await
                .expect("run");
            assert_eq!(r.summary.ops, 100);
            let (a, b) = (
                hits[0].load(Ordering::SeqCst),
                hits[1].load(Ordering::SeqCst),
            );
            assert_eq!(a + b, 100, "{spread:?}");
            // One connection alternating, or two connections one per server: both get some.
            assert!(a >= 10 && b >= 10, "{spread:?}: {a} and {b}");
        }
    }

    #[test]
    fn metric_sum_adds_every_region_and_ignores_longer_names() {
        let text = "# HELP kura_region_fsyncs_total Log fsyncs.\n\
                    kura_region_fsyncs_total{table=\"t\",region=\"1\"} 3\n\
                    kura_region_fsyncs_total{table=\"t\",region=\"2\"} 4\n\
                    kura_region_fsyncs_slow_total{table=\"t\",region=\"1\"} 1\n";
        assert_eq!(metric_sum(text, "kura_region_fsyncs_total"), Some(7.0));
        assert_eq!(metric_sum(text, "kura_region_fsyncs_slow_total"), Some(1.0));
        assert_eq!(metric_sum(text, "kura_region_flushes_total"), None);
    }
}

#[cfg(test)]
mod watch_tests {
    use super::*;

    #[test]
    fn only_an_operation_sent_after_the_kill_ends_the_outage() {
        let w = KillWatch::new();
        let before = Instant::now();
        w.succeeded(before);
        assert_eq!(w.recovery(), None, "no kill yet");
        std::thread::sleep(Duration::from_millis(2));
        w.mark_kill();
        w.succeeded(before);
        assert_eq!(w.recovery(), None, "sent before the kill");
        std::thread::sleep(Duration::from_millis(2));
        w.succeeded(Instant::now());
        let first = w.recovery().expect("recovered");
        std::thread::sleep(Duration::from_millis(2));
        w.succeeded(Instant::now());
        assert_eq!(w.recovery(), Some(first), "the first success counts");
    }
}
