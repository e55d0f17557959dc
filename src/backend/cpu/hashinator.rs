//! Hashinator's tombstone cleaning on the CPU, for both linear schemes (see
//! [`crate::backend::hashinator`] for the method and why it never loses a key).

use rayon::prelude::*;

use super::linear::{Home, Linear};
use super::{CpuTable, Placed, Probing, CHUNK, W};
use crate::backend::hashinator::rebuild_with;
use crate::core::keys::{Key, Value};
use crate::core::layout::{slot_state, SlotState, Word};
use crate::core::scheme::Scheme;
use crate::Result;

/// Slots per parallel task of the compaction (whole buckets).
const COMPACT_CHUNK: usize = 4 * CHUNK;

impl<K: Key, V: Value> CpuTable<K, V> {
    /// The linear probing policy of this table, and whether it is Hashinator's.
    fn linear_policy(&self) -> (Linear<'_, W<K, V>>, bool) {
        let s = self.slots_ref();
        match self.config.scheme {
            Scheme::Hashinator { .. } => {
                let log2_slots = s.cells.len().trailing_zeros();
                (Linear::new(s, Home::Fibonacci { log2_slots }), true)
            }
            _ => (Linear::new(s, Home::Bucket), false),
        }
    }

    /// Step 1, bucket by bucket: leaves in place the keys lookups still reach
    /// once lifted keys and tombstones are EMPTY, empties every other slot,
    /// and returns the lifted pairs (as bits) and the number of keys left.
    /// Linear: a key stays iff its home bucket is this one, packed to the
    /// bucket's front (lookups scan a bucket from its start). Hashinator: a
    /// key at slot j stays iff its home slot is in this bucket at or before
    /// j and no slot from there to j turns EMPTY; it does not move.
    /// (`gh_clean_extract` in kernels/bulk.cu does the same.)
    fn compact(&self) -> (Vec<(u64, u64)>, u64) {
        let (p, slotwise) = self.linear_policy();
        let spb = W::<K, V>::slots_per_bucket();
        let parts: Vec<(Vec<(u64, u64)>, u64)> = self
            .cells
            .par_chunks(COMPACT_CHUNK)
            .enumerate()
            .map(|(c, chunk)| {
                let (mut lifted, mut kept) = (Vec::new(), 0u64);
                for (i, cells) in chunk.chunks(spb).enumerate() {
                    let first = (c * COMPACT_CHUNK + i * spb) as u64;
                    // Packing: the next front slot (dst <= j: the slot written was read already).
                    let mut dst = 0;
                    // In place: the last slot so far that ends up EMPTY, and those to empty.
                    let (mut gap, mut to_empty) = (None::<u64>, 0u32);
                    for (j, cell) in cells.iter().enumerate() {
                        let w = W::<K, V>::load(cell);
                        let k = match slot_state(w) {
                            SlotState::Full(k) => k,
                            SlotState::Tombstone => {
                                (gap, to_empty) = (Some(j as u64), to_empty | 1 << j);
                                continue;
                            }
                            SlotState::Empty => {
                                gap = Some(j as u64);
                                continue;
                            }
                        };
                        let h = p.home_slot(k);
                        let stays = if slotwise {
                            (first..=first + j as u64).contains(&h) && gap.map_or(true, |g| g < h - first)
                        } else {
                            h == first
                        };
                        if !stays {
                            lifted.push((k, w.value()));
                            (gap, to_empty) = (Some(j as u64), to_empty | 1 << j);
                        } else if !slotwise {
                            if dst != j {
                                W::<K, V>::store(&cells[dst], w);
                            }
                            dst += 1;
                        }
                        kept += stays as u64;
                    }
                    for (j, cell) in cells.iter().enumerate() {
                        let empty = if slotwise {
                            to_empty >> j & 1 == 1
                        } else {
                            j >= dst && slot_state(W::<K, V>::load(cell)) != SlotState::Empty
                        };
                        if empty {
                            W::<K, V>::store(cell, W::<K, V>::EMPTY);
                        }
                    }
                }
                (lifted, kept)
            })
            .collect();
        let kept = parts.iter().map(|p| p.1).sum();
        (parts.into_iter().flat_map(|p| p.0).collect(), kept)
    }

