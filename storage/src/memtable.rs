//! The memtable: the newest entries, in memory, sorted by internal key.
//!
//! # Invariants
//! 1. One slot per key apart from seq: a later write of an identical key replaces the earlier
//!    one (it always has a higher seq), so a re-put overwrites in place.
//! 2. `bytes` approximates the heap held (keys, values and per-entry overhead); the store
//!    flushes once it exceeds the memtable budget.

use crate::error::Result;
use crate::key::{Entry, Kind, MemKey};
use crate::merge::EntrySource;
use std::collections::btree_map::Entry as MapEntry;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Bytes charged per entry on top of key and value (tree node share, lengths, seq).
const ENTRY_OVERHEAD: usize = 64;

#[derive(Debug)]
pub(crate) struct MemValue {
    pub seq: u64,
    pub value: Box<[u8]>,
}

/// Sorted in-memory entries.
#[derive(Debug, Default)]
pub(crate) struct Memtable {
    map: BTreeMap<MemKey, MemValue>,
    bytes: usize,
    max_seq: u64,
}

/// Where replayed entries go: a memtable, or a builder of one.
pub(crate) trait InsertEntry {
    /// Insert; of two entries with identical keys the one with the higher seq wins (the later
    /// one on equal seqs).
    fn insert(&mut self, key: MemKey, seq: u64, value: Vec<u8>);
}

impl InsertEntry for Memtable {
    fn insert(&mut self, key: MemKey, seq: u64, value: Vec<u8>) {
        Memtable::insert(self, key, seq, value);
    }
}

/// Collects the entries of a memtable built in one go (log replay): appending to a vector and
/// sorting once costs a fraction of inserting each entry into the tree (a log's keys mostly
/// arrive in runs, which the sort merges in linear time). Replay fills one builder per chunk of
/// the log, possibly on several threads, and [`MemtableBuilder::absorb`]s them in log order.
#[derive(Debug, Default)]
pub(crate) struct MemtableBuilder {
    /// Entries in arrival order, in the runs absorbed builders brought.
    runs: Vec<Vec<(MemKey, MemValue)>>,
    /// An upper bound of the built memtable's `bytes` (duplicates are counted).
    bytes: usize,
    max_seq: u64,
    /// Some entry arrived with a lower seq than one before it (a log replays in seq order, so
    /// this is not expected; `build` then orders identical keys by seq itself).
    out_of_order: bool,
}

impl InsertEntry for MemtableBuilder {
    fn insert(&mut self, key: MemKey, seq: u64, value: Vec<u8>) {
        self.bytes += key.heap_bytes() + value.len() + ENTRY_OVERHEAD;
        self.out_of_order |= seq < self.max_seq;
        self.max_seq = self.max_seq.max(seq);
        let entry = (
            key,
            MemValue {
                seq,
                value: value.into_boxed_slice(),
            },
        );
        match self.runs.last_mut() {
            Some(run) => run.push(entry),
            None => self.runs.push(vec![entry]),
        }
    }
}

impl MemtableBuilder {
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Take `later`'s entries as if inserted after this builder's (no entry is copied).
    pub(crate) fn absorb(&mut self, later: MemtableBuilder) {
        let Some(first) = later.runs.first().and_then(|r| r.first()) else {
            return;
        };
        self.out_of_order |= later.out_of_order || first.1.seq < self.max_seq;
        self.max_seq = self.max_seq.max(later.max_seq);
        self.bytes += later.bytes;
        self.runs.extend(later.runs);
    }

    /// The memtable holding, for each key, the entry [`InsertEntry::insert`] would have kept.
    pub(crate) fn build(self) -> Memtable {
        let all = self.runs.into_iter().flatten();
        // Identical keys must arrive in seq order (arrival order is seq order in a log). The
        // tree's bulk build sorts stably by key (linear on the runs a log holds) and keeps the
        // last of identical keys: the highest seq, the later arrival on a tie.
        let map: BTreeMap<MemKey, MemValue> = if self.out_of_order {
            let mut all: Vec<_> = all.collect();
            // Stable: on equal seqs the later arrival stays last.
            all.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.seq.cmp(&b.1.seq)));
            all.into_iter().collect()
        } else {
            all.collect()
        };
        let bytes = map
            .iter()
            .map(|(k, v)| k.heap_bytes() + v.value.len() + ENTRY_OVERHEAD)
            .sum();
        Memtable {
            map,
            bytes,
            max_seq: self.max_seq,
        }
    }
}

