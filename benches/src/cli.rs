//! The `kura-load` command line and what one invocation does.
//!
//! One invocation: (optionally start a server) → the ceiling (a trivial actix-web server,
//! `kura-ceiling`, under the same load) → `/healthz` baseline with the same
//! connections and bounds → prepare tables → load phase → run phase (closed or open loop;
//! with `--half-peak` a closed run then an open run at half its throughput) → rounds (the
//! ceiling, `/healthz` and the run's workload in short slices, in turn: ratios the machine's
//! drift does not bend) → correctness check → the `/healthz` baseline and the ceiling again
//! (ratios use the mean of both) →
//! `result.json`,
//! `summary.md`, `chart.svg`. `--sweep regions` repeats all of it for each region count (and,
//! with `--spawn-server`, for each arbiter count).
//!
//! Several servers (`--target a,b`, or `--spawn-server` with `--servers N` on
//! `--spawn-backend bigtable`): every phase spreads its requests over all of them (`--spread`),
//! the table is prepared through the first, and the correctness check reads every server.
//!
//! Exit codes: 0 ok, 1 a correctness check failed, 2 the run could not be made.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;

use crate::error::{LoadError, Result};
use crate::keygen::Distribution;
use crate::report::{self, CrashReport, Machine, Ratio, RunResult, SweepPoint};
use crate::runner::{self, Mode, PhaseConfig, PhaseResult, Spread};
use crate::server::{wait_healthy, CeilingServer, Fleet, FleetSpec, SpawnBackend, SpawnedServer};
use crate::workload::{Params, Verification, Workload, WorkloadName};

/// Parse `10s`, `500ms`, `2m` or a bare number of seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("bad duration `{s}`"))?;
    if !n.is_finite() || n < 0.0 {
        return Err(format!("bad duration `{s}`"));
    }
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("bad duration unit in `{s}` (use ms, s, m, h)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// [`parse_duration`], above zero: a slice of `--rounds` must measure something.
fn parse_slice(s: &str) -> std::result::Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err(format!("a slice of `{s}` measures nothing")),
        d => Ok(d),
    }
}

/// What `--sweep` varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SweepKind {
    /// Region count of the table (and arbiters with `--spawn-server`).
    Regions,
}

