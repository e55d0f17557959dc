//! Linear probing over slots: the default scheme (home slot at the start of a
//! multiply-shift home bucket) and Hashinator's (Fibonacci-hashed home slot on
//! a power-of-two table). Both claim the first EMPTY slot of a key's sequence,
//! so a lookup may stop at the first EMPTY slot it meets (see
//! [`crate::core::probe`] for why).

use super::{prefetch, tombstone, Placed, Probing, Slots};
use crate::core::hash::fibonacci_home;
use crate::core::layout::{slot_state, SlotState, Word};

/// Where a key's sequence starts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Home {
    /// First slot of the multiply-shift home bucket.
    Bucket,
    /// Fibonacci hash onto `2^log2_slots` slots (Hashinator).
    Fibonacci { log2_slots: u32 },
}

/// The linear probing policy over one slot array.
pub(crate) struct Linear<'a, Wd: Word> {
    s: Slots<'a, Wd>,
    home: Home,
    /// Slots visited at most (the probe limit in buckets, in slots).
    limit: u64,
}

impl<'a, Wd: Word> Linear<'a, Wd> {
    pub(crate) fn new(s: Slots<'a, Wd>, home: Home) -> Self {
        let limit = (s.probe.limit * s.spb as u64).min(s.cells.len() as u64);
        Linear { s, home, limit }
    }

    #[inline(always)]
    pub(crate) fn home_slot(&self, key: u64) -> u64 {
        match self.home {
            Home::Bucket => self.s.probe.home(key) * self.s.spb as u64,
            Home::Fibonacci { log2_slots } => fibonacci_home(key, self.s.probe.seed, log2_slots),
        }
    }

    /// The slot indices of a key's sequence, in order.
    #[inline(always)]
    fn seq(&self, key: u64) -> impl Iterator<Item = usize> {
        let n = self.s.cells.len() as u64;
        let h = self.home_slot(key);
        (0..self.limit).map(move |i| {
            let j = h + i;
            (if j >= n { j - n } else { j }) as usize
        })
    }

    /// The slot holding `key` and its word.
    #[inline(always)]
    fn locate(&self, key: u64) -> Option<(usize, Wd)> {
        for i in self.seq(key) {
            let w = Wd::load(&self.s.cells[i]);
            match slot_state(w) {
                SlotState::Full(k) if k == key => return Some((i, w)),
                SlotState::Empty => return None,
                _ => {}
            }
        }
        None
    }
}

impl<Wd: Word> Probing<Wd> for Linear<'_, Wd> {
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        prefetch(&self.s.cells[self.home_slot(key) as usize] as *const Wd::Atomic);
    }

    #[inline(always)]
    fn insert(&self, key: u64, value: u64, on_existing: impl Fn(u64) -> Option<u64>) -> Placed {
        let new_word = Wd::pack(key, value);
        for i in self.seq(key) {
            let cell = &self.s.cells[i];
            let mut w = Wd::load(cell);
            loop {
                match slot_state(w) {
                    SlotState::Empty => match Wd::cas(cell, w, new_word) {
                        Ok(_) => return Placed::New,
                        // Someone claimed it first: look again at what they wrote.
                        Err(now) => w = now,
                    },
                    SlotState::Full(k) if k == key => {
                        let Some(v) = on_existing(w.value()) else { return Placed::Existing };
                        match Wd::cas(cell, w, Wd::pack(key, v)) {
                            Ok(_) => return Placed::Existing,
                            Err(now) => w = now,
                        }
                    }
                    _ => break,
                }
            }
        }
        Placed::Failed
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<Wd> {
        self.locate(key).map(|(_, w)| w)
    }

    #[inline(always)]
    fn erase(&self, key: u64) -> bool {
        let Some((i, w)) = self.locate(key) else { return false };
        tombstone(&self.s.cells[i], w, key)
    }

    fn displacement(&self, key: u64, slot: usize) -> u64 {
        let n = self.s.cells.len() as u64;
        let h = self.home_slot(key);
        let d = if slot as u64 >= h { slot as u64 - h } else { slot as u64 + n - h };
        // In buckets: a key in the slot right after its home is still one read away.
        (d + h % self.s.spb as u64) / self.s.spb as u64
    }
}
