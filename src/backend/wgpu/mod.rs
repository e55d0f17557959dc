//! The wgpu backend ([`Device::Wgpu`]): the shared slot layout in a GPU
//! storage buffer, driven by WGSL compute shaders (`kernels/wgsl/`) through
//! wgpu, so it runs wherever wgpu does (Vulkan, Metal, DX12; browser
//! WebGPU) and on CPU implementations such as Mesa's lavapipe.
//!
//! Same slot layout, hash and probe order as the CPU backend, so the CPU
//! backend is its oracle. Only [`Scheme::Linear`] is implemented so far;
//! [`Device::check_scheme`] reports the others as [`Error::Unsupported`].
//!
//! **32-bit atomics only** (what browsers offer): a slot is two or four
//! atomic 32-bit words, so no single atomic publishes a pair. Instead:
//!
//! * the host folds the duplicates of a batch first (assign: the last
//!   value; if-absent: the first; apply: the reduction of all, in batch
//!   order), so no two invocations of one dispatch hold the same key;
//! * an insert first locates its keys (a read-only dispatch), the host
//!   computes the values of the keys found (for insert-or-apply, the stored
//!   value reduced with the batch's, exactly as [`Value::reduce`] does on
//!   the CPU, for every value type including `f64`, which WGSL lacks), and
//!   a second submission writes those values and *claims* slots for the
//!   absent keys: a claim sets the slot's bit in an occupancy bitmap with
//!   one `atomicOr` (one bit per slot), whose winner alone writes the slot;
//!   claiming invocations never read key words, so none can see a pair
//!   half-written by another;
//! * erase locates, then writes tombstones in a later dispatch.
//!
//! Keys equal to a slot marker are kept out of band on the host, as on the
//! CPU and CUDA backends. A full table refuses keys exactly: a key that
//! finds no free slot within the probe limit is reported at every batch
//! position that holds it. Every loop is bounded by the probe limit.

mod gpu;

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;

use self::gpu::{Bindings, Gpu, Kernel, Params, NONE};
use super::{Backend, Config, InsertMode, RawInsert};
use crate::core::hash::{mix64, DEFAULT_SEED};
use crate::core::keys::{special_index, Key, Reduce, Value};
use crate::core::layout::{Word, BUCKET_BYTES};
use crate::core::probe::ProbeParams;
use crate::core::scheme::Scheme;
use crate::{Device, Error, Result};

pub use self::gpu::{adapter_info, adapters, shader_source, COMMON_SOURCE, LINEAR_SOURCE};

/// Items per dispatch at most (the binding-size limit may lower it).
const MAX_CHUNK: usize = 1 << 22;

type W<K, V> = <K as Key>::Word<V>;

/// `Ok` if the default wgpu adapter (`None`) or adapter `index` can be
/// opened, or why not.
pub(crate) fn available(index: Option<usize>) -> Result<()> {
    gpu::gpu(index).map(|_| ())
}

/// `Ok` if the wgpu backend implements `scheme`.
pub(crate) fn check_scheme(scheme: Scheme) -> Result<()> {
    match scheme {
        Scheme::Linear => Ok(()),
        other => Err(Error::Unsupported(format!(
            "the wgpu backend implements Scheme::Linear only; {other} is not supported on wgpu yet"
        ))),
    }
}

/// Hashes `u64` keys with the table's own mixer (for folding duplicates).
#[derive(Default)]
struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix64(self.0 ^ b as u64, DEFAULT_SEED);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = mix64(x, DEFAULT_SEED);
    }
}

type FastMap<T> = HashMap<u64, T, BuildHasherDefault<MixHasher>>;

/// The slot array on the device and the slot work on it, on raw bits (not
/// generic over the key and value types, so it is compiled once).
struct Slots {
    gpu: Arc<Gpu>,
    buffer: wgpu::Buffer,
    /// One bit per slot: set once the slot is not EMPTY.
    occupied: wgpu::Buffer,
    slot_bytes: usize,
    probe: ProbeParams,
    /// Live keys held in slots.
    live: u64,
    /// Erased slots not yet reclaimed.
    tombstones: u64,
}

