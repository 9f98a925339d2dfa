//! Segments: immutable sorted files of entries (HBase's HFile), read through a memory map.
//!
//! Layout (little-endian; see `storage/FORMAT.md` for the byte tables):
//! `header (8) | data block* | row filter | index | footer (64)`. A data block is a run of
//! encoded entries of about [`BLOCK_SIZE`] bytes; the row filter ([`crate::row_filter`]) tells
//! a point read whether the segment may hold its row; the index lists, per block, its offset,
//! length, CRC-32 and last row; the footer locates the filter and the index and carries their
//! CRCs, counts, the format version and magic.
//!
//! # Invariants
//! 1. Entries are written in [`crate::key::cmp_entries`] order; blocks never overlap.
//! 2. A segment file is complete (fsynced, renamed into place) before any manifest names it and
//!    is never modified afterwards, so mapping it is sound.
//! 3. Every block's CRC is checked before any of its bytes are decoded (once per process and
//!    file: a verified block is remembered, for every name of the file, [`Segment::open`]), the
//!    index CRC and footer CRC at the file's first open. Every length read
//!    from the file is bounds-checked: a damaged segment gives `Error::Corruption`, never a
//!    panic. A segment the store writes is read back whole ([`Segment::check_blocks`]) before
//!    any manifest names it, on the thread that wrote it.
//! 4. This build writes format version [`FORMAT_VERSION`] (a blocked row filter) and reads it
//!    and version 1 (a legacy row filter); header, footer and filter kind must agree, or the
//!    segment is `Error::Corruption`.

use crate::codec::FORMAT_VERSION;
use crate::error::{Error, Result};
use crate::fs::{FileBytes, FileIdentity, FileSystem, WritableFile};
use crate::key::{Entry, Kind};
use crate::merge::EntrySource;
use crate::row_filter::RowFilter;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Target size of a data block.
pub(crate) const BLOCK_SIZE: usize = 16 << 10;
/// File header: magic + format version.
pub(crate) const SEGMENT_MAGIC: [u8; 7] = *b"KURASEG";
const HEADER_LEN: usize = 8;
const FOOTER_LEN: usize = 64;
const ENTRY_HEADER: usize = 31;
/// The 16th entry after a block's last restart point is one too (its offset remembered for
/// binary search).
const RESTART_INTERVAL: usize = 16;
/// An entry this many bytes or more past the last remembered one is remembered too: a seek's
/// walk from a restart point then reads at most about this much of a block (two entries of
/// rows of 1 KB values; at 1 KB, twice the memory and no faster GET after a 4 GB load).
const RESTART_BYTES: usize = 2048;
/// Write to the file in chunks of this size.
const WRITE_CHUNK: usize = 1 << 20;
/// Paces a background segment write (a flush or a compaction run by the region's owner) to at
/// most `bytes_per_sec`, as RocksDB's rate limiter does: the write then takes the disk a little
/// at a time instead of queueing the log's fsyncs behind tens of megabytes. Pacing stops once
/// `hurry` is set (the store needs the flush finished: its next memtable is filling up).
#[derive(Clone, Debug)]
pub(crate) struct Pace {
    pub bytes_per_sec: u64,
    pub hurry: Arc<AtomicBool>,
}

/// Sync the file every this many bytes while writing it (RocksDB's `bytes_per_sync`): the
/// kernel then writes a large segment back steadily instead of all at the final fsync, which
/// would queue every log fsync made meanwhile behind tens of megabytes.
const SYNC_EVERY: u64 = 1 << 20;

/// The oldest segment format still read: version 1, whose row filter is a
/// [`crate::row_filter::LegacyBloom`]. Version 2 ([`FORMAT_VERSION`]) holds a
/// [`crate::row_filter::BlockedBloom`].
const OLDEST_READ_VERSION: u8 = 1;

fn header(version: u8) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..7].copy_from_slice(&SEGMENT_MAGIC);
    h[7] = version;
    h
}

/// Whether a segment of format `version` may hold `filter` (each version has one kind).
fn filter_fits_version(filter: &RowFilter, version: u8) -> bool {
    matches!(
        (filter, version),
        (RowFilter::Legacy(_), OLDEST_READ_VERSION) | (RowFilter::Blocked(_), FORMAT_VERSION)
    )
}

/// Encode one entry (format: FORMAT.md "segment entry").
pub(crate) fn encode_entry(e: &Entry<'_>, out: &mut Vec<u8>) {
    let q = e.qualifier.unwrap_or(&[]);
    out.extend_from_slice(&(e.row.len() as u32).to_le_bytes());
    out.extend_from_slice(&(e.family.len() as u16).to_le_bytes());
    out.push(e.kind as u8);
    out.extend_from_slice(&(q.len() as u32).to_le_bytes());
    out.extend_from_slice(&e.ts.to_le_bytes());
    out.extend_from_slice(&e.seq.to_le_bytes());
    out.extend_from_slice(&(e.value.len() as u32).to_le_bytes());
    out.extend_from_slice(e.row);
    out.extend_from_slice(e.family);
    out.extend_from_slice(q);
    out.extend_from_slice(e.value);
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
}

/// Decode the entry at `pos` of `block`; returns it and the position after it. `None` if the
/// bytes do not hold a well-formed entry.
fn decode_entry(block: &[u8], pos: usize) -> Option<(Entry<'_>, usize)> {
    let h = block.get(pos..pos.checked_add(ENTRY_HEADER)?)?;
    let row_len = u32_at(h, 0)? as usize;
    let fam_len = u16::from_le_bytes([h[4], h[5]]) as usize;
    let kind = Kind::from_u8(h[6])?;
    let q_len = u32_at(h, 7)? as usize;
    let ts = u64_at(h, 11)? as i64;
    let seq = u64_at(h, 19)?;
    let v_len = u32_at(h, 27)? as usize;
    let mut p = pos + ENTRY_HEADER;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = block.get(p..p.checked_add(n)?)?;
        p += n;
        Some(s)
    };
    let row = take(row_len)?;
    let family = take(fam_len)?;
    let q = take(q_len)?;
    let value = take(v_len)?;
    if kind == Kind::DeleteFamily && !q.is_empty() {
        return None;
    }
    let qualifier = if kind == Kind::DeleteFamily {
        None
    } else {
        Some(q)
    };
    Some((
        Entry {
            row,
            family,
            qualifier,
            ts,
            kind,
            seq,
            value,
        },
        p,
    ))
}

/// Figures about a segment, recorded in its footer and the manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SegmentInfo {
    pub entries: u64,
    pub max_seq: u64,
    pub file_bytes: u64,
}

/// A segment's row filter as its rows come: their hashes held until [`SegmentWriter::finish`]
/// sizes the filter by their count (RocksDB's full-filter builders do the same), so a
/// segment's filter is 10 bits per row it holds, not per cell, nor per row of its inputs
/// that a compaction dropped. Past [`HELD_HASHES`] rows (the bytes of the largest filter),
/// the filter is built at once, sized by the writer's upper bound.
enum FilterBuild {
    Held {
        hashes: Vec<u64>,
        /// Held at most (`HELD_HASHES`; tests lower it).
        limit: usize,
        upper_bound: u64,
    },
    Built(RowFilter),
}

/// Row hashes a writer holds before it builds its filter: as many bytes as the largest filter
/// (32 MiB), so that holding them costs no more than the filter would.
const HELD_HASHES: usize = (crate::row_filter::MAX_BYTES / 8) as usize;

/// Writes one segment file. The caller renames it into place after [`SegmentWriter::finish`].
pub(crate) struct SegmentWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    out: Vec<u8>,
    block: Vec<u8>,
    last_row: Vec<u8>,
    index: Vec<u8>,
    block_count: u32,
    offset: u64,
    entries: u64,
    max_seq: u64,
    /// The format version written: [`FORMAT_VERSION`] (tests also write version 1).
    version: u8,
    filter: FilterBuild,
    /// Bytes written since the last sync.
    unsynced: u64,
    /// Bytes written in all.
    written: u64,
    pace: Option<(Pace, Instant)>,
}

