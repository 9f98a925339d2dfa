//! Actor-layer benches (no HTTP): what the router/region topology costs and how it scales.
//!
//! - `round_trip`: one get / one put (durability none) through the handle, routing table and a
//!   region actor and back. Watch the per-op time: it is the floor every HTTP request pays.
//! - `point_ops/arbiters_{1,2}`: 64 concurrent callers doing gets and puts over 8 regions,
//!   with 1 vs 2 arbiter threads, the callers on a thread of their own (as the HTTP workers
//!   are with `--thread-per-core false`): on a 2-core machine the callers' thread takes its
//!   share of the same two cores, which bounds the ratio well below 2.
//! - `point_ops_on_arbiters/arbiters_{1,2}`: the same operations with the callers running on
//!   the arbiters themselves and the arbiters pinned one per CPU (thread per core, the
//!   server's default): how the shared-nothing topology scales with its threads when it has
//!   the cores to itself.
//! - `point_ops_no_crossing/arbiters_{1,2}`: `point_ops_on_arbiters` with each caller
//!   addressing only the regions of its own arbiter: the topology's scaling when no request
//!   crosses threads, and so (set against `point_ops_on_arbiters`) the cost of the crossings.
//! - `point_ops_alternating/{arbiters_2_vs_1,crossing_vs_local}`: the two ratios above measured
//!   in alternating rounds within one process: a shared VM's speed drifts more between two
//!   benches a minute apart than these effects. **The scaling target (2 arbiters >= 1.7x of 1)
//!   is read here**, on stderr: the median time ratio, also split by how far apart the VM had
//!   its two vCPUs during each turn (the time a cache line takes to pass between them).
//!
//! In every `point_ops*` bench the callers take a round's operations from one shared count as
//! they go ([`Ops`]), as a duration-bound load does: a thread the VM runs slower for a while
//! does fewer of them instead of holding up the round with a fixed share.
//! - `merged_scan/regions_{1,8}`: a 1,000-row scan of a 10,000-row table split into 1 vs 8
//!   regions (fan-out + k-way merge). Watch the ratio (target: 8 regions >= 0.5x of 1).
//! - `sync_writes/senders_{1,64}`: writes with `sync` durability from 1 vs 64 concurrent
//!   senders into one region. Watch "writes per fsync" printed on stderr (target: 64 senders
//!   >= 10x more writes per fsync than 1) and the per-write time.
//!
//! Run: `cargo bench -p kura-bench --bench actors`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kura_actors::storage::Durability;
use kura_actors::*;
use std::time::{Duration, Instant};

/// The allocator the `kura` server ships with (`src/main.rs`): the figures are the server's.
/// glibc's malloc locks an arena for every free of memory another thread allocated, and the
/// actors hand every request and answer across threads.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Memory as the `kura` server has it: transparent huge pages off (`src/main.rs`; a 2 MiB page
/// is zeroed in one fault that stalls its thread, 3% of a 2-arbiter run here).
fn server_like_memory() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        eprintln!(
            "could not turn transparent huge pages off ({e}): figures differ from the server's"
        );
    }
}

fn config(dir: &std::path::Path, arbiters: usize, durability: Durability, pin: bool) -> KuraConfig {
    server_like_memory();
    let mut c = KuraConfig::new(dir);
    c.pin_arbiters = pin;
    c.arbiters = arbiters;
    c.durability = durability;
    c.split_threshold = None;
    c.in_flight_limit = 4096;
    c
}

fn table(name: &str, regions: u32) -> TableDescriptor {
    let mut d = TableDescriptor::new(name, vec![FamilyDescriptor::new("cf")]);
    d.salt = SaltConfig {
        buckets: 64,
        prefix_len: None,
    };
    d.initial_regions = Some(regions);
    d
}

fn key(i: usize) -> Vec<u8> {
    format!("row{i:08}").into_bytes()
}

fn put(row: Vec<u8>, value: &[u8]) -> RowMutation {
    RowMutation {
        row,
        mutations: vec![Mutation::Put {
            family: b"cf".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: None,
            value: value.to_vec(),
        }],
    }
}