impl Slots {
    fn new(gpu: Arc<Gpu>, config: &Config, slot_bytes: usize) -> Result<Slots> {
        let spb = (BUCKET_BYTES / slot_bytes) as u64;
        let buckets = config.slots / spb;
        let bytes = config.slots.saturating_mul(slot_bytes as u64);
        // The shaders index words with 32-bit integers.
        if bytes / 4 > u32::MAX as u64 {
            return Err(Error::OutOfMemory { bytes, device: gpu.name() });
        }
        let buffer = gpu.storage("gpuhash slots", bytes, wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST)?;
        let occupied = gpu.storage("gpuhash occupied", config.slots.div_ceil(32) * 4, wgpu::BufferUsages::COPY_DST)?;
        let probe = ProbeParams { buckets, seed: config.seed, limit: config.max_probe_buckets.clamp(1, buckets) };
        let mut s = Slots { gpu, buffer, occupied, slot_bytes, probe, live: 0, tombstones: 0 };
        s.reset()?;
        Ok(s)
    }

    fn slots(&self) -> u64 {
        self.buffer.size() / self.slot_bytes as u64
    }

    /// 32-bit words of a key or value field: 1 for 8-byte slots, else 2.
    fn field_words(&self) -> usize {
        self.slot_bytes / 8
    }

    fn params(&self, n: usize) -> Params {
        Params { n: n as u32, buckets: self.probe.buckets as u32, limit: self.probe.limit as u32, seed: self.probe.seed }
    }

