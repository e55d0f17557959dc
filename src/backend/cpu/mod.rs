//! The CPU backend: the shared layout in host memory, driven by all cores
//! with atomic compare-and-swap. It is a real backend and the reference the
//! GPU results are checked against.

mod cuckoo;
mod hashinator;
mod linear;
mod robin_hood;
mod slab_list;

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::{Backend, Config, InsertMode, RawInsert};
use crate::core::keys::{special_index, Key, Value};
use crate::core::layout::{slot_state, SlotState, Word};
use crate::core::probe::ProbeParams;
use crate::core::scheme::Scheme;
use crate::{Device, Error, Result};

/// Keys per parallel task: large enough to amortise scheduling, small
/// enough to balance 2-128 cores.
const CHUNK: usize = 4096;
/// Batches below this run on the calling thread.
const SERIAL_BELOW: usize = 2 * CHUNK;
/// How many keys ahead the probe loops prefetch home buckets.
const PREFETCH_AHEAD: usize = 8;

type W<K, V> = <K as Key>::Word<V>;
type Cell<K, V> = <W<K, V> as Word>::Atomic;

/// What happened to one key of an insert.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Placed {
    New,
    Existing,
    Failed,
}

/// A hash table in host memory.
pub struct CpuTable<K: Key, V: Value> {
    cells: Vec<Cell<K, V>>,
    /// The scheme's state words (see [`Scheme::aux_words`]).
    aux: Vec<AtomicU64>,
    probe: ProbeParams,
    /// Live keys held in slots.
    live: u64,
    /// Erased slots not yet reclaimed.
    tombstones: u64,
    /// Values of the keys stored out of band ([`Key::EMPTY`], [`Key::TOMBSTONE`]).
    specials: [Option<V>; 2],
    config: Config,
    _types: PhantomData<(K, V)>,
}

/// The counts and out-of-band pairs of a table, which travel with its cells
/// when a page moves between host and device memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PageCounts<V> {
    /// Live keys in slots.
    pub live: u64,
    /// Erased slots not yet reclaimed.
    pub tombstones: u64,
    /// Values of the out-of-band keys ([`Key::EMPTY`], [`Key::TOMBSTONE`]).
    pub specials: [Option<V>; 2],
}

// A cell is its word, byte for byte: pages are copied as raw bytes.
const _: () = assert!(std::mem::size_of::<portable_atomic::AtomicU64>() == 8);
const _: () = assert!(std::mem::size_of::<portable_atomic::AtomicU128>() == 16);

/// Allocates `slots` EMPTY cells, reporting failure instead of aborting.
fn alloc_cells<Wd: Word>(slots: u64) -> Result<Vec<Wd::Atomic>> {
    crate::fault::alloc_point(slots.saturating_mul(Wd::BYTES as u64), Device::Cpu)?;
    let n = usize::try_from(slots).map_err(|_| oom(slots * Wd::BYTES as u64))?;
    let mut v: Vec<Wd::Atomic> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| oom(slots * Wd::BYTES as u64))?;
    advise_huge_pages(v.as_ptr() as *const u8, n * Wd::BYTES);
    (0..n).into_par_iter().map(|_| Wd::new_atomic(Wd::EMPTY)).collect_into_vec(&mut v);
    Ok(v)
}

/// Asks the kernel to back a fresh, untouched allocation with transparent
/// huge pages where it may ("madvise" mode, the common default). Random
/// lookups over gigabytes of cells otherwise miss the TLB on nearly every
/// key and walk page tables too large for the caches. Only the 2 MiB
/// extents inside the range are advised; small tables are left alone.
/// Advice the kernel refuses changes nothing, so its result is ignored.
fn advise_huge_pages(ptr: *const u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        if bytes < 4 * HUGE {
            return;
        }
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + bytes) & !(HUGE - 1);
        if end > start {
            // Safety: [start, end) lies inside a live allocation of ours;
            // MADV_HUGEPAGE changes how it is backed, never its contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes);
}

