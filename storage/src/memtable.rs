//! The memtable: the newest entries, in memory, sorted by internal key.
//!
//! A memtable has two parts: a tree that writes go to, and after an open that replayed a log,
//! the replayed entries, read in place from the mapped log ([`Replayed`]). Reads merge them.
//!
//! # Invariants
//! 1. One slot per key apart from seq in each part: a later write of an identical key replaces
//!    the earlier one in the tree (it always has a higher seq), so a re-put overwrites in place.
//!    A key in both parts has the higher seq in the tree (written after the replay), and the
//!    merged stream yields it first: readers take the first of identical keys.
//! 2. `bytes` approximates the heap held (keys, values and per-entry overhead); the store
//!    flushes once it exceeds the memtable budget.
//! 3. After an increment or append to a column of a family that keeps one version, the tree
//!    holds at most two puts of that column ([`Memtable::upsert`], as HBase's memstore does):
//!    a hot counter costs two entries, not one per increment until the next flush. The puts
//!    removed are invisible (beyond the family's one version); only version markers masking
//!    both newer puts could have brought one back, which HBase's upsert forgoes the same way.
//! 4. `since` is when the oldest entry held arrived: its first insert, or the replay that built
//!    it; `None` while the memtable is empty. The store's owner flushes a memtable that got too
//!    old ([`crate::RegionStore::memtable_age`]).

use crate::error::Result;
use crate::key::{cmp_entries, Entry, Kind, MemKey, ENTRY_OVERHEAD};
use crate::merge::EntrySource;
use crate::replayed::{Replayed, ReplayedCursor};
use std::cmp::Ordering;
use std::collections::btree_map::Entry as MapEntry;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct MemValue {
    pub seq: u64,
    pub value: Box<[u8]>,
}

/// Sorted in-memory entries: a tree that writes go to and, after an open that replayed a log,
/// the replayed entries (read in place from the mapped log, see [`Replayed`]).
#[derive(Debug, Default)]
pub(crate) struct Memtable {
    map: BTreeMap<MemKey, MemValue>,
    /// Bytes of the tree (the replayed part counts its own).
    bytes: usize,
    max_seq: u64,
    replayed: Option<Replayed>,
    /// When the oldest entry held arrived (invariant 4).
    since: Option<Instant>,
}

impl Memtable {
    /// A memtable holding what log replay built (and nothing if it built nothing).
    pub(crate) fn replayed(r: Replayed) -> Memtable {
        Memtable {
            max_seq: r.max_seq(),
            since: (r.len() > 0).then(Instant::now),
            replayed: (r.len() > 0).then_some(r),
            ..Memtable::default()
        }
    }

    pub(crate) fn insert(&mut self, key: MemKey, seq: u64, value: Vec<u8>) {
        self.max_seq = self.max_seq.max(seq);
        if self.since.is_none() {
            self.since = Some(Instant::now());
        }
        match self.map.entry(key) {
            MapEntry::Occupied(mut slot) => {
                let old = slot.get_mut();
                if seq >= old.seq {
                    self.bytes = (self.bytes + value.len()).saturating_sub(old.value.len());
                    *old = MemValue {
                        seq,
                        value: value.into_boxed_slice(),
                    };
                }
            }
            MapEntry::Vacant(slot) => {
                self.bytes += slot.key().key_len() + value.len() + ENTRY_OVERHEAD;
                slot.insert(MemValue {
                    seq,
                    value: value.into_boxed_slice(),
                });
            }
        }
    }

    /// HBase's memstore upsert, after an increment or append wrote a put to a column of a family
    /// that keeps one version: of the column's other puts in the tree, keep the newest and remove
    /// the rest (invariant 3). Returns how many were removed. The replayed part is read-only and
    /// keeps what it holds; a flush leaves out its excess versions as usual.
    pub(crate) fn upsert(
        &mut self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        new_ts: i64,
    ) -> usize {
        let first = MemKey::new(row, family, Some(qualifier), i64::MAX, Kind::DeleteFamily);
        let last = MemKey::new(row, family, Some(qualifier), i64::MIN, Kind::Put);
        let stale: Vec<MemKey> = self
            .map
            .range(first..=last)
            .filter(|(k, _)| k.kind == Kind::Put && k.ts != new_ts)
            .skip(1)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &stale {
            if let Some(v) = self.map.remove(k) {
                self.bytes = self
                    .bytes
                    .saturating_sub(k.key_len() + v.value.len() + ENTRY_OVERHEAD);
            }
        }
        stale.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes + self.replayed.as_ref().map_or(0, Replayed::bytes)
    }

