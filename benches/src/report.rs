//! Result files: `result.json`, `summary.md` and an SVG chart of throughput and latency.
//!
//! # Invariants
//! 1. Every figure of a phase is also stated as a ratio to the `/healthz` baseline of the same
//!    run (same server, same connections, same bounds), when a baseline was measured.
//! 2. `result.json` is the source of truth; `summary.md` and the chart are derived from it.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{LoadError, Result};
use crate::runner::{Mode, PhaseResult};
use crate::workload::{Params, Verification};

/// The machine the run was made on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// Logical cores.
    pub cores: usize,
    /// CPU model.
    pub cpu: String,
    /// Operating system.
    pub os: String,
}

impl Machine {
    /// Describe this machine.
    pub fn detect() -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpu = read("/proc/cpuinfo")
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let os = read("/etc/os-release")
            .lines()
            .find(|l| l.starts_with("PRETTY_NAME="))
            .map(|l| {
                l.trim_start_matches("PRETTY_NAME=")
                    .trim_matches('"')
                    .to_string()
            })
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        Machine {
            hostname: read("/etc/hostname").trim().to_string(),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            cpu,
            os,
        }
    }

    /// One line: `"2 cores, <cpu>, <os>"`.
    pub fn describe(&self) -> String {
        format!("{} cores, {}, {}", self.cores, self.cpu, self.os)
    }
}

/// The trivial server, `/healthz` and the run's workload measured again in short slices, in
/// turn (`--rounds`): the machine's speed drifts by tens of percent within the minute a run's
/// long phases take, and slices of a second each, alternating, put the same drift on all
/// three, so each round's ratios compare like with like.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    /// Seconds of each slice.
    pub secs: f64,
    /// Each round's successful operations per second, in the order measured.
    pub rounds: Vec<Round>,
}

/// One round of [`Rounds`]: successful operations per second of each slice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// The trivial actix-web server.
    pub ceiling: f64,
    /// Kura's `/healthz`.
    pub healthz: f64,
    /// The run's workload.
    pub run: f64,
}

/// The median of `v` (the mean of the middle two for an even count); `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

impl Rounds {
    /// Each round's `a / b`; NaN where `b` answered nothing (no ratio: [`median`] leaves it
    /// out).
    fn ratios(&self, a: fn(&Round) -> f64, b: fn(&Round) -> f64) -> Vec<f64> {
        self.rounds
            .iter()
            .map(|r| if b(r) > 0.0 { a(r) / b(r) } else { f64::NAN })
            .collect()
    }

    /// The run's rate over the trivial server's, per round.
    pub fn run_x_ceiling(&self) -> Vec<f64> {
        self.ratios(|r| r.run, |r| r.ceiling)
    }

    /// The run's rate over `/healthz`'s, per round.
    pub fn run_x_healthz(&self) -> Vec<f64> {
        self.ratios(|r| r.run, |r| r.healthz)
    }

    /// `/healthz`'s rate over the trivial server's, per round.
    pub fn healthz_x_ceiling(&self) -> Vec<f64> {
        self.ratios(|r| r.healthz, |r| r.ceiling)
    }

    /// The markdown lines of the rounds: a table of the rounds, then the medians.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\n## rounds: {} slices of {} s each, in turn\n",
            self.rounds.len() * 3,
            self.secs
        );
        let _ = writeln!(
            s,
            "| round | ceiling ops/s | /healthz ops/s | run ops/s | run x ceiling | run x healthz | /healthz x ceiling |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        let (xc, xh, hc) = (
            self.run_x_ceiling(),
            self.run_x_healthz(),
            self.healthz_x_ceiling(),
        );
        let ratio = |x: f64| {
            if x.is_finite() {
                format!("{x:.2}")
            } else {
                "-".into()
            }
        };
        for (i, r) in self.rounds.iter().enumerate() {
            let _ = writeln!(
                s,
                "| {} | {:.0} | {:.0} | {:.0} | {} | {} | {} |",
                i + 1,
                r.ceiling,
                r.healthz,
                r.run,
                ratio(xc[i]),
                ratio(xh[i]),
                ratio(hc[i])
            );
        }
        let med = |v: &[f64]| median(v).map_or("-".into(), ratio);
        let _ = writeln!(
            s,
            "\nmedians of the rounds: run x ceiling **{}**, run x healthz **{}**, /healthz x ceiling **{}**",
            med(&xc),
            med(&xh),
            med(&hc)
        );
        s
    }
}

