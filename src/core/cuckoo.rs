//! Cuckoo placement, shared by [`Scheme::Cuckoo`](super::scheme::Scheme::Cuckoo)
//! and [`Scheme::TwoLevel`](super::scheme::Scheme::TwoLevel): a key's candidate
//! buckets, the deterministic eviction walk, and where each scheme keeps its
//! state in the auxiliary words. Pure arithmetic, emitted to the CUDA sources
//! by [`super::constants::cuda_header`].
//!
//! A key may live in any of `d` candidate buckets (`d` = [`choices`]), and in
//! the flat scheme also in a small stash; a lookup reads exactly those, so it
//! costs at most `d` bucket reads (plus the stash when it is not empty) at
//! any load. When every candidate is full, an insert searches an eviction
//! path: a chain of buckets `b0 -> b1 -> ... -> bn` where a resident of each
//! moves to the next (one of its own candidates) and `bn` has an EMPTY slot.
//! The walk only reads until it has found the whole path; the moves are then
//! applied last first, so every key is in at least one slot at every moment.
//!
//! ```text
//!  flat cuckoo: slots of B buckets          aux words
//!  +-------------------------+-------+      +----------------------------+------+
//!  | candidate buckets       | stash |      | lock bits: bucket 0..B-1,  | mask |
//!  | 0 .. B-S-1              | S     |      | then the stash lock        |      |
//!  +-------------------------+-------+      +----------------------------+------+
//!  mask bit i set = stash slot i holds a pair
//!
//!  two-level: M regions of 127/128 of 512 or 2048 buckets, then the overflow
//!  +-----------+-----------+-----+-------------+-----------------------+
//!  | region 0  | region 1  | ... | region M-1  | overflow (the rest)   |
//!  +-----------+-----------+-----+-------------+-----------------------+
//!
//!  aux words, two-level
//!  +-------------------------------+------+-----+----------------------------+
//!  | region word 0..M-1:           | pool | pad | rebuild areas (GPU only),  |
//!  | bit 63 lock, 62 full,         |      |     | one region's words each    |
//!  | 40..61 keys in the overflow,  |      |     |                            |
//!  | 0..39 seed n                  |      |     |                            |
//!  +-------------------------------+------+-----+----------------------------+
//! ```
//!
//! A two-level region's load varies around the table's (regions of 8192
//! slots at load 0.95 reach 0.99 and more in a table of thousands), and
//! past about 0.98 cuckoo placement in a region fails. A key its region
//! cannot place goes to the overflow, a small linearly probed area shared
//! by all regions, and its region word counts it; a lookup reads the
//! overflow only for regions whose count is not zero, so lookups of the
//! other regions still read at most `d` buckets.

use super::hash::{mix64, reduce_range};

/// Candidate buckets per key for a slot width: 2 for 8-byte slots (4 per
/// bucket; two choices of 4-slot buckets fill past 0.95), 3 for 16-byte
/// slots (2 per bucket; two choices of 2-slot buckets saturate near 0.9).
pub const fn choices(slot_bytes: usize) -> usize {
    if slot_bytes == 8 { 2 } else { 3 }
}

/// Most candidates of any slot width.
pub const MAX_CHOICES: usize = 3;

/// Seed salts of the candidate hashes, one per candidate: distinct odd
/// constants, so the candidates of a key are independent hashes.
pub const SALTS: [u64; MAX_CHOICES] = [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7345, 0xa409_3822_299f_31d1];

/// Salt of the eviction walk's choices (which resident moves, and where).
pub const WALK_SALT: u64 = 0x082e_fa98_ec4e_6c89;

/// Multiplier spreading the step number of an eviction walk over the key
/// (the golden ratio in 64 bits), so each step draws a fresh word.
pub const WALK_STEP_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// Salt of the per-region seeds of the two-level scheme.
pub const REGION_SALT: u64 = 0x4528_21e6_38d0_1377;

/// Default probe limit of the cuckoo schemes: eviction steps (buckets an
/// insert may lock past its candidates). Short walks keep inserts cheap; a
/// key without a path goes to the stash (flat) or rebuilds its region.
pub const DEFAULT_EVICTIONS: u64 = 16;

