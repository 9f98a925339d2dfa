//! Internal keys: how cells and delete markers are ordered inside the engine.
//!
//! An entry is `(row, family, qualifier?, timestamp, kind, seq) -> value`. Order:
//! 1. row, family: unsigned bytes ascending;
//! 2. qualifier: `None` (a family delete marker) before every `Some(q)`, then bytes ascending;
//! 3. timestamp **descending**;
//! 4. kind: `DeleteFamily < DeleteColumn < DeleteVersion < Put`, so at an equal timestamp a
//!    marker is seen before the puts it masks;
//! 5. seq (the store's write sequence number) **descending**: the latest write of an identical
//!    key comes first and wins.
//!
//! # Invariants
//! 1. `DeleteFamily` entries have `qualifier == None`; every other kind has `Some`.
//! 2. [`cmp_entries`] and `Ord for MemKey` (ignoring seq) agree.

use std::cmp::Ordering;

/// Bytes an in-memory entry is charged on top of its key and value (tree node share, lengths,
/// seq): the memtable and the replayed log count entries alike, so flush and spill decisions do
/// not depend on which of the two holds them.
pub(crate) const ENTRY_OVERHEAD: usize = 64;

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub(crate) enum Kind {
    DeleteFamily = 0,
    DeleteColumn = 1,
    DeleteVersion = 2,
    Put = 3,
}

impl Kind {
    pub(crate) fn from_u8(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::DeleteFamily),
            1 => Some(Kind::DeleteColumn),
            2 => Some(Kind::DeleteVersion),
            3 => Some(Kind::Put),
            _ => None,
        }
    }
}

/// A borrowed entry, from the memtable or a segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry<'a> {
    pub row: &'a [u8],
    pub family: &'a [u8],
    pub qualifier: Option<&'a [u8]>,
    pub ts: i64,
    pub kind: Kind,
    pub seq: u64,
    pub value: &'a [u8],
}

impl Entry<'_> {
    /// True if both entries have the same key apart from seq.
    pub(crate) fn same_key(&self, o: &Entry<'_>) -> bool {
        self.row == o.row
            && self.family == o.family
            && self.qualifier == o.qualifier
            && self.ts == o.ts
            && self.kind == o.kind
    }
}

/// The engine's total order over entries.
pub(crate) fn cmp_entries(a: &Entry<'_>, b: &Entry<'_>) -> Ordering {
    a.row
        .cmp(b.row)
        .then_with(|| a.family.cmp(b.family))
        .then_with(|| a.qualifier.cmp(&b.qualifier))
        .then_with(|| b.ts.cmp(&a.ts))
        .then_with(|| a.kind.cmp(&b.kind))
        .then_with(|| b.seq.cmp(&a.seq))
}

/// A memtable key: row, family and qualifier in one allocation, ordered as [`cmp_entries`]
/// without seq (the memtable keeps only the latest write of identical keys).
#[derive(Clone, Debug)]
pub(crate) struct MemKey {
    /// The row's first 16 bytes, zero-padded, big-endian: when two prefixes differ they order
    /// the rows exactly as the bytes do, so most comparisons never touch the heap.
    row_prefix: u128,
    data: Box<[u8]>,
    row_len: u32,
    fam_len: u32,
    has_qual: bool,
    pub ts: i64,
    pub kind: Kind,
}

impl MemKey {
    pub(crate) fn new(
        row: &[u8],
        family: &[u8],
        qualifier: Option<&[u8]>,
        ts: i64,
        kind: Kind,
    ) -> MemKey {
        let q = qualifier.unwrap_or(&[]);
        let mut data = Vec::with_capacity(row.len() + family.len() + q.len());
        data.extend_from_slice(row);
        data.extend_from_slice(family);
        data.extend_from_slice(q);
        let mut prefix = [0u8; 16];
        let n = row.len().min(16);
        prefix[..n].copy_from_slice(&row[..n]);
        MemKey {
            row_prefix: u128::from_be_bytes(prefix),
            data: data.into_boxed_slice(),
            row_len: row.len() as u32,
            fam_len: family.len() as u32,
            has_qual: qualifier.is_some(),
            ts,
            kind,
        }
    }

    /// The smallest key of `row`.
    pub(crate) fn row_start(row: &[u8]) -> MemKey {
        MemKey::new(row, &[], None, i64::MAX, Kind::DeleteFamily)
    }

    pub(crate) fn row(&self) -> &[u8] {
        &self.data[..self.row_len as usize]
    }

    pub(crate) fn family(&self) -> &[u8] {
        &self.data[self.row_len as usize..(self.row_len + self.fam_len) as usize]
    }

