//! Replayed entries: the memtable's part that log replay built, pointing into the mapped logs
//! instead of copying them.
//!
//! Replay used to copy every key and value of a log into the memtable's tree: about 250 bytes
//! of fresh heap per small record, and faulting fresh memory in costs more than reading the log
//! (a 1 GiB log of 100-byte values took 2.6-2.9 s to replay against 0.6 s to read). Here each
//! entry is one fixed 72-byte [`Slot`] holding offsets into the log's memory map (kept alive by
//! the table), sorted once when replay ends, with no per-entry allocation.
//!
//! # Invariants
//! 1. `slots` is sorted by [`cmp_entries`] order and holds one slot per key (row, family,
//!    qualifier, timestamp, kind): the one the memtable would have kept, the highest seq (the
//!    later arrival on equal seqs).
//! 2. Every offset in a slot lies inside the valid frames of its log as replayed. Once a log's
//!    replay is over, its map covers exactly those frames ([`crate::fs::FileSystem::map_prefix`]):
//!    the store writes new frames after them, and truncated a damaged tail before mapping them.
//! 3. `bytes` counts what the same entries would count in the tree (key, value and
//!    [`ENTRY_OVERHEAD`] each), so that flush and spill decisions do not depend on the part an
//!    entry lives in.

use crate::error::{Error, Result};
use crate::fs::FileBytes;
use crate::key::ENTRY_OVERHEAD;
use crate::key::{cmp_entries, Entry, Kind};
use crate::log::LogRecordRef;
use std::cmp::Ordering;
use std::sync::Arc;

/// One replayed entry: where its fields lie in a mapped log. Offsets of family, qualifier and
/// value are relative to the row's (they are in the same frame, after it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Slot {
    /// The row's first 16 bytes, zero-padded, big-endian, in two halves (8-byte alignment
    /// keeps the slot free of padding): when two differ they order the rows as the bytes do, so
    /// most comparisons never touch the log (a sort that does runs at cache-miss speed).
    prefix: [u64; 2],
    row_at: u64,
    ts: i64,
    seq: u64,
    row_len: u32,
    fam_rel: u32,
    fam_len: u32,
    qual_rel: u32,
    qual_len: u32,
    val_rel: u32,
    val_len: u32,
    /// Index of the log in the table's maps.
    log: u16,
    kind: u8,
    has_qual: bool,
}

fn row_prefix(row: &[u8]) -> [u64; 2] {
    let mut p = [0u8; 16];
    let n = row.len().min(16);
    p[..n].copy_from_slice(&row[..n]);
    let v = u128::from_be_bytes(p);
    [(v >> 64) as u64, v as u64]
}

/// The logs slots point into.
#[derive(Clone, Default)]
struct Maps(Vec<Arc<dyn FileBytes>>);

/// The slots' fields, read from the log bytes they point into.
trait SlotBytes {
    /// The bytes of the log slot `s` points into.
    fn log_of(&self, s: &Slot) -> &[u8];

    fn row(&self, s: &Slot) -> &[u8] {
        &self.log_of(s)[s.row_at as usize..][..s.row_len as usize]
    }

    fn field(&self, s: &Slot, rel: u32, len: u32) -> &[u8] {
        if len == 0 {
            return &[];
        }
        &self.log_of(s)[s.row_at as usize + rel as usize..][..len as usize]
    }

    fn family(&self, s: &Slot) -> &[u8] {
        self.field(s, s.fam_rel, s.fam_len)
    }

    fn qualifier(&self, s: &Slot) -> Option<&[u8]> {
        s.has_qual.then(|| self.field(s, s.qual_rel, s.qual_len))
    }

    fn entry(&self, s: &Slot) -> Entry<'_> {
        Entry {
            row: self.row(s),
            family: self.family(s),
            qualifier: self.qualifier(s),
            ts: s.ts,
            // Checked when the slot was made.
            kind: Kind::from_u8(s.kind).unwrap_or(Kind::Put),
            seq: s.seq,
            value: self.field(s, s.val_rel, s.val_len),
        }
    }
}

impl SlotBytes for Maps {
    fn log_of(&self, s: &Slot) -> &[u8] {
        self.0[s.log as usize].bytes()
    }
}

/// The one log a chunk's slots point into, while it is being replayed.
struct MapBytes<'a>(&'a [u8]);