/// Hard cap on eviction steps whatever the probe limit (the GPU keeps the
/// path in fixed arrays, 64 buckets and slots: about 600 bytes of local
/// memory). Region rebuilds, which lock nothing, walk this far.
pub const MAX_EVICTIONS: u64 = 64;

/// Slots in the flat scheme's stash (at most 64: one mask word): keys
/// without an eviction path wait there (a lookup reads them, 256 or 512
/// bytes, only while the stash is not empty).
pub const STASH_PAIRS: u64 = 32;

/// Buckets of a region's span (the region and its 128th of the overflow,
/// [`OVERFLOW_SHARE`]) in two-level tables of fewer than
/// [`LARGE_REGIONS_FROM`] buckets (16 KiB of slots: 2048 eight-byte or 1024
/// sixteen-byte slots). Large enough that region loads stay close to the
/// table's: the fullest of a few dozen regions of a table at load 0.875
/// sits near 0.93, where in-region cuckoo still succeeds; regions of 32
/// buckets overflow well below that (at load 0.8 a 64-slot region gets 51
/// keys on average, with a standard deviation of 7). Small enough that a
/// small table has many region locks for its inserts (a thread per key)
/// and a rebuild (one region's pairs placed again per seed tried) stays a
/// short serial job.
pub const REGION_BUCKETS: u64 = 512;

/// Buckets of a region's span (the region and its 128th of the overflow)
/// in two-level tables of at least
/// [`LARGE_REGIONS_FROM`] buckets (64 KiB of slots: one CUDA region-build
/// block). An 8192-slot region's load varies half as much as a 2048-slot
/// one's, so far fewer regions overflow: at 2^27 slots and load 0.9, none
/// of the keys of one batch was refused, against 60 (u32) and 2,600 (u64)
/// with 512-bucket regions; at 0.95, 1,400-7,000 against 100,000-220,000
/// (NVIDIA H200, before the overflow took such keys).
pub const LARGE_REGION_BUCKETS: u64 = 2048;

/// Buckets from which a two-level table takes [`LARGE_REGION_BUCKETS`]
/// regions (32 MiB of slots; at least 512 regions). Smaller tables keep
/// [`REGION_BUCKETS`]: with a quarter as many region locks and rebuilds
/// four times as long, inserts into small, nearly full tables serialised
/// (a 4096-slot table filled to refusal ran for minutes on an H200).
pub const LARGE_REGIONS_FROM: u64 = 1 << 20;

/// Buckets of a region's span in a two-level table of `buckets` buckets (of more
/// than one region).
pub const fn region_buckets(buckets: u64) -> u64 {
    if buckets >= LARGE_REGIONS_FROM { LARGE_REGION_BUCKETS } else { REGION_BUCKETS }
}

/// Seeds a region rebuild tries before the insert that caused it fails.
pub const REBUILD_SEEDS: u64 = 8;

/// Whether rebuilding a region of `buckets` buckets and `slots` slots to
/// hold `live` pairs may succeed: up to 31/32 full, or 24/25 for
/// [`LARGE_REGION_BUCKETS`] regions. Fuller regions fail the insert at once:
/// no seed would place them with short walks, and trying all seeds costs
/// thousands of moves for each key refused by a full region (with 31/32 an
/// over-full batch into 64 KiB regions rebuilt each region once per key
/// past the region build's reach, and a 2^22-slot test ran for minutes).
pub const fn rebuild_may_fit(live: u64, buckets: u64, slots: u64) -> bool {
    if buckets > REGION_BUCKETS { live * 25 <= slots * 24 } else { live * 32 <= slots * 31 }
}

/// Bit of a region word that locks the region.
pub const REGION_LOCK: u64 = 1 << 63;

/// Bit of a region word set when a rebuild of the region failed: later
/// inserts that would need a rebuild are refused at once instead of redoing
/// it (each try re-places every pair of the region under every seed, a long
/// serial job on a GPU thread), until an erase frees one of its slots.
pub const REGION_FULL: u64 = 1 << 62;

/// Lowest bit of a region word's count of its keys in the overflow.
pub const SPILL_SHIFT: u32 = 40;