/// A phase figure relative to the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// Phase name.
    pub phase: String,
    /// Phase ops/s ÷ baseline ops/s.
    pub throughput: f64,
    /// Phase p50 ÷ baseline p50.
    pub p50: f64,
    /// Phase p99 ÷ baseline p99.
    pub p99: f64,
    /// Phase ops/s ÷ the trivial actix-web server's ops/s (`kura-ceiling`, same connections
    /// and bounds), when it was measured.
    #[serde(default)]
    pub ceiling: Option<f64>,
}

impl Ratio {
    /// `phase` relative to the mean of the `baselines` (before and, if measured, after the
    /// run: on a shared machine the ceiling drifts, and the mean of both sides is fairer than
    /// either alone).
    pub fn of(phase: &PhaseResult, baselines: &[&PhaseResult]) -> Ratio {
        let div = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let n = baselines.len().max(1) as f64;
        let mean =
            |f: &dyn Fn(&PhaseResult) -> f64| baselines.iter().map(|b| f(b)).sum::<f64>() / n;
        let p = &phase.summary;
        Ratio {
            phase: phase.name.clone(),
            // Successful operations only: fast errors (a 503 under overload, a 404) must not
            // raise a figure.
            throughput: div(p.ok_throughput, mean(&|b| b.summary.ok_throughput)),
            p50: div(
                p.latency.p50_us as f64,
                mean(&|b| b.summary.latency.p50_us as f64),
            ),
            p99: div(
                p.latency.p99_us as f64,
                mean(&|b| b.summary.latency.p99_us as f64),
            ),
            ceiling: None,
        }
    }

    /// This ratio with the phase's throughput also stated against the mean of `ceilings`
    /// (nothing when none was measured).
    pub fn with_ceiling(mut self, phase: &PhaseResult, ceilings: &[&PhaseResult]) -> Ratio {
        if !ceilings.is_empty() {
            let mean = ceilings
                .iter()
                .map(|c| c.summary.ok_throughput)
                .sum::<f64>()
                / ceilings.len() as f64;
            self.ceiling = (mean > 0.0).then(|| phase.summary.ok_throughput / mean);
        }
        self
    }
}

/// What `--kill-after` did and measured: the server killed with SIGKILL during the run phase,
/// then started again on its data dir.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrashReport {
    /// The server killed (`host:port`).
    pub server: String,
    /// Seconds into the run phase the kill came.
    pub kill_after_s: f64,
    /// Kill → the new process started, ms.
    pub restart_ms: f64,
    /// Kill → the restarted server's first `/healthz` 200 (polled every 10 ms), ms.
    pub healthy_ms: f64,
    /// Kill → the end of the first workload operation sent after the kill that succeeded, ms
    /// (`None`: none succeeded before the run phase ended).
    pub recovery_ms: Option<f64>,
}

