//! `kura copy --from SRC --to DST --table T`: stream one table from one side to the other,
//! resumably, and verify both sides with HBase `HashTable`'s batch hashes.
//!
//! A side is an HBase REST endpoint (`http://host:port` or `https://…`: Kura or a real HBase
//! REST gateway) or a backend opened in this process (`embedded:DIR`, a data directory no
//! server holds, or `bigtable:PROJECT/INSTANCE`).
//!
//! # What this module owns
//! - [`CopyArgs`]: the subcommand's command line, and [`main`], which runs it.
//! - [`side`]: the two kinds of side behind one enum (a [`kura_backend::Store`], or REST).
//! - [`http`]: the small HBase REST client the REST side speaks through.
//! - [`hash`]: HashTable's batching and MD5 (`shared/HBASE_FORMATS.md` §6.2, §6.3).
//! - [`checkpoint`]: the resume file.
//!
//! # Invariants
//! 1. Every visible version of every cell is copied with its timestamp (deletes are not copied:
//!    a tombstone is not a cell). The destination table, when missing, is created with the
//!    source's schema (families, VERSIONS, TTL, attributes), so it keeps as many versions.
//! 2. Memory is bounded by two pages of at most `--batch-rows` rows and about 4 MiB each (one
//!    being read while the last one is written; a single larger row is one page) and one write
//!    request, whatever the table's size.
//! 3. The checkpoint names the last row whose page was completely written, and is replaced
//!    atomically (temp file, fsync, rename) only after that write returned: a copy killed at
//!    any point resumes after it without losing a row (rows past it are written again, with
//!    the same timestamps, which changes nothing).
//! 4. Verification hashes both sides independently, in the same batches as HashTable
//!    (`targetBatchSize` 8000 bytes by default) over the whole table as one region, every
//!    version: equal data gives equal batches, so the first batch that differs says where.
//! 5. Exit codes: 0 done (and equal, when verified), 1 failed, 2 bad arguments,
//!    3 verified and found a difference.

pub mod checkpoint;
pub mod hash;
pub mod http;
pub mod side;

use checkpoint::Checkpoint;
use clap::Parser;
use hash::{BatchHash, BatchHasher};
use side::{Role, Side, SideSpec};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Exit code: verification found a difference.
pub const EXIT_DIFFERENT: u8 = 3;

/// Copy one table between an HBase REST endpoint, an embedded data directory and Bigtable,
/// resumably, and verify it with HBase HashTable's hashes.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "kura copy",
    bin_name = "kura copy",
    about = "Copy one table between an HBase REST endpoint, an embedded data directory and \
             Bigtable, resumably, and verify it with HBase HashTable's hashes",
    after_help = "SIDES:
  http(s)://HOST:PORT          an HBase REST endpoint (Kura, or a real HBase REST gateway); https
                               trusts the system's roots (SSL_CERT_FILE) and Mozilla's
  embedded:DIR                 an embedded data directory no server is running on
  bigtable:PROJECT/INSTANCE    Cloud Bigtable (BIGTABLE_EMULATOR_HOST=host:port selects the emulator)

Every version of every cell is copied with its timestamp; deletes are not copied. The
destination table is created with the source's schema when it does not exist.

RESUMING: after each batch the copy records the last row it wrote in the checkpoint file
(default ./kura-copy-TABLE.checkpoint). Run the same command again after the copy was
killed or failed and it continues after that row. The file is removed once the copy is done.

EXIT CODES: 0 done, 1 failed, 2 bad arguments, 3 --verify found a difference."
)]
pub struct CopyArgs {
    /// Where the table is read from: http(s)://HOST:PORT, embedded:DIR or bigtable:PROJECT/INSTANCE.
    #[arg(long, value_name = "SRC", value_parser = SideSpec::parse)]
    pub from: SideSpec,

    /// Where the table is written to: http(s)://HOST:PORT, embedded:DIR or bigtable:PROJECT/INSTANCE.
    #[arg(long, value_name = "DST", value_parser = SideSpec::parse)]
    pub to: SideSpec,

