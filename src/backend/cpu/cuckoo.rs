//! Cuckoo placement on the CPU: the flat scheme (candidate buckets over the
//! whole table, a stash, a lock bit per bucket) and the two-level scheme
//! (a region per key, cuckoo inside it with the region's own seed, a lock
//! per region, an overflow for the keys a region cannot place, region
//! rebuilds). See [`crate::core::cuckoo`] for the
//! geometry and the eviction walk; `kernels/schemes/cuckoo.cuh` is the same
//! algorithm on the GPU, step for step, so serial runs place keys alike.
//!
//! Why inserts are exact: an insert changes a bucket only while holding its
//! lock (flat) or its region's lock (two-level), and it holds every
//! candidate of its key while deciding, so no other insert of the same key
//! runs meanwhile. The eviction walk only reads until it has a whole path;
//! a key with no place leaves the table as it was. Lookups and erases take
//! no locks: they never run together with inserts (bulk calls are
//! serialised by `&mut self`).

use std::sync::atomic::{AtomicU64, Ordering};

use super::{prefetch, tombstone, Placed, Probing, Slots};
use crate::core::cuckoo::{
    candidate, choices, rebuild_may_fit, region_candidate, spilled, stash_buckets, walk_word, FlatAux, Regions, MAX_CHOICES, MAX_EVICTIONS,
    REBUILD_SEEDS, REGION_FULL, REGION_LOCK, REGION_SEED, REGION_SPILLED, SPILL_SHIFT,
};
use crate::core::hash::mix64;
use crate::core::layout::{slot_state, SlotState, Word};

/// Lock attempts before an insert gives up and reports the key as not
/// stored: a guard against livelock, never reached in practice.
const MAX_ATTEMPTS: u32 = 1 << 20;

/// Buckets one flat insert may hold: its candidates and a whole path.
const MAX_HELD: usize = MAX_CHOICES + MAX_EVICTIONS as usize;

/// An eviction path: the resident in slot `slot[i]` of `bucket[i]` moves to
/// `bucket[i + 1]`, and the last moves into its EMPTY slot `empty`.
struct Path {
    bucket: [u64; MAX_EVICTIONS as usize + 1],
    slot: [u8; MAX_EVICTIONS as usize],
    /// Moves (buckets after the first).
    n: usize,
    empty: usize,
}

/// The candidate buckets of keys in the space an insert works in (the whole
/// table, or one region under one seed).
trait Space {
    /// The first `d` entries are the key's candidates, as absolute buckets.
    fn cands(&self, key: u64) -> [u64; MAX_CHOICES];
    /// The seed steering the walk.
    fn walk_seed(&self) -> u64;
}

/// Buckets a flat insert has locked.
struct Held {
    b: [u64; MAX_HELD],
    n: usize,
}

