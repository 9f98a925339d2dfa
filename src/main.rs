//! The `kura` server binary: parse the configuration, open the store, serve HTTP, and on
//! SIGINT/SIGTERM stop accepting, drain, then flush and close every region.
//!
//! # Invariants
//! 1. No acknowledged write races the shutdown: with the regions on their own threads,
//!    `Backend::shutdown` runs after the HTTP server has stopped; thread per core (the default),
//!    it runs before the workers stop (the regions live on them), and a request that reaches a
//!    closed region answers 503 without having written anything.
//! 2. A refused configuration (remote bind without `--allow-remote`, unreadable token file) exits
//!    with status 2 before anything is opened.

use clap::Parser;
use kura::config::Config;
use kura::state::{AppState, StateSource};
use std::sync::Arc;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: a region's memtable is millions of small allocations
/// made on its actor's thread and freed, after a flush, on a background one. glibc makes that
/// free take the actor's arena lock a million times (stalling its reads and writes for a
/// quarter of a second); mimalloc hands remote frees back without a lock.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process, so that memory is faulted in 4 KiB at a
/// time: a 2 MiB huge page is zeroed in one fault that stalls its thread for milliseconds
/// (`--transparent-huge-pages` keeps them). mimalloc asks for them on its arenas, so the
/// system's `madvise` setting is not enough. Called once every region has opened: replaying a
/// large log into fresh memory is 15–40% cheaper in CPU with huge pages (1 GiB log of 1 KB
/// values: 0.83–1.0 s against 1.19–1.58 s), and no request waits on those faults then.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::warn!(
            "could not turn transparent huge pages off ({e}): requests may stall on 2 MiB page faults"
        );
    }
}

