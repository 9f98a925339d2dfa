//! `kura backup --url URL --out DIR` and `kura restore --from DIR [--data-dir D] [--verify]`:
//! online backups of a server on the embedded backend, and turning one back into a data
//! directory.
//!
//! # What a backup holds
//! Every table the server had when the backup began (`POST /admin/backups`, see
//! `src/ops/backup.rs`), with every write acknowledged before that moment; each region is
//! copied between two of its write batches, so each row is as of one moment (different
//! regions, and so different rows, may be at slightly different moments: writes that go on
//! during the backup may be in it for one region and not for another). Every version, delete
//! marker, family setting and idempotency key still in its window is kept; the region layout
//! is the server's. The files are: the catalog, per region a manifest, its segments and a log
//! holding only idempotency keys (nothing to replay), the applications' clock lease, and
//! `kura-backup.json`: format, server version, creation time, the tables, and every file
//! with its size and CRC-32C.
//!
//! # Resuming
//! `kura backup` keeps `DIR/kura-backup.partial.json` (the server's staging id) while it
//! runs and writes `kura-backup.json` last (temporary file, fsync, rename), so a directory
//! without it is recognisably incomplete. Run again, it reuses the server's staging copy if it
//! is still there (else takes a new one), keeps every file already present with the listed
//! size and checksum, continues a partly downloaded file (`*.part`) from where it stopped, and
//! downloads the rest; a file that fails its checksum is downloaded again. `kura restore`
//! does the same in the data directory, marked `kura-restore.partial.json` until done (the
//! server refuses to open a directory with that mark).
//!
//! # Invariants
//! 1. Memory is bounded by one chunk (1 MiB, or one HTTP frame) whatever the data size.
//! 2. A file is only ever given its final name once complete, fsynced and checked.
//! 3. `kura restore` writes only into an empty (or missing) directory, or one holding its own
//!    unfinished restore of the same backup; it refuses a backup without `kura-backup.json`
//!    and any file whose size or checksum differs, naming it.
//! 4. Exit codes: 0 done, 1 failed (or a file failed its checksum), 2 bad arguments.

pub mod format;

use crate::copy::http::HttpClient;
use clap::Parser;
use format::{FileEntry, Listing};
use hyper::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Kept in the backup directory while `kura backup` runs.
pub const PARTIAL: &str = "kura-backup.partial.json";

/// Kept in the data directory while `kura restore` runs (see `kura_backend::RESTORE_MARKER`).
pub const RESTORE_PARTIAL: &str = kura_backend::RESTORE_MARKER;

/// Take a consistent copy of a running Kura server's data while it goes on serving writes.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "kura backup",
    bin_name = "kura backup",
    about = "Take a consistent copy of a running Kura server's data (embedded backend) while it \
             goes on serving",
    after_help = "WHAT A BACKUP HOLDS: every write the server acknowledged before the backup \
began, each row as of one moment (regions are copied one by one while writes go on, so two \
rows may be at slightly different moments). Every file is listed with its size and CRC-32C in \
DIR/kura-backup.json, written last: a DIR without it is an incomplete backup.

RESUMING: run the same command again after it was killed or failed: files already downloaded \
and intact are kept, a partly downloaded one continues, the rest is downloaded.

RESTORING: kura restore --from DIR --data-dir NEW_DIR, then start kura --data-dir NEW_DIR.

EXIT CODES: 0 done, 1 failed, 2 bad arguments."
)]
pub struct BackupArgs {
    /// The server: http(s)://HOST:PORT.
    #[arg(long, value_name = "URL")]
    pub url: String,

    /// The directory the backup is written to (created; empty, or an unfinished backup of the
    /// same server to resume).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// File whose first line is the server's bearer token (`Authorization: Bearer`); without
    /// it the KURA_TOKEN environment variable is used, if set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Testing: stop (exit 1) after this many files were downloaded, as if killed.
    #[arg(long, hide = true)]
    pub stop_after_files: Option<u64>,
}

/// Turn a backup into a data directory a server opens, and check its files.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "kura restore",
    bin_name = "kura restore",
    about = "Check a backup's files and turn it into a data directory a Kura server opens",
    after_help = "Every file's size and CRC-32C is checked against kura-backup.json before anything is \
written (--verify alone only checks), and again while it is copied: a damaged backup is never \
restored. The data directory must be empty or missing; a restore that was interrupted is \
resumed by running the same command again.

