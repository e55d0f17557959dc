//! Seeded key generation and the per-repetition workloads.
//!
//! Key `i` of a repetition is a bijective mix of the counter `i` and the
//! repetition's seed, so keys `0..n` are distinct without any bookkeeping.
//! Counters below half the key domain give the keys that are stored ("hits");
//! counters from half the domain up give keys that are certainly never stored
//! ("misses"), because a bijection maps disjoint counters to disjoint keys.

use std::ops::Range;

use gpuhash::{Key, Value};
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;

use super::defaults;
use super::grid::{Batch, Case, Op};

/// A key type the generator can produce.
pub(crate) trait GenKey: Key {
    /// The `i`-th key for `seed`; distinct `i` (within the key width) give
    /// distinct keys.
    fn nth(seed: u64, i: u64) -> Self;
}

impl GenKey for u32 {
    #[inline]
    fn nth(seed: u64, i: u64) -> u32 {
        // xor-shift-multiply rounds with odd multipliers: each step is
        // invertible on 32 bits, so the whole map is a bijection.
        let mut x = (i as u32) ^ (seed as u32);
        x ^= x >> 16;
        x = x.wrapping_mul(0x21f0_aaad);
        x ^= x >> 15;
        x = x.wrapping_mul(0x735a_2d97);
        x ^= x >> 15;
        x
    }
}

impl GenKey for u64 {
    #[inline]
    fn nth(seed: u64, i: u64) -> u64 {
        mix64(i ^ seed)
    }
}

/// A 64-bit bijective mixer (the splitmix64 finaliser), also used to derive
/// per-repetition seeds.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Distinct keys an `apply_sum` call inserts: the case's keys for the
/// whole load, `batch / multiplicity` fresh ones (at least one) for a batch.
pub(crate) fn apply_distinct(case: &Case) -> u64 {
    match case.batch {
        Batch::All => case.distinct,
        Batch::Keys(b) => (b / case.multiplicity.max(1)).max(1),
    }
}

/// Hit counters a case uses: its keys, plus the fresh keys a batch inserts.
pub(crate) fn hit_counters(case: &Case) -> u64 {
    match (case.batch, case.op) {
        (Batch::Keys(b), Op::Insert | Op::InsertIfAbsent) => case.distinct + b,
        (Batch::Keys(_), op) if op.applies() => case.distinct + apply_distinct(case),
        _ => case.distinct,
    }
}

/// The key counter (out of `distinct`) at position `j` of an apply batch
/// of `total` positions: every key once in the first pass, then, for
/// `apply_sum`, every key again pass after pass; for `apply_zipf`, a
/// zipf-distributed draw; for `apply_hot`, the pass pattern with
/// [`defaults::HOT_COPIES`] positions (at most all after the first pass)
/// spread evenly and made counter 0. The first pass keeps the distinct
/// keys exact, so the stored count checks every skew alike.
pub(crate) fn apply_counter(op: Op, g: &KeyGen, j: u64, distinct: u64, total: u64) -> u64 {
    let d = distinct.max(1);
    if j < d {
        return j;
    }
    match op {
        Op::ApplyZipf => g.zipf_rank(j, d),
        Op::ApplyHot => {
            let later = u128::from(total.saturating_sub(d).max(1));
            let hot = u128::from(defaults::HOT_COPIES).min(later);
            let q = u128::from(j - d);
            // Position q is hot where the running count of hot positions steps.
            if (q + 1) * hot / later > q * hot / later {
                0
            } else {
                j % d
            }
        }
        _ => j % d,
    }
}

/// Largest number of distinct hit (or miss) keys of a key width.
pub(crate) fn domain_half(key_bits: u32) -> u64 {
    1u64 << (key_bits - 1)
}

/// The seed of repetition `rep` (the warm-up is repetition 0).
pub(crate) fn rep_seed(base: u64, rep: usize) -> u64 {
    mix64(base.wrapping_add(mix64(rep as u64 + 1)))
}

/// Generates keys of one repetition.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyGen {
    seed: u64,
}

impl KeyGen {
    pub(crate) fn new(seed: u64) -> Self {
        KeyGen { seed }
    }

    /// The stored key with counter `i`.
    #[inline]
    pub(crate) fn hit<K: GenKey>(&self, i: u64) -> K {
        K::nth(self.seed, i)
    }

    /// The never-stored key with counter `i`.
    #[inline]
    pub(crate) fn miss<K: GenKey>(&self, i: u64) -> K {
        K::nth(self.seed, i + domain_half(K::BITS))
    }

