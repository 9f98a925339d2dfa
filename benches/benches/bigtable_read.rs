//! What Kura's tier adds to a bare gRPC read of the same row, on Google's Bigtable emulator.
//!
//! `cargo bench -p kura-bench --bench bigtable_read -- [--kura PATH] [--secs 5] [-c 8]
//! [--rounds 3] [--json FILE]`
//!
//! One emulator, one Kura server on it (`--backend bigtable`), one row written through Kura
//! (table `bt_read`, one cell of `--value-size` bytes). Then, in alternation for `--rounds`
//! rounds of `--secs` each, the same row is read by `-c` concurrent closed-loop workers:
//! - **gRPC**: `ReadRows` of that one row key straight to the emulator (bigtable_rs, one
//!   channel shared by the workers, the newest cell of each column), decoded into cells;
//! - **Kura**: `GET /bt_read/{row}` over HTTP/1.1 keep-alive, one connection per worker.
//!
//! The emulator is an in-memory test double: only the ratios (Kura / gRPC latency, Kura / gRPC
//! throughput) mean anything, not the absolute figures. Exit status 0 ok (or skipped: no
//! server binary or no emulator when run without arguments by a plain `cargo bench`), 1 a
//! read returned the wrong row, 2 the measurement could not be made.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bigtable_rs::bigtable::BigTableConnection;
use bigtable_rs::google::bigtable::v2::{row_filter::Filter, ReadRowsRequest, RowFilter, RowSet};
use clap::Parser;
use hdrhistogram::Histogram;
use kura_bench::cellset::{self, CellRef};
use kura_bench::client::Conn;
use kura_bench::server::{Fleet, FleetSpec, SpawnBackend};

const TABLE: &str = "bt_read";
const ROW: &str = "row-0001";
const COLUMN: &[u8] = b"f:q";