EXIT CODES: 0 done (and intact), 1 failed or a file is damaged, 2 bad arguments."
)]
pub struct RestoreArgs {
    /// The backup directory (written by kura backup).
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,

    /// The data directory to create (empty or missing).
    #[arg(long, value_name = "D")]
    pub data_dir: Option<PathBuf>,

    /// Check every file's size and checksum, and say so (alone: only check).
    #[arg(long)]
    pub verify: bool,
}

/// The state `kura backup` keeps while it runs.
#[derive(Debug, Serialize, Deserialize)]
struct Partial {
    url: String,
    id: String,
}

/// A byte progress bar on a terminal (hidden otherwise).
fn bytes_bar(what: &'static str, total: u64) -> indicatif::ProgressBar {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_prefix(what);
    bar
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, String> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{} is damaged: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), String> {
    let bytes = serde_json::to_vec_pretty(v).map_err(|e| e.to_string())?;
    format::write_atomic(path, &bytes).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Whether `path` holds exactly `entry` (size, then checksum).
fn intact(path: &Path, entry: &FileEntry, bar: &indicatif::ProgressBar) -> bool {
    match std::fs::metadata(path) {
        Ok(m) if m.len() == entry.size => {}
        _ => return false,
    }
    format::checksum_file(path, &mut |n| bar.inc(n))
        .is_ok_and(|(_, crc)| format::hex(crc) == entry.crc32c)
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("syncing {}: {e}", dir.display()))
}

/// `DIR/path.part`.
fn part_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    path.with_file_name(name)
}