/// Load generator for Kura's HTTP API: HBase PE operations, YCSB A–F and the apps.
#[derive(Debug, Clone, Parser)]
#[command(name = "kura-load", version, about)]
pub struct Args {
    /// Server(s) to drive (`host:port`, an `http://` prefix is accepted): a comma-separated
    /// list, or the option repeated, spreads the requests over all of them (`--spread`).
    #[arg(
        long,
        alias = "url",
        value_delimiter = ',',
        default_value = "127.0.0.1:8080"
    )]
    pub target: Vec<String>,
    /// With several servers: send each request of a connection to the next server in turn
    /// (`request`), or keep each connection on one server (`connection`).
    #[arg(long, value_enum, default_value = "request")]
    pub spread: Spread,
    /// Workload to run.
    #[arg(long, short = 'w', value_enum, default_value = "random-read")]
    pub workload: WorkloadName,
    /// Connections (one worker each).
    #[arg(long, short = 'c', default_value_t = 64)]
    pub connections: usize,
    /// Time bound of each measured phase (`10s`, `500ms`, `2m`).
    #[arg(long, short = 'd', value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Operation bound of each measured phase.
    #[arg(long)]
    pub ops: Option<u64>,
    /// Open loop at this many operations per second (default: closed loop).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Closed-loop run, then an open-loop run at half the throughput it reached.
    #[arg(long)]
    pub half_peak: bool,
    /// Skip the `/healthz` baseline (and the ceiling).
    #[arg(long)]
    pub no_baseline: bool,
    /// Skip the ceiling: the trivial actix-web server (`kura-ceiling`) measured under the
    /// baseline's load, before and after the run, so that every figure is also a ratio to the
    /// HTTP stack's own ceiling on this machine (`x ceiling`).
    #[arg(long)]
    pub no_ceiling: bool,
    /// After the run, measure the trivial server, `/healthz` and the run's workload again in
    /// this many rounds of a `--slice` each, one after the other (each round starting with
    /// the next of the three), and report each round's ratios and their medians: the
    /// machine's drift within a run then weighs on the three alike. 0 skips them; so do
    /// `--no-ceiling`, `--rate` and `--kill-after`.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// How long each slice of `--rounds` runs.
    #[arg(long, value_parser = parse_slice, default_value = "1s")]
    pub slice: Duration,
    /// The `kura-ceiling` binary (default: the one beside `kura-load`; without one, the
    /// ceiling is skipped with a warning).
    #[arg(long, value_name = "PATH")]
    pub ceiling_bin: Option<PathBuf>,
    /// PE: rows to load / key space.
    #[arg(long, default_value_t = 10_000)]
    pub rows: u64,
    /// PE: bytes per value (`hbase pe` uses 1000).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// PE multi-get: rows per request.
    #[arg(long, default_value_t = 10)]
    pub multiget: usize,
    /// YCSB: records to load (`recordcount`).
    #[arg(long, default_value_t = 10_000)]
    pub records: u64,
    /// YCSB: bytes per field (`fieldlength`).
    #[arg(long, default_value_t = 100)]
    pub field_length: usize,
    /// Override the workload's key distribution.
    #[arg(long, value_enum)]
    pub distribution: Option<Distribution>,
    /// Create the table with this many regions (`KURA_REGIONS`).
    #[arg(long)]
    pub regions: Option<u32>,
    /// Reuse the table and data a previous run loaded (no drop, no load).
    #[arg(long)]
    pub no_load: bool,
    /// Rows per request in the load phase.
    #[arg(long, default_value_t = 100)]
    pub load_batch: usize,
    /// Blog / actions: number of users.
    #[arg(long, default_value_t = 32)]
    pub users: u64,
    /// Counter: number of distinct URLs (zipfian popularity).
    #[arg(long, default_value_t = 1000)]
    pub urls: u64,
    /// Counter: sites the URLs are spread over (URL k on site k mod N). The counter keeps one
    /// site's rows in one region (its key starts with a hash of the site), so 1, the default,
    /// is a hot spot: every hit goes to one region.
    #[arg(long, default_value_t = 1)]
    pub sites: u64,
    /// Graph: relationships in the CAS storm.
    #[arg(long, default_value_t = 1)]
    pub edges: u64,
    /// Counter: give each hit a time (`at`) spread uniformly over this many hours before now,
    /// so the hourly and daily ranges it reads and checks span several buckets (0: every hit
    /// at the current time, as a live site's hits are).
    #[arg(long, default_value_t = 0)]
    pub counter_hours: u64,
    /// check-and-delete / check-and-mutate: rows (leases, generations) the connections contend
    /// for; fewer rows, more conflicts.
    #[arg(long, default_value_t = 64)]
    pub cas_rows: u64,
    /// Per-request timeout.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub timeout: Duration,
    /// Client runtime threads. The server shares the machine, so keep this small; but one
    /// thread of this client bounds a latency-bound run (1-cell GETs) on its own turnaround
    /// (benches/README.md, "Closed and open loop").
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Write result.json, summary.md and chart.svg here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// RNG seed (default: time-based).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Repeat the workload over region counts (and arbiter counts with --spawn-server).
    #[arg(long, value_enum)]
    pub sweep: Option<SweepKind>,
    /// Region counts of the sweep.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub sweep_regions: Vec<u32>,
    /// Region thread counts of the sweep (with --spawn-server: `--workers N --arbiters N`).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub sweep_arbiters: Vec<u32>,
    /// Start this server binary on a free port with a temporary data dir instead of --target.
    #[arg(long)]
    pub spawn_server: Option<PathBuf>,
    /// With --target: the process id of the server driven (repeatable, one per server), so
    /// that each phase reports its CPU per operation as for a spawned server.
    #[arg(long, conflicts_with = "spawn_server")]
    pub server_pid: Vec<u32>,
    /// With --spawn-server: how many servers to start (more than one needs
    /// `--spawn-backend bigtable`, where they share one instance).
    #[arg(long, default_value_t = 1)]
    pub servers: usize,
    /// With --spawn-server: the backend of the spawned servers. `bigtable` passes
    /// `--backend bigtable --bigtable-project p --bigtable-instance i` and
    /// `BIGTABLE_EMULATOR_HOST`, and starts an emulator for the run unless --emulator-host is given.
    #[arg(long, value_enum, default_value = "embedded")]
    pub spawn_backend: SpawnBackend,
    /// A running Bigtable emulator (`host:port`) for `--spawn-backend bigtable`.
    #[arg(long)]
    pub emulator_host: Option<String>,
    /// Region threads of a spawned server (not in a sweep): `--workers N --arbiters N` (thread
    /// per core, the server's default, runs the regions on its N HTTP workers).
    #[arg(long)]
    pub arbiters: Option<usize>,
    /// `--durability` for a spawned server (sync, interval, none).
    #[arg(long)]
    pub durability: Option<String>,
    /// Before the run, measure the disk's fsync latency in this directory (put it on the file
    /// system of the server's data dir) for `--disk-probe-secs`: in `sync` durability, the
    /// floor of every write's latency, to read a write workload's p99 against.
    #[arg(long)]
    pub disk_probe: Option<PathBuf>,
    /// How long the disk probe runs.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub disk_probe_secs: Duration,
    /// With --spawn-server (one server): kill it with SIGKILL this long into the run phase,
    /// start it again on the same port and data dir, and report the recovery time (kill →
    /// first successful operation). The workload's own check then runs on the restarted
    /// server; `-w durable-write` reads back every acknowledged write.
    #[arg(long, value_parser = parse_duration)]
    pub kill_after: Option<Duration>,
    /// Extra argument for a spawned server (repeatable).
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
}