#[derive(Debug, Parser)]
#[command(name = "bigtable_read")]
struct Args {
    /// The Kura server binary (default: `kura` beside this bench's target directory).
    #[arg(long)]
    kura: Option<PathBuf>,
    /// Seconds per measured phase.
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// Concurrent readers (gRPC tasks / HTTP connections).
    #[arg(long, short = 'c', default_value_t = 8)]
    connections: usize,
    /// gRPC then Kura, this many times (the ratios use the sums).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Bytes of the row's one value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Client runtime threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Also write the figures here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// What one phase measured.
struct Phase {
    ops: u64,
    wrong: u64,
    errors: u64,
    elapsed: Duration,
    hist: Histogram<u64>,
}

impl Phase {
    fn new() -> Phase {
        Phase {
            ops: 0,
            wrong: 0,
            errors: 0,
            elapsed: Duration::ZERO,
            hist: Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds"),
        }
    }
    fn merge(&mut self, o: &Phase) {
        self.ops += o.ops;
        self.wrong += o.wrong;
        self.errors += o.errors;
        self.elapsed += o.elapsed;
        let _ = self.hist.add(&o.hist);
    }
    fn throughput(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    fn us(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64
    }
}

/// Run `op` on `workers` closed-loop tasks for `secs`; `op` returns Ok(true) for a right answer.
async fn measure<F, Fut>(workers: usize, secs: f64, op: F) -> Phase
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Result<bool, String>> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut handles = Vec::new();
    for idx in 0..workers {
        let (stop, op) = (stop.clone(), op.clone());
        handles.push(tokio::spawn(async move {
            let mut p = Phase::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let r = op(idx).await;
                let us = t.elapsed().as_micros() as u64;
                match r {
                    Ok(true) => {
                        p.ops += 1;
                        p.hist.saturating_record(us.max(1));
                    }
                    Ok(false) => p.wrong += 1,
                    Err(_) => p.errors += 1,
                }
            }
            p
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let mut total = Phase::new();
    for h in handles {
        if let Ok(p) = h.await {
            total.merge(&p);
        }
    }
    total.elapsed = elapsed;
    total
}

fn default_kura() -> Option<PathBuf> {
    // target/release/deps/bigtable_read-HASH → target/release/kura
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("kura");
    p.is_file().then_some(p)
}

async fn run(args: Args, kura: PathBuf, emu_host: String) -> Result<i32, String> {
    let fleet = Fleet::start(&FleetSpec {
        binary: &kura,
        servers: 1,
        backend: SpawnBackend::Bigtable,
        emulator_host: Some(&emu_host),
        arbiters: None,
        durability: None,
        extra: &[],
        log_dir: None,
    })
    .await
    .map_err(|e| format!("starting kura: {e}"))?;
    let addr = fleet.addrs()[0].clone();
    let timeout = Duration::from_secs(10);

    // The row, written through Kura.
    let mut conn = Conn::new(&addr, timeout).map_err(|e| e.to_string())?;
    kura_bench::workload::recreate_table(&mut conn, TABLE, &["f"], None)
        .await
        .map_err(|e| format!("creating {TABLE}: {e}"))?;
    let value: Vec<u8> = (0..args.value_size)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let body = cellset::one_row(
        ROW.as_bytes(),
        &[CellRef {
            column: COLUMN,
            value: &value,
        }],
    );
    let r = conn
        .put_json(&format!("/{TABLE}/{ROW}"), body)
        .await
        .map_err(|e| format!("writing the row: {e}"))?;
    if r.status != 200 {
        return Err(format!("writing the row: HTTP {}", r.status));
    }

    // The bare gRPC client: one channel, as Kura's own.
    let bt = BigTableConnection::new_with_emulator(&emu_host, "p", "i", true, 1, None)
        .map_err(|e| format!("gRPC client: {e}"))?
        .client();
    let table_name = bt.get_full_table_name(TABLE);
    let grpc_read = {
        let (bt, table_name, value) = (bt.clone(), table_name.clone(), value.clone());
        move |_idx: usize| {
            let (mut bt, table_name, value) = (bt.clone(), table_name.clone(), value.clone());
            async move {
                let req = ReadRowsRequest {
                    table_name,
                    rows: Some(RowSet {
                        row_keys: vec![ROW.as_bytes().to_vec()],
                        row_ranges: vec![],
                    }),
                    filter: Some(RowFilter {
                        filter: Some(Filter::CellsPerColumnLimitFilter(1)),
                    }),
                    rows_limit: 1,
                    ..ReadRowsRequest::default()
                };
                let rows = bt.read_rows(req).await.map_err(|e| e.to_string())?;
                Ok(rows.len() == 1
                    && rows[0]
                        .1
                        .iter()
                        .any(|c| c.qualifier == b"q" && c.value == value))
            }
        }
    };
    let conns: Vec<Arc<tokio::sync::Mutex<Conn>>> = (0..args.connections)
        .map(|_| Conn::new(&addr, timeout).map(|c| Arc::new(tokio::sync::Mutex::new(c))))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let b64_value = cellset::b64(&value);
    let kura_read = {
        let conns = conns.clone();
        move |idx: usize| {
            let (conn, b64_value) = (conns[idx].clone(), b64_value.clone());
            async move {
                let r = conn
                    .lock()
                    .await
                    .get(&format!("/{TABLE}/{ROW}"))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(r.status == 200
                    && std::str::from_utf8(&r.body).is_ok_and(|b| b.contains(&b64_value)))
            }
        }
    };

    // Warm both paths (connections dialled, schema cached), then alternate.
    measure(args.connections, 0.5, grpc_read.clone()).await;
    measure(args.connections, 0.5, kura_read.clone()).await;
    let (mut grpc, mut kura_p) = (Phase::new(), Phase::new());
    for round in 0..args.rounds.max(1) {
        let g = measure(args.connections, args.secs, grpc_read.clone()).await;
        let k = measure(args.connections, args.secs, kura_read.clone()).await;
        eprintln!(
            "round {}: gRPC {:.0} reads/s p50 {:.0} us, Kura GET {:.0} reads/s p50 {:.0} us",
            round + 1,
            g.throughput(),
            g.us(0.5),
            k.throughput(),
            k.us(0.5)
        );
        grpc.merge(&g);
        kura_p.merge(&k);
    }
    drop(fleet);

    let ratio = |k: f64, g: f64| k / g.max(1e-9);
    let (lat50, lat99, tput) = (
        ratio(kura_p.us(0.5), grpc.us(0.5)),
        ratio(kura_p.us(0.99), grpc.us(0.99)),
        ratio(kura_p.throughput(), grpc.throughput()),
    );
    println!(
        "| {} readers, {} x {} s each | Kura GET / bare gRPC ReadRows |",
        args.connections, args.rounds, args.secs
    );
    println!("|---|---|");
    println!("| p50 latency | {lat50:.2} |");
    println!("| p99 latency | {lat99:.2} |");
    println!("| throughput | {tput:.2} |");
    let failures = grpc.wrong + kura_p.wrong + grpc.errors + kura_p.errors;
    println!(
        "(reads: gRPC {} ok, {} wrong, {} errors; Kura {} ok, {} wrong, {} errors)",
        grpc.ops, grpc.wrong, grpc.errors, kura_p.ops, kura_p.wrong, kura_p.errors
    );
    if let Some(path) = &args.json {
        let j = serde_json::json!({
            "connections": args.connections, "rounds": args.rounds, "secs": args.secs,
            "value_size": args.value_size,
            "grpc": { "ops": grpc.ops, "throughput": grpc.throughput(), "p50_us": grpc.us(0.5),
                      "p99_us": grpc.us(0.99), "wrong": grpc.wrong, "errors": grpc.errors },
            "kura": { "ops": kura_p.ops, "throughput": kura_p.throughput(), "p50_us": kura_p.us(0.5),
                      "p99_us": kura_p.us(0.99), "wrong": kura_p.wrong, "errors": kura_p.errors },
            "ratio": { "p50": lat50, "p99": lat99, "throughput": tput },
        });
        std::fs::write(path, j.to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(if failures > 0 || grpc.ops == 0 || kura_p.ops == 0 {
        eprintln!("bigtable_read: some reads failed or returned the wrong row");
        1
    } else {
        0
    })
}

fn main() {
    let argv: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    let bare = argv.len() == 1;
    let args = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    let Some(kura) = args.kura.clone().or_else(default_kura) else {
        if bare {
            eprintln!("bigtable_read: no kura binary beside this bench (build `-p kura --release`, or pass --kura PATH); skipped");
            return;
        }
        eprintln!("bigtable_read: no kura binary; pass --kura PATH");
        std::process::exit(2);
    };
    let emu = match std::panic::catch_unwind(kura_bigtable::emulator::Emulator::start) {
        Ok(e) => e,
        Err(_) if bare => {
            eprintln!("bigtable_read: no Bigtable emulator; skipped");
            return;
        }
        Err(_) => std::process::exit(2),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
        .expect("tokio runtime");
    let host = emu.host.clone();
    let code = match rt.block_on(run(args, kura, host)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bigtable_read: {e}");
            2
        }
    };
    drop(rt);
    drop(emu);
    std::process::exit(code);
}