/// Start a topology in `dir` with table `t` of `regions` regions holding `rows` rows of 100 bytes,
/// flushed to segments.
async fn load(
    dir: &std::path::Path,
    arbiters: usize,
    durability: Durability,
    regions: u32,
    rows: usize,
    pin: bool,
) -> Kura {
    let kura = Kura::start(config(dir, arbiters, durability, pin))
        .await
        .expect("start");
    kura.create_table(table("t", regions))
        .await
        .expect("create");
    for chunk in (0..rows).collect::<Vec<_>>().chunks(1000) {
        let batch = chunk.iter().map(|&i| put(key(i), &[7u8; 100])).collect();
        kura.mutate_rows("t", batch).await.expect("load");
    }
    kura.flush("t").await.expect("flush");
    kura
}

/// A running topology with one loaded table, and the actix system that drives it.
struct Fixture {
    sys: actix_rt::SystemRunner,
    kura: Kura,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new(arbiters: usize, durability: Durability, regions: u32, rows: usize) -> Fixture {
        Fixture::start(arbiters, durability, regions, rows, false)
    }

    /// With `pin`, arbiter `i` runs on CPU `i` (`KuraConfig::pin_arbiters`).
    fn start(
        arbiters: usize,
        durability: Durability,
        regions: u32,
        rows: usize,
        pin: bool,
    ) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let sys = actix_rt::System::new();
        let kura = sys.block_on(load(dir.path(), arbiters, durability, regions, rows, pin));
        Fixture {
            sys,
            kura,
            _dir: dir,
        }
    }

    fn close(self) {
        let kura = self.kura;
        self.sys
            .block_on(async move { kura.shutdown().await.expect("shutdown") });
    }
}