    fn bind<'a>(
        &'a self,
        items: Option<&'a wgpu::Buffer>,
        values: Option<&'a wgpu::Buffer>,
        results: Option<&'a wgpu::Buffer>,
    ) -> Bindings<'a> {
        Bindings { slots: &self.buffer, occupied: &self.occupied, items, values, results }
    }

    /// Every slot EMPTY, every occupancy bit clear.
    fn reset(&mut self) -> Result<()> {
        let mut w = self.gpu.work(self.slot_bytes)?;
        let words = (self.buffer.size() / 4) as usize;
        w.dispatch(Kernel::FillEmpty, self.params(words), &self.bind(None, None, None))?;
        w.clear(&self.occupied);
        w.finish()?;
        self.live = 0;
        self.tombstones = 0;
        Ok(())
    }

    /// Items one dispatch takes: every per-item buffer within the binding limit.
    fn chunk(&self, n: usize) -> usize {
        let per_item = 4 * (1 + self.field_words()) as u64;
        let by_limit = (self.gpu.max_binding() / per_item).max(1) as usize;
        n.min(MAX_CHUNK).min(by_limit).max(1)
    }

    fn push_field(&self, out: &mut Vec<u32>, bits: u64) {
        out.push(bits as u32);
        if self.field_words() == 2 {
            out.push((bits >> 32) as u32);
        }
    }

    fn field(words: &[u32]) -> u64 {
        match words {
            [lo] => *lo as u64,
            [lo, hi, ..] => *lo as u64 | (*hi as u64) << 32,
            [] => 0,
        }
    }

    /// For each key (never a marker): its slot and value bits, if stored.
    fn locate(&self, keys: &[u64]) -> Result<Vec<Option<(u32, u64)>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let fw = self.field_words();
        let stride = 1 + fw;
        let chunk = self.chunk(keys.len());
        let gpu = &self.gpu;
        let items = gpu.storage("gpuhash keys", (chunk * fw * 4) as u64, wgpu::BufferUsages::COPY_DST)?;
        let results = gpu.storage("gpuhash results", (chunk * stride * 4) as u64, wgpu::BufferUsages::COPY_SRC)?;
        let staging = gpu.staging((chunk * stride * 4) as u64)?;
        let mut out = Vec::with_capacity(keys.len());
        let mut words = Vec::with_capacity(chunk * fw);
        for part in keys.chunks(chunk) {
            words.clear();
            for &k in part {
                self.push_field(&mut words, k);
            }
            gpu.write(&items, &words)?;
            let mut w = gpu.work(self.slot_bytes)?;
            w.dispatch(Kernel::Locate, self.params(part.len()), &self.bind(Some(&items), None, Some(&results)))?;
            w.copy(&results, &staging, (part.len() * stride * 4) as u64);
            let r = w.finish_and_read(&staging, part.len() * stride)?;
            out.extend(r.chunks_exact(stride).map(|c| (c[0] != NONE).then(|| (c[0], Self::field(&c[1..])))));
        }
        Ok(out)
    }

    /// Writes `updates` (slot, value bits) into slots found by
    /// [`Slots::locate`], then places `new` (key, value bits): keys absent
    /// from the table and distinct. Returns each new key's slot, or
    /// [`NONE`] where it found no free slot within the probe limit.
    fn place(&mut self, updates: &[(u32, u64)], new: &[(u64, u64)]) -> Result<Vec<u32>> {
        let fw = self.field_words();
        let n = updates.len().max(new.len());
        if n == 0 {
            return Ok(Vec::new());
        }
        let chunk = self.chunk(n);
        let gpu = self.gpu.clone();
        // Everything is allocated before the first write to the table.
        let items = gpu.storage("gpuhash keys", (chunk * fw * 4) as u64, wgpu::BufferUsages::COPY_DST)?;
        let values = gpu.storage("gpuhash values", (chunk * fw * 4) as u64, wgpu::BufferUsages::COPY_DST)?;
        let (results, staging) = if new.is_empty() {
            (None, None)
        } else {
            let bytes = (chunk.min(new.len()) * 4) as u64;
            (
                Some(gpu.storage("gpuhash results", bytes, wgpu::BufferUsages::COPY_SRC)?),
                Some(gpu.staging(bytes)?),
            )
        };
        let (mut iw, mut vw) = (Vec::with_capacity(chunk * fw), Vec::with_capacity(chunk * fw));
        for part in updates.chunks(chunk) {
            iw.clear();
            vw.clear();
            for &(slot, v) in part {
                iw.push(slot);
                self.push_field(&mut vw, v);
            }
            gpu.write(&items, &iw)?;
            gpu.write(&values, &vw)?;
            let mut w = gpu.work(self.slot_bytes)?;
            w.dispatch(Kernel::StoreValues, self.params(part.len()), &self.bind(Some(&items), Some(&values), None))?;
            w.finish()?;
        }
        let mut placed = Vec::with_capacity(new.len());
        if let (Some(results), Some(staging)) = (&results, &staging) {
            for part in new.chunks(chunk) {
                iw.clear();
                vw.clear();
                for &(k, v) in part {
                    self.push_field(&mut iw, k);
                    self.push_field(&mut vw, v);
                }
                gpu.write(&items, &iw)?;
                gpu.write(&values, &vw)?;
                let mut w = gpu.work(self.slot_bytes)?;
                w.dispatch(Kernel::Claim, self.params(part.len()), &self.bind(Some(&items), Some(&values), Some(results)))?;
                w.copy(results, staging, (part.len() * 4) as u64);
                let r = w.finish_and_read(staging, part.len())?;
                self.live += r.iter().filter(|&&s| s != NONE).count() as u64;
                placed.extend(r);
            }
        }
        Ok(placed)
    }

    /// Erases distinct keys (never a marker); returns how many were stored.
    fn erase(&mut self, keys: &[u64]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        let fw = self.field_words();
        let stride = 1 + fw;
        let chunk = self.chunk(keys.len());
        let gpu = self.gpu.clone();
        let items = gpu.storage("gpuhash keys", (chunk * fw * 4) as u64, wgpu::BufferUsages::COPY_DST)?;
        let results = gpu.storage("gpuhash results", (chunk * stride * 4) as u64, wgpu::BufferUsages::COPY_SRC)?;
        let staging = gpu.staging((chunk * stride * 4) as u64)?;
        let mut words = Vec::with_capacity(chunk * fw);
        let mut removed = 0;
        for part in keys.chunks(chunk) {
            words.clear();
            for &k in part {
                self.push_field(&mut words, k);
            }
            gpu.write(&items, &words)?;
            let mut w = gpu.work(self.slot_bytes)?;
            let b = self.bind(Some(&items), None, Some(&results));
            // Locate every key first, then write the tombstones: no
            // invocation reads a slot another one is overwriting.
            w.dispatch(Kernel::Locate, self.params(part.len()), &b)?;
            w.dispatch(Kernel::Tombstone, self.params(part.len()), &b)?;
            w.copy(&results, &staging, (part.len() * stride * 4) as u64);
            let r = w.finish_and_read(&staging, part.len() * stride)?;
            let n = r.chunks_exact(stride).filter(|c| c[0] == 1).count() as u64;
            self.live -= n;
            self.tombstones += n;
            removed += n;
        }
        Ok(removed)
    }

    /// Every slot's words, read back.
    fn read_all(&self) -> Result<Vec<u32>> {
        let bytes = self.buffer.size();
        let staging = self.gpu.staging(bytes)?;
        let mut w = self.gpu.work(self.slot_bytes)?;
        w.copy(&self.buffer, &staging, bytes);
        w.finish_and_read(&staging, (bytes / 4) as usize)
    }

    /// (slot, key bits, value bits) of every full slot.
    fn pairs(&self) -> Result<Vec<(u64, u64, u64)>> {
        let fw = self.field_words();
        let empty = if fw == 1 { <u64 as Word>::empty_key_field() } else { <u128 as Word>::empty_key_field() };
        let tomb = if fw == 1 { <u64 as Word>::tombstone_key_field() } else { <u128 as Word>::tombstone_key_field() };
        let words = self.read_all()?;
        Ok(words
            .chunks_exact(2 * fw)
            .enumerate()
            .filter_map(|(s, w)| {
                let k = Self::field(&w[..fw]);
                (k != empty && k != tomb).then(|| (s as u64, k, Self::field(&w[fw..])))
            })
            .collect())
    }
}

