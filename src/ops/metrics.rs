//! `GET /metrics`: Prometheus text exposition format 0.0.4, written by hand.
//!
//! Two sources feed one page:
//! - **HTTP figures**, recorded by [`MetricsMiddleware`] into process-wide atomic tables: request
//!   counts by endpoint kind, operation and status class, and latency histograms by endpoint kind
//!   and operation.
//! - **Store figures**, read at scrape time from [`kura_backend::Backend::regions`] for every table: per-region
//!   cells, bytes, log size, reads, writes, flushes, compactions, fsyncs and group-commit batch
//!   sizes, plus per-table region and split counts.
//!
//! # Invariants
//! 1. Label cardinality is bounded: requests are classified into a fixed set of endpoint kinds and
//!    operations ([`classify`]); the raw path never becomes a label value.
//! 2. Recording a request costs a handful of relaxed atomic additions and no lock, so wrapping the
//!    App does not move the `/healthz` throughput ceiling measurably.
//! 3. Counters only grow within a process. Region counters restart at zero when a region is
//!    reopened or created by a split (Prometheus treats that as a counter reset).
//! 4. `kura_scanners_open` is asked at every scrape from the scanner registry, which registers
//!    its counting function with [`register_scanner_count`]; ops keeps no scanner state.

use actix_web::dev::{forward_ready, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::Method;
use actix_web::{web, HttpResponse};
use futures::future::{ready, LocalBoxFuture, Ready};
use kura_backend::Store;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use crate::state::AppState;

/// Endpoint kinds: the first label of every HTTP series.
pub const ENDPOINTS: &[&str] = &[
    "healthz",
    "metrics",
    "admin",
    "ui",
    "apps_blog",
    "apps_actions",
    "apps_counter",
    "apps_graph",
    "apps_other",
    "root",
    "version",
    "status",
    "namespaces",
    "schema",
    "regions",
    "exists",
    "row",
    "scan",
    "scanner",
    "multiget",
    "other",
];

/// Operations: the second label of every HTTP series. For most endpoints it is the method; the
/// data endpoints name what the request does to the store.
pub const OPS: &[&str] = &[
    "get",
    "put",
    "post",
    "patch",
    "delete",
    "head",
    "other",
    "check_put",
    "check_delete",
    "increment",
    "append",
    "scan",
    "open",
    "next",
    "close",
    "flush",
    "compact",
    "split",
];

const STATUS_CLASSES: &[&str] = &["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Latency histogram bounds, seconds (the `le` labels). The last bucket is `+Inf`.
pub const LATENCY_BOUNDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

const NE: usize = ENDPOINTS.len();
const NO: usize = OPS.len();
const NS: usize = STATUS_CLASSES.len();
const NB: usize = LATENCY_BOUNDS.len() + 1;

/// Bounds in microseconds, so recording compares integers.
const LATENCY_BOUNDS_US: [u64; NB - 1] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Endpoint kind index, named for the classifier's readability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint(pub usize);
/// Operation index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op(pub usize);

fn ep(name: &str) -> Endpoint {
    Endpoint(ENDPOINTS.iter().position(|e| *e == name).unwrap_or(NE - 1))
}
fn op(name: &str) -> Op {
    Op(OPS.iter().position(|o| *o == name).unwrap_or(6))
}

impl Endpoint {
    /// The label value.
    pub fn name(self) -> &'static str {
        ENDPOINTS[self.0]
    }
}
impl Op {
    /// The label value.
    pub fn name(self) -> &'static str {
        OPS[self.0]
    }
}

/// Process-wide HTTP tables. Indexes: `[endpoint][op][status class]` and `[endpoint][op][bucket]`.
struct HttpTables {
    requests: Vec<AtomicU64>,
    buckets: Vec<AtomicU64>,
    sum_us: Vec<AtomicU64>,
    count: Vec<AtomicU64>,
    in_flight: AtomicI64,
}

impl HttpTables {
    fn new() -> Self {
        let n = |len: usize| (0..len).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        HttpTables {
            requests: n(NE * NO * NS),
            buckets: n(NE * NO * NB),
            sum_us: n(NE * NO),
            count: n(NE * NO),
            in_flight: AtomicI64::new(0),
        }
    }
}

fn http() -> &'static HttpTables {
    static TABLES: OnceLock<HttpTables> = OnceLock::new();
    TABLES.get_or_init(HttpTables::new)
}

