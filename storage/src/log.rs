//! The region's append-only log (our WAL): one frame per committed row operation.
//!
//! File: `header (8) | frame*`, header = `b"KURALOG"` + log format version (4; versions 1 and 2,
//! whose records lack fields, are still read). Frame =
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
//!    and no valid frame starts anywhere after it. In a version-4 log also when a zero sector
//!    lies between it and the next valid frame and no later frame's `durable` shows it had
//!    been fsynced (FORMAT.md §4.3).

use crate::codec::{self, LOG_FORMAT_VERSION, MAX_FRAME};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use std::io::Read;
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

/// The log format versions this reader understands (1: no idempotency field; 2: no
/// `durable` field; see [`LOG_FORMAT_VERSION`] for the missing 3).
fn known_version(v: u8) -> bool {
    matches!(v, 1 | 2) || v == LOG_FORMAT_VERSION
}

/// `Corruption` if the log at `path` is a Kura log of a format version newer than this build
/// reads (a downgrade, or a flipped bit that looks like one): refused in every recovery mode,
/// since point-in-time recovery would otherwise truncate it as damage at its header and drop
/// every write in it. A short, foreign or zeroed header is left to replay (torn or damaged).
pub(crate) fn check_version(fs: &dyn FileSystem, path: &Path) -> Result<()> {
    let mut header = Vec::with_capacity(LOG_HEADER_LEN as usize);
    fs.open_read(path)
        .and_then(|f| f.take(LOG_HEADER_LEN).read_to_end(&mut header))
        .map_err(|e| Error::io(path, e))?;
    match header.get(..8) {
        Some(h) if h[..7] == LOG_MAGIC && h[7] > LOG_FORMAT_VERSION => Err(Error::Corruption {
            file: path.to_path_buf(),
            offset: 7,
            reason: format!(
                "log format version {} is newer than this build reads (up to \
                 {LOG_FORMAT_VERSION}): refusing to open rather than drop it as damage",
                h[7]
            ),
        }),
        _ => Ok(()),
    }
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

/// A [`LogRecord`] as the writer encodes it (format version 4): the same fields, borrowed, and
/// `durable`, the log length known fsynced when it was written. A valid frame after damage at
/// offset D whose `durable` exceeds D proves the damaged bytes had been fsynced: not a torn
/// tail (FORMAT.md §4.3).
#[derive(bincode::Encode)]
struct LogRecordOut<'a> {
    seq: u64,
    clock: i64,
    row: &'a [u8],
    cells: &'a [LogCell],
    idem: &'a Option<LogIdem>,
    durable: Option<u64>,
}

/// Append `rec`'s payload in the current format (version 4: with `durable`) to `out`.
pub(crate) fn encode_record(
    rec: &LogRecord,
    durable: Option<u64>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let r = LogRecordOut {
        seq: rec.seq,
        clock: rec.clock,
        row: &rec.row,
        cells: &rec.cells,
        idem: &rec.idem,
        durable,
    };
    codec::encode_into(&r, out)
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
    /// Version 4: the log length known fsynced when the record was written (`None` before).
    pub durable: Option<u64>,
}

/// A version-2 record (no `durable` field), decoded in place.
#[derive(bincode::BorrowDecode)]
struct LogRecordRefV2<'a> {
    seq: u64,
    clock: i64,
    row: &'a [u8],
    cells: Vec<LogCellRef<'a>>,
    idem: Option<LogIdem>,
}

/// A version-1 record (no idempotency field), decoded in place.
#[derive(bincode::BorrowDecode)]
struct LogRecordRefV1<'a> {
    seq: u64,
    clock: i64,
    row: &'a [u8],
    cells: Vec<LogCellRef<'a>>,
}

/// What a decoded record must satisfy before replay applies it: known entry kinds, a
/// qualifier exactly when the kind has one, and sequence numbers that do not overflow.
fn check_record(rec: &LogRecordRef<'_>) -> std::result::Result<(), String> {
    for c in &rec.cells {
        let kind = crate::key::Kind::from_u8(c.kind)
            .ok_or_else(|| format!("unknown entry kind {}", c.kind))?;
        if (kind == crate::key::Kind::DeleteFamily) != c.qualifier.is_none() {
            return Err("qualifier presence does not match the entry kind".into());
        }
    }
    // Replay raises the next sequence number to `seq + cells + 1`.
    rec.seq
        .checked_add(rec.cells.len() as u64 + 1)
        .map(|_| ())
        .ok_or_else(|| format!("sequence number {} out of range", rec.seq))
}

