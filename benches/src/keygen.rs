//! Key choosers of YCSB's core workload: zipfian (scrambled), uniform and latest.
//!
//! Ported from YCSB's `ZipfianGenerator`, `ScrambledZipfianGenerator` and
//! `SkewedLatestGenerator` (Gray et al., "Quickly generating billion-record synthetic
//! databases", SIGMOD 1994), with the same zipfian constant 0.99 and FNV-1a scrambling.
//!
//! # Invariants
//! 1. Every chooser returns a key number in `0..limit`, where `limit` is the number of keys
//!    known to exist (records loaded plus inserts acknowledged); never a key not yet written.
//! 2. Zipfian: item 0 (before scrambling) is the most popular; its probability is `1/zeta(n)`.
//!    The scrambled chooser draws its ranks, as YCSB's `ScrambledZipfianGenerator` does, from a
//!    fixed generator of 10^10 items (`zeta` = 26.469...) and maps them onto the key space with
//!    FNV: the hottest key gets ~1/26.47 (3.8%) of the draws whatever the key count.
//! 3. Latest: the newest key (`limit - 1`) is the most popular, popularity falling with age.

use rand::Rng;
use serde::{Deserialize, Serialize};

/// YCSB's default zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// `ScrambledZipfianGenerator.ITEM_COUNT`: the size of the generator its ranks come from.
pub const YCSB_SCRAMBLED_ITEMS: u64 = 10_000_000_000;

/// `ScrambledZipfianGenerator.ZETAN`: `zeta(10^10, 0.99)`.
pub const YCSB_SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// YCSB's 64-bit FNV hash (`Utils.fnvhash64`), used both to scramble zipfian ranks and to
/// turn key numbers into `user<hash>` keys (`insertorder=hashed`).
pub fn fnv64(mut val: u64) -> u64 {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(1_099_511_628_211);
    }
    (hash as i64).unsigned_abs()
}

fn zeta(from: u64, to: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in from..to {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// A zipfian generator over `0..n` whose item count may grow (for `latest`).
#[derive(Debug, Clone)]
pub struct Zipfian {
    theta: f64,
    alpha: f64,
    zeta2theta: f64,
    items: u64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    /// A generator over `0..items` with YCSB's constant.
    pub fn new(items: u64) -> Zipfian {
        Zipfian::with_constant(items, ZIPFIAN_CONSTANT)
    }

    /// A generator over `0..items` with the given zipfian constant (`0 < theta < 1`).
    pub fn with_constant(items: u64, theta: f64) -> Zipfian {
        let items = items.max(1);
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let zetan = zeta(0, items, theta, 0.0);
        let mut z = Zipfian {
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2theta,
            items,
            zetan,
            eta: 0.0,
        };
        z.eta = z.compute_eta();
        z
    }

    fn compute_eta(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
            / (1.0 - self.zeta2theta / self.zetan)
    }

    /// YCSB's `ScrambledZipfianGenerator` base: 10^10 items with `zeta` precomputed (summing
    /// it would take minutes), whose ranks are then hashed onto the real key space.
    pub fn ycsb_scrambled_base() -> Zipfian {
        let theta = ZIPFIAN_CONSTANT;
        let mut z = Zipfian {
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2theta: zeta(0, 2, theta, 0.0),
            items: YCSB_SCRAMBLED_ITEMS,
            zetan: YCSB_SCRAMBLED_ZETAN,
            eta: 0.0,
        };
        z.eta = z.compute_eta();
        z
    }

    /// The item count the generator currently draws from.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// `zeta(n)`: the normalising constant; item 0 has probability `1/zeta(n)`.
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    fn resize(&mut self, items: u64) {
        let items = items.max(1);
        if items == self.items {
            return;
        }
        self.zetan = if items > self.items {
            zeta(self.items, items, self.theta, self.zetan)
        } else {
            zeta(0, items, self.theta, 0.0)
        };
        self.items = items;
        self.eta = self.compute_eta();
    }

    /// Next rank in `0..items` (0 = most popular).
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.items - 1);
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }

    /// Next rank in `0..items` after growing (or shrinking) the item count to `items`.
    pub fn next_within<R: Rng + ?Sized>(&mut self, rng: &mut R, items: u64) -> u64 {
        self.resize(items);
        self.next(rng)
    }
}

/// Which key distribution a workload uses (YCSB `requestdistribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Scrambled zipfian: a few hot keys spread over the keyspace.
    Zipfian,
    /// Every existing key equally likely.
    Uniform,
    /// The most recently inserted keys are the hottest.
    Latest,
}

/// A per-worker key chooser.
#[derive(Debug, Clone)]
pub struct KeyChooser {
    dist: Distribution,
    /// For zipfian: YCSB's fixed 10^10-item generator, ranks scrambled with FNV onto the
    /// expected final key count (YCSB sizes it with `recordcount + 2 * expected inserts`).
    zipf: Zipfian,
    expected: u64,
}

impl KeyChooser {
    /// A chooser for `dist`; `expected_keys` is the largest key count the run may reach.
    pub fn new(dist: Distribution, expected_keys: u64) -> KeyChooser {
        let expected = expected_keys.max(1);
        let zipf = match dist {
            Distribution::Zipfian => Zipfian::ycsb_scrambled_base(),
            // `latest` grows its generator with the key count; start small.
            Distribution::Latest | Distribution::Uniform => Zipfian::new(1),
        };
        KeyChooser {
            dist,
            zipf,
            expected,
        }
    }