/// Counts the open scanners of a store (the REST scanner registry registers one).
pub type ScannerCount = fn(&AppState) -> usize;

static SCANNER_SOURCE: OnceLock<ScannerCount> = OnceLock::new();

/// The scanner registry registers a function that counts its open scanners (from
/// `rest::configure`); every scrape asks it. The first registration wins.
pub fn register_scanner_count(count: ScannerCount) {
    let _ = SCANNER_SOURCE.set(count);
}

/// Open scanners of this store; 0 while no registry has registered.
fn scanners_open(state: &AppState) -> usize {
    SCANNER_SOURCE.get().map_or(0, |count| count(state))
}

/// How long `Kura::start` took (catalog, every region's segments and log replay), in
/// microseconds; 0 until the server reports it with [`record_startup`].
static STARTUP_US: AtomicU64 = AtomicU64::new(0);

/// `main` calls this with the time `Kura::start` took, so `/metrics` shows the recovery time.
pub fn record_startup(took: std::time::Duration) {
    STARTUP_US.store(
        u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

/// Admin operations performed through `/admin/`, by kind and result.
pub(crate) struct AdminCounters {
    pub flush: [AtomicU64; 2],
    pub compact_minor: [AtomicU64; 2],
    pub compact_major: [AtomicU64; 2],
    pub split: [AtomicU64; 2],
}

pub(crate) static ADMIN: AdminCounters = AdminCounters {
    flush: [AtomicU64::new(0), AtomicU64::new(0)],
    compact_minor: [AtomicU64::new(0), AtomicU64::new(0)],
    compact_major: [AtomicU64::new(0), AtomicU64::new(0)],
    split: [AtomicU64::new(0), AtomicU64::new(0)],
};

/// Counts one admin operation; `ok` selects the result label.
pub(crate) fn count_admin(counter: &[AtomicU64; 2], ok: bool) {
    counter[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
}

fn started_at() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// Records one finished request.
pub fn record(endpoint: Endpoint, op: Op, status: u16, elapsed_us: u64) {
    let t = http();
    let series = endpoint.0 * NO + op.0;
    let class = usize::from((status / 100).clamp(1, 5)) - 1;
    t.requests[series * NS + class].fetch_add(1, Ordering::Relaxed);
    let bucket = LATENCY_BOUNDS_US
        .iter()
        .position(|b| elapsed_us <= *b)
        .unwrap_or(NB - 1);
    t.buckets[series * NB + bucket].fetch_add(1, Ordering::Relaxed);
    t.sum_us[series].fetch_add(elapsed_us, Ordering::Relaxed);
    t.count[series].fetch_add(1, Ordering::Relaxed);
}

/// Classifies a request into a fixed endpoint kind and operation from its method, path and
/// query string, following the routes of `kura::configure` (HBase REST rowspecs, `/apps/`,
/// the ops endpoints). Never allocates.
pub fn classify(method: &Method, path: &str, query: &str) -> (Endpoint, Op) {
    let by_method = || match *method {
        Method::GET => op("get"),
        Method::PUT => op("put"),
        Method::POST => op("post"),
        Method::PATCH => op("patch"),
        Method::DELETE => op("delete"),
        Method::HEAD => op("head"),
        _ => op("other"),
    };
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let mut segs = trimmed.split('/');
    let first = segs.next().unwrap_or("");
    let second = segs.next();
    match first {
        "" => (ep("root"), by_method()),
        "healthz" => (ep("healthz"), by_method()),
        "metrics" => (ep("metrics"), by_method()),
        "ui" => (ep("ui"), by_method()),
        "version" => (ep("version"), by_method()),
        "status" => (ep("status"), by_method()),
        "namespaces" => (ep("namespaces"), by_method()),
        "admin" => {
            let last = trimmed.rsplit('/').next().unwrap_or("");
            let o = match (method, last) {
                (&Method::POST, "flush") => op("flush"),
                (&Method::POST, "compact") => op("compact"),
                (&Method::POST, "split") => op("split"),
                _ => by_method(),
            };
            (ep("admin"), o)
        }
        "apps" => {
            let e = match second {
                Some("blog") => ep("apps_blog"),
                Some("actions") => ep("apps_actions"),
                Some("counter") => ep("apps_counter"),
                Some("graph") => ep("apps_graph"),
                _ => ep("apps_other"),
            };
            (e, by_method())
        }
        _ => classify_table(method, second, segs.next().is_some(), query, by_method()),
    }
}

fn classify_table(
    method: &Method,
    second: Option<&str>,
    has_third: bool,
    query: &str,
    by_method: Op,
) -> (Endpoint, Op) {
    let Some(second) = second else {
        return (ep("other"), by_method);
    };
    match second {
        "schema" => (ep("schema"), by_method),
        "regions" => (ep("regions"), by_method),
        "exists" => (ep("exists"), by_method),
        "scanner" => {
            let o = match *method {
                Method::PUT | Method::POST => op("open"),
                Method::GET => op("next"),
                Method::DELETE => op("close"),
                _ => by_method,
            };
            (ep("scanner"), o)
        }
        s if s.starts_with("multiget") => (ep("multiget"), op("get")),
        "" => (ep("other"), by_method),
        s if s.ends_with('*') && !has_third && *method == Method::GET => (ep("scan"), op("scan")),
        _ => {
            let o = match *method {
                Method::GET | Method::HEAD => op("get"),
                Method::DELETE => op("delete"),
                Method::PUT | Method::POST => match check_param(query) {
                    Some("put") => op("check_put"),
                    Some("delete") => op("check_delete"),
                    Some("increment") => op("increment"),
                    Some("append") => op("append"),
                    _ => op("put"),
                },
                _ => by_method,
            };
            (ep("row"), o)
        }
    }
}

/// The value of `check=` in a raw query string, if any.
fn check_param(query: &str) -> Option<&str> {
    query.split('&').find_map(|kv| kv.strip_prefix("check="))
}

/// Decrements the in-flight gauge when the request ends, however it ends.
struct InFlight;
impl InFlight {
    fn enter() -> InFlight {
        http().in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight
    }
}
impl Drop for InFlight {
    fn drop(&mut self) {
        http().in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Actix middleware that records every request into the HTTP tables. `main.rs` wraps the App
/// with it: `App::new().wrap(kura::ops::metrics::MetricsMiddleware).configure(kura::configure)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct MetricsMiddleware;

impl<S, B> Transform<S, ServiceRequest> for MetricsMiddleware
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Transform = MetricsService<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        // Anchor the uptime clock at the first App built, not at the first scrape.
        let _ = started_at();
        ready(Ok(MetricsService { service }))
    }
}

/// The service [`MetricsMiddleware`] builds.
pub struct MetricsService<S> {
    service: S,
}

impl<S, B> Service<ServiceRequest> for MetricsService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let (endpoint, op) = classify(req.method(), req.path(), req.query_string());
        let start = Instant::now();
        let guard = InFlight::enter();
        let fut = self.service.call(req);
        Box::pin(async move {
            let res = fut.await;
            let status = match &res {
                Ok(r) => r.status().as_u16(),
                Err(e) => e.as_response_error().status_code().as_u16(),
            };
            let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
            record(endpoint, op, status, us);
            drop(guard);
            res
        })
    }
}

/// Escapes a label value per the text format (backslash, double quote, newline).
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn fmt_seconds(us: u64) -> String {
    format!("{}", us as f64 / 1e6)
}

/// Renders the HTTP tables.
fn render_http(out: &mut String) {
    let t = http();
    header(
        out,
        "kura_http_requests_total",
        "counter",
        "HTTP requests by endpoint kind, operation and status class.",
    );
    for (e, endpoint) in ENDPOINTS.iter().enumerate() {
        for (o, op) in OPS.iter().enumerate() {
            for (s, class) in STATUS_CLASSES.iter().enumerate() {
                let v = t.requests[(e * NO + o) * NS + s].load(Ordering::Relaxed);
                if v > 0 {
                    let _ = writeln!(
                        out,
                        "kura_http_requests_total{{endpoint=\"{endpoint}\",op=\"{op}\",\
                         status=\"{class}\"}} {v}"
                    );
                }
            }
        }
    }
    header(
        out,
        "kura_http_request_duration_seconds",
        "histogram",
        "HTTP request latency (until the response head is ready) by endpoint kind and operation.",
    );
    for (e, endpoint) in ENDPOINTS.iter().enumerate() {
        for (o, op) in OPS.iter().enumerate() {
            let series = e * NO + o;
            let count = t.count[series].load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            let labels = format!("endpoint=\"{endpoint}\",op=\"{op}\"");
            let mut cumulative = 0u64;
            let counts = &t.buckets[series * NB..(series + 1) * NB];
            for (b, n) in counts.iter().enumerate() {
                cumulative += n.load(Ordering::Relaxed);
                let le = LATENCY_BOUNDS
                    .get(b)
                    .map_or_else(|| "+Inf".to_string(), f64::to_string);
                let _ = writeln!(
                    out,
                    "kura_http_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
                );
            }
            let sum = fmt_seconds(t.sum_us[series].load(Ordering::Relaxed));
            let _ = writeln!(
                out,
                "kura_http_request_duration_seconds_sum{{{labels}}} {sum}"
            );
            // The count is the +Inf bucket so the two always agree within one scrape.
            let _ = writeln!(
                out,
                "kura_http_request_duration_seconds_count{{{labels}}} {cumulative}"
            );
        }
    }
    header(
        out,
        "kura_http_requests_in_flight",
        "gauge",
        "HTTP requests being served now.",
    );
    let _ = writeln!(
        out,
        "kura_http_requests_in_flight {}",
        t.in_flight.load(Ordering::Relaxed)
    );
}

fn render_process(out: &mut String, state: &AppState) {
    header(
        out,
        "kura_build_info",
        "gauge",
        "Build information; the value is always 1.",
    );
    let _ = writeln!(
        out,
        "kura_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    header(
        out,
        "kura_uptime_seconds",
        "gauge",
        "Seconds since the server built its first App.",
    );
    let _ = writeln!(
        out,
        "kura_uptime_seconds {}",
        started_at().elapsed().as_secs_f64()
    );
    header(
        out,
        "kura_startup_seconds",
        "gauge",
        "Time the store took to open at start-up: catalog, segments and log replay of every region.",
    );
    let startup = fmt_seconds(STARTUP_US.load(Ordering::Relaxed));
    let _ = writeln!(out, "kura_startup_seconds {startup}");
    header(
        out,
        "kura_scanners_open",
        "gauge",
        "Stateful REST scanners open now.",
    );
    let _ = writeln!(out, "kura_scanners_open {}", scanners_open(state));
    header(
        out,
        "kura_admin_operations_total",
        "counter",
        "Admin operations requested through /admin/, by operation and result.",
    );
    let rows: [(&str, &[AtomicU64; 2]); 4] = [
        ("flush", &ADMIN.flush),
        ("compact_minor", &ADMIN.compact_minor),
        ("compact_major", &ADMIN.compact_major),
        ("split", &ADMIN.split),
    ];
    for (name, c) in rows {
        for (i, result) in ["ok", "error"].iter().enumerate() {
            let _ = writeln!(
                out,
                "kura_admin_operations_total{{op=\"{name}\",result=\"{result}\"}} {}",
                c[i].load(Ordering::Relaxed)
            );
        }
    }
}

/// One region family: name, type, help, and how to read the value from a region.
type RegionMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&kura_backend::RegionInfo) -> f64,
);

