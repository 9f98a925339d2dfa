//! Command-line and environment configuration of the `kura` server (clap, derive).
//!
//! Every option can also be set from the environment as `KURA_<NAME>` (for example
//! `KURA_BIND=0.0.0.0:8080`). The bearer token is never taken from the command line: only from
//! `--token-file` or the `KURA_TOKEN` environment variable, so it does not show up in `ps`.
//!
//! # Invariants
//! 1. [`Config::validate`] refuses a non-loopback bind address unless `--allow-remote` is given.
//! 2. [`Config::kura_config`] and [`Config::limits`] are pure conversions: they never touch disk.

use crate::state::Limits;
use clap::{Parser, ValueEnum};
use kura_backends::embedded::Config as KuraConfig;
use kura_backends::embedded::{Durability, RecoveryMode};
use kura_backends::BigtableConfig;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// Durability mode of acknowledged writes (RELIABILITY.md "Durability modes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// fsync before acknowledging (group commit).
    Sync,
    /// fsync at least every `--sync-interval-ms`.
    Interval,
    /// Leave syncing to the OS.
    None,
}

/// What recovery does with a damaged log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RecoveryArg {
    /// Replay to the first bad frame and truncate the log there.
    PointInTime,
    /// Refuse to start on log damage other than a torn tail (what a crash leaves of unsynced writes).
    Strict,
}

/// Where the data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// This machine's data directory (`--data-dir`), served by this one process.
    Embedded,
    /// One Cloud Bigtable instance (`--bigtable-project`, `--bigtable-instance`), shared by any
    /// number of stateless Kura servers.
    Bigtable,
}

/// Kura: an HBase-style wide-column store with an HBase REST-compatible HTTP API.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "kura",
    version,
    about,
    after_help = "Other commands (each with --help):\n  \
                  kura copy     stream a table between HBase REST endpoints, embedded data dirs \
                  and Bigtable, resumably, verified with HBase's HashTable hashes\n  \
                  kura verify   write HBase HashTable's hashes of a table, or compare a table \
                  with them\n  \
                  kura export   write a table as HBase Export files (SequenceFiles of Results)\n  \
                  kura import   load HBase Export files into a table, resumably\n  \
                  kura backup   copy a running server's data (an online backup)\n  \
                  kura restore  turn a backup into a data directory, or --verify one\n  \
                  kura repair   find and fix what a crash left between the applications' entity \
                  and index rows"
)]
pub struct Config {
    /// Address to listen on. Non-loopback addresses need --allow-remote.
    #[arg(long, env = "KURA_BIND", default_value = "127.0.0.1:8080")]
    pub bind: String,

    /// Where the data lives: the embedded store in `--data-dir`, or Cloud Bigtable. With
    /// `bigtable`, `BIGTABLE_EMULATOR_HOST` (host:port) selects Google's emulator; otherwise
    /// the server connects over TLS with Application Default Credentials, as Google's clients do.
    #[arg(long, env = "KURA_BACKEND", value_enum, default_value = "embedded")]
    pub backend: BackendArg,

    /// The Google Cloud project of the Bigtable instance (`--backend bigtable`).
    #[arg(long, env = "KURA_BIGTABLE_PROJECT")]
    pub bigtable_project: Option<String>,

    /// The Bigtable instance id (`--backend bigtable`).
    #[arg(long, env = "KURA_BIGTABLE_INSTANCE")]
    pub bigtable_instance: Option<String>,

    /// The Bigtable app profile for data requests (default: the instance's default profile).
    #[arg(long, env = "KURA_BIGTABLE_APP_PROFILE")]
    pub bigtable_app_profile: Option<String>,

    /// Directory holding the catalog and every region's files (embedded backend).
    #[arg(long, env = "KURA_DATA_DIR", default_value = "./kura-data")]
    pub data_dir: PathBuf,

    /// HTTP worker threads (0 = one per core).
    #[arg(long, env = "KURA_WORKERS", default_value_t = 0)]
    pub workers: usize,

    /// Region threads (arbiters) (0 = one per core). Only with `--thread-per-core false`: by
    /// default the regions run on the HTTP workers' threads.
    #[arg(long, env = "KURA_ARBITERS", default_value_t = 0)]
    pub arbiters: usize,

