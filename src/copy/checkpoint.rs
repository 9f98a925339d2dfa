//! The resume file of `kura copy`: which copy it belongs to and the last row fully written.
//!
//! Format (text, one `key=value` a line): `kura-copy-checkpoint=1`, `from`, `to`, `table`,
//! `last_row_hex` (the row key in lower-case hex), `rows`, `cells`.
//!
//! # Invariants
//! 1. The file is replaced atomically: written to `FILE.tmp`, fsynced, renamed over `FILE`,
//!    and the directory fsynced; a reader sees the old checkpoint or the new one, never a mix.
//! 2. A checkpoint of another copy (other sides or table) is refused, not resumed from.

use super::side::SideSpec;
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &str = "kura-copy-checkpoint";

/// Where a copy resumes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub from: String,
    pub to: String,
    pub table: String,
    /// The last row written (meaningful once `rows > 0`).
    pub last_row: Vec<u8>,
    pub rows: u64,
    pub cells: u64,
}

/// `./kura-copy-TABLE.checkpoint`.
pub fn default_path(table: &str) -> PathBuf {
    PathBuf::from(format!("kura-copy-{table}.checkpoint"))
}

/// A row key for people: as text when it is printable ASCII, else `0x` + hex.
pub fn printable(key: &[u8]) -> String {
    if key.is_empty() {
        "\"\" (the table's start)".into()
    } else if key.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}", String::from_utf8_lossy(key))
    } else {
        format!("0x{}", super::hash::hex(key))
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Checkpoint {
    /// Nothing copied yet.
    pub fn new(from: &SideSpec, to: &SideSpec, table: &str) -> Checkpoint {
        Checkpoint {
            from: from.to_string(),
            to: to.to_string(),
            table: table.to_string(),
            last_row: Vec::new(),
            rows: 0,
            cells: 0,
        }
    }

    /// Reads `path`; `None` when there is no such file.
    pub fn load(path: &Path) -> Result<Option<Checkpoint>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "cannot read the checkpoint {}: {e}",
                    path.display()
                ))
            }
        };
        let bad = |why: &str| {
            format!(
                "the checkpoint {} is damaged ({why}): delete it to copy from the start",
                path.display()
            )
        };
        let mut cp = Checkpoint {
            from: String::new(),
            to: String::new(),
            table: String::new(),
            last_row: Vec::new(),
            rows: 0,
            cells: 0,
        };
        let mut magic = false;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| bad("a line without '='"))?;
            match k {
                MAGIC => magic = v == "1",
                "from" => cp.from = v.to_string(),
                "to" => cp.to = v.to_string(),
                "table" => cp.table = v.to_string(),
                "last_row_hex" => cp.last_row = unhex(v).ok_or_else(|| bad("bad hex"))?,
                "rows" => cp.rows = v.parse().map_err(|_| bad("bad rows"))?,
                "cells" => cp.cells = v.parse().map_err(|_| bad("bad cells"))?,
                _ => {}
            }
        }
        if !magic {
            return Err(bad("not a kura copy checkpoint"));
        }
        Ok(Some(cp))
    }

    /// Refuses a checkpoint written by another copy.
    pub fn check_matches(
        &self,
        from: &SideSpec,
        to: &SideSpec,
        table: &str,
        path: &Path,
    ) -> Result<(), String> {
        let (from, to) = (from.to_string(), to.to_string());
        if self.from != from || self.to != to || self.table != table {
            return Err(format!(
                "the checkpoint {} is of another copy (--from {} --to {} --table {}): delete it, \
                 or pass --checkpoint with another file",
                path.display(),
                self.from,
                self.to,
                self.table
            ));
        }
        Ok(())
    }

    /// Replaces `path` atomically with this checkpoint.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = format!(
            "{MAGIC}=1\nfrom={}\nto={}\ntable={}\nlast_row_hex={}\nrows={}\ncells={}\n",
            self.from,
            self.to,
            self.table,
            super::hash::hex(&self.last_row),
            self.rows,
            self.cells
        );
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let failed =
            |e: std::io::Error| format!("cannot write the checkpoint {}: {e}", path.display());
        {
            let mut f = std::fs::File::create(&tmp).map_err(failed)?;
            f.write_all(text.as_bytes()).map_err(failed)?;
            f.sync_all().map_err(failed)?;
        }
        std::fs::rename(&tmp, path).map_err(failed)?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Removes the file once the copy is done (absent is fine).
    pub fn remove(path: &Path) -> Result<(), String> {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!(
                "the copy is done but the checkpoint {} cannot be removed: {e}",
                path.display()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_checkpoint_loads_back_with_a_binary_row_key() {
        let dir = std::env::temp_dir().join(format!("kura-cp-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("t.checkpoint");
        let mut cp = Checkpoint::new(
            &SideSpec::Rest("http://127.0.0.1:8080".into()),
            &SideSpec::Embedded("/tmp/x".into()),
            "t",
        );
        cp.last_row = vec![0, 0xff, b'a'];
        cp.rows = 7;
        cp.cells = 21;
        cp.save(&path).expect("save");
        assert_eq!(Checkpoint::load(&path).expect("load"), Some(cp));
        let _ = std::fs::remove_dir_all(dir);
    }
}
