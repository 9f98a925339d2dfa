//! Salting: the stable hash that places every row key in a salt bucket.
//!
//! `bucket = xxh3_64(input, seed 0) % buckets`, where `input` is the whole row key, or, when the
//! table declares `prefix_len = p`, the first `p` bytes of the key (a key shorter than `p` is
//! hashed whole). XXH3-64 is specified byte for byte by the xxHash project and does not depend on
//! the platform's endianness, so the mapping is identical across restarts, machines and versions
//! of Kura. Changing it would silently move rows between regions: the fixed vectors in the tests
//! below must never change.
//!
//! # Invariants
//! 1. `bucket_of(key, salt) < salt.buckets` for every key (`buckets` is at least 1).
//! 2. Two keys sharing their first `prefix_len` bytes land in the same bucket.
//! 3. The function is pure: same key and config, same bucket, forever.

use crate::catalog::SaltConfig;
use std::ops::Bound;
use xxhash_rust::xxh3::xxh3_64;

/// The bytes of `key` that are hashed under `salt`.
pub fn hashed_part<'a>(key: &'a [u8], salt: &SaltConfig) -> &'a [u8] {
    match salt.prefix_len {
        Some(p) if (p as usize) < key.len() => &key[..p as usize],
        _ => key,
    }
}

/// The salt bucket of a row key.
pub fn bucket_of(key: &[u8], salt: &SaltConfig) -> u32 {
    let buckets = u64::from(salt.buckets.max(1));
    // The remainder is < buckets <= u32::MAX, so the cast cannot truncate.
    (xxh3_64(hashed_part(key, salt)) % buckets) as u32
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
) -> Option<u32> {
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
            assert_eq!(bucket_of(key, &salt), *expected, "key {key:?}");
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
        assert_eq!(bucket_of(b"ab", &salt), (xxh3_64(b"ab") % 1024) as u32);
    }

    #[test]
    fn buckets_stay_in_range_and_spread() {
        let salt = whole(16);
        let mut seen = [0u32; 16];
        for i in 0..16_000u32 {
            let b = bucket_of(format!("k{i:08}").as_bytes(), &salt);
            assert!(b < 16);
            seen[b as usize] += 1;
        }
        // Sequential keys must spread (P1): every bucket within 20% of the mean.
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert_eq!(
            bucket_of(b"anything", &whole(0)),
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