impl Args {
    fn addrs(&self) -> Vec<String> {
        self.target
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(|t| {
                t.trim_start_matches("http://")
                    .trim_end_matches('/')
                    .to_string()
            })
            .collect()
    }

    fn params(&self, nonce: u64) -> Params {
        let expected_ops = self.ops.unwrap_or_else(|| {
            let secs = self.duration.map(|d| d.as_secs_f64()).unwrap_or(10.0);
            (secs * self.rate.unwrap_or(50_000.0)) as u64
        });
        Params {
            rows: self.rows,
            value_size: self.value_size,
            multiget: self.multiget,
            records: self.records,
            field_length: self.field_length,
            distribution: self.distribution,
            regions: self.regions,
            no_load: self.no_load,
            load_batch: self.load_batch,
            expected_ops,
            users: self.users,
            urls: self.urls,
            sites: self.sites,
            edges: self.edges,
            cas_rows: self.cas_rows,
            counter_hours: self.counter_hours,
            nonce,
        }
    }

    fn phase(&self, name: &str, addrs: &[String], mode: Mode, seed: u64) -> PhaseConfig {
        PhaseConfig {
            name: name.to_string(),
            addrs: addrs.to_vec(),
            spread: self.spread,
            connections: self.connections,
            duration: self.duration,
            ops: self.ops,
            mode,
            timeout: self.timeout,
            progress: !self.quiet,
            seed,
            watch: None,
            server_pids: Vec::new(),
            first_worker: 0,
        }
    }
}

fn now_unix() -> (u64, u64) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.as_nanos() as u64)
}

/// Phases whose responses broke a content invariant (short scans etc.) fail the run.
fn invalid_answers(phases: &[PhaseResult], v: &mut Verification) {
    for p in phases {
        if let Some(n) = p.summary.errors_by_status.get("invalid") {
            v.failures
                .push(format!("{}: {n} answers broke a content check", p.name));
        }
    }
}

