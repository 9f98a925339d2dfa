//! The region's append-only log (our WAL): one frame per committed row operation.
//!
//! File: `header (8) | frame*`, header = `b"KURALOG"` + log format version (2; version-1 logs,
//! whose records have no idempotency field, are still read). Frame =
//! `[u32 len LE][u32 crc32 LE of payload][payload]`, payload = a bincode [`LogRecord`]
//! (see [`crate::codec`]).
//!
//! # Invariants
//! 1. A record holds the *effects* of one operation on one row (concrete timestamps, resulting
//!    values), so replay is deterministic and needs no reads.
//! 2. Frames are buffered only within one `write_batch` and handed to the OS (`write`) before
//!    any of its operations is acknowledged; `sync` then makes them durable.
//! 3. Reading checks a frame's length against [`MAX_FRAME`] and the bytes left in the file
//!    before allocating, and its CRC before decoding.
//! 4. A frame is either whole and valid or treated as absent; recovery stops at the first bad
//!    frame. It is a *torn tail* when nothing valid could follow it: the frame runs past the
//!    end of the file, or it ends exactly at the end of the file, or only zero bytes follow,
//!    and no valid frame starts anywhere after it.

use crate::codec::{self, LOG_FORMAT_VERSION, MAX_FRAME};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use std::path::{Path, PathBuf};

pub(crate) const LOG_MAGIC: [u8; 7] = *b"KURALOG";
pub(crate) const LOG_HEADER_LEN: u64 = 8;
const FRAME_HEADER: usize = 8;

fn header() -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..7].copy_from_slice(&LOG_MAGIC);
    h[7] = LOG_FORMAT_VERSION;
    h
}

/// The log format versions this reader understands (1: no idempotency field).
fn known_version(v: u8) -> bool {
    v == 1 || v == LOG_FORMAT_VERSION
}

/// One cell effect inside a [`LogRecord`].
#[derive(Clone, Debug, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub(crate) struct LogCell {
    pub family: Vec<u8>,
    /// `None` only for a family delete marker.
    pub qualifier: Option<Vec<u8>>,
    pub ts: i64,
    /// [`crate::key::Kind`] as a byte.
    pub kind: u8,
    pub value: Vec<u8>,
}

/// The effects of one operation on one row; cell `i` gets sequence number `seq + i`.
#[derive(Clone, Debug, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub(crate) struct LogRecord {
    pub seq: u64,
    /// The store clock after this operation (so server timestamps never go backwards across a
    /// restart).
    pub clock: i64,
    pub row: Vec<u8>,
    pub cells: Vec<LogCell>,
    /// Version 2: the idempotency key of the operation and its outcome, recorded atomically
    /// with its effects (`cells` may then be empty: a failed check, or a key re-logged when
    /// the log was rotated).
    pub idem: Option<LogIdem>,
}

/// An idempotency key and the outcome it answers with (format version 2).
#[derive(Clone, Debug, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub(crate) struct LogIdem {
    /// The client's key (the store scopes it by the record's row).
    pub key: Vec<u8>,
    /// Wall-clock ms when the operation was first applied (the window counts from it).
    pub at_ms: i64,
    pub outcome: LogOutcome,
}

/// A new cell in a logged outcome: `(family, qualifier, timestamp, value)`.
pub(crate) type OutcomeCell = (Vec<u8>, Vec<u8>, i64, Vec<u8>);

/// A [`crate::model::WriteOutcome`] as logged.
#[derive(Clone, Debug, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub(crate) enum LogOutcome {
    Mutated,
    /// New cells of an increment or append: `(family, qualifier, timestamp, value)`.
    Cells(Vec<OutcomeCell>),
    Checked(bool),
}

/// [`LogCell`] decoded in place: the same bytes, fields borrowed from the log.
#[derive(Clone, Debug, PartialEq, Eq, bincode::BorrowDecode)]
pub(crate) struct LogCellRef<'a> {
    pub family: &'a [u8],
    pub qualifier: Option<&'a [u8]>,
    pub ts: i64,
    pub kind: u8,
    pub value: &'a [u8],
}

/// [`LogRecord`] decoded in place.
#[derive(Clone, Debug, PartialEq, Eq, bincode::BorrowDecode)]
pub(crate) struct LogRecordRef<'a> {
    pub seq: u64,
    pub clock: i64,
    pub row: &'a [u8],
    pub cells: Vec<LogCellRef<'a>>,
    pub idem: Option<LogIdem>,
}

/// A version-1 record (no idempotency field), decoded in place.
#[derive(bincode::BorrowDecode)]
struct LogRecordRefV1<'a> {
    seq: u64,
    clock: i64,
    row: &'a [u8],
    cells: Vec<LogCellRef<'a>>,
}

fn decode_record(version: u8, payload: &[u8]) -> Result<LogRecordRef<'_>> {
    if version == 1 {
        let r: LogRecordRefV1<'_> = codec::decode_borrowed(payload)?;
        return Ok(LogRecordRef {
            seq: r.seq,
            clock: r.clock,
            row: r.row,
            cells: r.cells,
            idem: None,
        });
    }
    codec::decode_borrowed(payload)
}