/// Everything one invocation measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// `kura-load`.
    pub tool: String,
    /// Crate version.
    pub version: String,
    /// Unix seconds at start.
    pub started_at_unix: u64,
    /// Where it ran.
    pub machine: Machine,
    /// `host:port` driven.
    pub target: String,
    /// Workload name.
    pub workload: String,
    /// Workload knobs.
    pub params: Params,
    /// Connections of the run phase.
    pub connections: usize,
    /// Threads of the client's runtime (`--threads`); 0 in results written before it was
    /// recorded.
    #[serde(default)]
    pub client_threads: usize,
    /// Pacing of the run phase.
    pub mode: Mode,
    /// Time bound, seconds.
    pub duration_s: Option<f64>,
    /// Operation bound.
    pub ops: Option<u64>,
    /// The trivial actix-web server (`kura-ceiling`) under the baseline's load, before the
    /// run: the HTTP stack's ceiling on this machine.
    #[serde(default)]
    pub ceiling: Option<PhaseResult>,
    /// The same, after the run.
    #[serde(default)]
    pub ceiling_after: Option<PhaseResult>,
    /// The `/healthz` baseline, measured before the run.
    pub baseline: Option<PhaseResult>,
    /// The same baseline measured again after the run (drift check).
    #[serde(default)]
    pub baseline_after: Option<PhaseResult>,
    /// Load and run phases, in order.
    pub phases: Vec<PhaseResult>,
    /// Run phases relative to the baseline.
    pub ratios: Vec<Ratio>,
    /// The disk's fsync latency, probed before the run (`--disk-probe`).
    #[serde(default)]
    pub disk: Option<crate::probe::DiskProbe>,
    /// The kill -9 and restart of the server during the run (`--kill-after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash: Option<CrashReport>,
    /// The ceiling, `/healthz` and the run again in short alternating slices (`--rounds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<Rounds>,
    /// End-of-run correctness check.
    pub verification: Verification,
    /// No correctness failure.
    pub passed: bool,
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

fn mode_str(m: &Mode) -> String {
    match m {
        Mode::Closed => "closed".into(),
        Mode::Open { rate } => format!("open {rate:.0}/s"),
    }
}

/// The servers' part of a phase's CPU line: their CPU per operation and, when read, their
/// request threads' share of it; empty without the servers.
fn server_text(c: &crate::cpu::CpuPerOp) -> String {
    match (c.server_us, c.request_threads_us) {
        (Some(us), Some(req)) => format!("server {us:.1} µs (request threads {req:.1}), "),
        (Some(us), None) => format!("server {us:.1} µs, "),
        (None, _) => String::new(),
    }
}

/// The machine's share of a phase, as the CPU line prints it: `" (machine: 1.95 of 2 cores
/// busy, 0.01 stolen, the rest 0.2 µs)"`; steal under 0.005 cores is left out.
fn machine_text(m: crate::cpu::MachineUse) -> String {
    let steal = if m.steal_cores >= 0.005 {
        format!(", {:.2} stolen", m.steal_cores)
    } else {
        String::new()
    };
    let rest = m
        .others_us
        .map(|us| format!(", the rest {us:.1} µs"))
        .unwrap_or_default();
    format!(
        " (machine: {:.2} of {} cores busy{steal}{rest})",
        m.busy_cores, m.cores
    )
}

