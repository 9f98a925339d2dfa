//! Row-key building blocks shared by the applications.
//!
//! # Conventions (every application key is built from these)
//! - **Salt prefix**: the first 4 bytes of every application row key are [`hash4`] of the
//!   entity that owns the row (a user id, a node id, a site). Tables are created with
//!   `SaltConfig { buckets: 256, prefix_len: Some(4) }`, so every row that starts with the same
//!   4 bytes lands in the same salt bucket, hence the same region, and a scan whose bounds share
//!   those 4 bytes is served by that one region.
//! - **Hash**: `hash4(b)` = the 4 high bytes, big-endian, of `fmix64(fnv1a64(b))`: FNV-1a 64-bit
//!   (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`) followed by MurmurHash3's 64-bit
//!   finalizer. Integers are hashed as their 8 big-endian bytes. Unlike Java's `Long.hashCode`
//!   used by the documents (identity for ids below 2^31), consecutive ids land far apart.
//! - **Integers** are big-endian, so byte order is numeric order for unsigned values.
//! - **Reversed time** is `u64::MAX - t` big-endian (8 bytes): newer sorts first.
//! - **Strings** inside composite keys are `u32 length (BE) | UTF-8 bytes`, so a key can be split
//!   back into its components without escaping.
//! - **Partial scan**: the stop key of "every row starting with P" is [`prefix_end`]`(P)`, P
//!   incremented as a big-endian number with carry (the documents' `incrementBytes`).
//!
//! # Invariants
//! 1. `hash4` is a pure function of its input bytes, stable across versions (it is in stored keys).
//! 2. `prefix_end(p)` is the least key greater than every key starting with `p`.

/// FNV-1a, 64-bit.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// MurmurHash3's 64-bit finalizer: a bijection with full avalanche.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// The 4-byte salt prefix of an entity named by `bytes`.
pub fn hash4(bytes: &[u8]) -> [u8; 4] {
    let h = fmix64(fnv1a64(bytes));
    let be = h.to_be_bytes();
    [be[0], be[1], be[2], be[3]]
}

/// The 4-byte salt prefix of a numeric id (hashed as its 8 big-endian bytes).
pub fn hash4_u64(id: u64) -> [u8; 4] {
    hash4(&id.to_be_bytes())
}

/// `u64::MAX - t`, big-endian: newest first.
pub fn rev_time(t: u64) -> [u8; 8] {
    (u64::MAX - t).to_be_bytes()
}

/// Inverse of [`rev_time`].
pub fn unrev_time(b: [u8; 8]) -> u64 {
    u64::MAX - u64::from_be_bytes(b)
}

/// Appends `u32 len | bytes`.
pub fn put_str(buf: &mut Vec<u8>, s: &[u8]) {
    let len = u32::try_from(s.len()).expect("application strings are at most a few KiB");
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(s);
}

/// A cursor over the bytes of a key, to split it back into components.
pub struct KeyReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> KeyReader<'a> {
    /// Starts reading at `pos`.
    pub fn new(buf: &'a [u8], pos: usize) -> Self {
        KeyReader { buf, pos }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// One byte.
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// A big-endian u32.
    pub fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A big-endian u64.
    pub fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_be_bytes(a))
    }

    /// A length-prefixed UTF-8 string.
    pub fn str(&mut self) -> Option<&'a str> {
        let len = self.u32()? as usize;
        std::str::from_utf8(self.take(len)?).ok()
    }

    /// True when every byte was consumed.
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }
}

/// The least key greater than every key starting with `prefix`; `None` if there is none
/// (the prefix is all `0xFF`), meaning "unbounded".
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.last_mut() {
        if *last == 0xFF {
            end.pop();
        } else {
            *last += 1;
            return Some(end);
        }
    }
    None
}

/// `blog.example.jp` -> `jp.example.blog`.
pub fn reverse_domain(domain: &str) -> String {
    domain.split('.').rev().collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_spreads_consecutive_ids() {
        let a = hash4_u64(1);
        let b = hash4_u64(2);
        assert_ne!(a, b);
        // Consecutive ids must not land in the same high byte region as Long.hashCode would.
        let firsts: std::collections::HashSet<u8> = (0..64u64).map(|i| hash4_u64(i)[0]).collect();
        assert!(
            firsts.len() > 32,
            "only {} distinct first bytes",
            firsts.len()
        );
    }

    #[test]
    fn prefix_end_carries() {
        assert_eq!(prefix_end(&[1, 2, 0xFF]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_end(&[0]), Some(vec![1]));
    }

    #[test]
    fn reversed_time_orders_newest_first() {
        assert!(rev_time(10) < rev_time(5));
        assert_eq!(unrev_time(rev_time(1234)), 1234);
    }

    #[test]
    fn reverse_domain_reverses_labels() {
        assert_eq!(reverse_domain("blog.example.jp"), "jp.example.blog");
        assert_eq!(reverse_domain("localhost"), "localhost");
    }

    #[test]
    fn key_reader_splits_components() {
        let mut k = vec![7u8];
        put_str(&mut k, b"abc");
        k.extend_from_slice(&42u64.to_be_bytes());
        let mut r = KeyReader::new(&k, 0);
        assert_eq!(r.u8(), Some(7));
        assert_eq!(r.str(), Some("abc"));
        assert_eq!(r.u64(), Some(42));
        assert!(r.at_end());
        assert_eq!(r.u8(), None);
    }
}
