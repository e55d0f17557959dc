//! Tables of tables: one routing layer over the one engine.
//!
//! A paged table (pages in host memory, a few resident at a time) and a
//! sharded table (shards on several GPUs) are both a fixed set of ordinary
//! sub-tables, each a [`Backend`] of the chosen scheme that passes the
//! conformance suite on its own. This layer is what they share:
//!
//! * [`Router`]: a key's sub-table, from hash bits independent of its
//!   placement inside the sub-table ([`crate::core::hash::route`] says why).
//! * [`Partition`]: a batch split by sub-table, stably, keeping each key's
//!   position in the caller's batch.
//! * The routed operations: each runs the plain operation on every sub-table
//!   the batch touches, in the order the sub-tables ask for
//!   (`SubTables::visit_order`: a paged table serves resident pages
//!   first), and scatters results back to the caller's order; refused
//!   positions come back as caller positions, ascending. Counts are sums.
//! * Growth per sub-table: an insert with growth runs the table API's growth
//!   loop (`src/growth.rs`) on each sub-table alone, so a full sub-table is
//!   rebuilt larger by itself and never the whole table.
//!
//! Every key, out-of-band ones included (`0`/`MAX` and their neighbours,
//! which tables keep outside their slots), is routed like any other: it
//! lives in exactly one sub-table, which stores it out of band as a single
//! table would, so `len` and `out_of_band` stay sums over sub-tables.
//!
//! [`paged`] holds the paged table and [`sharded`] the sharded table. The
//! paged table runs the routed operations here as they are; the sharded
//! table moves each batch to its shards through an exchange
//! ([`sharded::Exchange`]) and back, and shares the router, the partition,
//! the growth per sub-table, the insert outcome and the whole-table
//! operations (reserve, rehash, cleaning) with it.

#[cfg(feature = "cuda")]
mod device;
pub mod paged;
pub mod sharded;

use rayon::prelude::*;

use crate::backend::{Backend, InsertMode, RawInsert};
use crate::core::hash;
use crate::core::keys::{Key, Value};
use crate::core::scheme::Scheme;
use crate::error::NotStored;
use crate::growth::{checked_slots, Batch, Grower, HostBatch, Policy};
use crate::table::InsertReport;
use crate::{Error, Result};

/// Maps keys to one of a fixed number of sub-tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Router {
    count: u64,
    seed: u64,
}

impl Router {
    /// A router over `count` sub-tables (at least 1) for tables seeded with `seed`.
    pub fn new(count: usize, seed: u64) -> Router {
        Router { count: count.max(1) as u64, seed }
    }
    /// Number of sub-tables.
    pub fn count(&self) -> usize {
        self.count as usize
    }
    /// The seed of the tables it routes for (the routing hash salts it).
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// The sub-table of `key` (widened to `u64`), in `0..count`.
    #[inline]
    pub fn route(&self, key: u64) -> usize {
        hash::route(key, self.seed, self.count) as usize
    }
}

/// A batch split by sub-table: the positions of each sub-table's keys, in
/// batch order (a stable counting sort).
#[derive(Debug)]
pub struct Partition {
    /// Batch positions grouped by sub-table.
    order: Vec<usize>,
    /// Sub-table `i`'s positions are `order[starts[i]..starts[i + 1]]`.
    starts: Vec<usize>,
}

/// Keys per parallel task of the partition; smaller batches run on the
/// calling thread.
const PART_CHUNK: usize = 1 << 16;

/// A raw pointer that tasks writing disjoint positions may share.
#[derive(Clone, Copy)]
struct Disjoint<T>(*mut T);
// Safety: every user writes positions no other task writes (see the callers).
unsafe impl<T: Send> Send for Disjoint<T> {}
unsafe impl<T: Send> Sync for Disjoint<T> {}

impl<T> Disjoint<T> {
    /// Writes `x` at `index`. A method, so that closures capture the
    /// wrapper (Send) rather than its raw pointer.
    ///
    /// Safety: `index` is in bounds and no other task writes it meanwhile.
    unsafe fn write(&self, index: usize, x: T) {
        unsafe { *self.0.add(index) = x }
    }
}