fn decode_record(version: u8, payload: &[u8]) -> Result<LogRecordRef<'_>> {
    match version {
        1 => {
            let r: LogRecordRefV1<'_> = codec::decode_borrowed(payload)?;
            Ok(LogRecordRef {
                seq: r.seq,
                clock: r.clock,
                row: r.row,
                cells: r.cells,
                idem: None,
                durable: None,
            })
        }
        2 => {
            let r: LogRecordRefV2<'_> = codec::decode_borrowed(payload)?;
            Ok(LogRecordRef {
                seq: r.seq,
                clock: r.clock,
                row: r.row,
                cells: r.cells,
                idem: r.idem,
                durable: None,
            })
        }
        _ => codec::decode_borrowed(payload),
    }
}

/// Appends frames to the active log file.
///
/// With preallocation (`prealloc` > 0) the file is kept ahead of its frames by zero bytes,
/// written `prealloc` at a time, and frames are written over them (FORMAT.md, "Preallocated
/// tail"): an fdatasync then has no file size to commit, only data, so it does not wait for a
/// file-system journal commit (nor for whatever else that commit carries).
pub(crate) struct LogWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    pub number: u64,
    /// Bytes of header and frames handed to the OS so far: where the next frame goes.
    len: u64,
    /// The file's size: `len` plus the zeros ahead of it.
    allocated: u64,
    /// Zero bytes written at a time when the frames reach `allocated` (0: none).
    prealloc: u64,
    pending: Vec<u8>,
    unsynced: bool,
    /// Frames up to here belong to answered (acknowledged) batches; past it, to batches not yet
    /// answered, which [`LogWriter::discard_unkept`] removes when the store is poisoned.
    kept: u64,
    /// Bytes known fsynced (stamped into each record as `durable`). At open, only the header:
    /// what a recovery read back may still have been in the page cache only.
    synced: u64,
}

impl LogWriter {
    /// Create a new, empty log file (header and the first preallocated zeros written and
    /// fsynced; the caller fsyncs the dir).
    pub(crate) fn create(
        fs: &dyn FileSystem,
        path: &Path,
        number: u64,
        prealloc: u64,
    ) -> Result<LogWriter> {
        let mut file = fs.create(path).map_err(|e| Error::io(path, e))?;
        file.write_all(&header()).map_err(|e| Error::io(path, e))?;
        let mut w = LogWriter {
            file,
            path: path.to_path_buf(),
            number,
            len: LOG_HEADER_LEN,
            allocated: LOG_HEADER_LEN,
            prealloc,
            pending: Vec::new(),
            unsynced: false,
            kept: LOG_HEADER_LEN,
            synced: LOG_HEADER_LEN,
        };
        w.extend_to(LOG_HEADER_LEN + 1)?;
        w.file.sync().map_err(|e| Error::io(path, e))?;
        Ok(w)
    }

    /// Open an existing, already validated log whose frames end at `len`, in a file of
    /// `file_len` bytes (the rest zeros), for appending.
    pub(crate) fn open(
        fs: &dyn FileSystem,
        path: &Path,
        number: u64,
        len: u64,
        file_len: u64,
        prealloc: u64,
    ) -> Result<Self> {
        let file = fs.open_write(path).map_err(|e| Error::io(path, e))?;
        Ok(LogWriter {
            file,
            path: path.to_path_buf(),
            number,
            len,
            allocated: file_len.max(len),
            prealloc,
            pending: Vec::new(),
            unsynced: false,
            kept: len,
            synced: LOG_HEADER_LEN,
        })
    }

    /// With preallocation, write zeros past `allocated` until the file holds at least `end`
    /// bytes (a multiple of `prealloc` past the header).
    fn extend_to(&mut self, end: u64) -> Result<()> {
        if self.prealloc == 0 || end <= self.allocated {
            return Ok(());
        }
        let target =
            LOG_HEADER_LEN + (end - LOG_HEADER_LEN).div_ceil(self.prealloc) * self.prealloc;
        let zeros = vec![0u8; usize::try_from(target - self.allocated).unwrap_or(usize::MAX)];
        self.file
            .write_at(self.allocated, &zeros)
            .map_err(|e| Error::io(&self.path, e))?;
        self.allocated = target;
        self.unsynced = true;
        Ok(())
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
        // Stamped on the first frame of each write: the others of the batch would carry the
        // same value, and `None` costs one byte.
        let durable = (start == 0).then_some(self.synced);
        if let Err(e) = encode_record(rec, durable, &mut self.pending) {
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
        let end = self.len + self.pending.len() as u64;
        self.extend_to(end)?;
        self.file
            .write_at(self.len, &self.pending)
            .map_err(|e| Error::io(&self.path, e))?;
        self.len = end;
        self.pending.clear();
        self.unsynced = true;
        Ok(())
    }

    /// fsync the file. The frames written so far are then kept.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync().map_err(|e| Error::io(&self.path, e))?;
        self.unsynced = false;
        self.kept = self.len;
        self.synced = self.len;
        Ok(())
    }