    /// Rank (0 the most frequent) of a zipf([`defaults::ZIPF_EXPONENT`])
    /// draw over `n` ranks for position `i`: a generator seeded per
    /// position, so the draws are replayable and parallel.
    fn zipf_rank(&self, i: u64, n: u64) -> u64 {
        let zipf = Zipf::new(n as f64, defaults::ZIPF_EXPONENT).expect("n >= 1 and a positive exponent");
        let mut rng = Pcg64Mcg::seed_from_u64(mix64(i ^ self.seed.rotate_left(29)));
        (zipf.sample(&mut rng) as u64).clamp(1, n) - 1
    }

    /// A fair coin per position, independent of the keys.
    #[inline]
    fn coin(&self, i: u64) -> bool {
        mix64(i ^ self.seed.rotate_left(17)) >> 63 == 1
    }

    /// `f(i)` for `i` in `0..n`, in parallel.
    fn fill<T: Send>(n: u64, f: impl Fn(u64) -> T + Sync + Send) -> Vec<T> {
        (0..n).into_par_iter().map(f).collect()
    }
}

/// The inputs of one repetition of one case, shared by every target so
/// that all of them see the same keys.
#[derive(Debug)]
pub(crate) struct Workload<K, V> {
    /// Pairs stored before the timed region.
    pub prefill: Vec<K>,
    pub prefill_values: Vec<V>,
    /// The timed call's keys (inserts, lookups, erases; for `mixed`, its inserts).
    pub keys: Vec<K>,
    /// Values of the timed call (insert ops only).
    pub values: Vec<V>,
    /// `mixed` only: keys erased and looked up, split over rounds.
    pub erase_keys: Vec<K>,
    pub find_keys: Vec<K>,
    /// `mixed` only: rounds, each (insert, erase, find) end offsets into
    /// `keys`, `erase_keys` and `find_keys`.
    pub rounds: Vec<[usize; 3]>,
}

impl<K, V> Default for Workload<K, V> {
    fn default() -> Self {
        Workload {
            prefill: Vec::new(),
            prefill_values: Vec::new(),
            keys: Vec::new(),
            values: Vec::new(),
            erase_keys: Vec::new(),
            find_keys: Vec::new(),
            rounds: Vec::new(),
        }
    }
}

impl<K, V> Workload<K, V> {
    /// `mixed` only: each round's ranges of `keys` (and `values`) to insert,
    /// of `erase_keys` to erase and of `find_keys` to look up, in order.
    pub(crate) fn round_ranges(&self) -> impl Iterator<Item = [Range<usize>; 3]> + '_ {
        let starts = std::iter::once([0usize; 3]).chain(self.rounds.iter().copied());
        starts.zip(&self.rounds).map(|(a, b)| [a[0]..b[0], a[1]..b[1], a[2]..b[2]])
    }
}

impl<K: GenKey, V: Value> Workload<K, V> {
    /// Builds the inputs of `case` for the repetition with `seed`.
    pub(crate) fn build(case: &Case, seed: u64) -> Self {
        let g = KeyGen::new(seed);
        if let Batch::Keys(b) = case.batch {
            if case.op != Op::Mixed {
                return Self::build_batch(case, &g, b);
            }
        }
        let n = case.distinct;
        let hits = |lo: u64, count: u64| KeyGen::fill(count, |i| g.hit::<K>(lo + i));
        let vals = |lo: u64, count: u64| KeyGen::fill(count, |i| V::from_bits(lo + i));
        let mut w = Workload::<K, V>::default();
        match case.op {
            Op::Insert | Op::InsertIfAbsent => {
                w.keys = hits(0, n);
                w.values = vals(0, n);
            }
            Op::FindHit | Op::Contains | Op::Erase => {
                w.prefill = hits(0, n);
                w.prefill_values = vals(0, n);
                w.keys = w.prefill.clone();
            }
            Op::FindMiss50 => {
                w.prefill = hits(0, n);
                w.prefill_values = vals(0, n);
                w.keys = KeyGen::fill(n, |i| if g.coin(i) { g.hit(i) } else { g.miss(i) });
            }
            Op::FindMiss => {
                w.prefill = hits(0, n);
                w.prefill_values = vals(0, n);
                w.keys = KeyGen::fill(n, |i| g.miss(i));
            }
            Op::ApplySum | Op::ApplyZipf | Op::ApplyHot => {
                // apply_sum: every distinct key once per pass, `multiplicity`
                // passes, so copies of a key are far apart, as in a stream of
                // k-mers or events; the skews redraw the later passes.
                let total = n * case.multiplicity;
                w.keys = KeyGen::fill(total, |j| g.hit(apply_counter(case.op, &g, j, n, total)));
                w.values = vec![V::from_bits(1); total as usize];
            }
            Op::Mixed => w.build_mixed(case, &g),
            Op::CleanReinsert | Op::RehashReinsert => w.build_clean(n, &g),
        }
        w
    }

