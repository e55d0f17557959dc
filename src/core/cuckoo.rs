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
//!  aux words, two-level (M regions)
//!  +--------------------------------+------+-----+----------------------------+
//!  | region word 0..M-1:            | pool | pad | rebuild areas (GPU only),  |
//!  | bit 63 lock, bits 0..62 seed n |      |     | one region's words each    |
//!  +--------------------------------+------+-----+----------------------------+
//! ```

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

/// Buckets per region of the two-level scheme in tables of fewer than
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

/// Buckets per region of the two-level scheme in tables of at least
/// [`LARGE_REGIONS_FROM`] buckets (64 KiB of slots: one CUDA region-build
/// block). An 8192-slot region's load varies half as much as a 2048-slot
/// one's, so far fewer regions overflow: at 2^27 slots and load 0.9, none
/// of the keys of one batch was refused, against 60 (u32) and 2,600 (u64)
/// with 512-bucket regions; at 0.95, 1,400-7,000 against 100,000-220,000
/// (NVIDIA H200).
pub const LARGE_REGION_BUCKETS: u64 = 2048;

/// Buckets from which a two-level table takes [`LARGE_REGION_BUCKETS`]
/// regions (32 MiB of slots; at least 512 regions). Smaller tables keep
/// [`REGION_BUCKETS`]: with a quarter as many region locks and rebuilds
/// four times as long, inserts into small, nearly full tables serialised
/// (a 4096-slot table filled to refusal ran for minutes on an H200).
pub const LARGE_REGIONS_FROM: u64 = 1 << 20;

/// Buckets per region of a two-level table of `buckets` buckets (of more
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
    if buckets >= LARGE_REGION_BUCKETS { live * 25 <= slots * 24 } else { live * 32 <= slots * 31 }
}

/// Bit of a region word that locks the region.
pub const REGION_LOCK: u64 = 1 << 63;

/// Bit of a region word set when a rebuild of the region failed: later
/// inserts that would need a rebuild are refused at once instead of redoing
/// it (each try re-places every pair of the region under every seed, a long
/// serial job on a GPU thread), until an erase frees one of its slots.
pub const REGION_FULL: u64 = 1 << 62;

/// Bits of a region word holding its seed number.
pub const REGION_SEED: u64 = !(REGION_LOCK | REGION_FULL);

/// Most rebuild areas of the GPU's two-level tables (one region's words
/// each, claimed by a rebuilding thread; 64 x 16 KiB).
pub const REBUILD_AREAS: u64 = 64;

/// Candidate `j` of `key` among `n` buckets.
#[inline(always)]
pub const fn candidate(key: u64, seed: u64, j: usize, n: u64) -> u64 {
    reduce_range(mix64(key, seed ^ SALTS[j]), n)
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
}

impl Regions {
    /// Regions of a table: whole regions of [`region_buckets`], or one region
    /// of every bucket when the table is no larger than [`REGION_BUCKETS`].
    pub const fn of(buckets: u64) -> Regions {
        if buckets <= REGION_BUCKETS {
            Regions { count: 1, buckets }
        } else {
            let rb = region_buckets(buckets);
            Regions { count: buckets / rb, buckets: rb }
        }
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

/// Buckets of a two-level table asked for `buckets`: whole regions, unless
/// the table fits in one region. (A table rounded up past
/// [`LARGE_REGIONS_FROM`] is rounded to large regions; that threshold is a
/// multiple of both region sizes.)
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
        assert_eq!(Regions::of(4), Regions { count: 1, buckets: 4 });
        assert_eq!(Regions::of(REGION_BUCKETS * 3), Regions { count: 3, buckets: REGION_BUCKETS });
        let r = Regions::of(REGION_BUCKETS * 100);
        assert_eq!(r.areas(), REBUILD_AREAS);
        assert_eq!(r.first_area() % 2, 0);
        assert_eq!(r.words(), r.first_area() + REBUILD_AREAS * REGION_BUCKETS * 4);
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
        assert_eq!(Regions::of(below), Regions { count: below / REGION_BUCKETS, buckets: REGION_BUCKETS });
        assert_eq!(round_to_regions(below - 1), below);
        // Just past the threshold: rounded to whole large regions.
        assert_eq!(round_to_regions(LARGE_REGIONS_FROM + 1), LARGE_REGIONS_FROM + LARGE_REGION_BUCKETS);
        let r = Regions::of(LARGE_REGIONS_FROM * 4);
        assert_eq!(r, Regions { count: LARGE_REGIONS_FROM * 4 / LARGE_REGION_BUCKETS, buckets: LARGE_REGION_BUCKETS });
        assert_eq!(r.words(), r.first_area() + REBUILD_AREAS * LARGE_REGION_BUCKETS * 4);
        for b in [1, 511, 512, 513, 5000, below - 1, below + 1, LARGE_REGIONS_FROM + 7, (1 << 25) + 3] {
            let rounded = round_to_regions(b);
            let r = Regions::of(rounded);
            assert!(rounded >= b);
            assert_eq!(r.count * r.buckets, rounded, "{b} buckets: regions tile the table");
        }
        // Large regions rebuild only up to 24/25 full; small ones to 31/32.
        assert!(rebuild_may_fit(1984, REGION_BUCKETS, 2048) && !rebuild_may_fit(1985, REGION_BUCKETS, 2048));
        assert!(rebuild_may_fit(7864, LARGE_REGION_BUCKETS, 8192) && !rebuild_may_fit(7865, LARGE_REGION_BUCKETS, 8192));
        // The same for sixteen-byte slots: the region's size in buckets decides.
        assert!(rebuild_may_fit(3932, LARGE_REGION_BUCKETS, 4096) && !rebuild_may_fit(3933, LARGE_REGION_BUCKETS, 4096));
        assert!(rebuild_may_fit(992, REGION_BUCKETS, 1024) && !rebuild_may_fit(993, REGION_BUCKETS, 1024));
    }
}
