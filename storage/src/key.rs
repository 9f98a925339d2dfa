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

/// Bytes of row ‖ family ‖ qualifier a [`MemKey`] holds in itself; longer keys go to the heap.
/// Sized so that a key stays 64 bytes (one cache line in the tree's node): HBase
/// PerformanceEvaluation's 26-digit rows with a short column (31 bytes) fit, as do most salted,
/// reversed-domain and id keys.
const INLINE: usize = 38;

/// Bytes of the row a heap-held [`MemKey`] keeps beside its pointer.
const HEAD: usize = 22;

// A key reads its row's first sixteen bytes from either array, the next sixteen inline.
const _: () = assert!(INLINE >= 32 && HEAD >= 16 && INLINE <= u8::MAX as usize);

/// A memtable key: row, family and qualifier, ordered as [`cmp_entries`] without seq (the
/// memtable keeps only the latest write of identical keys).
///
/// # Invariants
/// 1. `bytes` holds row ‖ family ‖ qualifier: in the key when they fit in [`INLINE`] bytes,
///    else on the heap with the row's first [`HEAD`] bytes (or the whole row, if shorter)
///    beside the pointer. A comparison reads the heap only when two rows tie on all the bytes
///    both keys hold in themselves, so short keys never leave the tree's node.
/// 2. `size_of::<MemKey>() == 64` (a test holds it): larger keys make every node larger.
#[derive(Clone, Debug)]
pub(crate) struct MemKey {
    bytes: KeyBytes,
    row_len: u32,
    fam_len: u32,
    pub ts: i64,
    has_qual: bool,
    pub kind: Kind,
}