    /// A batch of `b` keys against a table prefilled with the case's `n`
    /// keys: inserts bring fresh keys (`apply_sum`: `b / m` fresh keys,
    /// each `m` times); hit lookups and erases take stored keys spread
    /// evenly over the prefill (repeating when `b > n`), misses come from
    /// the miss counters.
    fn build_batch(case: &Case, g: &KeyGen, b: u64) -> Self {
        let n = case.distinct;
        let mut w = Workload::<K, V> {
            prefill: KeyGen::fill(n, |i| g.hit(i)),
            prefill_values: KeyGen::fill(n, V::from_bits),
            ..Default::default()
        };
        let stored = move |i: u64| {
            let c = if b <= n { (i as u128 * n as u128 / b as u128) as u64 } else { i % n.max(1) };
            g.hit::<K>(c)
        };
        match case.op {
            Op::Insert | Op::InsertIfAbsent => {
                w.keys = KeyGen::fill(b, |i| g.hit(n + i));
                w.values = KeyGen::fill(b, |i| V::from_bits(n + i));
            }
            Op::ApplySum | Op::ApplyZipf | Op::ApplyHot => {
                let fresh = apply_distinct(case);
                w.keys = KeyGen::fill(b, |j| g.hit(n + apply_counter(case.op, g, j, fresh, b)));
                w.values = vec![V::from_bits(1); b as usize];
            }
            Op::FindHit | Op::Contains | Op::Erase => w.keys = KeyGen::fill(b, stored),
            Op::FindMiss50 => w.keys = KeyGen::fill(b, |i| if g.coin(i) { stored(i) } else { g.miss(i) }),
            Op::FindMiss => w.keys = KeyGen::fill(b, |i| g.miss(i)),
            Op::Mixed => w.build_mixed(case, g),
            // Whole-load operations (`Batch::applies_to` keeps other batches away).
            Op::CleanReinsert | Op::RehashReinsert => w.build_clean(n, g),
        }
        w
    }

    /// `mixed`: the table is prefilled so that after all inserts the used
    /// slots (live keys plus tombstones, which inserts do not reuse) reach
    /// exactly the case's load. Erases remove prefilled keys from the low
    /// counters up; finds look up prefilled keys from the high counters down,
    /// so with the default 20:10:70 split every find is a hit.
    fn build_mixed(&mut self, case: &Case, g: &KeyGen) {
        let total = case.distinct;
        let (ins, era, fnd) = case.mix.split(total);
        let pre = total - ins;
        self.prefill = KeyGen::fill(pre, |i| g.hit(i));
        self.prefill_values = KeyGen::fill(pre, V::from_bits);
        self.keys = KeyGen::fill(ins, |i| g.hit(pre + i));
        self.values = KeyGen::fill(ins, |i| V::from_bits(pre + i));
        self.erase_keys = KeyGen::fill(era, |i| if pre > 0 { g.hit(i % pre) } else { g.miss(i) });
        self.find_keys = KeyGen::fill(fnd, |i| if pre > 0 { g.hit(pre - 1 - i % pre) } else { g.miss(i) });
        let rounds = total.div_ceil(case.round_ops).max(1);
        let end = |len: u64, r: u64| (len * r / rounds) as usize;
        self.rounds = (1..=rounds).map(|r| [end(ins, r), end(era, r), end(fnd, r)]).collect();
    }

