//! Row filters: the per-segment Bloom filters that let a point read skip the segments that
//! cannot hold its row (format: `storage/FORMAT.md` §5.4).
//!
//! Two kinds, told apart by the filter's first `u32`:
//! - [`BlockedBloom`], written by this build (segment format version 2): every probe of a row
//!   falls in one 64-byte line, chosen from the row hash by a multiply-shift, so a lookup
//!   touches one cache line and divides nothing. 10 bits and 6 probes per row: about 1% false
//!   positives.
//! - [`LegacyBloom`], the filter of version-1 segments: probes spread over the whole bit array
//!   (one cache miss each) with a 64-bit `%` per probe. Still read; this build writes it only
//!   when a test or a benchmark asks for one.
//!
//! # Invariants
//! 1. No false negatives: a row inserted before the filter was encoded is always reported as
//!    possibly present, by this build and by any later one reading the same bytes.
//! 2. [`row_hash`] and the bit layout of both kinds are part of the format: changing either
//!    bumps the segment format version.
//! 3. [`RowFilter::from_bytes`] accepts exactly the encodings of the two kinds (a known kind
//!    tag, sane parameters, a non-empty bit array whose length fits the kind) and returns `None`
//!    for anything else, unknown kinds included: never a filter that would misread the bits.
//!
//! Public so that the storage benches can compare the two kinds; the store itself uses it
//! only through its segments.

/// A stable 64-bit hash of a row key (part of the file format: never change it without a
/// format version bump).
pub fn row_hash(row: &[u8]) -> u64 {
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15 ^ row.len() as u64;
    for chunk in row.chunks(8) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^= h >> 32;
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

/// Bits per row both kinds are sized for.
const BITS_PER_ROW: u64 = 10;
/// The largest filter written, whatever the row count (32 MiB).
pub(crate) const MAX_BYTES: u64 = 32 << 20;
/// The most probes a filter may declare; more is a damaged filter.
const MAX_PROBES: u32 = 32;

/// A segment's row filter, of either kind.
#[derive(Clone, Debug)]
pub enum RowFilter {
    /// The filter this build writes.
    Blocked(BlockedBloom),
    /// The filter of version-1 segments.
    Legacy(LegacyBloom),
}

impl RowFilter {
    /// A blocked filter sized for `rows` rows (an upper bound is fine).
    pub fn blocked(rows: u64) -> RowFilter {
        RowFilter::Blocked(BlockedBloom::with_rows(rows))
    }

    /// A legacy filter sized for `rows` rows, as version-1 segments hold.
    pub fn legacy(rows: u64) -> RowFilter {
        RowFilter::Legacy(LegacyBloom::with_rows(rows))
    }

    pub fn insert(&mut self, row: &[u8]) {
        self.insert_hash(row_hash(row));
    }

    /// [`RowFilter::insert`] for a row whose [`row_hash`] is `h`.
    pub fn insert_hash(&mut self, h: u64) {
        match self {
            RowFilter::Blocked(f) => f.insert(h),
            RowFilter::Legacy(f) => f.insert(h),
        }
    }

    /// False only if `row` was never inserted.
    #[inline]
    pub fn may_contain(&self, row: &[u8]) -> bool {
        self.may_contain_hash(row_hash(row))
    }

    /// [`RowFilter::may_contain`] for a row whose [`row_hash`] is `h`: a read that consults
    /// many segments hashes its row once.
    #[inline]
    pub fn may_contain_hash(&self, h: u64) -> bool {
        match self {
            RowFilter::Blocked(f) => f.may_contain(h),
            RowFilter::Legacy(f) => f.may_contain(h),
        }
    }

    /// The encoding (FORMAT.md §5.4).
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            RowFilter::Blocked(f) => f.to_bytes(),
            RowFilter::Legacy(f) => f.to_bytes(),
        }
    }

    /// Decode either kind; `None` for an unknown kind tag or malformed bytes.
    pub fn from_bytes(b: &[u8]) -> Option<RowFilter> {
        let tag = u32::from_le_bytes(b.get(..4)?.try_into().ok()?);
        match tag {
            BlockedBloom::TAG => BlockedBloom::from_bytes(b).map(RowFilter::Blocked),
            1..=MAX_PROBES => LegacyBloom::from_bytes(b).map(RowFilter::Legacy),
            _ => None,
        }
    }
}