/// Bits of a region word counting its keys in the overflow.
pub const REGION_SPILLED: u64 = ((1 << 22) - 1) << SPILL_SHIFT;

/// Bits of a region word holding its seed number.
pub const REGION_SEED: u64 = (1 << SPILL_SHIFT) - 1;

/// Keys of region word `w` stored in the overflow.
#[inline(always)]
pub const fn spilled(w: u64) -> u64 {
    (w & REGION_SPILLED) >> SPILL_SHIFT
}

/// A two-level table of more than one region gives this share of each
/// region's span (512 or 2048 buckets) to the overflow: 0.8% of its slots.
/// Measured need at 2^27 slots: 1,400 (u32) and 7,000 (u64) keys at load
/// 0.95 had no place in their regions, a hundredth of this.
pub const OVERFLOW_SHARE: u64 = 128;

/// Buckets of the overflow a key's chain may span: an insert finding no
/// free slot within them is refused.
pub const OVERFLOW_PROBE: u64 = 64;

/// Salt of a key's home bucket in the overflow.
pub const OVERFLOW_SALT: u64 = 0xbe54_66cf_34e9_0c6c;

/// Most rebuild areas of the GPU's two-level tables (one region's words
/// each, claimed by a rebuilding thread; 64 x 16 KiB).
pub const REBUILD_AREAS: u64 = 64;

/// Candidate `j` of `key` among `n` buckets (the flat cuckoo scheme; two-level
/// regions take [`region_candidate`]).
#[inline(always)]
pub const fn candidate(key: u64, seed: u64, j: usize, n: u64) -> u64 {
    reduce_range(mix64(key, seed ^ SALTS[j]), n)
}

/// Bits of a key's hash that pick each of its candidates in a two-level
/// region ([`region_candidate`]).
pub const REGION_CAND_BITS: u32 = 21;

// A region's buckets times a candidate's bits must fit 32 bits (the kernels multiply in u32).
const _: () = assert!(LARGE_REGION_BUCKETS << REGION_CAND_BITS <= 1 << 32);

/// Candidate `j` among a region's `n` buckets (at most 2^11) of the key
/// whose hash under the region's seed is `hash`: its bits `21 j .. 21 j +
/// 20` scaled to `n`, so one hash gives every candidate.
#[inline(always)]
pub const fn region_candidate(hash: u64, j: usize, n: u64) -> u64 {
    let bits = (hash >> (REGION_CAND_BITS as usize * j)) & ((1 << REGION_CAND_BITS) - 1);
    (bits * n) >> REGION_CAND_BITS
}

/// The random word steering step `step` of `key`'s eviction walk.
#[inline(always)]
pub const fn walk_word(key: u64, seed: u64, step: u64) -> u64 {
    mix64(key ^ step.wrapping_mul(WALK_STEP_MUL), seed ^ WALK_SALT)
}

/// Buckets at the end of a flat table of `buckets` buckets that form its
/// stash: [`STASH_PAIRS`] slots, but at most a 32nd of the buckets (a
/// 16-slot table has none). Keeping the stash in the slot array keeps
/// `len <= capacity` and lets every pass over the slots (export, rehash,
/// census) see stashed pairs.
pub const fn stash_buckets(buckets: u64, slots_per_bucket: u64) -> u64 {
    let want = STASH_PAIRS / slots_per_bucket;
    if buckets / 32 < want { buckets / 32 } else { want }
}

/// The flat scheme's auxiliary words for `buckets` buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlatAux {
    /// Buckets of the table (bit `buckets` of the lock bits locks the stash).
    pub buckets: u64,
}

impl FlatAux {
    /// Lock words (one bit per bucket, one more for the stash).
    pub const fn lock_words(self) -> u64 {
        (self.buckets + 1).div_ceil(64)
    }
    /// Index of the stash occupancy mask (bit i: stash slot i holds a pair).
    pub const fn mask(self) -> u64 {
        self.lock_words()
    }
    /// Total words.
    pub const fn words(self) -> u64 {
        self.mask() + 1
    }
}

