//! Bucketed Robin Hood hashing (gpurhh), the CPU reference of
//! `kernels/schemes/robin_hood.cuh`: the same walk, decisions and writes.
//!
//! A key lives in one of the `cap` buckets from its multiply-shift home
//! bucket (`cap` = the probe limit); inside a bucket its slot is any. The
//! displacement of a resident is how many buckets past its own home it sits.
//!
//! ```text
//!  home(X)                                           home(X) + cap - 1
//!  | full, X passes | full, swap | full, swap | has EMPTY |   ...   |
//!    (all residents   X takes the  the evicted  the last
//!     as poor as X)   richest one  key goes on  carried key
//! ```
//!
//! Inserts: walking from the key's home, a full bucket whose richest
//! resident sits fewer buckets past its home than the carried key would
//! gives that slot to the carried key, and the resident is carried on; the
//! first bucket with an EMPTY slot takes the carried key. TOMBSTONEs are
//! never reused nor moved. When a carried key would pass its own cap, or the
//! cascade would run past `SPAN_PER_CAP` caps from the key's home, the
//! insert fails and nothing is written (the keys stored stay where they
//! are). The cascade may run past the inserted key's cap since each key
//! carried has a later home than the one before it: at load 0.95 (16-byte
//! slots) keys sat at most 24 buckets from home while the first EMPTY slot
//! was up to 950 buckets away.
//!
//! Invariant: a key stored at distance `d` has, in each bucket at distance
//! `j < d` on its way, no EMPTY slot and a TOMBSTONE or a resident at least
//! `j` buckets past its home (a swap only puts a poorer key in place of a
//! richer one). So a lookup stops at the key, at an EMPTY slot (EMPTY slots
//! are a suffix of each bucket: inserts fill the first one), at a bucket
//! whose residents are all richer than the key would be there, or at the cap.
//!
//! Concurrency: an insert locks every bucket it walks, in walk order, with a
//! lock bit per bucket in the aux words. Until its walk wraps past the
//! table's end it waits for a busy lock (it then holds only lower buckets, so
//! waits never form a cycle); past the wrap it only tries, and on a busy
//! lock releases them all, backs off and starts over. Under the locks it plans the cascade with plain reads, then
//! replays the same decisions writing (the buckets cannot change under the
//! locks, so the replay sees what the plan saw). Two inserts of one key meet
//! at its home bucket's lock, so the second sees the first's key. Erase
//! locks the buckets of its lookup the same way. Lookups take no lock: they
//! never run while a batch inserts.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{prefetch, Placed, Probing, Slots};
use crate::core::layout::{slot_state, SlotState, Word};

/// Largest slot count of a bucket (8-byte slots).
const MAX_SPB: usize = 4;

/// How far an insert's cascade may run, in probe limits: 1024 buckets at the
/// default limit of 32, as far as the linear scheme looks for a free slot.
/// Beyond the inserted key's own cap it only moves other keys, each within
/// its cap. Same value as `SPAN_PER_CAP` in `kernels/schemes/robin_hood.cuh`.
const SPAN_PER_CAP: u64 = 32;

/// The Robin Hood policy over one slot array.
pub(crate) struct RobinHood<'a, Wd: Word> {
    s: Slots<'a, Wd>,
}

/// What one bucket holds for an insert of `key`.
struct Look {
    /// The slot holding the key.
    key_at: Option<usize>,
    /// The first EMPTY slot.
    empty_at: Option<usize>,
    /// The richest resident (slot, displacement), when there is neither.
    richest: Option<(usize, u64)>,
    /// Whether a TOMBSTONE or a resident at least as poor as the key would
    /// be here lets its lookup go on.
    poorer: bool,
}

/// Exponential spinning, then yielding the core (a lock holder may be
/// descheduled).
struct Backoff(u32);

