//! Salting: the stable hash that places every row key in a salt bucket.
//!
//! `bucket = xxh3_64(input, seed 0) % buckets`, where `input` is the whole row key, or, when the
//! table declares `prefix_len = p`, the first `p` bytes of the key (a key shorter than `p` is
//! hashed whole). XXH3-64 is specified byte for byte by the xxHash project and does not depend on
//! the platform's endianness, so the mapping is identical across restarts, machines and versions
//! of Kura. Changing it would silently move rows between regions: the fixed vectors in the tests
//! below must never change.
//!
//! This module also owns the two types that name buckets: [`SaltBucket`], one bucket, and
//! [`BucketRange`], the contiguous buckets a region owns, with the arithmetic of splitting one.
//!
//! # Invariants
//! 1. `bucket_of(key, salt) < salt.buckets` for every key (`buckets` is at least 1).
//! 2. Two keys sharing their first `prefix_len` bytes land in the same bucket.
//! 3. The function is pure: same key and config, same bucket, forever.
//! 4. A [`BucketRange`] is never empty: `start < end`.

use crate::catalog::SaltConfig;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Bound;
use xxhash_rust::xxh3::xxh3_64;

/// One salt bucket of a table: the number `xxh3_64(key or its prefix) % buckets` that places a
/// row in a region ([`bucket_of`]).
///
/// Invariant: below its table's bucket count (`SaltConfig::buckets`, at most 65,536), which is
/// fixed when the table is created. The number is raw only at the edges: the catalog file
/// (where it is the bare number, `serde(transparent)`), the operators' views and the HTTP API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SaltBucket(u32);

impl SaltBucket {
    /// Bucket number `n` (a number from an operator, a file or a test: the caller checks it
    /// against the table's bucket count).
    pub const fn new(n: u32) -> Self {
        SaltBucket(n)
    }

    /// The bucket's number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The bucket's position in a per-bucket array of its table (`buckets` long).
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for SaltBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The salt buckets `[start, end)` of one table that a region owns (or that a request believes
/// it owns).
///
/// Invariants: never empty (`start < end`), and `end` is at most the table's bucket count. A
/// table's regions' ranges tile `[0, buckets)` ([`BucketRange::even`] makes such a tiling,
/// [`BucketRange::split_at`] cuts one range into two that tile it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BucketRange {
    start: u32,
    end: u32,
}

impl BucketRange {
    /// `[start, end)`, or `None` when it would be empty (an edge: the catalog file, an
    /// operator's input).
    pub const fn new(start: u32, end: u32) -> Option<Self> {
        if start < end {
            Some(BucketRange { start, end })
        } else {
            None
        }
    }

    /// Every bucket of a table with `buckets` buckets (zero behaves as one, as in
    /// [`bucket_of`]).
    pub fn whole(buckets: u32) -> Self {
        BucketRange {
            start: 0,
            end: buckets.max(1),
        }
    }

    /// `buckets` buckets cut into `regions` contiguous, nearly equal ranges (at most one per
    /// bucket, at least one), in order.
    pub fn even(buckets: u32, regions: u32) -> Vec<Self> {
        let buckets = buckets.max(1);
        let regions = regions.clamp(1, buckets);
        (0..regions)
            .map(|i| {
                // Below `buckets`, so the casts cannot truncate; consecutive values differ
                // because `regions <= buckets`.
                let start = (u64::from(buckets) * u64::from(i) / u64::from(regions)) as u32;
                let end = (u64::from(buckets) * u64::from(i + 1) / u64::from(regions)) as u32;
                BucketRange { start, end }
            })
            .collect()
    }

    /// The first bucket.
    pub fn first(self) -> SaltBucket {
        SaltBucket(self.start)
    }

    /// `(start, end)` as raw numbers, for the edges: the catalog file and the operators' views.
    pub fn bounds(self) -> (u32, u32) {
        (self.start, self.end)
    }