fn round_trip(c: &mut Criterion) {
    let f = Fixture::new(2, Durability::None, 1, 1000);
    let mut g = c.benchmark_group("round_trip");
    g.throughput(Throughput::Elements(1));
    g.bench_function("get", |b| {
        b.iter_custom(|iters| {
            f.sys.block_on(async {
                let read = ReadSpec::default();
                let start = Instant::now();
                for i in 0..iters as usize {
                    let row = f.kura.get("t", &key(i % 1000), &read).await.expect("get");
                    assert!(row.is_some());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("put", |b| {
        b.iter_custom(|iters| {
            f.sys.block_on(async {
                let start = Instant::now();
                for i in 0..iters as usize {
                    f.kura
                        .mutate("t", put(key(i % 1000), b"v"))
                        .await
                        .expect("put");
                }
                start.elapsed()
            })
        })
    });
    g.finish();
    f.close();
}

/// The operations of one round, handed out to its callers a few at a time: a caller takes the
/// next ones when it is done with its own, so a caller on a thread that runs faster does more
/// of them and the round measures the topology's throughput (as a duration-bound load does),
/// not the time its slowest thread takes for a fixed share. Operation `n` is a get when `n` is
/// even, else a put, of the row picked by a hash of `n`.
struct Ops {
    next: std::sync::atomic::AtomicUsize,
    total: usize,
}

impl Ops {
    /// Operations taken at a time: the counter's cache line moves between threads once per
    /// batch, not per operation.
    const BATCH: usize = 8;

    fn new(total: usize) -> std::sync::Arc<Ops> {
        std::sync::Arc::new(Ops {
            next: std::sync::atomic::AtomicUsize::new(0),
            total,
        })
    }

    /// The next batch of operation numbers, empty when the round is done.
    fn take(&self) -> std::ops::Range<usize> {
        let start = self
            .next
            .fetch_add(Self::BATCH, std::sync::atomic::Ordering::Relaxed);
        start.min(self.total)..(start + Self::BATCH).min(self.total)
    }
}

/// A caller: operations of `ops` one after the other until none are left, half gets, half
/// puts, over the rows `rows` (indexes into the 10,000 loaded rows; `None`: all of them).
async fn caller(kura: &Kura, ops: &Ops, rows: Option<&[usize]>) {
    let read = ReadSpec::default();
    loop {
        let batch = ops.take();
        if batch.is_empty() {
            return;
        }
        for n in batch {
            // A multiplicative hash of `n`, so that gets (even `n`) and puts (odd `n`) both
            // range over every row: a plain odd multiplier modulo an even row count kept the
            // gets on even rows and the puts on odd ones.
            let pick = ((n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
            let i = match rows {
                Some(rows) => rows[pick % rows.len()],
                None => pick % 10_000,
            };
            if n % 2 == 0 {
                kura.get("t", &key(i), &read).await.expect("get");
            } else {
                kura.mutate("t", put(key(i), b"v")).await.expect("put");
            }
        }
    }
}

/// `ops` operations from `callers` concurrent callers, half gets, half puts.
async fn mixed_ops(kura: &Kura, callers: usize, ops: usize) {
    let ops = Ops::new(ops);
    let tasks = (0..callers).map(|_| caller(kura, &ops, None));
    futures::future::join_all(tasks).await;
}

/// `mixed_ops` with the callers spread over the topology's own arbiters (`Kura::arbiters`),
/// `callers / arbiters` on each, as a thread-per-core server's handlers would run: the
/// arbiters are then the only busy threads, and the ratio of 2 arbiters to 1 is how the
/// shared-nothing topology scales with its threads (a caller reaches a region on the other
/// arbiter through its mailbox, as any caller does).
///
/// With `local_rows`, the callers on arbiter `a` address only the rows in `local_rows[a]`, those
/// of the regions on their own arbiter: no request crosses threads.
async fn mixed_ops_on_arbiters(
    kura: &Kura,
    callers: usize,
    ops: usize,
    local_rows: Option<&[Vec<usize>]>,
) {
    let arbiters = kura.arbiters();
    let per_arbiter = callers / arbiters.len();
    let ops = Ops::new(ops);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(arbiters.len());
    for (a, arbiter) in arbiters.iter().enumerate() {
        let kura = kura.clone();
        let tx = tx.clone();
        let rows = local_rows.map(|r| r[a].clone());
        let ops = ops.clone();
        arbiter.spawn(async move {
            let tasks = (0..per_arbiter).map(|_| caller(&kura, &ops, rows.as_deref()));
            futures::future::join_all(tasks).await;
            tx.send(()).await.expect("bench waits");
        });
    }
    drop(tx);
    while rx.recv().await.is_some() {}
}

/// Half gets, half puts from 64 callers over 8 regions, with 1 and with 2 arbiters.
/// `point_ops` (durability `none`) is CPU-bound: the callers' thread needs the same two cores
/// as the arbiters. `point_ops_sync` uses the default durability (`sync`): a region's commit
/// blocks its arbiter for an fsync, so a second arbiter lets two regions commit at once.
fn point_ops(c: &mut Criterion) {
    point_ops_with(c, "point_ops", Durability::None, 4096, false);
}

/// `point_ops` with the callers on the arbiters (`mixed_ops_on_arbiters`), the arbiters pinned
/// one per CPU: thread per core, the topology alone on the machine's cores.
fn point_ops_local(c: &mut Criterion) {
    point_ops_with(c, "point_ops_on_arbiters", Durability::None, 32768, true);
}

fn point_ops_sync(c: &mut Criterion) {
    point_ops_with(c, "point_ops_sync", Durability::Sync, 1024, false);
}

/// `point_ops_on_arbiters` with every caller addressing only rows of the regions on its own
/// arbiter: what the topology does when no request crosses threads. Set against
/// `point_ops_on_arbiters`, the difference is the cost of the crossings (half of the
/// operations there, with 2 arbiters).
fn point_ops_no_crossing(c: &mut Criterion) {
    let ops = 32768;
    let mut g = c.benchmark_group("point_ops_no_crossing");
    g.throughput(Throughput::Elements(ops as u64));
    g.sample_size(20);
    for arbiters in [1usize, 2] {
        let f = Fixture::start(arbiters, Durability::None, 8, 10_000, true);
        let local = f.sys.block_on(rows_by_arbiter(&f.kura, arbiters));
        g.bench_with_input(BenchmarkId::new("arbiters", arbiters), &arbiters, |b, _| {
            b.iter_custom(|iters| {
                f.sys.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        mixed_ops_on_arbiters(&f.kura, 64, ops, Some(&local)).await;
                    }
                    start.elapsed()
                })
            })
        });
        f.close();
    }
    g.finish();
}

/// Workloads measured in alternation, one round of each per turn within a fraction of a
/// second, so that their ratios hold on a shared VM whose speed drifts by tens of percent from
/// one minute to the next (the two halves of `point_ops_on_arbiters`, a minute apart, can
/// differ by more than the effect being measured). Criterion times the last workload of each
/// turn; stderr gets the median and quartiles of the turns' time ratios (each other workload /
/// the last), of each workload's round times and of the handoff time below. Every round adds
/// versions to the same rows, so later rounds are slower for all (memtables grow).
///
/// - `arbiters_2_vs_1`: `point_ops_on_arbiters` on three topologies side by side in one
///   process: 1 arbiter pinned to CPU 0, 1 arbiter pinned to CPU 1, 2 arbiters: the issue's
///   scaling ratio (target >= 1.7x), against each CPU alone and against their mean.
/// - `crossing_vs_local`: on one 2-arbiter topology, rounds where the callers address every row
///   (half the requests cross threads) against rounds where each addresses only its own
///   arbiter's rows (`point_ops_no_crossing`): what crossing threads costs, as a time ratio.
///
/// Around each turn, [`cpu_handoff`] times a cache line passed between the first two CPUs (those
/// the pinned arbiters run on): the hypervisor of a 2-vCPU VM moves its vCPUs, and the time
/// tells how far apart they are. Each bench also reports its ratio over the turns whose handoff
/// fell in one band at both ends (turns that straddle a move are in none): under 30 ns, 30–100
/// ns, over 100 ns. What a band means depends on the host CPU; on the VMs of benches/README.md:
/// ~16 ns (Intel), the two hyperthreads of one core (one thread alone runs
/// faster, two share the core); 36–44 ns (Intel), two cores; ~22–25 ns (AMD EPYC),
/// two cores sharing a last-level cache; ~180–210 ns (AMD EPYC), two cores on
/// different core complexes, which share no cache (a crossing request pays that for every line
/// it moves).
fn point_ops_alternating(c: &mut Criterion) {
    let ops = 32768;
    let mut g = c.benchmark_group("point_ops_alternating");
    g.throughput(Throughput::Elements(ops as u64));
    g.sample_size(20);
    let dirs = [(); 3].map(|_| tempfile::tempdir().expect("tempdir"));
    let sys = actix_rt::System::new();
    let on_cpu0 = sys.block_on(load(dirs[0].path(), 1, Durability::None, 8, 10_000, true));
    let on_cpu1 = sys.block_on(load(dirs[1].path(), 1, Durability::None, 8, 10_000, true));
    sys.block_on(move_arbiter_to_second_cpu(&on_cpu1));
    let two = sys.block_on(load(dirs[2].path(), 2, Durability::None, 8, 10_000, true));
    let local = sys.block_on(rows_by_arbiter(&two, 2));
    // `sides` take turns; criterion times the last one. Each row of `turns`: one turn's round
    // times in ms, side by side, then the handoff times before and after it.
    let mut alternate = |name: &str, sides: &[(&str, &dyn Fn() -> Duration)]| {
        let last = sides.len() - 1;
        let mut turns: Vec<Vec<f64>> = Vec::new();
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    let before = cpu_handoff();
                    let mut turn = Vec::new();
                    for (i, (_, side)) in sides.iter().enumerate() {
                        let t = side();
                        turn.push(t.as_secs_f64() * 1e3);
                        if i == last {
                            took += t;
                        }
                    }
                    turn.extend([before, cpu_handoff()]);
                    turns.push(turn);
                }
                took
            })
        });
        // Empty when a filter left this bench out.
        if turns.is_empty() {
            return;
        }
        let column = |f: &dyn Fn(&[f64]) -> f64| turns.iter().map(|t| f(t)).collect::<Vec<_>>();
        let mut report = format!("point_ops_alternating/{name}, {} turns:", turns.len());
        let against = sides[last].0;
        for (i, (side, _)) in sides[..last].iter().enumerate() {
            let ratio = quartiles(column(&|t| t[i] / t[last]), 3);
            report += &format!("\n  time ratio {side} / {against}: {ratio}");
        }
        // The other sides' mean round time over the last side's, for one turn.
        let mean_ratio = |t: &[f64]| t[..last].iter().sum::<f64>() / last as f64 / t[last];
        if last > 1 {
            let ratio = quartiles(column(&mean_ratio), 3);
            report += &format!("\n  time ratio (their mean) / {against}: {ratio}");
        }
        // Turns by how far apart the VM had its two vCPUs (the handoff time at both ends).
        let bands: [(&str, std::ops::Range<f64>); 3] = [
            ("handoff under 30 ns", 0.0..30.0),
            ("handoff 30-100 ns", 30.0..100.0),
            ("handoff over 100 ns", 100.0..f64::INFINITY),
        ];
        for (band, range) in bands {
            let ratios: Vec<f64> = turns
                .iter()
                .filter(|t| range.contains(&t[last + 1]) && range.contains(&t[last + 2]))
                .map(|t| mean_ratio(t))
                .collect();
            if !ratios.is_empty() {
                let n = ratios.len();
                let q = quartiles(ratios, 3);
                report += &format!("\n  {band} ({n} turns): time ratio {q}");
            }
        }
        for (i, (side, _)) in sides.iter().enumerate() {
            report += &format!("\n  {side}: rounds {} ms", quartiles(column(&|t| t[i]), 1));
        }
        let handoffs = [last + 1, last + 2]
            .into_iter()
            .flat_map(|i| column(&|t| t[i]));
        report += &format!(
            "\n  CPU 0 <-> 1 cache-line handoff around them: {} ns",
            quartiles(handoffs.collect(), 1)
        );
        eprintln!("{report}");
    };
    let round = |kura: &Kura, rows: Option<&[Vec<usize>]>| {
        sys.block_on(async {
            let start = Instant::now();
            mixed_ops_on_arbiters(kura, 64, ops, rows).await;
            start.elapsed()
        })
    };
    alternate(
        "arbiters_2_vs_1",
        &[
            ("1 arbiter on CPU 0", &|| round(&on_cpu0, None)),
            ("1 arbiter on CPU 1", &|| round(&on_cpu1, None)),
            ("2 arbiters", &|| round(&two, None)),
        ],
    );
    alternate(
        "crossing_vs_local",
        &[
            ("crossing", &|| round(&two, None)),
            ("local", &|| round(&two, Some(&local))),
        ],
    );
    g.finish();
    sys.block_on(async move {
        for kura in [on_cpu0, on_cpu1, two] {
            kura.shutdown().await.expect("shutdown");
        }
    });
}

/// Re-pins the arbiter of a 1-arbiter topology (started pinned to the first CPU the process may
/// use) to the second.
async fn move_arbiter_to_second_cpu(kura: &Kura) {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let Some(&second) = cores.get(1) else {
        return;
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    kura.arbiters()[0].spawn(async move {
        core_affinity::set_for_current(second);
        let _ = tx.send(());
    });
    rx.await.expect("the arbiter runs");
}

/// "median M (quartiles Q1, Q3)" of `xs` (not empty), with `digits` decimals.
fn quartiles(mut xs: Vec<f64>, digits: usize) -> String {
    xs.sort_by(f64::total_cmp);
    let q = |f: f64| xs[((xs.len() - 1) as f64 * f).round() as usize];
    format!(
        "median {:.digits$} (quartiles {:.digits$}, {:.digits$})",
        q(0.5),
        q(0.25),
        q(0.75)
    )
}

/// Nanoseconds for one one-way handoff of a cache line between two threads pinned to the first
/// two CPUs the process may use (the CPUs the pinned arbiters run on), over 100,000 round trips.
fn cpu_handoff() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    const HANDOFFS: u64 = 200_000;
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let line = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        // Each side waits for its turn (its parity), then passes the line on.
        let side = |first: u64, core: Option<core_affinity::CoreId>| {
            if let Some(core) = core {
                core_affinity::set_for_current(core);
            }
            let mut i = first;
            while i < HANDOFFS {
                while line.load(Ordering::Acquire) != i {
                    std::hint::spin_loop();
                }
                line.store(i + 1, Ordering::Release);
                i += 2;
            }
        };
        // Both on threads of their own: pinning the bench's thread would outlast the call.
        let (first, second) = (cores.first().copied(), cores.get(1).copied());
        s.spawn(move || side(1, second));
        s.spawn(move || side(0, first));
    });
    start.elapsed().as_nanos() as f64 / HANDOFFS as f64
}

