//! The two ends of a copy, behind one enum: a [`Store`] opened in this process (an embedded
//! data directory, or Bigtable) or an HBase REST endpoint (Kura or a real HBase REST gateway).
//!
//! # Invariants
//! 1. A scan yields whole rows in key order, every visible version of every cell with its
//!    timestamp, in pages of at most `page_rows` rows (and about [`PAGE_BYTES`]): memory is
//!    bounded by a page whatever the table's size.
//! 2. A write keeps every cell's timestamp: a copy written twice is the same copy.
//! 3. An embedded source directory must already exist (a typo never creates an empty store);
//!    an embedded directory a server holds is refused by its `LOCK`.

use super::http::{HttpClient, Next, Reply};
use kura_backend::{
    Mutation, ReadSpec, Row, RowMutation, ScanLimits, ScanRequest, ScanSpec, Store, TableDescriptor,
};
use std::fmt;
use std::path::PathBuf;

/// Rough bytes of keys and values a page holds at most (one row may exceed it).
pub const PAGE_BYTES: usize = 4 << 20;

/// Cells a REST scanner answers per `GET`.
const SCANNER_CELLS: usize = 5000;

/// Most cells one write request carries (Bigtable takes at most 100 000 mutations a request).
pub const WRITE_CELLS: usize = 20_000;

/// Rough bytes of keys and values one write request carries (as base64 in a REST body: Kura's
/// default `--max-body` is 16 MiB).
pub const WRITE_BYTES: usize = 4 << 20;

/// Where one end of the copy is, as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SideSpec {
    /// `http(s)://host:port[/prefix]`: an HBase REST endpoint.
    Rest(String),
    /// `embedded:DIR`: a data directory no server holds.
    Embedded(PathBuf),
    /// `bigtable:PROJECT/INSTANCE` (`BIGTABLE_EMULATOR_HOST` selects the emulator).
    Bigtable { project: String, instance: String },
}

impl SideSpec {
    /// Parses `http(s)://…`, `embedded:DIR` or `bigtable:PROJECT/INSTANCE`.
    pub fn parse(s: &str) -> Result<SideSpec, String> {
        if s.starts_with("http://") || s.starts_with("https://") {
            HttpClient::new(s)?;
            return Ok(SideSpec::Rest(s.trim_end_matches('/').to_string()));
        }
        if let Some(dir) = s.strip_prefix("embedded:") {
            if dir.is_empty() {
                return Err(
                    "embedded: needs a data directory, as in embedded:/var/lib/kura".into(),
                );
            }
            return Ok(SideSpec::Embedded(PathBuf::from(dir)));
        }
        if let Some(rest) = s.strip_prefix("bigtable:") {
            let mut parts = rest.split('/');
            if let (Some(p), Some(i), None) = (parts.next(), parts.next(), parts.next()) {
                if !p.is_empty() && !i.is_empty() {
                    return Ok(SideSpec::Bigtable {
                        project: p.to_string(),
                        instance: i.to_string(),
                    });
                }
            }
            return Err(
                "bigtable: needs PROJECT/INSTANCE, as in bigtable:my-project/my-instance".into(),
            );
        }
        Err(
            "use http(s)://HOST:PORT (an HBase REST endpoint), embedded:DIR (a data directory no \
             server holds) or bigtable:PROJECT/INSTANCE"
                .into(),
        )
    }

    /// True if both specs name the same place (the same URL or the same directory).
    pub fn same_place(&self, other: &SideSpec) -> bool {
        match (self, other) {
            (SideSpec::Embedded(a), SideSpec::Embedded(b)) => {
                let canon = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
                canon(a) == canon(b)
            }
            (a, b) => a == b,
        }
    }
}

impl fmt::Display for SideSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SideSpec::Rest(url) => f.write_str(url),
            SideSpec::Embedded(dir) => write!(f, "embedded:{}", dir.display()),
            SideSpec::Bigtable { project, instance } => write!(f, "bigtable:{project}/{instance}"),
        }
    }
}

/// Which end a side is, for messages and for what opening it may create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Source,
    Destination,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Destination => "destination",
        }
    }
}