impl SegmentWriter {
    /// Create the file. The row filter is sized by the rows written ([`FilterBuild`]), or
    /// by `expected_rows` (an upper bound) past the hashes a writer holds.
    pub(crate) fn create(
        fs: &dyn FileSystem,
        path: &Path,
        expected_rows: u64,
    ) -> Result<SegmentWriter> {
        Self::create_version(fs, path, expected_rows, FORMAT_VERSION)
    }

    /// A writer of format `version`: [`FORMAT_VERSION`], or version 1 (a legacy row filter)
    /// for the tests that check old segments still read.
    fn create_version(
        fs: &dyn FileSystem,
        path: &Path,
        expected_rows: u64,
        version: u8,
    ) -> Result<SegmentWriter> {
        let file = fs.create(path).map_err(|e| Error::io(path, e))?;
        let mut out = Vec::with_capacity(WRITE_CHUNK + BLOCK_SIZE * 2);
        out.extend_from_slice(&header(version));
        Ok(SegmentWriter {
            file,
            path: path.to_path_buf(),
            unsynced: 0,
            written: 0,
            pace: None,
            out,
            block: Vec::with_capacity(BLOCK_SIZE * 2),
            last_row: Vec::new(),
            index: Vec::new(),
            block_count: 0,
            offset: HEADER_LEN as u64,
            entries: 0,
            max_seq: 0,
            version,
            filter: FilterBuild::Held {
                hashes: Vec::new(),
                limit: HELD_HASHES,
                upper_bound: expected_rows,
            },
        })
    }

    /// An empty filter of this writer's version, sized for `rows` rows.
    fn new_filter(&self, rows: u64) -> RowFilter {
        let filter = if self.version == FORMAT_VERSION {
            RowFilter::blocked(rows)
        } else {
            RowFilter::legacy(rows)
        };
        debug_assert!(filter_fits_version(&filter, self.version));
        filter
    }

    /// The filter of `hashes`, sized for `rows` rows (at least their number).
    fn filter_of(&self, hashes: Vec<u64>, rows: u64) -> RowFilter {
        let mut f = self.new_filter(rows.max(hashes.len() as u64));
        hashes.into_iter().for_each(|h| f.insert_hash(h));
        f
    }

    /// Add a row's hash to the filter being made (see [`FilterBuild`]).
    fn filter_row(&mut self, h: u64) {
        match &mut self.filter {
            FilterBuild::Built(f) => f.insert_hash(h),
            FilterBuild::Held { hashes, limit, .. } if hashes.len() < *limit => hashes.push(h),
            FilterBuild::Held {
                hashes,
                upper_bound,
                ..
            } => {
                let (mut hashes, rows) = (std::mem::take(hashes), *upper_bound);
                hashes.push(h);
                self.filter = FilterBuild::Built(self.filter_of(hashes, rows));
            }
        }
    }

    /// Add the next entry (in key order).
    pub(crate) fn add(&mut self, e: &Entry<'_>) -> Result<()> {
        encode_entry(e, &mut self.block);
        if self.last_row.as_slice() != e.row || self.entries == 0 {
            self.filter_row(crate::row_filter::row_hash(e.row));
            self.last_row.clear();
            self.last_row.extend_from_slice(e.row);
        }
        self.entries += 1;
        self.max_seq = self.max_seq.max(e.seq);
        if self.block.len() >= BLOCK_SIZE {
            self.end_block()?;
        }
        Ok(())
    }

    /// Pace the rest of this write (see [`Pace`]).
    pub(crate) fn set_pace(&mut self, pace: Pace) {
        self.pace = Some((pace, Instant::now()));
    }

    pub(crate) fn entries(&self) -> u64 {
        self.entries
    }

    fn end_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let crc = crc32fast::hash(&self.block);
        self.index.extend_from_slice(&self.offset.to_le_bytes());
        self.index
            .extend_from_slice(&(self.block.len() as u32).to_le_bytes());
        self.index.extend_from_slice(&crc.to_le_bytes());
        self.index
            .extend_from_slice(&(self.last_row.len() as u32).to_le_bytes());
        self.index.extend_from_slice(&self.last_row);
        self.offset += self.block.len() as u64;
        self.block_count += 1;
        self.out.extend_from_slice(&self.block);
        self.block.clear();
        if self.out.len() >= WRITE_CHUNK {
            self.write_out()?;
        }
        Ok(())
    }

    fn write_out(&mut self) -> Result<()> {
        self.file
            .write_all(&self.out)
            .map_err(|e| Error::io(&self.path, e))?;
        self.unsynced += self.out.len() as u64;
        self.written += self.out.len() as u64;
        self.out.clear();
        if self.unsynced >= SYNC_EVERY {
            self.file.sync().map_err(|e| Error::io(&self.path, e))?;
            self.unsynced = 0;
        }
        if let Some((pace, started)) = &self.pace {
            if pace.bytes_per_sec > 0 && !pace.hurry.load(Ordering::Relaxed) {
                let due = Duration::from_secs_f64(self.written as f64 / pace.bytes_per_sec as f64);
                if let Some(ahead) = due.checked_sub(started.elapsed()) {
                    // In short naps, so that `hurry` is seen soon.
                    std::thread::sleep(ahead.min(Duration::from_millis(50)));
                }
            }
        }
        Ok(())
    }

    /// Write the last block, the index and the footer, and fsync the file.
    pub(crate) fn finish(mut self) -> Result<SegmentInfo> {
        self.end_block()?;
        let filter = match &mut self.filter {
            FilterBuild::Built(f) => f.to_bytes(),
            FilterBuild::Held { hashes, .. } => {
                let hashes = std::mem::take(hashes);
                self.filter_of(hashes, 0).to_bytes()
            }
        };
        let filter_crc = crc32fast::hash(&filter);
        self.out.extend_from_slice(&filter);
        let index_offset = self.offset + filter.len() as u64;
        let index = std::mem::take(&mut self.index);
        let index_crc = crc32fast::hash(&index);
        self.out.extend_from_slice(&index);
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        footer.extend_from_slice(&index_offset.to_le_bytes());
        footer.extend_from_slice(&(index.len() as u64).to_le_bytes());
        footer.extend_from_slice(&index_crc.to_le_bytes());
        footer.extend_from_slice(&self.block_count.to_le_bytes());
        footer.extend_from_slice(&self.entries.to_le_bytes());
        footer.extend_from_slice(&self.max_seq.to_le_bytes());
        footer.extend_from_slice(&(filter.len() as u32).to_le_bytes());
        footer.extend_from_slice(&filter_crc.to_le_bytes());
        let footer_crc = crc32fast::hash(&footer);
        footer.extend_from_slice(&footer_crc.to_le_bytes());
        footer.extend_from_slice(&(self.version as u32).to_le_bytes());
        footer.extend_from_slice(&header(self.version));
        debug_assert_eq!(footer.len(), FOOTER_LEN);
        self.out.extend_from_slice(&footer);
        let file_bytes = index_offset + index.len() as u64 + FOOTER_LEN as u64;
        self.write_out()?;
        self.file.sync().map_err(|e| Error::io(&self.path, e))?;
        Ok(SegmentInfo {
            entries: self.entries,
            max_seq: self.max_seq,
            file_bytes,
        })
    }
}

/// Where a block is, its CRC, and where its last row lies in the mapped index: the handles
/// of a segment sit in one array and their rows stay in the file, so a binary search over
/// them touches contiguous memory and the index costs no allocation per block.
#[derive(Debug)]
struct BlockHandle {
    offset: usize,
    len: usize,
    crc: u32,
    /// The block's last row: `row_len` bytes at `row_at` in the file.
    row_len: u32,
    row_at: usize,
}