impl SlotBytes for MapBytes<'_> {
    fn log_of(&self, _: &Slot) -> &[u8] {
        self.0
    }
}

impl Maps {
    /// [`cmp_entries`] of the two slots' entries, touching the logs only when the row
    /// prefixes tie.
    fn cmp_slots(&self, a: &Slot, b: &Slot) -> Ordering {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| cmp_entries(&self.entry(a), &self.entry(b)))
    }

    /// Whether the two slots have the same key apart from seq.
    fn same_key(&self, a: &Slot, b: &Slot) -> bool {
        a.prefix == b.prefix
            && a.ts == b.ts
            && a.kind == b.kind
            && a.row_len == b.row_len
            && self.entry(a).same_key(&self.entry(b))
    }
}

/// The slots of one chunk of a log, gathered on a decoding thread (see `log::replay`).
#[derive(Debug, Default)]
pub(crate) struct ReplayedChunk {
    slots: Vec<Slot>,
    bytes: usize,
    max_seq: u64,
    /// Some slot is out of [`cmp_entries`] order with the one before it.
    unsorted: bool,
}

impl ReplayedChunk {
    /// Add the effects of one record decoded in place from `map`, the bytes of log number
    /// `log` of the builder (the record's fields borrow from `map`; every record of a chunk
    /// comes from the same map).
    pub(crate) fn add(&mut self, log: u16, map: &[u8], rec: &LogRecordRef<'_>) -> Result<()> {
        let base = map.as_ptr() as usize;
        let row_at = (rec.row.as_ptr() as usize)
            .checked_sub(base)
            .filter(|at| at + rec.row.len() <= map.len())
            .ok_or_else(|| Error::Codec("a replayed record lies outside its log".into()))?;
        // Relative offset of a field of the same frame (0 for an empty field, never read).
        let rel = |f: &[u8]| -> Result<u32> {
            if f.is_empty() {
                return Ok(0);
            }
            u32::try_from(f.as_ptr() as usize - base - row_at)
                .map_err(|_| Error::Codec("a record's fields are more than 4 GiB apart".into()))
        };
        let len = |f: &[u8]| -> Result<u32> {
            u32::try_from(f.len()).map_err(|_| Error::Codec("a field of 4 GiB or more".into()))
        };
        let prefix = row_prefix(rec.row);
        let row_len = len(rec.row)?;
        self.slots.reserve(rec.cells.len());
        for (i, c) in rec.cells.iter().enumerate() {
            let kind = Kind::from_u8(c.kind)
                .ok_or_else(|| Error::Codec(format!("unknown entry kind {}", c.kind)))?;
            if (kind == Kind::DeleteFamily) != c.qualifier.is_none() {
                return Err(Error::Codec(
                    "qualifier presence does not match the entry kind".into(),
                ));
            }
            let q = c.qualifier.unwrap_or_default();
            let seq = rec.seq + i as u64;
            let slot = Slot {
                prefix,
                row_at: row_at as u64,
                ts: c.ts,
                seq,
                row_len,
                fam_rel: rel(c.family)?,
                fam_len: len(c.family)?,
                qual_rel: rel(q)?,
                qual_len: len(q)?,
                val_rel: rel(c.value)?,
                val_len: len(c.value)?,
                log,
                kind: kind as u8,
                has_qual: c.qualifier.is_some(),
            };
            if !self.unsorted {
                if let Some(prev) = self.slots.last() {
                    // Row prefixes decide most pairs without reading the log; a tie compares
                    // the previous entry where it lies, in the same map (a chunk holds one
                    // log's records; one that did not would be sorted, which is always right).
                    self.unsorted = match prev.prefix.cmp(&prefix) {
                        _ if prev.log != log => true,
                        Ordering::Less => false,
                        Ordering::Greater => true,
                        Ordering::Equal => {
                            let maps = MapBytes(map);
                            cmp_entries(&maps.entry(prev), &maps.entry(&slot)) == Ordering::Greater
                        }
                    };
                }
            }
            self.slots.push(slot);
            self.bytes += rec.row.len() + c.family.len() + q.len() + c.value.len() + ENTRY_OVERHEAD;
            self.max_seq = self.max_seq.max(seq);
        }
        Ok(())
    }
}