    /// Hashinator's tombstone cleaning for the linear schemes: lifts the keys
    /// that sit past their home group, empties tombstones, and inserts the
    /// lifted keys again. `len` is unchanged, tombstones become 0.
    pub(super) fn clean_in_place(&mut self) -> Result<()> {
        let (lifted, kept) = self.compact();
        // Step 2: the scheme's insert, in parallel. Keys are unique and in no
        // slot now, so each is new.
        let (p, _) = self.linear_policy();
        let parts: Vec<(u64, Vec<(u64, u64)>)> = lifted
            .par_chunks(CHUNK)
            .map(|chunk| {
                let (mut placed, mut failed) = (0u64, Vec::new());
                for &(k, v) in chunk {
                    match p.insert(k, v, |_| None) {
                        Placed::New => placed += 1,
                        // Cannot happen (the key was lifted); were it to, the
                        // key is counted where it already is.
                        Placed::Existing => {}
                        Placed::Failed => failed.push((k, v)),
                    }
                }
                (placed, failed)
            })
            .collect();
        let placed: u64 = parts.iter().map(|p| p.0).sum();
        let failed: Vec<(u64, u64)> = parts.into_iter().flat_map(|p| p.1).collect();
        self.live = kept + placed;
        self.tombstones = 0;
        if failed.is_empty() {
            return Ok(());
        }
        let keys = failed.iter().map(|&(k, _)| K::from_u64(k)).collect();
        let values = failed.iter().map(|&(_, v)| V::from_bits(v)).collect();
        rebuild_with(self, keys, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, Config, InsertMode};

    fn table(scheme: Scheme, slots: u64, limit: u64) -> CpuTable<u32, u32> {
        let config = Config { slots, max_probe_buckets: limit, seed: 7, scheme, memory: crate::Memory::Device };
        CpuTable::new(config).unwrap()
    }

    fn keys(n: u32, salt: u32) -> Vec<u32> {
        (0..n).map(|i| i.wrapping_mul(0x9e37_79b1) ^ salt).filter(|&k| k < u32::MAX - 1).collect()
    }

    /// After a cleaning every key sits in its home group or is reachable
    /// from it, and the table holds exactly the keys it held.
    fn check_clean(scheme: Scheme, slots: u64, limit: u64) {
        let mut t = table(scheme, slots, limit);
        let all = keys((slots as f64 * 0.95) as u32, 0x5a5a);
        let out = t.insert(&all, &all, InsertMode::Assign).unwrap();
        let stored: Vec<u32> = (0..all.len()).filter(|i| !out.failed.contains(i)).map(|i| all[i]).collect();
        let erased: Vec<u32> = stored.iter().copied().step_by(4).collect();
        assert_eq!(t.erase(&erased).unwrap(), erased.len() as u64);
        let len = t.len();
        t.clean_tombstones().unwrap();
        assert_eq!((t.len(), t.tombstones()), (len, 0), "{scheme}: len and tombstones");
        let (mut got, _) = t.export().unwrap();
        got.sort_unstable();
        let mut want: Vec<u32> = stored.iter().copied().filter(|k| !erased.contains(k)).collect();
        want.sort_unstable();
        assert_eq!(got, want, "{scheme}: keys after cleaning");
        let (mut v, mut f) = (vec![0; want.len()], vec![false; want.len()]);
        assert_eq!(t.find(&want, &mut v, &mut f).unwrap(), want.len() as u64, "{scheme}: lookups");
        assert_eq!(v, want, "{scheme}: values");
        // No slot holds a tombstone, and the erased keys are gone.
        assert_eq!(t.contains(&erased, &mut vec![false; erased.len()]).unwrap(), 0);
    }

    #[test]
    fn cleaning_keeps_every_key_reachable() {
        for scheme in [Scheme::Linear, Scheme::Hashinator { team: 8 }] {
            check_clean(scheme, 1 << 12, 1 << 10);
        }
    }

    #[test]
    fn cleaning_with_a_one_bucket_probe_limit() {
        for scheme in [Scheme::Linear, Scheme::Hashinator { team: 8 }] {
            check_clean(scheme, 1 << 12, 1);
        }
    }

    #[test]
    fn the_fallback_rebuild_places_keys_that_found_no_slot() {
        for scheme in [Scheme::Linear, Scheme::Hashinator { team: 8 }] {
            // One bucket of probing in a small table: many keys find no slot.
            let mut t = table(scheme, 64, 1);
            let all = keys(200, 0x1234);
            let out = t.insert(&all, &all, InsertMode::Assign).unwrap();
            assert!(!out.failed.is_empty());
            let refused: Vec<u32> = out.failed.iter().map(|&i| all[i]).collect();
            let before = t.len();
            rebuild_with(&mut t, refused.clone(), refused.clone()).unwrap();
            assert_eq!(t.len(), before + refused.len() as u64, "{scheme}: len");
            assert_eq!(t.tombstones(), 0);
            let (mut v, mut f) = (vec![0; all.len()], vec![false; all.len()]);
            assert_eq!(t.find(&all, &mut v, &mut f).unwrap(), all.len() as u64, "{scheme}: every key placed");
            assert_eq!(v, all, "{scheme}: values");
            assert!(t.slots() > 64, "{scheme}: grew to fit");
        }
    }
}