/// The blocks' last rows (ascending) as 8-byte keys: the bytes that follow the prefix all
/// of them share, big-endian, zero-padded. A binary search over these keys touches one small
/// array instead of a block handle and a row in the file per step; the full rows are compared
/// only where keys are equal.
///
/// # Invariants
/// 1. Every last row starts with `shared` (the first and the last do, and the rows between
///    them sort between them).
/// 2. `key(a) < key(b)` implies `a < b` for any rows starting with `shared`: zero padding
///    never puts a shorter row after a longer one that begins with it. Equal keys say nothing.
/// 3. `fences[i]` is the last key of the run `keys[i * FENCE..]` (`FENCE` keys, the last run
///    fewer). A search halves `fences` first, then one run: its steps read a small array that
///    stays in the CPU's caches and a few lines of `keys`, where halving a segment's whole
///    `keys` missed the cache at most of its ~17 dependent steps (95% of the time of
///    [`Segment::blocks_before`] in a profile of GETs after a 4 GB load).
#[derive(Debug, Default)]
struct LastRowIndex {
    shared: Box<[u8]>,
    keys: Box<[u64]>,
    fences: Box<[u64]>,
}

/// Keys per run of [`LastRowIndex::keys`] behind one fence: 512 bytes, eight cache lines.
const FENCE: usize = 64;

impl LastRowIndex {
    fn new<'a>(rows: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> LastRowIndex {
        let (Some(first), Some(last)) = (rows.clone().next(), rows.clone().last()) else {
            return LastRowIndex::default();
        };
        let shared_len = shared_prefix(first, last);
        let shared: Box<[u8]> = first[..shared_len].into();
        let keys: Box<[u64]> = rows
            .map(|r| Self::key(&r[shared_len.min(r.len())..]))
            .collect();
        let fences = Self::fences(&keys);
        LastRowIndex {
            shared,
            keys,
            fences,
        }
    }

    fn fences(keys: &[u64]) -> Box<[u64]> {
        keys.chunks(FENCE)
            .filter_map(|run| run.last().copied())
            .collect()
    }

    /// The number of keys below `k`: the run of the first fence not below it, then that run.
    fn keys_below(&self, k: u64) -> usize {
        let run = self.fences.partition_point(|&f| f < k);
        let start = run * FENCE;
        let end = (start + FENCE).min(self.keys.len());
        match self.keys.get(start..end) {
            Some(keys) => start + keys.partition_point(|&x| x < k),
            None => self.keys.len(),
        }
    }

    /// The first 8 bytes of `rest`, big-endian, zero-padded.
    fn key(rest: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        let n = rest.len().min(8);
        b[..n].copy_from_slice(&rest[..n]);
        u64::from_be_bytes(b)
    }

    /// The blocks `lo..hi` whose last rows must be compared with `row` in full: every block
    /// before `lo` ends below `row`, every block from `hi` on ends above it.
    fn candidates(&self, row: &[u8]) -> (usize, usize) {
        let n = self.keys.len();
        let head = &row[..self.shared.len().min(row.len())];
        match head.cmp(&self.shared) {
            // `row` is below every last row (a shorter head is a prefix of `shared`).
            std::cmp::Ordering::Less => return (0, 0),
            std::cmp::Ordering::Greater => return (n, n),
            std::cmp::Ordering::Equal => {}
        }
        let k = Self::key(&row[self.shared.len()..]);
        let lo = self.keys_below(k);
        // The run of keys equal to `k` is short (usually none, or one block): galloping from
        // `lo` reads the keys next to it instead of halving the whole tail.
        let tail = &self.keys[lo..];
        let mut step = 1;
        while step < tail.len() && tail[step - 1] == k {
            step *= 2;
        }
        let window = &tail[step / 2..step.min(tail.len())];
        let hi = lo + step / 2 + window.partition_point(|&x| x == k);
        (lo, hi)
    }
}

/// The length of the prefix `a` and `b` begin with.
fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A block's restart points, found at its first use: the offsets of its first entry, of the
/// `RESTART_INTERVAL`-th entry after each restart point and of every entry `RESTART_BYTES`
/// past the last one, and with each a 4-byte key of
/// its row, so that a seek picks its restart point from this array instead of reading entries
/// of the block to choose: after a 4 GB load, a GET's seek spent 12% of the server's samples
/// loading entry headers from memory one after the other, the block's first entry (the only
/// restart point of a block of 1 KB values) and the walk from it.
///
/// # Invariants
/// 1. `points` holds the offsets (ascending), then the keys in the same order.
/// 2. Every row of the block, and every row a seek looks for in it, begins with the `shared`
///    bytes the last rows of the block before it and of the block itself begin with (it sorts
///    between those two; the first block has no bytes shared). A row's key is the 4 bytes that
///    follow, big-endian, zero-padded.
/// 3. For two such rows, `key(a) < key(b)` implies `a < b` (as [`LastRowIndex`]'s keys);
///    equal keys say nothing, and the rows are compared in full.
#[derive(Debug)]
struct Restarts {
    points: Box<[u32]>,
    shared: u32,
}

impl Restarts {
    fn offsets(&self) -> &[u32] {
        &self.points[..self.points.len() / 2]
    }

    fn key(row: &[u8], shared: usize) -> u32 {
        // The first 4 of the 8 bytes [`LastRowIndex`] keys rows by.
        (LastRowIndex::key(row.get(shared..).unwrap_or_default()) >> 32) as u32
    }

    /// How many restart points hold a row below `row` (invariant 2 must hold for `row`): those
    /// whose keys are below its key, then, among those whose keys equal it (rows that share
    /// more than 4 bytes past `shared`: URLs, composite keys), a binary search by whole rows.
    fn below(&self, data: &[u8], row: &[u8]) -> usize {
        let (offsets, keys) = self.points.split_at(self.points.len() / 2);
        let k = Self::key(row, self.shared as usize);
        let lo = keys.partition_point(|&x| x < k);
        let tied = keys[lo..].partition_point(|&x| x == k);
        lo + offsets[lo..lo + tied]
            .partition_point(|&o| decode_entry(data, o as usize).is_some_and(|(e, _)| e.row < row))
    }
}

/// An open, immutable segment: one name of a segment file, and what was read from the file.
pub(crate) struct Segment {
    pub id: u64,
    path: PathBuf,
    file: Arc<SegmentFile>,
}

/// What is read from a segment file, shared by every [`Segment`] of the same file (its names
/// in the stores a split made: hard links, see [`Segment::open`]): the map, the index, the row
/// filter and the blocks checked so far. A daughter region then finds its parent's blocks
/// checked, and the process holds one index and one filter per file, not one per name.
struct SegmentFile {
    bytes: Arc<dyn FileBytes>,
    blocks: Vec<BlockHandle>,
    /// The blocks' last rows in a form a binary search reads from one small array.
    last_rows: LastRowIndex,
    /// Per block, once used: its restart points.
    restarts: Vec<OnceLock<Restarts>>,
    filter: RowFilter,
    info: SegmentInfo,
}

/// The segment files open in this process, by identity ([`FileSystem::identity`]), so that a
/// second name of a file opens what the first read. An entry's file is alive while any
/// `Segment` holds it, and a live map keeps its inode from being reused, so an identity found
/// here with a live file is that file; dead entries are dropped when the next file is read.
static OPEN_FILES: LazyLock<Mutex<HashMap<FileIdentity, Weak<SegmentFile>>>> =
    LazyLock::new(Default::default);

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("id", &self.id)
            .field("info", self.info())
            .finish()
    }
}

/// Blocks [`Segment::owned_share`] looks at, at most.
const SHARE_SAMPLES: usize = 1024;

impl Segment {
    /// An estimate of the share of this segment's data bytes that lie in rows `owns` accepts,
    /// from the index alone (no block is read): the blocks whose last row is owned, weighted
    /// by their length, over at most [`SHARE_SAMPLES`] blocks spread evenly through the file.
    /// Rows are given to regions by a hash of their key, so a block's last row stands for
    /// the block: the estimate is unbiased, within a few percent once a segment has a
    /// thousand blocks (4 MB). 1.0 for a segment without blocks.
    pub(crate) fn owned_share(&self, owns: &dyn Fn(&[u8]) -> bool) -> f64 {
        let step = self.file.blocks.len().div_ceil(SHARE_SAMPLES).max(1);
        let (mut owned, mut all) = (0u64, 0u64);
        for i in (0..self.file.blocks.len()).step_by(step) {
            let len = self.file.blocks[i].len as u64;
            all += len;
            if owns(self.last_row(i)) {
                owned += len;
            }
        }
        if all == 0 {
            1.0
        } else {
            owned as f64 / all as f64
        }
    }

