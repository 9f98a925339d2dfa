//! `kura export --url URL --table T --out DIR`: a table, read through the HBase REST API, into
//! the files HBase's `Export` writes (`shared/HBASE_FORMATS.md` §3, §4).
//!
//! # What it writes
//! - `part-m-00000`, `part-m-00001`, …: uncompressed SequenceFiles of
//!   (`ImmutableBytesWritable` row key, `Result`) records, one record per row, rows in key
//!   order. A part is closed after the row that brings it to `--rows-per-part` rows or
//!   `--part-bytes` bytes, so part boundaries depend only on the data and these options. An
//!   empty selection still writes one (empty) `part-m-00000`, so `part-*` always matches.
//! - `kura-export.json` ([`super::manifest`]): schema, counts, SHA-256 per part, create
//!   commands.
//! - `_SUCCESS` (empty), last.
//!
//! # Invariants
//! 1. Cells are exported as they are read: every version the selection returns, with its
//!    timestamp, as `Put` cells (the REST API returns no delete markers; see `--raw`).
//! 2. A part is written as `.part-m-NNNNN.tmp`, fsynced, then renamed: a `part-m-*` file is
//!    always whole. Then `.kura-export.resume` records it (name, counts, SHA-256, last row).
//! 3. Resuming: the parts the resume file lists are checked against their SHA-256 (a damaged or
//!    missing one is written again, with every later one); the scan restarts after the last
//!    kept part's last row. The sync bytes of part N are derived from a seed kept in the resume
//!    file and N, so a part written again is byte-identical to the first attempt: a resumed
//!    export equals an uninterrupted one file for file, byte for byte, when the table did not
//!    change in between.
//! 4. Memory: one scan page (`--batch-rows` rows, about 4 MiB) and one record.

use super::files::{self, HashingFile};
use super::manifest::{self, Manifest, Part, Selection};
use super::{hex, parse_table, progress, EXIT_USAGE};
use crate::copy::http::{client_token, HttpClient, ScanOptions};
use crate::copy::side::Side;
use clap::Parser;
use kura_backend::Row;
use kura_formats::result::{bytes_binary, encode_result, printable, CellKind, ExportCell};
use kura_formats::seqfile::{Compression, Writer};
use kura_formats::writable::{IMMUTABLE_BYTES_WRITABLE, RESULT};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Name of the resume file inside the output directory (`.`-prefixed: Hadoop skips it).
pub const RESUME_FILE: &str = ".kura-export.resume";

/// Export one table into HBase Export files.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "kura export",
    bin_name = "kura export",
    about = "Export one table, read through an HBase REST endpoint (Kura or HBase), into the \
             files HBase's Export writes: SequenceFiles part-m-NNNNN of \
             (ImmutableBytesWritable, Result), kura-export.json and _SUCCESS",
    after_help = "The files are read by HBase's Import (hbase org.apache.hadoop.hbase.mapreduce.Import \
T DIR), by Google's Bigtable import (the Dataflow \"SequenceFile to Bigtable\" template, \
bigtable-beam-import) and by kura import. kura-export.json holds the schema, row and cell \
counts, the SHA-256 of every part, and the commands that create the table in the HBase shell \
and with cbt.

ROW KEYS (--start-row, --stop-row, --prefix) are in HBase's toBytesBinary form: \\x00 is the \
byte 0. --row-regex is HBase Export's ^REGEX argument (a RowFilter with a \
RegexStringComparator).

RESUMING: completed parts are recorded in DIR/.kura-export.resume. Run the same command again \
after the export was killed or failed: completed parts are checked (SHA-256) and kept, and the \
part in progress is written again from its first row. The resumed export equals an \
uninterrupted one, file for file.

EXIT CODES: 0 done, 1 failed, 2 bad arguments."
)]
pub struct ExportArgs {
    /// The HBase REST endpoint: http(s)://HOST:PORT.
    #[arg(long, value_name = "URL")]
    pub url: String,

    /// The table to export.
    #[arg(long, value_name = "T", value_parser = parse_table)]
    pub table: String,

    /// The directory to write (created if missing; must be empty unless resuming).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Versions per column to export (HBase Export's `<versions>`, default 1: the latest).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::builder::RangedU64ValueParser::<u32>::new().range(1..=i32::MAX as u64))]
    pub versions: u32,

    /// Oldest timestamp exported, in milliseconds (inclusive).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(0..))]
    pub start_time: Option<i64>,