    /// Run the regions on the HTTP workers' threads (one thread per core serves both), so that
    /// a request whose region lives on the worker that took it never changes thread. `false`
    /// gives the regions threads of their own (`--arbiters`).
    #[arg(long, env = "KURA_THREAD_PER_CORE", default_value_t = true,
          action = clap::ArgAction::Set)]
    pub thread_per_core: bool,

    /// Regions a new table gets unless its schema sets KURA_REGIONS (0 = one per arbiter).
    #[arg(long, env = "KURA_DEFAULT_REGIONS", default_value_t = 0)]
    pub default_regions: u32,

    /// When a write is acknowledged: after fsync (sync), before a periodic fsync (interval), or
    /// leaving it to the OS (none).
    #[arg(long, env = "KURA_DURABILITY", value_enum, default_value = "sync")]
    pub durability: DurabilityArg,

    /// Longest time between fsyncs in `interval` durability mode, milliseconds.
    #[arg(long, env = "KURA_SYNC_INTERVAL_MS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub sync_interval_ms: u64,

    /// In `sync` durability, fsync each region's log on a log-sync thread (`--sync-threads` of
    /// them, shared by the regions in turn), so that the region's thread goes on serving during
    /// the fsync. Default: on with `--thread-per-core` (the region's thread is an HTTP worker,
    /// which must not sit in an fsync), off without it (an extra thread wake-up per commit
    /// costs throughput where an fsync is short).
    #[arg(long, env = "KURA_SYNC_THREAD", action = clap::ArgAction::Set)]
    pub sync_thread: Option<bool>,

    /// The most log-sync threads `--sync-thread` starts (0 = one per core). The regions share
    /// them in turn, each thread fsyncing its regions' logs one after the other: a thread that
    /// has work queued takes the next fsync without sleeping, where one thread per region is
    /// woken for each, and starts the writeback of the other logs queued before it fsyncs the
    /// first, so that the disk writes them together. Raise it on a disk whose fsyncs take
    /// milliseconds and run in parallel (network block storage), so that regions do not wait
    /// for each other's fsyncs.
    #[arg(long, env = "KURA_SYNC_THREADS", default_value_t = 0,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1024))]
    pub sync_threads: usize,

    /// Pin region arbiter i to CPU i (thread per core). Keeps two busy arbiters from being
    /// scheduled onto one CPU; best on a machine dedicated to the server.
    #[arg(long, env = "KURA_PIN_ARBITERS")]
    pub pin_arbiters: bool,

    /// Let the kernel back the server's memory with transparent huge pages (2 MiB) where the
    /// system allows them. Off by default: the first touch of a huge page zeroes all 2 MiB in
    /// one page fault (4 ms measured on a 2-vCPU VM), and every request the faulting thread was
    /// serving waits for it (counter workload at 18,000/s: p99 7.1-7.7 ms with them, 2.1-3.9 ms
    /// without).
    #[arg(long, env = "KURA_TRANSPARENT_HUGE_PAGES")]
    pub transparent_huge_pages: bool,

    /// Keep each region's log this many KiB of zeros ahead of its records, so that a log fsync
    /// commits data only, not the file's growth (0 = off; at most 65536).
    #[arg(long, env = "KURA_LOG_PREALLOC_KB", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(0..=65_536))]
    pub log_prealloc_kb: u64,

    /// Memtable budget per region, MiB; a region flushes to a segment past it.
    #[arg(long, env = "KURA_MEMTABLE_MB", default_value_t = 64,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub memtable_mb: usize,

    /// Memtable budget of all the regions together, MiB: past it, a region that holds its
    /// share of it flushes (at its next write, or within a second if it stopped writing), so
    /// that the server's memory does not grow with its number of regions (as HBase's global
    /// memstore limit). Default: a quarter of the machine's memory; 0 = no server-wide budget.
    #[arg(long, env = "KURA_MEMTABLE_TOTAL_MB",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=16_777_216))]
    pub memtable_total_mb: Option<usize>,

    /// Flush a region's memtable once its oldest write is this many seconds old, however
    /// little it holds (0 = never): a region that stopped writing frees its memtable and its
    /// log, and a crash leaves at most this much of its writes to replay (HBase's
    /// `optionalcacheflushinterval`, an hour too).
    #[arg(long, env = "KURA_MEMTABLE_MAX_AGE_SECS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(0..=31_536_000))]
    pub memtable_max_age_secs: u64,

    /// Pace each region's background flushes and compactions to this many MiB/s, so that they
    /// do not queue the log's fsyncs behind tens of megabytes (0 = unpaced). A flush stops
    /// pacing once the next memtable is half full.
    #[arg(long, env = "KURA_BACKGROUND_WRITE_MB", default_value_t = 32,
          value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    pub background_write_mb: u64,

    /// Compactions the server runs at once at low priority (0 = half the cores, two at least);
    /// the others wait their turn. A region whose compactions fell behind may run one at normal
    /// priority beside them (half the cores at most).
    #[arg(long, env = "KURA_BACKGROUND_COMPACTIONS", default_value_t = 0,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1024))]
    pub background_compactions: usize,

    /// How long a region remembers an `Idempotency-Key` (increment, append, check-and-mutate):
    /// a retry within this many seconds returns the first answer (at most 1 day).
    #[arg(long, env = "KURA_IDEMPOTENCY_WINDOW_SECS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub idempotency_window_secs: u64,

    /// Split a region once its data exceeds this many MiB (0 = never split automatically).
    #[arg(long, env = "KURA_SPLIT_THRESHOLD_MB", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(0..=1 << 30))]
    pub split_threshold_mb: u64,

    /// What to do with a damaged log at start.
    #[arg(
        long,
        env = "KURA_RECOVERY",
        value_enum,
        default_value = "point-in-time"
    )]
    pub recovery: RecoveryArg,

    /// File holding the bearer token clients must send (`Authorization: Bearer <token>`).
    /// The token may instead come from the KURA_TOKEN environment variable.
    #[arg(long, env = "KURA_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,

    /// Allow binding a non-loopback address.
    #[arg(long, env = "KURA_ALLOW_REMOTE", default_value_t = false)]
    pub allow_remote: bool,

    /// Largest row key, bytes.
    #[arg(long, env = "KURA_MAX_ROW_KEY", default_value_t = 4 << 10)]
    pub max_row_key: usize,

    /// Largest column qualifier, bytes.
    #[arg(long, env = "KURA_MAX_QUALIFIER", default_value_t = 16 << 10)]
    pub max_qualifier: usize,

    /// Largest cell value, bytes.
    #[arg(long, env = "KURA_MAX_VALUE", default_value_t = 10 << 20)]
    pub max_value: usize,

    /// Largest request body, bytes.
    #[arg(long, env = "KURA_MAX_BODY", default_value_t = 16 << 20)]
    pub max_body: usize,

    /// Compress an answer of at least this many bytes (or of unknown length: scans, exports)
    /// when the request's `Accept-Encoding` allows; 0 = never compress answers. Compression
    /// costs ~100 MB/s of a core: it pays across a WAN, not within a data centre.
    #[arg(long, env = "KURA_COMPRESS_MIN_BYTES", default_value_t = crate::compress::DEFAULT_MIN_BODY)]
    pub compress_min_bytes: u64,

    /// Most stateful scanners open at once.
    #[arg(long, env = "KURA_MAX_SCANNERS", default_value_t = 1000)]
    pub max_scanners: usize,

    /// Most client connections served at once (0 = half the process's file descriptor limit,
    /// which the server raises to its hard limit at start). Further connections wait in the
    /// listen backlog: the store keeps the descriptors its logs and segments need.
    #[arg(long, env = "KURA_MAX_CONNECTIONS", default_value_t = 0)]
    pub max_connections: usize,

    /// Seconds after which an unused scanner is closed.
    #[arg(long, env = "KURA_SCANNER_IDLE_SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub scanner_idle_secs: u64,

    /// Seconds a client has to send the request head (slowloris protection).
    #[arg(long, env = "KURA_HEADER_TIMEOUT_SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub header_timeout_secs: u64,

    /// Seconds a client may pause while sending a request body before the request is answered
    /// 408 (slow-body protection, as nginx's `client_body_timeout`).
    #[arg(long, env = "KURA_BODY_TIMEOUT_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub body_timeout_secs: u64,

    /// Client requests a region may have in flight (waiting in its mailbox or being served);
    /// past it a request answers 503 at once. `--mailbox-capacity` is an older name for it.
    #[arg(
        long = "region-in-flight",
        alias = "mailbox-capacity",
        env = "KURA_REGION_IN_FLIGHT",
        default_value_t = 1024
    )]
    pub in_flight_limit: usize,
}

