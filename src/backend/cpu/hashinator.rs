//! Hashinator's tombstone cleaning on the CPU, for both linear schemes (see
//! [`crate::backend::hashinator`] for the method and why it never loses a key).

use rayon::prelude::*;

use super::linear::{Home, Linear};
use super::{Cell, CpuTable, Placed, Probing, CHUNK, W};
use crate::backend::hashinator::rebuild_with;
use crate::backend::{Backend, InsertMode};
use crate::core::keys::{Key, Value};
use crate::core::layout::{slot_state, SlotState, Word};
use crate::core::scheme::Scheme;
use crate::{Device, Error, Result};

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

    /// Which slots of one bucket (`cells`, from slot `first`) step 1 lifts
    /// (bit j of the first mask) and which hold a tombstone (the second).
    /// Linear: a key stays iff its home bucket is this one. Hashinator: a
    /// key at slot j stays iff its home slot is in this bucket at or before
    /// j and no slot from there to j turns EMPTY.
    /// (`gh_clean_extract` in kernels/bulk.cu decides the same.)
    fn plan_bucket(p: &Linear<'_, W<K, V>>, slotwise: bool, cells: &[Cell<K, V>], first: u64) -> (u32, u32) {
        // `gap`: the last slot so far that ends up EMPTY.
        let (mut lift, mut tombs, mut gap) = (0u32, 0u32, None::<u64>);
        for (j, cell) in cells.iter().enumerate() {
            let k = match slot_state(W::<K, V>::load(cell)) {
                SlotState::Full(k) => k,
                SlotState::Tombstone => {
                    (gap, tombs) = (Some(j as u64), tombs | 1 << j);
                    continue;
                }
                SlotState::Empty => {
                    gap = Some(j as u64);
                    continue;
                }
            };
            let h = p.home_slot(k);
            let stays = if slotwise {
                (first..=first + j as u64).contains(&h) && gap.is_none_or(|g| g < h - first)
            } else {
                h == first
            };
            if !stays {
                (gap, lift) = (Some(j as u64), lift | 1 << j);
            }
        }
        (lift, tombs)
    }

    /// Step 1, bucket by bucket: leaves in place the keys lookups still reach
    /// once lifted keys and tombstones are EMPTY ([`Self::plan_bucket`]),
    /// empties every other slot, and returns the lifted pairs (as bits) and
    /// the number of keys left. Linear packs the keys that stay to the
    /// bucket's front (lookups scan a bucket from its start); Hashinator's
    /// do not move. A first pass only counts the keys to lift, so that their
    /// buffer is allocated (or found missing) before any slot changes.
    fn compact(&self) -> Result<(Vec<(u64, u64)>, u64)> {
        let (p, slotwise) = self.linear_policy();
        let spb = W::<K, V>::slots_per_bucket();
        let first = |c: usize, i: usize| (c * COMPACT_CHUNK + i * spb) as u64;
        let counts: Vec<usize> = self
            .cells
            .par_chunks(COMPACT_CHUNK)
            .enumerate()
            .map(|(c, chunk)| {
                let buckets = chunk.chunks(spb).enumerate();
                buckets.map(|(i, cells)| Self::plan_bucket(&p, slotwise, cells, first(c, i)).0.count_ones() as usize).sum()
            })
            .collect();
        let mut lifted = alloc_pairs(counts.iter().sum())?;
        // Each task's share of the buffer, in slot order.
        let mut rest = &mut lifted[..];
        let mut shares = Vec::with_capacity(counts.len());
        for &n in &counts {
            let (share, tail) = std::mem::take(&mut rest).split_at_mut(n);
            shares.push(share);
            rest = tail;
        }
        let kept = self
            .cells
            .par_chunks(COMPACT_CHUNK)
            .enumerate()
            .zip(shares)
            .map(|((c, chunk), share)| {
                let (mut kept, mut out) = (0u64, 0);
                for (i, cells) in chunk.chunks(spb).enumerate() {
                    let (lift, tombs) = Self::plan_bucket(&p, slotwise, cells, first(c, i));
                    // Packing: the next front slot (dst <= j: the slot written was read already).
                    let mut dst = 0;
                    for (j, cell) in cells.iter().enumerate() {
                        let w = W::<K, V>::load(cell);
                        let SlotState::Full(k) = slot_state(w) else { continue };
                        if lift >> j & 1 == 1 {
                            share[out] = (k, w.value());
                            out += 1;
                            continue;
                        }
                        kept += 1;
                        if !slotwise {
                            if dst != j {
                                W::<K, V>::store(&cells[dst], w);
                            }
                            dst += 1;
                        }
                    }
                    for (j, cell) in cells.iter().enumerate() {
                        let empty = if slotwise {
                            (lift | tombs) >> j & 1 == 1
                        } else {
                            j >= dst && slot_state(W::<K, V>::load(cell)) != SlotState::Empty
                        };
                        if empty {
                            W::<K, V>::store(cell, W::<K, V>::EMPTY);
                        }
                    }
                }
                debug_assert_eq!(out, share.len(), "the counting pass lifts the same keys");
                kept
            })
            .sum();
        Ok((lifted, kept))
    }

    /// Hashinator's tombstone cleaning for the linear schemes: lifts the keys
    /// that sit past their home group, empties tombstones, and inserts the
    /// lifted keys again. `len` is unchanged, tombstones become 0. Fails
    /// only before any slot changes (no memory for the lifted keys).
    pub(super) fn clean_in_place(&mut self) -> Result<()> {
        let (lifted, kept) = self.compact()?;
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
        drop(lifted);
        let placed: u64 = parts.iter().map(|p| p.0).sum();
        let failed: Vec<(u64, u64)> = parts.into_iter().flat_map(|p| p.1).collect();
        self.live = kept + placed;
        self.tombstones = 0;
        if failed.is_empty() {
            return Ok(());
        }
        let keys = failed.iter().map(|&(k, _)| K::from_u64(k)).collect();
        let values = failed.iter().map(|&(_, v)| V::from_bits(v)).collect();
        self.settle(keys, values)
    }

    /// Places keys a cleaning left in no slot: by [`rebuild_with`] or, when
    /// that finds no memory, by the last resort (see
    /// [`crate::backend::hashinator`]): the probe limit becomes the whole
    /// table until the next rehash, and each key takes the first EMPTY slot
    /// of its sequence. Needs no memory; nothing is lost.
    fn settle(&mut self, mut keys: Vec<K>, mut values: Vec<V>) -> Result<()> {
        if rebuild_with(self, &mut keys, &mut values).is_ok() {
            return Ok(());
        }
        self.probe.limit = self.probe.buckets;
        let out = Backend::insert(self, &keys, &values, InsertMode::IfAbsent)?;
        if !out.failed.is_empty() {
            // Cannot happen: each key out left an EMPTY slot behind.
            return Err(Error::RehashFailed { slots: self.slots(), unplaced: out.failed.len() as u64 });
        }
        Ok(())
    }
}

