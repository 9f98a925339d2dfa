//! `/admin/backups`: online backups of the embedded backend, taken while writes go on.
//!
//! - `POST /admin/backups`: checkpoints every region ([`kura_backend::Backend::checkpoint`])
//!   into a staging copy `<data dir>/backups/<id>/`, laid out as a data directory (the
//!   catalog, `regions/<id>/` with a manifest, the segments and an empty log each, and the
//!   applications' clock lease), checksums every file, and answers the listing
//!   ([`Listing`]: id, tables, every file's path, size and CRC-32C). The Bigtable backend
//!   answers 400 (`unsupported`).
//! - `GET /admin/backups/{id}`: that listing again (a resumed `kura backup` asks for it).
//! - `GET /admin/backups/{id}/files/{path}`: one listed file, streamed in 1 MiB chunks;
//!   `Range: bytes=N-` answers 206 with the rest of it (a resumed download).
//! - `DELETE /admin/backups/{id}`: removes the staging copy.
//!
//! # Invariants
//! 1. A staging copy never touches the live data: its segments are hard links (or copies) of
//!    immutable files, its other files are its own, and nothing the store opens is under
//!    `backups/`.
//! 2. Leftover staging copies go away by themselves: the embedded backend removes
//!    `backups/` when it starts, and each `POST` removes copies older than [`EXPIRY`].
//! 3. Only listed files are served: an id or path that is not well formed (`..`, an absolute
//!    path) is a 400; one the listing does not name is a 404.
//! 4. Memory is bounded by one chunk per download in progress, whatever the file sizes.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use kura_backend::{BackendKind, BACKUPS_DIR};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::admin::AdminError;
use crate::backup::format::{self, FileEntry, Listing};
use crate::state::AppState;

/// A staging copy older than this is removed by the next `POST /admin/backups`.
pub const EXPIRY: Duration = Duration::from_secs(24 * 3600);

type Result<T> = std::result::Result<T, AdminError>;

fn internal(what: &str, e: impl std::fmt::Display) -> AdminError {
    AdminError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        format!("{what}: {e}"),
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `<data dir>/backups`; `None` on a backend without a data directory.
fn staging_root(state: &AppState) -> Option<PathBuf> {
    (state.kura.kind() == BackendKind::Embedded)
        .then(|| Path::new(&state.kura.location()).join(BACKUPS_DIR))
}

/// A staging id: the creation time in ms, then random hex.
fn new_id(created_ms: i64) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_i64(created_ms);
    format!("{created_ms}-{:016x}", h.finish())
}

/// Checks an id from a URL (400 if it is not one this module makes).
fn check_id(id: &str) -> Result<()> {
    let ok =
        !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(AdminError::bad_request(format!(
            "{id:?} is not a backup id (digits, hex and '-')"
        )))
    }
}

fn listing_path(root: &Path, id: &str) -> PathBuf {
    root.join(format!("{id}.json"))
}

