//! `kura import --url URL --table T --from DIR`: loads the files of an HBase Export (Kura's, or
//! HBase's own, `shared/HBASE_FORMATS.md` §3, §4) through the HBase REST API.
//!
//! # What it reads
//! Every `part-*` file of DIR in name order (names starting with `_` or `.` are skipped, as
//! Hadoop does), each a SequenceFile of (`ImmutableBytesWritable`, `Result`) records: NONE,
//! RECORD or BLOCK compressed with `DefaultCodec`. A row split over consecutive records with the
//! same key (`hbase.export.scanner.batch`) is applied record by record; empty Results are
//! skipped. `--hbase-0.94` reads values in HBase 0.94's KeyValue format instead.
//!
//! # Why a retried batch never doubles a counter
//! Every cell is written as a put **with its exported timestamp**, and every delete marker as a
//! tombstone with its own timestamp. Writing the same cell (row, column, timestamp, value) twice
//! leaves one version with that value: HBase and Kura keep one cell per coordinate. An
//! increment counter is just an 8-byte value at a timestamp, so a batch applied twice (a retried
//! request, or a resumed import that repeats the batch after its last checkpoint) stores the
//! same counter value, never the sum. Nothing here reads a value to add to it.
//!
//! # Invariants
//! 1. The checkpoint (`--checkpoint`, default `./kura-import-TABLE.checkpoint`) names the file
//!    and how many of its records are applied; it is replaced atomically only after the
//!    server acknowledged every write of the batch. A killed import resumes there; records
//!    after it may be written again, which changes nothing (see above).
//! 2. Puts are written before the delete markers of the same batch; the order does not change
//!    the result (a marker masks versions at or before its timestamp whenever it arrives).
//! 3. Delete markers: family (14) and column (12) markers are `DELETE /{t}/{row}/{col}/{ts}`;
//!    a version marker (8) goes through `check=delete`; a delete-family-version marker (10)
//!    cannot be written through the HBase REST API and stops the import with an error naming
//!    the file, record and row, before anything of its batch is written.
//! 4. With `kura-export.json` beside the parts, every part is checked against its SHA-256
//!    before any of its records is written, and a part it lists must exist.
//! 5. Memory: two batches (`--batch-cells` cells, about 4 MiB each: one being written while
//!    the next is read) plus one record.

use super::files;
use super::manifest::{self, Manifest};
use super::{parse_table, progress, EXIT_USAGE};
use crate::copy::http::{client_token, parse_schema, HttpClient};
use crate::copy::side::Side;
use clap::Parser;
use kura_backend::{Cell, FamilyDescriptor, Row, TableDescriptor};
use kura_formats::result::{decode_094, decode_result, printable, CellKind, ExportCell};
use kura_formats::seqfile::Reader;
use kura_formats::writable::{ibw_bytes, IMMUTABLE_BYTES_WRITABLE, RESULT};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Import HBase Export files into a table.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "kura import",
    bin_name = "kura import",
    about = "Import the files of an HBase Export (kura export's, or HBase's own) into a table, \
             through an HBase REST endpoint (Kura or HBase)",
    after_help = "Reads every part-* file of DIR in name order (_* and .* are skipped): \
SequenceFiles of (ImmutableBytesWritable, Result), uncompressed or compressed with \
DefaultCodec (zlib), RECORD or BLOCK. Cells keep their timestamps; delete markers are applied \
as tombstones with theirs.

A missing table is created from DIR/kura-export.json (written by kura export), or with \
--create-families when the files come from HBase.

RESUMING: after each acknowledged batch the import records the file and record it reached \
in the checkpoint file (default ./kura-import-TABLE.checkpoint). Run the same command again \
after it was killed or failed. Writing a batch again changes nothing: every cell is a put at \
its own timestamp, so counters are never added twice.

EXIT CODES: 0 done, 1 failed, 2 bad arguments."
)]
pub struct ImportArgs {
    /// The HBase REST endpoint: http(s)://HOST:PORT.
    #[arg(long, value_name = "URL")]
    pub url: String,

    /// The table to write (created when missing; see --create-families).
    #[arg(long, value_name = "T", value_parser = parse_table)]
    pub table: String,

    /// The directory holding the part-* files.
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,

    /// When the table is missing and DIR has no kura-export.json: create it with these
    /// families (comma-separated), each keeping --create-versions versions.
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub create_families: Vec<String>,

    /// VERSIONS of the families --create-families creates.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::builder::RangedU64ValueParser::<u32>::new().range(1..=i32::MAX as u64))]
    pub create_versions: u32,