/// A hash table on a wgpu adapter.
pub struct WgpuTable<K: Key, V: Value> {
    slots: Slots,
    /// Values of the keys stored out of band ([`Key::EMPTY`], [`Key::TOMBSTONE`]).
    specials: [Option<V>; 2],
    config: Config,
    device: Device,
    _types: PhantomData<K>,
}

impl<K: Key, V: Value> WgpuTable<K, V> {
    /// An empty table with `config.slots` slots on `device`
    /// ([`Device::Wgpu`] or [`Device::WgpuAdapter`]).
    pub fn new(device: Device, config: Config) -> Result<Self> {
        let index = match device {
            Device::Wgpu => None,
            Device::WgpuAdapter(i) => Some(i),
            other => return Err(Error::Unsupported(format!("{other} is not a wgpu device"))),
        };
        let gpu = gpu::gpu(index)?;
        check_scheme(config.scheme)?;
        let slots = Slots::new(gpu, &config, W::<K, V>::BYTES)?;
        Ok(WgpuTable { slots, specials: [None, None], config, device, _types: PhantomData })
    }

    /// The adapter the table lives on.
    pub fn adapter(&self) -> wgpu::AdapterInfo {
        self.slots.gpu.info.clone()
    }

    /// Applies out-of-band keys in batch order, as one thread would.
    fn apply_specials(&mut self, events: &[(usize, V)], mode: InsertMode, out: &mut RawInsert) {
        for &(s, v) in events {
            super::apply_special(&mut self.specials[s], v, mode, out);
        }
    }
}

fn reduce_bits<V: Value>(op: Reduce, stored: u64, new: u64) -> u64 {
    V::reduce(op, V::from_bits(stored), V::from_bits(new)).to_bits()
}

impl<K: Key, V: Value> Backend<K, V> for WgpuTable<K, V> {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn device(&self) -> Device {
        self.device
    }
    fn scheme(&self) -> Scheme {
        self.config.scheme
    }
    fn slots(&self) -> u64 {
        self.slots.slots()
    }
    fn len(&self) -> u64 {
        self.slots.live + self.out_of_band()
    }
    fn used(&self) -> u64 {
        self.len() + self.slots.tombstones
    }
    fn out_of_band(&self) -> u64 {
        self.specials.iter().filter(|s| s.is_some()).count() as u64
    }
    fn tombstones(&self) -> u64 {
        self.slots.tombstones
    }