    /// The frames written so far belong to batches answered without an fsync (`Interval` and
    /// `None` durability): keep them whatever happens next.
    pub(crate) fn keep_written(&mut self) {
        self.kept = self.len;
    }

    /// Best effort, when the store is poisoned: zero the frames of batches that were not
    /// answered (they will be answered with the failure), so that a recovery does not replay
    /// what the client was told failed. Zeros from a frame boundary end a log (FORMAT.md §4.5).
    /// If the disk refuses even this, recovery may still replay them.
    pub(crate) fn discard_unkept(&mut self) {
        let end = self.len + self.pending.len() as u64;
        self.pending.clear();
        if end > self.kept {
            let zeros = vec![0u8; usize::try_from(end - self.kept).unwrap_or(0)];
            if self.file.write_at(self.kept, &zeros).is_ok() {
                let _ = self.file.sync();
            }
        }
        self.len = self.kept;
    }

    /// A handle that fsyncs this file from another thread; see [`LogWriter::synced_up_to`].
    pub(crate) fn sync_handle(&self) -> Result<Box<dyn crate::fs::SyncHandle>> {
        self.file
            .sync_handle()
            .map_err(|e| Error::io(&self.path, e))
    }

    /// A sync through [`LogWriter::sync_handle`] that started when the file was `len` bytes
    /// long completed: if nothing was written since, nothing is left to fsync.
    pub(crate) fn synced_up_to(&mut self, len: u64) {
        if self.pending.is_empty() && self.len == len {
            self.unsynced = false;
        }
        self.kept = self.kept.max(len.min(self.len));
        self.synced = self.synced.max(len.min(self.len));
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
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

/// The `(len, crc)` of the frame header at the start of `rest` (at least [`FRAME_HEADER`] bytes).
fn frame_header(rest: &[u8]) -> (usize, u32) {
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    (len, crc)
}

/// Checksum work the classification of one damage may do, in bytes hashed: eight times the
/// bytes after the damage, plus 1 MiB. Real frames cost about once the file (each candidate
/// offset inside a frame rarely reads as a plausible length that also fits the file); garbage
/// whose every few bytes read as a plausible length would otherwise cost a checksum over up to
/// [`MAX_FRAME`] bytes per offset, hours for a few MiB of it.
fn classify_budget(bytes: &[u8], at: usize) -> usize {
    (bytes.len() - at.min(bytes.len())).saturating_mul(8) + (1 << 20)
}

/// A scan of a version-`version` log for valid frames after damage, within a checksum budget
/// ([`classify_budget`]).
struct FrameScan<'a> {
    bytes: &'a [u8],
    version: u8,
    budget: usize,
    hashed: usize,
}

/// The budget ran out: what follows the damage was not classified.
struct OutOfBudget;

type Scanned<T> = std::result::Result<T, OutOfBudget>;

/// Whether damage at `at` is a torn tail (invariant 4; FORMAT.md §4.3). `looks_torn`: the bad
/// frame itself is what a torn write leaves (it runs past the end of the file or ends at it,
/// or only zeros follow). A scan that runs out of its checksum budget ([`classify_budget`])
/// answers no: a strict recovery then refuses, rather than call damage it could not classify
/// a tail.
fn torn_tail(bytes: &[u8], at: usize, looks_torn: bool, version: u8) -> bool {
    FrameScan::new(bytes, at, version)
        .torn_tail(at, looks_torn)
        .unwrap_or(false)
}

impl<'a> FrameScan<'a> {
    fn new(bytes: &'a [u8], at: usize, version: u8) -> Self {
        FrameScan {
            bytes,
            version,
            budget: classify_budget(bytes, at),
            hashed: 0,
        }
    }

    /// Where the valid frame (plausible length, matching checksum) starting at offset `i`
    /// ends, if one does.
    fn frame_end(&mut self, i: usize) -> Scanned<Option<usize>> {
        let bytes = self.bytes;
        if i + FRAME_HEADER > bytes.len() {
            return Ok(None);
        }
        let (len, crc) = frame_header(&bytes[i..]);
        let end = i + FRAME_HEADER + len;
        if len == 0 || len > MAX_FRAME || end > bytes.len() {
            return Ok(None);
        }
        self.hashed += len;
        if self.hashed > self.budget {
            return Err(OutOfBudget);
        }
        Ok((crc32fast::hash(&bytes[i + FRAME_HEADER..end]) == crc).then_some(end))
    }

