//! Slab lists ([`Scheme::SlabList`](crate::Scheme::SlabList)): each key's
//! chain of 32-byte slabs from its head bucket, grown from the pool (see
//! [`crate::core::slab`] for the geometry).
//!
//! Inserts claim the first EMPTY slot of the key's chain, in chain order, as
//! linear probing does along its sequence; slabs are only ever appended, so
//! every thread inserting a key walks the same slots in the same order and a
//! lookup may stop at the first EMPTY slot. When the last slab is full, the
//! thread takes a pool slab (a bump of the `allocated` counter) and links it
//! with a compare-and-swap of the last `next` word from 0. A thread that
//! loses that race keeps its slab and links it at the chain's end later (as
//! soon as it meets the end again, or before it returns), so no slab is lost.
//!
//! A key is refused only when its chain is full and the pool is used up.
//! Before refusing, the thread waits until every slab handed out is linked
//! (threads that hold an unlinked slab never wait, so this ends) and looks
//! at the chain's end once more: a slab still on its way to this chain would
//! otherwise let a later copy of the key in the same batch be stored after
//! an earlier copy was refused.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{prefetch, tombstone, Placed, Probing, Slots};
use crate::core::layout::{slot_state, SlotState, Word};
use crate::core::probe::ProbeParams;
use crate::core::slab::Slabs;

/// The slab-list policy over one slot array.
pub(crate) struct SlabList<'a, Wd: Word> {
    s: Slots<'a, Wd>,
    geo: Slabs,
    /// Multiply-shift onto the heads.
    heads: ProbeParams,
}

/// Where a walk of a key's chain ended.
enum Walk<Wd> {
    /// The key is in this slot, holding this word.
    Found(usize, Wd),
    /// The key is absent: the chain has an EMPTY slot, or ends.
    Absent,
}

impl<'a, Wd: Word> SlabList<'a, Wd> {
    pub(crate) fn new(s: Slots<'a, Wd>) -> Self {
        let geo = Slabs::of(s.cells.len() as u64 / s.spb as u64);
        let heads = ProbeParams { buckets: geo.heads(), seed: s.probe.seed, limit: 1 };
        SlabList { s, geo, heads }
    }

    #[inline(always)]
    fn head(&self, key: u64) -> u64 {
        self.heads.home(key)
    }

    #[inline(always)]
    fn next(&self, slab: u64) -> &AtomicU64 {
        &self.s.aux[slab as usize]
    }

    fn counter(&self, word: u64) -> &AtomicU64 {
        &self.s.aux[word as usize]
    }

    /// The cells of one slab.
    #[inline(always)]
    fn slab(&self, slab: u64) -> impl Iterator<Item = usize> {
        let first = slab as usize * self.s.spb;
        first..first + self.s.spb
    }

    fn locate(&self, key: u64) -> Walk<Wd> {
        let mut slab = self.head(key);
        loop {
            for i in self.slab(slab) {
                let w = Wd::load(&self.s.cells[i]);
                match slot_state(w) {
                    SlotState::Full(k) if k == key => return Walk::Found(i, w),
                    SlotState::Empty => return Walk::Absent,
                    _ => {}
                }
            }
            match self.next(slab).load(Ordering::Acquire) {
                0 => return Walk::Absent,
                n => slab = n,
            }
        }
    }

    /// Takes a slab from the pool, or `None` when it is used up.
    fn allocate(&self) -> Option<u64> {
        let pool = self.geo.pool();
        self.counter(self.geo.allocated_word())
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < pool).then_some(n + 1))
            .ok()
            .map(|n| self.geo.pool_slab(n))
    }

    /// Links `slab` at the end of the chain through `from`.
    fn link(&self, mut from: u64, slab: u64) {
        loop {
            match self.next(from).compare_exchange(0, slab, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.counter(self.geo.linked_word()).fetch_add(1, Ordering::AcqRel);
                    return;
                }
                Err(n) => from = n,
            }
        }
    }

    /// With the pool used up: waits until every slab handed out is linked.
    fn settle(&self) {
        let allocated = self.counter(self.geo.allocated_word());
        let linked = self.counter(self.geo.linked_word());
        while linked.load(Ordering::Acquire) < allocated.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }

    /// Chain position (0 = head) of the slab holding `slot` in `key`'s chain.
    fn position(&self, key: u64, slot: usize) -> u64 {
        let target = (slot / self.s.spb) as u64;
        let (mut slab, mut d) = (self.head(key), 0);
        while slab != target {
            match self.next(slab).load(Ordering::Acquire) {
                0 => break,
                n => slab = n,
            }
            d += 1;
        }
        d
    }
}