    /// Open the segment file at `path` as segment `id`: what an open name of the same file
    /// read already (its identity and length the same), else the file mapped and checked
    /// ([`SegmentFile::read`]).
    pub(crate) fn open(fs: &dyn FileSystem, path: &Path, id: u64) -> Result<Segment> {
        let identity = fs.identity(path).map_err(|e| Error::io(path, e))?;
        let open = identity.and_then(|i| OPEN_FILES.lock().get(&i).and_then(Weak::upgrade));
        let file = match open {
            Some(f) if fs.len(path).is_ok_and(|n| n == f.info.file_bytes) => f,
            _ => {
                let f = Arc::new(SegmentFile::read(fs, path)?);
                if let Some(i) = identity {
                    let mut files = OPEN_FILES.lock();
                    files.retain(|_, f| f.strong_count() > 0);
                    files.insert(i, Arc::downgrade(&f));
                }
                f
            }
        };
        Ok(Segment {
            id,
            path: path.to_path_buf(),
            file,
        })
    }

    /// Whether `self` and `other` share what was read from their file (one file, two names).
    #[cfg(test)]
    pub(crate) fn shares_file_with(&self, other: &Segment) -> bool {
        Arc::ptr_eq(&self.file, &other.file)
    }
}

impl SegmentFile {
    /// Map and check a segment file: header, footer, index CRC and index bounds.
    fn read(fs: &dyn FileSystem, path: &Path) -> Result<SegmentFile> {
        let bytes = fs.map(path).map_err(|e| Error::io(path, e))?;
        let corrupt = |offset: usize, reason: &str| Error::Corruption {
            file: path.to_path_buf(),
            offset: offset as u64,
            reason: reason.to_string(),
        };
        let b = bytes.bytes();
        if b.len() < HEADER_LEN + FOOTER_LEN {
            return Err(corrupt(0, "segment shorter than header and footer"));
        }
        // The versions read; the footer must repeat the header's (one flipped bit never
        // turns a file of one version into a well-formed file of the other).
        let version = b[7];
        if !(OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version)
            || b[..HEADER_LEN] != header(version)
        {
            return Err(corrupt(0, "bad segment magic or version"));
        }
        let f_at = b.len() - FOOTER_LEN;
        let footer = &b[f_at..];
        if footer[56..64] != header(version) || u32_at(footer, 52) != Some(version as u32) {
            return Err(corrupt(f_at + 56, "bad footer magic or version"));
        }
        let stored_crc = u32_at(footer, 48).unwrap_or(0);
        if crc32fast::hash(&footer[..48]) != stored_crc {
            return Err(corrupt(f_at, "footer checksum mismatch"));
        }
        let index_offset = u64_at(footer, 0).unwrap_or(u64::MAX) as usize;
        let index_len = u64_at(footer, 8).unwrap_or(u64::MAX) as usize;
        let index_crc = u32_at(footer, 16).unwrap_or(0);
        let block_count = u32_at(footer, 20).unwrap_or(0) as usize;
        let entries = u64_at(footer, 24).unwrap_or(0);
        let max_seq = u64_at(footer, 32).unwrap_or(0);
        let filter_len = u32_at(footer, 40).unwrap_or(0) as usize;
        let filter_crc = u32_at(footer, 44).unwrap_or(0);
        let index_end = index_offset.saturating_add(index_len);
        let filter_at = index_offset.saturating_sub(filter_len);
        if filter_at < HEADER_LEN || index_end != f_at {
            return Err(corrupt(
                f_at,
                "index bounds do not match the footer position",
            ));
        }
        let index = &b[index_offset..index_end];
        if crc32fast::hash(index) != index_crc {
            return Err(corrupt(index_offset, "index checksum mismatch"));
        }
        let mut blocks = Vec::with_capacity(block_count.min(index.len() / 20));
        let mut p = 0usize;
        let mut expect_offset = HEADER_LEN;
        for _ in 0..block_count {
            let bad = || corrupt(index_offset + p, "malformed index entry");
            let offset = u64_at(index, p).ok_or_else(bad)? as usize;
            let len = u32_at(index, p + 8).ok_or_else(bad)? as usize;
            let crc = u32_at(index, p + 12).ok_or_else(bad)?;
            let row_len = u32_at(index, p + 16).ok_or_else(bad)? as usize;
            let row_end = (p + 20).checked_add(row_len).ok_or_else(bad)?;
            index.get(p + 20..row_end).ok_or_else(bad)?;
            if offset != expect_offset || len == 0 || offset + len > filter_at {
                return Err(bad());
            }
            expect_offset = offset + len;
            blocks.push(BlockHandle {
                offset,
                len,
                crc,
                row_len: row_len as u32,
                row_at: index_offset + p + 20,
            });
            p = row_end;
        }
        if p != index.len() || expect_offset != filter_at {
            return Err(corrupt(
                index_offset + p,
                "index does not cover the data blocks",
            ));
        }
        let filter = &b[filter_at..index_offset];
        if crc32fast::hash(filter) != filter_crc {
            return Err(corrupt(filter_at, "row filter checksum mismatch"));
        }
        let filter = RowFilter::from_bytes(filter)
            .filter(|f| filter_fits_version(f, version))
            .ok_or_else(|| corrupt(filter_at, "malformed row filter"))?;
        let restarts = (0..blocks.len()).map(|_| OnceLock::new()).collect();
        let last_rows = LastRowIndex::new(
            blocks
                .iter()
                .map(|h| &b[h.row_at..h.row_at + h.row_len as usize]),
        );
        let info = SegmentInfo {
            entries,
            max_seq,
            file_bytes: b.len() as u64,
        };
        Ok(SegmentFile {
            bytes,
            blocks,
            last_rows,
            restarts,
            filter,
            info,
        })
    }
}