impl Backoff {
    fn snooze(&mut self) {
        if self.0 < 7 {
            for _ in 0..1u32 << self.0 {
                spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
        self.0 = self.0.saturating_add(1);
    }
}

impl<'a, Wd: Word> RobinHood<'a, Wd> {
    pub(crate) fn new(s: Slots<'a, Wd>) -> Self {
        RobinHood { s }
    }

    #[inline(always)]
    fn next(&self, b: u64) -> u64 {
        if b + 1 == self.s.probe.buckets {
            0
        } else {
            b + 1
        }
    }

    #[inline(always)]
    fn cell(&self, b: u64, i: usize) -> &Wd::Atomic {
        &self.s.cells[b as usize * self.s.spb + i]
    }

    #[inline(always)]
    fn load_bucket(&self, b: u64) -> [Wd; MAX_SPB] {
        let mut w = [Wd::EMPTY; MAX_SPB];
        for (i, x) in w.iter_mut().take(self.s.spb).enumerate() {
            *x = Wd::load(self.cell(b, i));
        }
        w
    }

    #[inline(always)]
    fn lock_word(&self, b: u64) -> (&AtomicU64, u64) {
        (&self.s.aux[(b >> 6) as usize], 1u64 << (b & 63))
    }

    #[inline(always)]
    fn try_lock(&self, b: u64) -> bool {
        let (word, bit) = self.lock_word(b);
        word.fetch_or(bit, Ordering::Acquire) & bit == 0
    }

    /// Locks bucket `b`, waiting while it is busy if `wait`, else giving up
    /// at once.
    #[inline(always)]
    fn lock(&self, b: u64, wait: bool) -> bool {
        let mut backoff = Backoff(0);
        loop {
            if self.try_lock(b) {
                return true;
            }
            if !wait {
                return false;
            }
            backoff.snooze();
        }
    }

    #[inline(always)]
    fn unlock(&self, b: u64) {
        let (word, bit) = self.lock_word(b);
        word.fetch_and(!bit, Ordering::Release);
    }

    /// Releases the `n` buckets from `first` on.
    fn unlock_run(&self, first: u64, n: u64) {
        let mut b = first;
        for _ in 0..n {
            self.unlock(b);
            b = self.next(b);
        }
    }

    /// One step of a locked walk from `home` that holds `held` buckets: locks
    /// bucket `b` (the walk's `j`-th) and reads it for `key`. `None` when the
    /// lock was busy, with every lock of the walk released.
    #[inline(always)]
    fn step(&self, home: u64, held: &mut u64, b: u64, j: u64, key: u64) -> Option<([Wd; MAX_SPB], Look)> {
        if !self.lock(b, b >= home) {
            self.unlock_run(home, *held);
            return None;
        }
        *held += 1;
        let w = self.load_bucket(b);
        let l = self.look(b, j, key, &w);
        Some((w, l))
    }

    /// Reads bucket `b` for an insert of `key`, which would sit `j` buckets
    /// past its home there.
    #[inline(always)]
    fn look(&self, b: u64, j: u64, key: u64, w: &[Wd; MAX_SPB]) -> Look {
        let w = &w[..self.s.spb];
        let key_at = w.iter().position(|x| slot_state(*x) == SlotState::Full(key));
        let empty_at = w.iter().position(|x| slot_state(*x) == SlotState::Empty);
        let mut l = Look { key_at, empty_at, richest: None, poorer: j == 0 };
        if key_at.is_some() || empty_at.is_some() {
            return l;
        }
        for (i, x) in w.iter().enumerate() {
            match slot_state(*x) {
                SlotState::Full(k) => {
                    let d = self.s.probe.displacement(k, b);
                    l.poorer |= d >= j;
                    if l.richest.is_none_or(|(_, r)| d < r) {
                        l.richest = Some((i, d));
                    }
                }
                _ => l.poorer = true,
            }
        }
        l
    }

    /// One attempt at an insert; `None` when a lock was busy (nothing was
    /// written and every lock taken is released).
    ///
    /// The walk locks and reads buckets from the key's home while either of
    /// two questions is open: is the key stored (its lookup, at most `cap`
    /// buckets), and where does the cascade end (at the first bucket with an
    /// EMPTY slot, or in failure once a carried key would pass its cap or
    /// the walk its span).
    fn try_insert(&self, key: u64, value: u64, on_existing: &impl Fn(u64) -> Option<u64>) -> Option<Placed> {
        let (home, cap) = (self.s.probe.home(key), self.s.probe.limit);
        let span = self.span();
        let (mut b, mut held) = (home, 0u64);
        let mut looking = true;
        // Some(true): the cascade ends at an EMPTY slot; Some(false): it
        // fails. With no EMPTY slot within the span (none comes back while
        // inserts run) only the key's lookup needs locks, not the cap.
        let mut plan: Option<bool> = if self.empty_ahead(home, span) { None } else { Some(false) };
        // Buckets the carried key sits past its home at `b`.
        let mut dist = 0u64;
        for j in 0..span {
            if !looking && plan.is_some() {
                break;
            }
            let (w, l) = self.step(home, &mut held, b, j, key)?;
            if let Some(i) = l.key_at {
                if let Some(v) = on_existing(w[i].value()) {
                    Wd::store(self.cell(b, i), Wd::pack(key, v));
                }
                self.unlock_run(home, held);
                return Some(Placed::Existing);
            }
            if l.empty_at.is_some() {
                looking = false;
                plan.get_or_insert(true);
            } else {
                looking &= l.poorer && j + 1 < cap;
                if plan.is_none() {
                    if let Some((_, d)) = l.richest.filter(|&(_, d)| d < dist) {
                        dist = d;
                    }
                    dist += 1;
                    // Past the key's cap only a cascade can go on: if no
                    // EMPTY slot lies within reach, fail now rather than lock
                    // its way there (EMPTY slots never come back, so an
                    // unlocked look suffices).
                    if dist == cap || (j + 1 == cap && !self.empty_ahead(self.next(b), span - cap)) {
                        plan = Some(false);
                    }
                }
            }
            b = self.next(b);
        }
        if plan != Some(true) {
            self.unlock_run(home, held);
            return Some(Placed::Failed);
        }
        // Apply: the same decisions on the same (locked) buckets, writing.
        let (mut b, mut dist, mut carried) = (home, 0u64, Wd::pack(key, value));
        for j in 0..held {
            let w = self.load_bucket(b);
            let l = self.look(b, j, key, &w);
            if let Some(e) = l.empty_at {
                Wd::store(self.cell(b, e), carried);
                break;
            }
            if let Some((i, d)) = l.richest.filter(|&(_, d)| d < dist) {
                Wd::store(self.cell(b, i), carried);
                carried = w[i];
                dist = d;
            }
            dist += 1;
            b = self.next(b);
        }
        self.unlock_run(home, held);
        Some(Placed::New)
    }

    /// Buckets an insert's cascade may walk from the key's home.
    #[inline(always)]
    fn span(&self) -> u64 {
        (self.s.probe.limit * SPAN_PER_CAP).min(self.s.probe.buckets)
    }

    /// Whether one of the `n` buckets from `b` on has an EMPTY slot (no locks).
    fn empty_ahead(&self, mut b: u64, n: u64) -> bool {
        for _ in 0..n {
            if (0..self.s.spb).any(|i| slot_state(Wd::load(self.cell(b, i))) == SlotState::Empty) {
                return true;
            }
            b = self.next(b);
        }
        false
    }

    /// One attempt at an erase: the key's lookup with every bucket on it
    /// locked, so it never misses a key an insert is moving. `None` when a
    /// lock was busy.
    fn try_erase(&self, key: u64) -> Option<bool> {
        let home = self.s.probe.home(key);
        let (mut b, mut held, mut hit) = (home, 0u64, false);
        for j in 0..self.s.probe.limit {
            let (_, l) = self.step(home, &mut held, b, j, key)?;
            if let Some(i) = l.key_at {
                Wd::store(self.cell(b, i), Wd::TOMBSTONE);
                hit = true;
                break;
            }
            if l.empty_at.is_some() || !l.poorer {
                break;
            }
            b = self.next(b);
        }
        self.unlock_run(home, held);
        Some(hit)
    }

    /// The word holding `key`, by the lookup's stopping rules (no locks).
    #[inline(always)]
    fn lookup(&self, key: u64) -> Option<Wd> {
        let mut b = self.s.probe.home(key);
        for j in 0..self.s.probe.limit {
            // Whether a resident is at least as poor as the key would be here.
            let mut poorer = j == 0;
            for i in 0..self.s.spb {
                let w = Wd::load(self.cell(b, i));
                match slot_state(w) {
                    SlotState::Full(k) if k == key => return Some(w),
                    SlotState::Empty => return None,
                    SlotState::Tombstone => poorer = true,
                    SlotState::Full(k) => poorer = poorer || self.s.probe.displacement(k, b) >= j,
                }
            }
            if !poorer {
                return None;
            }
            b = self.next(b);
        }
        None
    }
}

impl<Wd: Word> Probing<Wd> for RobinHood<'_, Wd> {
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        prefetch(self.cell(self.s.probe.home(key), 0) as *const Wd::Atomic);
    }

