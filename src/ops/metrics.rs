//! `GET /metrics`: the Prometheus text exposition format 0.0.4, encoded by the `prometheus-client`
//! crate's text encoder (`prometheus_text`), and what each server counts for it.
//!
//! Everything counted here belongs to one server ([`ServerMetrics`], held by
//! [`crate::ops::ServerOps`] in the server's [`AppState`]): two servers in one process (tests)
//! count separately. Three sources feed one page:
//! - **HTTP figures**, recorded by [`MetricsMiddleware`]: request counts by endpoint kind,
//!   operation and status class, latency histograms by endpoint kind and operation, and the
//!   requests in flight. The tables are arrays of atomics indexed by the label set, created once
//!   with the server; a [`Collector`] encodes the series that have counted something at each
//!   scrape. (The crate's own `Family` would look each label set up in a locked map per request,
//!   and its `Histogram` takes a mutex per observation; pre-created `Family` members would put
//!   every one of the ~9,000 possible zero series on every page.)
//! - **Process figures** in the server's `prometheus-client` [`Registry`]: build info, uptime,
//!   start-up time, admin operations (pre-created `Counter`s of a `Family`) and the in-flight
//!   gauge.
//! - **Store figures**, read at scrape time from [`kura_backend::Backend::regions`] for every
//!   table, and the open REST scanners: per-region cells, bytes, log size, reads, writes,
//!   flushes, compactions, fsyncs and group-commit batch sizes, plus per-table region and split
//!   counts. They are gathered first (asynchronously), then encoded by a [`Collector`] over that
//!   snapshot in a registry built for the scrape, with the same encoder.
//!
//! The encoder appends `_total` to counter names: counters are declared by their base name
//! (`kura_http_requests` is exposed as `kura_http_requests_total`, with its `# TYPE` line).
//!
//! # Invariants
//! 1. Label cardinality is bounded: requests are classified into a fixed set of endpoint kinds and
//!    operations ([`classify`]); the raw path never becomes a label value.
//! 2. Recording a request costs a handful of relaxed atomic additions on pre-created slots, with
//!    no lock and no map lookup, so wrapping the App does not move the `/healthz` throughput
//!    ceiling measurably.
//! 3. Counters only grow within a server. Region counters restart at zero when a region is
//!    reopened or created by a split (Prometheus treats that as a counter reset).
//! 4. `kura_scanners_open` is asked at every scrape through the [`ScannerCount`] function the
//!    server's state was built with (the REST scanner registry's); ops keeps no scanner state
//!    and does not depend on the REST API.