/// Collects the chunks of every replayed log, in log order, then sorts them into a
/// [`Replayed`] table.
#[derive(Default)]
pub(crate) struct ReplayedBuilder {
    maps: Maps,
    slots: SlotVec,
    /// An upper bound of the built table's `bytes` (duplicates are counted).
    bytes: usize,
    max_seq: u64,
    unsorted: bool,
    /// Threads that may sort (the replay's decoding threads are idle by then).
    sort_threads: usize,
}

impl ReplayedBuilder {
    /// A builder whose final sort (if the logs arrived out of key order) may use `threads`.
    pub(crate) fn with_sort_threads(threads: usize) -> ReplayedBuilder {
        ReplayedBuilder {
            sort_threads: threads,
            ..ReplayedBuilder::default()
        }
    }

    /// Register a log's map; its chunks are then made with the returned index.
    pub(crate) fn add_log(&mut self, map: Arc<dyn FileBytes>) -> Result<u16> {
        let i = u16::try_from(self.maps.0.len())
            .map_err(|_| Error::InvalidArgument("more than 65,535 logs to replay".into()))?;
        self.maps.0.push(map);
        Ok(i)
    }

    /// Put `map` in place of the map of log `log`: the same bytes wherever slots point (the
    /// log's valid frames), mapped anew once its replay is over.
    pub(crate) fn replace_log(&mut self, log: u16, map: Arc<dyn FileBytes>) {
        self.maps.0[log as usize] = map;
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Take `chunk`'s slots as if added after every slot already here.
    pub(crate) fn absorb(&mut self, chunk: ReplayedChunk) -> Result<()> {
        if let (Some(last), Some(first)) = (self.slots.as_slice().last(), chunk.slots.first()) {
            self.unsorted |= self.maps.cmp_slots(last, first) == Ordering::Greater;
        }
        self.unsorted |= chunk.unsorted;
        self.slots.extend(&chunk.slots)?;
        self.bytes += chunk.bytes;
        self.max_seq = self.max_seq.max(chunk.max_seq);
        Ok(())
    }

    /// The table of what was added, leaving this builder empty but for its logs (later slots
    /// may still point into them).
    pub(crate) fn build(&mut self) -> Replayed {
        let mut slots = std::mem::take(&mut self.slots);
        let maps = self.maps.clone();
        if std::mem::take(&mut self.unsorted) {
            sort_slots(slots.as_mut_slice(), &maps, self.sort_threads);
        }
        // Of identical keys (adjacent, highest seq first) keep the highest seq, the last
        // arrival among equal ones.
        let all = slots.as_mut_slice();
        let (mut w, mut i, mut bytes) = (0, 0, 0);
        while i < all.len() {
            let mut pick = i;
            let mut j = i + 1;
            while j < all.len() && maps.same_key(&all[i], &all[j]) {
                if all[j].seq == all[i].seq {
                    pick = j;
                }
                j += 1;
            }
            all[w] = all[pick];
            let s = &all[w];
            bytes += (s.row_len + s.fam_len + s.qual_len + s.val_len) as usize + ENTRY_OVERHEAD;
            w += 1;
            i = j;
        }
        slots.truncate(w);
        // What dedup left out must not stay resident behind a `bytes` that no longer counts it
        // (a counter's log rewrites one cell a million times).
        slots.shrink_to_fit();
        self.bytes = 0;
        Replayed {
            maps,
            slots,
            bytes,
            max_seq: std::mem::take(&mut self.max_seq),
        }
    }
}

/// Rows that agree on this many bytes are ordered by comparing them whole: the sort by
/// prefixes recurses once per 16 bytes.
const MAX_PREFIX_DEPTH: usize = 256;

/// Slots at least this many are sorted on two threads.
const PARALLEL_SORT_MIN: usize = 1 << 16;

/// Sort `all` into [`cmp_entries`] order. Of identical keys with equal seqs the later arrival
/// must stay last: a slot's log and offset are its arrival order, the last tie-break.
///
/// Comparisons that read the log run at cache-miss speed (the slots point all over it), so the
/// sort compares what the slots hold: 16 bytes of row at a time (`prefix`), a level deeper for
/// each group of rows that tie, refilled from the log once per slot and level; then, within one
/// row, timestamp, kind and seq when the row's entries are all of one column (a counter's
/// versions). Only rows of several columns fall back to comparing through the log. With
/// `threads` > 1 and many slots, the first level sorts in halves on two threads (merged by
/// prefix), and the groups are finished on two threads.
fn sort_slots(all: &mut [Slot], maps: &Maps, threads: usize) {
    sort_level(all, maps, 0, threads);
}

/// Sort `run`, whose rows agree on their first `depth` bytes and whose prefixes hold the next
/// 16 (see [`sort_slots`]), on `threads` threads when it is large.
fn sort_level(run: &mut [Slot], maps: &Maps, depth: usize, threads: usize) {
    if threads < 2 || run.len() < PARALLEL_SORT_MIN {
        run.sort_unstable_by_key(|s| level_key(s, depth));
        finish_groups(run, maps, depth, 1);
        return;
    }
    let mid = run.len() / 2;
    let (left, right) = run.split_at_mut(mid);
    std::thread::scope(|s| {
        s.spawn(|| left.sort_unstable_by_key(|s| level_key(s, depth)));
        right.sort_unstable_by_key(|s| level_key(s, depth));
    });
    // Merge from the front, the left half moved out to a buffer: the write position `k` never
    // passes the right half's read position `j` (k = i + j - mid, i <= mid).
    let left: Vec<Slot> = run[..mid].to_vec();
    let (mut i, mut j, mut k) = (0, mid, 0);
    while i < left.len() && j < run.len() {
        if level_key(&run[j], depth) < level_key(&left[i], depth) {
            run[k] = run[j];
            j += 1;
        } else {
            run[k] = left[i];
            i += 1;
        }
        k += 1;
    }
    // What is left of the right half is in place already.
    run[k..k + left.len() - i].copy_from_slice(&left[i..]);
    // Groups of equal keys are independent: finish each half on its own thread, cut at the
    // first group boundary from the middle (a group that holds nearly everything, as when
    // every row starts with the same 16 bytes, is finished on both threads a level deeper).
    let mut cut = mid;
    while cut < run.len() && level_key(&run[cut], depth) == level_key(&run[cut - 1], depth) {
        cut += 1;
    }
    if cut == run.len() {
        cut = mid;
        while cut > 0 && level_key(&run[cut], depth) == level_key(&run[cut - 1], depth) {
            cut -= 1;
        }
    }
    if cut == 0 {
        finish_groups(run, maps, depth, threads);
        return;
    }
    let (left, right) = run.split_at_mut(cut);
    std::thread::scope(|s| {
        s.spawn(|| finish_groups(left, maps, depth, 1));
        finish_groups(right, maps, depth, 1);
    });
}

/// The order of slots whose rows agree on their first `depth` bytes, as far as the prefix
/// (the row's bytes from `depth`, 16 of them) tells: then a row that ends within those bytes
/// (by its length: it is a prefix of the longer ones) before the rows that go on.
fn level_key(s: &Slot, depth: usize) -> ([u64; 2], u32) {
    let ends = if s.row_len as usize <= depth + 16 {
        s.row_len
    } else {
        u32::MAX
    };
    (s.prefix, ends)
}

/// Set each slot's prefix to 16 bytes of its row from `depth` (on `threads` threads).
fn refill(run: &mut [Slot], maps: &Maps, depth: usize, threads: usize) {
    let fill = |part: &mut [Slot]| {
        for s in part.iter_mut() {
            s.prefix = row_prefix(&maps.row(s)[depth..]);
        }
    };
    if threads < 2 || run.len() < PARALLEL_SORT_MIN {
        return fill(run);
    }
    let (left, right) = run.split_at_mut(run.len() / 2);
    std::thread::scope(|s| {
        s.spawn(|| fill(left));
        fill(right);
    });
}

/// Order each group of slots with equal [`level_key`]s in `run` (sorted by it): rows that go on
/// past the prefix a level deeper, equal rows by their entries. Prefixes are back at depth 0
/// when this returns at depth 0.
fn finish_groups(run: &mut [Slot], maps: &Maps, depth: usize, threads: usize) {
    let mut i = 0;
    while i < run.len() {
        let key = level_key(&run[i], depth);
        let mut j = i + 1;
        while j < run.len() && level_key(&run[j], depth) == key {
            j += 1;
        }
        let group = &mut run[i..j];
        if group.len() > 1 {
            if key.1 == u32::MAX && depth + 16 >= MAX_PREFIX_DEPTH {
                // Rows that tie this far (long keys, or one long key many times): compare them
                // through the log rather than recurse a level per 16 bytes (a 64 KiB key would
                // overflow the stack).
                let arrival = |a: &Slot, b: &Slot| (a.log, a.row_at).cmp(&(b.log, b.row_at));
                group.sort_unstable_by(|a, b| {
                    cmp_entries(&maps.entry(a), &maps.entry(b)).then_with(|| arrival(a, b))
                });
                if depth == 0 {
                    refill(group, maps, 0, threads);
                }
            } else if key.1 == u32::MAX {
                refill(group, maps, depth + 16, threads);
                sort_level(group, maps, depth + 16, threads);
                if depth == 0 {
                    refill(group, maps, 0, threads);
                }
            } else {
                sort_row(group, maps);
            }
        }
        i = j;
    }
}

/// Order the entries of one row.
fn sort_row(group: &mut [Slot], maps: &Maps) {
    let arrival = |a: &Slot, b: &Slot| (a.log, a.row_at).cmp(&(b.log, b.row_at));
    let (f0, q0) = (maps.family(&group[0]), maps.qualifier(&group[0]));
    if group
        .iter()
        .all(|s| maps.family(s) == f0 && maps.qualifier(s) == q0)
    {
        group.sort_unstable_by(|a, b| {
            b.ts.cmp(&a.ts)
                .then(a.kind.cmp(&b.kind))
                .then(b.seq.cmp(&a.seq))
                .then_with(|| arrival(a, b))
        });
    } else {
        group.sort_unstable_by(|a, b| {
            cmp_entries(&maps.entry(a), &maps.entry(b)).then_with(|| arrival(a, b))
        });
    }
}

/// Replayed entries in key order, pointing into their logs' maps.
pub(crate) struct Replayed {
    maps: Maps,
    slots: SlotVec,
    bytes: usize,
    max_seq: u64,
}

impl std::fmt::Debug for Replayed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replayed")
            .field("logs", &self.maps.0.len())
            .field("entries", &self.slots.len)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Replayed {
    pub(crate) fn len(&self) -> usize {
        self.slots.len
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn max_seq(&self) -> u64 {
        self.max_seq
    }

    /// Index of the first slot of `row` or after it.
    fn first_of_row(&self, row: &[u8]) -> usize {
        let p = row_prefix(row);
        self.slots
            .as_slice()
            .partition_point(|s| s.prefix < p || (s.prefix == p && self.maps.row(s) < row))
    }

    /// Entries from the first of `row` on.
    pub(crate) fn cursor_from_row(&self, row: &[u8]) -> ReplayedCursor<'_> {
        ReplayedCursor {
            table: self,
            pos: self.first_of_row(row),
        }
    }

    /// Every entry.
    pub(crate) fn cursor_all(&self) -> ReplayedCursor<'_> {
        ReplayedCursor {
            table: self,
            pos: 0,
        }
    }