/// One 64-byte line of a [`BlockedBloom`], aligned in memory so that it is one cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
struct Line([u64; 8]);

/// A blocked (cache-local) Bloom filter: an array of 512-bit lines; a row sets and tests
/// `probes` bits, all in the line its hash chooses.
///
/// For row hash `h`: line `((h >> 32) * lines) >> 32` (a multiply-shift onto `0..lines`, no
/// division); then, from `g = h as u32` (bits independent of the line choice), probe `i` is
/// bit `g_i >> 23` of the line (its top 9 bits: 0..512), with `g_0 = g` and
/// `g_{i+1} = g_i * 0x9E3779B9` (wrapping u32).
#[derive(Clone, Debug)]
pub struct BlockedBloom {
    probes: u32,
    lines: Vec<Line>,
}

impl BlockedBloom {
    /// The kind tag, the filter's first `u32` (the bytes "BLK1"): far outside the legacy
    /// probe counts 1..=32, so that a reader knowing only the legacy kind refuses it.
    pub const TAG: u32 = u32::from_le_bytes(*b"BLK1");
    /// Probes per row at 10 bits per row (more would fill a line's 512 bits faster than they
    /// sharpen the test).
    const PROBES: u32 = 6;
    const LINE_BITS: u64 = 512;
    /// Tag and probe count.
    const HEADER: usize = 8;

    pub fn with_rows(rows: u64) -> BlockedBloom {
        let lines = rows
            .saturating_mul(BITS_PER_ROW)
            .div_ceil(Self::LINE_BITS)
            .clamp(1, MAX_BYTES / 64);
        BlockedBloom {
            probes: Self::PROBES,
            lines: vec![Line::default(); lines as usize],
        }
    }

    /// The line row hash `h` falls in: fastrange of the hash's upper half onto the lines.
    #[inline]
    fn line(&self, h: u64) -> usize {
        (((h >> 32) * self.lines.len() as u64) >> 32) as usize
    }

    pub fn insert(&mut self, h: u64) {
        let probes = self.probes;
        let i = self.line(h);
        let line = &mut self.lines[i];
        let mut g = h as u32;
        for _ in 0..probes {
            let bit = g >> 23;
            line.0[(bit >> 6) as usize] |= 1 << (bit & 63);
            g = g.wrapping_mul(0x9E37_79B9);
        }
    }

    /// Tests every probe without an early exit: no branch waits for the line's load, so the
    /// CPU overlaps the cache misses of the filters of all the segments a read consults
    /// (one miss each) instead of taking them one after the other.
    #[inline]
    pub fn may_contain(&self, h: u64) -> bool {
        let line = &self.lines[self.line(h)];
        let mut g = h as u32;
        let mut all = 1u64;
        for _ in 0..self.probes {
            let bit = g >> 23;
            all &= line.0[(bit >> 6) as usize] >> (bit & 63);
            g = g.wrapping_mul(0x9E37_79B9);
        }
        all & 1 == 1
    }

    /// `[u32 tag "BLK1"][u32 probes][lines × 64 bytes]`, each line as eight u64 LE words.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::HEADER + self.lines.len() * 64);
        out.extend_from_slice(&Self::TAG.to_le_bytes());
        out.extend_from_slice(&self.probes.to_le_bytes());
        for line in &self.lines {
            for w in line.0 {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        out
    }

    fn from_bytes(b: &[u8]) -> Option<BlockedBloom> {
        let word = |at: usize| Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?));
        let probes = word(4)?;
        let bits = b.get(Self::HEADER..)?;
        if word(0)? != Self::TAG
            || probes == 0
            || probes > MAX_PROBES
            || bits.is_empty()
            || bits.len() % 64 != 0
        {
            return None;
        }
        let lines = bits
            .chunks_exact(64)
            .map(|c| {
                let mut line = Line::default();
                for (w, bytes) in line.0.iter_mut().zip(c.chunks_exact(8)) {
                    *w = u64::from_le_bytes(bytes.try_into().unwrap_or_default());
                }
                line
            })
            .collect();
        Some(BlockedBloom { probes, lines })
    }
}