impl Memtable {
    pub(crate) fn insert(&mut self, key: MemKey, seq: u64, value: Vec<u8>) {
        self.max_seq = self.max_seq.max(seq);
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
                self.bytes += slot.key().heap_bytes() + value.len() + ENTRY_OVERHEAD;
                slot.insert(MemValue {
                    seq,
                    value: value.into_boxed_slice(),
                });
            }
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Entries from the first key of `row` on.
    pub(crate) fn iter_from(&self, row: &[u8]) -> MemSource<'_> {
        MemSource {
            map: &self.map,
            range: self
                .map
                .range((Bound::Included(MemKey::row_start(row)), Bound::Unbounded)),
        }
    }

    /// Every entry.
    pub(crate) fn iter_all(&self) -> MemSource<'_> {
        MemSource {
            map: &self.map,
            range: self.map.range::<MemKey, _>(..),
        }
    }

    /// The greatest row strictly below `row` (`None` = below no bound: the greatest row).
    pub(crate) fn last_row_before(&self, row: Option<&[u8]>) -> Option<&[u8]> {
        let last = match row {
            Some(r) => self.map.range(..MemKey::row_start(r)).next_back(),
            None => self.map.iter().next_back(),
        };
        last.map(|(k, _)| k.row())
    }
}

/// A memtable range as an entry source.
pub(crate) struct MemSource<'a> {
    map: &'a BTreeMap<MemKey, MemValue>,
    range: std::collections::btree_map::Range<'a, MemKey, MemValue>,
}

impl<'a> EntrySource<'a> for MemSource<'a> {
    fn next_entry(&mut self) -> Result<Option<Entry<'a>>> {
        Ok(self.range.next().map(|(k, v)| Entry {
            row: k.row(),
            family: k.family(),
            qualifier: k.qualifier(),
            ts: k.ts,
            kind: k.kind,
            seq: v.seq,
            value: &v.value,
        }))
    }

    fn skip_column(
        &mut self,
        row: &[u8],
        family: &[u8],
        qualifier: Option<&[u8]>,
    ) -> Result<Option<Entry<'a>>> {
        // The greatest possible key of the column: oldest timestamp, last kind.
        let last = MemKey::new(row, family, qualifier, i64::MIN, Kind::Put);
        self.range = self.map.range((Bound::Excluded(last), Bound::Unbounded));
        self.next_entry()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn contents(m: &Memtable) -> Vec<(MemKey, u64, Vec<u8>)> {
        m.map
            .iter()
            .map(|(k, v)| (k.clone(), v.seq, v.value.to_vec()))
            .collect()
    }

    proptest! {
        /// Replay builds its memtable in bulk; it must hold exactly what inserting each entry
        /// would have: per key the highest seq, the later one on equal seqs.
        #[test]
        fn a_built_memtable_equals_one_filled_by_inserts(
            entries in proptest::collection::vec((0u8..6, 0u8..3, 0i64..4, 0u64..5, any::<u8>()), 0..200),
            in_log_order in any::<bool>(),
            chunk_len in 1usize..50,
        ) {
            let mut inserted = Memtable::default();
            let mut builder = MemtableBuilder::default();
            let mut entries = entries;
            if in_log_order {
                // As a log replays: seqs never decrease (equal seqs are one record's cells
                // or a record replayed twice).
                entries.sort_by_key(|e| e.3);
            }
            // Replay fills one builder per chunk of the log and absorbs them in order.
            let mut chunk = MemtableBuilder::default();
            for (i, (row, q, ts, seq, v)) in entries.into_iter().enumerate() {
                let key = || MemKey::new(&[b'r', row], b"f", Some(&[q]), ts, Kind::Put);
                inserted.insert(key(), seq, vec![v]);
                InsertEntry::insert(&mut chunk, key(), seq, vec![v]);
                if i % chunk_len == 0 {
                    builder.absorb(std::mem::take(&mut chunk));
                }
            }
            builder.absorb(chunk);
            let upper = builder.bytes();
            let built = builder.build();
            prop_assert_eq!(contents(&built), contents(&inserted));
            prop_assert_eq!(built.bytes(), inserted.bytes());
            prop_assert!(upper >= built.bytes());
            prop_assert_eq!(built.max_seq, inserted.max_seq);
        }
    }
}