    /// Entries held (a key written again after the replay counts in both parts).
    pub(crate) fn len(&self) -> usize {
        self.map.len() + self.replayed.as_ref().map_or(0, Replayed::len)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How long the oldest entry held has been here; `None` if the memtable is empty.
    pub(crate) fn age(&self) -> Option<Duration> {
        self.since.map(|t| t.elapsed())
    }

    fn source<'a>(
        &'a self,
        range: std::collections::btree_map::Range<'a, MemKey, MemValue>,
        replayed: Option<ReplayedCursor<'a>>,
    ) -> MemSource<'a> {
        let mut s = MemSource {
            map: &self.map,
            range,
            replayed: None,
        };
        if let Some(cursor) = replayed {
            let mut cursor = cursor;
            s.replayed = Some(Merged {
                tree_head: s.range.next().map(tree_entry),
                replayed_head: cursor.next(),
                cursor,
            });
        }
        s
    }

    /// Entries from the first key of `row` on.
    pub(crate) fn iter_from(&self, row: &[u8]) -> MemSource<'_> {
        self.source(
            self.map
                .range((Bound::Included(MemKey::row_start(row)), Bound::Unbounded)),
            self.replayed.as_ref().map(|r| r.cursor_from_row(row)),
        )
    }

    /// Every entry.
    pub(crate) fn iter_all(&self) -> MemSource<'_> {
        self.source(
            self.map.range::<MemKey, _>(..),
            self.replayed.as_ref().map(Replayed::cursor_all),
        )
    }

    /// The greatest row strictly below `row` (`None` = below no bound: the greatest row).
    pub(crate) fn last_row_before(&self, row: Option<&[u8]>) -> Option<&[u8]> {
        let last = match row {
            Some(r) => self.map.range(..MemKey::row_start(r)).next_back(),
            None => self.map.iter().next_back(),
        };
        let tree = last.map(|(k, _)| k.row());
        let replayed = self.replayed.as_ref().and_then(|t| t.last_row_before(row));
        tree.max(replayed)
    }
}

fn tree_entry<'a>((k, v): (&'a MemKey, &'a MemValue)) -> Entry<'a> {
    Entry {
        row: k.row(),
        family: k.family(),
        qualifier: k.qualifier(),
        ts: k.ts,
        kind: k.kind,
        seq: v.seq,
        value: &v.value,
    }
}

/// A memtable range as an entry source.
pub(crate) struct MemSource<'a> {
    map: &'a BTreeMap<MemKey, MemValue>,
    range: std::collections::btree_map::Range<'a, MemKey, MemValue>,
    /// With a replayed part: the merge of both parts.
    replayed: Option<Merged<'a>>,
}

/// The next entry of each part of a memtable with a replayed part. Of identical keys in both,
/// the tree's (a later write, so a higher seq) comes first.
struct Merged<'a> {
    tree_head: Option<Entry<'a>>,
    replayed_head: Option<Entry<'a>>,
    cursor: ReplayedCursor<'a>,
}