/// Appends frames to the active log file.
pub(crate) struct LogWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    pub number: u64,
    /// Bytes handed to the OS so far (header included).
    len: u64,
    pending: Vec<u8>,
    unsynced: bool,
}

impl LogWriter {
    /// Create a new, empty log file (header written and fsynced; the caller fsyncs the dir).
    pub(crate) fn create(fs: &dyn FileSystem, path: &Path, number: u64) -> Result<LogWriter> {
        let mut file = fs.create(path).map_err(|e| Error::io(path, e))?;
        file.write_all(&header()).map_err(|e| Error::io(path, e))?;
        file.sync().map_err(|e| Error::io(path, e))?;
        Ok(LogWriter {
            file,
            path: path.to_path_buf(),
            number,
            len: LOG_HEADER_LEN,
            pending: Vec::new(),
            unsynced: false,
        })
    }

    /// Open an existing, already validated log of `len` bytes for appending.
    pub(crate) fn open(fs: &dyn FileSystem, path: &Path, number: u64, len: u64) -> Result<Self> {
        let file = fs.open_append(path).map_err(|e| Error::io(path, e))?;
        Ok(LogWriter {
            file,
            path: path.to_path_buf(),
            number,
            len,
            pending: Vec::new(),
            unsynced: false,
        })
    }

    /// Bytes in the file plus bytes waiting to be written.
    pub(crate) fn len(&self) -> u64 {
        self.len + self.pending.len() as u64
    }

    pub(crate) fn has_unsynced(&self) -> bool {
        self.unsynced || !self.pending.is_empty()
    }

    /// Encode a record as a frame into the pending buffer. Fails (without side effects) if the
    /// record exceeds [`MAX_FRAME`].
    pub(crate) fn add(&mut self, rec: &LogRecord) -> Result<()> {
        let start = self.pending.len();
        self.pending.extend_from_slice(&[0u8; FRAME_HEADER]);
        if let Err(e) = codec::encode_into(rec, &mut self.pending) {
            self.pending.truncate(start);
            return Err(e);
        }
        let len = self.pending.len() - start - FRAME_HEADER;
        if len > MAX_FRAME {
            self.pending.truncate(start);
            return Err(Error::InvalidArgument(format!(
                "operation encodes to {len} bytes, over the {MAX_FRAME}-byte log frame limit"
            )));
        }
        let crc = crc32fast::hash(&self.pending[start + FRAME_HEADER..]);
        self.pending[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
        self.pending[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        Ok(())
    }

    /// Hand the pending frames to the OS in one write.
    pub(crate) fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(&self.pending)
            .map_err(|e| Error::io(&self.path, e))?;
        self.len += self.pending.len() as u64;
        self.pending.clear();
        self.unsynced = true;
        Ok(())
    }

    /// fsync the file.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync().map_err(|e| Error::io(&self.path, e))?;
        self.unsynced = false;
        Ok(())
    }
}

/// Where and why replay stopped early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Damage {
    pub offset: u64,
    pub reason: String,
    /// True if this is a torn tail (invariant 4), false if valid data may follow.
    pub tail: bool,
}

/// What replaying one log file found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReplayOutcome {
    /// Length of the valid prefix (header and whole valid frames).
    pub valid_len: u64,
    pub file_len: u64,
    pub records: u64,
    pub damage: Option<Damage>,
    /// The format version in the log's header (0 if the header was unreadable).
    pub version: u8,
}

/// True if a valid frame starts at any offset of `rest`.
fn valid_frame_within(rest: &[u8]) -> bool {
    (0..rest.len().saturating_sub(FRAME_HEADER)).any(|i| {
        let h = &rest[i..i + FRAME_HEADER];
        let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
        let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        len > 0
            && len <= MAX_FRAME
            && i + FRAME_HEADER + len <= rest.len()
            && crc32fast::hash(&rest[i + FRAME_HEADER..i + FRAME_HEADER + len]) == crc
    })
}