/// Allocates `n` zeroed scheme words.
fn alloc_aux(n: u64) -> Result<Vec<AtomicU64>> {
    crate::fault::alloc_point(n.saturating_mul(8), Device::Cpu)?;
    let len = usize::try_from(n).map_err(|_| oom(n * 8))?;
    let mut v: Vec<AtomicU64> = Vec::new();
    v.try_reserve_exact(len).map_err(|_| oom(n * 8))?;
    v.extend((0..len).map(|_| AtomicU64::new(0)));
    Ok(v)
}

fn oom(bytes: u64) -> Error {
    Error::OutOfMemory { bytes, device: "cpu".into() }
}

fn probe_params(config: &Config, slots_per_bucket: usize) -> ProbeParams {
    let buckets = config.slots / slots_per_bucket as u64;
    ProbeParams { buckets, seed: config.seed, limit: config.max_probe_buckets.clamp(1, buckets) }
}

/// Replaces `key`'s slot `cell`, last seen holding `w`, with a tombstone;
/// false when another erase of the batch got there first. The walk that
/// found the slot is the scheme's; this step is the same for all of them.
#[inline(always)]
pub(crate) fn tombstone<Wd: Word>(cell: &Wd::Atomic, mut w: Wd, key: u64) -> bool {
    loop {
        match Wd::cas(cell, w, Wd::TOMBSTONE) {
            Ok(_) => return true,
            // The value changed under us: the key is still there.
            Err(now) if slot_state(now) == SlotState::Full(key) => w = now,
            // Erased concurrently by another key of the batch.
            Err(_) => return false,
        }
    }
}

#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // Safety: prefetching is a hint and never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// One slot array as the probing policies see it: the cells, the scheme's
/// zeroed auxiliary words, and the probe parameters.
#[derive(Clone, Copy)]
pub(crate) struct Slots<'a, Wd: Word> {
    pub(crate) cells: &'a [Wd::Atomic],
    pub(crate) aux: &'a [AtomicU64],
    pub(crate) probe: ProbeParams,
    /// Slots per 32-byte bucket.
    pub(crate) spb: usize,
}

/// The probing policy of one scheme over a slot array. Each scheme
/// implements it once; the CPU table supplies storage, out-of-band keys,
/// batching and tallies. Keys and values arrive as zero-extended bits and are
/// never a slot marker (those keys are kept out of band by the caller).
pub(crate) trait Probing<Wd: Word>: Sync {
    /// Hints the memory of a key's first candidate into the cache.
    fn prefetch(&self, key: u64);
    /// Inserts one key unless it is present; when present, `on_existing`
    /// computes its new value from the stored one (`None` leaves it).
    fn insert(&self, key: u64, value: u64, on_existing: impl Fn(u64) -> Option<u64>) -> Placed;
    /// The word holding `key`, if stored.
    fn find(&self, key: u64) -> Option<Wd>;
    /// Erases `key`; true if this call removed it.
    fn erase(&self, key: u64) -> bool;
    /// Buckets past its first candidate that a key found at `slot` sits (for stats).
    fn displacement(&self, key: u64, slot: usize) -> u64;
    /// Pairs stored outside the slot array (a stash), as (key, value) bits.
    fn extra_pairs(&self) -> Vec<(u64, u64)> {
        Vec::new()
    }
}

/// Runs `$body` with `$p` bound to the probing policy of `$t`'s scheme, so
/// the loops in `$body` are compiled once per scheme (no dynamic dispatch per key).
macro_rules! with_probing {
    ($t:expr, $p:ident => $body:expr) => {{
        let s = $t.slots_ref();
        match $t.config.scheme {
            Scheme::Linear => {
                let $p = linear::Linear::new(s, linear::Home::Bucket);
                $body
            }
            Scheme::Hashinator { .. } => {
                let log2_slots = s.cells.len().trailing_zeros();
                let $p = linear::Linear::new(s, linear::Home::Fibonacci { log2_slots });
                $body
            }
            Scheme::RobinHood => {
                let $p = robin_hood::RobinHood::new(s);
                $body
            }
            Scheme::Cuckoo => {
                let $p = cuckoo::Cuckoo::new(s);
                $body
            }
            Scheme::TwoLevel => {
                let $p = cuckoo::TwoLevel::new(s);
                $body
            }
            Scheme::SlabList => {
                let $p = slab_list::SlabList::new(s);
                $body
            }
        }
    }};
}