/// A configuration that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The bind address does not parse or resolve.
    #[error("cannot use bind address {0:?}: {1}")]
    BadBind(String, String),
    /// A non-loopback address without `--allow-remote`.
    #[error("refusing to bind non-loopback address {0} without --allow-remote")]
    RemoteNotAllowed(String),
    /// The token file cannot be read or is empty.
    #[error("token file {0}: {1}")]
    TokenFile(PathBuf, String),
    /// `KURA_TOKEN` is set but empty: authentication would silently be off.
    #[error("KURA_TOKEN is set but empty: set a token, or unset it to run without one")]
    EmptyToken,
    /// More threads than the server will start.
    #[error("--{0} {1} is more threads than the server starts (at most {MAX_THREADS}; 0 = one per core)")]
    TooManyThreads(&'static str, usize),
    /// `--backend bigtable` without the instance to use.
    #[error(
        "--backend bigtable needs --{0} (or KURA_{1}): the Bigtable instance the data lives in"
    )]
    MissingBigtable(&'static str, &'static str),
}

/// Most HTTP workers or region arbiters the server starts: far past any core count, and below
/// what a process may create before thread creation fails.
pub const MAX_THREADS: usize = 1024;

impl Config {
    /// The socket addresses `--bind` resolves to.
    pub fn bind_addrs(&self) -> Result<Vec<SocketAddr>, ConfigError> {
        let addrs: Vec<SocketAddr> = self
            .bind
            .to_socket_addrs()
            .map_err(|e| ConfigError::BadBind(self.bind.clone(), e.to_string()))?
            .collect();
        if addrs.is_empty() {
            return Err(ConfigError::BadBind(
                self.bind.clone(),
                "resolves to nothing".into(),
            ));
        }
        Ok(addrs)
    }