    /// The values are in HBase 0.94's format (HBase Import's -Dhbase.import.version=0.94).
    #[arg(long = "hbase-0.94")]
    pub hbase_094: bool,

    /// Cells per write batch (and per checkpoint).
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub batch_cells: usize,

    /// The resume file (default ./kura-import-TABLE.checkpoint); removed once done.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,

    /// File whose first line is the bearer token (default: the KURA_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Testing: stop (exit 1) after this many batches were written and checkpointed.
    #[arg(long, hide = true)]
    pub stop_after_batches: Option<u64>,
}

/// Rough bytes of keys and values per batch.
const BATCH_BYTES: usize = 4 << 20;

/// What the checkpoint file holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
struct Checkpoint {
    url: String,
    table: String,
    from: String,
    /// The file being imported (files before it in name order are done).
    file: String,
    /// Records of `file` applied.
    record: u64,
    /// `file` is done.
    file_done: bool,
    rows: u64,
    cells: u64,
    deletes: u64,
}

/// Runs `kura import`; `args` starts with the subcommand's name.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = ImportArgs::parse_from(args);
    crate::copy::init_client_logging();
    if let Err(e) = HttpClient::new(&args.url) {
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

/// The `part-*` files of `dir`, in name order.
pub fn part_files(dir: &Path) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("part-"))
        .collect();
    names.sort();
    Ok(names)
}