/// Per-task tallies of an insert, merged after the parallel phase.
#[derive(Default)]
struct InsertTally {
    inserted: u64,
    existing: u64,
    failed: Vec<usize>,
    /// (batch position, which special, value) of out-of-band keys.
    specials: Vec<(usize, usize, u64)>,
}

impl<K: Key, V: Value> CpuTable<K, V> {
    /// An empty table with `config.slots` slots.
    pub fn new(config: Config) -> Result<Self> {
        let cells = alloc_cells::<W<K, V>>(config.slots)?;
        let buckets = config.slots / W::<K, V>::slots_per_bucket() as u64;
        let aux = alloc_aux(config.scheme.aux_words(buckets))?;
        Ok(CpuTable {
            cells,
            aux,
            probe: probe_params(&config, W::<K, V>::slots_per_bucket()),
            live: 0,
            tombstones: 0,
            specials: [None, None],
            config,
            _types: PhantomData,
        })
    }

    /// A copy of the table (cells, scheme words, counts), allocated
    /// fallibly through the allocation points: the working copy a paged
    /// table brings a page into. On failure `self` is untouched.
    pub(crate) fn try_clone(&self) -> Result<Self> {
        let slots = self.cells.len() as u64;
        crate::fault::alloc_point(slots.saturating_mul(W::<K, V>::BYTES as u64), Device::Cpu)?;
        let mut cells: Vec<Cell<K, V>> = Vec::new();
        cells.try_reserve_exact(self.cells.len()).map_err(|_| oom(slots * W::<K, V>::BYTES as u64))?;
        advise_huge_pages(cells.as_ptr() as *const u8, self.cells.len() * W::<K, V>::BYTES);
        self.cells.par_iter().map(|c| W::<K, V>::new_atomic(W::<K, V>::load(c))).collect_into_vec(&mut cells);
        let aux = alloc_aux(self.aux.len() as u64)?;
        for (a, b) in aux.iter().zip(&self.aux) {
            a.store(b.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        Ok(CpuTable {
            cells,
            aux,
            probe: self.probe,
            live: self.live,
            tombstones: self.tombstones,
            specials: self.specials,
            config: self.config,
            _types: PhantomData,
        })
    }

    /// The configuration it was built with (its slot count is current).
    /// Only CUDA's paged tables ask (builds without CUDA, as for wasm, do not).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn config(&self) -> Config {
        self.config
    }

    /// The cells as raw bytes `(address, length)`, for a copy engine that
    /// moves a whole page (the layout is the GPU's, word for word).
    pub(crate) fn cell_bytes(&self) -> (*const u8, usize) {
        (self.cells.as_ptr().cast(), std::mem::size_of_val(&self.cells[..]))
    }

    /// [`CpuTable::cell_bytes`] for writing: a page copied back from a GPU.
    pub(crate) fn cell_bytes_mut(&mut self) -> (*mut u8, usize) {
        (self.cells.as_mut_ptr().cast(), std::mem::size_of_val(&self.cells[..]))
    }

    /// The scheme's state words, as plain integers.
    pub(crate) fn aux_words(&self) -> Vec<u64> {
        self.aux.iter().map(|a| a.load(Ordering::Relaxed)).collect()
    }

    /// Overwrites the scheme's state words (`words` has their count).
    pub(crate) fn set_aux_words(&mut self, words: &[u64]) {
        for (a, &w) in self.aux.iter().zip(words) {
            a.store(w, Ordering::Relaxed);
        }
    }

    /// What a page carries besides its cells and state words.
    pub(crate) fn counts(&self) -> PageCounts<V> {
        PageCounts { live: self.live, tombstones: self.tombstones, specials: self.specials }
    }

    /// Sets what [`CpuTable::counts`] reads: the cells were copied in whole.
    pub(crate) fn set_counts(&mut self, c: PageCounts<V>) {
        self.live = c.live;
        self.tombstones = c.tombstones;
        self.specials = c.specials;
    }

    fn slots_ref(&self) -> Slots<'_, W<K, V>> {
        Slots { cells: &self.cells, aux: &self.aux, probe: self.probe, spb: W::<K, V>::slots_per_bucket() }
    }