/// The two-level scheme's geometry for `buckets` buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regions {
    /// Number of regions.
    pub count: u64,
    /// Buckets per region.
    pub buckets: u64,
    /// Overflow buckets, after the regions.
    pub overflow: u64,
}

impl Regions {
    /// Regions of a table of `buckets` buckets: one per span of
    /// [`region_buckets`], each holding all of it but an
    /// [`OVERFLOW_SHARE`]th, which together (and any buckets past the last
    /// whole span) make the overflow; or one region of every bucket and no
    /// overflow when the table is no larger than [`REGION_BUCKETS`].
    pub const fn of(buckets: u64) -> Regions {
        if buckets <= REGION_BUCKETS {
            return Regions { count: 1, buckets, overflow: 0 };
        }
        let span = region_buckets(buckets);
        let count = buckets / span;
        let rb = span - span / OVERFLOW_SHARE;
        Regions { count, buckets: rb, overflow: buckets - count * rb }
    }
    /// The first overflow bucket.
    pub const fn overflow_first(self) -> u64 {
        self.count * self.buckets
    }
    /// Buckets of a key's overflow chain.
    pub const fn overflow_reach(self) -> u64 {
        if self.overflow < OVERFLOW_PROBE { self.overflow } else { OVERFLOW_PROBE }
    }
    /// A key's home bucket in the overflow (which must not be empty).
    #[inline(always)]
    pub const fn overflow_home(self, key: u64, seed: u64) -> u64 {
        self.overflow_first() + reduce_range(mix64(key, seed ^ OVERFLOW_SALT), self.overflow)
    }
    /// The bucket after `b` in an overflow chain.
    #[inline(always)]
    pub const fn overflow_next(self, b: u64) -> u64 {
        if b + 1 == self.overflow_first() + self.overflow { self.overflow_first() } else { b + 1 }
    }
    /// The region of a key.
    #[inline(always)]
    pub const fn region(self, key: u64, seed: u64) -> u64 {
        reduce_range(mix64(key, seed), self.count)
    }
    /// The seed of `region` after `n` rebuilds.
    #[inline(always)]
    pub const fn region_seed(seed: u64, region: u64, n: u64) -> u64 {
        mix64(region ^ (n << 40), seed ^ REGION_SALT)
    }
    /// Rebuild areas on the GPU.
    pub const fn areas(self) -> u64 {
        if self.count < REBUILD_AREAS { self.count } else { REBUILD_AREAS }
    }
    /// Words of one rebuild area (one region's slots; 4 words per bucket).
    pub const fn area_words(self) -> u64 {
        self.buckets * 4
    }
    /// Index of the pool word (bit i = area i is taken).
    pub const fn pool(self) -> u64 {
        self.count
    }
    /// Index of the first rebuild area's first word (even: 16-byte aligned).
    pub const fn first_area(self) -> u64 {
        (self.count + 1).div_ceil(2) * 2
    }
    /// Total words.
    pub const fn words(self) -> u64 {
        self.first_area() + self.areas() * self.area_words()
    }
}

/// Buckets of a two-level table asked for `buckets`: whole region spans,
/// unless the table fits in one region. (A table rounded up past
/// [`LARGE_REGIONS_FROM`] is rounded to large spans; that threshold is a
/// multiple of both span sizes.)
pub const fn round_to_regions(buckets: u64) -> u64 {
    if buckets <= REGION_BUCKETS {
        return buckets;
    }
    let small = buckets.div_ceil(REGION_BUCKETS) * REGION_BUCKETS;
    let rb = region_buckets(small);
    small.div_ceil(rb) * rb
}