impl Partition {
    /// Splits `keys` by `router`: a stable counting sort, in parallel over
    /// chunks of the batch (each chunk scatters into its own ranges).
    pub fn new<K: Key>(router: &Router, keys: &[K]) -> Partition {
        let n = router.count();
        let subs: Vec<u32> = keys.par_iter().with_min_len(PART_CHUNK).map(|k| router.route(k.to_u64()) as u32).collect();
        let hists: Vec<Vec<usize>> = subs
            .par_chunks(PART_CHUNK)
            .map(|c| {
                let mut h = vec![0usize; n];
                for &s in c {
                    h[s as usize] += 1;
                }
                h
            })
            .collect();
        let mut starts = vec![0usize; n + 1];
        for h in &hists {
            for (i, &c) in h.iter().enumerate() {
                starts[i + 1] += c;
            }
        }
        for i in 0..n {
            starts[i + 1] += starts[i];
        }
        // Each chunk's first position in each sub-table's range.
        let mut next = starts[..n].to_vec();
        let firsts: Vec<Vec<usize>> = hists
            .iter()
            .map(|h| {
                let f = next.clone();
                for (x, &c) in next.iter_mut().zip(h) {
                    *x += c;
                }
                f
            })
            .collect();
        let mut order = vec![0usize; keys.len()];
        let out = Disjoint(order.as_mut_ptr());
        subs.par_chunks(PART_CHUNK).zip(firsts).enumerate().for_each(|(c, (chunk, mut at))| {
            for (j, &s) in chunk.iter().enumerate() {
                // Safety: chunk `c` writes exactly its own counted slots of
                // each sub-table's range (disjoint from every other chunk's),
                // all below `keys.len()`.
                unsafe { out.write(at[s as usize], c * PART_CHUNK + j) };
                at[s as usize] += 1;
            }
        });
        Partition { order, starts }
    }

    /// The batch positions routed to sub-table `sub`, ascending.
    pub fn positions(&self, sub: usize) -> &[usize] {
        &self.order[self.starts[sub]..self.starts[sub + 1]]
    }

    /// The sub-tables with at least one key, ascending.
    pub fn touched(&self) -> Vec<usize> {
        (0..self.starts.len() - 1).filter(|&i| self.starts[i + 1] > self.starts[i]).collect()
    }

    /// The items of `src` at sub-table `sub`'s positions, in batch order.
    pub fn gather<T: Copy + Send + Sync>(&self, sub: usize, src: &[T]) -> Vec<T> {
        self.positions(sub).par_iter().with_min_len(PART_CHUNK).map(|&p| src[p]).collect()
    }

    /// Writes `part` (sub-table `sub`'s results, in its order) back to the
    /// caller's positions in `dst`.
    pub fn scatter<T: Copy + Send + Sync>(&self, sub: usize, part: &[T], dst: &mut [T]) {
        let pos = self.positions(sub);
        assert!(part.len() >= pos.len() && pos.iter().all(|&p| p < dst.len()));
        let out = Disjoint(dst.as_mut_ptr());
        pos.par_iter().with_min_len(PART_CHUNK).zip(part).for_each(|(&p, &x)| {
            // Safety: positions are distinct (a partition) and checked in bounds above.
            unsafe { out.write(p, x) };
        });
    }
}

/// Whether a call changes the sub-tables it visits (a changed page must be
/// written back, which doubles what bringing it in costs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Lookups, with the keys on the host.
    Read,
    /// Lookups with the keys on the GPU: a page left in host memory is
    /// read there by the GPU (zero-copy).
    ReadOnDevice,
    /// Inserts and erases.
    Write,
}