impl<Wd: Word> Probing<Wd> for SlabList<'_, Wd> {
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        prefetch(&self.s.cells[self.head(key) as usize * self.s.spb] as *const Wd::Atomic);
    }

    fn insert(&self, key: u64, value: u64, on_existing: impl Fn(u64) -> Option<u64>) -> Placed {
        let new_word = Wd::pack(key, value);
        let mut slab = self.head(key);
        // A pool slab taken but not linked yet (a lost race to link it).
        let mut spare: Option<u64> = None;
        let placed = 'walk: loop {
            for i in self.slab(slab) {
                let cell = &self.s.cells[i];
                let mut w = Wd::load(cell);
                loop {
                    match slot_state(w) {
                        SlotState::Empty => match Wd::cas(cell, w, new_word) {
                            Ok(_) => break 'walk Placed::New,
                            // Someone claimed it first: look again at what they wrote.
                            Err(now) => w = now,
                        },
                        SlotState::Full(k) if k == key => {
                            let Some(v) = on_existing(w.value()) else { break 'walk Placed::Existing };
                            match Wd::cas(cell, w, Wd::pack(key, v)) {
                                Ok(_) => break 'walk Placed::Existing,
                                Err(now) => w = now,
                            }
                        }
                        _ => break,
                    }
                }
            }
            // The slab is full without the key: on to the next one.
            let next = self.next(slab).load(Ordering::Acquire);
            if next != 0 {
                slab = next;
                continue;
            }
            let fresh = match spare.take().or_else(|| self.allocate()) {
                Some(s) => s,
                None => {
                    self.settle();
                    match self.next(slab).load(Ordering::Acquire) {
                        0 => break 'walk Placed::Failed,
                        n => {
                            slab = n;
                            continue;
                        }
                    }
                }
            };
            match self.next(slab).compare_exchange(0, fresh, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.counter(self.geo.linked_word()).fetch_add(1, Ordering::AcqRel);
                    slab = fresh;
                }
                // Another thread linked a slab first: walk into it, keeping ours.
                Err(now) => {
                    spare = Some(fresh);
                    slab = now;
                }
            }
        };
        if let Some(s) = spare {
            self.link(slab, s);
        }
        placed
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<Wd> {
        match self.locate(key) {
            Walk::Found(_, w) => Some(w),
            Walk::Absent => None,
        }
    }

    fn erase(&self, key: u64) -> bool {
        let Walk::Found(i, w) = self.locate(key) else { return false };
        tombstone(&self.s.cells[i], w, key)
    }

    /// Slabs past the head of the key's chain.
    fn displacement(&self, key: u64, slot: usize) -> u64 {
        self.position(key, slot)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use rayon::prelude::*;

    use super::*;

    type Cell = <u64 as Word>::Atomic;

    fn table(slabs: u64) -> (Vec<Cell>, Vec<AtomicU64>) {
        let cells = (0..slabs * 4).map(|_| <u64 as Word>::new_atomic(<u64 as Word>::EMPTY)).collect();
        let aux = (0..Slabs::of(slabs).words()).map(|_| AtomicU64::new(0)).collect();
        (cells, aux)
    }

    #[test]
    fn one_chain_takes_every_slab_and_then_refuses() {
        // 4 slabs, 1 head: every key shares one chain of up to 16 slots.
        let (cells, aux) = table(4);
        let s = Slots::<u64> { cells: &cells, aux: &aux, probe: ProbeParams { buckets: 4, seed: 7, limit: 4 }, spb: 4 };
        let p = SlabList::new(s);
        for k in 0..16 {
            assert_eq!(p.insert(k, k, |_| None), Placed::New);
        }
        assert_eq!(p.insert(99, 0, |_| None), Placed::Failed);
        assert_eq!(p.insert(3, 0, |_| None), Placed::Existing);
        assert!(p.erase(3));
        assert_eq!(p.find(3), None);
        assert_eq!(p.find(15).map(|w| w.value()), Some(15));
        assert_eq!(p.displacement(15, 15), 3);
    }

    #[test]
    fn concurrent_appends_lose_no_slab() {
        let slabs = 1 << 12;
        let (cells, aux) = table(slabs);
        let s = Slots::<u64> { cells: &cells, aux: &aux, probe: ProbeParams { buckets: slabs, seed: 1, limit: 1 }, spb: 4 };
        let p = SlabList::new(s);
        let n = 12_000u64;
        let placed: Vec<Placed> = (0..n).into_par_iter().map(|k| p.insert(k, k, |_| None)).collect();
        assert!(placed.iter().all(|&x| x == Placed::New));
        let geo = Slabs::of(slabs);
        let (a, l) = (aux[geo.allocated_word() as usize].load(Ordering::Relaxed), aux[geo.linked_word() as usize].load(Ordering::Relaxed));
        assert_eq!(a, l, "every slab handed out is linked");
        assert!((0..n).all(|k| p.find(k).map(|w| w.value()) == Some(k)));
    }
}
