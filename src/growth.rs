//! Growth: how a table keeps to its maximum load and what an insert that
//! cannot grow reports. It drives one [`Backend`] as a whole; the table API
//! runs it over its backend, and a table of tables ([`crate::routed`]) runs
//! it over each sub-table alone, so a full page grows without touching the
//! others.

use crate::backend::{Backend, InsertMode, RawInsert};
use crate::core::capacity::{self, load_limit};
use crate::core::keys::{Key, Value};
use crate::core::layout::Word;
use crate::core::scheme::Scheme;
use crate::error::NotStored;
use crate::table::InsertReport;
use crate::{Error, Result};

/// The growth settings of a table, kept by the table API and handed to
/// every sub-table of a table of tables.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Policy {
    /// The maximum load factor growth keeps to.
    pub(crate) max_load: f64,
    /// Whether inserts may grow the table.
    pub(crate) growth: bool,
}

/// The slot count a table of `scheme` gets when asked for `requested`.
pub(crate) fn checked_slots<K: Key, V: Value>(scheme: Scheme, requested: u64) -> Result<u64> {
    if requested == 0 {
        return Err(Error::ZeroCapacity);
    }
    scheme
        .round_slots(requested, K::Word::<V>::BYTES)
        .ok_or(Error::CapacityTooLarge { requested, max: capacity::MAX_SLOTS })
}

/// One backend under one growth policy.
pub(crate) struct Grower<'a, K: Key, V: Value> {
    pub(crate) b: &'a mut dyn Backend<K, V>,
    pub(crate) policy: Policy,
}

/// How far a bulk insert with growth on got: positions below `done` were
/// tried, and all of them but `pending` (ascending) are stored.
#[derive(Default)]
struct Progress {
    report: InsertReport,
    done: usize,
    pending: Vec<usize>,
}