impl Segment {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The figures of the segment's file (its footer's).
    pub(crate) fn info(&self) -> &SegmentInfo {
        &self.file.info
    }

    /// The last row of block `i` (bounds checked at open).
    fn last_row(&self, i: usize) -> &[u8] {
        let h = &self.file.blocks[i];
        &self.file.bytes.bytes()[h.row_at..h.row_at + h.row_len as usize]
    }

    /// The number of blocks whose last row is below `row` (`or_equal`: not above it).
    ///
    /// A binary search over the blocks' 8-byte keys ([`LastRowIndex`]) first; only the blocks
    /// whose key equals the row's are compared in full, in the file.
    fn blocks_before(&self, row: &[u8], or_equal: bool) -> usize {
        let before = |last: &[u8]| if or_equal { last <= row } else { last < row };
        let (lo, hi) = self.file.last_rows.candidates(row);
        let bytes = self.file.bytes.bytes();
        lo + self.file.blocks[lo..hi]
            .partition_point(|h| before(&bytes[h.row_at..h.row_at + h.row_len as usize]))
    }

    /// Check every block now, as its first read would (CRC, then its entries parsed for the
    /// restart points, which are kept). Run on a segment just written, by the task that wrote
    /// it: the file is verified as read back before it is installed (a write-path error is
    /// then the task's error, not a later read's), and the reads that come after find the
    /// blocks checked. Right after a 4 GB load, the first reads of fresh blocks were 7–9% of
    /// the request threads' samples, memory-bound: each touched a whole 16 KB block twice.
    pub(crate) fn check_blocks(&self) -> Result<()> {
        (0..self.file.blocks.len()).try_for_each(|i| self.block(i).map(|_| ()))
    }

    /// Blocks checked so far, of all the segment's blocks.
    #[cfg(test)]
    pub(crate) fn checked_blocks(&self) -> (usize, usize) {
        let checked = self
            .file
            .restarts
            .iter()
            .filter(|r| r.get().is_some())
            .count();
        (checked, self.file.blocks.len())
    }

    /// The bytes of block `i` and its restart points, CRC-checked and fully parsed on first
    /// use (then remembered, so a malformed entry is found before any is returned).
    fn block(&self, i: usize) -> Result<(&[u8], &Restarts)> {
        let h = &self.file.blocks[i];
        let data = &self.file.bytes.bytes()[h.offset..h.offset + h.len];
        if let Some(r) = self.file.restarts[i].get() {
            return Ok((data, r));
        }
        if crc32fast::hash(data) != h.crc {
            return Err(Error::Corruption {
                file: self.path.clone(),
                offset: h.offset as u64,
                reason: format!("block {i} checksum mismatch"),
            });
        }
        // The restart keys trust the index's last rows to bound the block's (invariant 2):
        // rows ascend from the block before's last row to this block's.
        let mut prev_row = i.checked_sub(1).map(|b| self.last_row(b));
        let shared = prev_row.map_or(0, |before| shared_prefix(before, self.last_row(i)));
        let (mut offsets, mut keys) = (Vec::new(), Vec::new());
        let (mut pos, mut since) = (0usize, 0usize);
        while pos < data.len() {
            let (e, next) = decode_entry(data, pos).ok_or_else(|| self.bad_entry(i, pos))?;
            if prev_row.is_some_and(|r| e.row < r) {
                return Err(Error::Corruption {
                    file: self.path.clone(),
                    offset: (h.offset + pos) as u64,
                    reason: format!("block {i}: a row sorts before the row ahead of it"),
                });
            }
            prev_row = Some(e.row);
            let last = offsets.last().map_or(0, |&o| o as usize);
            if offsets.is_empty() || since == RESTART_INTERVAL || pos - last >= RESTART_BYTES {
                offsets.push(pos as u32);
                keys.push(Restarts::key(e.row, shared));
                since = 0;
            }
            since += 1;
            pos = next;
        }
        if prev_row != Some(self.last_row(i)) {
            return Err(Error::Corruption {
                file: self.path.clone(),
                offset: h.offset as u64,
                reason: format!("block {i} does not end with the last row its index names"),
            });
        }
        offsets.extend(keys);
        let r = self.file.restarts[i].get_or_init(|| Restarts {
            points: offsets.into_boxed_slice(),
            shared: shared as u32,
        });
        Ok((data, r))
    }

    /// Position of the first entry of block `i` whose row is `>= row`, by a binary search over
    /// the restart points' keys, then a short walk from the last one below `row`; also the row
    /// of the entry before it. `row` must sort after the last row of the block before `i` and
    /// not after block `i`'s (as [`Segment::blocks_before`] finds `i`).
    fn seek_in_block(&self, i: usize, row: &[u8]) -> Result<BlockSeek<'_>> {
        let (data, restarts) = self.block(i)?;
        let p = restarts.below(data, row);
        let mut pos = match p.checked_sub(1) {
            None => 0,
            Some(r) => restarts.offsets()[r] as usize,
        };
        let mut before = None;
        while pos < data.len() {
            let (e, next) = decode_entry(data, pos).ok_or_else(|| self.bad_entry(i, pos))?;
            if e.row >= row {
                break;
            }
            before = Some(e.row);
            pos = next;
        }
        Ok(BlockSeek { data, pos, before })
    }

    fn bad_entry(&self, block: usize, pos: usize) -> Error {
        Error::Corruption {
            file: self.path.clone(),
            offset: (self.file.blocks[block].offset + pos) as u64,
            reason: "malformed entry".to_string(),
        }
    }

    /// False if the segment certainly holds no entry of `row` (its row filter says so).
    pub(crate) fn may_contain_row(&self, row: &[u8]) -> bool {
        self.file.filter.may_contain(row)
    }

    /// [`Segment::may_contain_row`] for a row whose [`crate::row_filter::row_hash`] is `h`.
    #[inline]
    pub(crate) fn may_contain_hash(&self, h: u64) -> bool {
        self.file.filter.may_contain_hash(h)
    }

    /// Whether the segment holds a version delete marker (`Kind::DeleteVersion`) of the column
    /// `(row, family, qualifier)`. Jumps over the row's other columns; walks only this one.
    pub(crate) fn has_version_marker(
        &self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
    ) -> Result<bool> {
        if !self.may_contain_row(row) {
            return Ok(false);
        }
        let mut src = self.iter_from(Some(row))?;
        let mut next = src.next_entry()?;
        while let Some(e) = next {
            if e.row != row {
                break;
            }
            next = match (e.family, e.qualifier).cmp(&(family, Some(qualifier))) {
                std::cmp::Ordering::Less => match e.qualifier {
                    Some(_) => src.skip_column(e.row, e.family, e.qualifier)?,
                    None => src.next_entry()?,
                },
                std::cmp::Ordering::Equal if e.kind == Kind::DeleteVersion => return Ok(true),
                std::cmp::Ordering::Equal => src.next_entry()?,
                std::cmp::Ordering::Greater => break,
            };
        }
        Ok(false)
    }

    /// Entries from the first one of `row` on (`None` = from the start).
    pub(crate) fn iter_from(&self, row: Option<&[u8]>) -> Result<SegmentSource<'_>> {
        let start = match row {
            None => 0,
            Some(r) => self.blocks_before(r, false),
        };
        let mut src = SegmentSource {
            seg: self,
            block: start,
            data: &[],
            pos: 0,
        };
        if start < self.file.blocks.len() {
            match row {
                Some(r) => {
                    let seek = self.seek_in_block(start, r)?;
                    src.data = seek.data;
                    src.pos = seek.pos;
                }
                None => src.data = self.block(start)?.0,
            }
        }
        Ok(src)
    }

    /// The greatest row strictly below `row` (`None`: the greatest row of the segment).
    pub(crate) fn last_row_before(&self, row: Option<&[u8]>) -> Result<Option<&[u8]>> {
        let Some(r) = row else {
            return Ok(self
                .file
                .blocks
                .len()
                .checked_sub(1)
                .map(|i| self.last_row(i)));
        };
        let b = self.blocks_before(r, false);
        if b < self.file.blocks.len() {
            if let Some(found) = self.seek_in_block(b, r)?.before {
                return Ok(Some(found));
            }
        }
        Ok(if b > 0 {
            Some(self.last_row(b - 1))
        } else {
            None
        })
    }
}

/// Where a seek inside one block landed.
struct BlockSeek<'a> {
    data: &'a [u8],
    /// Offset of the first entry whose row is `>=` the wanted one (or the block's length).
    pos: usize,
    /// Row of the entry just before `pos`, if any.
    before: Option<&'a [u8]>,
}

/// A segment range as an entry source.
pub(crate) struct SegmentSource<'a> {
    seg: &'a Segment,
    block: usize,
    data: &'a [u8],
    pos: usize,
}

/// Whether `e` sorts after every entry of the column `(row, family, qualifier)`.
fn past_column(e: &Entry<'_>, row: &[u8], family: &[u8], qualifier: Option<&[u8]>) -> bool {
    (e.row, e.family, e.qualifier) > (row, family, qualifier)
}

/// Entries a skip walks before it seeks: few versions are cheaper to step over than to seek past.
const SKIP_WALK: usize = 2 * RESTART_INTERVAL;

impl<'a> SegmentSource<'a> {
    /// The first entry of block `i`.
    fn first_entry(&self, i: usize) -> Result<Entry<'a>> {
        let seg: &'a Segment = self.seg;
        let (data, _) = seg.block(i)?;
        decode_entry(data, 0)
            .map(|(e, _)| e)
            .ok_or_else(|| seg.bad_entry(i, 0))
    }
}