const REGION_METRICS: &[RegionMetric] = &[
    (
        "kura_region_cells",
        "gauge",
        "Cells stored (memtable + segments, all versions and markers).",
        |r| (r.stats.memtable_cells + r.stats.segment_cells) as f64,
    ),
    (
        "kura_region_bytes",
        "gauge",
        "Bytes of data (memtable + segments).",
        |r| (r.stats.memtable_bytes + r.stats.segment_bytes) as f64,
    ),
    (
        "kura_region_memtable_bytes",
        "gauge",
        "Bytes in the memtable.",
        |r| r.stats.memtable_bytes as f64,
    ),
    (
        "kura_region_memtable_cells",
        "gauge",
        "Cells in the memtable.",
        |r| r.stats.memtable_cells as f64,
    ),
    ("kura_region_segments", "gauge", "Segment files.", |r| {
        r.stats.segments as f64
    }),
    (
        "kura_region_segment_bytes",
        "gauge",
        "Bytes in segment files.",
        |r| r.stats.segment_bytes as f64,
    ),
    (
        "kura_region_segment_cells",
        "gauge",
        "Cells in segment files.",
        |r| r.stats.segment_cells as f64,
    ),
    (
        "kura_region_log_bytes",
        "gauge",
        "Bytes in the write-ahead log.",
        |r| r.stats.log_bytes as f64,
    ),
    (
        "kura_region_buckets",
        "gauge",
        "Salt buckets the region owns.",
        |r| f64::from(r.bucket_end.saturating_sub(r.bucket_start)),
    ),
    (
        "kura_region_poisoned",
        "gauge",
        "1 if the region's store failed and refuses requests.",
        |r| if r.stats.poisoned { 1.0 } else { 0.0 },
    ),
    (
        "kura_region_reads_total",
        "counter",
        "Read operations served by the region.",
        |r| r.stats.reads as f64,
    ),
    (
        "kura_region_writes_total",
        "counter",
        "Write operations applied by the region.",
        |r| r.stats.writes as f64,
    ),
    (
        "kura_region_flushes_total",
        "counter",
        "Memtable flushes.",
        |r| r.stats.flushes as f64,
    ),
    (
        "kura_region_compactions_total",
        "counter",
        "Segment compactions.",
        |r| r.stats.compactions as f64,
    ),
    (
        "kura_region_fsyncs_total",
        "counter",
        "Log fsyncs (each one is one group commit).",
        |r| r.stats.fsyncs as f64,
    ),
    (
        "kura_region_synced_writes_total",
        "counter",
        "Writes made durable by those fsyncs (sum of group-commit batch sizes).",
        |r| r.stats.synced_writes as f64,
    ),
    (
        "kura_region_fsync_seconds_total",
        "counter",
        "Time spent in log fsyncs; divided by kura_region_fsyncs_total it is the mean fsync latency.",
        |r| r.stats.fsync_micros as f64 / 1e6,
    ),
    (
        "kura_region_fsync_max_seconds",
        "gauge",
        "Longest log fsync since the region opened.",
        |r| r.stats.fsync_max_micros as f64 / 1e6,
    ),
    (
        "kura_region_fsyncs_slow_total",
        "counter",
        "Log fsyncs slower than 10 ms: disk stalls, each holding every write waiting on it.",
        |r| r.stats.fsyncs_slow as f64,
    ),
    (
        "kura_region_recovery_seconds",
        "gauge",
        "Time the region's store took to open: manifest, segments and log replay.",
        |r| r.stats.recovery_micros as f64 / 1e6,
    ),
    (
        "kura_region_recovery_log_records",
        "gauge",
        "Log records replayed when the region opened.",
        |r| r.stats.recovery_log_records as f64,
    ),
    (
        "kura_region_recovery_bytes_dropped",
        "gauge",
        "Bytes of a damaged log tail dropped by point-in-time recovery when the region opened.",
        |r| r.stats.recovery_bytes_dropped as f64,
    ),
    (
        "kura_region_group_commit_batch_avg",
        "gauge",
        "Mean group-commit batch size: synced writes per fsync since the region opened.",
        |r| r.stats.group_commit_avg(),
    ),
];