    /// The table to copy (the same name on both sides).
    #[arg(long, value_name = "T", value_parser = parse_table)]
    pub table: String,

    /// After the copy, compare both sides batch by batch with HBase HashTable's MD5 hashes,
    /// report the first batch that differs, and exit 3 if one does.
    #[arg(long)]
    pub verify: bool,

    /// Only compare both sides (no copy); exit 3 if they differ.
    #[arg(long, conflicts_with = "verify")]
    pub verify_only: bool,

    /// Rows read and written per batch (and per checkpoint).
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub batch_rows: usize,

    /// The resume file: the last row fully written (default ./kura-copy-TABLE.checkpoint).
    /// A copy that finds it continues after that row; it is removed once the copy is done.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,

    /// Bytes of cells per verification batch (HashTable's targetBatchSize).
    #[arg(long, value_name = "BYTES", default_value_t = hash::DEFAULT_BATCH_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub hash_batch_bytes: u64,

    /// File whose first line is the bearer token sent to REST sides (`Authorization: Bearer`);
    /// without it the KURA_TOKEN environment variable is used, if set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Testing: stop (exit 1) after this many batches were written and checkpointed, as if
    /// killed.
    #[arg(long, hide = true)]
    pub stop_after_batches: Option<u64>,
}

/// Parses a table name by the server's rules (every client subcommand's `--table`).
pub(crate) fn parse_table(s: &str) -> Result<String, String> {
    kura_backend::schema::validate_table_name(s).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

/// The embedded store's settings for a side (the server's defaults).
pub(crate) fn embedded_config(dir: PathBuf) -> kura_backends::embedded::Config {
    kura_backends::embedded::Config::new(dir)
}

/// Runs `kura copy`; `args` starts with the subcommand's name (`copy`).
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = CopyArgs::parse_from(args);
    init_client_logging();
    if args.from.same_place(&args.to) {
        eprintln!(
            "error: --from and --to name the same place ({}); copy to another side",
            args.from
        );
        return ExitCode::from(2);
    }
    let system = actix_rt::System::new();
    match system.block_on(run(args)) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Different) => ExitCode::from(EXIT_DIFFERENT),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// How a run ended without failing.
enum Outcome {
    Done,
    Different,
}

async fn run(args: CopyArgs) -> Result<Outcome, String> {
    let resume = if args.verify_only {
        None
    } else {
        Some(resume_point(&args)?)
    };
    let token = http::client_token(args.token_file.as_deref())?;
    let src = Side::open(&args.from, Role::Source, token.as_deref()).await?;
    let dst = match Side::open(&args.to, Role::Destination, token.as_deref()).await {
        Ok(d) => d,
        Err(e) => {
            let _ = src.close().await;
            return Err(e);
        }
    };
    let result = run_on(&args, &src, &dst, resume).await;
    let closed_src = src.close().await;
    let closed_dst = dst.close().await;
    let outcome = result?;
    closed_src.map_err(|e| format!("closing the source: {e}"))?;
    closed_dst.map_err(|e| format!("closing the destination: {e}"))?;
    Ok(outcome)
}

async fn run_on(
    args: &CopyArgs,
    src: &Side,
    dst: &Side,
    resume: Option<(PathBuf, Checkpoint)>,
) -> Result<Outcome, String> {
    let table = args.table.as_str();
    let desc = src
        .describe(table)
        .await?
        .ok_or_else(|| format!("the source {} has no table {table}", args.from))?;
    if let Some((path, cp)) = resume {
        match dst.describe(table).await? {
            Some(existing) => {
                let missing: Vec<String> = desc
                    .families
                    .iter()
                    .filter(|f| !existing.families.iter().any(|g| g.name == f.name))
                    .map(|f| String::from_utf8_lossy(&f.name).into_owned())
                    .collect();
                if !missing.is_empty() {
                    return Err(format!(
                        "the destination's table {table} lacks the families {}: add them or \
                         drop the table",
                        missing.join(", ")
                    ));
                }
            }
            None => dst
                .create(&desc)
                .await
                .map_err(|e| format!("creating {table} on {}: {e}", args.to))?,
        }
        if !copy(args, src, dst, path, cp).await? {
            return Err(format!(
                "stopped after {} batches as asked; run again to resume",
                args.stop_after_batches.unwrap_or(0)
            ));
        }
    }
    if args.verify || args.verify_only {
        if dst.describe(table).await?.is_none() {
            return Err(format!("the destination {} has no table {table}", args.to));
        }
        return verify(args, src, dst).await;
    }
    Ok(Outcome::Done)
}