    /// The first offset from `from` on where a valid frame starts.
    fn next_frame(&mut self, from: usize) -> Scanned<Option<usize>> {
        for i in from..self.bytes.len() {
            if self.frame_end(i)?.is_some() {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// [`torn_tail`]: the file after `at` is scanned once for the next valid frame; a
    /// version-4 log is read on from there for a proof that `at` had been fsynced.
    fn torn_tail(&mut self, at: usize, looks_torn: bool) -> Scanned<bool> {
        if !looks_torn && self.version < 4 {
            return Ok(false);
        }
        let next = self.next_frame(at + 1)?;
        Ok((looks_torn && next.is_none())
            || (self.version >= 4 && self.lost_unsynced_sector(at, next)?))
    }

    /// Version 4: whether the damage at `at`, though valid frames may follow it (the first at
    /// `next`), is what a power cut leaves of an unsynced write: a sector of it never reached
    /// the disk (an aligned 512-byte block of zeros, the preallocated bytes it was written
    /// over, lies between `at` and the next valid frame), and no later frame proves the bytes
    /// at `at` had been fsynced ([`Self::fsynced_before_a_later_frame`]). Anything else, a
    /// flipped bit or garbage, stays mid-log damage whatever follows it.
    fn lost_unsynced_sector(&mut self, at: usize, next: Option<usize>) -> Scanned<bool> {
        const SECTOR: usize = 512;
        let bytes = self.bytes;
        let end = next.unwrap_or(bytes.len());
        let zero_sector = (at.div_ceil(SECTOR) * SECTOR..end)
            .step_by(SECTOR)
            .take_while(|s| s + SECTOR <= end)
            .any(|s| bytes[s..s + SECTOR].iter().all(|b| *b == 0));
        Ok(zero_sector
            && match next {
                Some(n) => !self.fsynced_before_a_later_frame(at, n)?,
                None => true,
            })
    }

    /// Version 4: whether a valid frame from offset `from` on (the first valid frame after
    /// `at`) proves the bytes at `at` had been fsynced, its record's `durable` (the log length
    /// known fsynced when it was written) being past `at`. Without such a frame, damage at `at`
    /// can be a power cut tearing unsynced writes, whatever follows it (a later page of the
    /// same unsynced batch may have reached the disk before an earlier one). A frame whose
    /// checksum holds but whose record does not decode is taken as proof too: no torn write
    /// makes one.
    fn fsynced_before_a_later_frame(&mut self, at: usize, from: usize) -> Scanned<bool> {
        let mut i = from;
        while i < self.bytes.len() {
            let Some(end) = self.frame_end(i)? else {
                i += 1;
                continue;
            };
            match decode_record(self.version, &self.bytes[i + FRAME_HEADER..end]) {
                Ok(r) if r.durable.is_some_and(|d| d > at as u64) => return Ok(true),
                Ok(_) => i = end,
                Err(_) => return Ok(true),
            }
        }
        Ok(false)
    }
}

/// Replay the valid prefix of a log. Records are folded, in log order, into chunk accumulators
/// (`fold`, which may run on worker threads), and each chunk is handed to `apply` on the
/// calling thread, in log order, before the next one: the effect is that of folding every
/// record into `apply`'s state one after the other. A chunk holds at most `max_chunk` bytes of
/// frames, or one frame if that is larger, so that the caller can bound what a chunk brings
/// (at most [`CHUNKS_IN_FLIGHT`] decoded chunks wait for `apply`). `threads` > 1 decodes the
/// chunks of a log over [`PARALLEL_MIN`] on that many scoped threads. With `classify`, damage
/// is classified as torn tail or not (this scans the rest of the file).
///
/// The file is read through [`FileSystem::map`] and records are decoded in place (their byte
/// fields borrow from the map), so replay copies each value once, into the accumulator. The map
/// is dropped before this returns: the caller may then truncate the file.
pub(crate) fn replay<T: Default + Send>(
    fs: &dyn FileSystem,
    path: &Path,
    classify: bool,
    threads: usize,
    max_chunk: usize,
    fold: &Fold<'_, T>,
    apply: &mut dyn FnMut(T) -> Result<()>,
) -> Result<ReplayOutcome> {
    let map = fs.map(path).map_err(|e| Error::io(path, e))?;
    replay_map(map.bytes(), classify, threads, max_chunk, fold, apply)
}

/// [`replay`] of a log the caller mapped (and may keep mapped: replay reads it, nothing more).
pub(crate) fn replay_map<T: Default + Send>(
    bytes: &[u8],
    classify: bool,
    threads: usize,
    max_chunk: usize,
    fold: &Fold<'_, T>,
    apply: &mut dyn FnMut(T) -> Result<()>,
) -> Result<ReplayOutcome> {
    let threads = if bytes.len() < PARALLEL_MIN {
        1
    } else {
        threads.max(1)
    };
    // Chunks small enough to spread over the threads, large enough that handing one over costs
    // nothing next to decoding it.
    let chunk = (bytes.len() / (4 * threads)).max(MIN_CHUNK).min(max_chunk);
    replay_bytes(bytes, classify, threads, chunk, fold, apply)
}

/// Folds one decoded record into a chunk's accumulator (on whichever thread decodes it).
pub(crate) type Fold<'f, T> = dyn Fn(&mut T, LogRecordRef<'_>) -> Result<()> + Sync + 'f;

/// Logs shorter than this replay on the calling thread.
const PARALLEL_MIN: usize = 1 << 20;
/// Smallest chunk of frames decoded as one unit by [`replay`] (unless `max_chunk` is smaller).
const MIN_CHUNK: usize = 64 << 10;
/// Chunks decoded but not yet applied, at most.
pub(crate) const CHUNKS_IN_FLIGHT: usize = 8;

/// [`replay`] over the bytes of a log, in chunks of about `chunk` bytes.
fn replay_bytes<T: Default + Send>(
    bytes: &[u8],
    classify: bool,
    threads: usize,
    chunk: usize,
    fold: &Fold<'_, T>,
    apply: &mut dyn FnMut(T) -> Result<()>,
) -> Result<ReplayOutcome> {
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
    let version = out.version;
    let mut chunks = Chunks {
        bytes,
        at: LOG_HEADER_LEN as usize,
        target: chunk.max(1),
    };
    let walk_chunk = |(from, to): (usize, usize)| {
        let mut acc = T::default();
        walk(bytes, from, to, version, classify, &mut acc, fold).map(|w| (acc, w))
    };
    // `end`: where the frames' lengths stop adding up (the file's end when all is well).
    let end = if threads <= 1 || bytes.len() < 2 * chunk {
        for range in &mut chunks {
            let (acc, w) = walk_chunk(range)?;
            out.records += w.records;
            apply(acc)?;
            if w.damage.is_some() {
                out.damage = w.damage;
                out.valid_len = w.at as u64;
                return Ok(out);
            }
        }
        chunks.at
    } else {
        match replay_parallel(chunks, threads, &walk_chunk, apply, &mut out.records)? {
            Ok(end) => end,
            Err((at, damage)) => {
                out.damage = Some(damage);
                out.valid_len = at as u64;
                return Ok(out);
            }
        }
    };
    // What stopped the chunking (if anything) is damage: walk classifies it.
    let mut acc = T::default();
    let w = walk(bytes, end, bytes.len(), version, classify, &mut acc, fold)?;
    debug_assert_eq!(
        w.records, 0,
        "the chunks ended at a frame that does not fit"
    );
    out.damage = w.damage;
    out.valid_len = w.at as u64;
    Ok(out)
}

/// Decoded chunks, or the first damage one of them found.
type ChunkResult<T> = Result<(T, Walked)>;

/// Decode `chunks` on `threads` scoped threads while a walker thread cuts them; apply them in
/// order on this thread. `Ok(Ok(end))`: every chunk was whole, the chunking stopped at `end`;
/// `Ok(Err((at, damage)))`: a chunk found damage at `at` (its records before `at` applied).
fn replay_parallel<T: Send>(
    chunks: Chunks<'_>,
    threads: usize,
    walk_chunk: &(dyn Fn((usize, usize)) -> ChunkResult<T> + Sync),
    apply: &mut dyn FnMut(T) -> Result<()>,
    records: &mut u64,
) -> Result<std::result::Result<usize, (usize, Damage)>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::{channel, sync_channel};
    use std::sync::Mutex;
    enum Msg<T> {
        Chunk(usize, ChunkResult<T>),
        /// The walker cut `chunks` chunks and stopped at offset `end`.
        End {
            chunks: usize,
            end: usize,
        },
    }
    let stop = AtomicBool::new(false);
    let (job_tx, job_rx) = sync_channel::<(usize, (usize, usize))>(threads);
    let job_rx = Mutex::new(job_rx);
    std::thread::scope(|s| {
        // A semaphore: the walker takes a permit per chunk, this thread returns it once the
        // chunk is applied, so at most CHUNKS_IN_FLIGHT decoded chunks wait in memory.
        let (permit_tx, permit_rx) = sync_channel::<()>(CHUNKS_IN_FLIGHT);
        let (done_tx, done_rx) = channel::<Msg<T>>();
        let walker_done = done_tx.clone();
        s.spawn(move || {
            let mut chunks = chunks;
            let mut n = 0;
            for range in chunks.by_ref() {
                if permit_tx.send(()).is_err() || job_tx.send((n, range)).is_err() {
                    return;
                }
                n += 1;
            }
            let _ = walker_done.send(Msg::End {
                chunks: n,
                end: chunks.at,
            });
        });
        for _ in 0..threads {
            let (job_rx, done_tx, stop) = (&job_rx, done_tx.clone(), &stop);
            s.spawn(move || loop {
                // Keep draining after a stop so that the walker never blocks on a full queue.
                let job = job_rx
                    .lock()
                    .map_err(|_| ())
                    .and_then(|rx| rx.recv().map_err(|_| ()));
                let Ok((i, range)) = job else { return };
                if !stop.load(Ordering::Relaxed) {
                    let _ = done_tx.send(Msg::Chunk(i, walk_chunk(range)));
                }
            });
        }
        drop(done_tx);
        let result = (|| {
            let mut waiting = std::collections::BTreeMap::new();
            let (mut next, mut end) = (0, None);
            loop {
                if let Some(r) = waiting.remove(&next) {
                    let (acc, w): (T, Walked) = r?;
                    let _ = permit_rx.recv();
                    *records += w.records;
                    apply(acc)?;
                    if let Some(d) = w.damage {
                        return Ok(Err((w.at, d)));
                    }
                    next += 1;
                    continue;
                }
                match end {
                    Some((n, at)) if n == next => return Ok(Ok(at)),
                    _ => {}
                }
                match done_rx.recv() {
                    Ok(Msg::Chunk(i, r)) => {
                        waiting.insert(i, r);
                    }
                    Ok(Msg::End { chunks, end: at }) => end = Some((chunks, at)),
                    Err(_) => {
                        return Err(Error::Codec("log replay: a decoding thread stopped".into()))
                    }
                }
            }
        })();
        stop.store(true, Ordering::Relaxed);
        // Dropping the receivers ends the walker, which ends the workers.
        drop(permit_rx);
        drop(done_rx);
        result
    })
}

/// Cuts a log's frames into runs of about `target` bytes by their length fields alone (no CRC,
/// no decoding); stops where a frame's length does not fit (`at` is then that frame).
struct Chunks<'a> {
    bytes: &'a [u8],
    at: usize,
    target: usize,
}

impl Iterator for Chunks<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        let start = self.at;
        while self.at < self.bytes.len() && self.at - start < self.target {
            let rest = &self.bytes[self.at..];
            if rest.len() < FRAME_HEADER {
                break;
            }
            let (len, _) = frame_header(rest);
            if len == 0 || len > MAX_FRAME || FRAME_HEADER + len > rest.len() {
                break;
            }
            self.at += FRAME_HEADER + len;
        }
        (self.at > start).then_some((start, self.at))
    }
}

