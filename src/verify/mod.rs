//! `kura verify`: HBase `HashTable` and `SyncTable`'s comparison over any HBase REST endpoint
//! (Kura, or a real HBase REST gateway), `shared/HBASE_FORMATS.md` §6 and §7.
//!
//! - `kura verify --url URL --table T --out HASHDIR` (the endpoint is the *source*): hashes the
//!   table region by region in HashTable's batches and writes HashTable's output directory
//!   byte for byte (manifest, partitions, `hashes/part-r-NNNNN` MapFiles, `_SUCCESS`), which
//!   HBase's `SyncTable`, Google's sync-table and `kura verify --against` read.
//! - `kura verify --url URL --table T --against HASHDIR` (the endpoint is the *target*): takes
//!   the batch start keys `k_j` of the given hashes (from HBase's `HashTable` or from
//!   `kura verify --out`), hashes the target's rows over each `[k_j, k_{j+1})` with the
//!   manifest's scan parameters, and reports every range whose MD5 differs.
//!
//! # Region start keys (`--out`)
//! HashTable starts a batch at every region's start key, so its output depends on the source's
//! region boundaries. `--region-start KEY` (repeatable) gives them; otherwise they come from
//! `GET /{table}/regions`. A Kura server on the embedded store places rows by salt bucket (a
//! hash of the key, see ARCHITECTURE.md), not by key range: its regions have no key range and
//! the table is hashed as one region, start key empty. Kura on Bigtable and HBase report real
//! key ranges, which are used as they are. `--against` does not depend on them.
//!
//! # Invariants
//! 1. Batches are HashTable's: per region, the first batch starts at the region's start key
//!    (or `--start-row` inside it) and a batch closes at the first row boundary after it holds
//!    `--batch-bytes`; a region with no rows still gives one batch (MD5 of nothing).
//! 2. `--out` writes the manifest last (via `manifest.tmp`): a directory without one is an
//!    interrupted run, which the same command run again replaces, and a directory with one is
//!    never overwritten.
//! 3. Memory is bounded by one scanner page, one hash batch and one record per open file,
//!    whatever the table's size: rows are hashed as they stream in.
//! 4. Exit codes: 0 written / equal, 1 failed, 2 bad arguments, 3 `--against` found a
//!    difference.

use crate::copy::hash::BatchHasher;
use crate::copy::http::HttpClient;
use crate::copy::side::Side;
use crate::copy::EXIT_DIFFERENT;
use clap::Parser;
use kura_backend::Row;
use kura_formats::hashtable::{
    self, from_printable, num_hash_files, partition_keys, printable, to_hex, HashDir,
    HashDirWriter, Manifest,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Rows per scanner page.
const PAGE_ROWS: usize = 1000;

/// Hash a table as HBase's HashTable does, or compare it with a HashTable output.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "kura verify",
    bin_name = "kura verify",
    about = "Hash a table as HBase's HashTable does (--out), or compare it with HashTable's \
             output from another cluster (--against)",
    after_help = "MODES:
  --out HASHDIR      the endpoint is the source: write HashTable's output directory (manifest,
                     partitions, hashes/part-r-NNNNN MapFiles), which HBase's SyncTable, Google's
                     sync-table and `kura verify --against` read
  --against HASHDIR  the endpoint is the target: hash its rows over the ranges of the given
                     hashes (with the manifest's scan settings) and report the ranges that differ

Row keys (--start-row, --stop-row, --region-start) use HBase's binary form: \\xNN is a byte.
REGIONS: a Kura server on its embedded store hashes rows into salt buckets, so a table there
is hashed as one region (start key empty); give --region-start to split it like the source.

EXIT CODES: 0 written or equal, 1 failed, 2 bad arguments, 3 --against found a difference."
)]
pub struct VerifyArgs {
    /// The HBase REST endpoint: http(s)://HOST:PORT.
    #[arg(long, value_name = "URL")]
    pub url: String,