impl<'a> EntrySource<'a> for MemSource<'a> {
    fn next_entry(&mut self) -> Result<Option<Entry<'a>>> {
        let Some(m) = &mut self.replayed else {
            return Ok(self.range.next().map(tree_entry));
        };
        let from_tree = match (&m.tree_head, &m.replayed_head) {
            (Some(t), Some(r)) => cmp_entries(t, r) != Ordering::Greater,
            (t, _) => t.is_some(),
        };
        Ok(if from_tree {
            std::mem::replace(&mut m.tree_head, self.range.next().map(tree_entry))
        } else {
            std::mem::replace(&mut m.replayed_head, m.cursor.next())
        })
    }

    fn skip_column(
        &mut self,
        row: &[u8],
        family: &[u8],
        qualifier: Option<&[u8]>,
    ) -> Result<Option<Entry<'a>>> {
        // The greatest possible key of the column: oldest timestamp, last kind. Both parts are
        // repositioned, not advanced: the head of one may already be past the column.
        let last = MemKey::new(row, family, qualifier, i64::MIN, Kind::Put);
        self.range = self.map.range((Bound::Excluded(last), Bound::Unbounded));
        if let Some(m) = &mut self.replayed {
            m.tree_head = self.range.next().map(tree_entry);
            m.cursor.skip_column(row, family, qualifier);
            m.replayed_head = m.cursor.next();
        }
        self.next_entry()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::FileBytes;
    use crate::log::{LogCell, LogRecord, LogRecordRef};
    use crate::replayed::{ReplayedBuilder, ReplayedChunk};
    use proptest::prelude::*;
    use std::sync::Arc;

    type Content = Vec<(Vec<u8>, Vec<u8>, Option<Vec<u8>>, i64, Kind, u64, Vec<u8>)>;

    fn contents(m: &Memtable) -> Content {
        let mut out = Vec::new();
        let mut it = m.iter_all();
        while let Some(e) = it.next_entry().unwrap() {
            out.push((
                e.row.to_vec(),
                e.family.to_vec(),
                e.qualifier.map(<[u8]>::to_vec),
                e.ts,
                e.kind,
                e.seq,
                e.value.to_vec(),
            ));
        }
        out
    }

    /// Row, qualifier, timestamp, seq.
    type WalkedKey = (Vec<u8>, Option<Vec<u8>>, i64, u64);

    /// The keys a reader sees walking from each row, jumping past the rest of a column at
    /// every `skip_every`-th entry (as reads do past a delete marker).
    fn walk(m: &Memtable, skip_every: usize) -> Vec<WalkedKey> {
        let rows: Vec<Vec<u8>> = (0u8..7).map(|r| vec![b'r', r]).collect();
        walk_from(m, &rows, skip_every)
    }

    /// [`walk`] from each of `rows`.
    fn walk_from(m: &Memtable, rows: &[Vec<u8>], skip_every: usize) -> Vec<WalkedKey> {
        let mut out = Vec::new();
        for r in rows {
            let mut it = m.iter_from(r);
            let mut next = it.next_entry().unwrap();
            let mut n = 0;
            while let Some(e) = next {
                out.push((e.row.to_vec(), e.qualifier.map(<[u8]>::to_vec), e.ts, e.seq));
                n += 1;
                next = if n % skip_every == 0 {
                    it.skip_column(e.row, e.family, e.qualifier).unwrap()
                } else {
                    it.next_entry().unwrap()
                };
            }
        }
        out
    }

    /// Encode `records` as frames of a log body; the payload ranges.
    fn log_bytes(records: &[LogRecord]) -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
        let (mut bytes, mut ranges) = (Vec::new(), Vec::new());
        for r in records {
            let start = bytes.len();
            crate::log::encode_record(r, None, &mut bytes).unwrap();
            ranges.push(start..bytes.len());
        }
        (bytes, ranges)
    }

    fn record(row: u8, cells: &[(u8, i64, u8)], seq: u64) -> LogRecord {
        LogRecord {
            seq,
            clock: 0,
            row: vec![b'r', row],
            cells: cells
                .iter()
                .map(|&(q, ts, v)| LogCell {
                    family: b"f".to_vec(),
                    qualifier: Some(vec![q]),
                    ts,
                    kind: Kind::Put as u8,
                    value: vec![v; (v % 4) as usize],
                })
                .collect(),
            idem: None,
        }
    }

    proptest! {
        /// Replay builds the memtable's replayed part in bulk from the mapped log; it must
        /// read exactly as inserting each entry would have: per key the highest seq, the later
        /// one on equal seqs, in key order. A write after the replay shadows a replayed key.
        #[test]
        fn a_replayed_memtable_reads_as_one_filled_by_inserts(
            records in proptest::collection::vec(
                (0u8..6, proptest::collection::vec((0u8..3, 0i64..4, any::<u8>()), 1..3), 0u64..5),
                0..120),
            in_log_order in any::<bool>(),
            chunk_len in 1usize..50,
            later in proptest::option::of((0u8..6, 0u8..3, 0i64..4)),
        ) {
            let mut records = records;
            if in_log_order {
                // As a log replays: seqs never decrease.
                records.sort_by_key(|r| r.2);
            }
            let records: Vec<LogRecord> = records
                .iter()
                .map(|(row, cells, seq)| record(*row, cells, *seq * 4))
                .collect();
            let (bytes, ranges) = log_bytes(&records);
            let map: Arc<dyn FileBytes> = Arc::new(bytes);
            let mut builder = ReplayedBuilder::default();
            let log = builder.add_log(map.clone()).unwrap();
            let mut inserted = Memtable::default();
            let mut chunk = ReplayedChunk::default();
            for (i, (r, range)) in records.iter().zip(&ranges).enumerate() {
                for (k, c) in r.cells.iter().enumerate() {
                    let key = MemKey::new(&r.row, &c.family, c.qualifier.as_deref(), c.ts, Kind::Put);
                    inserted.insert(key, r.seq + k as u64, c.value.clone());
                }
                let rec: LogRecordRef<'_> =
                    crate::codec::decode_borrowed(&map.bytes()[range.clone()]).unwrap();
                chunk.add(log, map.bytes(), &rec).unwrap();
                if i % chunk_len == 0 {
                    builder.absorb(std::mem::take(&mut chunk)).unwrap();
                }
            }
            builder.absorb(chunk).unwrap();
            let upper = builder.bytes();
            let mut built = Memtable::replayed(builder.build());
            prop_assert_eq!(contents(&built), contents(&inserted));
            prop_assert_eq!(built.bytes(), inserted.bytes());
            prop_assert!(upper >= built.bytes());
            prop_assert_eq!(built.max_seq, inserted.max_seq);
            for skip_every in 1..4 {
                prop_assert_eq!(walk(&built, skip_every), walk(&inserted, skip_every));
            }
            if let Some((row, q, ts)) = later {
                let key = || MemKey::new(&[b'r', row], b"f", Some(&[q]), ts, Kind::Put);
                built.insert(key(), 1000, b"new".to_vec());
                inserted.insert(key(), 1000, b"new".to_vec());
                // The merged stream may hold the replaced replayed entry too, after the new one:
                // readers take the first of identical keys.
                let mut got = contents(&built);
                got.dedup_by(|b, a| (&a.0, &a.1, &a.2, a.3, a.4) == (&b.0, &b.1, &b.2, b.3, b.4));
                prop_assert_eq!(got, contents(&inserted));
                for r in 0u8..7 {
                    let row = [b'r', r];
                    prop_assert_eq!(
                        built.last_row_before(Some(&row)),
                        inserted.last_row_before(Some(&row))
                    );
                }
                prop_assert_eq!(built.last_row_before(None), inserted.last_row_before(None));
            }
        }
    }

    const ROWS: &[&[u8]] = &[
        b"",
        b"\0",
        b"a",
        b"a\0",
        b"aaaaaaaaaaaaaaaa",
        b"aaaaaaaaaaaaaaaa\0",
        b"aaaaaaaaaaaaaaaab",
        b"aaaaaaaaaaaaaaaa\xff",
        b"aaaaaaaaaaaaaaaaa",
        b"aaaaaaaaaaaaaaa",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    ];
    const FAMS: &[&[u8]] = &[b"", b"f", b"g"];
    const QUALS: &[&[u8]] = &[b"", b"q", b"q\0"];
    const TSS: &[i64] = &[i64::MIN, -1, 0, 1, i64::MAX];

    proptest! {
        /// The same over the edges of the slots' ordering: rows that tie on their 16-byte
        /// prefix or differ only past it, empty rows, families, qualifiers and values, every
        /// kind (family markers have no qualifier), extreme timestamps, records of several
        /// cells, equal seqs, and entries spread over several logs (several maps).
        #[test]
        fn a_replayed_memtable_reads_as_inserts_across_logs_kinds_and_edge_rows(
            records in proptest::collection::vec(
                (0..ROWS.len(),
                 proptest::collection::vec(
                     (0..FAMS.len(), 0..QUALS.len(), 0..TSS.len(), 0u8..4, 0u8..3), 0..4),
                 0u64..6),
                0..60),
            log_cuts in proptest::collection::vec(0usize..60, 0..3),
            in_log_order in any::<bool>(),
            chunk_len in 1usize..10,
        ) {
            let mut records = records;
            if in_log_order {
                records.sort_by_key(|r| r.2);
            }
            let recs: Vec<LogRecord> = records
                .iter()
                .map(|(row, cells, seq)| LogRecord {
                    seq: seq * 3,
                    clock: 0,
                    row: ROWS[*row].to_vec(),
                    cells: cells
                        .iter()
                        .map(|&(f, q, ts, kind, v)| {
                            let kind = Kind::from_u8(kind).unwrap();
                            LogCell {
                                family: FAMS[f].to_vec(),
                                qualifier: (kind != Kind::DeleteFamily).then(|| QUALS[q].to_vec()),
                                ts: TSS[ts],
                                kind: kind as u8,
                                value: vec![7u8; v as usize],
                            }
                        })
                        .collect(),
                    idem: None,
                })
                .collect();
            let mut cuts: Vec<usize> = log_cuts.into_iter().map(|c| c.min(recs.len())).collect();
            cuts.extend([0, recs.len()]);
            cuts.sort_unstable();
            cuts.dedup();
            let mut builder = ReplayedBuilder::default();
            let mut inserted = Memtable::default();
            for w in cuts.windows(2) {
                let part = &recs[w[0]..w[1]];
                let (body, ranges) = log_bytes(part);
                // Frames do not start at the map's first byte in a real log either.
                let mut bytes = vec![9u8; 5];
                bytes.extend_from_slice(&body);
                let map: Arc<dyn FileBytes> = Arc::new(bytes);
                let log = builder.add_log(map.clone()).unwrap();
                let mut chunk = ReplayedChunk::default();
                for (i, (r, range)) in part.iter().zip(&ranges).enumerate() {
                    for (k, c) in r.cells.iter().enumerate() {
                        let kind = Kind::from_u8(c.kind).unwrap();
                        let key = MemKey::new(&r.row, &c.family, c.qualifier.as_deref(), c.ts, kind);
                        inserted.insert(key, r.seq + k as u64, c.value.clone());
                    }
                    let rec: LogRecordRef<'_> = crate::codec::decode_borrowed(
                        &map.bytes()[range.start + 5..range.end + 5],
                    )
                    .unwrap();
                    chunk.add(log, map.bytes(), &rec).unwrap();
                    if i % chunk_len == 0 {
                        builder.absorb(std::mem::take(&mut chunk)).unwrap();
                    }
                }
                builder.absorb(chunk).unwrap();
            }
            let built = Memtable::replayed(builder.build());
            prop_assert_eq!(contents(&built), contents(&inserted));
            prop_assert_eq!(built.bytes(), inserted.bytes());
            let mut from: Vec<Vec<u8>> = ROWS.iter().map(|r| r.to_vec()).collect();
            from.extend([b"b".to_vec(), b"aaaaaaaaaaaaaaaa\x01".to_vec()]);
            for skip_every in 1..4 {
                prop_assert_eq!(
                    walk_from(&built, &from, skip_every),
                    walk_from(&inserted, &from, skip_every)
                );
            }
            for r in &from {
                prop_assert_eq!(built.last_row_before(Some(r)), inserted.last_row_before(Some(r)));
            }
            prop_assert_eq!(built.last_row_before(None), inserted.last_row_before(None));
        }
    }
}