/// An open end of the copy.
pub enum Side {
    /// A backend opened in this process.
    Store(Store),
    /// An HBase REST endpoint.
    Rest(HttpClient),
}

/// What every scan reads: every version the family keeps, every column, every time.
fn all_versions() -> ReadSpec {
    ReadSpec {
        max_versions: u32::MAX,
        ..ReadSpec::default()
    }
}

impl Side {
    /// Opens `spec`. An embedded source must exist; a held data directory is refused.
    /// `token` is the bearer token a REST side sends (see [`super::http::client_token`]).
    pub async fn open(spec: &SideSpec, role: Role, token: Option<&str>) -> Result<Side, String> {
        let what = role.name();
        match spec {
            SideSpec::Rest(url) => Ok(Side::Rest(HttpClient::new(url)?.with_token(token)?)),
            SideSpec::Embedded(dir) => {
                if role == Role::Source && !dir.is_dir() {
                    return Err(format!(
                        "the {what} data directory {} does not exist",
                        dir.display()
                    ));
                }
                let config = crate::copy::embedded_config(dir.clone());
                let store = kura_backends::start_embedded(config).await.map_err(|e| {
                    format!(
                        "cannot open the {what} data directory {}: {e}",
                        dir.display()
                    )
                })?;
                Ok(Side::Store(store))
            }
            SideSpec::Bigtable { project, instance } => {
                let store = kura_backends::connect_bigtable(kura_backends::BigtableConfig {
                    project: project.clone(),
                    instance: instance.clone(),
                    app_profile: None,
                })
                .await
                .map_err(|e| format!("cannot connect to the {what} {spec}: {e}"))?;
                Ok(Side::Store(store))
            }
        }
    }

    /// The table's schema, `None` if there is no such table.
    pub async fn describe(&self, table: &str) -> Result<Option<TableDescriptor>, String> {
        match self {
            Side::Store(s) => s
                .table(table)
                .await
                .map(|desc| desc.map(std::sync::Arc::unwrap_or_clone))
                .map_err(|e| e.to_string()),
            Side::Rest(c) => c.schema(table).await,
        }
    }

    /// Creates the table with `desc`'s families and attributes.
    pub async fn create(&self, desc: &TableDescriptor) -> Result<(), String> {
        match self {
            Side::Store(s) => s
                .create_table(desc.clone())
                .await
                .map_err(|e| e.to_string()),
            Side::Rest(c) => c.create(desc).await,
        }
    }