/// The logs of the stores and libraries a client subcommand uses, warnings and up (RUST_LOG
/// overrides), on stderr: the subcommands report on stdout.
pub(crate) fn init_client_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
}

/// A progress line on stderr when it is a terminal, nothing otherwise.
pub(crate) fn progress(what: &'static str) -> indicatif::ProgressBar {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {prefix} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_prefix(what);
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The checkpoint file of this copy, and where it resumes (a checkpoint of another copy is
/// refused before anything is created or written).
fn resume_point(args: &CopyArgs) -> Result<(PathBuf, Checkpoint), String> {
    let table = args.table.as_str();
    let path = args
        .checkpoint
        .clone()
        .unwrap_or_else(|| checkpoint::default_path(table));
    let cp = match Checkpoint::load(&path)? {
        Some(cp) => {
            cp.check_matches(&args.from, &args.to, table, &path)?;
            eprintln!(
                "resuming after row {} ({} rows, {} cells copied before), from {}",
                checkpoint::printable(&cp.last_row),
                cp.rows,
                cp.cells,
                path.display()
            );
            cp
        }
        None => Checkpoint::new(&args.from, &args.to, table),
    };
    Ok((path, cp))
}

/// Copies from the checkpoint on; `Ok(false)` when stopped by `--stop-after-batches`.
async fn copy(
    args: &CopyArgs,
    src: &Side,
    dst: &Side,
    path: PathBuf,
    mut cp: Checkpoint,
) -> Result<bool, String> {
    let table = args.table.as_str();
    let started = Instant::now();
    let (rows_before, cells_before) = (cp.rows, cp.cells);
    let bar = progress("copying");
    let after = (cp.rows > 0).then(|| cp.last_row.clone());
    let mut scan = src.scan(table, after, args.batch_rows);
    let mut batches = 0u64;
    let mut next = scan.next_page().await;
    loop {
        let page = match next {
            Ok(Some(page)) => page,
            Ok(None) => break,
            Err(e) => {
                scan.close().await;
                bar.finish_and_clear();
                return Err(format!("reading {table} from {}: {e}", args.from));
            }
        };
        // Read the next page while this one is written (two pages in memory at most).
        let (written, read) = futures::join!(dst.write(table, &page), scan.next_page());
        next = read;
        if let Err(e) = written {
            scan.close().await;
            bar.finish_and_clear();
            return Err(format!("writing {table} to {}: {e}", args.to));
        }
        let last = page.last().expect("pages are never empty");
        cp.last_row = last.key.clone();
        cp.rows += page.len() as u64;
        cp.cells += page.iter().map(|r| r.cells.len() as u64).sum::<u64>();
        if let Err(e) = cp.save(&path) {
            scan.close().await;
            bar.finish_and_clear();
            return Err(e);
        }
        batches += 1;
        let rate = (cp.rows - rows_before) as f64 / started.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "{} rows, {} cells ({rate:.0} rows/s)",
            cp.rows, cp.cells
        ));
        if args.stop_after_batches.is_some_and(|n| batches >= n) {
            scan.close().await;
            bar.finish_and_clear();
            return Ok(false);
        }
    }
    scan.close().await;
    bar.finish_and_clear();
    Checkpoint::remove(&path)?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "copied {} rows, {} cells of {table} from {} to {} in {secs:.1} s{}",
        cp.rows,
        cp.cells,
        args.from,
        args.to,
        if rows_before > 0 || cells_before > 0 {
            format!(
                " ({} rows, {} cells in this run)",
                cp.rows - rows_before,
                cp.cells - cells_before
            )
        } else {
            String::new()
        }
    );
    Ok(true)
}