    /// The distribution in use.
    pub fn distribution(&self) -> Distribution {
        self.dist
    }

    /// A key number in `0..limit` (`limit` = keys known to exist, at least 1).
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, limit: u64) -> u64 {
        let limit = limit.max(1);
        match self.dist {
            Distribution::Uniform => rng.gen_range(0..limit),
            Distribution::Latest => limit - 1 - self.zipf.next_within(rng, limit),
            Distribution::Zipfian => {
                let space = self.expected.max(limit);
                // Like YCSB: redraw while the scrambled key is not inserted yet.
                for _ in 0..64 {
                    let k = fnv64(self.zipf.next(rng)) % space;
                    if k < limit {
                        return k;
                    }
                }
                rng.gen_range(0..limit)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn counts(mut f: impl FnMut() -> u64, n: usize, draws: usize) -> Vec<u64> {
        let mut c = vec![0u64; n];
        for _ in 0..draws {
            let k = f() as usize;
            assert!(k < n, "key {k} out of range 0..{n}");
            c[k] += 1;
        }
        c
    }

    #[test]
    fn zipfian_rank_zero_has_probability_one_over_zeta() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut z = Zipfian::new(1000);
        let draws = 200_000;
        let c = counts(|| z.next(&mut rng), 1000, draws);
        let expected = draws as f64 / z.zetan();
        let got = c[0] as f64;
        assert!(
            (got - expected).abs() / expected < 0.05,
            "rank0 {got} vs {expected}"
        );
        // Popularity falls with rank: the head outweighs the tail by far.
        assert!(c[0] > c[1] && c[1] > c[10] && c[10] > c[500]);
        let head: u64 = c[..10].iter().sum();
        let tail: u64 = c[500..510].iter().sum();
        assert!(head > 20 * tail.max(1), "head {head} tail {tail}");
    }

    #[test]
    fn zipfian_growing_item_count_matches_fresh_generator() {
        let mut grown = Zipfian::new(10);
        let mut rng = StdRng::seed_from_u64(1);
        grown.next_within(&mut rng, 5000);
        let fresh = Zipfian::new(5000);
        assert!((grown.zetan() - fresh.zetan()).abs() < 1e-9);
        assert_eq!(grown.items(), 5000);
    }

    #[test]
    fn scrambled_zipfian_stays_in_range_and_spreads_hot_keys() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut kc = KeyChooser::new(Distribution::Zipfian, 10_000);
        let c = counts(|| kc.next(&mut rng, 10_000), 10_000, 100_000);
        let mut ranked: Vec<(u64, usize)> = c.iter().copied().zip(0..).collect();
        ranked.sort_unstable_by(|a, b| b.cmp(a));
        // Skewed as YCSB's scrambled zipfian is: the hottest key takes ~1/26.47 of the draws
        // (3,778 of 100,000; a generator sized to the 10,000 keys gave it ~9.7%) ...
        let hottest = ranked[0].0 as f64 / 100_000.0;
        assert!((0.032..0.044).contains(&hottest), "hottest share {hottest}");
        // ... nearly every key is drawn at least once (n ranks onto n keys left a quarter
        // unreachable) ...
        let drawn = c.iter().filter(|n| **n > 0).count();
        assert!(drawn > 9_000, "{drawn} of 10,000 keys drawn");
        // ... and the 10 hottest keys are not bunched at the start of the keyspace.
        let max_idx = ranked[..10].iter().map(|r| r.1).max().unwrap_or(0);
        assert!(max_idx > 1000, "hot keys all below {max_idx}");
    }

    #[test]
    fn scrambled_zipfian_never_returns_unwritten_keys() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut kc = KeyChooser::new(Distribution::Zipfian, 10_000);
        for _ in 0..10_000 {
            assert!(kc.next(&mut rng, 2_000) < 2_000);
        }
    }

    #[test]
    fn latest_prefers_the_newest_keys() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut kc = KeyChooser::new(Distribution::Latest, 0);
        let c = counts(|| kc.next(&mut rng, 1000), 1000, 50_000);
        assert!(c[999] > c[998] && c[998] > c[900] && c[900] >= c[0]);
        // After more inserts the hot spot moves to the new end.
        let c2 = counts(|| kc.next(&mut rng, 1500), 1500, 50_000);
        assert!(
            c2[1499] > c2[999] * 10,
            "newest {} old-newest {}",
            c2[1499],
            c2[999]
        );
    }

    #[test]
    fn uniform_covers_the_keyspace_evenly() {
        let mut rng = StdRng::seed_from_u64(6);
        let mut kc = KeyChooser::new(Distribution::Uniform, 100);
        let c = counts(|| kc.next(&mut rng, 100), 100, 100_000);
        assert!(c.iter().all(|&n| (800..1200).contains(&n)), "{c:?}");
    }

    #[test]
    fn fnv64_gives_distinct_keys_for_a_load_phase() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..100_000u64 {
            assert!(seen.insert(fnv64(i)), "collision at {i}");
        }
    }
}