    /// Scans `table` from the first row after `after` (from the start when `None`).
    pub fn scan<'a>(
        &'a self,
        table: &'a str,
        after: Option<Vec<u8>>,
        page_rows: usize,
    ) -> Scan<'a> {
        match self {
            Side::Store(store) => {
                let mut spec = ScanSpec::all();
                spec.read = all_versions();
                if let Some(k) = after {
                    spec = spec.resume_after(&k);
                }
                Scan::Store {
                    store,
                    table,
                    spec: Some(spec),
                    page_rows,
                }
            }
            Side::Rest(client) => Scan::Rest(RestScan {
                client,
                table,
                start: after.map(|k| successor(&k)),
                location: None,
                done: false,
                pending: None,
                ready: std::collections::VecDeque::new(),
                reopened: 0,
                page_rows,
                extra: serde_json::Map::new(),
            }),
        }
    }

    /// A REST scan from `start` (inclusive) with `extra` Scanner model fields (see
    /// [`HttpClient::open_scanner_with`]); `None` for a side that is not REST.
    pub fn rest_scan_with<'a>(
        &'a self,
        table: &'a str,
        start: Option<Vec<u8>>,
        extra: serde_json::Map<String, serde_json::Value>,
        page_rows: usize,
    ) -> Option<Scan<'a>> {
        match self {
            Side::Store(_) => None,
            Side::Rest(client) => Some(Scan::Rest(RestScan {
                client,
                table,
                start,
                location: None,
                done: false,
                pending: None,
                ready: std::collections::VecDeque::new(),
                reopened: 0,
                page_rows,
                extra,
            })),
        }
    }

    /// Writes `rows` (every cell with its timestamp), in requests of at most
    /// [`WRITE_CELLS`] cells and about [`WRITE_BYTES`] bytes; a larger row is split across
    /// requests (a copy needs no row atomicity: what is written again is the same).
    pub async fn write(&self, table: &str, rows: &[Row]) -> Result<(), String> {
        let mut chunk: Vec<Row> = Vec::new();
        let (mut cells, mut bytes) = (0, 0);
        for r in rows {
            let mut piece = Row {
                key: r.key.clone(),
                cells: Vec::new(),
            };
            for c in &r.cells {
                let size = r.key.len() + c.family.len() + c.qualifier.len() + 8 + c.value.len();
                if cells > 0 && (cells >= WRITE_CELLS || bytes + size > WRITE_BYTES) {
                    if !piece.cells.is_empty() {
                        let rest = Row {
                            key: r.key.clone(),
                            cells: Vec::new(),
                        };
                        chunk.push(std::mem::replace(&mut piece, rest));
                    }
                    self.write_chunk(table, std::mem::take(&mut chunk)).await?;
                    (cells, bytes) = (0, 0);
                }
                piece.cells.push(c.clone());
                cells += 1;
                bytes += size;
            }
            if !piece.cells.is_empty() {
                chunk.push(piece);
            }
        }
        if !chunk.is_empty() {
            self.write_chunk(table, chunk).await?;
        }
        Ok(())
    }

    async fn write_chunk(&self, table: &str, rows: Vec<Row>) -> Result<(), String> {
        match self {
            Side::Store(s) => {
                let ms = rows
                    .into_iter()
                    .map(|r| RowMutation {
                        row: r.key,
                        mutations: r
                            .cells
                            .into_iter()
                            .map(|c| Mutation::Put {
                                family: c.family,
                                qualifier: c.qualifier,
                                timestamp: Some(c.timestamp),
                                value: c.value,
                            })
                            .collect(),
                    })
                    .collect();
                s.mutate_rows(table, ms).await.map_err(|e| e.to_string())
            }
            Side::Rest(c) => c.put_rows(table, &rows).await,
        }
    }

    /// Releases the side: an embedded store is flushed and its `LOCK` released.
    pub async fn close(self) -> Result<(), String> {
        match self {
            Side::Store(s) => s.shutdown().await.map_err(|e| e.to_string()),
            Side::Rest(_) => Ok(()),
        }
    }
}

/// Bytes of a row's keys and values, for page and body bounds.
pub fn row_bytes(r: &Row) -> usize {
    r.key.len()
        + r.cells
            .iter()
            .map(|c| r.key.len() + c.family.len() + c.qualifier.len() + 8 + c.value.len())
            .sum::<usize>()
}

/// A scan in progress over one side.
pub enum Scan<'a> {
    Store {
        store: &'a Store,
        table: &'a str,
        /// The rest of the range; `None` once exhausted.
        spec: Option<ScanSpec>,
        page_rows: usize,
    },
    Rest(RestScan<'a>),
}

impl Scan<'_> {
    /// The next page of whole rows; `None` at the end.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Row>>, String> {
        match self {
            Scan::Store {
                store,
                table,
                spec,
                page_rows,
            } => {
                let Some(current) = spec.take() else {
                    return Ok(None);
                };
                let page = store
                    .scan(
                        table,
                        ScanRequest {
                            spec: current.clone(),
                            limit: None,
                            page: ScanLimits {
                                max_rows: *page_rows,
                                max_bytes: PAGE_BYTES,
                            },
                        },
                    )
                    .await
                    .map_err(|e| format!("scanning {table}: {e}"))?;
                if !page.complete {
                    if let Some(last) = page.rows.last() {
                        *spec = Some(current.resume_after(&last.key));
                    }
                }
                if page.rows.is_empty() {
                    Ok(None)
                } else {
                    Ok(Some(page.rows))
                }
            }
            Scan::Rest(r) => r.next_page().await,
        }
    }

    /// Releases what the scan holds on its side (a REST scanner).
    pub async fn close(self) {
        if let Scan::Rest(r) = self {
            r.close().await;
        }
    }
}