/// Replay the valid prefix of a log, calling `apply` for every record in order. With
/// `classify`, damage is classified as torn tail or not (this scans the rest of the file).
///
/// The file is read through [`FileSystem::map`] and records are decoded in place (their byte
/// fields borrow from the map), so replay copies each value once, into the memtable. The map is
/// dropped before this returns: the caller may then truncate the file.
pub(crate) fn replay(
    fs: &dyn FileSystem,
    path: &Path,
    classify: bool,
    apply: &mut dyn FnMut(LogRecordRef<'_>) -> Result<()>,
) -> Result<ReplayOutcome> {
    let map = fs.map(path).map_err(|e| Error::io(path, e))?;
    let bytes = map.bytes();
    let file_len = bytes.len() as u64;
    let mut out = ReplayOutcome {
        valid_len: 0,
        file_len,
        records: 0,
        damage: None,
        version: 0,
    };
    if bytes.len() < LOG_HEADER_LEN as usize {
        out.damage = Some(Damage {
            offset: 0,
            reason: "incomplete log header".into(),
            tail: true,
        });
        return Ok(out);
    }
    if bytes[..7] != LOG_MAGIC || !known_version(bytes[7]) {
        out.damage = Some(Damage {
            offset: 0,
            reason: "bad log magic or format version".into(),
            tail: false,
        });
        return Ok(out);
    }
    out.version = bytes[7];
    let mut at = LOG_HEADER_LEN as usize;
    while at < bytes.len() {
        let offset = at as u64;
        let rest = &bytes[at..];
        let damage = |reason: &str, tail: bool| Damage {
            offset,
            reason: reason.into(),
            tail,
        };
        if rest.len() < FRAME_HEADER {
            out.damage = Some(damage("incomplete frame header", true));
            break;
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let fits = FRAME_HEADER + len <= rest.len();
        if len == 0 || len > MAX_FRAME || !fits {
            let (reason, mut tail) = if len == 0 {
                ("zero-length frame", false)
            } else if !fits {
                ("frame runs past the end of the file", true)
            } else {
                ("frame length over the limit", false)
            };
            if classify {
                let all_zero = rest.iter().all(|b| *b == 0);
                tail = (tail || all_zero) && !valid_frame_within(&rest[1..]);
            }
            out.damage = Some(damage(reason, tail));
            break;
        }
        let payload = &rest[FRAME_HEADER..FRAME_HEADER + len];
        if crc32fast::hash(payload) != crc {
            let ends_file = FRAME_HEADER + len == rest.len();
            let tail = ends_file || (classify && !valid_frame_within(&rest[1..]));
            out.damage = Some(damage("frame checksum mismatch", tail));
            break;
        }
        let rec: LogRecordRef<'_> = match decode_record(out.version, payload) {
            Ok(rec) => rec,
            Err(e) => {
                out.damage = Some(damage(&format!("undecodable record: {e}"), false));
                break;
            }
        };
        apply(rec)?;
        out.records += 1;
        at += FRAME_HEADER + len;
    }
    out.valid_len = match &out.damage {
        Some(d) => d.offset,
        None => at as u64,
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::SimFs;

    fn rec(seq: u64) -> LogRecord {
        LogRecord {
            seq,
            clock: 7,
            row: b"row".to_vec(),
            cells: vec![LogCell {
                family: b"f".to_vec(),
                qualifier: Some(b"q".to_vec()),
                ts: 5,
                kind: 3,
                value: vec![seq as u8; 10],
            }],
            idem: None,
        }
    }

    fn write_log(fs: &SimFs, path: &Path, n: u64) {
        let mut w = LogWriter::create(fs, path, 1).unwrap();
        for i in 0..n {
            w.add(&rec(i)).unwrap();
        }
        w.write_pending().unwrap();
        w.sync().unwrap();
    }

    fn replay_all(fs: &SimFs, path: &Path) -> (ReplayOutcome, Vec<LogRecord>) {
        let mut got = Vec::new();
        let out = replay(fs, path, true, &mut |r| {
            got.push(LogRecord {
                seq: r.seq,
                clock: r.clock,
                row: r.row.to_vec(),
                cells: r
                    .cells
                    .iter()
                    .map(|c| LogCell {
                        family: c.family.to_vec(),
                        qualifier: c.qualifier.map(<[u8]>::to_vec),
                        ts: c.ts,
                        kind: c.kind,
                        value: c.value.to_vec(),
                    })
                    .collect(),
                idem: r.idem,
            });
            Ok(())
        })
        .unwrap();
        (out, got)
    }

    #[test]
    fn every_truncation_is_a_torn_tail_with_a_valid_prefix() {
        let fs = SimFs::new();
        let path = Path::new("/l/1.klog");
        write_log(&fs, path, 3);
        let good = fs.read_file(path).unwrap();
        for cut in 0..good.len() {
            fs.write_file(path, &good[..cut]).unwrap();
            let (out, got) = replay_all(&fs, path);
            assert!(
                out.damage.as_ref().is_none_or(|d| d.tail),
                "cut {cut}: {out:?}"
            );
            for (i, r) in got.iter().enumerate() {
                assert_eq!(r, &rec(i as u64));
            }
        }
    }

    #[test]
    fn a_flipped_bit_in_an_early_frame_is_not_a_tail() {
        let fs = SimFs::new();
        let path = Path::new("/l/1.klog");
        write_log(&fs, path, 3);
        let good = fs.read_file(path).unwrap();
        for i in 8..good.len() / 2 {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[i] ^= 1 << bit;
                fs.write_file(path, &bad).unwrap();
                let (out, got) = replay_all(&fs, path);
                let d = out.damage.expect("damage detected");
                assert!(!d.tail, "byte {i} bit {bit}: {d:?}");
                for (k, r) in got.iter().enumerate() {
                    assert_eq!(r, &rec(k as u64));
                }
            }
        }
    }
}