/// A buffer of `n` pairs, reporting failure instead of aborting.
fn alloc_pairs(n: usize) -> Result<Vec<(u64, u64)>> {
    let bytes = n as u64 * 16;
    crate::fault::alloc_point(bytes, Device::Cpu)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| super::oom(bytes))?;
    v.resize(n, (0, 0));
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, Config, InsertMode};

    fn table(scheme: Scheme, slots: u64, limit: u64) -> CpuTable<u32, u32> {
        let (memory, region_build) = (crate::Memory::Device, crate::RegionBuild::Auto);
        let config = Config { slots, max_probe_buckets: limit, seed: 7, scheme, memory, region_build, wgpu_portable: false };
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
            let (mut k, mut v) = (refused.clone(), refused.clone());
            rebuild_with(&mut t, &mut k, &mut v).unwrap();
            assert!(k.is_empty() && v.is_empty(), "{scheme}: nothing left out");
            assert_eq!(t.len(), before + refused.len() as u64, "{scheme}: len");
            assert_eq!(t.tombstones(), 0);
            let (mut v, mut f) = (vec![0; all.len()], vec![false; all.len()]);
            assert_eq!(t.find(&all, &mut v, &mut f).unwrap(), all.len() as u64, "{scheme}: every key placed");
            assert_eq!(v, all, "{scheme}: values");
            assert!(t.slots() > 64, "{scheme}: grew to fit");
        }
    }

    /// Keys a cleaning left in no slot are placed whichever allocation of
    /// the fallback rebuild fails: the last resort needs no memory.
    #[test]
    fn keys_left_out_are_placed_whichever_rebuild_allocation_fails() {
        for scheme in [Scheme::Linear, Scheme::Hashinator { team: 8 }] {
            let mut k = 0;
            loop {
                // One bucket of probing: many keys find no slot, yet most slots are EMPTY.
                let mut t = table(scheme, 256, 1);
                let all = keys(128, 0x4321);
                let out = t.insert(&all, &all, InsertMode::Assign).unwrap();
                assert!(!out.failed.is_empty());
                let refused: Vec<u32> = out.failed.iter().map(|&i| all[i]).collect();
                let before = t.len();
                let guard = crate::fault::fail_allocations(k, 1);
                t.settle(refused.clone(), refused.clone()).unwrap();
                let injected = guard.injected();
                drop(guard);
                assert_eq!(t.len(), before + refused.len() as u64, "{scheme}, fault {k}: len");
                let (mut v, mut f) = (vec![0; all.len()], vec![false; all.len()]);
                assert_eq!(t.find(&all, &mut v, &mut f).unwrap(), all.len() as u64, "{scheme}, fault {k}: every key");
                assert_eq!(v, all, "{scheme}, fault {k}: values");
                // Still usable: more keys go in and are found.
                let more = keys(16, 0x777);
                let out = t.insert(&more, &more, InsertMode::Assign).unwrap();
                let placed: Vec<u32> = (0..more.len()).filter(|i| !out.failed.contains(i)).map(|i| more[i]).collect();
                let mut f = vec![false; placed.len()];
                assert_eq!(t.contains(&placed, &mut f).unwrap(), placed.len() as u64, "{scheme}, fault {k}: usable");
                if injected == 0 {
                    assert!(k >= 1, "{scheme}: the rebuild allocates");
                    break;
                }
                k += 1;
            }
        }
    }
}