/// Backs off before attempt `attempt` again: spin, growing, then yield.
fn back_off(attempt: u32) {
    if attempt < 6 {
        for _ in 0..(1u32 << attempt) {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}

/// The slot array with the operations both schemes share.
struct Engine<'a, Wd: Word> {
    s: Slots<'a, Wd>,
    d: usize,
}

impl<Wd: Word> Engine<'_, Wd> {
    #[inline(always)]
    fn cell(&self, bucket: u64, slot: usize) -> &Wd::Atomic {
        &self.s.cells[bucket as usize * self.s.spb + slot]
    }

    /// Prefetches the candidate buckets `c`: a lookup may read every one,
    /// and on the CPU a key's probe waits on those misses, one after the
    /// other (prefetching only the first, or none, ran lookups and inserts
    /// at a third of the speed on a 2-core x86 host).
    #[inline(always)]
    fn prefetch_candidates(&self, c: &[u64; MAX_CHOICES]) {
        for &b in &c[..self.d] {
            prefetch(self.cell(b, 0) as *const Wd::Atomic);
        }
    }

    /// The candidate (index among `c`) and slot holding `key`, with its word.
    #[inline(always)]
    fn locate(&self, c: &[u64; MAX_CHOICES], key: u64) -> Option<(usize, usize, Wd)> {
        for (j, &b) in c[..self.d].iter().enumerate() {
            for i in 0..self.s.spb {
                let w = Wd::load(self.cell(b, i));
                if slot_state(w) == SlotState::Full(key) {
                    return Some((j, i, w));
                }
            }
        }
        None
    }

    #[inline(always)]
    fn first_empty(&self, b: u64) -> Option<usize> {
        (0..self.s.spb).find(|&i| slot_state(Wd::load(self.cell(b, i))) == SlotState::Empty)
    }

    /// The first EMPTY slot among the candidates, in candidate order.
    #[inline(always)]
    fn free_candidate(&self, c: &[u64; MAX_CHOICES]) -> Option<(u64, usize)> {
        c[..self.d].iter().find_map(|&b| self.first_empty(b).map(|i| (b, i)))
    }

    /// Searches an eviction path of at most `steps` moves from `key`'s full
    /// candidates `xc`, reading only. `lock` is asked for each bucket the
    /// walk steps into; `Err` if it refused one (it was not taken).
    ///
    /// Each step looks at the residents of the current bucket (the first
    /// step: of every candidate) in an order drawn from [`walk_word`], and
    /// moves the first whose other candidate has an EMPTY slot (read without
    /// the lock, checked again under it); if none has, the first one that may
    /// move at all. A move never enters a bucket already on the path or a
    /// candidate of `key`.
    fn walk(
        &self,
        sp: &impl Space,
        key: u64,
        xc: &[u64; MAX_CHOICES],
        steps: u64,
        mut lock: impl FnMut(u64) -> bool,
    ) -> Result<Option<Path>, ()> {
        let (d, spb) = (self.d as u64, self.s.spb as u64);
        let seed = sp.walk_seed();
        let mut p = Path { bucket: [0; MAX_EVICTIONS as usize + 1], slot: [0; MAX_EVICTIONS as usize], n: 0, empty: 0 };
        for step in 0..steps.min(MAX_EVICTIONS) {
            let r = walk_word(key, seed, step);
            // The buckets a resident may leave: all candidates first, then the path's end.
            let froms = if step == 0 { d } else { 1 };
            let mut pick = None;
            'look: for f in 0..froms {
                let cur = if step == 0 { xc[(r.wrapping_add(f) % d) as usize] } else { p.bucket[p.n] };
                for t in 0..spb {
                    let s = (r.wrapping_add(t) % spb) as usize;
                    let SlotState::Full(z) = slot_state(Wd::load(self.cell(cur, s))) else { continue };
                    let zc = sp.cands(z);
                    for u in 0..d {
                        let c = zc[(((r >> 32) + u) % d) as usize];
                        if xc[..self.d].contains(&c) || (step > 0 && p.bucket[..=p.n].contains(&c)) {
                            continue;
                        }
                        let free = self.first_empty(c).is_some();
                        if pick.is_none() || free {
                            pick = Some((cur, s, c));
                        }
                        if free {
                            break 'look;
                        }
                    }
                }
            }
            let Some((cur, s, c)) = pick else { return Ok(None) };
            if !lock(c) {
                return Err(());
            }
            p.bucket[p.n] = cur;
            p.slot[p.n] = s as u8;
            p.n += 1;
            p.bucket[p.n] = c;
            if let Some(e) = self.first_empty(c) {
                p.empty = e;
                return Ok(Some(p));
            }
        }
        Ok(None)
    }

    /// Applies a path, last move first (every key stays in some slot), and
    /// stores `word` where the first resident was.
    fn apply(&self, p: &Path, word: Wd) {
        let mut dst = p.empty;
        for i in (0..p.n).rev() {
            let src = p.slot[i] as usize;
            Wd::store(self.cell(p.bucket[i + 1], dst), Wd::load(self.cell(p.bucket[i], src)));
            dst = src;
        }
        Wd::store(self.cell(p.bucket[0], dst), word);
    }

    /// Replaces the value of a key found at (bucket, slot) as `on_existing` says.
    #[inline(always)]
    fn update(&self, b: u64, i: usize, w: Wd, on_existing: impl Fn(u64) -> Option<u64>) {
        if let Some(v) = on_existing(w.value()) {
            Wd::store(self.cell(b, i), Wd::pack(w.key(), v));
        }
    }

    /// Empties the slot holding `key`; false if another erase took it first.
    fn free(&self, b: u64, i: usize, mut w: Wd, key: u64) -> bool {
        loop {
            match Wd::cas(self.cell(b, i), w, Wd::EMPTY) {
                Ok(_) => return true,
                Err(now) if slot_state(now) == SlotState::Full(key) => w = now,
                Err(_) => return false,
            }
        }
    }
}