fn remove_staging(root: &Path, id: &str) -> std::io::Result<bool> {
    let mut found = false;
    for r in [
        std::fs::remove_file(listing_path(root, id)),
        std::fs::remove_dir_all(root.join(id)),
    ] {
        match r {
            Ok(()) => found = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

/// Removes staging copies older than [`EXPIRY`] (invariant 2).
fn sweep(root: &Path, now: i64) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let expiry = i64::try_from(EXPIRY.as_millis()).unwrap_or(i64::MAX);
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let id = name.strip_suffix(".json").unwrap_or(&name).to_string();
        let created = id.split('-').next().and_then(|t| t.parse::<i64>().ok());
        if created.is_some_and(|c| now.saturating_sub(c) > expiry) {
            tracing::info!(id, "removing an expired backup staging copy");
            let _ = remove_staging(root, &id);
        }
    }
}

/// Checksums the staging copy and writes its listing next to it.
fn finish_staging(
    root: &Path,
    id: &str,
    created_ms: i64,
    tables: Vec<String>,
) -> std::result::Result<Listing, String> {
    let dir = root.join(id);
    let mut files = Vec::new();
    let mut bytes = 0;
    for rel in format::walk(&dir).map_err(|e| format!("listing {}: {e}", dir.display()))? {
        let path = format::join(&dir, &rel)?;
        let (size, crc) = format::checksum_file(&path, &mut |_| {})
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        bytes += size;
        files.push(FileEntry {
            path: rel,
            size,
            crc32c: format::hex(crc),
        });
    }
    let created = chrono::DateTime::from_timestamp_millis(created_ms)
        .map(|t| t.to_rfc3339())
        .unwrap_or_default();
    let listing = Listing {
        format: format::FORMAT,
        id: id.to_string(),
        server_version: env!("CARGO_PKG_VERSION").to_string(),
        created_ms,
        created,
        tables,
        files,
        bytes,
    };
    let json = serde_json::to_vec_pretty(&listing).map_err(|e| e.to_string())?;
    format::write_atomic(&listing_path(root, id), &json)
        .map_err(|e| format!("writing the listing of {id}: {e}"))?;
    Ok(listing)
}

/// `POST /admin/backups`.
pub async fn create(state: web::Data<AppState>) -> Result<HttpResponse> {
    let created_ms = now_ms();
    let Some(root) = staging_root(&state) else {
        // The backend says why (Bigtable: its own backups, or `kura export`).
        state.kura.checkpoint(Path::new("")).await?;
        return Err(AdminError::bad_request(
            "this backend keeps no data directory to back up",
        ));
    };
    {
        let root = root.clone();
        let _ = web::block(move || sweep(&root, created_ms)).await;
    }
    let id = new_id(created_ms);
    let dest = root.join(&id);
    let info = state.kura.checkpoint(&dest).await?;
    let data_dir = PathBuf::from(state.kura.location());
    let (root2, id2) = (root.clone(), id.clone());
    let listing = web::block(move || {
        // The applications' clock lease: a restored server hands out no time below it.
        let lease = data_dir.join(crate::apps::clock::LEASE_FILE);
        if lease.exists() {
            std::fs::copy(&lease, dest.join(crate::apps::clock::LEASE_FILE))
                .map_err(|e| format!("copying {}: {e}", lease.display()))?;
        }
        finish_staging(&root2, &id2, created_ms, info.tables)
    })
    .await
    .map_err(|e| internal("backup worker", e))?;
    match listing {
        Ok(l) => {
            tracing::info!(
                id,
                files = l.files.len(),
                bytes = l.bytes,
                linked = info.linked_segments,
                copied = info.copied_segments,
                "backup staging copy ready"
            );
            Ok(HttpResponse::Created().json(l))
        }
        Err(e) => {
            let _ = web::block(move || remove_staging(&root, &id)).await;
            Err(internal("preparing the backup", e))
        }
    }
}

async fn read_listing(state: &AppState, id: &str) -> Result<(PathBuf, Listing)> {
    check_id(id)?;
    let root = staging_root(state)
        .ok_or_else(|| AdminError::bad_request("this backend keeps no backups"))?;
    let path = listing_path(&root, id);
    let bytes = web::block(move || std::fs::read(path))
        .await
        .map_err(|e| internal("backup worker", e))?;
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(AdminError::new(
                StatusCode::NOT_FOUND,
                "backup_not_found",
                format!("no backup staging copy {id} (removed, expired, or the server restarted)"),
            ))
        }
        Err(e) => return Err(internal("reading the backup listing", e)),
    };
    let listing = serde_json::from_slice(&bytes).map_err(|e| internal("backup listing", e))?;
    Ok((root.join(id), listing))
}

/// `GET /admin/backups/{id}`.
pub async fn get(state: web::Data<AppState>, path: web::Path<String>) -> Result<HttpResponse> {
    let (_, listing) = read_listing(&state, &path.into_inner()).await?;
    Ok(HttpResponse::Ok().json(listing))
}