/// The standard Bloom filter of version-1 segments: probe `i` of row hash `h` is bit
/// `(h + i * ((h >> 32) | 1)) mod (8 * bytes)` of the whole array.
#[derive(Clone, Debug)]
pub struct LegacyBloom {
    probes: u32,
    bits: Vec<u8>,
}

impl LegacyBloom {
    const PROBES: u32 = 7;

    pub fn with_rows(rows: u64) -> LegacyBloom {
        let bytes = (rows.saturating_mul(BITS_PER_ROW) / 8).clamp(8, MAX_BYTES);
        LegacyBloom {
            probes: Self::PROBES,
            bits: vec![0; bytes as usize],
        }
    }

    /// The bit positions of row hash `h` in a filter of `bytes` bytes.
    fn positions(probes: u32, bytes: usize, h: u64) -> impl Iterator<Item = usize> {
        let (h1, h2) = (h, (h >> 32) | 1);
        let m = bytes as u64 * 8;
        (0..probes as u64).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % m) as usize)
    }

    pub fn insert(&mut self, h: u64) {
        for p in Self::positions(self.probes, self.bits.len(), h) {
            self.bits[p / 8] |= 1 << (p % 8);
        }
    }

    pub fn may_contain(&self, h: u64) -> bool {
        Self::positions(self.probes, self.bits.len(), h)
            .all(|p| self.bits[p / 8] & (1 << (p % 8)) != 0)
    }

    /// `[u32 probes (1..=32)][bits]`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.bits.len());
        out.extend_from_slice(&self.probes.to_le_bytes());
        out.extend_from_slice(&self.bits);
        out
    }

    fn from_bytes(b: &[u8]) -> Option<LegacyBloom> {
        let probes = u32::from_le_bytes(b.get(..4)?.try_into().ok()?);
        let bits = b.get(4..)?.to_vec();
        if probes == 0 || probes > MAX_PROBES || bits.is_empty() {
            return None;
        }
        Some(LegacyBloom { probes, bits })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(prefix: &str, i: u64) -> Vec<u8> {
        format!("{prefix}{i:010}").into_bytes()
    }

    fn filled(mut f: RowFilter, rows: u64) -> RowFilter {
        for i in 0..rows {
            f.insert(&key("row", i));
        }
        f
    }

    /// The share of `probes` absent rows the filter lets through.
    fn false_positive_rate(f: &RowFilter, probes: u64) -> f64 {
        let passed = (0..probes)
            .filter(|i| f.may_contain(&key("absent", *i)))
            .count();
        passed as f64 / probes as f64
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn no_inserted_row_is_ever_excluded_by_either_kind(
            rows in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..300),
            sized_for in 0u64..400,
        ) {
            for mut f in [RowFilter::blocked(sized_for), RowFilter::legacy(sized_for)] {
                for r in &rows {
                    f.insert(r);
                }
                let read = RowFilter::from_bytes(&f.to_bytes()).expect("own encoding reads");
                for r in &rows {
                    prop_assert!(f.may_contain(r));
                    prop_assert!(read.may_contain(r));
                }
            }
        }
    }

    #[test]
    fn the_blocked_filter_passes_under_2_percent_of_absent_rows_at_10_bits_per_row() {
        // A fixed key set: the rate is deterministic, measured once per build.
        const ROWS: u64 = 100_000;
        let blocked = filled(RowFilter::blocked(ROWS), ROWS);
        let legacy = filled(RowFilter::legacy(ROWS), ROWS);
        assert_eq!(
            blocked.to_bytes().len() as u64,
            8 + ROWS * 10 / 512 * 64 + 64
        );
        let (b, l) = (
            false_positive_rate(&blocked, 200_000),
            false_positive_rate(&legacy, 200_000),
        );
        eprintln!("false positives at 10 bits/row: blocked {b:.4}, legacy {l:.4}");
        assert!(b < 0.02, "blocked filter: {b}");
        assert!(
            b > 0.0,
            "a filter passing nothing absent is not a 10 bits/row filter"
        );
    }

    #[test]
    fn a_filter_for_a_handful_of_rows_is_one_line_and_still_answers() {
        for rows in [0u64, 1, 3] {
            let f = filled(RowFilter::blocked(rows), rows);
            assert_eq!(f.to_bytes().len(), 8 + 64);
            assert!((0..rows).all(|i| f.may_contain(&key("row", i))));
            let l = filled(RowFilter::legacy(rows), rows);
            assert_eq!(l.to_bytes().len(), 4 + 8);
            assert!((0..rows).all(|i| l.may_contain(&key("row", i))));
        }
        // More rows than the filter was sized for: fuller, never wrong.
        let f = filled(RowFilter::blocked(1), 500);
        assert!((0..500).all(|i| f.may_contain(&key("row", i))));
    }

    #[test]
    fn a_legacy_filter_reads_back_and_answers_as_it_was_written() {
        let written = filled(RowFilter::legacy(5_000), 5_000);
        let bytes = written.to_bytes();
        assert_eq!(&bytes[..4], &7u32.to_le_bytes());
        let read = RowFilter::from_bytes(&bytes).expect("a legacy filter");
        assert!(matches!(read, RowFilter::Legacy(_)));
        assert!((0..5_000).all(|i| read.may_contain(&key("row", i))));
        // Same answers for absent rows too: the same bits, probed the same way.
        for i in 0..20_000 {
            let k = key("absent", i);
            assert_eq!(read.may_contain(&k), written.may_contain(&k));
        }
        let rate = false_positive_rate(&read, 20_000);
        assert!(rate < 0.02, "legacy filter: {rate}");
    }

    #[test]
    fn the_blocked_layout_is_the_documented_one() {
        // FORMAT.md §5.4, computed here independently of the filter's code.
        let rows = 2_000u64;
        let f = filled(RowFilter::blocked(rows), rows);
        let bytes = f.to_bytes();
        assert_eq!(&bytes[..4], b"BLK1");
        assert_eq!(&bytes[4..8], &6u32.to_le_bytes());
        let lines = ((bytes.len() - 8) / 64) as u64;
        assert_eq!(lines, (rows * 10).div_ceil(512));
        let mut expect = vec![0u8; bytes.len() - 8];
        for i in 0..rows {
            let h = row_hash(&key("row", i));
            let line = ((h >> 32) * lines) >> 32;
            let mut g = h as u32;
            for _ in 0..6 {
                let bit = line as usize * 512 + (g >> 23) as usize;
                expect[bit / 8] |= 1 << (bit % 8);
                g = g.wrapping_mul(0x9E37_79B9);
            }
        }
        assert_eq!(&bytes[8..], expect.as_slice());
    }

    #[test]
    fn an_unknown_or_malformed_filter_is_refused() {
        let blocked = filled(RowFilter::blocked(100), 100).to_bytes();
        let legacy = filled(RowFilter::legacy(100), 100).to_bytes();
        let with_word = |b: &[u8], at: usize, v: u32| {
            let mut b = b.to_vec();
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            b
        };
        let refused = [
            // Unknown kinds: tags no reader knows.
            with_word(&blocked, 0, 0),
            with_word(&blocked, 0, 33),
            with_word(&blocked, 0, BlockedBloom::TAG + 1),
            with_word(&blocked, 0, u32::MAX),
            // A blocked filter with no probes, too many, or a partial line.
            with_word(&blocked, 4, 0),
            with_word(&blocked, 4, 33),
            blocked[..blocked.len() - 1].to_vec(),
            blocked[..8].to_vec(),
            // A legacy filter without bits, too short to hold its probe count.
            legacy[..4].to_vec(),
            legacy[..3].to_vec(),
            Vec::new(),
        ];
        for (i, b) in refused.iter().enumerate() {
            assert!(RowFilter::from_bytes(b).is_none(), "case {i} accepted");
        }
    }
}