#[derive(Clone, Debug)]
enum KeyBytes {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap { head: [u8; HEAD], data: Box<[u8]> },
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
        let len = row.len() + family.len() + q.len();
        let bytes = if len <= INLINE {
            let mut buf = [0u8; INLINE];
            buf[..row.len()].copy_from_slice(row);
            buf[row.len()..row.len() + family.len()].copy_from_slice(family);
            buf[row.len() + family.len()..len].copy_from_slice(q);
            KeyBytes::Inline {
                len: len as u8,
                buf,
            }
        } else {
            let mut data = Vec::with_capacity(len);
            data.extend_from_slice(row);
            data.extend_from_slice(family);
            data.extend_from_slice(q);
            let mut head = [0u8; HEAD];
            let n = row.len().min(HEAD);
            head[..n].copy_from_slice(&row[..n]);
            KeyBytes::Heap {
                head,
                data: data.into_boxed_slice(),
            }
        };
        MemKey {
            bytes,
            row_len: row.len() as u32,
            fam_len: family.len() as u32,
            ts,
            has_qual: qualifier.is_some(),
            kind,
        }
    }

    /// The smallest key of `row`.
    pub(crate) fn row_start(row: &[u8]) -> MemKey {
        MemKey::new(row, &[], None, i64::MAX, Kind::DeleteFamily)
    }

    /// Row ‖ family ‖ qualifier.
    fn data(&self) -> &[u8] {
        match &self.bytes {
            KeyBytes::Inline { len, buf } => &buf[..*len as usize],
            KeyBytes::Heap { data, .. } => data,
        }
    }

    /// The row's bytes this key holds in itself, and whether they are the whole row.
    #[inline]
    fn row_head(&self) -> (&[u8], bool) {
        let n = self.row_len as usize;
        match &self.bytes {
            KeyBytes::Inline { buf, .. } => (&buf[..n], true),
            KeyBytes::Heap { head, .. } => (&head[..n.min(HEAD)], n <= HEAD),
        }
    }

    pub(crate) fn row(&self) -> &[u8] {
        &self.data()[..self.row_len as usize]
    }

    pub(crate) fn family(&self) -> &[u8] {
        &self.data()[self.row_len as usize..(self.row_len + self.fam_len) as usize]
    }

    pub(crate) fn qualifier(&self) -> Option<&[u8]> {
        if self.has_qual {
            Some(&self.data()[(self.row_len + self.fam_len) as usize..])
        } else {
            None
        }
    }

    /// Bytes of the row, family and qualifier: what the memtable charges for a key, held inline
    /// or on the heap alike (the replayed part charges its entries the same).
    pub(crate) fn key_len(&self) -> usize {
        self.data().len()
    }

    /// Whether the key's bytes are held on the heap.
    #[cfg(test)]
    fn on_heap(&self) -> bool {
        matches!(self.bytes, KeyBytes::Heap { .. })
    }

    /// The row's first sixteen bytes as a [`word`].
    #[inline]
    fn row_word(&self) -> u128 {
        match &self.bytes {
            KeyBytes::Inline { buf, .. } => word(buf, 0, self.row_len),
            KeyBytes::Heap { head, .. } => word(head, 0, self.row_len),
        }
    }

    /// The order of two keys whose rows' first sixteen bytes tie as [`word`]s: by the row
    /// lengths if both end there, by the next sixteen bytes if both are held inline and end
    /// within them, else by [`MemKey::cmp_rows_held`]; then by the columns. Out of line, and
    /// the rarer steps out of it, so that the comparisons a search makes stay small.
    #[inline(never)]
    fn cmp_after_first_word(&self, o: &Self) -> Ordering {
        let (la, lb) = (self.row_len, o.row_len);
        let rows = match (&self.bytes, &o.bytes) {
            _ if la <= 16 && lb <= 16 => la.cmp(&lb),
            (KeyBytes::Inline { buf: a, .. }, KeyBytes::Inline { buf: b, .. })
                if la <= 32 && lb <= 32 =>
            {
                word(a, 16, la).cmp(&word(b, 16, lb)).then(la.cmp(&lb))
            }
            _ => self.cmp_rows_held(o),
        };
        match rows {
            Ordering::Equal => self.cmp_columns(o),
            unequal => unequal,
        }
    }

    /// Two rows by the bytes both keys hold in themselves, the heap only when those tie.
    #[inline(never)]
    fn cmp_rows_held(&self, o: &Self) -> Ordering {
        let ((a, a_whole), (b, b_whole)) = (self.row_head(), o.row_head());
        if a_whole && b_whole {
            return a.cmp(b);
        }
        let n = a.len().min(b.len());
        a[..n].cmp(&b[..n]).then_with(|| self.row().cmp(o.row()))
    }

    /// Two keys of one row: family, qualifier, timestamp (descending), kind.
    #[inline(never)]
    fn cmp_columns(&self, o: &Self) -> Ordering {
        self.family()
            .cmp(o.family())
            .then_with(|| self.qualifier().cmp(&o.qualifier()))
            .then_with(|| o.ts.cmp(&self.ts))
            .then_with(|| self.kind.cmp(&o.kind))
    }
}

/// Bytes `at..at + 16` of a row of `row_len` bytes held at the start of `held`, those past
/// the row zeroed, as a big-endian word: when two rows' words at the same offset differ (their
/// bytes before it equal) they order the rows as their bytes do, since zero padding never puts
/// a shorter row after a longer one that begins with it. Equal words say nothing, unless both
/// rows end within them: then the shorter row is the smaller.
#[inline]
fn word(held: &[u8], at: usize, row_len: u32) -> u128 {
    let bytes: [u8; 16] = held[at..at + 16].try_into().expect("16 bytes");
    let left = (row_len as usize).saturating_sub(at).min(16);
    u128::from_be_bytes(bytes) & WORD_MASKS[left]
}