impl<'a> EntrySource<'a> for SegmentSource<'a> {
    /// Steps over a short column; seeks past a long one (a counter's thousands of versions)
    /// through the block index and the restart points, so its cost does not grow with them.
    fn skip_column(
        &mut self,
        row: &[u8],
        family: &[u8],
        qualifier: Option<&[u8]>,
    ) -> Result<Option<Entry<'a>>> {
        for _ in 0..SKIP_WALK {
            match self.next_entry()? {
                Some(e) if !past_column(&e, row, family, qualifier) => {}
                other => return Ok(other),
            }
        }
        let seg: &'a Segment = self.seg;
        if self.block >= seg.file.blocks.len() {
            return Ok(None);
        }
        // The column ends in the last block whose first entry is still inside it (blocks past
        // the ones that end at `row` start after the column).
        let end = seg.blocks_before(row, true);
        let end = (end + 1).min(seg.file.blocks.len());
        let mut lo = self.block + 1;
        let mut hi = end.max(lo);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if past_column(&self.first_entry(mid)?, row, family, qualifier) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let block = lo - 1;
        let (data, restarts) = seg.block(block)?;
        let restarts = restarts.offsets();
        let p = restarts.partition_point(|&pos| {
            decode_entry(data, pos as usize)
                .is_some_and(|(e, _)| !past_column(&e, row, family, qualifier))
        });
        let mut pos = if p == 0 { 0 } else { restarts[p - 1] as usize };
        if block == self.block {
            pos = pos.max(self.pos);
        }
        self.block = block;
        self.data = data;
        while pos < data.len() {
            let (e, next) = decode_entry(data, pos).ok_or_else(|| seg.bad_entry(block, pos))?;
            if past_column(&e, row, family, qualifier) {
                break;
            }
            pos = next;
        }
        self.pos = pos;
        self.next_entry()
    }

    fn next_entry(&mut self) -> Result<Option<Entry<'a>>> {
        loop {
            if self.block >= self.seg.file.blocks.len() {
                return Ok(None);
            }
            if self.pos < self.data.len() {
                let (e, next) = decode_entry(self.data, self.pos)
                    .ok_or_else(|| self.seg.bad_entry(self.block, self.pos))?;
                self.pos = next;
                return Ok(Some(e));
            }
            self.block += 1;
            self.pos = 0;
            if self.block < self.seg.file.blocks.len() {
                self.data = self.seg.block(self.block)?.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::SimFs;

    fn put(row: &'static [u8], seq: u64, value: &'static [u8]) -> Entry<'static> {
        Entry {
            row,
            family: b"f",
            qualifier: Some(b"q"),
            ts: 5,
            kind: Kind::Put,
            seq,
            value,
        }
    }

    proptest::proptest! {
        /// The 8-byte keys never misplace a row: the blocks before `lo` end below it, those
        /// from `hi` end above it, whatever the rows' lengths, shared prefixes and zero bytes.
        #[test]
        fn the_last_row_keys_bound_the_blocks_a_row_lies_between(
            shared in proptest::collection::vec(0u8..3, 0..12),
            tails in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..12), 1..40),
            probes in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..24), 1..40),
        ) {
            let mut rows: Vec<Vec<u8>> =
                tails.iter().map(|t| [shared.as_slice(), t].concat()).collect();
            rows.sort();
            let index = LastRowIndex::new(rows.iter().map(|r| r.as_slice()));
            let with_shared = probes.iter().map(|p| [shared.as_slice(), p].concat());
            for probe in probes.iter().cloned().chain(with_shared) {
                let (lo, hi) = index.candidates(&probe);
                proptest::prop_assert!(lo <= hi && hi <= rows.len());
                proptest::prop_assert!(rows[..lo].iter().all(|r| *r < probe), "{probe:?}");
                proptest::prop_assert!(rows[hi..].iter().all(|r| *r > probe), "{probe:?}");
            }
        }
    }

    proptest::proptest! {
        /// Sorted keys with long runs of equal ones, over a few hundred blocks (several runs
        /// behind fences, the last one short).
        #[test]
        fn a_search_through_the_fences_counts_the_keys_below_as_a_plain_search(
            mut keys in proptest::collection::vec(0u64..50, 0..400),
            probes in proptest::collection::vec(0u64..52, 1..20),
        ) {
            keys.sort();
            let index = LastRowIndex {
                fences: LastRowIndex::fences(&keys),
                keys: keys.clone().into_boxed_slice(),
                shared: Box::default(),
            };
            for k in probes {
                proptest::prop_assert_eq!(index.keys_below(k), keys.partition_point(|&x| x < k), "{}", k);
            }
        }
    }

    proptest::proptest! {
        /// A seek through the restart points' keys finds the first row not below the one asked
        /// for and the greatest row below it, as a search of the sorted rows does: rows that
        /// share long prefixes (keys that tie), rows whose cells span blocks, values small and
        /// large (restart points by count and by bytes), rows asked for present or not.
        #[test]
        fn a_seek_finds_the_rows_around_any_row_as_a_sorted_search_does(
            shared in proptest::collection::vec(0u8..3, 0..8),
            tails in proptest::collection::btree_set(
                proptest::collection::vec(0u8..3, 0..10),
                1..120,
            ),
            sizes in proptest::collection::vec(0usize..3000, 1..16),
            cells in proptest::collection::vec(1u8..4, 1..16),
            probes in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..12), 1..30),
        ) {
            let rows: Vec<Vec<u8>> =
                tails.iter().map(|t| [shared.as_slice(), t].concat()).collect();
            let fs = SimFs::new();
            let path = Path::new("/s/1.seg");
            let mut w = SegmentWriter::create(&fs, path, 10).unwrap();
            let mut seq = 0u64;
            for (i, row) in rows.iter().enumerate() {
                for q in 0..cells[i % cells.len()] {
                    let value = vec![q; sizes[(i + q as usize) % sizes.len()]];
                    seq += 1;
                    let e = Entry {
                        row,
                        qualifier: Some(&[q]),
                        value: &value,
                        ..put(b"", seq, b"")
                    };
                    w.add(&e).unwrap();
                }
            }
            w.finish().unwrap();
            let seg = Segment::open(&fs, path, 1).unwrap();
            let with_shared = probes.iter().map(|p| [shared.as_slice(), p].concat());
            let all = probes.iter().cloned().chain(with_shared).chain(rows.iter().cloned());
            for probe in all {
                let at = rows.partition_point(|r| *r < probe);
                let first = seg.iter_from(Some(&probe)).unwrap().next_entry().unwrap();
                let first = first.map(|e| e.row.to_vec());
                proptest::prop_assert_eq!(first, rows.get(at).cloned(), "{:?}", probe);
                let before = seg.last_row_before(Some(&probe)).unwrap();
                let expected = at.checked_sub(1).map(|b| rows[b].as_slice());
                proptest::prop_assert_eq!(before, expected, "{:?}", probe);
            }
        }
    }

    /// Writes rows `row00000` to `row02999`, a 40-byte value each (about a dozen blocks).
    fn three_thousand_rows(fs: &dyn FileSystem, path: &Path) {
        let mut w = SegmentWriter::create(fs, path, 10).unwrap();
        let value = vec![7u8; 40];
        for i in 0..3000u32 {
            let row = format!("row{i:05}").into_bytes();
            let e = Entry {
                row: &row,
                value: &value,
                ..put(b"", u64::from(i), b"")
            };
            w.add(&e).unwrap();
        }
        let info = w.finish().unwrap();
        assert_eq!(info.entries, 3000);
    }

    #[test]
    fn written_segment_reads_back_and_seeks_by_row() {
        let fs = SimFs::new();
        let path = Path::new("/s/1.seg");
        three_thousand_rows(&fs, path);
        let seg = Segment::open(&fs, path, 1).unwrap();
        assert!(seg.file.blocks.len() > 1);
        let mut it = seg.iter_from(Some(b"row01500")).unwrap();
        assert_eq!(it.next_entry().unwrap().unwrap().row, b"row01500");
        assert_eq!(it.next_entry().unwrap().unwrap().row, b"row01501");
        assert_eq!(
            seg.last_row_before(Some(b"row01500")).unwrap(),
            Some(&b"row01499"[..])
        );
        assert_eq!(seg.last_row_before(Some(b"row00000")).unwrap(), None);
        assert_eq!(seg.last_row_before(None).unwrap(), Some(&b"row02999"[..]));
        let mut all = seg.iter_from(None).unwrap();
        let mut n = 0;
        while all.next_entry().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 3000);
    }

    /// A block whose rows do not end with the last row its index names (the CRCs made to
    /// match, as a writer's bug would leave them) is corruption at its first read: the restart
    /// points' keys trust that row, and a seek must not go wrong on it quietly.
    #[test]
    fn a_block_that_does_not_end_with_its_index_row_is_corruption() {
        let fs = SimFs::new();
        let path = Path::new("/s/1.seg");
        three_thousand_rows(&fs, path);
        let h = &Segment::open(&fs, path, 1).unwrap().file.blocks[0];
        let last_byte = h.row_at + h.row_len as usize - 1;
        let mut bytes = fs.read_file(path).unwrap();
        // One byte up: a row past the block's own last row, still below the next block's.
        bytes[last_byte] += 1;
        let f_at = bytes.len() - FOOTER_LEN;
        let index_at = u64_at(&bytes, f_at).unwrap() as usize;
        let index_len = u64_at(&bytes, f_at + 8).unwrap() as usize;
        let index_crc = crc32fast::hash(&bytes[index_at..index_at + index_len]);
        bytes[f_at + 16..f_at + 20].copy_from_slice(&index_crc.to_le_bytes());
        let footer_crc = crc32fast::hash(&bytes[f_at..f_at + 48]);
        bytes[f_at + 48..f_at + 52].copy_from_slice(&footer_crc.to_le_bytes());
        fs.write_file(path, &bytes).unwrap();

        let seg = Segment::open(&fs, path, 1).unwrap();
        match seg.iter_from(Some(b"row00001")) {
            Err(Error::Corruption { reason, .. }) => {
                assert!(
                    reason.contains("does not end with the last row"),
                    "{reason}"
                )
            }
            other => panic!("expected corruption, got {:?}", other.map(|_| ())),
        }
    }

    /// Every name of one segment file (the same path again, a hard link: a split's reference
    /// segment) opens what the first open read, with the blocks it checked; a copy is another
    /// file, read on its own; once no segment holds a file, an open reads it afresh.
    #[test]
    fn names_of_one_file_share_what_was_read_from_it_and_a_copy_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let fs = crate::fs::StdFs;
        let (path, link, copy) = (
            dir.path().join("1.seg"),
            dir.path().join("2.seg"),
            dir.path().join("3.seg"),
        );
        three_thousand_rows(&fs, &path);
        std::fs::hard_link(&path, &link).unwrap();
        std::fs::copy(&path, &copy).unwrap();
        let first = Segment::open(&fs, &path, 1).unwrap();
        first.check_blocks().unwrap();
        let (checked, blocks) = first.checked_blocks();
        assert_eq!(checked, blocks);

        let again = Segment::open(&fs, &path, 1).unwrap();
        let linked = Segment::open(&fs, &link, 2).unwrap();
        assert!(again.shares_file_with(&first));
        assert!(linked.shares_file_with(&first));
        assert_eq!(linked.checked_blocks(), (blocks, blocks));
        assert_eq!((linked.id, linked.path()), (2, link.as_path()));

        let copied = Segment::open(&fs, &copy, 3).unwrap();
        assert!(!copied.shares_file_with(&first));
        assert_eq!(copied.checked_blocks(), (0, blocks));

        let first_file = Arc::downgrade(&first.file);
        drop((first, again, linked));
        assert!(first_file.upgrade().is_none());
        let reopened = Segment::open(&fs, &link, 2).unwrap();
        assert_eq!(reopened.checked_blocks(), (0, blocks));
        let mut it = reopened.iter_from(Some(b"row01500")).unwrap();
        assert_eq!(it.next_entry().unwrap().unwrap().row, b"row01500");
    }

    #[test]
    fn skip_column_lands_on_the_next_column_however_many_versions_it_has() {
        let fs = SimFs::new();
        let path = Path::new("/s/3.seg");
        let mut w = SegmentWriter::create(&fs, path, 10).unwrap();
        let value = vec![1u8; 30];
        // Row r1: column a with `n` versions, then b; row r2: column a with 3 versions.
        let mut expected = Vec::new();
        let mut seq = 0;
        for (row, col, versions) in [
            (&b"r1"[..], &b"a"[..], 5000i64),
            (b"r1", b"b", 2),
            (b"r2", b"a", 3),
        ] {
            for ts in (1..=versions).rev() {
                seq += 1;
                w.add(&Entry {
                    row,
                    qualifier: Some(col),
                    ts,
                    value: &value,
                    ..put(b"", seq, b"")
                })
                .unwrap();
            }
            expected.push((row, col, versions));
        }
        w.finish().unwrap();
        let seg = Segment::open(&fs, path, 1).unwrap();
        assert!(seg.file.blocks.len() > 5);
        // From the first entry of every column, and from deep inside the long one.
        for consumed in [1usize, 2, 40, 1000, 4999] {
            let mut it = seg.iter_from(Some(b"r1")).unwrap();
            for _ in 0..consumed {
                it.next_entry().unwrap().unwrap();
            }
            let next = it.skip_column(b"r1", b"f", Some(b"a")).unwrap().unwrap();
            assert_eq!(
                (next.row, next.qualifier, next.ts),
                (&b"r1"[..], Some(&b"b"[..]), 2)
            );
        }
        let mut it = seg.iter_from(Some(b"r1")).unwrap();
        it.next_entry().unwrap();
        it.skip_column(b"r1", b"f", Some(b"a")).unwrap();
        let next = it.skip_column(b"r1", b"f", Some(b"b")).unwrap().unwrap();
        assert_eq!((next.row, next.ts), (&b"r2"[..], 3));
        assert!(it.skip_column(b"r2", b"f", Some(b"a")).unwrap().is_none());
    }

    /// A ~3 MiB segment written at the given pace; returns how long the write took.
    fn paced_write(bytes_per_sec: u64, hurry: bool) -> Duration {
        let fs = SimFs::new();
        let mut w = SegmentWriter::create(&fs, Path::new("/s/paced.seg"), 30_000).unwrap();
        w.set_pace(Pace {
            bytes_per_sec,
            hurry: Arc::new(AtomicBool::new(hurry)),
        });
        let value = vec![3u8; 100];
        let started = Instant::now();
        for i in 0..30_000u32 {
            let row = format!("row{i:08}").into_bytes();
            w.add(&Entry {
                row: &row,
                value: &value,
                ..put(b"", u64::from(i), b"")
            })
            .unwrap();
        }
        w.finish().unwrap();
        started.elapsed()
    }

    #[test]
    fn a_paced_background_write_takes_its_time_unless_hurried() {
        // 3 MiB at 10 MiB/s: at least the 2 MiB written before the last chunk's pause, 0.2 s.
        assert!(paced_write(10 << 20, false) >= Duration::from_millis(200));
        // At 1 MiB/s it would take 3 s; hurried, it does not wait at all (wide margin).
        assert!(paced_write(1 << 20, true) < Duration::from_millis(1500));
    }

    /// A segment of format `version` holding one entry for each of rows `k00000..k00999`
    /// (sized for exactly that many rows) and the rows written.
    fn thousand_rows(fs: &SimFs, path: &Path, version: u8) -> Vec<Vec<u8>> {
        let mut w = SegmentWriter::create_version(fs, path, 1000, version).unwrap();
        let rows: Vec<Vec<u8>> = (0..1000u32)
            .map(|i| format!("k{i:05}").into_bytes())
            .collect();
        for (i, r) in rows.iter().enumerate() {
            w.add(&Entry {
                row: r,
                ..put(b"", i as u64, b"v")
            })
            .unwrap();
        }
        w.finish().unwrap();
        rows
    }

    /// Every written row passes the segment's filter, and few absent ones do.
    fn filter_answers(seg: &Segment, rows: &[Vec<u8>]) {
        assert!(rows.iter().all(|r| seg.may_contain_row(r)));
        let false_positives = (0..1000u32)
            .filter(|i| seg.may_contain_row(format!("x{i:05}").as_bytes()))
            .count();
        assert!(
            false_positives < 50,
            "{false_positives} false positives of 1000"
        );
    }

    /// `rows` rows of `cells` cells each, the filter's size bound set to every cell (as a
    /// flush passes its memtable's entries) and at most `held` row hashes held: the bytes of
    /// its filter, which every row passes.
    fn wide_rows(rows: u32, cells: u32, held: usize) -> usize {
        let fs = SimFs::new();
        let path = Path::new("/s/wide.seg");
        let mut w = SegmentWriter::create(&fs, path, (rows * cells) as u64).unwrap();
        if let FilterBuild::Held { limit, .. } = &mut w.filter {
            *limit = held;
        }
        let keys: Vec<Vec<u8>> = (0..rows).map(|i| format!("k{i:05}").into_bytes()).collect();
        for r in &keys {
            for c in 0..cells {
                let q = format!("q{c:03}").into_bytes();
                w.add(&Entry {
                    row: r,
                    qualifier: Some(&q),
                    ..put(b"", 1, b"v")
                })
                .unwrap();
            }
        }
        w.finish().unwrap();
        let seg = Segment::open(&fs, path, 1).unwrap();
        filter_answers(&seg, &keys);
        seg.file.filter.to_bytes().len()
    }

    /// A segment of 1,000 rows of 10 cells gets the filter of 1,000 rows, not of the 10,000
    /// cells its writer was told to expect; one with more rows than a writer holds hashes for
    /// falls back to the bound it was given. Every row passes either filter.
    #[test]
    fn a_segments_filter_is_sized_by_its_rows_not_its_cells() {
        let for_rows = |n: u64| RowFilter::blocked(n).to_bytes().len();
        assert_eq!(wide_rows(1000, 10, HELD_HASHES), for_rows(1000));
        assert_eq!(wide_rows(1000, 10, 100), for_rows(10_000));
    }

    #[test]
    fn row_filter_never_excludes_a_written_row() {
        let fs = SimFs::new();
        let path = Path::new("/s/2.seg");
        let rows = thousand_rows(&fs, path, FORMAT_VERSION);
        let seg = Segment::open(&fs, path, 2).unwrap();
        assert!(matches!(seg.file.filter, RowFilter::Blocked(_)));
        filter_answers(&seg, &rows);
    }

    #[test]
    fn a_version_1_segment_with_the_legacy_filter_still_opens_and_answers() {
        let fs = SimFs::new();
        let path = Path::new("/s/3.seg");
        let rows = thousand_rows(&fs, path, 1);
        let bytes = fs.read_file(path).unwrap();
        assert_eq!(bytes[7], 1, "a version-1 header");
        let seg = Segment::open(&fs, path, 3).unwrap();
        assert!(matches!(seg.file.filter, RowFilter::Legacy(_)));
        filter_answers(&seg, &rows);
        let mut it = seg.iter_from(Some(b"k00500")).unwrap();
        assert_eq!(it.next_entry().unwrap().unwrap().row, b"k00500");
    }

    #[test]
    fn checking_a_written_segment_checks_every_block_once_and_finds_a_flipped_bit() {
        let fs = SimFs::new();
        let path = Path::new("/s/5.seg");
        three_thousand_rows(&fs, path);
        let seg = Segment::open(&fs, path, 5).unwrap();
        let (_, blocks) = seg.checked_blocks();
        assert!(blocks > 2, "{blocks} blocks");
        assert_eq!(seg.checked_blocks(), (0, blocks), "opening reads no block");
        seg.check_blocks().unwrap();
        assert_eq!(seg.checked_blocks(), (blocks, blocks));
        let mut it = seg.iter_from(Some(b"row01500")).unwrap();
        assert_eq!(it.next_entry().unwrap().unwrap().row, b"row01500");

        // One bit of the second block's data flipped: the check names the block.
        let mut bytes = fs.read_file(path).unwrap();
        let at = seg.file.blocks[1].offset + seg.file.blocks[1].len / 2;
        bytes[at] ^= 0x10;
        fs.write_file(path, &bytes).unwrap();
        let damaged = Segment::open(&fs, path, 5).unwrap();
        match damaged.check_blocks() {
            Err(Error::Corruption { reason, .. }) => {
                assert_eq!(reason, "block 1 checksum mismatch")
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    /// `bytes` with the format version in the header and the footer set to `version`.
    fn with_version(mut bytes: Vec<u8>, version: u8) -> Vec<u8> {
        let f_at = bytes.len() - FOOTER_LEN;
        bytes[7] = version;
        bytes[f_at + 52..f_at + 56].copy_from_slice(&(version as u32).to_le_bytes());
        bytes[f_at + 63] = version;
        bytes
    }

    /// The error opening `bytes` as a segment gives.
    fn open_error(fs: &SimFs, path: &Path, bytes: &[u8]) -> (u64, String) {
        fs.write_file(path, bytes).unwrap();
        match Segment::open(fs, path, 4) {
            Err(Error::Corruption { offset, reason, .. }) => (offset, reason),
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn a_row_filter_of_an_unknown_kind_or_not_its_versions_is_corruption() {
        let fs = SimFs::new();
        let path = Path::new("/s/4.seg");
        thousand_rows(&fs, path, FORMAT_VERSION);
        let new = fs.read_file(path).unwrap();
        thousand_rows(&fs, path, 1);
        let old = fs.read_file(path).unwrap();
        let f_at = new.len() - FOOTER_LEN;
        let word = |at: usize| u32_at(&new, at).unwrap() as usize;
        let filter_at = word(f_at) - word(f_at + 40);
        assert_eq!(&new[filter_at..filter_at + 4], b"BLK1");

        // An unknown kind tag, under valid checksums: refused, not read as some filter.
        let mut unknown = new.clone();
        unknown[filter_at..filter_at + 4].copy_from_slice(b"BLK2");
        let crc = crc32fast::hash(&unknown[filter_at..word(f_at)]);
        unknown[f_at + 44..f_at + 48].copy_from_slice(&crc.to_le_bytes());
        let crc = crc32fast::hash(&unknown[f_at..f_at + 48]);
        unknown[f_at + 48..f_at + 52].copy_from_slice(&crc.to_le_bytes());
        let (offset, reason) = open_error(&fs, path, &unknown);
        assert_eq!(
            (offset, reason.as_str()),
            (filter_at as u64, "malformed row filter")
        );

        // Each version holds its own kind only.
        let (_, reason) = open_error(&fs, path, &with_version(old, FORMAT_VERSION));
        assert_eq!(reason, "malformed row filter");
        let (_, reason) = open_error(&fs, path, &with_version(new.clone(), 1));
        assert_eq!(reason, "malformed row filter");
        // Versions this build does not know, in the header and footer alike.
        for v in [0, 3, 4, 0x41] {
            let (offset, _) = open_error(&fs, path, &with_version(new.clone(), v));
            assert_eq!(offset, 0, "version {v}");
        }
    }

    #[test]
    fn any_flipped_byte_is_an_error_or_a_correct_read_never_a_panic() {
        let fs = SimFs::new();
        let path = Path::new("/s/1.seg");
        let mut w = SegmentWriter::create(&fs, path, 10).unwrap();
        w.add(&put(b"a", 1, b"x")).unwrap();
        w.add(&put(b"b", 2, b"y")).unwrap();
        w.finish().unwrap();
        let good = fs.read_file(path).unwrap();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            fs.write_file(path, &bad).unwrap();
            let res = Segment::open(&fs, path, 1).and_then(|s| {
                let mut it = s.iter_from(None)?;
                let mut rows = Vec::new();
                while let Some(e) = it.next_entry()? {
                    rows.push((e.row.to_vec(), e.value.to_vec()));
                }
                Ok(rows)
            });
            if let Ok(rows) = res {
                assert_eq!(
                    rows,
                    vec![
                        (b"a".to_vec(), b"x".to_vec()),
                        (b"b".to_vec(), b"y".to_vec())
                    ]
                );
            }
        }
    }
}
