//! The hash function shared by every backend.
//!
//! Keys are widened to 64 bits and mixed with the 64-bit finaliser of
//! MurmurHash3 (`fmix64`): a bijection, so distinct keys never collide in the
//! hash itself, and its output bits are close to uniform even for sequential
//! keys or keys that share their low bits. The home bucket is then taken from
//! the high bits by a multiply-shift range reduction, which works for any
//! bucket count (no power-of-two rounding, no modulo).

/// First multiplier of the 64-bit finaliser.
pub const MIX_MUL_1: u64 = 0xff51_afd7_ed55_8ccd;
/// Second multiplier of the 64-bit finaliser.
pub const MIX_MUL_2: u64 = 0xc4ce_b9fe_1a85_ec53;
/// Shift of the finaliser's xor-shift steps (`h ^= h >> MIX_SHIFT`).
pub const MIX_SHIFT: u32 = 33;
/// Default seed xored into every key before mixing. Tables rebuilt with a
/// new seed (for example after too many probe failures) change it.
pub const DEFAULT_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// Mixes a 64-bit key into a 64-bit hash (bijective for a fixed seed).
#[inline(always)]
pub const fn mix64(key: u64, seed: u64) -> u64 {
    let mut h = key ^ seed;
    h ^= h >> MIX_SHIFT;
    h = h.wrapping_mul(MIX_MUL_1);
    h ^= h >> MIX_SHIFT;
    h = h.wrapping_mul(MIX_MUL_2);
    h ^= h >> MIX_SHIFT;
    h
}

/// Maps a 64-bit hash uniformly onto `0..n` using its high bits
/// (`(hash * n) >> 64`), the same arithmetic as `__umul64hi` on the GPU.
#[inline(always)]
pub const fn reduce_range(hash: u64, n: u64) -> u64 {
    ((hash as u128 * n as u128) >> 64) as u64
}

/// 2^64 divided by the golden ratio, rounded to odd: the multiplier of
/// Fibonacci hashing (Knuth), as used by Hashinator.
pub const FIBONACCI_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// Hashinator's home slot: Fibonacci (multiplicative) hashing of the seeded
/// key onto `2^log2_slots` slots, taking the product's top bits.
#[inline(always)]
pub const fn fibonacci_home(key: u64, seed: u64, log2_slots: u32) -> u64 {
    (key ^ seed).wrapping_mul(FIBONACCI_MUL) >> (64 - log2_slots)
}

/// Salt of the routing hash of a table of tables ([`route`]): the next
/// digits of pi after the cuckoo salts, odd, distinct from every other salt.
pub const ROUTE_SALT: u64 = 0xbe54_66cf_34e9_0c6d;

/// The sub-table (page, shard) of `key` among `n`: the high bits of a
/// separately salted mix. Placement inside a sub-table uses the high bits of
/// `mix64(key, seed)` (or Hashinator's Fibonacci product, or the cuckoo
/// salts), so had routing taken the same bits, the keys of one sub-table
/// would all share them and crowd into one `1/n`-th of its buckets. A
/// different salt gives a hash whose bits are unrelated to those, and each
/// sub-table sees its keys spread over all of its buckets.
#[inline(always)]
pub const fn route(key: u64, seed: u64, n: u64) -> u64 {
    reduce_range(mix64(key, seed ^ ROUTE_SALT), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_is_injective_on_a_sample() {
        let mut seen = std::collections::HashSet::new();
        for k in 0..100_000u64 {
            assert!(seen.insert(mix64(k, DEFAULT_SEED)));
        }
    }

    #[test]
    fn range_reduction_stays_in_range_and_spreads() {
        let n = 1000u64;
        let mut counts = vec![0u32; n as usize];
        for k in 0..200_000u64 {
            let b = reduce_range(mix64(k, DEFAULT_SEED), n);
            assert!(b < n);
            counts[b as usize] += 1;
        }
        // 200 per bucket expected; sequential keys must not cluster.
        let max = *counts.iter().max().unwrap();
        let min = *counts.iter().min().unwrap();
        assert!(min > 120 && max < 290, "min {min} max {max}");
    }

    #[test]
    fn fibonacci_home_is_in_range_and_spreads_sequential_keys() {
        let mut seen = std::collections::HashSet::new();
        for k in 0..1024u64 {
            let h = fibonacci_home(k, DEFAULT_SEED, 12);
            assert!(h < 4096);
            seen.insert(h);
        }
        assert_eq!(seen.len(), 1024, "sequential keys never share a home slot");
    }

    #[test]
    fn low_bit_sharing_keys_spread() {
        let n = 4096u64;
        let mut buckets = std::collections::HashSet::new();
        for k in 0..4096u64 {
            buckets.insert(reduce_range(mix64(k << 20, DEFAULT_SEED), n));
        }
        assert!(buckets.len() > 2400, "{} distinct buckets", buckets.len());
    }

    #[test]
    fn routing_is_independent_of_placement() {
        // Keys routed to one of 8 sub-tables must still cover every home
        // bucket of that sub-table about evenly.
        let (subs, buckets) = (8u64, 64u64);
        let mut counts = vec![0u32; buckets as usize];
        for k in 0..400_000u64 {
            if route(k, DEFAULT_SEED, subs) == 3 {
                counts[reduce_range(mix64(k, DEFAULT_SEED), buckets) as usize] += 1;
            }
        }
        let total: u32 = counts.iter().sum();
        let mean = total as f64 / buckets as f64;
        assert!((total as f64 - 50_000.0).abs() < 1_500.0, "sub-table 3 got {total} keys");
        for c in counts {
            assert!((c as f64 - mean).abs() < 0.15 * mean, "a home bucket got {c}, mean {mean}");
        }
    }
}