/// Baseline, prepare, load, run, verify against `addrs` (prepared through the first, verified on
/// every one).
pub async fn run_once(
    args: &Args,
    addrs: &[String],
    params: Params,
    seed: u64,
    server_pids: &[u32],
    kill: Option<&mut SpawnedServer>,
) -> Result<RunResult> {
    // A phase on the servers: their CPU per operation is read when kura-load started them.
    let phase = |name: &str, mode: Mode, seed: u64| {
        let mut cfg = args.phase(name, addrs, mode, seed);
        cfg.server_pids = server_pids.to_vec();
        cfg
    };
    // A phase on the trivial server, whose CPU per answer is read too.
    let on_ceiling = |name: &str, c: &CeilingServer| {
        let mut cfg = args.phase(name, std::slice::from_ref(&c.addr), Mode::Closed, seed);
        cfg.server_pids = vec![c.pid()];
        cfg
    };
    let first = addrs
        .first()
        .ok_or_else(|| LoadError::Args("no server to drive".into()))?;
    let (started, _) = now_unix();
    let disk = match &args.disk_probe {
        Some(dir) => Some(
            crate::probe::fsync_probe(dir, args.disk_probe_secs)
                .map_err(|e| LoadError::Args(format!("disk probe in {}: {e}", dir.display())))?,
        ),
        None => None,
    };
    let ceiling_server = start_ceiling(args).await?;
    let ceiling = match &ceiling_server {
        Some(c) => {
            let cfg = on_ceiling("ceiling", c);
            Some(runner::run_phase(&cfg, Arc::new(Workload::Health)).await?)
        }
        None => None,
    };
    let baseline = if args.no_baseline {
        None
    } else {
        let cfg = phase("baseline", Mode::Closed, seed);
        Some(runner::run_phase(&cfg, Arc::new(Workload::Health)).await?)
    };
    let workload = Arc::new(Workload::new(args.workload, &params));
    let mut conn = crate::client::Conn::new(first, args.timeout)?;
    workload.prepare(&mut conn).await?;
    let mut phases = Vec::new();
    let rows = workload.load_rows();
    if rows > 0 {
        let mut cfg = phase("load", Mode::Closed, seed);
        cfg.connections = cfg.connections.clamp(1, 16);
        phases.push(
            runner::load_phase(&cfg, workload.clone(), rows, params.load_batch as u64).await?,
        );
    }
    let mode = match args.rate {
        Some(rate) if rate > 0.0 => Mode::Open { rate },
        Some(_) => return Err(LoadError::Args("--rate must be positive".into())),
        None => Mode::Closed,
    };
    let mut run_cfg = phase("run", mode, seed);
    let (run, crash) = match (args.kill_after, kill) {
        (Some(after), Some(server)) => {
            let watch = Arc::new(runner::KillWatch::new());
            run_cfg.watch = Some(watch.clone());
            let (run, crash) = tokio::join!(
                runner::run_phase(&run_cfg, workload.clone()),
                kill_and_restart(server, after, &watch)
            );
            let mut crash = crash?;
            crash.recovery_ms = watch.recovery().map(|d| d.as_secs_f64() * 1000.0);
            (run?, Some(crash))
        }
        (Some(_), None) => {
            return Err(LoadError::Args(
                "--kill-after needs --spawn-server (kura-load restarts the server it killed)"
                    .into(),
            ))
        }
        (None, _) => (runner::run_phase(&run_cfg, workload.clone()).await?, None),
    };
    let peak = run.summary.ok_throughput;
    phases.push(run);
    if args.half_peak {
        let rate = (peak / 2.0).max(1.0);
        let mut cfg = phase("half-peak", Mode::Open { rate }, seed ^ 1);
        // Workers of their own: the run's went before them with this workload.
        cfg.first_worker = args.connections;
        phases.push(runner::run_phase(&cfg, workload.clone()).await?);
    }
    let rounds = match (&ceiling_server, mode, args.kill_after) {
        (Some(c), Mode::Closed, None) if args.rounds > 0 && baseline.is_some() => {
            let ceiling = |name: &str| on_ceiling(name, c);
            let kura = |name: &str| phase(name, Mode::Closed, seed);
            Some(interleave(args, &ceiling, &kura, workload.clone()).await?)
        }
        _ => None,
    };
    let mut check_conns = addrs
        .iter()
        .map(|a| crate::client::Conn::new(a, args.timeout))
        .collect::<Result<Vec<_>>>()?;
    let mut verification = workload.verify(&mut check_conns).await?;
    invalid_answers(&phases, &mut verification);
    // The ceiling again after the run: its drift bounds how far the ratios can be trusted.
    let baseline_after = match &baseline {
        Some(_) => {
            let cfg = phase("baseline-after", Mode::Closed, seed);
            // Not fatal: a failure here must not hide the verdict of the run before it.
            match runner::run_phase(&cfg, Arc::new(Workload::Health)).await {
                Ok(p) => Some(p),
                Err(e) => {
                    eprintln!("kura-load: the baseline after the run failed ({e}); ratios use the one before");
                    None
                }
            }
        }
        None => None,
    };
    let ceiling_after = match &ceiling_server {
        Some(c) => {
            let cfg = on_ceiling("ceiling-after", c);
            match runner::run_phase(&cfg, Arc::new(Workload::Health)).await {
                Ok(p) => Some(p),
                Err(e) => {
                    eprintln!("kura-load: the ceiling after the run failed ({e}); ratios use the one before");
                    None
                }
            }
        }
        None => None,
    };
    drop(ceiling_server);
    let ceilings: Vec<&PhaseResult> = ceiling.iter().chain(&ceiling_after).collect();
    let bases: Vec<&PhaseResult> = baseline.iter().chain(&baseline_after).collect();
    let ratios = if bases.is_empty() {
        Vec::new()
    } else {
        baseline
            .iter()
            .chain(phases.iter().filter(|p| p.name != "load"))
            .chain(&baseline_after)
            .map(|p| Ratio::of(p, &bases).with_ceiling(p, &ceilings))
            .collect()
    };
    let passed = verification.passed();
    Ok(RunResult {
        tool: "kura-load".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        started_at_unix: started,
        machine: Machine::detect(),
        target: addrs.join(","),
        workload: args.workload.as_str(),
        params,
        connections: args.connections,
        client_threads: args.threads,
        mode,
        duration_s: args.duration.map(|d| d.as_secs_f64()),
        ops: args.ops,
        ceiling,
        ceiling_after,
        baseline,
        baseline_after,
        phases,
        ratios,
        disk,
        crash,
        rounds,
        verification,
        passed,
    })
}