    /// Timestamp to export up to, in milliseconds (exclusive).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(1..))]
    pub end_time: Option<i64>,

    /// First row exported (inclusive).
    #[arg(long, value_name = "ROW")]
    pub start_row: Option<String>,

    /// Row to stop before (exclusive).
    #[arg(long, value_name = "ROW")]
    pub stop_row: Option<String>,

    /// Export only rows starting with this prefix.
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,

    /// Export only rows whose key matches this regular expression (found anywhere in the key,
    /// as HBase's RegexStringComparator does; HBase Export's `^REGEX` argument).
    #[arg(long, value_name = "REGEX")]
    pub row_regex: Option<String>,

    /// Families to export, comma-separated (default: all).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub families: Vec<String>,

    /// Include delete markers and deleted cells (HBase's
    /// hbase.mapreduce.include.deleted.rows). Not possible through the HBase REST API, which has
    /// no raw scan: refused with an explanation.
    #[arg(long)]
    pub raw: bool,

    /// Close a part after this many rows.
    #[arg(long, value_name = "N", default_value_t = 1_000_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub rows_per_part: u64,

    /// Close a part once it holds this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub part_bytes: u64,

    /// Rows read per scan page.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub batch_rows: usize,

    /// File whose first line is the bearer token (default: the KURA_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Testing: stop (exit 1) after this many rows were written in this run, as if killed.
    #[arg(long, hide = true)]
    pub stop_after_rows: Option<u64>,

    /// Testing: the seed of the parts' sync bytes (default: random per export).
    #[arg(long, hide = true)]
    pub sync_seed: Option<String>,
}

/// What `.kura-export.resume` holds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
struct Resume {
    url: String,
    table: String,
    selection: Selection,
    /// Seed of the parts' sync bytes.
    seed: String,
    /// Parts completed, in order.
    parts: Vec<Part>,
}

/// Runs `kura export`; `args` starts with the subcommand's name.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = ExportArgs::parse_from(args);
    crate::copy::init_client_logging();
    if let Err(e) = check_args(&args) {
        eprintln!("error: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let system = actix_rt::System::new();
    match system.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn check_args(args: &ExportArgs) -> Result<(), String> {
    if args.raw {
        return Err(
            "--raw cannot be honoured: the HBase REST API has no raw scan, so delete \
                    markers and deleted cells cannot be read through it (HBase's own Export \
                    with -Dhbase.mapreduce.include.deleted.rows=true can). Export without --raw \
                    to get every live version."
                .into(),
        );
    }
    if let (Some(s), Some(e)) = (args.start_time, args.end_time) {
        if e <= s {
            return Err(format!(
                "--end-time {e} is not after --start-time {s} (the end is exclusive)"
            ));
        }
    }
    HttpClient::new(&args.url)?;
    Ok(())
}

/// The row range `[start, stop)` of the arguments (prefix intersected with start/stop).
fn row_range(args: &ExportArgs) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let mut start = args.start_row.as_deref().map(bytes_binary);
    let mut stop = args.stop_row.as_deref().map(bytes_binary);
    if let Some(p) = args.prefix.as_deref().map(bytes_binary) {
        if start.as_ref().is_none_or(|s| *s < p) {
            start = Some(p.clone());
        }
        if let Some(end) = prefix_end(&p) {
            if stop.as_ref().is_none_or(|s| *s > end) {
                stop = Some(end);
            }
        }
    }
    (
        start.filter(|s| !s.is_empty()),
        stop.filter(|s| !s.is_empty()),
    )
}

/// The first key after every key starting with `prefix`; `None` when there is none (all
/// `0xff`, or empty).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The smallest row key after `key`.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(0);
    k
}

/// `part-m-NNNNN`.
pub fn part_name(index: usize) -> String {
    format!("part-m-{index:05}")
}

/// The 16 sync bytes of part `index`.
fn sync_bytes(seed: &str, index: usize) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(seed.as_bytes());
    h.update((index as u64).to_be_bytes());
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// A part being written.
struct OpenPart {
    index: usize,
    tmp: PathBuf,
    writer: Writer<HashingFile>,
    rows: u64,
    cells: u64,
    last_row: Vec<u8>,
}