/// `DELETE /admin/backups/{id}`.
pub async fn delete(state: web::Data<AppState>, path: web::Path<String>) -> Result<HttpResponse> {
    let id = path.into_inner();
    check_id(&id)?;
    let root = staging_root(&state)
        .ok_or_else(|| AdminError::bad_request("this backend keeps no backups"))?;
    let id2 = id.clone();
    let found = web::block(move || remove_staging(&root, &id2))
        .await
        .map_err(|e| internal("backup worker", e))?
        .map_err(|e| internal("removing the staging copy", e))?;
    if !found {
        return Err(AdminError::new(
            StatusCode::NOT_FOUND,
            "backup_not_found",
            format!("no backup staging copy {id}"),
        ));
    }
    Ok(HttpResponse::Ok().json(serde_json::json!({ "id": id, "deleted": true })))
}

/// The first byte a `Range: bytes=N-` header asks for (`None`: no header; other range forms
/// are a 400: a resumed download only ever asks for the rest of a file).
fn range_start(req: &HttpRequest) -> Result<Option<u64>> {
    let Some(v) = req.headers().get(header::RANGE) else {
        return Ok(None);
    };
    let bad = || AdminError::bad_request("Range must be bytes=N- (the rest of the file from N)");
    let v = v.to_str().map_err(|_| bad())?;
    let n = v
        .strip_prefix("bytes=")
        .and_then(|r| r.strip_suffix('-'))
        .ok_or_else(bad)?;
    n.parse::<u64>().map(Some).map_err(|_| bad())
}

/// `GET /admin/backups/{id}/files/{path}`.
pub async fn file(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse> {
    let (id, rel) = path.into_inner();
    check_id(&id)?;
    format::check_rel_path(&rel).map_err(AdminError::bad_request)?;
    let (dir, listing) = read_listing(&state, &id).await?;
    let Some(entry) = listing.files.iter().find(|f| f.path == rel) else {
        return Err(AdminError::new(
            StatusCode::NOT_FOUND,
            "file_not_found",
            format!("backup {id} has no file {rel}"),
        ));
    };
    let start = range_start(&req)?;
    let from = start.unwrap_or(0);
    if from > entry.size {
        return Err(AdminError::new(
            StatusCode::RANGE_NOT_SATISFIABLE,
            "range_not_satisfiable",
            format!("{rel} has {} bytes; the range starts at {from}", entry.size),
        ));
    }
    let full = format::join(&dir, &rel).map_err(AdminError::bad_request)?;
    let file = web::block(move || -> std::io::Result<std::fs::File> {
        use std::io::Seek;
        let mut f = std::fs::File::open(full)?;
        f.seek(std::io::SeekFrom::Start(from))?;
        Ok(f)
    })
    .await
    .map_err(|e| internal("backup worker", e))?
    .map_err(|e| internal("opening the backup file", e))?;
    let len = entry.size - from;
    let body = futures::stream::unfold((file, len), |(mut f, left)| async move {
        if left == 0 {
            return None;
        }
        let want = usize::try_from(left.min(format::CHUNK as u64)).unwrap_or(format::CHUNK);
        let read = web::block(move || {
            use std::io::Read;
            let mut buf = vec![0u8; want];
            let r = f.read_exact(&mut buf);
            (f, buf, r)
        })
        .await;
        match read {
            Ok((f, buf, Ok(()))) => {
                let n = buf.len() as u64;
                Some((Ok(web::Bytes::from(buf)), (f, left - n)))
            }
            Ok((f, _, Err(e))) => Some((Err(e), (f, 0))),
            Err(e) => {
                tracing::warn!(error = %e, "backup download worker failed");
                None
            }
        }
    });
    let mut resp = if start.is_some() {
        let mut r = HttpResponse::build(StatusCode::PARTIAL_CONTENT);
        r.insert_header((
            header::CONTENT_RANGE,
            format!(
                "bytes {from}-{}/{}",
                entry.size.saturating_sub(1),
                entry.size
            ),
        ));
        r
    } else {
        HttpResponse::Ok()
    };
    Ok(resp
        .content_type("application/octet-stream")
        .insert_header(("X-Kura-Crc32c", entry.crc32c.clone()))
        .no_chunking(len)
        .streaming(body))
}
