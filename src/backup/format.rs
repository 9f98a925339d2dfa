//! What a backup is made of, shared by the server's `/admin/backups` endpoints, `kura backup`
//! and `kura restore`: the listing of a backup's files (path, size, CRC-32C) and the
//! `kura-backup.json` file that completes a backup directory.
//!
//! # Invariants
//! 1. A listed path is relative, `/`-separated, and made of segments that are neither empty,
//!    `.` nor `..`, with no `\` and no NUL ([`check_rel_path`]): joined to a directory it stays
//!    inside it.
//! 2. Checksums are CRC-32C (Castagnoli, hardware-accelerated where the CPU has it) of the
//!    whole file, written as 8 lower-case hex digits; every file is read in bounded chunks.

use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Version of `kura-backup.json`'s shape.
pub const FORMAT: u32 = 1;

/// The file that makes a backup directory complete (written last).
pub const MANIFEST: &str = "kura-backup.json";

/// Bytes read at a time when checksumming or copying a file.
pub const CHUNK: usize = 1 << 20;

/// One file of a backup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the backup (and to the data directory it restores to).
    pub path: String,
    pub size: u64,
    /// CRC-32C of the whole file, 8 hex digits.
    pub crc32c: String,
}

/// A backup's description: what `POST /admin/backups` answers and what `kura-backup.json`
/// holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    pub format: u32,
    /// The id of the server's staging copy the files came from.
    pub id: String,
    /// Version of the server that took it.
    pub server_version: String,
    /// When the checkpoint was taken, ms since the epoch, and the same as RFC 3339.
    pub created_ms: i64,
    pub created: String,
    /// The tables it holds.
    pub tables: Vec<String>,
    /// Every file, sorted by path.
    pub files: Vec<FileEntry>,
    /// Sum of the files' sizes.
    pub bytes: u64,
}

/// Refuses a path that could leave the directory it is joined to (invariant 1).
pub fn check_rel_path(p: &str) -> Result<(), String> {
    if p.is_empty() || p.len() > 4096 {
        return Err(format!("{p:?} is not a file path of a backup"));
    }
    if p.contains('\\') || p.contains('\0') {
        return Err(format!("{p:?}: backslashes and NUL are not allowed"));
    }
    for seg in p.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(format!(
                "{p:?}: a backup path is relative, with no empty, `.` or `..` segment"
            ));
        }
    }
    Ok(())
}

/// `dir` joined with a checked relative path.
pub fn join(dir: &Path, rel: &str) -> Result<PathBuf, String> {
    check_rel_path(rel)?;
    Ok(rel.split('/').fold(dir.to_path_buf(), |p, s| p.join(s)))
}

/// The CRC-32C of bytes as the listing writes it.
pub fn hex(crc: u32) -> String {
    format!("{crc:08x}")
}

/// Size and CRC-32C of a file, read in [`CHUNK`]s; `progress` is told each chunk's length.
pub fn checksum_file(path: &Path, progress: &mut dyn FnMut(u64)) -> std::io::Result<(u64, u32)> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; CHUNK];
    let (mut size, mut crc) = (0u64, 0u32);
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok((size, crc));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        size += n as u64;
        progress(n as u64);
    }
}

/// Every file under `dir`, as sorted relative `/`-separated paths.
pub fn walk(dir: &Path) -> std::io::Result<Vec<String>> {
    fn go(base: &Path, rel: &str, out: &mut Vec<String>) -> std::io::Result<()> {
        let here = if rel.is_empty() {
            base.to_path_buf()
        } else {
            base.join(rel)
        };
        for entry in std::fs::read_dir(&here)? {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if entry.file_type()?.is_dir() {
                go(base, &path, out)?;
            } else {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    go(dir, "", &mut out)?;
    out.sort();
    Ok(out)
}

/// Write `bytes` to `path` durably and atomically: a temporary file, fsynced, renamed over
/// `path`, the directory fsynced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_directory_are_refused() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a\\b",
            "a/..",
        ] {
            assert!(check_rel_path(bad).is_err(), "{bad:?}");
        }
        for good in ["catalog.json", "regions/1/000003.seg", "a..b/c"] {
            assert!(check_rel_path(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn the_checksum_is_crc32c() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        std::fs::write(&p, b"123456789").expect("write");
        // The CRC-32C check value of "123456789" (RFC 3720, B.4).
        assert_eq!(
            checksum_file(&p, &mut |_| {}).expect("read"),
            (9, 0xe306_9283)
        );
    }
}