/// The sub-tables of a table of tables, as the routed operations reach them.
pub(crate) trait SubTables<K: Key, V: Value> {
    /// The router of the table.
    fn router(&self) -> Router;
    /// The order in which to work on `subs` (ascending, each once).
    fn visit_order(&mut self, subs: Vec<usize>) -> Vec<usize>;
    /// [`SubTables::visit_order`] for a batch of `keys[j]` keys on `subs[j]`
    /// that reads or writes them: a paged table also chooses the pages too
    /// sparse to bring in, which the next [`SubTables::with_sub`] calls
    /// work on where they lie (visited last).
    fn visit_sized(&mut self, subs: Vec<usize>, keys: &dyn Fn(usize) -> usize, access: Access) -> Vec<usize> {
        let _ = (keys, access);
        self.visit_order(subs)
    }
    /// [`SubTables::visit_sized`] again for `subs`, a group of the
    /// sub-tables the current call planned (residency may have changed
    /// since): the same call, not a new one.
    fn visit_group(&mut self, subs: Vec<usize>, keys: &dyn Fn(usize) -> usize, access: Access) -> Vec<usize> {
        self.visit_sized(subs, keys, access)
    }
    /// Runs `f` on sub-table `i` wherever it is worked on (a paged table
    /// brings the page in first). `f` returns its result and whether it
    /// changed the sub-table; a sub-table `f` changes is written back
    /// before it leaves. `f` may run twice: a paged table whose device copy
    /// finds no memory for the operation runs it again on the host page.
    fn with_sub<R>(&mut self, i: usize, f: impl FnMut(&mut dyn Backend<K, V>) -> Result<(R, bool)>) -> Result<R>;
    /// Frees what can be freed (memory held for sub-tables other than
    /// `keep`) before one sub-table's failed insert is tried again.
    fn make_room(&mut self, keep: usize);
    /// Whether sub-table `i` may be read beside the call's other work
    /// ([`SubTables::lend`]): a paged table's page that is not resident,
    /// which the host's cores may look up where it lies while the GPU
    /// works on the other pages.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn lendable(&self, i: usize) -> bool {
        let _ = i;
        false
    }
    /// What sub-table `i`'s `keys` lookups cost the GPU, in bytes of bus
    /// time, as the last [`SubTables::visit_sized`] (of a lookup split on
    /// the device) would work on it: against the host's time for the same
    /// keys, it decides which pages the host takes ([`SubTables::lend`]).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn device_cost(&self, i: usize, keys: usize) -> u64 {
        let _ = i;
        keys as u64
    }
    /// Sub-table `i`, [`SubTables::lendable`], to read beside the call's
    /// other work; the caller then reads it through the returned handle
    /// and does not visit it with [`SubTables::with_sub`] in this call.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn lend(&mut self, i: usize) -> Option<std::sync::Arc<dyn Backend<K, V>>> {
        let _ = i;
        None
    }
}

/// Routed `find`: values and found flags in the caller's order.
pub(crate) fn find<K: Key, V: Value, S: SubTables<K, V>>(
    s: &mut S,
    keys: &[K],
    values: &mut [V],
    found: &mut [bool],
) -> Result<u64> {
    let part = Partition::new(&s.router(), keys);
    let mut hits = 0;
    for i in s.visit_sized(part.touched(), &|i| part.positions(i).len(), Access::Read) {
        let k = part.gather(i, keys);
        let mut v = vec![V::from_bits(0); k.len()];
        let mut f = vec![false; k.len()];
        hits += s.with_sub(i, |t| Ok((t.find(&k, &mut v, &mut f)?, false)))?;
        part.scatter(i, &v, values);
        part.scatter(i, &f, found);
    }
    Ok(hits)
}

/// Routed `contains`.
pub(crate) fn contains<K: Key, V: Value, S: SubTables<K, V>>(s: &mut S, keys: &[K], found: &mut [bool]) -> Result<u64> {
    let part = Partition::new(&s.router(), keys);
    let mut hits = 0;
    for i in s.visit_sized(part.touched(), &|i| part.positions(i).len(), Access::Read) {
        let k = part.gather(i, keys);
        let mut f = vec![false; k.len()];
        hits += s.with_sub(i, |t| Ok((t.contains(&k, &mut f)?, false)))?;
        part.scatter(i, &f, found);
    }
    Ok(hits)
}