// ---------------------------------------------------------------- flat

/// Flat bucketed cuckoo hashing with a stash in the last buckets.
pub(crate) struct Cuckoo<'a, Wd: Word> {
    e: Engine<'a, Wd>,
    aux: FlatAux,
    /// Candidate buckets (the stash follows them).
    main: u64,
    /// Stash slots.
    stash: usize,
}

impl<Wd: Word> Space for Cuckoo<'_, Wd> {
    #[inline(always)]
    fn cands(&self, key: u64) -> [u64; MAX_CHOICES] {
        let seed = self.e.s.probe.seed;
        let mut c = [0; MAX_CHOICES];
        for (j, b) in c.iter_mut().enumerate().take(self.e.d) {
            *b = candidate(key, seed, j, self.main);
        }
        c
    }
    fn walk_seed(&self) -> u64 {
        self.e.s.probe.seed
    }
}

impl<'a, Wd: Word> Cuckoo<'a, Wd> {
    pub(crate) fn new(s: Slots<'a, Wd>) -> Self {
        let buckets = s.probe.buckets;
        let aux = FlatAux { buckets };
        debug_assert!(s.aux.len() as u64 >= aux.words());
        let sb = stash_buckets(buckets, s.spb as u64);
        let stash = sb as usize * s.spb;
        Cuckoo { e: Engine { s, d: choices(Wd::BYTES) }, aux, main: buckets - sb, stash }
    }

    fn word(&self, i: u64) -> &AtomicU64 {
        &self.e.s.aux[i as usize]
    }

    /// Stash slot `i`.
    #[inline(always)]
    fn stash_cell(&self, i: usize) -> &Wd::Atomic {
        &self.e.s.cells[self.main as usize * self.e.s.spb + i]
    }

    /// Tries to take lock bit `b` (a bucket, or `buckets` for the stash).
    #[inline(always)]
    fn try_lock(&self, b: u64) -> bool {
        let bit = 1u64 << (b % 64);
        self.word(b / 64).fetch_or(bit, Ordering::Acquire) & bit == 0
    }

    #[inline(always)]
    fn unlock(&self, b: u64) {
        self.word(b / 64).fetch_and(!(1u64 << (b % 64)), Ordering::Release);
    }

    fn release(&self, h: &mut Held) {
        for &b in &h.b[..h.n] {
            self.unlock(b);
        }
        h.n = 0;
    }

    fn stash_mask(&self) -> u64 {
        self.word(self.aux.mask()).load(Ordering::Acquire)
    }

    /// The stash slot holding `key`, with its word.
    fn stash_find(&self, key: u64) -> Option<(usize, Wd)> {
        if self.stash_mask() == 0 {
            return None;
        }
        (0..self.stash).find_map(|i| {
            let w = Wd::load(self.stash_cell(i));
            (slot_state(w) == SlotState::Full(key)).then_some((i, w))
        })
    }

    /// Puts a pair in a free stash slot (the caller holds the stash lock).
    fn stash_put(&self, word: Wd) -> bool {
        let Some(i) = (0..self.stash).find(|&i| slot_state(Wd::load(self.stash_cell(i))) == SlotState::Empty) else {
            return false;
        };
        Wd::store(self.stash_cell(i), word);
        self.word(self.aux.mask()).fetch_or(1 << i, Ordering::Release);
        true
    }