/// The loaded rows' indexes grouped by the arbiter their region runs on.
async fn rows_by_arbiter(kura: &Kura, arbiters: usize) -> Vec<Vec<usize>> {
    let regions = kura.regions("t").await.expect("regions");
    let mut out = vec![Vec::new(); arbiters];
    for i in 0..10_000 {
        let bucket = kura.bucket_of("t", &key(i)).expect("table").get();
        let region = regions
            .iter()
            .find(|r| r.bucket_start <= bucket && bucket < r.bucket_end)
            .expect("a region owns every bucket");
        out[region.arbiter].push(i);
    }
    out
}

/// `ops` mixed operations from 64 callers, 1 then 2 arbiters; `on_arbiters`: the callers run on
/// the (pinned) arbiters, else on the bench's own thread.
fn point_ops_with(
    c: &mut Criterion,
    group: &str,
    durability: Durability,
    ops: usize,
    on_arbiters: bool,
) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(ops as u64));
    g.sample_size(20);
    for arbiters in [1usize, 2] {
        let f = Fixture::start(arbiters, durability, 8, 10_000, on_arbiters);
        g.bench_with_input(BenchmarkId::new("arbiters", arbiters), &arbiters, |b, _| {
            b.iter_custom(|iters| {
                f.sys.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        if on_arbiters {
                            mixed_ops_on_arbiters(&f.kura, 64, ops, None).await;
                        } else {
                            mixed_ops(&f.kura, 64, ops).await;
                        }
                    }

                    start.elapsed()
                })
            })
        });
        f.close();
    }
    g.finish();
}