/// Routed `erase`: the keys removed, summed (a key lives in one sub-table,
/// so a key repeated in the batch still counts once).
pub(crate) fn erase<K: Key, V: Value, S: SubTables<K, V>>(s: &mut S, keys: &[K]) -> Result<u64> {
    let part = Partition::new(&s.router(), keys);
    let mut removed = 0;
    for i in s.visit_sized(part.touched(), &|i| part.positions(i).len(), Access::Write) {
        let k = part.gather(i, keys);
        removed += s.with_sub(i, |t| {
            let r = t.erase(&k)?;
            Ok((r, r > 0))
        })?;
    }
    Ok(removed)
}

/// Whether an insert that stored `r` in mode `mode` may have changed a table.
pub(crate) fn insert_changed(mode: InsertMode, inserted: u64, existing: u64) -> bool {
    inserted > 0 || (existing > 0 && mode != InsertMode::IfAbsent)
}

/// Routed plain insert (no growth): each sub-table's refused positions come
/// back as caller positions, ascending.
pub(crate) fn insert_raw<K: Key, V: Value, S: SubTables<K, V>>(
    s: &mut S,
    keys: &[K],
    values: &[V],
    mode: InsertMode,
) -> Result<RawInsert> {
    let part = Partition::new(&s.router(), keys);
    let mut out = RawInsert::default();
    for i in s.visit_sized(part.touched(), &|i| part.positions(i).len(), Access::Write) {
        let (k, v) = (part.gather(i, keys), part.gather(i, values));
        let r = s.with_sub(i, |t| {
            let r = t.insert(&k, &v, mode)?;
            let changed = insert_changed(mode, r.inserted, r.existing);
            Ok((r, changed))
        })?;
        out.inserted += r.inserted;
        out.existing += r.existing;
        let pos = part.positions(i);
        out.failed.extend(r.failed.iter().map(|&j| pos[j]));
    }
    out.failed.sort_unstable();
    Ok(out)
}

/// What one sub-table's insert under the growth policy did, in its own
/// positions: the report, the positions not stored, and why (if it failed).
pub(crate) struct SubOutcome {
    pub(crate) report: InsertReport,
    pub(crate) not_stored: Vec<usize>,
    pub(crate) cause: Option<Error>,
}

/// One sub-table's insert under the growth policy, and whether it may have
/// changed the sub-table.
pub(crate) fn sub_insert<K: Key, V: Value>(t: &mut dyn Backend<K, V>, policy: Policy, k: &[K], v: &[V], mode: InsertMode) -> (SubOutcome, bool) {
    sub_insert_from(t, policy, &HostBatch { keys: k, values: v }, mode)
}

/// [`sub_insert`] over any batch (host slices or device memory).
pub(crate) fn sub_insert_from<K: Key, V: Value>(t: &mut dyn Backend<K, V>, policy: Policy, batch: &dyn Batch<K, V>, mode: InsertMode) -> (SubOutcome, bool) {
    let (slots, tombstones) = (t.slots(), t.tombstones());
    let out = match (Grower { b: &mut *t, policy }).insert_from(batch, mode) {
        Ok(report) => SubOutcome { report, not_stored: Vec::new(), cause: None },
        Err(Error::TableFull(ns)) => SubOutcome { report: ns.report, not_stored: ns.positions, cause: None },
        Err(Error::GrowthFailed { cause, not_stored }) => {
            SubOutcome { report: not_stored.report, not_stored: not_stored.positions, cause: Some(*cause) }
        }
        // Nothing of this sub-batch was stored.
        Err(e) => SubOutcome { report: InsertReport::default(), not_stored: (0..batch.len()).collect(), cause: Some(e) },
    };
    let changed = insert_changed(mode, out.report.inserted, out.report.existing)
        || t.slots() != slots
        || t.tombstones() != tombstones;
    (out, changed)
}