    fn insert(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        // Fold the batch's duplicates: one entry per distinct in-slot key,
        // with how many positions hold it and the value they leave.
        let mut index: FastMap<u32> = FastMap::default();
        let (mut ukeys, mut uvals, mut count) = (Vec::new(), Vec::new(), Vec::new());
        let mut which = Vec::with_capacity(keys.len());
        let mut events = Vec::new();
        for (&k, &v) in keys.iter().zip(values) {
            if let Some(s) = special_index(k) {
                events.push((s, v));
                which.push(NONE);
                continue;
            }
            match index.entry(k.to_u64()) {
                Entry::Occupied(e) => {
                    let u = *e.get() as usize;
                    count[u] += 1;
                    uvals[u] = match mode {
                        InsertMode::Assign => v.to_bits(),
                        InsertMode::IfAbsent => uvals[u],
                        InsertMode::Apply(op) => reduce_bits::<V>(op, uvals[u], v.to_bits()),
                    };
                    which.push(u as u32);
                }
                Entry::Vacant(e) => {
                    e.insert(ukeys.len() as u32);
                    which.push(ukeys.len() as u32);
                    ukeys.push(k.to_u64());
                    uvals.push(v.to_bits());
                    count.push(1u64);
                }
            }
        }
        drop(index);

        // Keys already stored get their new value; the others need a slot.
        let found = self.slots.locate(&ukeys)?;
        let mut updates = Vec::new();
        let mut new = Vec::new();
        let mut new_of = Vec::new();
        for (u, f) in found.iter().enumerate() {
            match (*f, mode) {
                (Some((s, _)), InsertMode::Assign) => updates.push((s, uvals[u])),
                (Some(_), InsertMode::IfAbsent) => {}
                (Some((s, old)), InsertMode::Apply(op)) => updates.push((s, reduce_bits::<V>(op, old, uvals[u]))),
                (None, _) => {
                    new.push((ukeys[u], uvals[u]));
                    new_of.push(u);
                }
            }
        }
        let placed = self.slots.place(&updates, &new)?;

        let mut out = RawInsert::default();
        let mut refused = vec![false; ukeys.len()];
        for (u, f) in found.iter().enumerate() {
            if f.is_some() {
                out.existing += count[u];
            }
        }
        for (&u, &s) in new_of.iter().zip(&placed) {
            if s == NONE {
                refused[u] = true;
            } else {
                out.inserted += 1;
                out.existing += count[u] - 1;
            }
        }
        // A refused key is refused at every position that holds it, ascending.
        out.failed = which.iter().enumerate().filter(|&(_, &u)| u != NONE && refused[u as usize]).map(|(i, _)| i).collect();
        self.apply_specials(&events, mode, &mut out);
        Ok(out)
    }

    fn find(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        let in_slots: Vec<u64> = keys.iter().filter(|k| special_index(**k).is_none()).map(|k| k.to_u64()).collect();
        let mut located = self.slots.locate(&in_slots)?.into_iter();
        let mut hits = 0;
        for (i, &k) in keys.iter().enumerate() {
            let r = match special_index(k) {
                Some(s) => self.specials[s],
                None => located.next().flatten().map(|(_, v)| V::from_bits(v)),
            };
            values[i] = r.unwrap_or(V::from_bits(0));
            found[i] = r.is_some();
            hits += r.is_some() as u64;
        }
        Ok(hits)
    }

    fn contains(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        let mut values = vec![V::from_bits(0); keys.len()];
        self.find(keys, &mut values, found)
    }

    fn erase(&mut self, keys: &[K]) -> Result<u64> {
        let mut seen: FastMap<()> = FastMap::default();
        let mut distinct = Vec::new();
        let mut hit_specials = [false; 2];
        for &k in keys {
            match special_index(k) {
                Some(s) => hit_specials[s] = true,
                None => {
                    if seen.insert(k.to_u64(), ()).is_none() {
                        distinct.push(k.to_u64());
                    }
                }
            }
        }
        let mut removed = self.slots.erase(&distinct)?;
        for (hit, slot) in hit_specials.into_iter().zip(self.specials.iter_mut()) {
            if hit && slot.take().is_some() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn clear(&mut self) -> Result<()> {
        self.slots.reset()?;
        self.specials = [None, None];
        Ok(())
    }

    fn rehash(&mut self, slots: u64) -> Result<()> {
        let config = Config { slots, ..self.config };
        let pairs = self.slots.pairs()?;
        // The new slots are allocated before anything changes; the old ones
        // stay the table's until every key has found a place.
        let mut fresh = Slots::new(self.slots.gpu.clone(), &config, self.slots.slot_bytes)?;
        let new: Vec<(u64, u64)> = pairs.iter().map(|&(_, k, v)| (k, v)).collect();
        let placed = fresh.place(&[], &new)?;
        let unplaced = placed.iter().filter(|&&s| s == NONE).count() as u64;
        if unplaced > 0 {
            return Err(Error::RehashFailed { slots, unplaced });
        }
        self.slots = fresh;
        self.config = config;
        Ok(())
    }

    fn export(&self) -> Result<(Vec<K>, Vec<V>)> {
        let pairs = self.slots.pairs()?;
        let mut keys = Vec::with_capacity(pairs.len() + 2);
        let mut values = Vec::with_capacity(pairs.len() + 2);
        for (_, k, v) in pairs {
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
        let spb = (BUCKET_BYTES / self.slots.slot_bytes) as u64;
        let p = self.slots.probe;
        Ok(self.slots.pairs()?.into_iter().fold((0, 0), |(sum, max), (s, k, _)| {
            let d = p.displacement(k, s / spb);
            (sum + d, max.max(d))
        }))
    }
}