    /// Operations in the timed call(s).
    pub(crate) fn ops(&self) -> u64 {
        (self.keys.len() + self.erase_keys.len() + self.find_keys.len()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn hits_are_distinct_and_disjoint_from_misses() {
        let g = KeyGen::new(rep_seed(7, 3));
        let hits: HashSet<u32> = (0..100_000).map(|i| g.hit(i)).collect();
        assert_eq!(hits.len(), 100_000);
        assert!((0..100_000).all(|i| !hits.contains(&g.miss::<u32>(i))));
        let hits: HashSet<u64> = (0..100_000).map(|i| g.hit(i)).collect();
        assert!((0..100_000).all(|i| !hits.contains(&g.miss::<u64>(i))));
    }

    #[test]
    fn u32_mix_is_a_bijection_on_a_window() {
        // A full check of 2^32 inputs is too slow for a unit test; a dense
        // window of 2^20 consecutive counters must not collide.
        let keys: HashSet<u32> = (0..1u64 << 20).map(|i| u32::nth(12345, i)).collect();
        assert_eq!(keys.len(), 1 << 20);
    }

    fn case(op: Op, batch: Batch) -> Case {
        Case {
            op,
            key_bits: 64,
            value_bits: 32,
            slots: 4096,
            table_bytes: 4096 * 16,
            load: 0.5,
            distinct: 2048,
            batch,
            multiplicity: 4,
            mix: crate::bench::defaults::MIX,
            round_ops: 1 << 16,
            paging: None,
        }
    }

    #[test]
    fn batches_take_fresh_or_stored_keys() {
        let seed = rep_seed(3, 1);
        for op in Op::ALL.iter().copied().filter(|op| !matches!(op, Op::Mixed | Op::CleanReinsert | Op::RehashReinsert)) {
            for b in [100u64, 2048, 5000] {
                let c = case(op, Batch::Keys(b));
                let w = Workload::<u64, u32>::build(&c, seed);
                assert_eq!(w.prefill.len(), 2048, "{op:?} {b}");
                assert_eq!(w.keys.len() as u64, b, "{op:?} {b}");
                assert_eq!(w.ops(), b);
                let stored: HashSet<u64> = w.prefill.iter().copied().collect();
                let hits = w.keys.iter().filter(|k| stored.contains(k)).count() as u64;
                let distinct = w.keys.iter().collect::<HashSet<_>>().len() as u64;
                match op {
                    Op::Insert | Op::InsertIfAbsent => {
                        assert_eq!((hits, distinct), (0, b), "{op:?} {b}: fresh distinct keys");
                        assert_eq!(w.values.len() as u64, b);
                    }
                    Op::ApplySum | Op::ApplyZipf | Op::ApplyHot => {
                        assert_eq!(hits, 0, "{op:?} {b}");
                        assert_eq!(distinct, apply_distinct(&c), "{op:?} {b}");
                        assert_eq!(hit_counters(&c), 2048 + distinct);
                    }
                    Op::FindHit | Op::Contains | Op::Erase => {
                        assert_eq!(hits, b, "{op:?} {b}: every key stored");
                        assert_eq!(distinct, b.min(2048), "{op:?} {b}: spread, repeating only past the prefill");
                    }
                    Op::FindMiss => assert_eq!(hits, 0),
                    _ => assert!(hits > b / 4 && hits < b * 3 / 4, "{op:?} {b}: {hits} hits"),
                }
            }
        }
        // The whole load keeps today's workloads.
        let w = Workload::<u64, u32>::build(&case(Op::Insert, Batch::All), seed);
        assert!(w.prefill.is_empty() && w.keys.len() == 2048);
    }

    #[test]
    fn apply_skews_keep_every_key_and_skew_the_rest() {
        let mut c = case(Op::ApplySum, Batch::All);
        c.multiplicity = 64; // 2048 keys, 131,072 positions
        let counts = |op| {
            let w = Workload::<u64, u32>::build(&Case { op, ..c }, rep_seed(9, 1));
            let mut m = std::collections::HashMap::<u64, u64>::new();
            w.keys.iter().for_each(|k| *m.entry(*k).or_default() += 1);
            let mut v: Vec<u64> = m.into_values().collect();
            v.sort_unstable_by(|a, b| b.cmp(a));
            v
        };
        let total = 2048 * 64;
        let uniform = counts(Op::ApplySum);
        assert_eq!((uniform.len(), uniform[0], uniform[2047]), (2048, 64, 64));
        // The hot key: every position after the first pass (fewer than 2^24).
        let hot = counts(Op::ApplyHot);
        assert_eq!((hot.len(), hot[0], hot[1]), (2048, total - 2047, 1));
        // zipf(1.2) over 2048 ranks: the first takes 1/H(2048, 1.2), about 22%,
        // of the draws after the first pass; every key appears.
        let zipf = counts(Op::ApplyZipf);
        let share = (zipf[0] - 1) as f64 / (total - 2048) as f64;
        assert!(zipf.len() == 2048 && (0.21..0.235).contains(&share), "{} keys, top share {share}", zipf.len());
    }

    #[test]
    fn mixed_rounds_cover_each_list_once_in_order() {
        let mut c = case(Op::Mixed, Batch::All);
        c.round_ops = 300; // 2048 ops: seven rounds
        let w = Workload::<u64, u32>::build(&c, rep_seed(5, 1));
        let rounds: Vec<_> = w.round_ranges().collect();
        assert_eq!(rounds.len(), w.rounds.len());
        assert_eq!(rounds.len(), 7);
        for (list, len) in [(0, w.keys.len()), (1, w.erase_keys.len()), (2, w.find_keys.len())] {
            let mut next = 0;
            for r in &rounds {
                assert_eq!(r[list].start, next, "list {list}: rounds follow each other");
                next = r[list].end;
            }
            assert_eq!(next, len, "list {list}: the rounds cover it");
        }
        assert_eq!(w.values.len(), w.keys.len());
    }

    #[test]
    fn repetitions_get_fresh_keys() {
        let (a, b) = (KeyGen::new(rep_seed(1, 1)), KeyGen::new(rep_seed(1, 2)));
        let first: HashSet<u64> = (0..1000).map(|i| a.hit(i)).collect();
        assert!((0..1000).filter(|&i| first.contains(&b.hit::<u64>(i))).count() == 0);
    }
}