/// Routed insert under the table's growth policy, each sub-table growing
/// alone. Outcomes, for the whole batch in the caller's positions:
///
/// * every position stored: the summed report;
/// * growth off, some refused: [`Error::TableFull`] listing exactly those;
/// * a sub-table could not grow (or failed) even when tried again alone
///   after [`SubTables::make_room`]: [`Error::GrowthFailed`] listing
///   exactly the positions not stored, from every sub-table (the other
///   sub-tables' work stands); or the cause itself when the call stored
///   nothing at all (the table's contents are unchanged).
pub(crate) fn insert_with<K: Key, V: Value, S: SubTables<K, V>>(
    s: &mut S,
    policy: Policy,
    keys: &[K],
    values: &[V],
    mode: InsertMode,
) -> Result<InsertReport> {
    let parts = insert_parts(s, policy, keys, values, mode);
    insert_outcome(keys, parts.report, parts.not_stored, parts.cause)
}

/// What a routed insert under the growth policy did, in the caller's
/// positions (not yet sorted).
#[derive(Default)]
pub(crate) struct Parts {
    pub(crate) report: InsertReport,
    pub(crate) not_stored: Vec<usize>,
    /// The first sub-table's failure.
    pub(crate) cause: Option<Error>,
}

impl Parts {
    /// Adds a sub-table's (or a part of the batch's) outcome, whose
    /// positions map to the caller's through `pos`.
    pub(crate) fn add(&mut self, out: SubOutcome, pos: impl Fn(usize) -> usize) {
        self.report += out.report;
        self.not_stored.extend(out.not_stored.iter().map(|&j| pos(j)));
        if self.cause.is_none() {
            self.cause = out.cause;
        }
    }
}

/// The body of [`insert_with`]: what each sub-table stored, and refused.
pub(crate) fn insert_parts<K: Key, V: Value, S: SubTables<K, V>>(
    s: &mut S,
    policy: Policy,
    keys: &[K],
    values: &[V],
    mode: InsertMode,
) -> Parts {
    let part = Partition::new(&s.router(), keys);
    let mut parts = Parts::default();
    for i in s.visit_sized(part.touched(), &|i| part.positions(i).len(), Access::Write) {
        let (k, v) = (part.gather(i, keys), part.gather(i, values));
        let out = match s.with_sub(i, |t| Ok(sub_insert(t, policy, &k, &v, mode))) {
            Ok(out) => out,
            Err(e) => SubOutcome { report: InsertReport::default(), not_stored: (0..k.len()).collect(), cause: Some(e) },
        };
        let out = retry_alone(s, i, policy, out, |j| (k[j], v[j]), mode);
        let pos = part.positions(i);
        parts.add(out, |j| pos[j]);
    }
    parts
}

/// A sub-table's insert that failed (a cause, with positions not stored)
/// is redone once on the sub-table alone, after [`SubTables::make_room`]
/// freed what the others held. `pair(j)` is the pair at the sub-batch's
/// position `j`.
pub(crate) fn retry_alone<K: Key, V: Value, S: SubTables<K, V>>(
    s: &mut S,
    i: usize,
    policy: Policy,
    mut out: SubOutcome,
    pair: impl Fn(usize) -> (K, V),
    mode: InsertMode,
) -> SubOutcome {
    if out.cause.is_none() || out.not_stored.is_empty() {
        return out;
    }
    s.make_room(i);
    let (kk, vv): (Vec<K>, Vec<V>) = out.not_stored.iter().map(|&j| pair(j)).unzip();
    match s.with_sub(i, |t| Ok(sub_insert(t, policy, &kk, &vv, mode))) {
        Ok(again) => {
            out.report += again.report;
            out.not_stored = again.not_stored.iter().map(|&j| out.not_stored[j]).collect();
            out.cause = again.cause;
        }
        Err(e) => out.cause = Some(e),
    }
    out
}