    /// How many buckets the range holds (at least one).
    pub fn bucket_count(self) -> u32 {
        self.end - self.start
    }

    /// True if the range holds `b`.
    pub fn contains(self, b: SaltBucket) -> bool {
        self.start <= b.0 && b.0 < self.end
    }

    /// True if every bucket of the range is below `b`.
    pub fn is_below(self, b: SaltBucket) -> bool {
        self.end <= b.0
    }

    /// True if the range holds every bucket of a table with `buckets` buckets.
    pub fn is_whole(self, buckets: u32) -> bool {
        self.start == 0 && self.end >= buckets
    }

    /// True if the two ranges share a bucket.
    pub fn overlaps(self, other: BucketRange) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// The buckets both ranges hold, if any.
    pub fn intersection(self, other: BucketRange) -> Option<BucketRange> {
        BucketRange::new(self.start.max(other.start), self.end.min(other.end))
    }

    /// The default split point: the bucket in the middle, which starts the upper half. Strictly
    /// inside the range when it holds two buckets or more.
    pub fn middle(self) -> SaltBucket {
        SaltBucket(self.start + self.bucket_count() / 2)
    }

    /// The range cut before bucket `at`: `([start, at), [at, end))`, or `None` unless `at` is
    /// strictly inside (both halves non-empty).
    pub fn split_at(self, at: SaltBucket) -> Option<(BucketRange, BucketRange)> {
        Some((
            BucketRange::new(self.start, at.0)?,
            BucketRange::new(at.0, self.end)?,
        ))
    }
}

impl fmt::Display for BucketRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.start, self.end)
    }
}

/// The bytes of `key` that are hashed under `salt`.
pub fn hashed_part<'a>(key: &'a [u8], salt: &SaltConfig) -> &'a [u8] {
    match salt.prefix_len {
        Some(p) if (p as usize) < key.len() => &key[..p as usize],
        _ => key,
    }
}

/// The salt bucket of a row key.
pub fn bucket_of(key: &[u8], salt: &SaltConfig) -> SaltBucket {
    let buckets = u64::from(salt.buckets.max(1));
    // The remainder is < buckets <= u32::MAX, so the cast cannot truncate.
    SaltBucket((xxh3_64(hashed_part(key, salt)) % buckets) as u32)
}

/// The smallest key greater than every key that starts with `prefix`, or `None` when no such
/// key exists (the prefix is all `0xFF`).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut next = prefix.to_vec();
    while let Some(last) = next.pop() {
        if last != 0xFF {
            next.push(last + 1);
            return Some(next);
        }
    }
    None
}