fn main() -> std::process::ExitCode {
    // The client subcommands, each a command line of its own that starts with its name;
    // anything else serves.
    let subcommand = std::env::args_os().nth(1);
    let rest = || std::env::args_os().skip(1);
    match subcommand.as_deref().and_then(|a| a.to_str()) {
        // src/copy/: stream a table between two sides.
        Some("copy") => return kura::copy::main(rest()),
        // src/verify/: HashTable's hashes of a table, or a comparison with them.
        Some("verify") => return kura::verify::main(rest()),
        // src/backup/: online backup, and restore into a data directory.
        Some("backup") => return kura::backup::backup_main(rest()),
        Some("restore") => return kura::backup::restore_main(rest()),
        // src/transfer/: HBase Export files out and in.
        Some("export") => return kura::transfer::export::main(rest()),
        Some("import") => return kura::transfer::import::main(rest()),
        // src/repair/: fix what a crash left between the applications' rows.
        Some("repair") => return kura::repair::main(rest()),
        _ => {}
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let config = Config::parse();
    if let Err(e) = config.validate() {
        tracing::error!("{e}");
        return std::process::ExitCode::from(2);
    }
    let token = match config.token() {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("{e}");
            return std::process::ExitCode::from(2);
        }
    };
    if config.allow_remote && token.is_none() {
        tracing::warn!(
            bind = %config.bind,
            "remote access is allowed but no token is set (KURA_TOKEN or --token-file): \
             anyone who can reach this address can read and write every table"
        );
    }
    let system = actix_rt::System::new();
    match system.block_on(run(config, token)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(config: Config, token: Option<String>) -> Result<(), String> {
    match config.bigtable_config() {
        Ok(Some(bigtable)) => serve_bigtable(config, token, bigtable).await,
        Ok(None) => serve_embedded(config, token).await,
        Err(e) => Err(e.to_string()),
    }
}

/// Serve over Cloud Bigtable: nothing is kept on this machine, so the server is stateless
/// and any number of them may serve one instance behind a load balancer.
async fn serve_bigtable(
    config: Config,
    token: Option<String>,
    bigtable: kura_backends::BigtableConfig,
) -> Result<(), String> {
    let started = std::time::Instant::now();
    let location = format!(
        "projects/{}/instances/{}",
        bigtable.project, bigtable.instance
    );
    let kura = kura_backends::connect_bigtable(bigtable)
        .await
        .map_err(|e| format!("cannot connect to Bigtable {location}: {e}"))?;
    let state = AppState::new(kura.clone(), config.limits());
    state.ops.metrics.record_startup(started.elapsed());
    if let Err(e) = kura::apps::ensure_tables(&kura).await {
        tracing::warn!("cannot create the applications' tables yet: {e}");
    }
    let source = StateSource::ready(state);
    // No regions live on the workers: thread per core has nothing to place.
    let server = kura::server::build_server(&config, Arc::clone(&source), false, token)
        .map_err(|e| format!("cannot serve on {}: {e}", config.bind))?;
    let handle = server.handle();
    let mut served = actix_rt::spawn(server);
    tracing::info!(bind = %config.bind, bigtable = %location, "kura serving");
    let (served, closed) = tokio::select! {
        served = &mut served => (served, kura.shutdown().await),
        () = wait_for_signal() => {
            tracing::info!("shutdown requested: draining HTTP connections");
            source.ops().begin_shutdown();
            handle.stop(true).await;
            let served = served.await;
            (served, kura.shutdown().await)
        }
    };
    let served = served.map_err(|e| format!("server task failed: {e}"))?;
    served.map_err(|e| format!("server error: {e}"))?;
    closed.map_err(|e| format!("shutdown error: {e}"))?;
    tracing::info!("clean shutdown");
    Ok(())
}

/// Serve the embedded store in `--data-dir`.
async fn serve_embedded(config: Config, token: Option<String>) -> Result<(), String> {
    let started = std::time::Instant::now();
    let cannot_open = |e| {
        format!(
            "cannot open the store in {}: {e}",
            config.data_dir.display()
        )
    };
    let source = StateSource::pending();
    let tpc = config.thread_per_core;
    if tpc && config.arbiters != 0 {
        tracing::warn!(
            arbiters = config.arbiters,
            "--arbiters is ignored with --thread-per-core true: the regions run on the HTTP \
             workers (set --workers, or --thread-per-core false)"
        );
    }
    // Thread per core: the workers must exist before the store, whose regions run on them.
    let separate = if tpc {
        None
    } else {
        Some(
            kura_backends::start_embedded(config.kura_config())
                .await
                .map_err(cannot_open)?,
        )
    };
    let server = kura::server::build_server(&config, Arc::clone(&source), tpc, token)
        .map_err(|e| format!("cannot serve on {}: {e}", config.bind))?;
    let handle = server.handle();
    // Polling the server starts the workers (each registers its arbiter as it builds its app).
    let mut served = actix_rt::spawn(server);
    let kura = match separate {
        Some(kura) => kura,
        None => {
            let workers = config.worker_threads();
            let arbiters = loop {
                let arbiters = source.arbiters();
                if arbiters.len() >= workers {
                    break arbiters;
                }
                if served.is_finished() {
                    let why = match (&mut served).await {
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(())) => "it stopped".into(),
                        Err(e) => e.to_string(),
                    };
                    return Err(format!("the HTTP workers did not start: {why}"));
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            };
            match kura_backends::start_embedded_on(config.kura_config(), arbiters).await {
                Ok(kura) => kura,
                Err(e) => {
                    handle.stop(false).await;
                    return Err(cannot_open(e));
                }
            }
        }
    };
    // Every region opened (its log replayed) before the first answer: `/healthz` then means
    // ready, and the startup time includes the replay.
    for table in kura.list_tables().await.map_err(cannot_open)? {
        let _ = kura.regions(&table.name).await;
    }
    source.ops().metrics.record_startup(started.elapsed());
    tracing::info!(
        took_ms = started.elapsed().as_millis() as u64,
        thread_per_core = tpc,
        "store opened"
    );
    // Before the first request: the applications' creation times stay above those of every
    // earlier run on this data dir (src/apps/clock.rs). Bigtable has no data dir and needs no
    // lease: what must survive a restart is in the rows.
    let state = AppState::new(kura.clone(), config.limits());
    let clock = Arc::clone(&state.clock);
    if let Err(e) = clock.open(&config.data_dir) {
        handle.stop(false).await;
        let _ = kura.shutdown().await;
        return Err(e);
    }
    if let Err(e) = kura::apps::ensure_tables(&kura).await {
        tracing::warn!("cannot create the applications' tables yet: {e}");
    }
    source.set(state);
    if !config.transparent_huge_pages {
        // Every region has replayed its log by now (above).
        no_transparent_huge_pages();
    }
    tracing::info!(bind = %config.bind, data_dir = %config.data_dir.display(), "kura serving");
    let (served, closed) = tokio::select! {
        served = &mut served => (served, kura.shutdown().await),
        () = wait_for_signal() => {
            tracing::info!("shutdown requested (a second SIGINT or SIGTERM exits at once)");
            source.ops().begin_shutdown();
            // A shutdown that hangs (a disk that stopped answering) can still be cut short
            // without SIGKILL; what was acknowledged in `sync` durability is in the logs.
            actix_rt::spawn(async {
                wait_for_signal().await;
                tracing::warn!("second signal: exiting without finishing the shutdown; the next start replays the logs");
                std::process::exit(130);
            });
            if tpc {
                // The regions live on the workers: close them while the workers still run.
                // Requests that reach a closed region answer 503; every acknowledged write was
                // committed before its region closed.
                tracing::info!("flushing and closing every region, then draining HTTP");
                let closed = kura.shutdown().await;
                handle.stop(true).await;
                (served.await, closed)
            } else {
                tracing::info!("draining HTTP connections");
                handle.stop(true).await;
                let served = served.await;
                tracing::info!("HTTP stopped: flushing and closing every region");
                (served, kura.shutdown().await)
            }
        }
    };
    // Nothing more is stored: the next start may begin at this run's last time.
    clock.close();
    let served = served.map_err(|e| format!("server task failed: {e}"))?;
    served.map_err(|e| format!("server error: {e}"))?;
    closed.map_err(|e| format!("shutdown error: {e}"))?;
    tracing::info!("clean shutdown");
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