/// Groups `order` (pages in visiting order, with `counts[p]` keys each)
/// into consecutive runs of at most `cap` keys, each worked on with one
/// fill of the routing buffers. A page with more than `cap` keys makes a
/// group of its own (the caller sizes its buffers for the largest group).
// Only the device routing (CUDA) groups pages.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn page_groups(order: &[usize], counts: &[usize], cap: usize) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut keys = 0usize;
    for &p in order {
        match groups.last_mut() {
            Some(g) if keys + counts[p] <= cap => {
                g.push(p);
                keys += counts[p];
            }
            _ => {
                groups.push(vec![p]);
                keys = counts[p];
            }
        }
    }
    groups
}

/// The outcome of a routed insert under the growth policy (see
/// [`insert_with`]) from what its sub-tables did: the summed `report`, the
/// caller positions not stored, and the first sub-table's failure.
pub(crate) fn insert_outcome<K: Key>(
    keys: &[K],
    report: InsertReport,
    mut not_stored: Vec<usize>,
    cause: Option<Error>,
) -> Result<InsertReport> {
    not_stored.sort_unstable();
    let listed = |positions: Vec<usize>, report| {
        let keys = positions.iter().map(|&p| keys[p].to_u64()).collect();
        Box::new(NotStored { report, positions, keys })
    };
    match cause {
        None if not_stored.is_empty() => Ok(report),
        None => Err(Error::TableFull(listed(not_stored, report))),
        Some(cause) if report == InsertReport::default() && not_stored.len() == keys.len() => Err(cause),
        Some(cause) => Err(Error::GrowthFailed { cause: Box::new(cause), not_stored: listed(not_stored, report) }),
    }
}

/// Room for `additional` more keys: every sub-table gets room for its
/// share of a batch routed uniformly, `additional / count` plus four
/// standard deviations (a sub-table receives more with probability about
/// 3e-5), and the sub-tables together for all `additional`. A sub-table
/// that still receives more grows alone (growth on) or stores what fits
/// (growth off). Sub-tables grown before a failure keep their size; nothing
/// is lost.
pub(crate) fn reserve<K: Key, V: Value, S: SubTables<K, V>>(s: &mut S, policy: Policy, additional: u64) -> Result<()> {
    let count = s.router().count() as u64;
    let mean = additional.div_ceil(count);
    let share = mean.saturating_add((4.0 * (mean as f64).sqrt()).ceil() as u64).min(additional);
    for_each(s, |_, t| {
        let before = (t.slots(), t.tombstones());
        (Grower { b: &mut *t, policy }).reserve(share)?;
        Ok((t.slots(), t.tombstones()) != before)
    })
}

/// Rebuilds every sub-table (one at a time) into its share of `slots`, or
/// more where its keys need it. A sub-table that fails stops the call with
/// its error; sub-tables rebuilt before keep their new size, nothing is lost.
pub(crate) fn rehash_with<K: Key, V: Value, S: SubTables<K, V>>(s: &mut S, scheme: Scheme, policy: Policy, slots: u64) -> Result<()> {
    checked_slots::<K, V>(scheme, slots)?;
    let share = slots.div_ceil(s.router().count() as u64);
    for_each(s, |_, t| {
        (Grower { b: &mut *t, policy }).rehash(share)?;
        Ok(true)
    })
}

/// Reclaims every sub-table's tombstones, one sub-table at a time.
pub(crate) fn clean_tombstones_with<K: Key, V: Value, S: SubTables<K, V>>(s: &mut S, policy: Policy) -> Result<()> {
    for_each(s, |_, t| {
        if t.tombstones() == 0 {
            return Ok(false);
        }
        (Grower { b: &mut *t, policy }).clean_tombstones()?;
        Ok(true)
    })
}