    /// The greatest row strictly below `row` (`None`: the greatest row).
    pub(crate) fn last_row_before(&self, row: Option<&[u8]>) -> Option<&[u8]> {
        let end = row.map_or(self.slots.len, |r| self.first_of_row(r));
        end.checked_sub(1)
            .map(|i| self.maps.row(&self.slots.as_slice()[i]))
    }
}

/// A position in a [`Replayed`] table.
pub(crate) struct ReplayedCursor<'a> {
    table: &'a Replayed,
    pos: usize,
}

impl<'a> ReplayedCursor<'a> {
    pub(crate) fn next(&mut self) -> Option<Entry<'a>> {
        let s = self.table.slots.as_slice().get(self.pos)?;
        self.pos += 1;
        Some(self.table.maps.entry(s))
    }

    /// Move to the first entry after every entry of one column (wherever the cursor is: the
    /// caller may have read ahead past the column already).
    pub(crate) fn skip_column(&mut self, row: &[u8], family: &[u8], qualifier: Option<&[u8]>) {
        let (slots, m) = (self.table.slots.as_slice(), &self.table.maps);
        self.pos = slots.partition_point(|s| {
            m.row(s)
                .cmp(row)
                .then_with(|| m.family(s).cmp(family))
                .then_with(|| m.qualifier(s).cmp(&qualifier))
                != Ordering::Greater
        });
    }
}