    /// Runs `f(offset, chunk_range)` over the batch, in parallel for large batches,
    /// and returns the per-chunk results in batch order.
    fn chunked<R: Send>(n: usize, f: impl Fn(usize, usize) -> R + Sync + Send) -> Vec<R> {
        if n < SERIAL_BELOW {
            vec![f(0, n)]
        } else {
            let chunks = n.div_ceil(CHUNK);
            (0..chunks).into_par_iter().map(|c| f(c * CHUNK, ((c + 1) * CHUNK).min(n))).collect()
        }
    }

    fn insert_range<P: Probing<W<K, V>>>(
        e: &P,
        keys: &[K],
        values: &[V],
        lo: usize,
        hi: usize,
        mode: InsertMode,
    ) -> InsertTally {
        let mut t = InsertTally::default();
        for i in lo..hi {
            if i + PREFETCH_AHEAD < hi {
                e.prefetch(keys[i + PREFETCH_AHEAD].to_u64());
            }
            let key = keys[i];
            if let Some(s) = special_index(key) {
                t.specials.push((i, s, values[i].to_bits()));
                continue;
            }
            let v = values[i];
            let placed = match mode {
                InsertMode::Assign => e.insert(key.to_u64(), v.to_bits(), |_| Some(v.to_bits())),
                InsertMode::IfAbsent => e.insert(key.to_u64(), v.to_bits(), |_| None),
                InsertMode::Apply(op) => e.insert(key.to_u64(), v.to_bits(), |old| {
                    Some(V::reduce(op, V::from_bits(old), v).to_bits())
                }),
            };
            match placed {
                Placed::New => t.inserted += 1,
                Placed::Existing => t.existing += 1,
                Placed::Failed => t.failed.push(i),
            }
        }
        t
    }

    fn find_with<P: Probing<W<K, V>>>(&self, e: &P, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        let specials = self.specials;
        let zero = V::from_bits(0);
        let work = |keys: &[K], values: &mut [V], found: &mut [bool]| -> u64 {
            let mut hits = 0;
            for i in 0..keys.len() {
                if i + PREFETCH_AHEAD < keys.len() {
                    e.prefetch(keys[i + PREFETCH_AHEAD].to_u64());
                }
                let r = match special_index(keys[i]) {
                    Some(s) => specials[s],
                    None => e.find(keys[i].to_u64()).map(|w| V::from_bits(w.value())),
                };
                values[i] = r.unwrap_or(zero);
                found[i] = r.is_some();
                hits += r.is_some() as u64;
            }
            hits
        };
        if keys.len() < SERIAL_BELOW {
            return Ok(work(keys, values, found));
        }
        Ok(keys
            .par_chunks(CHUNK)
            .zip(values.par_chunks_mut(CHUNK))
            .zip(found.par_chunks_mut(CHUNK))
            .map(|((k, v), f)| work(k, v, f))
            .sum())
    }

    fn contains_with<P: Probing<W<K, V>>>(&self, e: &P, keys: &[K], found: &mut [bool]) -> Result<u64> {
        let specials = self.specials;
        let work = |keys: &[K], found: &mut [bool]| -> u64 {
            let mut hits = 0;
            for i in 0..keys.len() {
                if i + PREFETCH_AHEAD < keys.len() {
                    e.prefetch(keys[i + PREFETCH_AHEAD].to_u64());
                }
                found[i] = match special_index(keys[i]) {
                    Some(s) => specials[s].is_some(),
                    None => e.find(keys[i].to_u64()).is_some(),
                };
                hits += found[i] as u64;
            }
            hits
        };
        if keys.len() < SERIAL_BELOW {
            return Ok(work(keys, found));
        }
        Ok(keys.par_chunks(CHUNK).zip(found.par_chunks_mut(CHUNK)).map(|(k, f)| work(k, f)).sum())
    }