    fn insert(&self, key: u64, value: u64, on_existing: impl Fn(u64) -> Option<u64>) -> Placed {
        let mut backoff = Backoff(0);
        loop {
            if let Some(p) = self.try_insert(key, value, &on_existing) {
                return p;
            }
            backoff.snooze();
        }
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<Wd> {
        self.lookup(key)
    }

    fn erase(&self, key: u64) -> bool {
        let mut backoff = Backoff(0);
        loop {
            if let Some(hit) = self.try_erase(key) {
                return hit;
            }
            backoff.snooze();
        }
    }

    fn displacement(&self, key: u64, slot: usize) -> u64 {
        self.s.probe.displacement(key, (slot / self.s.spb) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::probe::ProbeParams;

    struct Table {
        cells: Vec<<u64 as Word>::Atomic>,
        aux: Vec<AtomicU64>,
        probe: ProbeParams,
    }

    impl Table {
        fn new(buckets: u64, limit: u64) -> Self {
            let cells = (0..buckets * 4).map(|_| u64::new_atomic(u64::EMPTY)).collect();
            let aux = (0..buckets.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
            Table { cells, aux, probe: ProbeParams { buckets, seed: 7, limit } }
        }
        fn rh(&self) -> RobinHood<'_, u64> {
            RobinHood::new(Slots { cells: &self.cells, aux: &self.aux, probe: self.probe, spb: 4 })
        }
        fn words(&self) -> Vec<u64> {
            self.cells.iter().map(u64::load).collect()
        }
    }

    /// Seeded keys below the slot markers.
    fn keys(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) % 0xffff_fff0
            })
            .collect()
    }