use actix_web::dev::{forward_ready, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::Method;
use actix_web::{web, HttpResponse};
use futures::future::{ready, Ready};
use kura_backend::{RegionInfo, Store, TableDescriptor};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

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

/// One server's HTTP tables. Indexes: `[endpoint][op][status class]` and
/// `[endpoint][op][bucket]`; every slot exists from the start, so recording never allocates.
#[derive(Debug)]
struct HttpTables {
    requests: Vec<AtomicU64>,
    buckets: Vec<AtomicU64>,
    sum_us: Vec<AtomicU64>,
    /// When the server built its first App (`kura_uptime_seconds`).
    started: OnceLock<Instant>,
}

impl HttpTables {
    fn new() -> Self {
        let n = |len: usize| (0..len).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        HttpTables {
            requests: n(NE * NO * NS),
            buckets: n(NE * NO * NB),
            sum_us: n(NE * NO),
            started: OnceLock::new(),
        }
    }

    /// Records one finished request.
    fn record(&self, endpoint: Endpoint, op: Op, status: u16, elapsed_us: u64) {
        let series = endpoint.0 * NO + op.0;
        let class = usize::from((status / 100).clamp(1, 5)) - 1;
        self.requests[series * NS + class].fetch_add(1, Ordering::Relaxed);
        let bucket = LATENCY_BOUNDS_US
            .iter()
            .position(|b| elapsed_us <= *b)
            .unwrap_or(NB - 1);
        self.buckets[series * NB + bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us[series].fetch_add(elapsed_us, Ordering::Relaxed);
    }
}

impl Collector for HttpTables {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        encoder
            .encode_descriptor(
                "kura_build_info",
                "Build information; the value is always 1.",
                None,
                MetricType::Gauge,
            )?
            .encode_family(&[("version", env!("CARGO_PKG_VERSION"))])?
            .encode_gauge(&1i64)?;
        let uptime = self
            .started
            .get()
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        encoder
            .encode_descriptor(
                "kura_uptime_seconds",
                "Seconds since the server built its first App.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&uptime)?;

        let mut requests = encoder.encode_descriptor(
            "kura_http_requests",
            "HTTP requests by endpoint kind, operation and status class.",
            None,
            MetricType::Counter,
        )?;
        for (e, endpoint) in ENDPOINTS.iter().enumerate() {
            for (o, op) in OPS.iter().enumerate() {
                for (s, status) in STATUS_CLASSES.iter().enumerate() {
                    let v = self.requests[(e * NO + o) * NS + s].load(Ordering::Relaxed);
                    if v > 0 {
                        requests
                            .encode_family(&[
                                ("endpoint", *endpoint),
                                ("op", *op),
                                ("status", *status),
                            ])?
                            .encode_counter::<NoLabelSet, u64, u64>(&v, None)?;
                    }
                }
            }
        }
        let mut latency = encoder.encode_descriptor(
            "kura_http_request_duration_seconds",
            "HTTP request latency (until the response head is ready) by endpoint kind and operation.",
            None,
            MetricType::Histogram,
        )?;
        for (e, endpoint) in ENDPOINTS.iter().enumerate() {
            for (o, op) in OPS.iter().enumerate() {
                let series = e * NO + o;
                let counts = &self.buckets[series * NB..(series + 1) * NB];
                let buckets: [(f64, u64); NB] = std::array::from_fn(|b| {
                    let bound = LATENCY_BOUNDS.get(b).copied().unwrap_or(f64::INFINITY);
                    (bound, counts[b].load(Ordering::Relaxed))
                });
                // The count is the sum of the buckets so the two always agree within a scrape.
                let count: u64 = buckets.iter().map(|(_, n)| n).sum();
                if count == 0 {
                    continue;
                }
                let sum = self.sum_us[series].load(Ordering::Relaxed) as f64 / 1e6;
                latency
                    .encode_family(&[("endpoint", *endpoint), ("op", *op)])?
                    .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
            }
        }
        Ok(())
    }
}

/// Counts the open scanners of a server (the REST scanner registry's counting function).
pub type ScannerCount = fn(&AppState) -> usize;

/// An admin operation, the `op` label of `kura_admin_operations_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AdminOp {
    Flush,
    CompactMinor,
    CompactMajor,
    Split,
}

impl AdminOp {
    const ALL: [AdminOp; 4] = [
        AdminOp::Flush,
        AdminOp::CompactMinor,
        AdminOp::CompactMajor,
        AdminOp::Split,
    ];

    fn label(self) -> &'static str {
        match self {
            AdminOp::Flush => "flush",
            AdminOp::CompactMinor => "compact_minor",
            AdminOp::CompactMajor => "compact_major",
            AdminOp::Split => "split",
        }
    }
}

type AdminLabels = [(&'static str, &'static str); 2];

/// What one server counts for `/metrics`, and the registry that encodes it.
pub struct ServerMetrics {
    http: Arc<HttpTables>,
    in_flight: Gauge,
    /// `[op][ok, error]`, handles on the members of the registry's admin family.
    admin: [[Counter; 2]; 4],
    /// Seconds `Kura::start` took (catalog, every region's segments and log replay).
    startup: Gauge<f64, AtomicU64>,
    scanner_count: ScannerCount,
    registry: Registry,
}

impl fmt::Debug for ServerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerMetrics").finish_non_exhaustive()
    }
}

impl ServerMetrics {
    /// A server's figures, all zero, asking `scanner_count` for the open scanners at each
    /// scrape.
    pub fn new(scanner_count: ScannerCount) -> ServerMetrics {
        let http = Arc::new(HttpTables::new());
        let in_flight = Gauge::default();
        let startup = Gauge::<f64, AtomicU64>::default();
        let admin_family = Family::<AdminLabels, Counter>::default();
        let admin = AdminOp::ALL.map(|o| {
            ["ok", "error"].map(|result| {
                admin_family
                    .get_or_create(&[("op", o.label()), ("result", result)])
                    .clone()
            })
        });
        let mut registry = Registry::default();
        // `register` ends each help text with a period.
        registry.register(
            "kura_startup_seconds",
            "Time the store took to open at start-up: catalog, segments and log replay of every \
             region",
            startup.clone(),
        );
        registry.register(
            "kura_admin_operations",
            "Admin operations requested through /admin/, by operation and result",
            admin_family,
        );
        registry.register(
            "kura_http_requests_in_flight",
            "HTTP requests being served now",
            in_flight.clone(),
        );
        registry.register_collector(Box::new(Arc::clone(&http)));
        ServerMetrics {
            http,
            in_flight,
            admin,
            startup,
            scanner_count,
            registry,
        }
    }

