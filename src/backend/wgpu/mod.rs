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
    async fn new(gpu: Arc<Gpu>, config: &Config, slot_bytes: usize) -> Result<Slots> {
        let spb = (BUCKET_BYTES / slot_bytes) as u64;
        let buckets = config.slots / spb;
        let bytes = config.slots.saturating_mul(slot_bytes as u64);
        // The shaders index words with 32-bit integers.
        if bytes / 4 > u32::MAX as u64 {
            return Err(Error::OutOfMemory { bytes, device: gpu.name() });
        }
        let buffer = gpu.storage("gpuhash slots", bytes, wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST).await?;
        let occupied = gpu.storage("gpuhash occupied", config.slots.div_ceil(32) * 4, wgpu::BufferUsages::COPY_DST).await?;
        let probe = ProbeParams { buckets, seed: config.seed, limit: config.max_probe_buckets.clamp(1, buckets) };
        let mut s = Slots { gpu, buffer, occupied, slot_bytes, probe, live: 0, tombstones: 0 };
        s.reset().await?;
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
    async fn reset(&mut self) -> Result<()> {
        let mut w = self.gpu.work(self.slot_bytes).await?;
        let words = (self.buffer.size() / 4) as usize;
        w.dispatch(Kernel::FillEmpty, self.params(words), &self.bind(None, None, None)).await?;
        w.clear(&self.occupied);
        w.finish().await?;
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
    async fn locate(&self, keys: &[u64]) -> Result<Vec<Option<(u32, u64)>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let fw = self.field_words();
        let stride = 1 + fw;
        let chunk = self.chunk(keys.len());
        let gpu = &self.gpu;
        let items = gpu.storage("gpuhash keys", (chunk * fw * 4) as u64, wgpu::BufferUsages::COPY_DST).await?;
        let results = gpu.storage("gpuhash results", (chunk * stride * 4) as u64, wgpu::BufferUsages::COPY_SRC).await?;
        let staging = gpu.staging((chunk * stride * 4) as u64).await?;
        let mut out = Vec::with_capacity(keys.len());
        let mut words = Vec::with_capacity(chunk * fw);
        for part in keys.chunks(chunk) {
            words.clear();
            for &k in part {
                self.push_field(&mut words, k);
            }
            gpu.write(&items, &words).await?;
            let mut w = gpu.work(self.slot_bytes).await?;
            w.dispatch(Kernel::Locate, self.params(part.len()), &self.bind(Some(&items), None, Some(&results))).await?;
            w.copy(&results, &staging, (part.len() * stride * 4) as u64);
            let r = w.finish_and_read(&staging, part.len() * stride).await?;
            out.extend(r.chunks_exact(stride).map(|c| (c[0] != NONE).then(|| (c[0], Self::field(&c[1..])))));
        }
        Ok(out)
    }

    /// Writes `updates` (slot, value bits) into slots found by
    /// [`Slots::locate`], then places `new` (key, value bits): keys absent
    /// from the table and distinct. Returns each new key's slot, or
    /// [`NONE`] where it found no free slot within the probe limit.
    async fn place(&mut self, updates: &[(u32, u64)], new: &[(u64, u64)]) -> Result<Vec<u32>> {
        let fw = self.field_words();
        let n = updates.len().max(new.len());
        if n == 0 {
            return Ok(Vec::new());
        }
        let chunk = self.chunk(n);
        let gpu = self.gpu.clone();
        // Everything is allocated before the first write to the table.
        let items = gpu.storage("gpuhash keys", (chunk * fw * 4) as u64, wgpu::BufferUsages::COPY_DST).await?;
        let values = gpu.storage("gpuhash values", (chunk * fw * 4) as u64, wgpu::BufferUsages::COPY_DST).await?;
        let (results, staging) = if new.is_empty() {
            (None, None)
        } else {
            let bytes = (chunk.min(new.len()) * 4) as u64;
            (
                Some(gpu.storage("gpuhash results", bytes, wgpu::BufferUsages::COPY_SRC).await?),
                Some(gpu.staging(bytes).await?),
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
            gpu.write(&items, &iw).await?;
            gpu.write(&values, &vw).await?;
            let mut w = gpu.work(self.slot_bytes).await?;
            w.dispatch(Kernel::StoreValues, self.params(part.len()), &self.bind(Some(&items), Some(&values), None)).await?;
            w.finish().await?;
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
                gpu.write(&items, &iw).await?;
                gpu.write(&values, &vw).await?;
                let mut w = gpu.work(self.slot_bytes).await?;
                w.dispatch(Kernel::Claim, self.params(part.len()), &self.bind(Some(&items), Some(&values), Some(results))).await?;
                w.copy(results, staging, (part.len() * 4) as u64);
                let r = w.finish_and_read(staging, part.len()).await?;
                self.live += r.iter().filter(|&&s| s != NONE).count() as u64;
                placed.extend(r);
            }
        }
        Ok(placed)
    }

    /// Erases distinct keys (never a marker); returns how many were stored.
    async fn erase(&mut self, keys: &[u64]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        let fw = self.field_words();
        let stride = 1 + fw;
        let chunk = self.chunk(keys.len());
        let gpu = self.gpu.clone();
        let items = gpu.storage("gpuhash keys", (chunk * fw * 4) as u64, wgpu::BufferUsages::COPY_DST).await?;
        let results = gpu.storage("gpuhash results", (chunk * stride * 4) as u64, wgpu::BufferUsages::COPY_SRC).await?;
        let staging = gpu.staging((chunk * stride * 4) as u64).await?;
        let mut words = Vec::with_capacity(chunk * fw);
        let mut removed = 0;
        for part in keys.chunks(chunk) {
            words.clear();
            for &k in part {
                self.push_field(&mut words, k);
            }
            gpu.write(&items, &words).await?;
            let mut w = gpu.work(self.slot_bytes).await?;
            let b = self.bind(Some(&items), None, Some(&results));
            // Locate every key first, then write the tombstones: no
            // invocation reads a slot another one is overwriting.
            w.dispatch(Kernel::Locate, self.params(part.len()), &b).await?;
            w.dispatch(Kernel::Tombstone, self.params(part.len()), &b).await?;
            w.copy(&results, &staging, (part.len() * stride * 4) as u64);
            let r = w.finish_and_read(&staging, part.len() * stride).await?;
            let n = r.chunks_exact(stride).filter(|c| c[0] == 1).count() as u64;
            self.live -= n;
            self.tombstones += n;
            removed += n;
        }
        Ok(removed)
    }

    /// Every slot's words, read back.
    async fn read_all(&self) -> Result<Vec<u32>> {
        let bytes = self.buffer.size();
        let staging = self.gpu.staging(bytes).await?;
        let mut w = self.gpu.work(self.slot_bytes).await?;
        w.copy(&self.buffer, &staging, bytes);
        w.finish_and_read(&staging, (bytes / 4) as usize).await
    }

    /// (slot, key bits, value bits) of every full slot.
    async fn pairs(&self) -> Result<Vec<(u64, u64, u64)>> {
        let fw = self.field_words();
        let empty = if fw == 1 { <u64 as Word>::empty_key_field() } else { <u128 as Word>::empty_key_field() };
        let tomb = if fw == 1 { <u64 as Word>::tombstone_key_field() } else { <u128 as Word>::tombstone_key_field() };
        let words = self.read_all().await?;
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
        pollster::block_on(Self::new_async(device, config))
    }

    /// [`WgpuTable::new`], awaiting the adapter and the GPU instead of
    /// blocking (a browser's WebGPU can only be awaited). The `_async`
    /// methods are the table's one implementation; the [`Backend`] methods
    /// that [`crate::HashTable`] calls block on them. They check their
    /// arguments' lengths but do not grow the table: growth is the table
    /// API's, so callers of these watch [`Backend::used`] themselves.
    pub async fn new_async(device: Device, config: Config) -> Result<Self> {
        let index = match device {
            Device::Wgpu => None,
            Device::WgpuAdapter(i) => Some(i),
            other => return Err(Error::Unsupported(format!("{other} is not a wgpu device"))),
        };
        let gpu = gpu::gpu_async(index).await?;
        check_scheme(config.scheme)?;
        let slots = Slots::new(gpu, &config, W::<K, V>::BYTES).await?;
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

    /// The bulk insert of [`Backend::insert`], awaiting the GPU instead of
    /// blocking on it (as a browser must): the same code, which the
    /// blocking form runs to completion. Checks that `values` is as long as
    /// `keys`.
    pub async fn insert_async(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        check_len("insert", keys.len(), values.len(), "values")?;
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
        let found = self.slots.locate(&ukeys).await?;
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
        let placed = self.slots.place(&updates, &new).await?;

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

    /// [`Backend::find`], awaiting the GPU. Checks the outputs' lengths.
    pub async fn find_async(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        check_len("find", keys.len(), values.len(), "value outputs")?;
        check_len("find", keys.len(), found.len(), "found outputs")?;
        let in_slots: Vec<u64> = keys.iter().filter(|k| special_index(**k).is_none()).map(|k| k.to_u64()).collect();
        let mut located = self.slots.locate(&in_slots).await?.into_iter();
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

    /// [`Backend::erase`], awaiting the GPU.
    pub async fn erase_async(&mut self, keys: &[K]) -> Result<u64> {
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
        let mut removed = self.slots.erase(&distinct).await?;
        for (hit, slot) in hit_specials.into_iter().zip(self.specials.iter_mut()) {
            if hit && slot.take().is_some() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// [`Backend::clear`], awaiting the GPU.
    pub async fn clear_async(&mut self) -> Result<()> {
        self.slots.reset().await?;
        self.specials = [None, None];
        Ok(())
    }

    /// [`Backend::rehash`], awaiting the GPU.
    pub async fn rehash_async(&mut self, slots: u64) -> Result<()> {
        let config = Config { slots, ..self.config };
        let pairs = self.slots.pairs().await?;
        // The new slots are allocated before anything changes; the old ones
        // stay the table's until every key has found a place.
        let mut fresh = Slots::new(self.slots.gpu.clone(), &config, self.slots.slot_bytes).await?;
        let new: Vec<(u64, u64)> = pairs.iter().map(|&(_, k, v)| (k, v)).collect();
        let placed = fresh.place(&[], &new).await?;
        let unplaced = placed.iter().filter(|&&s| s == NONE).count() as u64;
        if unplaced > 0 {
            return Err(Error::RehashFailed { slots, unplaced });
        }
        self.slots = fresh;
        self.config = config;
        Ok(())
    }

    /// [`Backend::export`], awaiting the GPU.
    pub async fn export_async(&self) -> Result<(Vec<K>, Vec<V>)> {
        let pairs = self.slots.pairs().await?;
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

    async fn displacement_async(&self) -> Result<(u64, u64)> {
        let spb = (BUCKET_BYTES / self.slots.slot_bytes) as u64;
        let p = self.slots.probe;
        Ok(self.slots.pairs().await?.into_iter().fold((0, 0), |(sum, max), (s, k, _)| {
            let d = p.displacement(k, s / spb);
            (sum + d, max.max(d))
        }))
    }
}

fn check_len(op: &'static str, keys: usize, other: usize, what: &'static str) -> Result<()> {
    if keys == other {
        Ok(())
    } else {
        Err(Error::LengthMismatch { op, keys, other, what })
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
        pollster::block_on(self.insert_async(keys, values, mode))
    }

    fn find(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        pollster::block_on(self.find_async(keys, values, found))
    }

    fn contains(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        let mut values = vec![V::from_bits(0); keys.len()];
        self.find(keys, &mut values, found)
    }

    fn erase(&mut self, keys: &[K]) -> Result<u64> {
        pollster::block_on(self.erase_async(keys))
    }

    fn clear(&mut self) -> Result<()> {
        pollster::block_on(self.clear_async())
    }

    fn rehash(&mut self, slots: u64) -> Result<()> {
        pollster::block_on(self.rehash_async(slots))
    }

    fn export(&self) -> Result<(Vec<K>, Vec<V>)> {
        pollster::block_on(self.export_async())
    }

    fn displacement(&self) -> Result<(u64, u64)> {
        pollster::block_on(self.displacement_async())
    }
}