    /// Every stored key has, in each bucket before its own, no EMPTY slot and
    /// a TOMBSTONE or a resident at least as far from home (what lookups rely
    /// on), and sits within the cap.
    fn check_invariant(t: &Table) {
        let w = t.words();
        for (slot, &word) in w.iter().enumerate() {
            let SlotState::Full(k) = slot_state(word) else { continue };
            let d = t.probe.displacement(k, slot as u64 / 4);
            assert!(d < t.probe.limit, "key {k} sits {d} buckets from home, cap {}", t.probe.limit);
            for j in 0..d {
                let b = (t.probe.home(k) + j) % t.probe.buckets;
                let bucket = &w[b as usize * 4..b as usize * 4 + 4];
                assert!(bucket.iter().all(|&x| slot_state(x) != SlotState::Empty), "EMPTY before key {k}");
                let poorer = bucket.iter().any(|&x| match slot_state(x) {
                    SlotState::Full(r) => t.probe.displacement(r, b) >= j,
                    _ => true,
                });
                assert!(poorer, "bucket {b} would end the lookup of key {k} early");
            }
        }
    }

    #[test]
    fn lookups_find_every_key_after_inserts_and_erases() {
        let t = Table::new(1024, 32);
        let rh = t.rh();
        let ks = keys(3900, 1);
        let stored: Vec<u64> = ks.iter().copied().filter(|&k| rh.insert(k, k ^ 1, |_| None) == Placed::New).collect();
        assert!(stored.len() > 3800, "only {} of {} stored at load 0.95", stored.len(), ks.len());
        check_invariant(&t);
        for &k in stored.iter().step_by(3) {
            assert!(rh.erase(k));
            assert!(!rh.erase(k));
        }
        for &k in &keys(200, 2) {
            rh.insert(k, k ^ 1, |_| None);
        }
        check_invariant(&t);
        for (i, &k) in stored.iter().enumerate() {
            assert_eq!(rh.find(k).is_some(), i % 3 != 0, "key {k}");
        }
        for &k in &keys(2000, 3) {
            if let Some(w) = rh.find(k) {
                assert_eq!(w.value(), k ^ 1);
            }
        }
    }