/// Runs `kura backup`; `args` starts with the subcommand's name.
pub fn backup_main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = BackupArgs::parse_from(args);
    crate::copy::init_client_logging();
    let system = actix_rt::System::new();
    match system.block_on(backup(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    /// Bad arguments, or a directory this command must not write into.
    Usage(String),
    Failed(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Failed(e)
    }
}

/// Creates a staging copy on the server.
async fn create_staging(client: &HttpClient, url: &str) -> Result<Listing, Failure> {
    // Not retried: a retry could leave a second staging copy (it would expire, but why).
    let r = client.admin(Method::POST, "/admin/backups", false).await?;
    match r.status {
        StatusCode::CREATED | StatusCode::OK => serde_json::from_slice(&r.body).map_err(|e| {
            Failure::Failed(format!(
                "{url} answered a backup listing that does not parse: {e}"
            ))
        }),
        StatusCode::BAD_REQUEST => Err(Failure::Usage(format!(
            "{url} cannot take a backup: {}",
            String::from_utf8_lossy(&r.body)
        ))),
        _ => Err(Failure::Failed(crate::copy::side::unexpected(
            &format!("starting a backup on {url}"),
            &r,
        ))),
    }
}

async fn backup(args: BackupArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let token =
        crate::copy::http::client_token(args.token_file.as_deref()).map_err(Failure::Usage)?;
    let client = HttpClient::new(&args.url)
        .and_then(|c| c.with_token(token.as_deref()))
        .map_err(Failure::Usage)?;
    let out = args.out.clone();
    std::fs::create_dir_all(&out)
        .map_err(|e| Failure::Usage(format!("creating {}: {e}", out.display())))?;
    if let Some(done) = read_json::<Listing>(&out.join(format::MANIFEST))? {
        return Err(Failure::Usage(format!(
            "{} already holds a complete backup ({}, taken {}); choose another --out",
            out.display(),
            done.id,
            done.created
        )));
    }
    let partial_path = out.join(PARTIAL);
    let partial = read_json::<Partial>(&partial_path)?;
    if partial.is_none() {
        let mut entries = std::fs::read_dir(&out)
            .map_err(|e| Failure::Usage(format!("reading {}: {e}", out.display())))?;
        if entries.next().is_some() {
            return Err(Failure::Usage(format!(
                "{} is not empty and holds no unfinished backup: back up into a new or empty \
                 directory",
                out.display()
            )));
        }
    }
    // Resume on the same staging copy if the server still has it.
    let mut listing = None;
    if let Some(p) = partial.as_ref().filter(|p| p.url == args.url) {
        let r = client
            .admin(Method::GET, &format!("/admin/backups/{}", p.id), true)
            .await?;
        if r.status == StatusCode::OK {
            listing = serde_json::from_slice::<Listing>(&r.body).ok();
        }
        if listing.is_none() {
            eprintln!(
                "the server no longer has staging copy {} (expired or restarted): taking a new \
                 one; files already downloaded and unchanged are kept",
                p.id
            );
        }
    }
    let listing = match listing {
        Some(l) => l,
        None => create_staging(&client, &args.url).await?,
    };
    write_json(
        &partial_path,
        &Partial {
            url: args.url.clone(),
            id: listing.id.clone(),
        },
    )?;
    for f in &listing.files {
        format::check_rel_path(&f.path)
            .map_err(|e| format!("the server listed a bad path: {e}"))?;
        if f.path == format::MANIFEST || f.path == PARTIAL || f.path.ends_with(".part") {
            return Err(Failure::Failed(format!(
                "the server listed {}, a name kura backup keeps for itself",
                f.path
            )));
        }
    }
    let bar = bytes_bar("backup", listing.bytes);
    let (mut fetched, mut kept, mut fetched_bytes) = (0u64, 0u64, 0u64);
    for entry in &listing.files {
        let path = format::join(&out, &entry.path)?;
        if intact(&path, entry, &bar) {
            kept += 1;
            continue;
        }
        if let Some(limit) = args.stop_after_files {
            if fetched >= limit {
                bar.abandon();
                return Err(Failure::Failed(format!(
                    "stopped after {fetched} files (--stop-after-files)"
                )));
            }
        }
        bar.set_message(entry.path.clone());
        fetched_bytes += fetch_file(&client, &listing.id, entry, &path, &bar).await?;
        fetched += 1;
    }
    // Files of an earlier staging copy that this one does not list (left by a resumed run
    // whose first staging copy was gone).
    let listed: std::collections::BTreeSet<&str> =
        listing.files.iter().map(|f| f.path.as_str()).collect();
    for rel in format::walk(&out).map_err(|e| format!("listing {}: {e}", out.display()))? {
        if rel != PARTIAL && !listed.contains(rel.as_str()) {
            let p = format::join(&out, &rel)?;
            std::fs::remove_file(&p).map_err(|e| format!("removing {}: {e}", p.display()))?;
        }
    }
    // Complete: the manifest last, then the server's staging copy goes.
    write_json(&out.join(format::MANIFEST), &listing)?;
    let _ = std::fs::remove_file(&partial_path);
    sync_dir(&out)?;
    bar.finish_and_clear();
    match client
        .admin(
            Method::DELETE,
            &format!("/admin/backups/{}", listing.id),
            true,
        )
        .await
    {
        Ok(r) if r.status.is_success() || r.status == StatusCode::NOT_FOUND => {}
        Ok(r) => eprintln!(
            "warning: {}",
            crate::copy::side::unexpected("removing the server's staging copy", &r)
        ),
        Err(e) => eprintln!("warning: removing the server's staging copy: {e}"),
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "backup {} of {} table(s) → {}: {} files, {:.1} MB ({} downloaded, {:.1} MB; {} already there) in {:.1} s",
        listing.id,
        listing.tables.len(),
        out.display(),
        listing.files.len(),
        listing.bytes as f64 / 1e6,
        fetched,
        fetched_bytes as f64 / 1e6,
        kept,
        secs
    );
    Ok(())
}

/// Downloads one file into `path` through `path.part` (continuing a part already there),
/// checks it and gives it its name. Answers the bytes downloaded.
async fn fetch_file(
    client: &HttpClient,
    id: &str,
    entry: &FileEntry,
    path: &Path,
    bar: &indicatif::ProgressBar,
) -> Result<u64, String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let part = part_path(path);
    let url_path = format!("/admin/backups/{id}/files/{}", entry.path);
    let mut downloaded = 0;
    // A second attempt starts over: the part on disk may be what failed the checksum.
    for attempt in 0..3 {
        let mut have = match std::fs::metadata(&part) {
            Ok(m) if attempt == 0 && m.len() <= entry.size => m.len(),
            _ => 0,
        };
        let mut crc = 0u32;
        if have > 0 {
            let (n, c) = format::checksum_file(&part, &mut |n| bar.inc(n))
                .map_err(|e| format!("reading {}: {e}", part.display()))?;
            (have, crc) = (n, c);
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&part)
            .map_err(|e| format!("opening {}: {e}", part.display()))?;
        if have == 0 {
            f.set_len(0)
                .map_err(|e| format!("truncating {}: {e}", part.display()))?;
        }
        let mut written = have;
        let mut failure = None;
        if have < entry.size {
            let mut sink = |data: &[u8]| -> Result<(), String> {
                f.write_all(data)
                    .map_err(|e| format!("writing {}: {e}", part.display()))?;
                crc = crc32c::crc32c_append(crc, data);
                written += data.len() as u64;
                bar.inc(data.len() as u64);
                Ok(())
            };
            if let Err(e) = client.download(&url_path, have, &mut sink).await {
                failure = Some(e);
            }
            downloaded += written - have;
        }
        f.sync_all()
            .map_err(|e| format!("syncing {}: {e}", part.display()))?;
        drop(f);
        if let Some(e) = failure {
            if e.contains("HTTP 4") {
                return Err(e);
            }
            eprintln!("warning: {e}; retrying from byte {written}");
            continue;
        }
        if written == entry.size && format::hex(crc) == entry.crc32c {
            std::fs::rename(&part, path)
                .map_err(|e| format!("renaming {}: {e}", part.display()))?;
            if let Some(dir) = path.parent() {
                sync_dir(dir)?;
            }
            return Ok(downloaded);
        }
        eprintln!(
            "warning: {} arrived with {written} bytes and CRC-32C {} (listed: {} bytes, {}); \
             downloading it again",
            entry.path,
            format::hex(crc),
            entry.size,
            entry.crc32c
        );
        let _ = std::fs::remove_file(&part);
    }
    Err(format!(
        "{} could not be downloaded intact after 3 attempts",
        entry.path
    ))
}