    /// `main` calls this with the time `Kura::start` took, so `/metrics` shows the recovery time.
    pub fn record_startup(&self, took: Duration) {
        self.startup.set(took.as_secs_f64());
    }

    /// Counts one admin operation; `ok` selects the result label.
    pub(crate) fn count_admin(&self, op: AdminOp, ok: bool) {
        let row = AdminOp::ALL.iter().position(|o| *o == op).unwrap_or(0);
        self.admin[row][usize::from(!ok)].inc();
    }

    /// Records one finished request.
    pub fn record(&self, endpoint: Endpoint, op: Op, status: u16, elapsed_us: u64) {
        self.http.record(endpoint, op, status, elapsed_us);
    }

    /// Renders the whole page of `state`'s server.
    pub async fn render(&self, state: &AppState) -> String {
        let mut out = String::with_capacity(16 << 10);
        // Writing to a String cannot fail, and every label set here is well-formed.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        let mut scrape = Registry::default();
        scrape.register_collector(Box::new(
            StoreFigures::gather(state, self.scanner_count).await,
        ));
        let _ = prometheus_text::encode(&mut out, &scrape);
        out
    }
}

/// Decrements the in-flight gauge when the request ends, however it ends.
struct InFlight(Gauge);
impl InFlight {
    fn enter(gauge: &Gauge) -> InFlight {
        gauge.inc();
        InFlight(gauge.clone())
    }
}
impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Actix middleware that records every request into one server's HTTP tables. The server builder
/// wraps its App with it: `App::new().wrap(MetricsMiddleware::new(metrics))`, the same
/// [`ServerMetrics`] as the server's state holds.
#[derive(Clone, Debug)]
pub struct MetricsMiddleware {
    metrics: Arc<ServerMetrics>,
}

impl MetricsMiddleware {
    /// Records into `metrics`.
    pub fn new(metrics: Arc<ServerMetrics>) -> MetricsMiddleware {
        MetricsMiddleware { metrics }
    }
}

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
        let _ = self.metrics.http.started.get_or_init(Instant::now);
        ready(Ok(MetricsService {
            service,
            metrics: Arc::clone(&self.metrics),
        }))
    }
}

/// The service [`MetricsMiddleware`] builds.
pub struct MetricsService<S> {
    service: S,
    metrics: Arc<ServerMetrics>,
}

impl<S, B> Service<ServiceRequest> for MetricsService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Future = MetricsFuture<S::Future>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let (endpoint, op) = classify(req.method(), req.path(), req.query_string());
        let guard = InFlight::enter(&self.metrics.in_flight);
        MetricsFuture {
            fut: self.service.call(req),
            metrics: Arc::clone(&self.metrics),
            endpoint,
            op,
            start: Instant::now(),
            _in_flight: guard,
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's future, recorded when it completes.
    pub struct MetricsFuture<F> {
        #[pin]
        fut: F,
        metrics: Arc<ServerMetrics>,
        endpoint: Endpoint,
        op: Op,
        start: Instant,
        _in_flight: InFlight,
    }
}

impl<F, B> std::future::Future for MetricsFuture<F>
where
    F: std::future::Future<Output = Result<ServiceResponse<B>, actix_web::Error>>,
{
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.project();
        let res = std::task::ready!(this.fut.poll(cx));
        let status = match &res {
            Ok(r) => r.status().as_u16(),
            Err(e) => e.as_response_error().status_code().as_u16(),
        };
        let us = u64::try_from(this.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        this.metrics.record(*this.endpoint, *this.op, status, us);
        std::task::Poll::Ready(res)
    }
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

/// One region family: name, type, help, and how to read the value from a region.
type RegionMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&RegionInfo) -> f64,
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
        "kura_region_reference_segments",
        "gauge",
        "Segment files a split left shared with another region, not yet rewritten.",
        |r| r.stats.reference_segments as f64,
    ),
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

/// The store figures and open scanners of one scrape, gathered before encoding.
#[derive(Debug)]
struct StoreFigures {
    scanners_open: usize,
    tables: usize,
    /// Every table that answered, with its regions at creation and now.
    per_table: Vec<(TableDescriptor, u32, Vec<RegionInfo>)>,
}