/// Renders the store figures: per-table and per-region series.
async fn render_store(out: &mut String, kura: &Store) {
    // A backend that cannot list its tables now (Bigtable unreachable) leaves them out of this
    // scrape; the process series above still answer.
    let tables = kura.list_tables().await.unwrap_or_default();
    let mut per_table = Vec::with_capacity(tables.len());
    for t in &tables {
        // A table dropped between listing and asking is simply absent from this scrape.
        if let Ok(regions) = kura.regions(&t.name).await {
            let initial = t.initial_regions.unwrap_or(kura.default_regions()).max(1);
            per_table.push((t, initial, regions));
        }
    }
    header(out, "kura_tables", "gauge", "Tables in the catalog.");
    let _ = writeln!(out, "kura_tables {}", tables.len());
    header(out, "kura_table_regions", "gauge", "Regions of the table.");
    for (t, _, regions) in &per_table {
        let _ = writeln!(
            out,
            "kura_table_regions{{table=\"{}\"}} {}",
            escape_label(&t.name),
            regions.len()
        );
    }
    header(
        out,
        "kura_table_splits_total",
        "counter",
        "Region splits of the table since creation (regions now minus regions at creation; \
         Kura never merges regions).",
    );
    for (t, initial, regions) in &per_table {
        let splits = (regions.len() as u64).saturating_sub(u64::from(*initial));
        let _ = writeln!(
            out,
            "kura_table_splits_total{{table=\"{}\"}} {splits}",
            escape_label(&t.name)
        );
    }
    header(
        out,
        "kura_table_buckets",
        "gauge",
        "Salt buckets of the table.",
    );
    for (t, _, _) in &per_table {
        let _ = writeln!(
            out,
            "kura_table_buckets{{table=\"{}\"}} {}",
            escape_label(&t.name),
            t.salt.buckets
        );
    }
    for (name, kind, help, value) in REGION_METRICS {
        header(out, name, kind, help);
        for (t, _, regions) in &per_table {
            let table = escape_label(&t.name);
            for r in regions {
                let _ = writeln!(
                    out,
                    "{name}{{table=\"{table}\",region=\"{}\"}} {}",
                    r.id,
                    value(r)
                );
            }
        }
    }
}