/// What walking a run of frames found.
struct Walked {
    /// Where the walk stopped: `to`, the first bad frame, or the start of the preallocated
    /// tail (zeros to the end of the file, not damage).
    at: usize,
    records: u64,
    damage: Option<Damage>,
}

/// Check and decode the frames of `bytes[from..to]` (`from` at a frame boundary) into `acc`,
/// stopping at the first bad frame (invariants 3 and 4; the checks look at the whole file
/// after it).
fn walk<T>(
    bytes: &[u8],
    from: usize,
    to: usize,
    version: u8,
    classify: bool,
    acc: &mut T,
    fold: &Fold<'_, T>,
) -> Result<Walked> {
    let mut at = from;
    let mut records = 0;
    while at < to {
        let offset = at as u64;
        let rest = &bytes[at..];
        let damage = |reason: &str, tail: bool| Damage {
            offset,
            reason: reason.into(),
            tail,
        };
        let bad = |d: Damage| Walked {
            at,
            records,
            damage: Some(d),
        };
        if rest.iter().all(|b| *b == 0) {
            // The preallocated tail: zeros from a frame boundary to the end of the file.
            return Ok(Walked {
                at,
                records,
                damage: None,
            });
        }
        if rest.len() < FRAME_HEADER {
            return Ok(bad(damage("incomplete frame header", true)));
        }
        let (len, crc) = frame_header(rest);
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
                tail = torn_tail(bytes, at, tail || all_zero, version);
            }
            return Ok(bad(damage(reason, tail)));
        }
        let payload = &rest[FRAME_HEADER..FRAME_HEADER + len];
        if crc32fast::hash(payload) != crc {
            let ends_file = FRAME_HEADER + len == rest.len();
            let tail = ends_file || (classify && torn_tail(bytes, at, true, version));
            return Ok(bad(damage("frame checksum mismatch", tail)));
        }
        let rec: LogRecordRef<'_> = match decode_record(version, payload) {
            Ok(rec) => rec,
            Err(e) => return Ok(bad(damage(&format!("undecodable record: {e}"), false))),
        };
        // A frame whose checksum holds can still carry what no writer writes (a bug, or a
        // crafted file): damage at this frame, never a panic or a wrapped sequence number.
        if let Err(why) = check_record(&rec) {
            return Ok(bad(damage(&format!("invalid record: {why}"), false)));
        }
        fold(acc, rec)?;
        records += 1;
        at += FRAME_HEADER + len;
    }
    Ok(Walked {
        at,
        records,
        damage: None,
    })
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
        write_log_prealloc(fs, path, n, 0);
    }

    /// `n` records, written one batch at a time, with `prealloc`; the frames' end.
    fn write_log_prealloc(fs: &SimFs, path: &Path, n: u64, prealloc: u64) -> u64 {
        let mut w = LogWriter::create(fs, path, 1, prealloc).unwrap();
        for i in 0..n {
            w.add(&rec(i)).unwrap();
            w.write_pending().unwrap();
            // Each batch acknowledged in `Sync` durability: fsynced before the next.
            w.sync().unwrap();
        }
        w.len()
    }

    #[test]
    fn a_preallocated_tail_is_the_end_of_the_log_not_damage() {
        let fs = SimFs::new();
        let path = Path::new("/l/p.klog");
        let end = write_log_prealloc(&fs, path, 40, 256);
        let bytes = fs.read_file(path).unwrap();
        assert!(bytes.len() as u64 > end, "zeros ahead of the frames");
        assert_eq!((bytes.len() as u64 - LOG_HEADER_LEN) % 256, 0);
        assert!(bytes[end as usize..].iter().all(|b| *b == 0));
        let (out, got) = replay_all(&fs, path);
        assert_eq!(out.damage, None);
        assert_eq!(out.valid_len, end);
        assert_eq!(got, (0..40).map(rec).collect::<Vec<_>>());
        for threads in [2, 3] {
            let (out, got) = replay_with(&bytes, threads, 64);
            assert_eq!(
                (out.damage, out.valid_len),
                (None, end),
                "{threads} threads"
            );
            assert_eq!(got.len(), 40);
        }
    }

    #[test]
    fn a_torn_frame_before_the_preallocated_zeros_is_a_torn_tail() {
        let fs = SimFs::new();
        let path = Path::new("/l/t.klog");
        let end = write_log_prealloc(&fs, path, 10, 4096) as usize;
        let mut bytes = fs.read_file(path).unwrap();
        bytes[end - 1] ^= 0xff;
        fs.write_file(path, &bytes).unwrap();
        let (out, got) = replay_all(&fs, path);
        let d = out.damage.expect("the last frame is damaged");
        assert!(d.tail, "nothing valid after it");
        assert_eq!(got.len(), 9);
        assert_eq!(out.valid_len, d.offset, "cut at the damaged frame");
    }

    /// Garbage whose every few bytes read as a plausible frame length would cost a checksum
    /// per offset over up to the rest of the file (1 MiB of it: about 1 GiB hashed); the
    /// classification stops at its budget and answers "not a tail", so that a strict recovery
    /// refuses quickly instead of spending hours.
    #[test]
    fn classifying_garbage_of_plausible_lengths_stays_within_its_checksum_budget() {
        let fs = SimFs::new();
        let path = Path::new("/l/g.klog");
        write_log(&fs, path, 10);
        let mut bytes = fs.read_file(path).unwrap();
        let at = bytes.len();
        // Read at each alignment as 4096, 16, 1 MiB or 256 MiB: three in four fit.
        bytes.extend([0x00u8, 0x10, 0x00, 0x00].repeat(1 << 18));
        let mut scan = FrameScan::new(&bytes, at, LOG_FORMAT_VERSION);
        let budget = scan.budget;
        assert!(scan.torn_tail(at, true).is_err(), "out of budget");
        assert!(
            scan.hashed <= budget + MAX_FRAME,
            "hashed {} of {budget}",
            scan.hashed
        );
        fs.write_file(path, &bytes).unwrap();
        let (out, got) = replay_all(&fs, path);
        let d = out.damage.expect("garbage is damage");
        assert_eq!(d.offset, at as u64);
        assert!(!d.tail, "not classified: a strict recovery refuses");
        assert_eq!(got.len(), 10);
    }

    #[test]
    fn frames_after_a_zeroed_range_are_mid_log_damage_not_a_preallocated_tail() {
        let fs = SimFs::new();
        let path = Path::new("/l/z.klog");
        write_log_prealloc(&fs, path, 20, 256);
        let mut bytes = fs.read_file(path).unwrap();
        let from = LOG_HEADER_LEN as usize;
        bytes[from..from + 200].fill(0);
        fs.write_file(path, &bytes).unwrap();
        let (out, got) = replay_all(&fs, path);
        let d = out.damage.expect("damage");
        assert!(!d.tail, "valid frames follow the zeros");
        assert!(got.is_empty());
    }

    fn owned(r: LogRecordRef<'_>) -> LogRecord {
        LogRecord {
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
        }
    }

    fn fold_owned(acc: &mut Vec<LogRecord>, r: LogRecordRef<'_>) -> Result<()> {
        acc.push(owned(r));
        Ok(())
    }

    /// Replay `bytes` with `threads` decoding chunks of `chunk` bytes; the records in the
    /// order `apply` saw them.
    fn replay_with(bytes: &[u8], threads: usize, chunk: usize) -> (ReplayOutcome, Vec<LogRecord>) {
        let mut got = Vec::new();
        let out = replay_bytes(bytes, true, threads, chunk, &fold_owned, &mut |c| {
            got.extend(c);
            Ok(())
        })
        .unwrap();
        (out, got)
    }

    fn replay_all(fs: &SimFs, path: &Path) -> (ReplayOutcome, Vec<LogRecord>) {
        let mut got = Vec::new();
        let out = replay(fs, path, true, 1, usize::MAX, &fold_owned, &mut |c| {
            got.extend(c);
            Ok(())
        })
        .unwrap();
        (out, got)
    }

    #[test]
    fn replay_on_threads_finds_what_one_thread_finds_whatever_the_damage() {
        let fs = SimFs::new();
        let path = Path::new("/l/1.klog");
        write_log(&fs, path, 40);
        let good = fs.read_file(path).unwrap();
        let check = |bytes: &[u8], what: &str| {
            let one = replay_with(bytes, 1, usize::MAX);
            for (threads, chunk) in [(2, 1), (3, 45), (2, 200)] {
                assert_eq!(
                    replay_with(bytes, threads, chunk),
                    one,
                    "{what}, {threads} threads, {chunk}-byte chunks"
                );
            }
            one
        };
        assert_eq!(check(&good, "whole log").1.len(), 40);
        for cut in (0..good.len()).step_by(3) {
            check(&good[..cut], &format!("cut at {cut}"));
        }
        for bit in (0..good.len() * 8).step_by(5) {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            check(&bad, &format!("bit {bit} flipped"));
        }
        let mut zeroed = good.clone();
        zeroed[300..340].fill(0);
        let (out, got) = check(&zeroed, "zeroed range");
        assert!(out.damage.is_some() && got.len() < 40);
    }

    #[test]
    fn a_record_the_caller_rejects_fails_the_replay_on_any_number_of_threads() {
        let fs = SimFs::new();
        let path = Path::new("/l/1.klog");
        write_log(&fs, path, 40);
        let bytes = fs.read_file(path).unwrap();
        let reject_17 = |acc: &mut Vec<LogRecord>, r: LogRecordRef<'_>| {
            if r.seq == 17 {
                return Err(Error::Codec("record 17 rejected".into()));
            }
            fold_owned(acc, r)
        };
        for (threads, chunk) in [(1, usize::MAX), (2, 1), (3, 45)] {
            let mut applied = 0;
            let got = replay_bytes(&bytes, true, threads, chunk, &reject_17, &mut |c| {
                applied += c.len();
                Ok(())
            });
            let err = got.expect_err("the rejection stops the replay");
            assert!(err.to_string().contains("record 17"), "{threads}: {err}");
            assert!(applied <= 17, "{threads} threads applied {applied} records");
        }
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