    /// One attempt of an insert; `None` if a lock was busy (all released).
    fn try_insert(&self, key: u64, value: u64, on_existing: &impl Fn(u64) -> Option<u64>, h: &mut Held) -> Option<Placed> {
        let xc = self.cands(key);
        for &b in &xc[..self.e.d] {
            if h.b[..h.n].contains(&b) {
                continue;
            }
            if !self.try_lock(b) {
                self.release(h);
                return None;
            }
            h.b[h.n] = b;
            h.n += 1;
        }
        let word = Wd::pack(key, value);
        let placed = 'done: {
            if let Some((j, i, w)) = self.e.locate(&xc, key) {
                self.e.update(xc[j], i, w, on_existing);
                break 'done Placed::Existing;
            }
            // Only inserts of this key (which hold its candidates) put it in the stash.
            if let Some((i, w)) = self.stash_find(key) {
                if let Some(v) = on_existing(w.value()) {
                    Wd::store(self.stash_cell(i), Wd::pack(key, v));
                }
                break 'done Placed::Existing;
            }
            if let Some((b, i)) = self.e.free_candidate(&xc) {
                Wd::store(self.e.cell(b, i), word);
                break 'done Placed::New;
            }
            let limit = self.e.s.probe.limit;
            let walked = self.e.walk(self, key, &xc, limit, |b| {
                let ok = self.try_lock(b);
                if ok {
                    h.b[h.n] = b;
                    h.n += 1;
                }
                ok
            });
            match walked {
                Err(()) => {
                    self.release(h);
                    return None;
                }
                Ok(Some(p)) => {
                    self.e.apply(&p, word);
                    break 'done Placed::New;
                }
                Ok(None) => {}
            }
            if self.stash == 0 {
                break 'done Placed::Failed;
            }
            let stash = self.aux.buckets;
            if !self.try_lock(stash) {
                self.release(h);
                return None;
            }
            let put = self.stash_put(word);
            self.unlock(stash);
            if put { Placed::New } else { Placed::Failed }
        };
        self.release(h);
        Some(placed)
    }
}

impl<Wd: Word> Probing<Wd> for Cuckoo<'_, Wd> {
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        self.e.prefetch_candidates(&self.cands(key));
    }

    fn insert(&self, key: u64, value: u64, on_existing: impl Fn(u64) -> Option<u64>) -> Placed {
        let mut h = Held { b: [0; MAX_HELD], n: 0 };
        for attempt in 0..MAX_ATTEMPTS {
            if let Some(p) = self.try_insert(key, value, &on_existing, &mut h) {
                return p;
            }
            back_off(attempt);
        }
        Placed::Failed
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<Wd> {
        match self.e.locate(&self.cands(key), key) {
            Some((_, _, w)) => Some(w),
            None => self.stash_find(key).map(|(_, w)| w),
        }
    }

    fn erase(&self, key: u64) -> bool {
        let c = self.cands(key);
        if let Some((j, i, w)) = self.e.locate(&c, key) {
            return self.e.free(c[j], i, w, key);
        }
        let Some((i, w)) = self.stash_find(key) else { return false };
        // Of two erases of one key, only the one that empties the slot clears its bit.
        let (b, s) = (self.main + (i / self.e.s.spb) as u64, i % self.e.s.spb);
        let gone = self.e.free(b, s, w, key);
        if gone {
            self.word(self.aux.mask()).fetch_and(!(1 << i), Ordering::AcqRel);
        }
        gone
    }

    fn displacement(&self, key: u64, slot: usize) -> u64 {
        let b = (slot / self.e.s.spb) as u64;
        let c = self.cands(key);
        c[..self.e.d].iter().position(|&x| x == b).unwrap_or(self.e.d) as u64
    }
}

// ---------------------------------------------------------------- two-level

/// Two-level cuckoo hashing: regions with their own seeds.
pub(crate) struct TwoLevel<'a, Wd: Word> {
    e: Engine<'a, Wd>,
    r: Regions,
}

/// One region under one seed.
struct Region {
    first: u64,
    buckets: u64,
    seed: u64,
    d: usize,
}

impl Space for Region {
    #[inline(always)]
    fn cands(&self, key: u64) -> [u64; MAX_CHOICES] {
        let h = mix64(key, self.seed);
        let mut c = [0; MAX_CHOICES];
        for (j, b) in c.iter_mut().enumerate().take(self.d) {
            *b = self.first + region_candidate(h, j, self.buckets);
        }
        c
    }
    fn walk_seed(&self) -> u64 {
        self.seed
    }
}

impl<'a, Wd: Word> TwoLevel<'a, Wd> {
    pub(crate) fn new(s: Slots<'a, Wd>) -> Self {
        let r = Regions::of(s.probe.buckets);
        debug_assert!(s.aux.len() as u64 >= r.words());
        TwoLevel { e: Engine { s, d: choices(Wd::BYTES) }, r }
    }