    /// The table (with --against, default: the manifest's table).
    #[arg(long, value_name = "T")]
    pub table: Option<String>,

    /// Write HashTable's output for the table into this new directory.
    #[arg(long, value_name = "HASHDIR", required_unless_present = "against")]
    pub out: Option<PathBuf>,

    /// Compare the table with this HashTable output directory.
    #[arg(long, value_name = "HASHDIR", conflicts_with = "out")]
    pub against: Option<PathBuf>,

    /// Bytes of cells per batch (HashTable's --batchsize).
    #[arg(long, value_name = "BYTES", default_value_t = hashtable::DEFAULT_BATCH_SIZE,
          value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "against")]
    pub batch_bytes: u64,

    /// Hash files to write (default: one per 100 regions, at least 1, at most one per region).
    #[arg(long, value_name = "N", conflicts_with = "against",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub num_hash_files: Option<u32>,

    /// Versions hashed per column (HashTable's default: 1, the latest).
    #[arg(long, value_name = "N", conflicts_with = "against",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub versions: Option<u32>,

    /// First row hashed (HBase binary form, \xNN for a byte).
    #[arg(long, value_name = "ROW", conflicts_with = "against")]
    pub start_row: Option<String>,

    /// Row the hashing stops before.
    #[arg(long, value_name = "ROW", conflicts_with = "against")]
    pub stop_row: Option<String>,

    /// Families hashed, comma-separated (default: all).
    #[arg(
        long,
        value_name = "F1,F2",
        value_delimiter = ',',
        conflicts_with = "against"
    )]
    pub families: Vec<String>,

    /// Only cells with a timestamp at or after this (ms).
    #[arg(long, value_name = "MS", conflicts_with = "against",
          value_parser = clap::value_parser!(i64).range(0..))]
    pub start_time: Option<i64>,

    /// Only cells with a timestamp before this (ms).
    #[arg(long, value_name = "MS", conflicts_with = "against",
          value_parser = clap::value_parser!(i64).range(1..))]
    pub end_time: Option<i64>,

    /// Leave timestamps out of the hashes (not stored in the manifest: give it to both sides).
    #[arg(long)]
    pub ignore_timestamps: bool,

    /// A region start key of the source table (repeatable; the first region, starting at the
    /// empty key, is implied). Default: the regions `GET /{table}/regions` reports.
    #[arg(long, value_name = "ROW", conflicts_with = "against")]
    pub region_start: Vec<String>,

    /// With --against: print at most this many differing ranges (all are counted).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_report: u64,

    /// File whose first line is the bearer token sent to the endpoint; without it the
    /// KURA_TOKEN environment variable is used, if set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// Runs `kura verify`; `args` starts with the subcommand's name (`verify`).
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = VerifyArgs::parse_from(args);
    crate::copy::init_client_logging();
    if let Err(e) = check_args(&args) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let system = actix_rt::System::new();
    match system.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(EXIT_DIFFERENT),
        Err(Failure::BadArgs(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why a run did not complete.
enum Failure {
    BadArgs(String),
    Failed(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Failed(e)
    }
}

fn check_args(args: &VerifyArgs) -> Result<(), String> {
    if !(args.url.starts_with("http://") || args.url.starts_with("https://")) {
        return Err(format!(
            "--url {}: give an HBase REST endpoint, http(s)://HOST:PORT",
            args.url
        ));
    }
    if let Some(t) = &args.table {
        kura_backend::schema::validate_table_name(t).map_err(|e| format!("--table: {e}"))?;
    }
    if args.out.is_some() && args.table.is_none() {
        return Err("--out needs --table: the table to hash".into());
    }
    if let (Some(s), Some(e)) = (args.start_time, args.end_time) {
        if s >= e {
            return Err(format!("--start-time {s} must be before --end-time {e}"));
        }
    }
    if let (Some(s), Some(e)) = (&args.start_row, &args.stop_row) {
        let (s, e) = (from_printable(s), from_printable(e));
        if !e.is_empty() && s >= e {
            return Err("--start-row must sort before --stop-row".into());
        }
    }
    if args
        .families
        .iter()
        .any(|f| f.is_empty() || f.contains(':'))
    {
        return Err("--families: give family names without ':', comma-separated".into());
    }
    Ok(())
}

async fn run(args: VerifyArgs) -> Result<bool, Failure> {
    let token =
        crate::copy::http::client_token(args.token_file.as_deref()).map_err(Failure::BadArgs)?;
    let client = HttpClient::new(args.url.trim_end_matches('/'))
        .and_then(|c| c.with_token(token.as_deref()))
        .map_err(Failure::BadArgs)?;
    let side = Side::Rest(client);
    let result = match (&args.out, &args.against) {
        (Some(out), _) => write_hashes(&args, &side, out).await.map(|()| true),
        (None, Some(dir)) => against(&args, &side, dir).await,
        (None, None) => Err(Failure::BadArgs(
            "give --out HASHDIR or --against HASHDIR".into(),
        )),
    };
    let _ = side.close().await;
    result
}

fn client(side: &Side) -> &HttpClient {
    match side {
        Side::Rest(c) => c,
        Side::Store(_) => unreachable!("kura verify opens REST sides only"),
    }
}

/// The Scanner model fields of a manifest's scan over `[.., stop)`.
fn scan_model(m: &Manifest, stop: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    use crate::rest::media::b64_encode;
    let mut x = serde_json::Map::new();
    if !stop.is_empty() {
        x.insert("endRow".into(), b64_encode(stop).into());
    }
    if let Some(f) = &m.families {
        let cols: Vec<serde_json::Value> = f.iter().map(|f| b64_encode(f).into()).collect();
        x.insert("column".into(), cols.into());
    }
    if m.start_time.is_some() || m.end_time.is_some() {
        x.insert("startTime".into(), m.start_time.unwrap_or(0).into());
        x.insert("endTime".into(), m.end_time.unwrap_or(i64::MAX).into());
    }
    x.insert("maxVersions".into(), m.max_versions().into());
    x
}

/// The later of two range starts (empty = open).
fn max_start(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.max(b).to_vec()
}

/// The earlier of two range ends (empty = open).
fn min_stop(a: &[u8], b: &[u8]) -> Vec<u8> {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_vec(),
        (_, true) => a.to_vec(),
        _ => a.min(b).to_vec(),
    }
}

/// The table's regions as `(start, end)` key ranges (empty = open), in key order.
async fn regions(
    args: &VerifyArgs,
    side: &Side,
    table: &str,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Failure> {
    if !args.region_start.is_empty() {
        let mut starts: Vec<Vec<u8>> = args
            .region_start
            .iter()
            .map(|s| from_printable(s))
            .collect();
        starts.push(Vec::new());
        starts.sort();
        starts.dedup();
        let ends = starts[1..].iter().cloned().chain([Vec::new()]);
        return Ok(starts.iter().cloned().zip(ends).collect());
    }
    let c = client(side);
    let body = c
        .get_json(&format!("/{table}/regions"))
        .await?
        .ok_or_else(|| Failure::Failed(format!("{} has no table {table}", args.url)))?;
    let b64 = |v: Option<&serde_json::Value>| -> Result<Vec<u8>, Failure> {
        let s = v.and_then(|v| v.as_str()).unwrap_or("");
        crate::rest::media::b64_decode(s, "region key").map_err(|e| {
            Failure::Failed(format!("GET /{table}/regions: a key is not base64: {e:?}"))
        })
    };
    let mut out = Vec::new();
    let mut salted = true;
    let list = body
        .get("Region")
        .and_then(|r| r.as_array())
        .cloned()
        .unwrap_or_default();
    for r in &list {
        let (start, end) = (b64(r.get("startKey"))?, b64(r.get("endKey"))?);
        // Kura's embedded regions are salt-bucket ranges: the name's second field is the first
        // bucket and the keys are bucket numbers, 4 bytes big-endian.
        let name = r.get("name").and_then(|n| n.as_str()).unwrap_or("");
        let bucket = name.split(',').nth(1).and_then(|b| b.parse::<u32>().ok());
        let bucket_key = match bucket {
            Some(0) => Some(Vec::new()),
            Some(b) => Some(b.to_be_bytes().to_vec()),
            None => None,
        };
        if bucket_key.as_ref() != Some(&start) {
            salted = false;
        }
        out.push((start, end));
    }
    let kura = c
        .get_json("/version")
        .await
        .ok()
        .flatten()
        .and_then(|v| v.get("Server").and_then(|s| s.as_str()).map(str::to_string))
        .is_some_and(|s| s.starts_with("kura/"));
    if out.is_empty() || (kura && salted) {
        return Ok(vec![(Vec::new(), Vec::new())]);
    }
    out.sort();
    Ok(out)
}

/// `--out`: hashes the table region by region into a new hash directory.
async fn write_hashes(
    args: &VerifyArgs,
    side: &Side,
    out: &std::path::Path,
) -> Result<(), Failure> {
    let table = args.table.clone().unwrap_or_default();
    if out.join(hashtable::MANIFEST).exists() {
        return Err(Failure::BadArgs(format!(
            "{} already holds a hash directory (it has a manifest): choose another --out",
            out.display()
        )));
    }
    let started = Instant::now();
    let mut m = Manifest::new(&table, args.batch_bytes, 1);
    m.start_row = args
        .start_row
        .as_deref()
        .map(from_printable)
        .unwrap_or_default();
    m.stop_row = args
        .stop_row
        .as_deref()
        .map(from_printable)
        .unwrap_or_default();
    if !args.families.is_empty() {
        m.families = Some(
            args.families
                .iter()
                .map(|f| f.as_bytes().to_vec())
                .collect(),
        );
    }
    m.versions = args.versions;
    m.start_time = args.start_time;
    m.end_time = args.end_time;
    m.raw_scan = Some(false);
    if client(side)
        .get_json(&format!("/{table}/schema"))
        .await?
        .is_none()
    {
        return Err(Failure::Failed(format!(
            "{} has no table {table}",
            args.url
        )));
    }
    // HashTable's TableHash.selectPartitions: the regions that overlap the scan range.
    let selected: Vec<(Vec<u8>, Vec<u8>)> = regions(args, side, &table)
        .await?
        .into_iter()
        .filter(|(s, e)| {
            (m.start_row.is_empty() || e.is_empty() || m.start_row < *e)
                && (m.stop_row.is_empty() || s.is_empty() || m.stop_row > *s)
        })
        .collect();
    let starts: Vec<Vec<u8>> = selected.iter().map(|(s, _)| s.clone()).collect();
    m.num_hash_files = num_hash_files(selected.len(), args.num_hash_files);
    let partitions = partition_keys(&starts, m.num_hash_files);
    let mut w = HashDirWriter::create(out, m.clone(), partitions).map_err(|e| e.to_string())?;
    let bar = crate::copy::progress("hashing");
    let (mut rows, mut cells) = (0u64, 0u64);
    for (i, (rs, re)) in selected.iter().enumerate() {
        let start = max_start(rs, &m.start_row);
        let stop = min_stop(re, &m.stop_row);
        let mut hasher = BatchHasher::new(&start, m.target_batch_size)
            .ignoring_timestamps(args.ignore_timestamps);
        let Some(mut scan) = side.rest_scan_with(
            &table,
            (!start.is_empty()).then(|| start.clone()),
            scan_model(&m, &stop),
            PAGE_ROWS,
        ) else {
            unreachable!("a REST side");
        };
        let res: Result<(), String> = async {
            while let Some(page) = scan.next_page().await? {
                for row in &page {
                    rows += 1;
                    cells += row.cells.len() as u64;
                    if let Some(b) = hasher.add_row(row) {
                        w.add(&b.start, &b.digest).map_err(|e| e.to_string())?;
                    }
                }
                bar.set_message(format!(
                    "region {}/{}, {rows} rows, {cells} cells, {} batches",
                    i + 1,
                    selected.len(),
                    w.batches()
                ));
            }
            let last = hasher.finish();
            w.add(&last.start, &last.digest).map_err(|e| e.to_string())
        }
        .await;
        scan.close().await;
        if let Err(e) = res {
            bar.finish_and_clear();
            return Err(Failure::Failed(format!(
                "hashing {table} on {}: {e}",
                args.url
            )));
        }
    }
    let batches = w.batches();
    let date = chrono::Utc::now()
        .format("%a %b %d %H:%M:%S UTC %Y")
        .to_string();
    w.finish(&date).map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    println!(
        "hashed {table}: {rows} rows, {cells} cells into {batches} batches over {} regions, {} \
         hash files, in {:.1} s; wrote {}",
        selected.len(),
        m.num_hash_files,
        started.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// A source batch: its start key and MD5.
type Batch = (Vec<u8>, [u8; 16]);

/// The target's hash of one source range.
struct Range {
    start: Vec<u8>,
    source: [u8; 16],
    hasher: BatchHasher,
}

/// `--against`: compares the table with a hash directory, range by range.
async fn against(args: &VerifyArgs, side: &Side, dir: &std::path::Path) -> Result<bool, Failure> {
    let hd = HashDir::open(dir).map_err(|e| Failure::BadArgs(format!("--against: {e}")))?;
    let m = hd.manifest().clone();
    if m.raw_scan == Some(true) {
        return Err(Failure::BadArgs(format!(
            "{}: the hashes were computed over a raw scan (delete markers included), which an \
             HBase REST scanner cannot return",
            dir.display()
        )));
    }
    if m.scan_batch.is_some() {
        eprintln!("note: the manifest's scanBatch only splits rows into several Results; rows are hashed whole here, which gives the same hashes");
    }
    let table = args.table.clone().unwrap_or_else(|| m.table.clone());
    kura_backend::schema::validate_table_name(&table).map_err(|e| {
        Failure::BadArgs(format!(
            "the table {table} (from the manifest unless --table is given) is not a table \
             name Kura takes ({e}): give --table"
        ))
    })?;
    if client(side)
        .get_json(&format!("/{table}/schema"))
        .await?
        .is_none()
    {
        return Err(Failure::Failed(format!(
            "{} has no table {table}",
            args.url
        )));
    }
    let started = Instant::now();
    let mut batches = hd.batches();
    let next_batch = |b: &mut hashtable::Batches<'_>| -> Result<Option<Batch>, Failure> {
        b.next()
            .map_err(|e| Failure::Failed(format!("reading {}: {e}", dir.display())))
    };
    let Some((k0, md0)) = next_batch(&mut batches)? else {
        return Err(Failure::BadArgs(format!(
            "{}: the hashes hold no batch",
            dir.display()
        )));
    };
    let new_range = |start: Vec<u8>, source: [u8; 16]| Range {
        start,
        source,
        hasher: BatchHasher::new(b"", u64::MAX).ignoring_timestamps(args.ignore_timestamps),
    };
    let mut cur = new_range(k0.clone(), md0);
    let mut next = next_batch(&mut batches)?;
    let scan_start = max_start(&k0, &m.start_row);
    let Some(mut scan) = side.rest_scan_with(
        &table,
        (!scan_start.is_empty()).then(|| scan_start.clone()),
        scan_model(&m, &m.stop_row),
        PAGE_ROWS,
    ) else {
        unreachable!("a REST side");
    };
    let bar = crate::copy::progress("comparing");
    let mut report = Report {
        max_report: args.max_report,
        ..Report::default()
    };
    let res: Result<(), Failure> = async {
        while let Some(page) = scan.next_page().await? {
            for row in &page {
                while next.as_ref().is_some_and(|(k, _)| row.key >= *k) {
                    let (k, md) = next.take().expect("checked");
                    let done = std::mem::replace(&mut cur, new_range(k.clone(), md));
                    report.close(done, Some(&k));
                    next = next_batch(&mut batches)?;
                }
                hash_row(&mut cur, row);
                report.rows += 1;
                report.cells += row.cells.len() as u64;
            }
            bar.set_message(format!(
                "{} ranges, {} rows, {} differ",
                report.ranges, report.rows, report.different
            ));
        }
        // Source ranges past the target's last row: the target holds nothing there.
        while let Some((k, md)) = next.take() {
            let done = std::mem::replace(&mut cur, new_range(k.clone(), md));
            report.close(done, Some(&k));
            next = next_batch(&mut batches)?;
        }
        Ok(())
    }
    .await;
    scan.close().await;
    bar.finish_and_clear();
    res?;
    let end = (!m.stop_row.is_empty()).then_some(m.stop_row.as_slice());
    report.close(cur, end);
    let secs = started.elapsed().as_secs_f64();
    if report.different == 0 {
        println!(
            "verified {table} against {}: {} ranges equal ({} rows, {} cells) in {secs:.1} s",
            dir.display(),
            report.ranges,
            report.rows,
            report.cells
        );
        Ok(true)
    } else {
        println!(
            "DIFFERENT: {} of {} ranges of {table} differ from {} ({} rows, {} cells compared \
             in {secs:.1} s){}",
            report.different,
            report.ranges,
            dir.display(),
            report.rows,
            report.cells,
            if report.different > report.max_report {
                format!(
                    "; the first {} are listed (--max-report)",
                    report.max_report
                )
            } else {
                String::new()
            }
        );
        Ok(false)
    }
}

fn hash_row(r: &mut Range, row: &Row) {
    // The hasher's target is u64::MAX: it never closes a batch by itself.
    let _ = r.hasher.add_row(row);
}

/// Counts, and the lines printed for each range that differs.
#[derive(Default)]
struct Report {
    max_report: u64,
    ranges: u64,
    different: u64,
    rows: u64,
    cells: u64,
}

impl Report {
    /// Compares one finished range `[r.start, end)`; prints it if it differs.
    fn close(&mut self, r: Range, end: Option<&[u8]>) {
        self.ranges += 1;
        let target = r.hasher.finish();
        if target.digest != r.source {
            self.different += 1;
            if self.different > self.max_report {
                return;
            }
            println!(
                "differs: rows [{}, {}): source md5 {}, target md5 {} ({} rows, {} cells on the \
                 target)",
                printable(&r.start),
                end.map(printable).unwrap_or_else(|| "end of table".into()),
                to_hex(&r.source),
                target.hex(),
                target.rows,
                target.cells
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_bounds_treat_empty_as_open() {
        assert_eq!(max_start(b"", b"b"), b"b");
        assert_eq!(max_start(b"c", b"b"), b"c");
        assert_eq!(min_stop(b"", b"m"), b"m");
        assert_eq!(min_stop(b"k", b""), b"k");
        assert_eq!(min_stop(b"k", b"m"), b"k");
        assert_eq!(min_stop(b"", b""), b"");
    }

    #[test]
    fn the_scan_model_carries_the_manifests_scan() {
        let mut m = Manifest::new("t", 10, 1);
        let x = scan_model(&m, b"");
        assert_eq!(x.get("maxVersions"), Some(&1.into()));
        assert!(x.get("endRow").is_none() && x.get("startTime").is_none());
        m.versions = Some(3);
        m.families = Some(vec![b"cf".to_vec()]);
        m.end_time = Some(500);
        let x = scan_model(&m, b"z");
        assert_eq!(x.get("maxVersions"), Some(&3.into()));
        assert_eq!(x.get("endRow"), Some(&"eg==".into()));
        assert_eq!(x.get("column"), Some(&serde_json::json!(["Y2Y="])));
        assert_eq!(x.get("startTime"), Some(&0.into()));
        assert_eq!(x.get("endTime"), Some(&500.into()));
    }
}