/// Hashes one side's whole table into HashTable batches, one batch at a time.
struct Hashing<'a> {
    scan: side::Scan<'a>,
    hasher: Option<BatchHasher>,
    ready: std::collections::VecDeque<BatchHash>,
}

impl<'a> Hashing<'a> {
    fn new(side: &'a Side, table: &'a str, args: &CopyArgs) -> Hashing<'a> {
        Hashing {
            scan: side.scan(table, None, args.batch_rows),
            hasher: Some(BatchHasher::new(b"", args.hash_batch_bytes)),
            ready: std::collections::VecDeque::new(),
        }
    }

    /// The next batch, `None` after the last.
    async fn next(&mut self) -> Result<Option<BatchHash>, String> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                return Ok(Some(b));
            }
            let Some(hasher) = self.hasher.as_mut() else {
                return Ok(None);
            };
            match self.scan.next_page().await? {
                Some(page) => {
                    for row in &page {
                        if let Some(b) = hasher.add_row(row) {
                            self.ready.push_back(b);
                        }
                    }
                }
                None => {
                    let last = self.hasher.take().expect("checked above").finish();
                    self.ready.push_back(last);
                }
            }
        }
    }
}

/// Compares both sides batch by batch; reports the first batch that differs.
async fn verify(args: &CopyArgs, src: &Side, dst: &Side) -> Result<Outcome, String> {
    let table = args.table.as_str();
    let bar = progress("verifying");
    let mut a = Hashing::new(src, table, args);
    let mut b = Hashing::new(dst, table, args);
    let (mut batches, mut rows, mut cells) = (0u64, 0u64, 0u64);
    let outcome = loop {
        let (x, y) = futures::join!(a.next(), b.next());
        let x = x.map_err(|e| format!("hashing {table} on {}: {e}", args.from))?;
        let y = y.map_err(|e| format!("hashing {table} on {}: {e}", args.to))?;
        match (x, y) {
            (None, None) => break Outcome::Done,
            (Some(x), Some(y)) if x == y => {
                batches += 1;
                rows += x.rows;
                cells += x.cells;
                bar.set_message(format!(
                    "{batches} batches, {rows} rows, {cells} cells equal"
                ));
            }
            (x, y) => {
                let start = match (&x, &y) {
                    (Some(x), Some(y)) => x.start.clone().min(y.start.clone()),
                    (Some(x), None) => x.start.clone(),
                    (None, Some(y)) => y.start.clone(),
                    (None, None) => unreachable!("handled above"),
                };
                // The batch ends where the source's next batch starts.
                let end = if x.is_some() {
                    a.next().await.ok().flatten().map(|n| n.start)
                } else {
                    None
                };
                bar.finish_and_clear();
                let describe = |h: &Option<BatchHash>| match h {
                    Some(h) => format!(
                        "batch from row {}: md5 {} ({} rows, {} cells)",
                        checkpoint::printable(&h.start),
                        h.hex(),
                        h.rows,
                        h.cells
                    ),
                    None => "no more batches".to_string(),
                };
                println!(
                    "DIFFERENT: {table} differs in rows [{}, {}) after {batches} equal batches \
                     ({rows} rows, {cells} cells)\n  source      {}: {}\n  destination {}: {}",
                    checkpoint::printable(&start),
                    end.as_deref()
                        .map(checkpoint::printable)
                        .unwrap_or_else(|| "end of table".into()),
                    args.from,
                    describe(&x),
                    args.to,
                    describe(&y),
                );
                break Outcome::Different;
            }
        }
    };
    a.scan.close().await;
    b.scan.close().await;
    if let Outcome::Done = outcome {
        bar.finish_and_clear();
        println!(
            "verified {table}: {batches} HashTable batches equal ({rows} rows, {cells} cells) \
             on {} and {}",
            args.from, args.to
        );
    }
    Ok(outcome)
}