    /// The region of a key and its region word.
    #[inline(always)]
    fn region_of(&self, key: u64) -> (u64, &AtomicU64) {
        let r = self.r.region(key, self.e.s.probe.seed);
        (r, &self.e.s.aux[r as usize])
    }

    #[inline(always)]
    fn region(&self, r: u64, n: u64) -> Region {
        Region {
            first: r * self.r.buckets,
            buckets: self.r.buckets,
            seed: Regions::region_seed(self.e.s.probe.seed, r, n),
            d: self.e.d,
        }
    }

    /// Places a pair in a region whose lock is held, reading first: an EMPTY
    /// candidate, else an eviction path. False (nothing changed) if neither.
    fn place(&self, g: &Region, word: Wd, steps: u64) -> bool {
        let xc = g.cands(word.key());
        if let Some((b, i)) = self.e.free_candidate(&xc) {
            Wd::store(self.e.cell(b, i), word);
            return true;
        }
        match self.e.walk(g, word.key(), &xc, steps, |_| true) {
            Ok(Some(p)) => {
                self.e.apply(&p, word);
                true
            }
            _ => false,
        }
    }

    /// Rebuilds region `r` (seed number `n`, lock held) with the next seeds
    /// so that it also holds `word`; returns the new seed number, or `None`
    /// with the region restored exactly.
    fn rebuild(&self, r: u64, n: u64, word: Wd) -> Option<u64> {
        let g = self.region(r, n);
        let first = (g.first as usize) * self.e.s.spb;
        let cells = &self.e.s.cells[first..first + (g.buckets as usize) * self.e.s.spb];
        let saved: Vec<Wd> = cells.iter().map(Wd::load).collect();
        let live = saved.iter().filter(|&&w| matches!(slot_state(w), SlotState::Full(_))).count() as u64;
        if !rebuild_may_fit(live + 1, g.buckets, saved.len() as u64) {
            return None;
        }
        for t in 1..=REBUILD_SEEDS {
            let g = self.region(r, n + t);
            cells.iter().for_each(|c| Wd::store(c, Wd::EMPTY));
            let all = saved
                .iter()
                .filter(|&&w| matches!(slot_state(w), SlotState::Full(_)))
                .chain(std::iter::once(&word))
                .all(|&w| self.place(&g, w, MAX_EVICTIONS));
            if all {
                return Some(n + t);
            }
        }
        cells.iter().zip(&saved).for_each(|(c, &w)| Wd::store(c, w));
        None
    }

    /// The overflow slot holding `key`, with its word: its chain is read up
    /// to the first bucket with an EMPTY slot (inserts fill a chain in
    /// order, and erases leave tombstones, so the key is never past it).
    fn overflow_find(&self, key: u64) -> Option<(&Wd::Atomic, Wd)> {
        let mut b = self.r.overflow_home(key, self.e.s.probe.seed);
        for _ in 0..self.r.overflow_reach() {
            let mut open = false;
            for i in 0..self.e.s.spb {
                let w = Wd::load(self.e.cell(b, i));
                match slot_state(w) {
                    SlotState::Full(k) if k == key => return Some((self.e.cell(b, i), w)),
                    SlotState::Empty => open = true,
                    _ => {}
                }
            }
            if open {
                return None;
            }
            b = self.r.overflow_next(b);
        }
        None
    }

    /// Stores a pair absent from the overflow in the first EMPTY or
    /// tombstone slot of its chain (inserts of other regions' keys may race
    /// for it: a compare-and-swap decides); false if the chain is full.
    fn overflow_put(&self, word: Wd) -> bool {
        let mut b = self.r.overflow_home(word.key(), self.e.s.probe.seed);
        for _ in 0..self.r.overflow_reach() {
            for i in 0..self.e.s.spb {
                let c = self.e.cell(b, i);
                let mut cur = Wd::load(c);
                while !matches!(slot_state(cur), SlotState::Full(_)) {
                    match Wd::cas(c, cur, word) {
                        Ok(_) => return true,
                        Err(now) => cur = now,
                    }
                }
            }
            b = self.r.overflow_next(b);
        }
        false
    }
}