fn merged_scan(c: &mut Criterion) {
    let mut g = c.benchmark_group("merged_scan");
    g.throughput(Throughput::Elements(1000));
    for regions in [1u32, 8] {
        let f = Fixture::new(2, Durability::None, regions, 10_000);
        g.bench_with_input(BenchmarkId::new("regions", regions), &regions, |b, _| {
            b.iter_custom(|iters| {
                f.sys.block_on(async {
                    let start = Instant::now();
                    for i in 0..iters as usize {
                        let from = key((i * 997) % 9000);
                        let req = ScanRequest {
                            spec: ScanSpec::forward(&from, b""),
                            limit: Some(1000),
                            page: ScanLimits {
                                max_rows: 1000,
                                max_bytes: 16 << 20,
                            },
                        };
                        let page = f.kura.scan("t", req).await.expect("scan");
                        assert_eq!(page.rows.len(), 1000);
                    }
                    start.elapsed()
                })
            })
        });
        f.close();
    }
    g.finish();
}

fn sync_writes(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync_writes");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for senders in [1usize, 64] {
        let f = Fixture::new(2, Durability::Sync, 1, 0);
        let writes = 256;
        g.throughput(Throughput::Elements(writes as u64));
        let mut totals = (0u64, 0u64);
        g.bench_with_input(
            BenchmarkId::new("senders", senders),
            &senders,
            |b, &senders| {
                b.iter_custom(|iters| {
                    f.sys.block_on(async {
                        let before = f.kura.regions("t").await.expect("regions")[0].stats.clone();
                        let start = Instant::now();
                        for it in 0..iters as usize {
                            let tasks = (0..senders).map(|s| {
                                let kura = &f.kura;
                                async move {
                                    for n in 0..writes / senders {
                                        let row = key(it * writes + s * (writes / senders) + n);
                                        kura.mutate("t", put(row, b"v")).await.expect("put");
                                    }
                                }
                            });
                            futures::future::join_all(tasks).await;
                        }
                        let elapsed = start.elapsed();
                        let after = f.kura.regions("t").await.expect("regions")[0].stats.clone();
                        totals.0 += after.synced_writes - before.synced_writes;
                        totals.1 += after.fsyncs - before.fsyncs;
                        elapsed
                    })
                })
            },
        );
        // Skipped when a filter left this bench out.
        if totals.0 > 0 {
            eprintln!(
                "sync_writes/senders_{senders}: {} writes, {} fsyncs, {:.1} writes per fsync",
                totals.0,
                totals.1,
                totals.0 as f64 / totals.1.max(1) as f64
            );
        }
        f.close();
    }
    g.finish();
}

criterion_group!(
    benches,
    round_trip,
    point_ops,
    point_ops_local,
    point_ops_sync,
    point_ops_no_crossing,
    point_ops_alternating,
    merged_scan,
    sync_writes
);
criterion_main!(benches);