/// The slices of `--rounds`: `/healthz` on the trivial server (`ceiling`'s phases) and on
/// Kura (`kura`'s), and `workload` on Kura, `args.slice` each, in turn; round `i` starts with
/// the `i`-th of the three (so that none is always measured first, right after the same
/// neighbour).
async fn interleave(
    args: &Args,
    ceiling: &dyn Fn(&str) -> PhaseConfig,
    kura: &dyn Fn(&str) -> PhaseConfig,
    workload: Arc<Workload>,
) -> Result<report::Rounds> {
    let health = Arc::new(Workload::Health);
    let mut rounds = Vec::with_capacity(args.rounds);
    for i in 0..args.rounds {
        let name = format!("round-{}", i + 1);
        let mut rates = [0.0f64; 3];
        for k in 0..3 {
            let which = (i + k) % 3;
            let (mut cfg, w) = match which {
                0 => (ceiling(&name), health.clone()),
                1 => (kura(&name), health.clone()),
                _ => {
                    // Workers of their own, numbered after the run's and the half-peak's,
                    // which went before them with this workload.
                    let mut cfg = kura(&name);
                    cfg.first_worker = (i + 2) * args.connections;
                    (cfg, workload.clone())
                }
            };
            cfg.duration = Some(args.slice);
            cfg.ops = None;
            cfg.progress = false;
            rates[which] = runner::run_phase(&cfg, w).await?.summary.ok_throughput;
        }
        rounds.push(report::Round {
            ceiling: rates[0],
            healthz: rates[1],
            run: rates[2],
        });
    }
    Ok(report::Rounds {
        secs: args.slice.as_secs_f64(),
        rounds,
    })
}