/// A stateful HBase REST scanner (`PUT /{t}/scanner`, `GET` its `Location` until 204), which
/// answers up to a number of *cells*: a row split across two answers is joined again here.
pub struct RestScan<'a> {
    client: &'a HttpClient,
    table: &'a str,
    /// First row to read (inclusive); `None` = the table's start.
    start: Option<Vec<u8>>,
    location: Option<String>,
    done: bool,
    /// The last row of the latest answer: it may go on in the next one.
    pending: Option<Row>,
    ready: std::collections::VecDeque<Row>,
    page_rows: usize,
    /// Scanners reopened since the scan last completed a row.
    reopened: u32,
    /// Scanner model fields beyond the start row (range end, columns, time, versions).
    extra: serde_json::Map<String, serde_json::Value>,
}

/// Times a scan reopens a scanner the server lost before it gives up.
const MAX_REOPENS: u32 = 5;

/// The smallest row key after `key`.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.extend_from_slice(key);
    k.push(0);
    k
}

impl RestScan<'_> {
    async fn next_page(&mut self) -> Result<Option<Vec<Row>>, String> {
        let mut page = Vec::new();
        let mut bytes = 0;
        loop {
            while let Some(r) = self.ready.pop_front() {
                bytes += row_bytes(&r);
                page.push(r);
                if page.len() >= self.page_rows || bytes >= PAGE_BYTES {
                    return Ok(Some(page));
                }
            }
            if self.done {
                if let Some(r) = self.pending.take() {
                    page.push(r);
                }
                return Ok((!page.is_empty()).then_some(page));
            }
            self.fetch().await?;
        }
    }

    /// One scanner `GET`, its rows moved to `ready` (the last one kept in `pending`).
    async fn fetch(&mut self) -> Result<(), String> {
        let location = match &self.location {
            Some(l) => l.clone(),
            None => {
                let l = self
                    .client
                    .open_scanner_with(
                        self.table,
                        self.start.as_deref(),
                        SCANNER_CELLS,
                        &self.extra,
                    )
                    .await?;
                self.location = Some(l.clone());
                l
            }
        };
        let rows = match self.client.scanner_next(&location).await? {
            Next::Rows(rows) => rows,
            Next::Exhausted => {
                self.done = true;
                self.close_scanner().await;
                return Ok(());
            }
            Next::Gone if self.reopened < MAX_REOPENS => {
                // Closed by the server (idle, restarted, another server behind a balancer):
                // open a new one at the first row not handed out whole, dropping the part of
                // the row that was still arriving.
                self.reopened += 1;
                self.close_scanner().await;
                // Back off (0.1, 0.2, 0.4, 0.8, 1.6 s): a server that answered 503 or timed out
                // under load gets time to catch up before the next scanner asks it again.
                tokio::time::sleep(std::time::Duration::from_millis(50 << self.reopened)).await;
                // Every row before `pending` is whole (in `ready` or handed out); no
                // `pending` means this scanner answered no row yet.
                if let Some(p) = self.pending.take() {
                    self.start = Some(p.key);
                }
                return Ok(());
            }
            Next::Gone => {
                return Err(format!(
                    "scanner {location} disappeared {MAX_REOPENS} times; is the server restarting?"
                ))
            }
        };
        let whole = self.ready.len();
        for r in rows {
            match self.pending.take() {
                Some(mut p) if p.key == r.key => {
                    p.cells.extend(r.cells);
                    self.pending = Some(p);
                }
                Some(p) => {
                    self.ready.push_back(p);
                    self.pending = Some(r);
                }
                None => self.pending = Some(r),
            }
        }
        if self.ready.len() > whole {
            // A row was completed: the scan moved on since the last reopen.
            self.reopened = 0;
        }
        Ok(())
    }

    async fn close_scanner(&mut self) {
        if let Some(l) = self.location.take() {
            self.client.delete_scanner(&l).await;
        }
    }

    async fn close(mut self) {
        self.close_scanner().await;
    }
}

/// What a REST answer's status means for a copy.
pub fn unexpected(what: &str, r: &Reply) -> String {
    let body = String::from_utf8_lossy(&r.body);
    let body = body.trim();
    let body: String = body.chars().take(300).collect();
    format!("{what}: HTTP {} {body}", r.status)
}
