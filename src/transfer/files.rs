//! Small durable-file helpers shared by export and import.
//!
//! # Invariants
//! 1. [`replace`] leaves either the old or the new content under the name, never a mix: write a
//!    temporary file beside it, fsync, rename, fsync the directory.
//! 2. [`HashingFile`] hashes exactly the bytes that reach the file, in order.

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Replaces `path` with `bytes` atomically and durably.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let fail = |e: io::Error| format!("writing {}: {e}", path.display());
    let mut f = File::create(&tmp).map_err(fail)?;
    f.write_all(bytes).map_err(fail)?;
    f.sync_all().map_err(fail)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(fail)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Fsyncs a directory, so that names created or renamed in it survive a crash.
pub fn sync_dir(dir: &Path) -> Result<(), String> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("syncing directory {}: {e}", dir.display()))
}

/// SHA-256 of a whole file, lower-case hex, streaming.
pub fn sha256_file(path: &Path) -> Result<String, String> {
    let mut f = File::open(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = io::Read::read(&mut f, &mut buf)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(super::hex(&h.finalize()))
}

/// A buffered file that computes the SHA-256 of what is written to it.
pub struct HashingFile {
    out: BufWriter<File>,
    hash: Sha256,
}

impl HashingFile {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> io::Result<HashingFile> {
        Ok(HashingFile {
            out: BufWriter::with_capacity(1 << 16, File::create(path)?),
            hash: Sha256::new(),
        })
    }

    /// The hex SHA-256 of everything written.
    pub fn digest(self) -> String {
        super::hex(&self.hash.finalize())
    }
}

impl Write for HashingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl kura_formats::seqfile::Sink for HashingFile {
    fn sync_all(&mut self) -> io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }
}