/// The markdown summary of a run.
pub fn summary_markdown(r: &RunResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# kura-load: {}\n", r.workload);
    let _ = writeln!(
        s,
        "- machine: {} ({})",
        r.machine.describe(),
        r.machine.hostname
    );
    let _ = writeln!(
        s,
        "- target: {}, {} connections, {} client threads",
        r.target, r.connections, r.client_threads
    );
    let bound = match (r.duration_s, r.ops) {
        (Some(d), Some(o)) => format!("{d} s or {o} ops"),
        (Some(d), None) => format!("{d} s"),
        (None, Some(o)) => format!("{o} ops"),
        (None, None) => "-".into(),
    };
    let _ = writeln!(s, "- bound: {bound}");
    if let Some(d) = &r.disk {
        let _ = writeln!(s, "- {}", d.describe());
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| phase | mode | conns | ops | ok ops/s | x healthz | x ceiling | rows/s | p50 ms | p99 ms | p99.9 ms | max ms | errors |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let all = r
        .ceiling
        .iter()
        .chain(&r.baseline)
        .chain(&r.phases)
        .chain(&r.baseline_after)
        .chain(&r.ceiling_after);
    for p in all {
        let vs_ceiling = r
            .ratios
            .iter()
            .find(|x| x.phase == p.name)
            .and_then(|x| x.ceiling)
            .map(|c| format!("{c:.2}"))
            .unwrap_or_else(|| "-".into());
        let ratio = r
            .ratios
            .iter()
            .find(|x| x.phase == p.name)
            .map(|x| format!("{:.2}", x.throughput))
            .unwrap_or_else(|| {
                if p.name == "baseline" {
                    "1.00".into()
                } else {
                    "-".into()
                }
            });
        let m = &p.summary;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.0} | {} | {} | {:.0} | {} | {} | {} | {} | {} |",
            p.name,
            mode_str(&p.mode),
            p.connections,
            m.ops,
            m.ok_throughput,
            ratio,
            vs_ceiling,
            m.rows_per_s,
            ms(m.latency.p50_us),
            ms(m.latency.p99_us),
            ms(m.latency.p999_us),
            ms(m.latency.max_us),
            m.errors
        );
    }
    let fsyncs: Vec<String> = r
        .phases
        .iter()
        .filter_map(|p| {
            let f = p.server_fsyncs.filter(|f| f.fsyncs > 0)?;
            Some(format!(
                "{}: {} log fsyncs, {} over 10 ms",
                p.name, f.fsyncs, f.slow
            ))
        })
        .collect();
    if !fsyncs.is_empty() {
        let _ = writeln!(s, "\nserver (`/metrics`): {}", fsyncs.join("; "));
    }
    let cpu: Vec<String> = r
        .ceiling
        .iter()
        .chain(&r.baseline)
        .chain(r.phases.iter().filter(|p| p.name != "load"))
        .filter_map(|p| {
            let c = p.cpu?;
            let server = server_text(&c);
            let machine = c.machine.map(machine_text).unwrap_or_default();
            Some(format!(
                "{}: {server}kura-load {:.1} µs{machine}",
                p.name, c.client_us
            ))
        })
        .collect();
    if !cpu.is_empty() {
        let _ = writeln!(
            s,
            "\nCPU per operation (`/proc/PID/stat`, every thread, and a server's request threads apart; the machine from `/proc/stat`): {}",
            cpu.join("; ")
        );
    }
    if let Some(rounds) = &r.rounds {
        s.push_str(&rounds.markdown());
    }
    for p in &r.phases {
        if p.name == "load" {
            continue;
        }
        let _ = writeln!(s, "\n## {} by operation\n", p.name);
        let _ = writeln!(s, "| kind | ops | p50 ms | p99 ms | p99.9 ms | max ms |");
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for (k, v) in &p.summary.kinds {
            let l = &v.latency;
            let _ = writeln!(
                s,
                "| {k} | {} | {} | {} | {} | {} |",
                v.ops,
                ms(l.p50_us),
                ms(l.p99_us),
                ms(l.p999_us),
                ms(l.max_us)
            );
        }
        if !p.summary.errors_by_status.is_empty() {
            let e: Vec<String> = p
                .summary
                .errors_by_status
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            let _ = writeln!(s, "\nerrors by status: {}", e.join(", "));
        }
        if !p.summary.counters.is_empty() {
            let c: Vec<String> = p
                .summary
                .counters
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            let _ = writeln!(s, "\ncounters: {}", c.join(", "));
        }
        if let Some(c) = &p.summary.cas {
            let _ = writeln!(
                s,
                "\ncheck-and-put retries: {} successful CAS, mean {:.2} / max {} retries each, {} conflicts (304) in all, {} gave up",
                c.successes, c.mean_retries, c.max_retries, c.conflicts, c.gave_up
            );
        }
    }
    if let Some(c) = &r.crash {
        let _ = writeln!(s, "\n## kill -9 and restart\n");
        let _ = writeln!(
            s,
            "- server {} killed (SIGKILL) {:.2} s into the run, started again on its data dir after {:.1} ms",
            c.server, c.kill_after_s, c.restart_ms
        );
        let _ = writeln!(s, "- kill → first `/healthz` 200: {:.1} ms", c.healthy_ms);
        match c.recovery_ms {
            Some(ms) => {
                let _ = writeln!(
                    s,
                    "- recovery time, kill → first successful operation: {ms:.1} ms"
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "- no operation sent after the kill succeeded before the run ended"
                );
            }
        }
    }
    let v = &r.verification;
    if v.checked || !v.failures.is_empty() {
        let verdict = if v.passed() { "PASSED" } else { "FAILED" };
        let _ = writeln!(s, "\n## Correctness: {verdict}\n");
        for n in &v.notes {
            let _ = writeln!(s, "- {n}");
        }
        for f in &v.failures {
            let _ = writeln!(s, "- FAIL: {f}");
        }
    }
    s
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn chart_err<E: std::fmt::Display>(e: E) -> LoadError {
    LoadError::Chart(e.to_string())
}