async fn run(args: ExportArgs) -> Result<(), String> {
    let token = client_token(args.token_file.as_deref())?;
    let client = HttpClient::new(&args.url)?.with_token(token.as_deref())?;
    let table = args.table.as_str();
    let desc = client
        .schema(table)
        .await?
        .ok_or_else(|| format!("{} has no table {table}", args.url))?;
    for f in &args.families {
        if !desc.families.iter().any(|d| d.name == f.as_bytes()) {
            let have: Vec<String> = desc
                .families
                .iter()
                .map(|d| String::from_utf8_lossy(&d.name).into_owned())
                .collect();
            return Err(format!(
                "table {table} has no family {f:?} (its families: {})",
                have.join(", ")
            ));
        }
    }
    let selection = Selection {
        versions: args.versions,
        start_time: args.start_time,
        end_time: args.end_time,
        start_row: args.start_row.clone(),
        stop_row: args.stop_row.clone(),
        prefix: args.prefix.clone(),
        row_regex: args.row_regex.clone(),
        families: args.families.clone(),
        rows_per_part: args.rows_per_part,
        part_bytes: args.part_bytes,
    };
    let out = args.out.as_path();
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let resume_path = out.join(RESUME_FILE);
    if out.join("_SUCCESS").exists() {
        // Killed after `_SUCCESS` but before the resume file was removed: this very export is
        // finished.
        let same = std::fs::read(&resume_path)
            .ok()
            .and_then(|t| serde_json::from_slice::<Resume>(&t).ok())
            .is_some_and(|r| {
                r.url == args.url && r.table == args.table && r.selection == selection
            });
        if same {
            std::fs::remove_file(&resume_path)
                .map_err(|e| format!("removing {}: {e}", resume_path.display()))?;
            files::sync_dir(out)?;
            println!("{} already holds this export, finished", out.display());
            return Ok(());
        }
        return Err(format!(
            "{} already holds a finished export (_SUCCESS): choose another --out, or empty it",
            out.display()
        ));
    }
    let mut state = open_resume(&args, &resume_path, selection)?;

    let (start, stop) = row_range(&args);
    let start = match state.parts.last() {
        Some(p) => Some(successor(
            &unhex(&p.last_row_hex).ok_or("the resume file holds a bad row key")?,
        )),
        None => start,
    };
    let mut options = ScanOptions {
        end: stop,
        columns: args
            .families
            .iter()
            .map(|f| f.as_bytes().to_vec())
            .collect(),
        start_time: args.start_time,
        end_time: args.end_time,
        max_versions: args.versions,
        filter: args.row_regex.as_ref().map(|r| {
            serde_json::json!({
                "type": "RowFilter",
                "op": "EQUAL",
                "comparator": {"type": "RegexStringComparator", "value": r},
            })
        }),
    };
    if options.end_time.is_some() && options.start_time.is_none() {
        options.start_time = Some(0);
    }
    let empty_range = matches!((&start, &options.end), (Some(s), Some(e)) if s >= e);

    let side = Side::Rest(client);
    let started = Instant::now();
    let bar = progress("exporting");
    let (mut rows_run, mut cells_run) = (0u64, 0u64);
    let mut open: Option<OpenPart> = None;
    if !empty_range {
        let mut scan = side
            .rest_scan_with(table, start, options.extra(), args.batch_rows)
            .expect("a REST side scans over REST");
        let result: Result<bool, String> = async {
            while let Some(page) = scan.next_page().await? {
                for row in page {
                    let part = match open.as_mut() {
                        Some(p) => p,
                        None => open.insert(open_part(out, &state, state.parts.len())?),
                    };
                    let cells = append_row(part, row)?;
                    rows_run += 1;
                    cells_run += cells;
                    if part.rows >= args.rows_per_part || part.writer.position() >= args.part_bytes
                    {
                        let part = open.take().expect("a part is open");
                        close_part(out, part, &mut state, &resume_path)?;
                    }
                    if args.stop_after_rows.is_some_and(|n| rows_run >= n) {
                        return Ok(false);
                    }
                }
                bar.set_message(format!(
                    "{rows_run} rows, {cells_run} cells, {} parts ({:.0} rows/s)",
                    state.parts.len(),
                    rows_run as f64 / started.elapsed().as_secs_f64().max(1e-3)
                ));
            }
            Ok(true)
        }
        .await;
        scan.close().await;
        match result {
            Ok(true) => {}
            Ok(false) => {
                bar.finish_and_clear();
                return Err(format!(
                    "stopped after {rows_run} rows as asked; run again to resume"
                ));
            }
            Err(e) => {
                bar.finish_and_clear();
                return Err(format!("exporting {table}: {e}"));
            }
        }
    }
    if let Some(part) = open.take() {
        close_part(out, part, &mut state, &resume_path)?;
    }
    if state.parts.is_empty() {
        let part = open_part(out, &state, 0)?;
        close_part(out, part, &mut state, &resume_path)?;
    }
    bar.finish_and_clear();

    let schema_json = crate::rest::schema::render(crate::rest::media::Repr::Json, &desc);
    let m = Manifest {
        format: manifest::FORMAT.to_string(),
        table: table.to_string(),
        source: args.url.clone(),
        schema: serde_json::from_str(&schema_json)
            .map_err(|e| format!("rendering the schema: {e}"))?,
        options: state.selection.clone(),
        rows: state.parts.iter().map(|p| p.rows).sum(),
        cells: state.parts.iter().map(|p| p.cells).sum(),
        checksum: "sha256".to_string(),
        parts: state.parts.clone(),
        create: manifest::create_commands(&desc),
    };
    let text = serde_json::to_string_pretty(&m).map_err(|e| e.to_string())?;
    files::replace(&out.join(manifest::FILE), format!("{text}\n").as_bytes())?;
    let success = out.join("_SUCCESS");
    std::fs::File::create(&success)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("writing {}: {e}", success.display()))?;
    std::fs::remove_file(&resume_path)
        .map_err(|e| format!("removing {}: {e}", resume_path.display()))?;
    files::sync_dir(out)?;
    let bytes: u64 = m.parts.iter().map(|p| p.bytes).sum();
    println!(
        "exported {} rows, {} cells of {table} from {} into {}: {} parts, {bytes} bytes, in {:.1} s",
        m.rows,
        m.cells,
        args.url,
        out.display(),
        m.parts.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Loads (and checks) the resume file, or starts a new export in an empty directory.
fn open_resume(args: &ExportArgs, path: &Path, selection: Selection) -> Result<Resume, String> {
    let out = args.out.as_path();
    let text = match std::fs::read(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    let Some(text) = text else {
        let taken = std::fs::read_dir(out)
            .map_err(|e| format!("reading {}: {e}", out.display()))?
            .filter_map(|e| e.ok())
            .any(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.starts_with("part-") || n == manifest::FILE
            });
        if taken {
            return Err(format!(
                "{} already holds export files but no {RESUME_FILE}: choose an empty --out",
                out.display()
            ));
        }
        let seed = match &args.sync_seed {
            Some(s) => s.clone(),
            None => hex(&rand::random::<[u8; 16]>()),
        };
        let state = Resume {
            url: args.url.clone(),
            table: args.table.clone(),
            selection,
            seed,
            parts: Vec::new(),
        };
        save_resume(path, &state)?;
        return Ok(state);
    };
    let mut state: Resume = serde_json::from_slice(&text).map_err(|e| {
        format!(
            "{} is not a resume file of kura export: {e}",
            path.display()
        )
    })?;
    if state.url != args.url || state.table != args.table || state.selection != selection {
        return Err(format!(
            "{} belongs to an export of {} from {} with other options: run it with the same \
             options to resume, or choose another --out",
            out.display(),
            state.table,
            state.url
        ));
    }
    // Keep the parts that are intact; write the rest again.
    let mut kept = 0;
    for (i, p) in state.parts.iter().enumerate() {
        let file = out.join(&p.file);
        if p.file != part_name(i) || files::sha256_file(&file).ok().as_ref() != Some(&p.sha256) {
            eprintln!(
                "{} is missing or differs from its recorded SHA-256: writing it again",
                file.display()
            );
            break;
        }
        kept += 1;
    }
    if kept < state.parts.len() {
        state.parts.truncate(kept);
        save_resume(path, &state)?;
    }
    eprintln!(
        "resuming: {} parts ({} rows) kept in {}",
        state.parts.len(),
        state.parts.iter().map(|p| p.rows).sum::<u64>(),
        out.display()
    );
    Ok(state)
}

fn save_resume(path: &Path, state: &Resume) -> Result<(), String> {
    let text = serde_json::to_vec_pretty(state).map_err(|e| e.to_string())?;
    files::replace(path, &text)
}

fn open_part(out: &Path, state: &Resume, index: usize) -> Result<OpenPart, String> {
    let name = part_name(index);
    let tmp = out.join(format!(".{name}.tmp"));
    let file = HashingFile::create(&tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
    let writer = Writer::new(
        file,
        &name,
        IMMUTABLE_BYTES_WRITABLE,
        RESULT,
        Compression::None,
        sync_bytes(&state.seed, index),
    )
    .map_err(|e| e.to_string())?;
    Ok(OpenPart {
        index,
        tmp,
        writer,
        rows: 0,
        cells: 0,
        last_row: Vec::new(),
    })
}

/// Appends one row as one record; returns its cell count.
fn append_row(part: &mut OpenPart, row: Row) -> Result<u64, String> {
    let mut cells: Vec<ExportCell> = row
        .cells
        .into_iter()
        .map(|c| ExportCell {
            row: row.key.clone(),
            family: c.family,
            qualifier: c.qualifier,
            timestamp: c.timestamp,
            kind: CellKind::Put,
            value: c.value,
        })
        .collect();
    // HBase cell order: family, qualifier ascending; timestamp descending.
    cells.sort_by(|a, b| {
        (&a.family, &a.qualifier, std::cmp::Reverse(a.timestamp)).cmp(&(
            &b.family,
            &b.qualifier,
            std::cmp::Reverse(b.timestamp),
        ))
    });
    let n = cells.len() as u64;
    let value = encode_result(&cells).map_err(|e| e.to_string())?;
    let key = kura_formats::writable::try_ibw(&row.key)
        .ok_or_else(|| format!("row {}: a key of 2 GiB or more", printable(&row.key)))?;
    part.writer
        .append(&key, &value)
        .map_err(|e| e.to_string())?;
    part.rows += 1;
    part.cells += n;
    part.last_row = row.key;
    Ok(n)
}

/// Finishes a part: fsync, rename into place, record it in the resume file.
fn close_part(
    out: &Path,
    part: OpenPart,
    state: &mut Resume,
    resume_path: &Path,
) -> Result<(), String> {
    let bytes = part.writer.position();
    let name = part_name(part.index);
    let file = part.writer.finish().map_err(|e| e.to_string())?;
    let sha256 = file.digest();
    let target = out.join(&name);
    std::fs::rename(&part.tmp, &target).map_err(|e| {
        format!(
            "renaming {} to {}: {e}",
            part.tmp.display(),
            target.display()
        )
    })?;
    files::sync_dir(out)?;
    state.parts.push(Part {
        file: name,
        rows: part.rows,
        cells: part.cells,
        bytes,
        sha256,
        last_row_hex: hex(&part.last_row),
    });
    save_resume(resume_path, state)
}

/// Lower-case hex back to bytes.
fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> ExportArgs {
        let mut v = vec![
            "export",
            "--url",
            "http://h:1",
            "--table",
            "t",
            "--out",
            "d",
        ];
        v.extend_from_slice(extra);
        ExportArgs::parse_from(v)
    }

    #[test]
    fn a_prefix_narrows_the_row_range_and_reads_hex_escapes() {
        assert_eq!(
            row_range(&args(&["--prefix", "a\\x00"])),
            (Some(b"a\x00".to_vec()), Some(b"a\x01".to_vec()))
        );
        assert_eq!(
            row_range(&args(&["--prefix", "a\\xFF", "--start-row", "a\\xFF\\x05"])),
            (Some(b"a\xff\x05".to_vec()), Some(b"b".to_vec()))
        );
        assert_eq!(
            row_range(&args(&["--start-row", "k", "--stop-row", "m"])),
            (Some(b"k".to_vec()), Some(b"m".to_vec()))
        );
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }

    #[test]
    fn raw_and_an_empty_time_range_are_refused_with_a_reason() {
        let e = check_args(&args(&["--raw"])).expect_err("raw");
        assert!(e.contains("no raw scan"), "{e}");
        let e = check_args(&args(&["--start-time", "5", "--end-time", "5"])).expect_err("range");
        assert!(e.contains("exclusive"), "{e}");
    }

    #[test]
    fn sync_bytes_differ_per_part_and_repeat_per_seed() {
        assert_eq!(sync_bytes("s", 1), sync_bytes("s", 1));
        assert_ne!(sync_bytes("s", 1), sync_bytes("s", 2));
        assert_ne!(sync_bytes("s", 1), sync_bytes("t", 1));
        assert_eq!(unhex(&hex(b"\x00\xff")), Some(b"\x00\xff".to_vec()));
    }
}