/// `WORD_MASKS[n]` keeps a word's first `n` bytes (a table: shifts of a `u128` by a variable
/// amount cost a dozen instructions and a branch).
const WORD_MASKS: [u128; 17] = {
    let mut masks = [u128::MAX; 17];
    let mut n = 0;
    while n < 16 {
        masks[n] = !(u128::MAX >> (8 * n));
        n += 1;
    }
    masks
};

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
    /// Rows by their first sixteen bytes as one word: for most keys the whole comparison.
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        match self.row_word().cmp(&o.row_word()) {
            Ordering::Equal => self.cmp_after_first_word(o),
            unequal => unequal,
        }
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

    #[test]
    fn memkey_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<MemKey>(), 64);
    }

    #[test]
    fn memkey_gives_back_its_parts_held_inline_or_on_the_heap() {
        let long = [b'x'; 50];
        for (row, family, qualifier) in [
            (&b"r"[..], &b"f"[..], Some(&b"q"[..])),
            (
                &b"00000000000000000000001234"[..],
                &b"info"[..],
                Some(&b"0"[..]),
            ),
            (&long[..], &b"f"[..], None),
            (&b"r"[..], &b"f"[..], Some(&long[..])),
            (&long[..30], &b"family"[..], Some(&b"q"[..])),
        ] {
            let k = MemKey::new(row, family, qualifier, 7, Kind::Put);
            assert_eq!(k.row(), row);
            assert_eq!(k.family(), family);
            assert_eq!(k.qualifier(), qualifier);
            let len = row.len() + family.len() + qualifier.map_or(0, <[u8]>::len);
            assert_eq!(k.key_len(), len);
            assert_eq!(k.on_heap(), len > INLINE, "{len} bytes");
        }
    }

    fn bytes_of(
        values: &'static [u8],
        len: usize,
    ) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        proptest::collection::vec(proptest::sample::select(values), 0..len)
    }

    /// Row, family, qualifier, timestamp and kind of a generated key.
    type Parts = (Vec<u8>, Vec<u8>, Option<Vec<u8>>, i64, u8);

    fn key_of((row, family, qualifier, ts, kind): &Parts) -> MemKey {
        let kind = Kind::from_u8(*kind).expect("kind");
        MemKey::new(row, family, qualifier.as_deref(), *ts, kind)
    }

    fn entry_of((row, family, qualifier, ts, kind): &Parts) -> Entry<'_> {
        Entry {
            row,
            family,
            qualifier: qualifier.as_deref(),
            ts: *ts,
            kind: Kind::from_u8(*kind).expect("kind"),
            seq: 0,
            value: b"",
        }
    }

    proptest::proptest! {
        /// Rows of a few byte values (zeros included), up to 40 bytes: whatever the inline
        /// prefix holds, keys order as their rows' bytes.
        #[test]
        fn memkey_row_order_is_byte_order_for_any_rows(
            a in bytes_of(&[0, 1, b'0', b'9'], 40),
            b in bytes_of(&[0, 1, b'0', b'9'], 40),
        ) {
            let ka = MemKey::new(&a, b"f", None, 1, Kind::Put);
            let kb = MemKey::new(&b, b"f", None, 1, Kind::Put);
            proptest::prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
        }

        /// Whole keys, short enough to be held inline or long enough for the heap, whose rows
        /// share a prefix of up to 40 bytes (on both sides of what a heap key keeps beside its
        /// pointer): they order as [`cmp_entries`] orders their entries.
        #[test]
        fn memkey_order_is_entry_order_inline_or_on_the_heap(
            shared in bytes_of(&[0, b'0', b'9'], 40),
            a in (bytes_of(&[0, b'0', b'9'], 4), bytes_of(b"fg", 3), proptest::option::of(bytes_of(b"pq", 12)), 0i64..3, 0u8..4),
            b in (bytes_of(&[0, b'0', b'9'], 4), bytes_of(b"fg", 3), proptest::option::of(bytes_of(b"pq", 12)), 0i64..3, 0u8..4),
        ) {
            let with_shared = |mut p: Parts| {
                p.0.splice(0..0, shared.iter().copied());
                p
            };
            let (a, b) = (with_shared(a), with_shared(b));
            proptest::prop_assert_eq!(key_of(&a).cmp(&key_of(&b)), cmp_entries(&entry_of(&a), &entry_of(&b)));
        }
    }
}