/// The backend `rehash` of a table of tables: each sub-table into its share
/// of `slots` (no smaller than its keys need); a sub-table that fails stops
/// the call, those rebuilt before keep their size and every key.
pub(crate) fn rehash_each<K: Key, V: Value, S: SubTables<K, V>>(s: &mut S, scheme: Scheme, slots: u64) -> Result<()> {
    let share = slots.div_ceil(s.router().count() as u64);
    for_each(s, |_, t| {
        let need = crate::core::capacity::slots_for_keys(t.len(), 1.0);
        t.rehash(checked_slots::<K, V>(scheme, share.max(need))?)?;
        Ok(true)
    })
}

/// The backend `clean_tombstones` of a table of tables.
pub(crate) fn clean_each<K: Key, V: Value, S: SubTables<K, V>>(s: &mut S) -> Result<()> {
    for_each(s, |_, t| {
        if t.tombstones() == 0 {
            return Ok(false);
        }
        t.clean_tombstones()?;
        Ok(true)
    })
}

/// Every pair of every sub-table, in visit order.
pub(crate) fn export_all<K: Key, V: Value, S: SubTables<K, V>>(s: &mut S) -> Result<(Vec<K>, Vec<V>)> {
    let (mut keys, mut values) = (Vec::new(), Vec::new());
    for_each(s, |_, t| {
        let (k, v) = t.export()?;
        keys.extend(k);
        values.extend(v);
        Ok(false)
    })?;
    Ok((keys, values))
}

/// The displacement sum and maximum over every sub-table.
pub(crate) fn displacement_all<K: Key, V: Value, S: SubTables<K, V>>(s: &mut S) -> Result<(u64, u64)> {
    let (mut sum, mut max) = (0, 0);
    for_each(s, |_, t| {
        let (d, m) = t.displacement()?;
        sum += d;
        max = max.max(m);
        Ok(false)
    })?;
    Ok((sum, max))
}

/// Runs `f` on every sub-table, in visit order, stopping at the first error.
pub(crate) fn for_each<K: Key, V: Value, S: SubTables<K, V>>(
    s: &mut S,
    mut f: impl FnMut(usize, &mut dyn Backend<K, V>) -> Result<bool>,
) -> Result<()> {
    for i in s.visit_order((0..s.router().count()).collect()) {
        s.with_sub(i, |t| Ok(((), f(i, t)?)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_is_stable_and_complete() {
        let r = Router::new(5, 42);
        let keys: Vec<u64> = (0..1000).map(|k| k * 7919).collect();
        let p = Partition::new(&r, &keys);
        let mut seen = vec![false; keys.len()];
        for sub in 0..5 {
            let pos = p.positions(sub);
            assert!(pos.windows(2).all(|w| w[0] < w[1]), "positions of {sub} not ascending");
            for &q in pos {
                assert_eq!(r.route(keys[q]), sub);
                assert!(!seen[q]);
                seen[q] = true;
            }
            let g = p.gather(sub, &keys);
            let mut back = vec![0u64; keys.len()];
            p.scatter(sub, &g, &mut back);
            for &q in pos {
                assert_eq!(back[q], keys[q]);
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(p.touched(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn page_groups_keep_order_and_fit() {
        let counts = [5, 0, 7, 3, 9, 1];
        let order = [4, 0, 2, 3, 5];
        let g = page_groups(&order, &counts, 10);
        assert_eq!(g, vec![vec![4], vec![0], vec![2, 3], vec![5]]);
        // Every page once, in order; a group over the cap only when one page is.
        assert_eq!(g.concat(), order.to_vec());
        assert!(g.iter().all(|g| g.len() == 1 || g.iter().map(|&p| counts[p]).sum::<usize>() <= 10));
        assert_eq!(page_groups(&order, &counts, 100), vec![order.to_vec()]);
        assert_eq!(page_groups(&order, &counts, 1).len(), order.len());
        assert!(page_groups(&[], &counts, 10).is_empty());
    }

    #[test]
    fn one_sub_table_takes_everything() {
        let r = Router::new(1, 7);
        assert!((0..1000u64).all(|k| r.route(k) == 0));
        let p = Partition::new(&r, &[] as &[u32]);
        assert!(p.touched().is_empty());
    }
}