    pub(crate) fn qualifier(&self) -> Option<&[u8]> {
        if self.has_qual {
            Some(&self.data[(self.row_len + self.fam_len) as usize..])
        } else {
            None
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.data.len()
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for MemKey {}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MemKey {
    fn cmp(&self, o: &Self) -> Ordering {
        self.row_prefix
            .cmp(&o.row_prefix)
            .then_with(|| self.row().cmp(o.row()))
            .then_with(|| self.family().cmp(o.family()))
            .then_with(|| self.qualifier().cmp(&o.qualifier()))
            .then_with(|| o.ts.cmp(&self.ts))
            .then_with(|| self.kind.cmp(&o.kind))
    }
}

/// The smallest row strictly greater than `row`.
pub(crate) fn row_successor(row: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(row.len() + 1);
    r.extend_from_slice(row);
    r.push(0);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(
        row: &'static [u8],
        q: Option<&'static [u8]>,
        ts: i64,
        kind: Kind,
        seq: u64,
    ) -> Entry<'static> {
        Entry {
            row,
            family: b"f",
            qualifier: q,
            ts,
            kind,
            seq,
            value: b"",
        }
    }

    #[test]
    fn family_marker_sorts_before_every_qualifier_and_deletes_before_puts() {
        let a = e(b"r", None, 1, Kind::DeleteFamily, 1);
        let b = e(b"r", Some(b""), 9, Kind::Put, 2);
        assert_eq!(cmp_entries(&a, &b), Ordering::Less);
        let c = e(b"r", Some(b"q"), 5, Kind::DeleteColumn, 1);
        let d = e(b"r", Some(b"q"), 5, Kind::Put, 9);
        assert_eq!(cmp_entries(&c, &d), Ordering::Less);
        let newer = e(b"r", Some(b"q"), 7, Kind::Put, 1);
        assert_eq!(
            cmp_entries(&newer, &d),
            Ordering::Less,
            "higher timestamp first"
        );
        let later = e(b"r", Some(b"q"), 5, Kind::Put, 10);
        assert_eq!(cmp_entries(&later, &d), Ordering::Less, "higher seq first");
    }

    #[test]
    fn memkey_order_matches_entry_order() {
        let keys = [
            MemKey::new(b"a", b"f", None, 3, Kind::DeleteFamily),
            MemKey::new(b"a", b"f", Some(b""), 3, Kind::Put),
            MemKey::new(b"a", b"f", Some(b"q"), 9, Kind::Put),
            MemKey::new(b"a", b"f", Some(b"q"), 3, Kind::DeleteColumn),
            MemKey::new(b"a", b"f", Some(b"q"), 3, Kind::Put),
            MemKey::new(b"a", b"g", None, 3, Kind::DeleteFamily),
            MemKey::new(b"ab", b"", None, 3, Kind::DeleteFamily),
        ];
        for w in keys.windows(2) {
            assert!(w[0] < w[1], "{:?} < {:?}", w[0], w[1]);
        }
        assert!(MemKey::row_start(b"a") < keys[0]);
    }

    #[test]
    fn memkey_row_order_is_byte_order_even_with_zero_bytes_and_short_rows() {
        let rows: [&[u8]; 18] = [
            b"",
            b"\0",
            b"\0\0",
            b"a",
            b"ab",
            b"ab\0",
            b"ab\0\x01",
            b"abcdefgh",
            b"abcdefgh\0",
            b"0123456789abcdef",
            b"0123456789abcdef\0",
            b"0123456789abcdef0123456",
            b"0123456789abcdef0123456\0\x01",
            b"0123456789abcdef01234567",
            b"0123456789abcdef01234567\0",
            b"0123456789abcdef01234568",
            b"0123456789abcdef0123456789",
            b"0123456789abcdeg",
        ];
        for a in rows {
            for b in rows {
                let ka = MemKey::new(a, b"f", Some(b"q"), 1, Kind::Put);
                let kb = MemKey::new(b, b"f", Some(b"q"), 1, Kind::Put);
                assert_eq!(ka.cmp(&kb), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    proptest::proptest! {
        /// Rows of a few byte values (zeros included), up to 40 bytes: whatever the inline
        /// prefix holds, keys order as their rows' bytes.
        #[test]
        fn memkey_row_order_is_byte_order_for_any_rows(
            a in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, b'0', b'9']), 0..40),
            b in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, b'0', b'9']), 0..40),
        ) {
            let ka = MemKey::new(&a, b"f", None, 1, Kind::Put);
            let kb = MemKey::new(&b, b"f", None, 1, Kind::Put);
            proptest::prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
        }
    }
}