/// Runs `kura restore`; `args` starts with the subcommand's name.
pub fn restore_main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = RestoreArgs::parse_from(args);
    crate::copy::init_client_logging();
    if args.data_dir.is_none() && !args.verify {
        eprintln!("error: give --data-dir D (restore into D) and/or --verify (check the files)");
        return ExitCode::from(2);
    }
    match restore(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The backup's listing, refusing an incomplete or unreadable one.
fn load_listing(from: &Path) -> Result<Listing, Failure> {
    let manifest = from.join(format::MANIFEST);
    let listing = read_json::<Listing>(&manifest)?.ok_or_else(|| {
        let why = if from.join(PARTIAL).exists() {
            "an interrupted kura backup: run it again to finish it"
        } else {
            "not a backup directory"
        };
        Failure::Failed(format!(
            "{} is not a complete backup: {} is missing ({why})",
            from.display(),
            format::MANIFEST
        ))
    })?;
    if listing.format != format::FORMAT {
        return Err(Failure::Failed(format!(
            "{} has format {}; this kura reads format {}",
            manifest.display(),
            listing.format,
            format::FORMAT
        )));
    }
    for f in &listing.files {
        format::check_rel_path(&f.path).map_err(|e| format!("{}: {e}", manifest.display()))?;
    }
    Ok(listing)
}

/// Checks one backup file; the error names it.
fn verify_file(from: &Path, entry: &FileEntry, bar: &indicatif::ProgressBar) -> Result<(), String> {
    let path = format::join(from, &entry.path)?;
    let (size, crc) = format::checksum_file(&path, &mut |n| bar.inc(n))
        .map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
    if size != entry.size || format::hex(crc) != entry.crc32c {
        return Err(format!(
            "{} is damaged: {size} bytes with CRC-32C {}, kura-backup.json lists {} bytes with {}",
            path.display(),
            format::hex(crc),
            entry.size,
            entry.crc32c
        ));
    }
    Ok(())
}

fn restore(args: &RestoreArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let listing = load_listing(&args.from)?;
    // Before anything is written: a damaged backup is refused whole, naming the file (and
    // each file is checked again while copied).
    let bar = bytes_bar("verify", listing.bytes);
    for entry in &listing.files {
        bar.set_message(entry.path.clone());
        verify_file(&args.from, entry, &bar)?;
    }
    bar.finish_and_clear();
    if args.verify {
        println!(
            "backup {} in {}: {} files, {:.1} MB, every checksum matches",
            listing.id,
            args.from.display(),
            listing.files.len(),
            listing.bytes as f64 / 1e6
        );
    }
    let Some(dest) = &args.data_dir else {
        return Ok(());
    };
    let marker = dest.join(RESTORE_PARTIAL);
    match read_json::<Partial>(&marker)? {
        Some(p) if p.id == listing.id => {}
        Some(p) => {
            return Err(Failure::Usage(format!(
                "{} holds an unfinished restore of another backup ({}): restore into another \
                 directory, or remove this one first",
                dest.display(),
                p.id
            )))
        }
        None => {
            if let Ok(mut entries) = std::fs::read_dir(dest) {
                if let Some(Ok(e)) = entries.next() {
                    return Err(Failure::Usage(format!(
                        "refusing to restore into {}: it is not empty (it holds {:?}); restore \
                         into a new or empty directory",
                        dest.display(),
                        e.file_name()
                    )));
                }
            }
            std::fs::create_dir_all(dest)
                .map_err(|e| Failure::Usage(format!("creating {}: {e}", dest.display())))?;
            write_json(
                &marker,
                &Partial {
                    url: args.from.display().to_string(),
                    id: listing.id.clone(),
                },
            )?;
        }
    }
    let bar = bytes_bar("restore", listing.bytes);
    // The catalog last: a data directory is only a store's once it names the regions.
    let mut order: Vec<&FileEntry> = listing.files.iter().collect();
    order.sort_by_key(|f| f.path == "catalog.json");
    let mut dirs = std::collections::BTreeSet::new();
    for entry in order {
        bar.set_message(entry.path.clone());
        let to = format::join(dest, &entry.path)?;
        if intact(&to, entry, &bar) {
            continue;
        }
        let from = format::join(&args.from, &entry.path)?;
        copy_checked(&from, &to, entry, &bar)?;
        if let Some(d) = to.parent() {
            dirs.insert(d.to_path_buf());
        }
    }
    for d in &dirs {
        sync_dir(d)?;
    }
    std::fs::remove_file(&marker).map_err(|e| format!("removing {}: {e}", marker.display()))?;
    sync_dir(dest)?;
    bar.finish_and_clear();
    println!(
        "restored backup {} ({} table(s): {}) into {}: {} files, {:.1} MB in {:.1} s; start it \
         with kura --data-dir {}",
        listing.id,
        listing.tables.len(),
        listing.tables.join(", "),
        dest.display(),
        listing.files.len(),
        listing.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        dest.display()
    );
    Ok(())
}

/// Copies a backup file to `to` through `to.part`, checking its checksum on the way.
fn copy_checked(
    from: &Path,
    to: &Path,
    entry: &FileEntry,
    bar: &indicatif::ProgressBar,
) -> Result<(), String> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let part = part_path(to);
    let mut r = std::fs::File::open(from)
        .map_err(|e| format!("{}: cannot be read: {e}", from.display()))?;
    let mut w =
        std::fs::File::create(&part).map_err(|e| format!("creating {}: {e}", part.display()))?;
    let mut buf = vec![0u8; format::CHUNK];
    let (mut size, mut crc) = (0u64, 0u32);
    loop {
        let n = r
            .read(&mut buf)
            .map_err(|e| format!("{}: cannot be read: {e}", from.display()))?;
        if n == 0 {
            break;
        }
        w.write_all(&buf[..n])
            .map_err(|e| format!("writing {}: {e}", part.display()))?;
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        size += n as u64;
        bar.inc(n as u64);
    }
    if size != entry.size || format::hex(crc) != entry.crc32c {
        drop(w);
        let _ = std::fs::remove_file(&part);
        return Err(format!(
            "{} is damaged: {size} bytes with CRC-32C {}, kura-backup.json lists {} bytes with {}; \
             nothing of it was restored",
            from.display(),
            format::hex(crc),
            entry.size,
            entry.crc32c
        ));
    }
    w.sync_all()
        .map_err(|e| format!("syncing {}: {e}", part.display()))?;
    drop(w);
    std::fs::rename(&part, to).map_err(|e| format!("renaming {}: {e}", part.display()))
}