/// Sleep `after`, kill `server` with SIGKILL, start it again on its data dir, and wait for its
/// `/healthz` (up to two minutes).
async fn kill_and_restart(
    server: &mut SpawnedServer,
    after: Duration,
    watch: &runner::KillWatch,
) -> Result<CrashReport> {
    tokio::time::sleep(after).await;
    let killed = watch.mark_kill();
    server.kill9()?;
    server.restart()?;
    let restart_ms = killed.elapsed().as_secs_f64() * 1000.0;
    let deadline = killed + Duration::from_secs(120);
    loop {
        let mut conn = crate::client::Conn::new(&server.addr, Duration::from_secs(1))?;
        if matches!(conn.get("/healthz").await, Ok(r) if r.status == 200) {
            break;
        }
        if server.exited() {
            return Err(LoadError::Args(format!(
                "the server {} exited after its restart (see its log with --out)",
                server.addr
            )));
        }
        if std::time::Instant::now() >= deadline {
            return Err(LoadError::Setup {
                step: format!("restart of {} after kill -9", server.addr),
                status: 0,
                body: "no /healthz 200 within 120 s".into(),
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(CrashReport {
        server: server.addr.clone(),
        kill_after_s: after.as_secs_f64(),
        restart_ms,
        healthy_ms: killed.elapsed().as_secs_f64() * 1000.0,
        recovery_ms: None,
    })
}

/// Start the trivial actix-web server the ceiling is measured on, unless the run skips it.
async fn start_ceiling(args: &Args) -> Result<Option<CeilingServer>> {
    if args.no_ceiling || args.no_baseline {
        return Ok(None);
    }
    let bin = match &args.ceiling_bin {
        Some(bin) => bin.clone(),
        None => match CeilingServer::default_binary() {
            Some(bin) => bin,
            None => {
                eprintln!(
                    "kura-load: no kura-ceiling beside this binary (cargo build --release -p \
                     kura-bench builds it); the ratios to the HTTP stack's ceiling are skipped"
                );
                return Ok(None);
            }
        },
    };
    // As many workers as the server under test runs by default: one per core.
    CeilingServer::start(&bin, 0).await.map(Some)
}

/// Start the servers of `--spawn-server` (none without it).
async fn start_servers(args: &Args, arbiters: Option<usize>) -> Result<Option<Fleet>> {
    let Some(bin) = &args.spawn_server else {
        if args.servers != 1 || args.spawn_backend != SpawnBackend::Embedded {
            return Err(LoadError::Args(
                "--servers and --spawn-backend need --spawn-server".into(),
            ));
        }
        return Ok(None);
    };
    let fleet = Fleet::start(&FleetSpec {
        binary: bin,
        servers: args.servers,
        backend: args.spawn_backend,
        emulator_host: args.emulator_host.as_deref(),
        arbiters,
        durability: args.durability.as_deref(),
        extra: &args.server_args,
        log_dir: args.out.as_deref(),
    })
    .await?;
    if let Some(h) = &fleet.emulator_host {
        eprintln!(
            "kura-load: {} server(s) {} on the Bigtable emulator at {h}",
            fleet.servers.len(),
            fleet.addrs().join(",")
        );
    }
    Ok(Some(fleet))
}

/// The processes of the servers driven, for their CPU per operation: the ones this run started,
/// else those `--server-pid` names (none by default when it drives servers it did not start).
fn pids_of(args: &Args, fleet: &Option<Fleet>) -> Vec<u32> {
    match fleet {
        Some(f) => f.servers.iter().map(SpawnedServer::pid).collect(),
        None => args.server_pid.clone(),
    }
}

/// The servers to drive: the spawned ones, else `--target`; each answering `/healthz`.
async fn servers_of(args: &Args, fleet: &Option<Fleet>) -> Result<Vec<String>> {
    let addrs = match fleet {
        Some(f) => f.addrs(),
        None => args.addrs(),
    };
    if addrs.is_empty() {
        return Err(LoadError::Args("--target names no server".into()));
    }
    for a in &addrs {
        wait_healthy(a, Duration::from_secs(5)).await?;
    }
    Ok(addrs)
}

async fn single(args: &Args, seed: u64, nonce: u64) -> Result<bool> {
    if let Some(after) = args.kill_after {
        if args.spawn_server.is_none() {
            return Err(LoadError::Args(
                "--kill-after needs --spawn-server (kura-load restarts the server it killed)"
                    .into(),
            ));
        }
        if args.servers != 1 {
            return Err(LoadError::Args(
                "--kill-after kills and restarts one server: give --servers 1 (with several, \
                 the others would answer during the outage and hide it)"
                    .into(),
            ));
        }
        if args.duration.is_none_or(|d| d <= after) {
            return Err(LoadError::Args(
                "--kill-after must come before the end of the run: give a --duration longer \
                 than it"
                    .into(),
            ));
        }
    }
    let mut server = start_servers(args, args.arbiters).await?;
    let addrs = servers_of(args, &server).await?;
    let pids = pids_of(args, &server);
    let kill = server.as_mut().and_then(|f| f.servers.first_mut());
    let result = run_once(args, &addrs, args.params(nonce), seed, &pids, kill).await?;
    drop(server);
    let md = report::summary_markdown(&result);
    println!("{md}");
    if let Some(dir) = &args.out {
        match report::write_run(&result, dir) {
            Ok(()) => eprintln!("wrote {}/result.json, summary.md, chart.svg", dir.display()),
            // A failed check stays the exit status (1) even if its report cannot be written.
            Err(e) if !result.passed => eprintln!("kura-load: could not write the report: {e}"),
            Err(e) => return Err(e),
        }
    }
    Ok(result.passed)
}

async fn sweep(args: &Args, seed: u64, nonce: u64) -> Result<bool> {
    if args.kill_after.is_some() {
        return Err(LoadError::Args(
            "--kill-after runs without --sweep (one server, one run)".into(),
        ));
    }
    if args.workload.is_application() && args.sweep_regions.len() > 1 {
        return Err(LoadError::Args(format!(
            "the region sweep needs a workload whose table kura-load creates (PE or YCSB): \
             the {} application's table is created by the server with its own layout \
             (give one --sweep-regions value to sweep only the arbiters)",
            args.workload.as_str()
        )));
    }
    let arbiter_sets: Vec<Option<usize>> = if args.spawn_server.is_some() {
        args.sweep_arbiters
            .iter()
            .map(|a| Some(*a as usize))
            .collect()
    } else {
        vec![None]
    };
    let mut points = Vec::new();
    let mut all_passed = true;
    let mut runs = Vec::new();
    for arb in arbiter_sets {
        let server = start_servers(args, arb).await?;
        let addrs = servers_of(args, &server).await?;
        for (i, regions) in args.sweep_regions.iter().enumerate() {
            let mut a = args.clone();
            a.regions = Some(*regions);
            // A baseline per point: on a shared machine the HTTP ceiling drifts, and a ratio
            // is only honest against a ceiling measured under the same conditions.
            let pids = pids_of(args, &server);
            let r = run_once(&a, &addrs, a.params(nonce + i as u64), seed, &pids, None).await?;
            let run = r.phases.iter().find(|p| p.name == "run");
            let (tput, p50, p99, errs) = run
                .map(|p| {
                    (
                        p.summary.ok_throughput,
                        p.summary.latency.p50_us,
                        p.summary.latency.p99_us,
                        p.summary.errors,
                    )
                })
                .unwrap_or_default();
            let ratio = r
                .ratios
                .iter()
                .find(|x| x.phase == "run")
                .map(|x| x.throughput)
                .unwrap_or(0.0);
            eprintln!(
                "arbiters {} regions {regions}: {tput:.0} ops/s ({ratio:.2} x healthz), p99 {:.2} ms",
                arb.map(|a| a.to_string()).unwrap_or_else(|| "default".into()),
                p99 as f64 / 1000.0
            );
            all_passed &= r.passed;
            points.push(SweepPoint {
                arbiters: arb,
                regions: *regions,
                throughput: tput,
                ratio,
                p50_us: p50,
                p99_us: p99,
                errors: errs,
                passed: r.passed,
            });
            runs.push(r);
        }
        drop(server);
    }
    let machine = Machine::detect();
    let md = report::sweep_markdown(&args.workload.as_str(), &machine, &points);
    println!("{md}");
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("sweep.md"), &md)?;
        std::fs::write(
            dir.join("sweep.json"),
            serde_json::to_string_pretty(&serde_json::json!({
                "workload": args.workload.as_str(), "machine": machine, "points": points, "runs": runs,
            }))?,
        )?;
        report::sweep_chart(&args.workload.as_str(), &points, &dir.join("sweep.svg"))?;
        eprintln!("wrote {}/sweep.md, sweep.json, sweep.svg", dir.display());
    }
    Ok(all_passed)
}

/// Run the CLI with these arguments; returns the process exit code.
pub fn main_with(args: Args) -> i32 {
    if args.duration.is_none() && args.ops.is_none() {
        eprintln!("kura-load: give --duration (e.g. 10s) and/or --ops");
        return 2;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kura-load: cannot start runtime: {e}");
            return 2;
        }
    };
    let (secs, nanos) = now_unix();
    let seed = args.seed.unwrap_or(nanos);
    let nonce = secs * 1000 + (nanos / 1_000_000) % 1000;
    let outcome = rt.block_on(async {
        match args.sweep {
            Some(SweepKind::Regions) => sweep(&args, seed, nonce).await,
            None => single(&args, seed, nonce).await,
        }
    });
    match outcome {
        Ok(true) => 0,
        Ok(false) => {
            eprintln!("kura-load: correctness check FAILED");
            1
        }
        Err(e) => {
            eprintln!("kura-load: {e}");
            2
        }
    }
}

/// Parse `std::env::args` and run.
pub fn main() -> i32 {
    main_with(Args::parse())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_units_and_bare_seconds() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("3 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn cli_accepts_pe_names_and_sweep_lists() {
        let a = Args::try_parse_from([
            "kura-load",
            "-w",
            "randomRead",
            "--duration",
            "5s",
            "--sweep",
            "regions",
            "--sweep-regions",
            "1,4",
        ])
        .expect("parse");
        assert_eq!(a.workload, WorkloadName::RandomRead);
        assert_eq!(a.sweep_regions, vec![1, 4]);
        assert_eq!(a.addrs(), vec!["127.0.0.1:8080"]);
    }

    #[test]
    fn a_slice_of_the_rounds_takes_a_duration_above_zero() {
        assert_eq!(parse_slice("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_slice("0s").unwrap_err().contains("measures nothing"));
        assert!(Args::try_parse_from(["kura-load", "--slice", "-1s"]).is_err());
        let a = Args::try_parse_from(["kura-load"]).unwrap();
        assert_eq!((a.rounds, a.slice), (5, Duration::from_secs(1)));
    }

    #[test]
    fn a_server_pid_goes_with_a_target_not_a_spawned_server() {
        let a = Args::try_parse_from([
            "kura-load",
            "--target",
            "127.0.0.1:9000",
            "--server-pid",
            "4242",
        ])
        .unwrap();
        assert_eq!(pids_of(&a, &None), vec![4242]);
        assert!(Args::try_parse_from([
            "kura-load",
            "--spawn-server",
            "target/release/kura",
            "--server-pid",
            "4242",
        ])
        .is_err());
    }

    #[test]
    fn cli_accepts_several_targets_listed_or_repeated() {
        let a = Args::try_parse_from([
            "kura-load",
            "--target",
            "http://127.0.0.1:1/,127.0.0.1:2",
            "--url",
            "127.0.0.1:3",
            "-d",
            "1s",
        ])
        .expect("parse");
        assert_eq!(a.addrs(), vec!["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]);
        assert_eq!(a.spread, Spread::Request);
        let b = Args::try_parse_from([
            "kura-load",
            "--spawn-server",
            "kura",
            "--spawn-backend",
            "bigtable",
            "--servers",
            "2",
            "--spread",
            "connection",
            "-d",
            "1s",
        ])
        .expect("parse");
        assert_eq!(b.servers, 2);
        assert_eq!(b.spawn_backend, SpawnBackend::Bigtable);
        assert_eq!(b.spread, Spread::Connection);
    }
}