/// A growable array of slots in anonymous mapped memory. On Linux it grows with `mremap`:
/// growing copies nothing and faults no page in twice, where a `Vec` doubling would copy every
/// slot to fresh pages each time (replaying 7 million entries would fault in twice the memory
/// the slots need, which on a virtual machine costs as much as the rest of the replay).
#[derive(Default)]
struct SlotVec {
    map: Option<memmap2::MmapMut>,
    len: usize,
}

impl SlotVec {
    const SLOT: usize = std::mem::size_of::<Slot>();

    fn capacity(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.len() / Self::SLOT)
    }

    fn as_slice(&self) -> &[Slot] {
        match &self.map {
            // SAFETY: the map is page-aligned (so aligned for `Slot`), at least `len` slots long,
            // and its first `len` slots were written as `Slot`s (plain data, no padding: see
            // the assertion below) by `extend`.
            Some(m) => unsafe { std::slice::from_raw_parts(m.as_ptr().cast::<Slot>(), self.len) },
            None => &[],
        }
    }

    fn as_mut_slice(&mut self) -> &mut [Slot] {
        let len = self.len;
        match &mut self.map {
            // SAFETY: as in `as_slice`, and the map is borrowed mutably.
            Some(m) => unsafe {
                std::slice::from_raw_parts_mut(m.as_mut_ptr().cast::<Slot>(), len)
            },
            None => &mut [],
        }
    }

    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    fn extend(&mut self, more: &[Slot]) -> Result<()> {
        const _: () = assert!(std::mem::size_of::<Slot>() == 72, "Slot has no padding");
        let need = self.len + more.len();
        if need > self.capacity() {
            let cap = need.max(2 * self.capacity()).max(4096);
            self.grow(cap * Self::SLOT).map_err(|e| Error::Io {
                file: "(replay memory)".into(),
                source: e,
            })?;
        }
        if let Some(m) = &mut self.map {
            // SAFETY: the map holds `capacity() >= need` slots; the `more.len()` slots from
            // `len` on are written here, before `len` makes them readable.
            unsafe {
                let at = m.as_mut_ptr().cast::<Slot>().add(self.len);
                std::ptr::copy_nonoverlapping(more.as_ptr(), at, more.len());
            }
        }
        self.len = need;
        Ok(())
    }

    /// Give back the memory past `len` (best effort: on failure it stays until dropped).
    fn shrink_to_fit(&mut self) {
        let bytes = self.len * Self::SLOT;
        if self.len == 0 {
            self.map = None;
            return;
        }
        let Some(m) = &mut self.map else { return };
        if m.len() <= bytes {
            return;
        }
        #[cfg(target_os = "linux")]
        // SAFETY: as in `grow`; shrinking does not move the map.
        let _ = unsafe { m.remap(bytes, memmap2::RemapOptions::new()) };
        #[cfg(not(target_os = "linux"))]
        if let Ok(mut smaller) = memmap2::MmapMut::map_anon(bytes) {
            smaller.copy_from_slice(&m[..bytes]);
            *m = smaller;
        }
    }

    #[cfg(target_os = "linux")]
    fn grow(&mut self, bytes: usize) -> std::io::Result<()> {
        match &mut self.map {
            // SAFETY: no reference into the map outlives a call that borrows `self`, so moving
            // the map is sound.
            Some(m) => unsafe { m.remap(bytes, memmap2::RemapOptions::new().may_move(true)) },
            None => {
                self.map = Some(memmap2::MmapMut::map_anon(bytes)?);
                Ok(())
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn grow(&mut self, bytes: usize) -> std::io::Result<()> {
        let mut m = memmap2::MmapMut::map_anon(bytes)?;
        if let Some(old) = &self.map {
            let used = self.len * Self::SLOT;
            m[..used].copy_from_slice(&old[..used]);
        }
        self.map = Some(m);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{LogCell, LogRecord};

    /// One put of `f:q` (or a family marker when `qualifier` is `None`) at `ts`.
    fn record(
        seq: u64,
        row: Vec<u8>,
        qualifier: Option<Vec<u8>>,
        ts: i64,
        kind: Kind,
        value: Vec<u8>,
    ) -> LogRecord {
        LogRecord {
            seq,
            clock: 0,
            row,
            cells: vec![LogCell {
                family: b"f".to_vec(),
                qualifier,
                ts,
                kind: kind as u8,
                value,
            }],
            idem: None,
        }
    }

    /// `records` written as one log (log 0 of its maps) and replayed into one chunk.
    fn replay(records: impl IntoIterator<Item = LogRecord>) -> (Maps, ReplayedChunk) {
        let (mut log, mut ranges) = (Vec::new(), Vec::new());
        for rec in records {
            let start = log.len();
            crate::log::encode_record(&rec, None, &mut log).unwrap();
            ranges.push(start..log.len());
        }
        let map: Arc<dyn FileBytes> = Arc::new(log);
        let mut chunk = ReplayedChunk::default();
        for r in ranges {
            let rec: LogRecordRef<'_> = crate::codec::decode_borrowed(&map.bytes()[r]).unwrap();
            chunk.add(0, map.bytes(), &rec).unwrap();
        }
        (Maps(vec![map]), chunk)
    }

    /// A counter's log: one cell rewritten many times. Dedup keeps one slot; the memory of the
    /// others must go back, since `bytes` no longer counts them.
    #[test]
    fn memory_of_slots_left_out_by_dedup_is_given_back() {
        let (maps, chunk) = replay((0..100_000u64).map(|seq| {
            let value = seq.to_be_bytes().to_vec();
            record(
                seq,
                b"counter".to_vec(),
                Some(b"n".to_vec()),
                1,
                Kind::Put,
                value,
            )
        }));
        let mut b = ReplayedBuilder::default();
        b.add_log(maps.0[0].clone()).unwrap();
        b.absorb(chunk).unwrap();
        assert!(b.slots.capacity() >= 100_000);
        let t = b.build();
        assert_eq!(t.len(), 1);
        let mut c = t.cursor_all();
        assert_eq!(c.next().unwrap().value, 99_999u64.to_be_bytes());
        assert_eq!(t.slots.capacity(), 1, "the map shrank to the one slot kept");
    }

    /// The sort by prefixes, a level at a time, on one thread and on two, orders exactly as
    /// comparing whole entries does: rows that share 20 bytes and differ after, rows of 16 and
    /// 32 bytes and their extensions, one row's many versions of one column, and a row of
    /// several columns; repeated keys with equal seqs keep their arrival order.
    #[test]
    fn the_sort_by_prefixes_orders_as_whole_entries_compare() {
        // Enough that the group of rows starting with 16 zeros is sorted on two threads too.
        let (maps, chunk) = replay((0..(2 * PARALLEL_SORT_MIN as u64 + 999)).map(|i| {
            let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 50_000;
            let row = match k % 7 {
                0 => b"counter".to_vec(),
                1 => b"wide-row".to_vec(),
                2 => format!("{:016}", k % 50).into_bytes(),
                3 => format!("{:016}\0", k % 50).into_bytes(),
                4 => format!("{:032}", k % 50).into_bytes(),
                _ => format!("{k:026}").into_bytes(),
            };
            let (qualifier, kind) = match k % 7 {
                0 => (Some(b"n".to_vec()), Kind::Put),
                1 if k % 3 == 0 => (None, Kind::DeleteFamily),
                1 => (Some(vec![(k % 11) as u8]), Kind::Put),
                _ => (Some(vec![(i % 3) as u8]), Kind::Put),
            };
            record(i / 3, row, qualifier, (i % 5) as i64, kind, vec![])
        }));
        let mut whole = chunk.slots.clone();
        whole.sort_by(|a, b| maps.cmp_slots(a, b));
        let mut one = chunk.slots.clone();
        let mut two = chunk.slots;
        sort_slots(&mut one, &maps, 1);
        sort_slots(&mut two, &maps, 2);
        assert!(one == whole, "one thread orders as whole entries compare");
        assert!(two == whole, "two threads order as whole entries compare");
    }

    /// Rows longer than the prefix levels go (a 64 KiB key written twice out of order) sort on
    /// a small stack, in the same order as whole entries compare.
    #[test]
    fn long_row_keys_sort_without_deep_recursion() {
        let long = |tail: u8| {
            let mut r = vec![b'k'; 64 << 10];
            r.push(tail);
            r
        };
        let rows = [
            long(2),
            b"z".to_vec(),
            long(1),
            long(2),
            b"a".to_vec(),
            long(1),
        ];
        let (maps, chunk) = replay(
            rows.into_iter()
                .enumerate()
                .map(|(i, row)| record(i as u64, row, Some(b"q".to_vec()), 1, Kind::Put, vec![])),
        );
        let mut whole = chunk.slots.clone();
        whole.sort_by(|a, b| maps.cmp_slots(a, b));
        let sorted = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let mut slots = chunk.slots;
                sort_slots(&mut slots, &maps, 1);
                slots
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(sorted == whole);
    }
}