/// The single bucket every row in `[low, high]` hashes to, when the table hashes a key prefix
/// and the whole range lies inside one prefix; `None` when the range may span several buckets.
///
/// The range lies inside prefix `P` (the first `p` bytes of the low bound) iff the low bound is
/// at least `p` bytes long and the high bound does not pass `successor(P)`: every key `k` with
/// `P <= low <= k < successor(P)` starts with `P`, so it is at least `p` bytes long and hashes
/// exactly `P`.
pub fn pinned_bucket(
    low: &Bound<Vec<u8>>,
    high: &Bound<Vec<u8>>,
    salt: &SaltConfig,
) -> Option<SaltBucket> {
    let p = salt.prefix_len? as usize;
    let low_key = match low {
        Bound::Included(k) | Bound::Excluded(k) => k,
        Bound::Unbounded => return None,
    };
    if low_key.len() < p {
        return None;
    }
    let prefix = &low_key[..p];
    let fits = match (prefix_successor(prefix), high) {
        (None, _) => true,
        (Some(_), Bound::Unbounded) => false,
        (Some(succ), Bound::Excluded(h)) => h.as_slice() <= succ.as_slice(),
        (Some(succ), Bound::Included(h)) => h.as_slice() < succ.as_slice(),
    };
    fits.then(|| bucket_of(prefix, salt))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(buckets: u32) -> SaltConfig {
        SaltConfig {
            buckets,
            prefix_len: None,
        }
    }

    #[test]
    fn xxh3_matches_the_reference_vector_for_empty_input() {
        // XXH3_64bits("") with seed 0, as published by the xxHash project.
        assert_eq!(xxh3_64(b""), 0x2D06_8005_38D3_94C2);
    }

    #[test]
    fn buckets_are_fixed_forever() {
        // Regression vectors: these placements are persisted implicitly in every data directory.
        let cases: &[(&[u8], u32, Option<u32>, u32)] = &[
            (b"", 256, None, (0x2D06_8005_38D3_94C2u64 % 256) as u32),
            (b"row-1", 256, None, FIXED[0]),
            (b"row-2", 256, None, FIXED[1]),
            (b"user42/article/0001", 64, None, FIXED[2]),
            (b"user42/article/0001", 64, Some(6), FIXED[3]),
            (b"user42", 64, None, FIXED[3]),
            (b"\x00\xff\x10", 7, None, FIXED[4]),
        ];
        for (key, buckets, prefix_len, expected) in cases {
            let salt = SaltConfig {
                buckets: *buckets,
                prefix_len: *prefix_len,
            };
            assert_eq!(bucket_of(key, &salt).get(), *expected, "key {key:?}");
        }
    }

    const FIXED: [u32; 5] = [123, 113, 4, 60, 3];

    #[test]
    fn xxh3_values_of_the_fixed_keys_never_change() {
        assert_eq!(xxh3_64(b"row-1"), 0xfb64_f069_b630_6f7b);
        assert_eq!(xxh3_64(b"row-2"), 0x4186_0fec_4b1f_1371);
        assert_eq!(xxh3_64(b"user42/article/0001"), 0xef4e_4b85_2ed1_7344);
        assert_eq!(xxh3_64(b"user42"), 0x9fdc_8e44_c5b9_267c);
        assert_eq!(xxh3_64(b"\x00\xff\x10"), 0xa437_9406_eab4_1d2f);
    }

    #[test]
    fn rows_sharing_a_prefix_share_a_bucket() {
        let salt = SaltConfig {
            buckets: 1024,
            prefix_len: Some(4),
        };
        let b = bucket_of(b"abcd", &salt);
        for suffix in 0..100u32 {
            let mut key = b"abcd".to_vec();
            key.extend_from_slice(&suffix.to_be_bytes());
            assert_eq!(bucket_of(&key, &salt), b);
        }
        // A key shorter than the prefix is hashed whole.
        assert_eq!(
            bucket_of(b"ab", &salt).get(),
            (xxh3_64(b"ab") % 1024) as u32
        );
    }

    #[test]
    fn buckets_stay_in_range_and_spread() {
        let salt = whole(16);
        let mut seen = [0u32; 16];
        for i in 0..16_000u32 {
            let b = bucket_of(format!("k{i:08}").as_bytes(), &salt);
            assert!(b.get() < 16);
            seen[b.index()] += 1;
        }
        // Sequential keys must spread (P1): every bucket within 20% of the mean.
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert_eq!(
            bucket_of(b"anything", &whole(0)).get(),
            0,
            "zero buckets behaves as one"
        );
    }

    #[test]
    fn prefix_successor_carries_over_ff() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        assert_eq!(prefix_successor(b""), None);
    }

    fn range(start: u32, end: u32) -> BucketRange {
        BucketRange::new(start, end).expect("non-empty")
    }

    #[test]
    fn even_ranges_tile_the_buckets() {
        let bounds = |b, r| {
            BucketRange::even(b, r)
                .into_iter()
                .map(BucketRange::bounds)
                .collect::<Vec<_>>()
        };
        assert_eq!(bounds(8, 4), vec![(0, 2), (2, 4), (4, 6), (6, 8)]);
        assert_eq!(bounds(3, 8), vec![(0, 1), (1, 2), (2, 3)]);
        assert_eq!(bounds(16, 0), vec![(0, 16)]);
        let l = bounds(256, 7);
        assert_eq!(l.first().map(|r| r.0), Some(0));
        assert_eq!(l.last().map(|r| r.1), Some(256));
        assert!(l.windows(2).all(|w| w[0].1 == w[1].0 && w[0].0 < w[0].1));
    }

    #[test]
    fn an_empty_bucket_range_cannot_be_made() {
        assert_eq!(BucketRange::new(3, 3), None);
        assert_eq!(BucketRange::new(4, 3), None);
        assert_eq!(BucketRange::whole(0), range(0, 1));
    }

    #[test]
    fn a_split_point_must_be_strictly_inside_the_range() {
        let r = range(4, 12);
        assert_eq!(r.middle(), SaltBucket::new(8));
        assert_eq!(
            r.split_at(SaltBucket::new(5)),
            Some((range(4, 5), range(5, 12)))
        );
        assert_eq!(r.split_at(SaltBucket::new(4)), None);
        assert_eq!(r.split_at(SaltBucket::new(12)), None);
        assert_eq!(r.split_at(SaltBucket::new(3)), None);
        let two = range(6, 8);
        assert_eq!(two.split_at(two.middle()), Some((range(6, 7), range(7, 8))));
        assert_eq!(range(6, 7).split_at(range(6, 7).middle()), None);
    }

    #[test]
    fn ranges_answer_membership_overlap_and_intersection() {
        let r = range(4, 8);
        assert!(r.contains(SaltBucket::new(4)) && r.contains(SaltBucket::new(7)));
        assert!(!r.contains(SaltBucket::new(8)) && !r.contains(SaltBucket::new(3)));
        assert!(r.is_below(SaltBucket::new(8)) && !r.is_below(SaltBucket::new(7)));
        assert!(r.overlaps(range(7, 9)) && !r.overlaps(range(8, 9)));
        assert_eq!(r.intersection(range(6, 20)), Some(range(6, 8)));
        assert_eq!(r.intersection(range(0, 4)), None);
        assert!(range(0, 16).is_whole(16) && !range(1, 16).is_whole(16));
        assert_eq!(r.to_string(), "[4, 8)");
    }

    #[test]
    fn a_range_inside_one_prefix_pins_one_bucket() {
        let salt = SaltConfig {
            buckets: 64,
            prefix_len: Some(3),
        };
        let inc = |k: &[u8]| Bound::Included(k.to_vec());
        let exc = |k: &[u8]| Bound::Excluded(k.to_vec());
        let want = Some(bucket_of(b"u01", &salt));
        assert_eq!(pinned_bucket(&inc(b"u01"), &exc(b"u02"), &salt), want);
        assert_eq!(pinned_bucket(&inc(b"u01/a"), &inc(b"u01/z"), &salt), want);
        assert_eq!(pinned_bucket(&exc(b"u01/a"), &exc(b"u01/b"), &salt), want);
        assert_eq!(pinned_bucket(&inc(b"u01"), &inc(b"u02"), &salt), None);
        assert_eq!(pinned_bucket(&inc(b"u0"), &exc(b"u01"), &salt), None);
        assert_eq!(pinned_bucket(&inc(b"u01"), &Bound::Unbounded, &salt), None);
        assert_eq!(pinned_bucket(&Bound::Unbounded, &exc(b"u02"), &salt), None);
        assert_eq!(pinned_bucket(&inc(b"u01"), &exc(b"u02"), &whole(64)), None);
        let ff = SaltConfig {
            buckets: 64,
            prefix_len: Some(1),
        };
        assert_eq!(
            pinned_bucket(&inc(b"\xffa"), &Bound::Unbounded, &ff),
            Some(bucket_of(b"\xff", &ff))
        );
    }
}
