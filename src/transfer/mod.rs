//! `kura export` and `kura import`: a table to and from the files of HBase's `Export`/`Import`
//! (`shared/HBASE_FORMATS.md` §3): SequenceFiles `part-m-NNNNN` of (`ImmutableBytesWritable`
//! row key, `Result`) records, `_SUCCESS`, and Kura's own `kura-export.json` beside them.
//! Both speak the HBase REST API (through [`crate::copy::http`]), so either end may be Kura or a
//! real HBase REST gateway. The files are what HBase's `Import` and Google's Bigtable import
//! (bigtable-beam-import, the Dataflow "SequenceFile to Bigtable" template) read.
//!
//! # Layout
//! - [`export`]: `kura export`: scans, writes parts, checkpoints completed parts.
//! - [`import`]: `kura import`: reads parts (Kura's or HBase's), writes batches, checkpoints.
//! - [`manifest`]: `kura-export.json` (schema, counts, per-part SHA-256, create commands).
//! - [`files`]: atomic file replacement, directory fsync, a SHA-256-computing sink.
//!
//! # Invariants
//! 1. Memory is bounded by one scan page (export) or one write batch (import) plus one record,
//!    whatever the table's size.
//! 2. A file another program may read is only ever complete: parts are written under a
//!    `.`-prefixed temporary name and renamed when whole and fsynced; `_SUCCESS` comes last.
//! 3. Resume files are replaced atomically (temp file, fsync, rename) after the work they
//!    record is durable (export) or acknowledged by the server (import).

pub mod export;
pub mod files;
pub mod import;
pub mod manifest;

use std::time::Duration;

/// Exit code for bad arguments (as clap and `kura copy` use).
pub const EXIT_USAGE: u8 = 2;

/// Logs of the libraries, warnings and up (RUST_LOG overrides), on stderr: the commands report
/// on stdout.
fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
}

/// A progress line on stderr when it is a terminal, nothing otherwise.
fn progress(what: &'static str) -> indicatif::ProgressBar {
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

/// Parses a table name by the server's rules.
fn parse_table(s: &str) -> Result<String, String> {
    kura_backend::schema::validate_table_name(s).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

/// Lower-case hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