    fn erase_parts<P: Probing<W<K, V>>>(e: &P, keys: &[K]) -> Vec<(u64, [bool; 2])> {
        Self::chunked(keys.len(), |lo, hi| {
            let mut removed = 0u64;
            let mut specials = [false; 2];
            for i in lo..hi {
                if i + PREFETCH_AHEAD < hi {
                    e.prefetch(keys[i + PREFETCH_AHEAD].to_u64());
                }
                match special_index(keys[i]) {
                    Some(s) => specials[s] = true,
                    None => removed += e.erase(keys[i].to_u64()) as u64,
                }
            }
            (removed, specials)
        })
    }

    /// Every pair held in slots or by the scheme elsewhere (a stash), as bits.
    fn pairs(&self) -> Vec<(u64, u64)> {
        let mut parts: Vec<Vec<(u64, u64)>> = self
            .cells
            .par_chunks(CHUNK * 4)
            .map(|chunk| {
                chunk
                    .iter()
                    .filter_map(|c| {
                        let w = W::<K, V>::load(c);
                        match slot_state(w) {
                            SlotState::Full(k) => Some((k, w.value())),
                            _ => None,
                        }
                    })
                    .collect()
            })
            .collect();
        parts.push(with_probing!(self, p => p.extra_pairs()));
        parts.into_iter().flatten().collect()
    }

    /// Applies out-of-band keys in batch order, as one thread would.
    fn apply_specials(&mut self, events: &[(usize, usize, u64)], mode: InsertMode, out: &mut RawInsert) {
        for &(_, s, bits) in events {
            super::apply_special(&mut self.specials[s], V::from_bits(bits), mode, out);
        }
    }
}

impl<K: Key, V: Value> Backend<K, V> for CpuTable<K, V> {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn slots(&self) -> u64 {
        self.cells.len() as u64
    }

    fn len(&self) -> u64 {
        self.live + self.out_of_band()
    }

    fn used(&self) -> u64 {
        self.len() + self.tombstones
    }

    fn out_of_band(&self) -> u64 {
        self.specials.iter().filter(|s| s.is_some()).count() as u64
    }

    fn tombstones(&self) -> u64 {
        self.tombstones
    }

    fn insert(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        let tallies = with_probing!(self, p => {
            Self::chunked(keys.len(), |lo, hi| Self::insert_range(&p, keys, values, lo, hi, mode))
        });
        let mut out = RawInsert::default();
        let mut specials = Vec::new();
        for t in tallies {
            out.inserted += t.inserted;
            out.existing += t.existing;
            out.failed.extend(t.failed);
            specials.extend(t.specials);
        }
        self.live += out.inserted;
        self.apply_specials(&specials, mode, &mut out);
        Ok(out)
    }

    fn find(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        with_probing!(self, e => self.find_with(&e, keys, values, found))
    }

    fn contains(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        with_probing!(self, e => self.contains_with(&e, keys, found))
    }

    fn erase(&mut self, keys: &[K]) -> Result<u64> {
        let parts = with_probing!(self, e => Self::erase_parts(&e, keys));
        let mut removed = 0;
        let mut hit_specials = [false; 2];
        for (r, s) in parts {
            removed += r;
            hit_specials[0] |= s[0];
            hit_specials[1] |= s[1];
        }
        self.live -= removed;
        if self.config.scheme.erase_leaves_tombstones() {
            self.tombstones += removed;
        }
        for (hit, slot) in hit_specials.into_iter().zip(self.specials.iter_mut()) {
            if hit && slot.take().is_some() {
                removed += 1;
            }
        }
        Ok(removed)
    }
    fn scheme(&self) -> Scheme {
        self.config.scheme
    }