    /// Checks the bind address against `--allow-remote`; returns the addresses to bind.
    pub fn validate(&self) -> Result<Vec<SocketAddr>, ConfigError> {
        let addrs = self.bind_addrs()?;
        if !self.allow_remote && addrs.iter().any(|a| !a.ip().is_loopback()) {
            return Err(ConfigError::RemoteNotAllowed(self.bind.clone()));
        }
        for (flag, n) in [("workers", self.workers), ("arbiters", self.arbiters)] {
            if n > MAX_THREADS {
                return Err(ConfigError::TooManyThreads(flag, n));
            }
        }
        self.bigtable_config()?;
        Ok(addrs)
    }

    /// The bearer token: the first line of `--token-file`, else `KURA_TOKEN`, else none.
    pub fn token(&self) -> Result<Option<String>, ConfigError> {
        if let Some(path) = &self.token_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError::TokenFile(path.clone(), e.to_string()))?;
            let token = text.lines().next().unwrap_or("").trim().to_string();
            if token.is_empty() {
                return Err(ConfigError::TokenFile(
                    path.clone(),
                    "the file is empty".into(),
                ));
            }
            return Ok(Some(token));
        }
        match std::env::var("KURA_TOKEN") {
            Ok(t) if t.trim().is_empty() => Err(ConfigError::EmptyToken),
            Ok(t) => Ok(Some(t.trim().to_string())),
            Err(_) => Ok(None),
        }
    }

    /// Client connections served at once, over all workers: `--max-connections`, or half of
    /// `fd_limit` (the process's open-file limit), at least 64.
    pub fn connection_limit(&self, fd_limit: u64) -> usize {
        match self.max_connections {
            0 => usize::try_from(fd_limit / 2).unwrap_or(usize::MAX).max(64),
            n => n,
        }
    }

    /// HTTP worker threads: `--workers`, or one per core.
    pub fn worker_threads(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// The Bigtable instance to use: `None` with the embedded backend; an error when
    /// `--backend bigtable` lacks the project or the instance.
    pub fn bigtable_config(&self) -> Result<Option<BigtableConfig>, ConfigError> {
        if self.backend != BackendArg::Bigtable {
            return Ok(None);
        }
        let given = |v: &Option<String>| v.as_ref().filter(|s| !s.trim().is_empty()).cloned();
        let project = given(&self.bigtable_project).ok_or(ConfigError::MissingBigtable(
            "bigtable-project",
            "BIGTABLE_PROJECT",
        ))?;
        let instance = given(&self.bigtable_instance).ok_or(ConfigError::MissingBigtable(
            "bigtable-instance",
            "BIGTABLE_INSTANCE",
        ))?;
        Ok(Some(BigtableConfig {
            project,
            instance,
            app_profile: given(&self.bigtable_app_profile),
        }))
    }

    /// The embedded store's configuration.
    pub fn kura_config(&self) -> KuraConfig {
        let mut k = KuraConfig::new(self.data_dir.clone());
        k.arbiters = self.arbiters;
        k.default_regions = self.default_regions;
        k.durability = match self.durability {
            DurabilityArg::Sync => Durability::Sync,
            DurabilityArg::Interval => {
                Durability::Interval(Duration::from_millis(self.sync_interval_ms.max(1)))
            }
            DurabilityArg::None => Durability::None,
        };
        k.recovery = match self.recovery {
            RecoveryArg::PointInTime => RecoveryMode::PointInTime,
            RecoveryArg::Strict => RecoveryMode::Strict,
        };
        k.memtable_budget = self.memtable_mb.max(1) << 20;
        k.memtable_total = match self.memtable_total_mb {
            Some(mb) => mb << 20,
            None => machine_memory().map_or(0, |bytes| bytes / 4),
        };
        k.memtable_max_age = (self.memtable_max_age_secs > 0)
            .then(|| Duration::from_secs(self.memtable_max_age_secs));
        k.background_write_rate = self.background_write_mb << 20;
        k.background_compactions = self.background_compactions;
        k.log_prealloc = self.log_prealloc_kb << 10;
        k.idempotency_window = Duration::from_secs(self.idempotency_window_secs);
        k.split_threshold = match self.split_threshold_mb {
            0 => None,
            mb => Some(mb << 20),
        };
        k.in_flight_limit = self.in_flight_limit.max(1);
        k.sync_thread = self.sync_thread.unwrap_or(self.thread_per_core);
        k.sync_threads = self.sync_threads;
        k.pin_arbiters = self.pin_arbiters;
        k
    }

    /// Request limits for the handlers.
    pub fn limits(&self) -> Limits {
        Limits {
            max_row_key: self.max_row_key,
            max_qualifier: self.max_qualifier,
            max_value: self.max_value,
            max_body: self.max_body,
            max_scanners: self.max_scanners,
            scanner_idle_secs: self.scanner_idle_secs,
            body_idle_secs: self.body_timeout_secs.max(1),
        }
    }
}