/// Renders the whole page.
pub async fn render(state: &AppState) -> String {
    let mut out = String::with_capacity(16 << 10);
    render_process(&mut out, state);
    render_http(&mut out);
    render_store(&mut out, &state.kura).await;
    out
}

/// `GET /metrics`.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    let body = render(&state).await;
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(m: &str, p: &str, q: &str) -> (&'static str, &'static str) {
        let method = Method::from_bytes(m.as_bytes()).expect("method");
        let (e, o) = classify(&method, p, q);
        (e.name(), o.name())
    }

    #[test]
    fn classifies_rest_rows_by_operation() {
        assert_eq!(names("GET", "/t/row1", ""), ("row", "get"));
        assert_eq!(names("GET", "/t/row1/cf:a", ""), ("row", "get"));
        assert_eq!(names("PUT", "/t/fakerow", ""), ("row", "put"));
        assert_eq!(names("POST", "/t/r", "check=put"), ("row", "check_put"));
        assert_eq!(
            names("PUT", "/t/r", "rr=true&check=increment"),
            ("row", "increment")
        );
        assert_eq!(names("DELETE", "/t/r/cf", ""), ("row", "delete"));
    }

    #[test]
    fn classifies_scans_scanners_and_metadata() {
        assert_eq!(names("GET", "/t/*", "limit=5"), ("scan", "scan"));
        assert_eq!(names("GET", "/t/abc*", ""), ("scan", "scan"));
        assert_eq!(names("GET", "/t/abc*/cf", ""), ("row", "get"));
        assert_eq!(names("PUT", "/t/scanner", ""), ("scanner", "open"));
        assert_eq!(names("GET", "/t/scanner/123", ""), ("scanner", "next"));
        assert_eq!(names("DELETE", "/t/scanner/123", ""), ("scanner", "close"));
        assert_eq!(names("GET", "/t/multiget", "row=a"), ("multiget", "get"));
        assert_eq!(names("PUT", "/t/schema", ""), ("schema", "put"));
        assert_eq!(names("GET", "/", ""), ("root", "get"));
        assert_eq!(names("GET", "/version/cluster", ""), ("version", "get"));
    }

    #[test]
    fn classifies_ops_and_apps() {
        assert_eq!(names("GET", "/healthz", ""), ("healthz", "get"));
        assert_eq!(
            names("POST", "/admin/tables/t/flush", ""),
            ("admin", "flush")
        );
        assert_eq!(
            names("POST", "/admin/tables/t/regions/3/split", ""),
            ("admin", "split")
        );
        assert_eq!(names("GET", "/admin/tables", ""), ("admin", "get"));
        assert_eq!(names("GET", "/ui/app.js", ""), ("ui", "get"));
        assert_eq!(
            names("POST", "/apps/blog/users/u/articles", ""),
            ("apps_blog", "post")
        );
        assert_eq!(
            names("PATCH", "/apps/graph/nodes/n", ""),
            ("apps_graph", "patch")
        );
        assert_eq!(names("GET", "/apps/nope", ""), ("apps_other", "get"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn latency_lands_in_the_first_bucket_that_holds_it() {
        let series = ep("other").0 * NO + op("other").0;
        let before = http().buckets[series * NB + 3].load(Ordering::Relaxed);
        record(ep("other"), op("other"), 200, 1_000);
        assert_eq!(
            http().buckets[series * NB + 3].load(Ordering::Relaxed),
            before + 1
        );
    }
}
