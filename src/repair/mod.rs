//! `kura repair --url URL [--app blog|actions|counter|graph|all] [--dry-run]`: finds and fixes
//! what a crash left between the applications' rows (dangling index rows, index rows missing
//! or behind their entity, relationships whose end node is gone), and reports what it changed.
//!
//! The work is done by the server's `POST /admin/repair` (`src/apps/repair.rs`, whose module
//! doc says why it is an admin endpoint and not a client of the public API, and why it is safe
//! while the server takes writes). This command walks each application's table page by page
//! through it (passing each page's `next` back), adds the pages up, and prints one JSON report
//! on stdout:
//!
//! ```json
//! {"dry_run": false,
//!  "apps": {"blog": {"scanned": 12, "counts": {"dangling_list_rows_removed": 1},
//!                    "changes": [{"kind": "...", "row": "\\x..", "detail": {...}}]}, ...},
//!  "changed": 1}
//! ```
//!
//! # Invariants
//! 1. Idempotent, as the endpoint is: a second run reports `"changed": 0`. `--dry-run`
//!    writes nothing and reports what a run would change.
//! 2. Memory is bounded by the report: one page's answer at a time, and every change listed
//!    (`--max-listed` caps the list; the counts always count every change).
//! 3. Exit codes: 0 done, 1 failed (the report of what was done so far is still printed), 2
//!    bad arguments.

use crate::apps::repair::APPS;
use crate::copy::http::HttpClient;
use clap::Parser;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;

/// Find and fix what a crash left between the applications' rows, and report it.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "kura repair",
    bin_name = "kura repair",
    about = "Find and fix what a crash left between the applications' entity and index rows \
             (through the server's POST /admin/repair), and report what changed as JSON",
    after_help = "WHAT IT FIXES (see README, \"Repairing the applications' rows\"):
  blog     list rows whose article is gone (removed); list rows missing or older than their
           article (written from the article)
  graph    adjacency rows whose relationship is gone (removed); adjacency rows missing or
           older than their relationship (written from it); relationships one of whose end
           nodes is gone or was created again after them (removed, with their adjacency rows)
  actions  nothing can be left half-written (an action is one row)
  counter  nothing can be left half-written (a hit is one atomic row increment)

It is safe to run while the server takes writes, and running it twice changes nothing more.

EXIT CODES: 0 done, 1 failed, 2 bad arguments."
)]
pub struct RepairArgs {
    /// The Kura server: http(s)://HOST:PORT.
    #[arg(long, value_name = "URL")]
    pub url: String,

    /// The application to repair, or all of them.
    #[arg(long, value_name = "APP", default_value = "all",
          value_parser = ["blog", "actions", "counter", "graph", "all"])]
    pub app: String,

    /// Report what would change, change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Rows the server examines per request.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub page_rows: u64,

    /// List at most this many changed rows per application (all are counted).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_listed: usize,

    /// File whose first line is the bearer token sent to the server; without it the KURA_TOKEN
    /// environment variable is used, if set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// Runs `kura repair`; `args` starts with the subcommand's name (`repair`).
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = RepairArgs::parse_from(args);
    crate::copy::init_client_logging();
    let client = match crate::copy::http::client_token(args.token_file.as_deref()).and_then(|t| {
        HttpClient::new(args.url.trim_end_matches('/')).and_then(|c| c.with_token(t.as_deref()))
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let system = actix_rt::System::new();
    let mut report = Map::new();
    let result = system.block_on(run(&args, &client, &mut report));
    let changed: u64 = report
        .values()
        .filter_map(|r| r["counts"].as_object())
        .flat_map(|c| c.values().filter_map(Value::as_u64))
        .sum();
    let out = json!({"dry_run": args.dry_run, "apps": report, "changed": changed});
    println!("{out:#}");
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Repairs each application asked for, adding its pages up into `report[app]`.
async fn run(
    args: &RepairArgs,
    client: &HttpClient,
    report: &mut Map<String, Value>,
) -> Result<(), String> {
    let apps: Vec<&str> = if args.app == "all" {
        APPS.to_vec()
    } else {
        vec![args.app.as_str()]
    };
    let bar = crate::copy::progress("repair");
    for app in apps {
        let mut scanned = 0u64;
        let mut counts = Map::new();
        let mut changes = Vec::new();
        let mut note = None;
        let mut after = String::new();
        let result = loop {
            let path = format!(
                "/admin/repair?app={app}&dry_run={}&limit={}&after={after}",
                args.dry_run, args.page_rows
            );
            let page = match client.post_json(&path).await {
                Ok(p) => p,
                Err(e) => break Err(format!("repairing {app}: {e}")),
            };
            scanned += page["scanned"].as_u64().unwrap_or(0);
            for (kind, n) in page["counts"].as_object().into_iter().flatten() {
                let total = counts.get(kind).and_then(Value::as_u64).unwrap_or(0);
                counts.insert(kind.clone(), json!(total + n.as_u64().unwrap_or(0)));
            }
            for c in page["changes"].as_array().into_iter().flatten() {
                if changes.len() < args.max_listed {
                    changes.push(c.clone());
                }
            }
            if let Some(n) = page["note"].as_str() {
                note = Some(n.to_string());
            }
            bar.set_message(format!("{app}: {scanned} rows examined"));
            match page["next"].as_str() {
                Some(next) => after = next.to_string(),
                None => break Ok(()),
            }
        };
        let mut r = json!({"scanned": scanned, "counts": counts, "changes": changes});
        if let Some(n) = note {
            r["note"] = json!(n);
        }
        report.insert(app.to_string(), r);
        result?;
    }
    bar.finish_and_clear();
    Ok(())
}