impl StoreFigures {
    async fn gather(state: &AppState, scanner_count: ScannerCount) -> StoreFigures {
        let kura: &Store = &state.kura;
        // A backend that cannot list its tables now (Bigtable unreachable) leaves them out of
        // this scrape; the process series still answer.
        let tables = kura.list_tables().await.unwrap_or_default();
        let mut per_table = Vec::with_capacity(tables.len());
        let count = tables.len();
        for t in tables {
            // A table dropped between listing and asking is simply absent from this scrape.
            if let Ok(regions) = kura.regions(&t.name).await {
                let initial = t.initial_regions.unwrap_or(kura.default_regions()).max(1);
                per_table.push((t, initial, regions));
            }
        }
        StoreFigures {
            scanners_open: scanner_count(state),
            tables: count,
            per_table,
        }
    }
}

impl Collector for StoreFigures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        encoder
            .encode_descriptor(
                "kura_scanners_open",
                "Stateful REST scanners open now.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&self.scanners_open)?;
        encoder
            .encode_descriptor(
                "kura_tables",
                "Tables in the catalog.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&self.tables)?;
        let mut regions = encoder.encode_descriptor(
            "kura_table_regions",
            "Regions of the table.",
            None,
            MetricType::Gauge,
        )?;
        for (t, _, r) in &self.per_table {
            regions
                .encode_family(&[("table", t.name.as_str())])?
                .encode_gauge(&r.len())?;
        }
        let mut splits = encoder.encode_descriptor(
            "kura_table_splits",
            "Region splits of the table since creation (regions now minus regions at creation; \
             Kura never merges regions).",
            None,
            MetricType::Counter,
        )?;
        for (t, initial, r) in &self.per_table {
            let n = (r.len() as u64).saturating_sub(u64::from(*initial));
            splits
                .encode_family(&[("table", t.name.as_str())])?
                .encode_counter::<NoLabelSet, u64, u64>(&n, None)?;
        }
        let mut buckets = encoder.encode_descriptor(
            "kura_table_buckets",
            "Salt buckets of the table.",
            None,
            MetricType::Gauge,
        )?;
        for (t, _, _) in &self.per_table {
            buckets
                .encode_family(&[("table", t.name.as_str())])?
                .encode_gauge(&t.salt.buckets)?;
        }
        for (name, kind, help, value) in REGION_METRICS {
            let counter = *kind == "counter";
            // The encoder appends `_total` to a counter's name.
            let base = if counter {
                name.strip_suffix("_total").unwrap_or(name)
            } else {
                name
            };
            let kind = if counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut family = encoder.encode_descriptor(base, help, None, kind)?;
            for (t, _, regions) in &self.per_table {
                for r in regions {
                    let id = r.id.to_string();
                    let labels = [("table", t.name.as_str()), ("region", id.as_str())];
                    let mut series = family.encode_family(&labels)?;
                    if counter {
                        series.encode_counter::<NoLabelSet, f64, u64>(&value(r), None)?;
                    } else {
                        series.encode_gauge(&value(r))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// `GET /metrics`.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    let body = state.ops.metrics.render(&state).await;
    HttpResponse::Ok()
        .content_type(prometheus_text::CONTENT_TYPE)
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
    fn latency_lands_in_the_first_bucket_that_holds_it() {
        let tables = HttpTables::new();
        let series = ep("other").0 * NO + op("other").0;
        tables.record(ep("other"), op("other"), 200, 1_000);
        let counts: Vec<u64> = tables.buckets[series * NB..(series + 1) * NB]
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), 1);
        assert_eq!(counts[3], 1, "1 ms is at most the 4th bound (0.001 s)");
    }

    #[test]
    fn the_page_declares_counters_with_their_total_suffix() {
        let metrics = ServerMetrics::new(|_| 0);
        metrics.record(ep("healthz"), op("get"), 200, 50);
        metrics.count_admin(AdminOp::Split, false);
        let mut page = String::new();
        prometheus_text::encode(&mut page, &metrics.registry).expect("encode");
        for line in [
            "# TYPE kura_http_requests_total counter",
            "kura_http_requests_total{endpoint=\"healthz\",op=\"get\",status=\"2xx\"} 1",
            "kura_http_request_duration_seconds_bucket{endpoint=\"healthz\",op=\"get\",le=\"+Inf\"} 1",
            "kura_http_request_duration_seconds_count{endpoint=\"healthz\",op=\"get\"} 1",
            "# TYPE kura_admin_operations_total counter",
            "kura_admin_operations_total{op=\"split\",result=\"error\"} 1",
            "kura_admin_operations_total{op=\"flush\",result=\"ok\"} 0",
            "# HELP kura_http_requests_in_flight HTTP requests being served now.",
        ] {
            assert!(page.lines().any(|l| l == line), "{line:?} in\n{page}");
        }
        // Series that counted nothing stay off the page.
        assert!(!page.contains("endpoint=\"row\""), "{page}");
    }
}