/// The machine's memory in bytes (`MemTotal` of `/proc/meminfo`), if it can be read.
fn machine_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Config {
        Config::try_parse_from(std::iter::once("kura").chain(args.iter().copied()))
            .expect("valid arguments")
    }

    #[test]
    fn help_names_every_client_subcommand_main_dispatches() {
        use clap::CommandFactory;
        let help = Config::command().render_long_help().to_string();
        for sub in ["copy", "verify", "export", "import", "backup", "restore"] {
            assert!(
                help.contains(&format!("kura {sub} ")),
                "{sub} missing from:\n{help}"
            );
        }
    }

    #[test]
    fn defaults_serve_loopback_8080_with_sync_durability() {
        let c = parse(&[]);
        assert_eq!(c.bind, "127.0.0.1:8080");
        assert_eq!(c.data_dir, PathBuf::from("./kura-data"));
        assert_eq!(c.durability, DurabilityArg::Sync);
        assert!(c.validate().is_ok());
        assert_eq!(c.limits().max_row_key, 4096);
        assert_eq!(c.header_timeout_secs, 5);
    }

    #[test]
    fn values_that_would_break_the_server_are_refused_at_start() {
        for bad in [
            ["--scanner-idle-secs", "0"],
            ["--header-timeout-secs", "18446744073709551615"],
            ["--body-timeout-secs", "0"],
            ["--memtable-mb", "0"],
            ["--memtable-mb", "17592186044416"],
            ["--split-threshold-mb", "17592186044416"],
            ["--background-write-mb", "17592186044416"],
            ["--background-compactions", "1025"],
            ["--sync-interval-ms", "0"],
        ] {
            let r = Config::try_parse_from(std::iter::once("kura").chain(bad));
            assert!(r.is_err(), "{bad:?} accepted");
        }
        assert_eq!(parse(&["--split-threshold-mb", "0"]).split_threshold_mb, 0);
        assert_eq!(
            parse(&["--background-write-mb", "0"]).background_write_mb,
            0
        );
    }

    #[test]
    fn the_memtables_together_get_a_quarter_of_the_memory_unless_told_otherwise() {
        let memory = machine_memory().expect("/proc/meminfo names MemTotal");
        assert!(memory > 0);
        assert_eq!(parse(&[]).kura_config().memtable_total, memory / 4);
        let told = parse(&["--memtable-total-mb", "512"]).kura_config();
        assert_eq!(told.memtable_total, 512 << 20);
        let none = parse(&["--memtable-total-mb", "0"]).kura_config();
        assert_eq!(none.memtable_total, 0);
    }

    #[test]
    fn a_memtable_flushes_after_an_hour_unless_told_otherwise() {
        let hour = Some(Duration::from_secs(3600));
        assert_eq!(parse(&[]).kura_config().memtable_max_age, hour);
        let told = parse(&["--memtable-max-age-secs", "60"]).kura_config();
        assert_eq!(told.memtable_max_age, Some(Duration::from_secs(60)));
        let never = parse(&["--memtable-max-age-secs", "0"]).kura_config();
        assert_eq!(never.memtable_max_age, None);
    }

    #[test]
    fn connections_are_limited_to_half_the_descriptors_unless_told_otherwise() {
        assert_eq!(parse(&[]).connection_limit(1024), 512);
        assert_eq!(parse(&[]).connection_limit(20), 64);
        assert_eq!(
            parse(&["--max-connections", "100"]).connection_limit(1024),
            100
        );
    }

    #[test]
    fn non_loopback_bind_needs_allow_remote() {
        let c = parse(&["--bind", "0.0.0.0:8080"]);
        assert!(matches!(
            c.validate(),
            Err(ConfigError::RemoteNotAllowed(_))
        ));
        let c = parse(&["--bind", "0.0.0.0:8080", "--allow-remote"]);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn the_log_is_preallocated_a_mebibyte_at_a_time_unless_told_otherwise() {
        assert_eq!(parse(&[]).kura_config().log_prealloc, 1 << 20);
        assert_eq!(
            parse(&["--log-prealloc-kb", "0"])
                .kura_config()
                .log_prealloc,
            0
        );
        assert!(Config::try_parse_from(["kura", "--log-prealloc-kb", "65537"]).is_err());
    }

    #[test]
    fn interval_durability_carries_the_interval() {
        let c = parse(&["--durability", "interval", "--sync-interval-ms", "25"]);
        assert_eq!(
            c.kura_config().durability,
            Durability::Interval(Duration::from_millis(25))
        );
        assert_eq!(
            parse(&["--split-threshold-mb", "0"])
                .kura_config()
                .split_threshold,
            None
        );
    }

    #[test]
    fn idempotency_window_is_set_in_seconds_and_bounded() {
        assert_eq!(
            parse(&[]).kura_config().idempotency_window,
            Duration::from_secs(600)
        );
        assert_eq!(
            parse(&["--idempotency-window-secs", "30"])
                .kura_config()
                .idempotency_window,
            Duration::from_secs(30)
        );
        for bad in ["0", "86401", "ten"] {
            assert!(
                Config::try_parse_from(["kura", "--idempotency-window-secs", bad]).is_err(),
                "{bad} is refused"
            );
        }
    }

    #[test]
    fn token_file_first_line_is_the_token() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        std::fs::write(&path, "s3cret\n").expect("write token");
        let c = parse(&["--token-file", path.to_str().expect("utf-8 path")]);
        assert_eq!(c.token().expect("readable").as_deref(), Some("s3cret"));
        std::fs::write(&path, "\n").expect("write token");
        assert!(c.token().is_err());
    }
}
