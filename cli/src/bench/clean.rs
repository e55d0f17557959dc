//! The tombstone-cleaning ops (Hashinator, fig. 10): a table filled to
//! [`defaults::CLEAN_LOAD`] loses [`defaults::CLEAN_ERASED`] of its keys
//! (untimed); the timed part makes room again, by `clean_tombstones`
//! (`clean_reinsert`) or by a rehash at the same capacity (`rehash_reinsert`),
//! then inserts half of the erased keys again. Schemes without an in-place
//! cleaning rehash in both. `n` counts the reinserted keys, so `gops` is the
//! reinsertion rate with the cleaning's cost included, as in the paper.

use gpuhash::{HashTable, Key, Value};
use rayon::prelude::*;

use super::defaults;
use super::grid::Op;
use super::keys::{GenKey, KeyGen, Workload};

impl Op {
    /// Whether the op is one of the cleaning pair.
    pub(crate) fn cleans(self) -> bool {
        matches!(self, Op::CleanReinsert | Op::RehashReinsert)
    }

    /// The only load an op runs at, when the load axis does not apply.
    pub(crate) fn fixed_load(self) -> Option<f64> {
        self.cleans().then_some(defaults::CLEAN_LOAD)
    }
}

/// Keys erased before the timed part, and keys the timed part inserts
/// again, out of `distinct` prefilled keys.
pub(crate) fn clean_counts(distinct: u64) -> (u64, u64) {
    let erased = (distinct as f64 * defaults::CLEAN_ERASED).round() as u64;
    (erased, (erased as f64 * defaults::CLEAN_REINSERTED).round() as u64)
}

impl<K: GenKey, V: Value> Workload<K, V> {
    /// Prefill of `n` keys; the timed keys are the first reinserted ones
    /// of the erased keys (the erased ones lead the prefill), with new values.
    pub(crate) fn build_clean(&mut self, n: u64, g: &KeyGen) {
        let (_, again) = clean_counts(n);
        self.prefill = (0..n).into_par_iter().map(|i| g.hit(i)).collect();
        self.prefill_values = (0..n).into_par_iter().map(V::from_bits).collect();
        self.keys = self.prefill[..again as usize].to_vec();
        self.values = (0..again).into_par_iter().map(|i| V::from_bits(n + i)).collect();
    }
}

/// Keys erased after the prefill and before the timed part (none for other ops).
pub(crate) fn erased_before<K: GenKey, V: Value>(op: Op, w: &Workload<K, V>) -> &[K] {
    if !op.cleans() {
        return &[];
    }
    let (erased, _) = clean_counts(w.prefill.len() as u64);
    &w.prefill[..erased as usize]
}

/// The timed part's first step: reclaims the tombstones as the op says
/// (nothing for other ops).
pub(crate) fn make_room<K: Key, V: Value>(t: &mut HashTable<K, V>, op: Op) -> gpuhash::Result<()> {
    match op {
        Op::CleanReinsert => t.clean_tombstones(),
        Op::RehashReinsert => t.rehash(t.capacity()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifth_erased_and_half_of_it_reinserted() {
        assert_eq!(clean_counts(1000), (200, 100));
        assert_eq!(clean_counts(0), (0, 0));
        assert_eq!(clean_counts(7), (1, 1));
        assert_eq!(Op::CleanReinsert.fixed_load(), Some(0.9));
        assert_eq!(Op::Insert.fixed_load(), None);
    }

    #[test]
    fn the_reinserted_keys_are_erased_ones() {
        let mut w = Workload::<u32, u32>::default();
        w.build_clean(922, &KeyGen::new(5));
        let erased = erased_before(Op::CleanReinsert, &w);
        assert_eq!((w.prefill.len(), erased.len(), w.keys.len()), (922, 184, 92));
        assert!(w.keys.iter().all(|k| erased.contains(k)));
        assert_eq!(w.ops(), 92);
        assert!(erased_before(Op::Insert, &w).is_empty());
    }
}