/// The `#define`s of this module in `kernels/gpuhash_constants.cuh`.
pub(crate) fn cuda_defines() -> String {
    let mut s = String::new();
    for (j, salt) in SALTS.iter().enumerate() {
        s += &format!("#define GH_CUCKOO_SALT_{j} 0x{salt:016x}ull\n");
    }
    for (name, v) in [
        ("WALK_SALT", WALK_SALT),
        ("REGION_SALT", REGION_SALT),
        ("REGION_LOCK", REGION_LOCK),
        ("REGION_FULL", REGION_FULL),
        ("REGION_SEED", REGION_SEED),
        ("REGION_SPILLED", REGION_SPILLED),
        ("OVERFLOW_SALT", OVERFLOW_SALT),
    ] {
        s += &format!("#define GH_CUCKOO_{name} 0x{v:016x}ull\n");
    }
    for (name, v) in [
        ("MAX_EVICTIONS", MAX_EVICTIONS),
        ("STASH_PAIRS", STASH_PAIRS),
        ("REGION_BUCKETS", REGION_BUCKETS),
        ("LARGE_REGION_BUCKETS", LARGE_REGION_BUCKETS),
        ("LARGE_REGIONS_FROM", LARGE_REGIONS_FROM),
        ("REBUILD_SEEDS", REBUILD_SEEDS),
        ("REBUILD_AREAS", REBUILD_AREAS),
        ("OVERFLOW_SHARE", OVERFLOW_SHARE),
        ("OVERFLOW_PROBE", OVERFLOW_PROBE),
        ("SPILL_SHIFT", SPILL_SHIFT as u64),
        ("REGION_CAND_BITS", REGION_CAND_BITS as u64),
    ] {
        s += &format!("#define GH_CUCKOO_{name} {v}ull\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hash::DEFAULT_SEED;

    #[test]
    fn candidates_are_in_range_and_independent() {
        let n = 1000;
        let mut same = 0;
        for k in 0..10_000u64 {
            let c: Vec<u64> = (0..MAX_CHOICES).map(|j| candidate(k, DEFAULT_SEED, j, n)).collect();
            assert!(c.iter().all(|&b| b < n));
            same += (c[0] == c[1]) as u32;
        }
        // 1 in 1000 expected.
        assert!(same < 40, "{same} keys with equal first candidates");
        assert_eq!(choices(8), 2);
        assert_eq!(choices(16), 3);
    }

    #[test]
    fn region_candidates_are_in_range_uniform_and_independent() {
        use crate::core::hash::mix64;
        for n in [5u64, 508, 2032, LARGE_REGION_BUCKETS] {
            let mut same = 0;
            let mut hits = vec![[0u32; MAX_CHOICES]; n as usize];
            let keys = 200 * n;
            for k in 0..keys {
                let h = mix64(k, DEFAULT_SEED);
                let c: Vec<u64> = (0..MAX_CHOICES).map(|j| region_candidate(h, j, n)).collect();
                assert!(c.iter().all(|&b| b < n), "n = {n}: {c:?}");
                for (j, &b) in c.iter().enumerate() {
                    hits[b as usize][j] += 1;
                }
                same += (c[0] == c[1]) as u64 + (c[1] == c[2]) as u64;
            }
            // About 2 * keys / n pairs are equal by chance.
            assert!(same < 4 * keys / n + 8, "n = {n}: {same} equal candidate pairs");
            // Every bucket draws about 200 keys as each candidate.
            let (lo, hi) = hits.iter().flatten().fold((u32::MAX, 0), |(lo, hi), &h| (lo.min(h), hi.max(h)));
            assert!(lo > 120 && hi < 300, "n = {n}: buckets drew {lo} to {hi} keys");
        }
    }

    #[test]
    fn flat_aux_layout() {
        let a = FlatAux { buckets: 64 };
        assert_eq!(a.lock_words(), 2, "64 buckets and the stash lock");
        assert_eq!(a.words(), 3);
        assert_eq!(stash_buckets(4, 4), 0);
        assert_eq!(stash_buckets(100, 2), 3);
        assert_eq!(stash_buckets(1 << 20, 4) * 4, STASH_PAIRS);
        assert_eq!(stash_buckets(1 << 20, 2) * 2, STASH_PAIRS);
    }

    #[test]
    fn regions_cover_the_table() {
        let small = REGION_BUCKETS - REGION_BUCKETS / OVERFLOW_SHARE;
        assert_eq!(Regions::of(4), Regions { count: 1, buckets: 4, overflow: 0 });
        assert_eq!(Regions::of(REGION_BUCKETS), Regions { count: 1, buckets: REGION_BUCKETS, overflow: 0 });
        assert_eq!(Regions::of(REGION_BUCKETS * 3), Regions { count: 3, buckets: small, overflow: 3 * REGION_BUCKETS / OVERFLOW_SHARE });
        // A size round_to_regions does not give: the buckets past the last span join the overflow.
        assert_eq!(Regions::of(REGION_BUCKETS * 3 + 5), Regions { count: 3, buckets: small, overflow: 3 * REGION_BUCKETS / OVERFLOW_SHARE + 5 });
        let r = Regions::of(REGION_BUCKETS * 100);
        assert_eq!(r.areas(), REBUILD_AREAS);
        assert_eq!(r.first_area() % 2, 0);
        assert_eq!(r.words(), r.first_area() + REBUILD_AREAS * small * 4);
        let mut hit = vec![0u32; 100];
        for k in 0..100_000u64 {
            hit[r.region(k, DEFAULT_SEED) as usize] += 1;
        }
        assert!(hit.iter().all(|&h| h > 800 && h < 1200));
        assert_ne!(Regions::region_seed(1, 2, 0), Regions::region_seed(1, 2, 1));
        assert_ne!(Regions::region_seed(1, 2, 0), Regions::region_seed(1, 3, 0));
    }

    #[test]
    fn large_tables_take_large_regions() {
        assert_eq!(LARGE_REGIONS_FROM % LARGE_REGION_BUCKETS, 0);
        let below = LARGE_REGIONS_FROM - REGION_BUCKETS;
        let (small, large) = (REGION_BUCKETS - REGION_BUCKETS / OVERFLOW_SHARE, LARGE_REGION_BUCKETS - LARGE_REGION_BUCKETS / OVERFLOW_SHARE);
        assert_eq!(Regions::of(below), Regions { count: below / REGION_BUCKETS, buckets: small, overflow: below / OVERFLOW_SHARE });
        assert_eq!(round_to_regions(below - 1), below);
        // Just past the threshold: rounded to whole large regions.
        assert_eq!(round_to_regions(LARGE_REGIONS_FROM + 1), LARGE_REGIONS_FROM + LARGE_REGION_BUCKETS);
        let r = Regions::of(LARGE_REGIONS_FROM * 4);
        let count = LARGE_REGIONS_FROM * 4 / LARGE_REGION_BUCKETS;
        assert_eq!(r, Regions { count, buckets: large, overflow: count * LARGE_REGION_BUCKETS / OVERFLOW_SHARE });
        assert_eq!(r.words(), r.first_area() + REBUILD_AREAS * large * 4);
        for b in [1, 511, 512, 513, 5000, below - 1, below + 1, LARGE_REGIONS_FROM + 7, (1 << 25) + 3] {
            let rounded = round_to_regions(b);
            let r = Regions::of(rounded);
            assert!(rounded >= b);
            assert_eq!(r.count * r.buckets + r.overflow, rounded, "{b} buckets: regions and overflow tile the table");
            if rounded > REGION_BUCKETS {
                let span = region_buckets(rounded);
                assert!(r.count >= 2 && r.overflow == r.count * span / OVERFLOW_SHARE, "{b} buckets: {r:?}");
                // Every overflow chain stays in the overflow.
                for k in 0..200u64 {
                    let mut h = r.overflow_home(k, DEFAULT_SEED);
                    for _ in 0..r.overflow_reach() {
                        assert!(h >= r.overflow_first() && h < rounded);
                        h = r.overflow_next(h);
                    }
                }
            }
        }
        // Large regions rebuild only up to 24/25 full; small ones to 31/32.
        assert!(rebuild_may_fit(1984, REGION_BUCKETS, 2048) && !rebuild_may_fit(1985, REGION_BUCKETS, 2048));
        assert!(rebuild_may_fit(7864, large, 8192) && !rebuild_may_fit(7865, large, 8192));
        // The same for sixteen-byte slots: the region's size in buckets decides.
        assert!(rebuild_may_fit(3932, large, 4096) && !rebuild_may_fit(3933, large, 4096));
        assert!(rebuild_may_fit(992, small, 1024) && !rebuild_may_fit(993, small, 1024));
    }
}