async fn run(args: ImportArgs) -> Result<(), String> {
    let dir = args.from.as_path();
    let parts = part_files(dir)?;
    if parts.is_empty() {
        return Err(format!(
            "{} holds no part-* files: point --from at an export directory",
            dir.display()
        ));
    }
    let manifest = read_manifest(dir)?;
    if let Some(m) = &manifest {
        for p in &m.parts {
            if !parts.contains(&p.file) {
                return Err(format!(
                    "{} lists {} but it is missing from {}",
                    manifest::FILE,
                    p.file,
                    dir.display()
                ));
            }
        }
    }
    let token = client_token(args.token_file.as_deref())?;
    let client = HttpClient::new(&args.url)?.with_token(token.as_deref())?;
    let table = args.table.as_str();
    ensure_table(&args, &client, manifest.as_ref()).await?;

    let cp_path = args
        .checkpoint
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("kura-import-{table}.checkpoint")));
    let from = std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .display()
        .to_string();
    let mut cp = load_checkpoint(&cp_path)?.unwrap_or_default();
    if cp.file.is_empty() {
        cp = Checkpoint {
            url: args.url.clone(),
            table: table.to_string(),
            from: from.clone(),
            ..Checkpoint::default()
        };
    } else {
        if cp.url != args.url || cp.table != table || cp.from != from {
            return Err(format!(
                "{} belongs to an import of {} into {} at {}: remove it or pass another \
                 --checkpoint",
                cp_path.display(),
                cp.from,
                cp.table,
                cp.url
            ));
        }
        if !parts.contains(&cp.file) {
            return Err(format!(
                "{} says the import reached {}, which {} no longer holds",
                cp_path.display(),
                cp.file,
                dir.display()
            ));
        }
        eprintln!(
            "resuming at {} record {} ({} rows, {} cells written before), from {}",
            cp.file,
            cp.record,
            cp.rows,
            cp.cells,
            cp_path.display()
        );
    }

    let side = Side::Rest(client);
    let started = Instant::now();
    let bar = progress("importing");
    let mut importer = Importer {
        args: &args,
        side: &side,
        cp,
        cp_path: &cp_path,
        batches: 0,
        bar: &bar,
        started,
    };
    let result = importer.import_all(dir, &parts, manifest.as_ref()).await;
    bar.finish_and_clear();
    let cp = importer.cp.clone();
    match result? {
        true => {}
        false => {
            return Err(format!(
                "stopped after {} batches as asked; run again to resume",
                args.stop_after_batches.unwrap_or(0)
            ))
        }
    }
    match std::fs::remove_file(&cp_path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("removing {}: {e}", cp_path.display())),
    }
    println!(
        "imported {} rows, {} cells, {} delete markers from {} part files of {} into {table} \
         at {} in {:.1} s",
        cp.rows,
        cp.cells,
        cp.deletes,
        parts.len(),
        dir.display(),
        args.url,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn read_manifest(dir: &Path) -> Result<Option<Manifest>, String> {
    let path = dir.join(manifest::FILE);
    match std::fs::read(&path) {
        Ok(text) => serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| format!("{} is not a kura export manifest: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

/// Creates the table when it is missing, from the manifest or `--create-families`.
async fn ensure_table(
    args: &ImportArgs,
    client: &HttpClient,
    manifest: Option<&Manifest>,
) -> Result<(), String> {
    let table = args.table.as_str();
    if client.schema(table).await?.is_some() {
        return Ok(());
    }
    let desc = if !args.create_families.is_empty() {
        TableDescriptor::new(
            table,
            args.create_families
                .iter()
                .map(|f| {
                    FamilyDescriptor::new(f.as_bytes().to_vec())
                        .with_max_versions(args.create_versions)
                })
                .collect(),
        )
    } else if let Some(m) = manifest {
        let mut schema = m.schema.clone();
        if let Some(obj) = schema.as_object_mut() {
            obj.insert("name".into(), table.into());
        }
        parse_schema(table, schema.to_string().as_bytes())?
    } else {
        return Err(format!(
            "{} has no table {table} and {} has no {}: create the table first, or pass \
             --create-families A,B (and --create-versions N)",
            args.url,
            args.from.display(),
            manifest::FILE
        ));
    };
    client
        .create(&desc)
        .await
        .map_err(|e| format!("creating {table}: {e}"))?;
    eprintln!("created table {table}");
    Ok(())
}

fn load_checkpoint(path: &Path) -> Result<Option<Checkpoint>, String> {
    match std::fs::read(path) {
        Ok(text) => serde_json::from_slice(&text).map(Some).map_err(|e| {
            format!(
                "{} is not a kura import checkpoint: {e}; remove it to start over",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

/// Cells waiting to be written.
#[derive(Default)]
struct Batch {
    puts: Vec<Row>,
    deletes: Vec<ExportCell>,
    cells: usize,
    bytes: usize,
    rows: u64,
}

struct Importer<'a> {
    args: &'a ImportArgs,
    side: &'a Side,
    cp: Checkpoint,
    cp_path: &'a Path,
    batches: u64,
    bar: &'a indicatif::ProgressBar,
    started: Instant,
}

impl Importer<'_> {
    /// Imports every file from the checkpoint on; `Ok(false)` when stopped by
    /// `--stop-after-batches`.
    async fn import_all(
        &mut self,
        dir: &Path,
        parts: &[String],
        manifest: Option<&Manifest>,
    ) -> Result<bool, String> {
        for name in parts {
            let (skip, resuming) = if self.cp.file.is_empty() || *name > self.cp.file {
                (0, false)
            } else if *name == self.cp.file && !self.cp.file_done {
                (self.cp.record, true)
            } else {
                continue;
            };
            let path = dir.join(name);
            if let Some(p) = manifest.and_then(|m| m.parts.iter().find(|p| p.file == *name)) {
                let sha = files::sha256_file(&path)?;
                if sha != p.sha256 {
                    return Err(format!(
                        "{}: its SHA-256 {sha} differs from {}'s {}: the file is damaged",
                        path.display(),
                        manifest::FILE,
                        p.sha256
                    ));
                }
            }
            if !resuming {
                self.cp.file = name.clone();
                self.cp.record = 0;
                self.cp.file_done = false;
            }
            if !self.import_file(&path, name, skip).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Imports one file from record `skip` on. While one batch is being written, the next is
    /// read and decoded (two batches in memory at most).
    async fn import_file(&mut self, path: &Path, name: &str, skip: u64) -> Result<bool, String> {
        let mut reader = Reader::open(path).map_err(|e| e.to_string())?;
        reader
            .expect_classes(IMMUTABLE_BYTES_WRITABLE, RESULT)
            .map_err(|e| e.to_string())?;
        let table = self.args.table.as_str();
        let mut index = 0u64;
        let (mut batch, mut eof) = fill(self.args, &mut reader, &mut index, skip, path)?;
        loop {
            let end = index;
            if eof {
                write_batch(self.side, table, name, &batch).await?;
                return self.checkpoint(name, &batch, end, true);
            }
            let (written, next) =
                futures::join!(write_batch(self.side, table, name, &batch), async {
                    fill(self.args, &mut reader, &mut index, skip, path)
                });
            written?;
            if !self.checkpoint(name, &batch, end, false)? {
                return Ok(false);
            }
            (batch, eof) = next?;
        }
    }

    /// Records a written batch that ends at record `end` of `name`; `Ok(false)` when
    /// `--stop-after-batches` is reached.
    fn checkpoint(
        &mut self,
        name: &str,
        batch: &Batch,
        end: u64,
        eof: bool,
    ) -> Result<bool, String> {
        self.cp.record = end;
        self.cp.file_done = eof;
        self.cp.rows += batch.rows;
        self.cp.cells += (batch.cells - batch.deletes.len()) as u64;
        self.cp.deletes += batch.deletes.len() as u64;
        let text = serde_json::to_vec_pretty(&self.cp).map_err(|e| e.to_string())?;
        files::replace(self.cp_path, &text)?;
        self.batches += 1;
        self.bar.set_message(format!(
            "{}: {} rows, {} cells ({:.0} cells/s)",
            name,
            self.cp.rows,
            self.cp.cells,
            self.cp.cells as f64 / self.started.elapsed().as_secs_f64().max(1e-3)
        ));
        Ok(self
            .args
            .stop_after_batches
            .is_none_or(|n| self.batches < n))
    }
}

/// Reads records after `*index` (skipping up to record `skip`) into a batch until it is full
/// or the file ends; the flag says the file ended.
fn fill<R: std::io::Read>(
    args: &ImportArgs,
    reader: &mut Reader<R>,
    index: &mut u64,
    skip: u64,
    path: &Path,
) -> Result<(Batch, bool), String> {
    let mut batch = Batch::default();
    while let Some((key, value)) = reader.next().map_err(|e| e.to_string())? {
        *index += 1;
        if *index <= skip {
            continue;
        }
        let n = *index;
        let at = || format!("{}, record {n}", path.display());
        let row = ibw_bytes(&key).map_err(|e| format!("{}: the key: {e}", at()))?;
        let cells = if args.hbase_094 {
            decode_094(&value)
        } else {
            decode_result(&value)
        }
        .map_err(|e| {
            let hint = if args.hbase_094 {
                ""
            } else {
                " (files from HBase 0.94 need --hbase-0.94)"
            };
            format!("{} (row {}): {e}{hint}", at(), printable(row))
        })?;
        add(&mut batch, row, cells, &at)?;
        if batch.cells >= args.batch_cells || batch.bytes >= BATCH_BYTES {
            return Ok((batch, false));
        }
    }
    Ok((batch, true))
}

/// Adds one record's cells to the batch.
fn add(
    b: &mut Batch,
    row: &[u8],
    cells: Vec<ExportCell>,
    at: &dyn Fn() -> String,
) -> Result<(), String> {
    if cells.is_empty() {
        return Ok(());
    }
    let mut put = Row {
        key: row.to_vec(),
        cells: Vec::new(),
    };
    for c in cells {
        if c.row != row {
            return Err(format!(
                "{}: a cell of row {} in the record of row {}: HBase Import and Bigtable \
                 import both refuse that",
                at(),
                printable(&c.row),
                printable(row)
            ));
        }
        b.bytes += row.len() + c.family.len() + c.qualifier.len() + 8 + c.value.len();
        b.cells += 1;
        match c.kind {
            CellKind::Put => put.cells.push(Cell {
                family: c.family,
                qualifier: c.qualifier,
                timestamp: c.timestamp,
                value: c.value,
            }),
            CellKind::DeleteFamilyVersion => {
                return Err(format!(
                    "{} (row {}): a DeleteFamilyVersion marker (type 10) at timestamp {}: the \
                     HBase REST API cannot write this kind of delete, so the import stops \
                     here; nothing of this batch was written",
                    at(),
                    printable(row),
                    c.timestamp
                ))
            }
            _ => b.deletes.push(c),
        }
    }
    b.rows += 1;
    if !put.cells.is_empty() {
        b.puts.push(put);
    }
    Ok(())
}

/// Writes a batch: its puts, then its delete markers.
async fn write_batch(side: &Side, table: &str, name: &str, batch: &Batch) -> Result<(), String> {
    if !batch.puts.is_empty() {
        side.write(table, &batch.puts)
            .await
            .map_err(|e| format!("writing {table} (from {name}): {e}"))?;
    }
    let Side::Rest(client) = side else {
        unreachable!("import writes through REST only")
    };
    for d in &batch.deletes {
        let done = match d.kind {
            CellKind::DeleteFamily => {
                client
                    .delete_marker(table, &d.row, &d.family, None, d.timestamp)
                    .await
            }
            CellKind::DeleteColumn => {
                client
                    .delete_marker(table, &d.row, &d.family, Some(&d.qualifier), d.timestamp)
                    .await
            }
            CellKind::DeleteVersion => {
                client
                    .delete_version(table, &d.row, &d.family, &d.qualifier, d.timestamp)
                    .await
            }
            CellKind::Put | CellKind::DeleteFamilyVersion => {
                unreachable!("sorted out in add")
            }
        };
        done.map_err(|e| {
            format!(
                "applying a delete marker of row {} (from {name}): {e}",
                printable(&d.row)
            )
        })?;
    }
    Ok(())
}