impl<K: Key, V: Value> Grower<'_, K, V> {
    fn capacity(&self) -> u64 {
        self.b.slots()
    }

    /// See [`crate::HashTable::reserve`].
    pub(crate) fn reserve(&mut self, additional: u64) -> Result<()> {
        let max_load = self.policy.max_load;
        let want = self.b.len().saturating_add(additional);
        if self.b.used().saturating_add(additional) > load_limit(self.capacity(), max_load) {
            let slots = capacity::slots_for_keys(want, max_load).max(self.capacity());
            self.rehash_into(slots)?;
        }
        Ok(())
    }

    /// See [`crate::HashTable::rehash`].
    pub(crate) fn rehash(&mut self, slots: u64) -> Result<()> {
        let min = capacity::slots_for_keys(self.b.len(), 1.0);
        self.rehash_into(slots.max(min))
    }

    /// See [`crate::HashTable::clean_tombstones`].
    pub(crate) fn clean_tombstones(&mut self) -> Result<()> {
        match self.b.clean_tombstones() {
            // A rebuild at this size failed (table unchanged): grow as `rehash` does.
            Err(Error::RehashFailed { .. }) => self.rehash_into(self.capacity()),
            other => other,
        }
    }

    /// Rebuilds into at least `slots` slots, doubling while the probe limit
    /// is too short for the keys.
    pub(crate) fn rehash_into(&mut self, slots: u64) -> Result<()> {
        let scheme = self.b.scheme();
        let mut slots = checked_slots::<K, V>(scheme, slots)?;
        loop {
            match self.b.rehash(slots) {
                // The probe limit is too short for this size: try a larger table.
                Err(Error::RehashFailed { .. }) if slots < capacity::MAX_SLOTS / 2 => {
                    slots = checked_slots::<K, V>(scheme, slots * 2)?
                }
                other => return other,
            }
        }
    }

    /// Grows (or only cleans tombstones) so that `expected_live` keys fit.
    fn grow_for(&mut self, expected_live: u64) -> Result<()> {
        let slots = self.capacity();
        let max_load = self.policy.max_load;
        let target = if expected_live <= load_limit(slots, max_load) {
            slots
        } else {
            capacity::grow_target(slots, expected_live, max_load)
        };
        self.rehash_into(target)
    }

    /// A bulk insert under the policy: with growth on, grows as needed and
    /// on a failure part-way returns [`Error::GrowthFailed`] with exactly
    /// the positions not stored; with growth off, stores what fits and
    /// returns [`Error::TableFull`] with exactly the positions refused.
    pub(crate) fn insert(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<InsertReport> {
        self.insert_from(&HostBatch { keys, values }, mode)
    }

    /// [`Grower::insert`] over any batch: host slices or device memory.
    pub(crate) fn insert_from(&mut self, batch: &dyn Batch<K, V>, mode: InsertMode) -> Result<InsertReport> {
        let n = batch.len();
        if !self.policy.growth {
            let out = batch.insert(self.b, 0..n, mode)?;
            let out = self.reclaim_and_retry(batch, out, mode);
            return not_stored(batch, &*self.b, out);
        }
        let mut p = Progress::default();
        match self.insert_growing(batch, mode, &mut p) {
            Ok(()) => Ok(p.report),
            // Nothing of the batch was stored: the table is as it was. (Or
            // all of it was, and growing past the load limit after it hit a
            // device error, which is no insert outcome.)
            Err(cause) if p.done == 0 || (p.done == n && p.pending.is_empty()) => Err(cause),
            Err(cause) => {
                let mut positions = p.pending;
                positions.extend(p.done..n);
                positions.sort_unstable();
                let keys = match batch.pairs(&*self.b, &positions) {
                    Ok((k, _)) => k.into_iter().map(Key::to_u64).collect(),
                    Err(_) => Vec::new(),
                };
                let not_stored = Box::new(NotStored { report: p.report, positions, keys });
                Err(Error::GrowthFailed { cause: Box::new(cause), not_stored })
            }
        }
    }

    /// The insert loop with growth on. Backend inserts store nothing when
    /// they fail, so `p` always says exactly what the call stored: every
    /// position below `p.done` but those in `p.pending`.
    fn insert_growing(&mut self, batch: &dyn Batch<K, V>, mode: InsertMode, p: &mut Progress) -> Result<()> {
        let n = batch.len();
        let max_load = self.policy.max_load;
        // Fraction of recent keys that were new: sizes the next chunk so the
        // table passes its maximum load only between chunks, and lets
        // aggregation workloads (mostly existing keys) run in few chunks.
        let mut new_fraction = 1.0f64;
        while p.done < n {
            let pos = p.done;
            let slots = self.capacity();
            let limit = load_limit(slots, max_load);
            let used = self.b.used();
            if used > limit {
                self.grow_for(self.b.len() + ((n - pos) as f64 * new_fraction) as u64)?;
                continue;
            }
            let room = limit - used;
            let slack = (slots / 16).min(slots.saturating_sub(used) / 2);
            let est = if new_fraction > 1e-3 { (room as f64 / new_fraction) as u64 } else { u64::MAX };
            let chunk = (n - pos).min(est.max(slack).max(1) as usize);
            let out = batch.insert(self.b, pos..pos + chunk, mode)?;
            p.report += InsertReport { inserted: out.inserted, existing: out.existing };
            p.pending = out.failed.iter().map(|&i| pos + i).collect();
            p.done = pos + chunk;
            new_fraction = out.inserted as f64 / chunk as f64;
            self.place_pending(batch, mode, p)?;
        }
        if self.b.used() > load_limit(self.capacity(), max_load) {
            match self.grow_for(self.b.len()) {
                // Every key is stored; the table sits above its maximum load
                // until the next insert manages to grow it.
                Err(Error::OutOfMemory { .. }) => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Grows and retries the positions in `p.pending`, which found no slot.
    fn place_pending(&mut self, batch: &dyn Batch<K, V>, mode: InsertMode, p: &mut Progress) -> Result<()> {
        if p.pending.is_empty() {
            return Ok(());
        }
        // Few keys (those past a probe limit): fetched once, retried from the host.
        let mut first = p.pending.clone();
        first.sort_unstable();
        let (k0, v0) = batch.pairs(&*self.b, &first)?;
        for _ in 0..16 {
            if p.pending.is_empty() {
                return Ok(());
            }
            let grown =
                capacity::grow_target(self.capacity(), self.b.len() + p.pending.len() as u64, self.policy.max_load);
            self.rehash_into(grown)?;
            // Every position still pending was in `first`.
            let at: Vec<usize> = p.pending.iter().map(|i| first.binary_search(i).unwrap_or_default()).collect();
            let k: Vec<K> = at.iter().map(|&a| k0[a]).collect();
            let v: Vec<V> = at.iter().map(|&a| v0[a]).collect();
            let out = self.b.insert(&k, &v, mode)?;
            p.report += InsertReport { inserted: out.inserted, existing: out.existing };
            p.pending = out.failed.iter().map(|&i| p.pending[i]).collect();
        }
        if p.pending.is_empty() {
            return Ok(());
        }
        // Unreachable in practice: sixteen doublings always make room.
        Err(Error::RehashFailed { slots: self.capacity(), unplaced: p.pending.len() as u64 })
    }

    /// With growth off: when keys found no slot while the table holds
    /// tombstones, reclaims them and tries those keys again, so a table
    /// refuses keys only when live keys really fill it. The reclaim is a
    /// rebuild at the same capacity, which on any failure leaves the table
    /// as it was (the in-place cleaning may have to grow to put its lifted
    /// keys back, which growth off forbids); the first outcome then stands.
    fn reclaim_and_retry(&mut self, batch: &dyn Batch<K, V>, mut out: RawInsert, mode: InsertMode) -> RawInsert {
        if out.failed.is_empty() || self.b.tombstones() == 0 {
            return out;
        }
        // Fetched first: should that fail (a device error), the first outcome stands.
        let Ok((k, v)) = batch.pairs(&*self.b, &out.failed) else {
            return out;
        };
        if self.b.rehash(self.capacity()).is_err() {
            return out;
        }
        if let Ok(again) = self.b.insert(&k, &v, mode) {
            out.inserted += again.inserted;
            out.existing += again.existing;
            out.failed = again.failed.iter().map(|&i| out.failed[i]).collect();
        }
        out
    }
}

/// A batch of pairs the growth loop inserts a range at a time: host slices
/// ([`HostBatch`]) or device memory (the CUDA backend's).
pub(crate) trait Batch<K: Key, V: Value> {
    /// Pairs in the batch.
    fn len(&self) -> usize;
    /// Inserts the pairs at `range` into `b`; failed positions are counted
    /// from the range's start.
    fn insert(&self, b: &mut dyn Backend<K, V>, range: std::ops::Range<usize>, mode: InsertMode) -> Result<RawInsert>;
    /// The pairs at `positions` (ascending, few), on the host.
    fn pairs(&self, b: &dyn Backend<K, V>, positions: &[usize]) -> Result<(Vec<K>, Vec<V>)>;
}

/// Pairs in host memory.
pub(crate) struct HostBatch<'a, K, V> {
    pub(crate) keys: &'a [K],
    pub(crate) values: &'a [V],
}

impl<K: Key, V: Value> Batch<K, V> for HostBatch<'_, K, V> {
    fn len(&self) -> usize {
        self.keys.len()
    }

    fn insert(&self, b: &mut dyn Backend<K, V>, range: std::ops::Range<usize>, mode: InsertMode) -> Result<RawInsert> {
        b.insert(&self.keys[range.clone()], &self.values[range], mode)
    }

    fn pairs(&self, _: &dyn Backend<K, V>, positions: &[usize]) -> Result<(Vec<K>, Vec<V>)> {
        Ok(positions.iter().map(|&i| (self.keys[i], self.values[i])).unzip())
    }
}

fn not_stored<K: Key, V: Value>(batch: &dyn Batch<K, V>, b: &dyn Backend<K, V>, out: RawInsert) -> Result<InsertReport> {
    let report = InsertReport { inserted: out.inserted, existing: out.existing };
    if out.failed.is_empty() {
        return Ok(report);
    }
    let keys = batch.pairs(b, &out.failed)?.0.into_iter().map(Key::to_u64).collect();
    Err(Error::TableFull(Box::new(NotStored { report, positions: out.failed, keys })))
}