/// Draw throughput (top) and p99 latency (bottom) per second for every phase.
pub fn timeline_chart(r: &RunResult, path: &Path) -> Result<()> {
    let phases: Vec<&PhaseResult> = r
        .baseline
        .iter()
        .chain(&r.phases)
        .chain(&r.baseline_after)
        .collect();
    let xmax = phases
        .iter()
        .map(|p| p.summary.timeline.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let tmax = phases
        .iter()
        .flat_map(|p| p.summary.timeline.iter().map(|t| t.ops as f64))
        .fold(1.0, f64::max);
    let lmax = phases
        .iter()
        .flat_map(|p| p.summary.timeline.iter().map(|t| t.p99_us as f64 / 1000.0))
        .fold(0.1, f64::max);
    let root = SVGBackend::new(path, (1000, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(chart_err)?;
    let (top, bottom) = root.split_vertically(360);
    let panels = [
        (
            top,
            format!("{}: throughput per second", r.workload),
            "ops/s",
            tmax * 1.1,
            true,
        ),
        (
            bottom,
            format!("{}: p99 latency per second", r.workload),
            "ms",
            lmax * 1.1,
            false,
        ),
    ];
    for (area, title, ylabel, ymax, is_tput) in panels {
        let mut chart = ChartBuilder::on(&area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(chart_err)?;
        chart
            .configure_mesh()
            .x_desc("seconds since phase start")
            .y_desc(ylabel)
            .draw()
            .map_err(chart_err)?;
        for (i, p) in phases.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            // The last bucket usually covers a fraction of a second: leave it out rather
            // than draw a fake drop.
            let whole = p.summary.elapsed_s.floor().max(1.0) as u64;
            let pts: Vec<(f64, f64)> = p
                .summary
                .timeline
                .iter()
                .filter(|t| t.second < whole)
                .map(|t| {
                    let y = if is_tput {
                        t.ops as f64
                    } else {
                        t.p99_us as f64 / 1000.0
                    };
                    (t.second as f64 + 0.5, y)
                })
                .collect();
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                .map_err(chart_err)?
                .label(p.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(chart_err)?;
    }
    root.present().map_err(chart_err)?;
    Ok(())
}

/// Write `result.json`, `summary.md` and `chart.svg` into `dir`.
pub fn write_run(r: &RunResult, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("result.json"), serde_json::to_string_pretty(r)?)?;
    std::fs::write(dir.join("summary.md"), summary_markdown(r))?;
    timeline_chart(r, &dir.join("chart.svg"))
}

/// One cell of the region-scaling sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Worker arbiters of the server (`None` = whatever the running server uses).
    pub arbiters: Option<usize>,
    /// Regions of the table.
    pub regions: u32,
    /// Run-phase throughput.
    pub throughput: f64,
    /// Ratio to the baseline of the same server.
    pub ratio: f64,
    /// Median latency.
    pub p50_us: u64,
    /// 99th percentile latency.
    pub p99_us: u64,
    /// Errors in the run phase.
    pub errors: u64,
    /// Correctness check passed.
    pub passed: bool,
}

/// The markdown table of a sweep.
pub fn sweep_markdown(workload: &str, machine: &Machine, points: &[SweepPoint]) -> String {
    let mut s = format!(
        "# Region-scaling sweep: {workload}\n\nmachine: {}\n\n",
        machine.describe()
    );
    s.push_str("| arbiters | regions | ops/s | x healthz | p50 ms | p99 ms | errors | correct |\n");
    s.push_str("|---|---|---|---|---|---|---|---|\n");
    for p in points {
        let arb = p
            .arbiters
            .map(|a| a.to_string())
            .unwrap_or_else(|| "server default".into());
        let _ = writeln!(
            s,
            "| {arb} | {} | {:.0} | {:.2} | {} | {} | {} | {} |",
            p.regions,
            p.throughput,
            p.ratio,
            ms(p.p50_us),
            ms(p.p99_us),
            p.errors,
            if p.passed { "yes" } else { "NO" }
        );
    }
    s
}

/// Throughput against region count, one line per arbiter setting.
pub fn sweep_chart(workload: &str, points: &[SweepPoint], path: &Path) -> Result<()> {
    let mut groups: Vec<Option<usize>> = points.iter().map(|p| p.arbiters).collect();
    groups.dedup();
    let regions: Vec<u32> = {
        let mut r: Vec<u32> = points.iter().map(|p| p.regions).collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    let ymax = points.iter().map(|p| p.throughput).fold(1.0, f64::max) * 1.15;
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(chart_err)?;
    let n = regions.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{workload}: throughput by regions"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..ymax)
        .map_err(chart_err)?;
    let labels = regions.clone();
    chart
        .configure_mesh()
        .x_labels(regions.len().max(1))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels
                    .get(i as usize)
                    .map(|r| r.to_string())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc("regions")
        .y_desc("ops/s")
        .draw()
        .map_err(chart_err)?;
    for (gi, g) in groups.iter().enumerate() {
        let color = PALETTE[gi % PALETTE.len()];
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.arbiters == *g)
            .filter_map(|p| {
                regions
                    .iter()
                    .position(|r| *r == p.regions)
                    .map(|i| (i as f64, p.throughput))
            })
            .collect();
        let label = g
            .map(|a| format!("{a} arbiter(s)"))
            .unwrap_or_else(|| "server default".into());
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(chart_err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
            .map_err(chart_err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(chart_err)?;
    root.present().map_err(chart_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Outcome, Recorder};
    use std::time::Duration;

    fn phase(name: &str, lat_ms: u64, n: u64) -> PhaseResult {
        let mut rec = Recorder::new();
        for i in 0..n {
            rec.record(
                "get",
                Duration::from_millis(lat_ms),
                Duration::from_millis(i * 10),
                Outcome::Ok,
                1,
            );
        }
        PhaseResult {
            name: name.into(),
            mode: Mode::Closed,
            connections: 4,
            summary: rec.summary(Duration::from_secs(1)),
            server_fsyncs: None,
            cpu: None,
        }
    }

    #[test]
    fn the_server_text_gives_the_request_threads_share_when_read() {
        let c = |server_us, request_threads_us| crate::cpu::CpuPerOp {
            server_us,
            request_threads_us,
            client_us: 12.0,
            machine: None,
        };
        assert_eq!(
            server_text(&c(Some(26.74), Some(23.41))),
            "server 26.7 µs (request threads 23.4), "
        );
        assert_eq!(server_text(&c(Some(17.5), None)), "server 17.5 µs, ");
        assert_eq!(server_text(&c(None, None)), "");
    }

    #[test]
    fn the_machine_text_shows_steal_only_when_there_was_some_and_the_rest_when_known() {
        let m = crate::cpu::MachineUse {
            cores: 2,
            busy_cores: 1.954,
            steal_cores: 0.012,
            others_us: Some(0.25),
        };
        assert_eq!(
            machine_text(m),
            " (machine: 1.95 of 2 cores busy, 0.01 stolen, the rest 0.2 µs)"
        );
        let quiet = crate::cpu::MachineUse {
            steal_cores: 0.001,
            others_us: None,
            ..m
        };
        assert_eq!(machine_text(quiet), " (machine: 1.95 of 2 cores busy)");
    }

    #[test]
    fn the_ratio_to_healthz_counts_successful_operations_only() {
        let baseline = phase("baseline", 1, 200);
        let mut rec = Recorder::new();
        for i in 0..200u64 {
            let outcome = if i % 2 == 0 {
                Outcome::Ok
            } else {
                Outcome::Status(503)
            };
            let at = Duration::from_millis(i * 5);
            rec.record("get", Duration::from_millis(1), at, outcome, 1);
        }
        let run = PhaseResult {
            name: "run".into(),
            mode: Mode::Closed,
            connections: 4,
            summary: rec.summary(Duration::from_secs(1)),
            server_fsyncs: None,
            cpu: None,
        };
        let r = Ratio::of(&run, &[&baseline]);
        assert!((r.throughput - 0.5).abs() < 1e-9, "{}", r.throughput);
    }

    #[test]
    fn the_ratio_to_the_ceiling_uses_the_mean_of_the_ceilings_before_and_after() {
        let run = phase("run", 1, 100);
        let before = phase("ceiling", 1, 200);
        let after = phase("ceiling-after", 1, 300);
        let r = Ratio::of(&run, &[&run]).with_ceiling(&run, &[&before, &after]);
        // 100 ops against a mean of 250 in the same one-second phases.
        let c = r.ceiling.expect("a ceiling was measured");
        assert!((c - 0.4).abs() < 1e-9, "{c}");
        assert_eq!(
            Ratio::of(&run, &[&run]).with_ceiling(&run, &[]).ceiling,
            None
        );
    }

    fn params() -> Params {
        Params {
            rows: 10,
            value_size: 10,
            multiget: 2,
            records: 10,
            field_length: 100,
            distribution: None,
            regions: Some(4),
            no_load: false,
            load_batch: 10,
            expected_ops: 0,
            users: 1,
            urls: 1,
            sites: 1,
            edges: 1,
            cas_rows: 4,
            counter_hours: 0,
            nonce: 1,
        }
    }

    fn result() -> RunResult {
        let baseline = phase("baseline", 1, 200);
        let run = phase("run", 2, 100);
        RunResult {
            tool: "kura-load".into(),
            version: "0".into(),
            started_at_unix: 1,
            machine: Machine {
                hostname: "h".into(),
                cores: 2,
                cpu: "c".into(),
                os: "o".into(),
            },
            target: "127.0.0.1:1".into(),
            workload: "random-read".into(),
            params: params(),
            connections: 4,
            client_threads: 2,
            mode: Mode::Open { rate: 100.0 },
            duration_s: Some(1.0),
            ops: None,
            ratios: vec![Ratio::of(&run, &[&baseline])],
            disk: None,
            rounds: None,
            ceiling: None,
            ceiling_after: None,
            baseline: Some(baseline),
            baseline_after: None,
            phases: vec![run],
            crash: Some(CrashReport {
                server: "127.0.0.1:1".into(),
                kill_after_s: 0.5,
                restart_ms: 2.0,
                healthy_ms: 120.0,
                recovery_ms: Some(130.5),
            }),
            verification: Verification {
                checked: true,
                failures: vec!["x skipped".into()],
                notes: vec![],
            },
            passed: false,
        }
    }

    #[test]
    fn a_median_takes_the_middle_value_or_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn each_round_compares_its_own_slices_and_the_medians_are_printed() {
        let rounds = Rounds {
            secs: 1.0,
            rounds: vec![
                Round {
                    ceiling: 100.0,
                    healthz: 90.0,
                    run: 60.0,
                },
                // The machine slowed by half: the round's ratios do not move.
                Round {
                    ceiling: 50.0,
                    healthz: 45.0,
                    run: 30.0,
                },
                Round {
                    ceiling: 80.0,
                    healthz: 0.0,
                    run: 64.0,
                },
            ],
        };
        assert_eq!(rounds.run_x_ceiling(), vec![0.6, 0.6, 0.8]);
        assert_eq!(rounds.healthz_x_ceiling(), vec![0.9, 0.9, 0.0]);
        // A slice that answered nothing gives no ratio, and the median leaves the round out.
        assert!(rounds.run_x_healthz()[2].is_nan());
        let md = rounds.markdown();
        assert!(md.contains("9 slices of 1 s each"), "{md}");
        assert!(
            md.contains("| 2 | 50 | 45 | 30 | 0.60 | 0.67 | 0.90 |"),
            "{md}"
        );
        assert!(md.contains("| 3 | 80 | 0 | 64 | 0.80 | - | 0.00 |"), "{md}");
        assert!(md.contains("run x ceiling **0.60**"), "{md}");
        assert!(md.contains("run x healthz **0.67**"), "{md}");
        assert!(md.contains("/healthz x ceiling **0.90**"), "{md}");
    }

    #[test]
    fn ratios_compare_a_phase_with_the_healthz_baseline() {
        let r = result();
        let ratio = &r.ratios[0];
        assert!((ratio.throughput - 0.5).abs() < 1e-9);
        assert!((ratio.p50 - 2.0).abs() < 0.01);
    }

    #[test]
    fn run_result_round_trips_through_json() {
        let r = result();
        let text = serde_json::to_string(&r).expect("serialize");
        let back: RunResult = serde_json::from_str(&text).expect("deserialize");
        assert_eq!(back, r);
        let v: serde_json::Value = serde_json::from_str(&text).expect("value");
        assert_eq!(v["mode"]["mode"], "open");
        assert_eq!(v["mode"]["rate"], 100.0);
        assert_eq!(v["params"]["regions"], 4);
        assert_eq!(v["baseline"]["summary"]["ops"], 200);
    }

    #[test]
    fn summary_states_ratios_and_failures() {
        let md = summary_markdown(&result());
        assert!(
            md.contains("| run | closed | 4 | 100 | 100 | 0.50 |"),
            "{md}"
        );
        assert!(md.contains("Correctness: FAILED"));
        assert!(md.contains("4 connections, 2 client threads"), "{md}");
        assert!(md.contains("FAIL: x skipped"));
        assert!(
            md.contains("recovery time, kill → first successful operation: 130.5 ms"),
            "{md}"
        );
    }

    #[test]
    fn charts_are_written_as_svg() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_run(&result(), dir.path()).expect("write");
        let svg = std::fs::read_to_string(dir.path().join("chart.svg")).expect("chart");
        assert!(
            svg.starts_with("<svg") && svg.contains("polyline"),
            "{}",
            &svg[..200.min(svg.len())]
        );
        let json = std::fs::read_to_string(dir.path().join("result.json")).expect("json");
        assert!(json.contains("\"workload\": \"random-read\""));
        let pts = vec![
            SweepPoint {
                arbiters: Some(1),
                regions: 1,
                throughput: 10.0,
                ratio: 0.1,
                p50_us: 1,
                p99_us: 2,
                errors: 0,
                passed: true,
            },
            SweepPoint {
                arbiters: Some(1),
                regions: 2,
                throughput: 20.0,
                ratio: 0.2,
                p50_us: 1,
                p99_us: 2,
                errors: 0,
                passed: true,
            },
        ];
        let path = dir.path().join("sweep.svg");
        sweep_chart("w", &pts, &path).expect("sweep chart");
        assert!(std::fs::read_to_string(&path)
            .expect("svg")
            .contains("polyline"));
        let md = sweep_markdown("w", &result().machine, &pts);
        assert!(md.contains("| 1 | 2 | 20 | 0.20 |"), "{md}");
    }
}