impl<Wd: Word> Probing<Wd> for TwoLevel<'_, Wd> {
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        // The region words are few and stay cached; the candidate buckets
        // are the misses worth hiding (a seed changed by a rebuild meanwhile
        // only makes the hint useless).
        let (r, w) = self.region_of(key);
        let g = self.region(r, w.load(Ordering::Relaxed) & REGION_SEED);
        self.e.prefetch_candidates(&g.cands(key));
    }

    fn insert(&self, key: u64, value: u64, on_existing: impl Fn(u64) -> Option<u64>) -> Placed {
        let (r, lock) = self.region_of(key);
        let mut attempt = 0;
        let n = loop {
            let old = lock.fetch_or(REGION_LOCK, Ordering::Acquire);
            if old & REGION_LOCK == 0 {
                break old;
            }
            if attempt == MAX_ATTEMPTS {
                return Placed::Failed;
            }
            back_off(attempt);
            attempt += 1;
        };
        // The region word to unlock with: seed number, flag and count as they were.
        let mut out = n;
        let (n, full) = (n & REGION_SEED, n & REGION_FULL != 0);
        let g = self.region(r, n);
        let xc = g.cands(key);
        let word = Wd::pack(key, value);
        let over = if spilled(out) > 0 { self.overflow_find(key) } else { None };
        let placed = if let Some((j, i, w)) = self.e.locate(&xc, key) {
            self.e.update(xc[j], i, w, on_existing);
            Placed::Existing
        } else if let Some((c, w)) = over {
            if let Some(v) = on_existing(w.value()) {
                Wd::store(c, Wd::pack(key, v));
            }
            Placed::Existing
        } else if self.place(&g, word, MAX_EVICTIONS) {
            // Walks of up to 64 moves before the overflow: walks of 16 fill
            // regions to about 0.95, those of 64 past 0.97 (2^22 slots).
            Placed::New
        } else if self.r.overflow > 0 && out & REGION_SPILLED != REGION_SPILLED && self.overflow_put(word) {
            out += 1 << SPILL_SHIFT;
            Placed::New
        } else if full {
            // A rebuild failed and no key left since: do not redo it.
            Placed::Failed
        } else {
            match self.rebuild(r, n, word) {
                Some(n2) => {
                    out = n2 | (out & REGION_SPILLED);
                    Placed::New
                }
                None => {
                    out |= REGION_FULL;
                    Placed::Failed
                }
            }
        };
        // Unlocks, publishing the region's writes, its seed number and flag.
        lock.store(out, Ordering::Release);
        placed
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<Wd> {
        let (r, w) = self.region_of(key);
        let w = w.load(Ordering::Acquire);
        let g = self.region(r, w & REGION_SEED);
        match self.e.locate(&g.cands(key), key) {
            Some((_, _, w)) => Some(w),
            None if spilled(w) > 0 => self.overflow_find(key).map(|(_, w)| w),
            None => None,
        }
    }

    fn erase(&self, key: u64) -> bool {
        let (r, rw) = self.region_of(key);
        let word = rw.load(Ordering::Acquire);
        let c = self.region(r, word & REGION_SEED).cands(key);
        let freed = match self.e.locate(&c, key) {
            Some((j, i, w)) => self.e.free(c[j], i, w, key),
            // A tombstone, not EMPTY: a lookup reads a chain up to its first EMPTY slot.
            None if spilled(word) > 0 => match self.overflow_find(key) {
                Some((cell, w)) if tombstone(cell, w, key) => {
                    rw.fetch_sub(1 << SPILL_SHIFT, Ordering::AcqRel);
                    true
                }
                _ => false,
            },
            None => false,
        };
        // A slot came free: a later rebuild of the region may succeed again.
        if freed && rw.load(Ordering::Relaxed) & REGION_FULL != 0 {
            rw.fetch_and(!REGION_FULL, Ordering::Relaxed);
        }
        freed
    }

    fn displacement(&self, key: u64, slot: usize) -> u64 {
        let (r, w) = self.region_of(key);
        let c = self.region(r, w.load(Ordering::Acquire) & REGION_SEED).cands(key);
        let b = (slot / self.e.s.spb) as u64;
        c[..self.e.d].iter().position(|&x| x == b).unwrap_or(self.e.d) as u64
    }
}