    #[test]
    fn a_failed_insert_writes_nothing() {
        let t = Table::new(16, 2);
        let rh = t.rh();
        let mut failed = 0;
        for k in keys(200, 4) {
            let before = t.words();
            match rh.insert(k, 5, |_| None) {
                Placed::Failed => {
                    failed += 1;
                    assert_eq!(t.words(), before, "a failed insert of {k} moved keys");
                    assert!(rh.find(k).is_none());
                }
                _ => assert!(rh.find(k).is_some()),
            }
            check_invariant(&t);
        }
        assert!(failed > 0);
        assert!(t.aux.iter().all(|a| a.load(Ordering::Relaxed) == 0), "a lock was left set");
    }

    #[test]
    fn concurrent_inserts_and_erases_keep_every_key_once() {
        for round in 0..20 {
            concurrent_round(6 + 2 * round, 7 + 2 * round);
        }
    }

    fn concurrent_round(seed_kept: u64, seed_churn: u64) {
        // Room for every insert: erased keys leave tombstones that inserts
        // never reuse, and each churn key may be inserted again after each
        // erase. (At 1024 buckets the table filled up and refused kept keys,
        // which read as lost ones before their outcomes were checked.)
        let t = Table::new(4096, 32);
        let rh = t.rh();
        let failed = AtomicU64::new(0);
        let kept = keys(2000, seed_kept);
        let churn: Vec<u64> = keys(1500, seed_churn).into_iter().filter(|k| !kept.contains(k)).collect();
        // Four threads insert the same keys (duplicates meet on locks) while
        // two erase the churn keys, moving kept keys around meanwhile.
        std::thread::scope(|sc| {
            for _ in 0..4 {
                sc.spawn(|| {
                    for (&a, &b) in kept.iter().zip(churn.iter().chain(std::iter::repeat(&0))) {
                        for k in [a, b] {
                            if matches!(rh.insert(k, k ^ 1, |_| None), Placed::Failed) {
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                });
            }
            for _ in 0..2 {
                sc.spawn(|| {
                    for _ in 0..3 {
                        for &b in &churn {
                            rh.erase(b);
                        }
                    }
                });
            }
        });
        assert_eq!(failed.load(Ordering::Relaxed), 0, "inserts refused: the table is too small for the test");
        check_invariant(&t);
        let mut seen = std::collections::HashSet::new();
        for w in t.words() {
            if let SlotState::Full(k) = slot_state(w) {
                assert!(seen.insert(k), "key {k} stored twice");
            }
        }
        for &k in &kept {
            assert_eq!(rh.find(k).map(|w| w.value()), Some(k ^ 1), "key {k} lost");
        }
        assert!(t.aux.iter().all(|a| a.load(Ordering::Relaxed) == 0), "a lock was left set");
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn the_cuda_scheme_uses_the_same_span() {
        let (_, cuh) = crate::backend::cuda::kernels::SCHEME_HEADERS
            .iter()
            .find(|(path, _)| path.ends_with("robin_hood.cuh"))
            .expect("robin_hood.cuh is a scheme header");
        assert!(cuh.contains(&format!("constexpr u64 SPAN_PER_CAP = {SPAN_PER_CAP};")));
    }

    #[test]
    fn a_whole_table_cap_fills_every_slot() {
        let t = Table::new(8, 8);
        let rh = t.rh();
        let placed = keys(40, 5).into_iter().filter(|&k| rh.insert(k, 0, |_| None) == Placed::New).count();
        assert_eq!(placed, 32);
        check_invariant(&t);
    }
}