    fn clear(&mut self) -> Result<()> {
        self.cells.par_iter().for_each(|c| W::<K, V>::store(c, W::<K, V>::EMPTY));
        self.aux.par_iter().for_each(|a| a.store(0, Ordering::Relaxed));
        self.live = 0;
        self.tombstones = 0;
        self.specials = [None, None];
        Ok(())
    }

    fn clean_tombstones(&mut self) -> Result<()> {
        if crate::backend::hashinator::cleans_in_place(self.config.scheme) {
            return self.clean_in_place();
        }
        self.rehash(self.slots())
    }

    fn rehash(&mut self, slots: u64) -> Result<()> {
        let config = Config { slots, ..self.config };
        // Everything is allocated here, first: on failure the table is as it was.
        let mut fresh = CpuTable::<K, V>::new(config)?;
        // Straight from the old cells (no copy of the pairs), then any stash.
        let stash = with_probing!(self, p => p.extra_pairs());
        let cells = &self.cells;
        let (moved, unplaced) = with_probing!(fresh, p => {
            let place = |(moved, failed): (u64, u64), (k, v): (u64, u64)| match p.insert(k, v, |_| None) {
                Placed::New => (moved + 1, failed),
                _ => (moved, failed + 1),
            };
            let in_slots = cells
                .par_chunks(CHUNK)
                .map(|chunk| {
                    chunk
                        .iter()
                        .filter_map(|c| {
                            let w = W::<K, V>::load(c);
                            match slot_state(w) {
                                SlotState::Full(k) => Some((k, w.value())),
                                _ => None,
                            }
                        })
                        .fold((0, 0), place)
                })
                .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
            stash.iter().copied().fold(in_slots, place)
        });
        if unplaced > 0 {
            // The new table is too small for its probe limit: keep the old one.
            return Err(Error::RehashFailed { slots, unplaced });
        }
        fresh.live = moved;
        fresh.specials = self.specials;
        *self = fresh;
        Ok(())
    }

    fn export(&self) -> Result<(Vec<K>, Vec<V>)> {
        let pairs = self.pairs();
        let mut keys = Vec::with_capacity(self.len() as usize);
        let mut values = Vec::with_capacity(self.len() as usize);
        for (k, v) in pairs {
            keys.push(K::from_u64(k));
            values.push(V::from_bits(v));
        }
        for (s, key) in [K::EMPTY, K::TOMBSTONE].into_iter().enumerate() {
            if let Some(v) = self.specials[s] {
                keys.push(key);
                values.push(v);
            }
        }
        Ok((keys, values))
    }

    fn displacement(&self) -> Result<(u64, u64)> {
        const PER_TASK: usize = 4096;
        with_probing!(self, p => {
            Ok(self
                .cells
                .par_chunks(PER_TASK)
                .enumerate()
                .map(|(c, chunk)| {
                    let (mut sum, mut max) = (0u64, 0u64);
                    for (j, cell) in chunk.iter().enumerate() {
                        if let SlotState::Full(k) = slot_state(W::<K, V>::load(cell)) {
                            let d = p.displacement(k, c * PER_TASK + j);
                            sum += d;
                            max = max.max(d);
                        }
                    }
                    (sum, max)
                })
                .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1.max(b.1))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::advise_huge_pages;

    /// Huge-page advice, before first touch (a new table) or over cells in
    /// use, at any alignment, leaves every word as written.
    #[test]
    fn huge_page_advice_keeps_contents() {
        let n = 3usize << 20; // 24 MiB of words: whole 2 MiB extents inside
        let word = |i: usize| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed;
        let mut v: Vec<u64> = Vec::with_capacity(n);
        advise_huge_pages(v.as_ptr() as *const u8, n * 8);
        v.extend((0..n).map(word));
        let p = v.as_ptr() as *const u8;
        // Safety: within the allocation.
        advise_huge_pages(unsafe { p.add(4099) }, n * 8 - 4099);
        assert!(v.iter().enumerate().all(|(i, &w)| w == word(i)));
        // Too small to advise: a no-op.
        advise_huge_pages(p, 4096);
        assert_eq!(v[0], word(0));
    }
}
