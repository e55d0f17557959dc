//! The wgpu backend ([`Device::Wgpu`]): the shared slot layout in a GPU
//! storage buffer, driven by WGSL compute shaders (`kernels/wgsl/`) through
//! wgpu, so it runs wherever wgpu does (Vulkan, Metal, DX12; browser
//! WebGPU) and on CPU implementations such as Mesa's lavapipe.
//!
//! Same slot layout, hash and probe order as the CPU backend, so the CPU
//! backend is its oracle. [`Scheme::Linear`], [`Scheme::SlabList`],
//! [`Scheme::Cuckoo`] and [`Scheme::TwoLevel`] (the CPU's candidate
//! buckets, stash, regions and overflow; see `cuckoo.rs`) are implemented
//! ([`SCHEMES`]); [`Device::check_scheme`] reports the others as
//! [`Error::Unsupported`].
//!
//! **One submission per call.** A bulk call uploads its keys (or takes the
//! caller's GPU buffers: [`WgpuTable::find_buffers`] and the like), records
//! every dispatch in one command buffer and reads back a few counters; a
//! second, small read-back lists the positions to report only when there are
//! some (refused keys, keys equal to a slot marker).
//!
//! **32-bit atomics only** (what browsers offer). A slot is two or four
//! 32-bit words, so no single atomic publishes a whole pair:
//!
//! * 8-byte slots (32-bit keys and values) claim a key with one
//!   compare-exchange on its key word; duplicates of a batch meet there.
//!   Assign leaves one of the batch's values, if-absent the first placed,
//!   and apply folds every value in with atomics.
//! * 16-byte slots first elect one representative per distinct key of the
//!   batch (a table of item indices, compared through the caller's key
//!   array, which no one writes); representatives look their key up and
//!   place absent ones through a one-bit-per-slot occupancy bitmap, never
//!   reading key words another invocation may be writing; then every item
//!   folds its value into its representative's slot.
//! * Cuckoo and two-level tables claim directly where the slot width
//!   allows (8-byte slots, or 64-bit atomics) and elect representatives
//!   only among the keys that found every candidate full, which their
//!   second phase places one invocation per key (`cuckoo.rs`).
//!
//! **64-bit atomics where offered.** On an adapter with 64-bit integers and
//! atomics (Vulkan and DX12 on most GPUs; never a browser) a linear table's
//! 16-byte slots claim their key field whole with one 64-bit
//! compare-exchange, as 8-byte slots do with 32 bits: one pass per insert
//! instead of four (the cuckoo scheme's first phase likewise).
//! [`crate::Builder::wgpu_portable`] keeps a table on the
//! 32-bit path (the one a browser runs), and [`WgpuTable::atomics64`] says
//! which a table takes.
//!
//! **Subgroup operations where offered.** An insert-or-apply reduces every
//! copy of a key into one slot word; with skewed keys (zipf, a hot key)
//! those atomics queue on a few words. Where the adapter has subgroups,
//! the copies within a subgroup combine their values first and one atomic
//! reduces them (`kernels/wgsl/fold_subgroups.wgsl`).
//! [`WgpuTable::capabilities`] says what a table's kernels use.
//!
//! **Lookups read whole buckets.** The linear and cuckoo schemes' `find` and
//! `contains` load a bucket as two 16-byte vectors (one 32-byte sector)
//! rather than word by word through atomics, which fetched each word on
//! its own.
//!
//! Slab lists ([`Scheme::SlabList`], `slab_list.rs`) keep their `next`
//! words and pool counters after the occupancy bits; a claim that meets a
//! full chain with the pool used up is decided by the scheme's second pass
//! over such items, once every slab handed out is linked, so no invocation
//! waits for another and refusals stay exact. The pool counters come back
//! with each insert's counters ([`WgpuTable::slab_pool`]).
//!
//! Insert-or-apply folds on the GPU where one hardware atomic does it: `u32`
//! sum, min and max, and the wrapping sums of every integer type (64-bit:
//! a carry between the two words). Float reductions (WGSL has no `f64`, and
//! no float atomics) and signed or 64-bit min and max are folded on the host
//! in batch order and stored with one assign, exactly as [`Value::reduce`]
//! does on the CPU: a compare-exchange loop on the GPU would cost n^2
//! attempts for a key that fills a batch.
//!
//! Keys equal to a slot marker are kept out of band on the host, as on the
//! CPU and CUDA backends. A full table refuses keys exactly: a key that
//! finds no free slot within the probe limit (the slab list: in its chain,
//! with the pool used up) is reported at every batch position that holds
//! it. Every loop is bounded by the probe limit or the table's size.

mod cuckoo;
mod gpu;
mod slab_list;

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use self::gpu::{Bindings, Gpu, Kernel, Params, Range, Work, MODE_APPLY, MODE_ASSIGN, MODE_IF_ABSENT, NONE, SPECIAL_BIT};
use super::{Backend, Config, InsertMode, RawInsert};
use crate::core::hash::{mix64, DEFAULT_SEED};
use crate::core::keys::{special_index, Key, Reduce, Value, ValueKind};
use crate::core::layout::{Word, BUCKET_BYTES};
use crate::core::probe::ProbeParams;
use crate::core::scheme::Scheme;
use crate::{Device, Error, Result};

pub use self::gpu::{
    adapter_info, adapters, offered, offers_atomics64, scheme_source, shader_source, Capabilities, Variant, BULK_SOURCE, COMMON_SOURCE, CUCKOO_SOURCE,
    CUCKOO_WIDE_SOURCE, FOLD_SOURCE, FOLD_SUBGROUPS_SOURCE, LINES_SOURCE, LINEAR_SOURCE, LINEAR_WIDE_SOURCE, SCHEMES, SLAB_LIST_SOURCE, WIDE_SOURCE,
};
pub use self::slab_list::SlabPool;
/// The wgpu crate this backend is built on, for callers who create the
/// buffers of [`WgpuTable::find_buffers`] and the like.
pub use wgpu;

/// Items per dispatch at most (the binding-size limit may lower it).
const MAX_CHUNK: usize = 1 << 24;
/// Items per submission of a host-slice call at most (buffer-size limits
/// may lower it): larger batches run as several submissions, in order.
const MAX_BATCH: usize = 1 << 28;

/// `Ok` if the default wgpu adapter (`None`) or adapter `index` can be
/// opened, or why not.
pub(crate) fn available(index: Option<usize>) -> Result<()> {
    gpu::gpu(index).map(|_| ())
}

/// `Ok` if the wgpu backend implements `scheme`.
pub(crate) fn check_scheme(scheme: Scheme) -> Result<()> {
    if gpu::SCHEMES.contains(&scheme) {
        return Ok(());
    }
    let have: Vec<String> = gpu::SCHEMES.iter().map(|s| format!("Scheme::{s:?}")).collect();
    Err(Error::Unsupported(format!("the wgpu backend implements {}; {scheme} is not supported on wgpu yet", have.join(", "))))
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

/// Work buffers a table keeps between calls (grown, never shrunk), so a
/// call allocates nothing once warm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Uploaded keys and values of a host-slice call.
    Keys,
    Values,
    /// Per item: find's values, or an insert's state between dispatches.
    Out,
    /// Per item: found flags, or the list of positions to report.
    Flags,
    /// Four counter words.
    Counters,
    /// The de-duplication table of 16-byte slots.
    Dedupe,
    /// Read-back buffer.
    Staging,
    /// Path words of the cuckoo placement's parallel rounds.
    Paths,
}

impl Role {
    const COUNT: usize = 8;
    fn usage(self) -> wgpu::BufferUsages {
        use wgpu::BufferUsages as U;
        match self {
            // Keys and values are read back where a piece of a GPU-buffer batch lists out-of-band keys.
            Role::Keys | Role::Values => U::STORAGE | U::COPY_DST | U::COPY_SRC,
            // The cuckoo placement reads its counts back from the de-duplication table.
            Role::Dedupe => U::STORAGE | U::COPY_DST | U::COPY_SRC,
            Role::Out | Role::Flags => U::STORAGE | U::COPY_SRC,
            Role::Counters => U::STORAGE | U::COPY_SRC | U::COPY_DST,
            Role::Staging => U::MAP_READ | U::COPY_DST,
            Role::Paths => U::STORAGE | U::COPY_DST,
        }
    }
}

#[derive(Default)]
struct Cache([Option<wgpu::Buffer>; Role::COUNT]);

/// The slot array on the device and the slot work on it, on raw bits (not
/// generic over the key and value types, so it is compiled once).
struct Slots {
    gpu: Arc<Gpu>,
    buffer: wgpu::Buffer,
    /// One bit per slot: set once the slot is not EMPTY (16-byte slots and
    /// cuckoo tables); then a scheme's own words (cuckoo: locks, stash mask;
    /// slab list: `slab_list::aux_words`).
    occupied: wgpu::Buffer,
    variant: Variant,
    probe: ProbeParams,
    /// Live keys held in slots.
    live: u64,
    /// Erased slots not yet reclaimed.
    tombstones: u64,
    /// The slab list's pool, read back with the counters of each call.
    pool: Option<SlabPool>,
    cache: Mutex<Cache>,
}

/// The counters one submission reads back (`kernels/wgsl/common.wgsl`).
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    /// Keys placed, found or erased.
    count: u32,
    /// Entries of the flags list.
    listed: u32,
    /// Out-of-band keys an erase met (bit 1 EMPTY, bit 2 TOMBSTONE).
    specials: u32,
    /// The slab list's pool counters (handed out, linked), read with them.
    pool: Option<[u32; 2]>,
}

impl Counters {
    fn from_words(w: &[u32]) -> Self {
        Counters { count: w[0], listed: w[1], specials: w[2], pool: None }
    }
}

const COUNTER_BYTES: u64 = 16;
/// Bytes of a flags list read back per copy at most, so reading it back
/// never needs a buffer as large as the batch.
const LIST_PIECE: u64 = 4 << 20;

impl Slots {
    async fn new(gpu: Arc<Gpu>, config: &Config, variant: Variant) -> Result<Slots> {
        let slot_bytes = variant.slot_bytes;
        let spb = (BUCKET_BYTES / slot_bytes) as u64;
        let buckets = config.slots / spb;
        let bytes = config.slots.saturating_mul(slot_bytes as u64);
        // The shaders index words with 32-bit integers.
        if bytes / 4 > u32::MAX as u64 {
            return Err(Error::OutOfMemory { bytes, device: gpu.name() });
        }
        let occupied_words = match variant.scheme {
            Scheme::Cuckoo | Scheme::TwoLevel => {
                // Representatives record a slot in GH_REP_SLOT's 30 bits.
                if config.slots >= REP_SLOTS {
                    return Err(Error::OutOfMemory { bytes, device: gpu.name() });
                }
                cuckoo::occupied_words(config.slots, buckets, variant.scheme == Scheme::TwoLevel)
            }
            _ => config.slots.div_ceil(32),
        };
        let buffer = gpu.storage("gpuhash slots", bytes, wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST).await?;
        let words = occupied_words + slab_list::aux_words(variant.scheme, buckets);
        let occupied = gpu.storage("gpuhash occupied", words * 4, wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC).await?;
        let probe = ProbeParams { buckets, seed: config.seed, limit: config.max_probe_buckets.clamp(1, buckets) };
        let pool = (variant.scheme == Scheme::SlabList).then(|| SlabPool::from_words(buckets, [0, 0]));
        let mut s = Slots { gpu, buffer, occupied, variant, probe, live: 0, tombstones: 0, pool, cache: Mutex::default() };
        s.reset().await?;
        Ok(s)
    }

    fn slots(&self) -> u64 {
        self.buffer.size() / self.variant.slot_bytes as u64
    }

    /// Whether inserts claim a key's slot with one compare-exchange (8-byte
    /// slots, or 16-byte ones with 64-bit atomics), else through
    /// representatives. A cuckoo table that claims directly still elects
    /// representatives among the keys its first phase defers.
    fn direct(&self) -> bool {
        self.variant.slot_bytes == 8 || self.variant.atomics64
    }

    /// Whether inserts need the de-duplication table.
    fn dedupes(&self) -> bool {
        !self.direct() || Variant::cuckoo(self.variant.scheme)
    }

    /// 32-bit words of a key or value field: 1 for 8-byte slots, else 2.
    fn field_words(&self) -> usize {
        self.variant.slot_bytes / 8
    }

    fn params(&self, n: usize) -> Params {
        Params {
            n: n as u32,
            buckets: self.probe.buckets as u32,
            limit: self.probe.limit as u32,
            seed: self.probe.seed,
            ..Params::default()
        }
    }

    fn bind(&self) -> Bindings<'_> {
        Bindings {
            slots: &self.buffer,
            occupied: &self.occupied,
            keys: None,
            values: None,
            out: None,
            flags: None,
            counters: None,
            scratch: None,
        }
    }

    /// A work buffer of at least `bytes`, kept for later calls.
    async fn cached(&self, role: Role, bytes: u64) -> Result<wgpu::Buffer> {
        let bytes = bytes.max(COUNTER_BYTES).next_multiple_of(4);
        let lock = || self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = lock().0[role as usize].as_ref().filter(|b| b.size() >= bytes) {
            return Ok(b.clone());
        }
        // Dropped first, so the old and new buffers never both take room.
        lock().0[role as usize] = None;
        // Room to grow by half again, within what one buffer may hold (a
        // work buffer is bound whole, so within what one binding holds).
        // Rounded down, as a limit such as 2^31 - 1 is no size a buffer can have.
        let room = if role == Role::Staging { self.gpu.limits.max_buffer_size } else { self.gpu.max_binding() } & !255;
        let size = (bytes + bytes / 2).next_multiple_of(256).min(room).max(bytes);
        let b = if role == Role::Staging {
            self.gpu.staging(size).await?
        } else {
            self.gpu.storage("gpuhash work", size, role.usage() & !wgpu::BufferUsages::STORAGE).await?
        };
        lock().0[role as usize] = Some(b.clone());
        Ok(b)
    }

    /// Every slot EMPTY, every occupancy bit clear.
    async fn reset(&mut self) -> Result<()> {
        let mut w = self.gpu.work(self.variant).await?;
        let words = (self.buffer.size() / 4) as usize;
        w.dispatch(Kernel::FillEmpty, self.params(words), &self.bind()).await?;
        w.clear_range(&self.occupied, self.occupied.size());
        w.finish().await?;
        self.live = 0;
        self.tombstones = 0;
        self.pool = self.pool.map(|_| SlabPool::from_words(self.probe.buckets, [0, 0]));
        Ok(())
    }

    /// Items one dispatch takes: every per-item binding within the limit,
    /// and a multiple of 256 so that every chunk's offset is aligned.
    fn chunk(&self, n: usize) -> usize {
        let widest = 4 * self.variant.key_words.max(self.variant.value_words).max(2) as u64;
        let by_limit = (self.gpu.max_binding() / widest) as usize;
        let c = by_limit.min(MAX_CHUNK) / 256 * 256;
        n.min(c.max(256)).max(1)
    }

    /// `(first item, items)` of each dispatch over `n` items.
    fn chunks(&self, n: usize) -> impl Iterator<Item = (usize, usize)> {
        let c = self.chunk(n);
        (0..n).step_by(c.max(1)).map(move |first| (first, c.min(n - first)))
    }

    /// Records a lookup of `n` keys: found flags into `found` (one word per
    /// key), values into `values` if given, hits into counters[0].
    #[allow(clippy::too_many_arguments)]
    async fn record_find(
        &self,
        w: &mut Work<'_>,
        keys: &wgpu::Buffer,
        n: usize,
        values: Option<&wgpu::Buffer>,
        found: &wgpu::Buffer,
        counters: &wgpu::Buffer,
        specials: (u32, [u64; 2]),
    ) -> Result<()> {
        let v = self.variant;
        w.clear_range(counters, COUNTER_BYTES);
        for (first, len) in self.chunks(n) {
            let b = Bindings {
                keys: Some(Range::items(keys, first, len, v.key_words)),
                out: values.map(|o| Range::items(o, first, len, v.value_words)),
                flags: Some(Range::items(found, first, len, 1)),
                counters: Some(Range::all(counters)),
                ..self.bind()
            };
            let p = Params {
                mode: values.is_some() as u32,
                specials: specials.0,
                special_values: specials.1,
                ..self.params(len)
            };
            w.dispatch(Kernel::Find, p, &b).await?;
        }
        Ok(())
    }

    /// Records an insert of `n` pairs (`kind`: the value type's code). The
    /// flags list (`list`, room for `n` entries) receives the positions of
    /// refused keys and, with [`SPECIAL_BIT`], of out-of-band ones;
    /// counters[0] the keys placed.
    #[allow(clippy::too_many_arguments)]
    async fn record_insert(
        &self,
        w: &mut Work<'_>,
        keys: &wgpu::Buffer,
        values: &wgpu::Buffer,
        n: usize,
        mode: u32,
        op: Reduce,
        kind: ValueKind,
        list: &wgpu::Buffer,
        counters: &wgpu::Buffer,
    ) -> Result<()> {
        let v = self.variant;
        let per_chunk = self.chunk(n);
        let out = self.cached(Role::Out, per_chunk as u64 * 4).await?;
        let dedupe = if self.dedupes() {
            Some(self.cached(Role::Dedupe, dedupe_entries(per_chunk) as u64 * 4).await?)
        } else {
            None
        };
        let placement = match v.scheme {
            Scheme::Cuckoo | Scheme::TwoLevel => Some((
                self.cached(Role::Paths, cuckoo::path_bytes(per_chunk)).await?,
                self.cached(Role::Staging, 4).await?,
            )),
            _ => None,
        };
        w.clear_range(counters, COUNTER_BYTES);
        for (first, len) in self.chunks(n) {
            let b = Bindings {
                keys: Some(Range::items(keys, first, len, v.key_words)),
                values: Some(Range::items(values, first, len, v.value_words)),
                out: Some(Range::items(&out, 0, len, 1)),
                flags: Some(Range::all(list)),
                counters: Some(Range::all(counters)),
                scratch: dedupe.as_ref().map(|d| Range::items(d, 0, dedupe_entries(len), 1)),
                ..self.bind()
            };
            let p = Params {
                mode,
                op: op.code(),
                kind: kind.code(),
                base: first as u32,
                mask: dedupe_entries(len) as u32 - 1,
                ..self.params(len)
            };
            if self.direct() {
                let kernel = if v.atomics64 { Kernel::InsertWide } else { Kernel::InsertDirect };
                self.dispatch_passes(w, kernel, p, &b).await?;
                if mode == MODE_APPLY {
                    w.dispatch(Kernel::Fold, p, &b).await?;
                }
            }
            if let Some(d) = &dedupe {
                w.clear_range(d, dedupe_entries(len) as u64 * 4);
                let passes: &[Kernel] = if self.direct() { &[Kernel::DedupePending] } else { &[Kernel::Dedupe, Kernel::LocateReps, Kernel::ClaimReps] };
                for &k in passes {
                    self.dispatch_passes(w, k, p, &b).await?;
                }
                let mut pending = true;
                if let Some((paths, staging)) = &placement {
                    pending = cuckoo::place_pending(w, &cuckoo::Placement { scratch: d, paths, staging }, p, &b).await?;
                }
                // Items a direct first phase settled are done with.
                if pending || !self.direct() {
                    w.dispatch(Kernel::Settle, p, &b).await?;
                }
            }
        }
        Ok(())
    }

    /// Records `kernel`, then the scheme's later passes after it, if any.
    async fn dispatch_passes(&self, w: &mut Work<'_>, kernel: Kernel, p: Params, b: &Bindings<'_>) -> Result<()> {
        w.dispatch(kernel, p, b).await?;
        for &later in slab_list::later_passes(self.variant.scheme, kernel) {
            w.dispatch(later, p, b).await?;
        }
        Ok(())
    }

    /// Records an erase of `n` keys: counters[0] the keys erased, counters[2]
    /// the out-of-band keys met.
    async fn record_erase(&self, w: &mut Work<'_>, keys: &wgpu::Buffer, n: usize, counters: &wgpu::Buffer) -> Result<()> {
        let v = self.variant;
        let per_chunk = self.chunk(n);
        let located = v.slot_bytes != 8 || Variant::cuckoo(v.scheme);
        let out = if located { Some(self.cached(Role::Out, per_chunk as u64 * 4).await?) } else { None };
        w.clear_range(counters, COUNTER_BYTES);
        for (first, len) in self.chunks(n) {
            let b = Bindings {
                keys: Some(Range::items(keys, first, len, v.key_words)),
                out: out.as_ref().map(|o| Range::items(o, 0, len, 1)),
                counters: Some(Range::all(counters)),
                ..self.bind()
            };
            if out.is_none() {
                w.dispatch(Kernel::EraseDirect, self.params(len), &b).await?;
            } else {
                // Every slot is located before any is released: a reader
                // never meets a two-word key half turned into a tombstone
                // (or, on the cuckoo schemes, a slot half emptied).
                w.dispatch(Kernel::EraseLocate, self.params(len), &b).await?;
                w.dispatch(Kernel::EraseRelease, self.params(len), &b).await?;
            }
        }
        Ok(())
    }

    /// Submits `w` after copying the counters back (with the slab list's
    /// pool counters), and reads them.
    async fn finish_counters(&self, mut w: Work<'_>, counters: &wgpu::Buffer) -> Result<Counters> {
        let staging = self.cached(Role::Staging, COUNTER_BYTES + 8).await?;
        w.copy(counters, &staging, COUNTER_BYTES);
        if self.pool.is_some() {
            w.copy_range(&self.occupied, self.aux_offset() + self.probe.buckets * 4, &staging, COUNTER_BYTES, 8);
        }
        let extra = if self.pool.is_some() { 2 } else { 0 };
        let words = w.finish_and_read(&staging, (COUNTER_BYTES / 4) as usize + extra).await?;
        let mut c = Counters::from_words(&words);
        if self.pool.is_some() {
            c.pool = Some([words[4], words[5]]);
        }
        Ok(c)
    }

    /// Byte offset of the scheme's words in `occupied`: after one bit per slot.
    fn aux_offset(&self) -> u64 {
        self.slots().div_ceil(32) * 4
    }

    /// The slab list's `next` words, one per slab, read back.
    async fn read_next(&self) -> Result<Vec<u32>> {
        let bytes = self.probe.buckets * 4;
        let staging = self.gpu.staging(bytes).await?;
        let mut w = self.gpu.work(self.variant).await?;
        w.copy_range(&self.occupied, self.aux_offset(), &staging, 0, bytes);
        w.finish_and_read(&staging, self.probe.buckets as usize).await
    }

    /// The first `len` entries of a flags list, sorted (batch order), read
    /// back in pieces through the staging buffer (which an insert allocates
    /// before it changes the table).
    async fn read_list(&self, list: &wgpu::Buffer, len: u32) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(len as usize);
        let total = len as u64 * 4;
        let mut at = 0;
        while at < total {
            let staging = self.cached(Role::Staging, (total - at).min(LIST_PIECE)).await?;
            let bytes = (total - at).min(staging.size());
            let mut w = self.gpu.work(self.variant).await?;
            w.copy_range(list, at, &staging, 0, bytes);
            out.extend(w.finish_and_read(&staging, (bytes / 4) as usize).await?);
            at += bytes;
        }
        out.sort_unstable_by_key(|e| e & !SPECIAL_BIT);
        Ok(out)
    }

    /// Allocates the work buffers of GPU-buffer calls of up to `n` keys.
    async fn reserve(&self, n: usize) -> Result<()> {
        let c = self.chunk(n) as u64;
        self.cached(Role::Flags, n as u64 * 4).await?;
        self.cached(Role::Out, c * 4).await?;
        self.cached(Role::Counters, COUNTER_BYTES).await?;
        self.cached(Role::Staging, (n as u64 * 4).min(LIST_PIECE)).await?;
        if self.dedupes() {
            self.cached(Role::Dedupe, dedupe_entries(c as usize) as u64 * 4).await?;
        }
        if Variant::cuckoo(self.variant.scheme) {
            self.cached(Role::Paths, cuckoo::path_bytes(c as usize)).await?;
        }
        Ok(())
    }

    /// Uploads `words` into the work buffer of `role`.
    async fn upload(&self, role: Role, words: &[u32]) -> Result<wgpu::Buffer> {
        let b = self.cached(role, words.len() as u64 * 4).await?;
        self.gpu.write(&b, words).await?;
        Ok(b)
    }

    /// Every slot's words, read back.
    async fn read_all(&self) -> Result<Vec<u32>> {
        let bytes = self.buffer.size();
        let staging = self.gpu.staging(bytes).await?;
        let mut w = self.gpu.work(self.variant).await?;
        w.copy(&self.buffer, &staging, bytes);
        w.finish_and_read(&staging, (bytes / 4) as usize).await
    }

    fn field(words: &[u32]) -> u64 {
        match words {
            [lo] => *lo as u64,
            [lo, hi, ..] => *lo as u64 | (*hi as u64) << 32,
            [] => 0,
        }
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

/// Entries of the de-duplication table for `n` items: a power of two of at
/// least twice as many, so probing always meets a free entry soon, and
/// room for the cuckoo placement's list (a header and one entry per item).
fn dedupe_entries(n: usize) -> usize {
    (2 * n.max(cuckoo::SCRATCH_HEADER)).next_power_of_two()
}

/// Slots a table whose inserts go through representatives may have: a
/// representative's state keeps its slot in 30 bits (`GH_REP_SLOT`), three
/// values of which are markers.
const REP_SLOTS: u64 = (1 << 30) - 3;

/// Words of `items` (keys or values), in the shaders' layout.
fn words_of<T: bytemuck::Pod>(items: &[T]) -> &[u32] {
    bytemuck::cast_slice(items)
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

/// Whether an insert-or-apply folds its values on the host before one
/// assign. The GPU folds with one hardware atomic per value: `u32` sum, min
/// and max, and wrapping sums of every integer type. The others (float
/// reductions, signed and 64-bit min and max) would need a compare-exchange
/// loop per value, which costs n^2 attempts when one key fills a batch.
fn folds_on_host<V: Value>(mode: InsertMode) -> bool {
    match mode {
        InsertMode::Apply(op) => match V::KIND {
            ValueKind::U32 => false,
            ValueKind::I32 | ValueKind::U64 | ValueKind::I64 => op != Reduce::Sum,
            ValueKind::F32 | ValueKind::F64 => true,
        },
        _ => false,
    }
}

fn mode_code(mode: InsertMode) -> (u32, Reduce) {
    match mode {
        InsertMode::Assign => (MODE_ASSIGN, Reduce::Sum),
        InsertMode::IfAbsent => (MODE_IF_ABSENT, Reduce::Sum),
        InsertMode::Apply(op) => (MODE_APPLY, op),
    }
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
        let gpu = gpu::gpu_async(gpu::adapter_index(device)?).await?;
        check_scheme(config.scheme)?;
        // The portable kernels are the browser's: no optional capability.
        let caps = if config.wgpu_portable { Capabilities::default() } else { gpu.caps };
        let slots = Slots::new(gpu.clone(), &config, Variant::of::<K, V>(config.scheme, caps)).await?;
        Ok(WgpuTable { slots, specials: [None, None], config, device, _types: PhantomData })
    }

    /// Whether this table's inserts claim 16-byte slots with 64-bit atomics
    /// (the adapter offers them, the table has 16-byte slots and was not
    /// built with [`crate::Builder::wgpu_portable`]).
    pub fn atomics64(&self) -> bool {
        self.slots.variant.atomics64
    }

    /// The optional capabilities this table's kernels use: those the
    /// adapter offers (64-bit atomics only where the slots are 16 bytes),
    /// none if built with [`crate::Builder::wgpu_portable`].
    pub fn capabilities(&self) -> Capabilities {
        Capabilities { atomics64: self.slots.variant.atomics64, subgroups: self.slots.variant.subgroups }
    }

    /// The adapter the table lives on.
    pub fn adapter(&self) -> wgpu::AdapterInfo {
        self.slots.gpu.info.clone()
    }

    /// The wgpu device the table's buffers live on: create the buffers of
    /// [`WgpuTable::find_buffers`] and the like with it.
    pub fn wgpu_device(&self) -> &wgpu::Device {
        &self.slots.gpu.device
    }

    /// The queue the table submits its work to.
    pub fn wgpu_queue(&self) -> &wgpu::Queue {
        &self.slots.gpu.queue
    }

    /// Allocates the work buffers that GPU-buffer calls of up to `n` keys
    /// need (they are kept between calls), so that none of those calls
    /// allocates: for timing them, or to learn early that memory is short.
    pub fn reserve_work(&self, n: usize) -> Result<()> {
        // One submission's worth: a larger call goes piece by piece through
        // the same buffers, its pieces copied into the upload buffers.
        let piece = n.min(self.batch());
        pollster::block_on(async {
            self.slots.reserve(piece).await?;
            if n > piece {
                self.slots.cached(Role::Keys, piece as u64 * (K::BITS as u64 / 8)).await?;
                self.slots.cached(Role::Values, piece as u64 * (V::KIND.bits() as u64 / 8)).await?;
            }
            Ok(())
        })
    }

    /// A slab-list table's pool as its last insert left it (`None` for
    /// other schemes): the host's copy of the pool counters, read back with
    /// each insert's counters. Once a call returns, every slab handed out
    /// is linked into a chain.
    pub fn slab_pool(&self) -> Option<SlabPool> {
        self.slots.pool
    }

    /// The find specials parameter: which out-of-band keys are stored, and their values.
    fn special_params(&self) -> (u32, [u64; 2]) {
        let bits = self.specials.iter().enumerate().map(|(i, s)| (s.is_some() as u32) << i).sum();
        (bits, self.specials.map(|s| s.map_or(0, |v| v.to_bits())))
    }

    /// Applies out-of-band keys in batch order, as one thread would.
    fn apply_specials(&mut self, events: impl IntoIterator<Item = (usize, V)>, mode: InsertMode, out: &mut RawInsert) {
        for (s, v) in events {
            super::apply_special(&mut self.specials[s], v, mode, out);
        }
    }

    /// The bulk insert of [`Backend::insert`], awaiting the GPU instead of
    /// blocking on it (as a browser must): the same code, which the
    /// blocking form runs to completion. Checks that `values` is as long as
    /// `keys`.
    pub async fn insert_async(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        check_len("insert", keys.len(), values.len(), "values")?;
        if folds_on_host::<V>(mode) {
            return self.insert_folded(keys, values, mode).await;
        }
        self.insert_plain(keys, values, mode).await
    }

    /// An insert whose values fold on the GPU, in submissions of at most
    /// [`WgpuTable::batch`] pairs.
    async fn insert_plain(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        let mut total = RawInsert::default();
        for first in (0..keys.len()).step_by(self.batch()) {
            let end = (first + self.batch()).min(keys.len());
            let (k, v) = (&keys[first..end], &values[first..end]);
            let kb = self.slots.upload(Role::Keys, words_of(k)).await?;
            let vb = self.slots.upload(Role::Values, words_of(v)).await?;
            let (out, listed) = self.insert_on_gpu(&kb, &vb, k.len(), mode).await?;
            let specials: Vec<(usize, V)> = listed.iter().map(|&p| (special_index(k[p]).expect("listed as out of band"), v[p])).collect();
            self.finish_insert(out, specials, mode, first, &mut total);
        }
        Ok(total)
    }

    /// Items per insert submission: its uploads and its list of positions
    /// to report (a `u32` per item) are each bound whole.
    fn batch(&self) -> usize {
        let widest = (K::BITS.max(V::KIND.bits()) / 8).max(4) as u64;
        let by_size = ((self.slots.gpu.max_binding() & !255) / widest) as usize;
        by_size.clamp(256, MAX_BATCH)
    }

    /// Runs one insert submission over `n` pairs in GPU buffers. Returns the
    /// outcome for the keys held in slots (refused positions ascending) and
    /// the positions of out-of-band keys, ascending.
    async fn insert_on_gpu(
        &mut self,
        keys: &wgpu::Buffer,
        values: &wgpu::Buffer,
        n: usize,
        mode: InsertMode,
    ) -> Result<(RawInsert, Vec<usize>)> {
        if n == 0 {
            return Ok((RawInsert::default(), Vec::new()));
        }
        let s = &self.slots;
        let list = s.cached(Role::Flags, n as u64 * 4).await?;
        let counters = s.cached(Role::Counters, COUNTER_BYTES).await?;
        // Room to read the list back, taken before the table changes: an
        // insert that returns an error has stored nothing.
        s.cached(Role::Staging, (n as u64 * 4).min(LIST_PIECE)).await?;
        let (code, op) = mode_code(mode);
        let mut w = s.gpu.work(s.variant).await?;
        s.record_insert(&mut w, keys, values, n, code, op, V::KIND, &list, &counters).await?;
        let c = s.finish_counters(w, &counters).await?;
        if let Some(words) = c.pool {
            self.slots.pool = Some(SlabPool::from_words(self.slots.probe.buckets, words));
        }
        let s = &self.slots;
        let listed = s.read_list(&list, c.listed).await?;
        let (mut failed, mut specials) = (Vec::new(), Vec::new());
        for e in listed {
            let p = (e & !SPECIAL_BIT) as usize;
            if e & SPECIAL_BIT != 0 {
                specials.push(p);
            } else {
                failed.push(p);
            }
        }
        let inserted = c.count as u64;
        self.slots.live += inserted;
        let stored = (n - failed.len() - specials.len()) as u64;
        Ok((RawInsert { inserted, existing: stored - inserted, failed }, specials))
    }

    /// Adds one submission's outcome (`first`: its batch offset) and its
    /// out-of-band keys to `total`.
    fn finish_insert(&mut self, out: RawInsert, specials: Vec<(usize, V)>, mode: InsertMode, first: usize, total: &mut RawInsert) {
        total.inserted += out.inserted;
        total.existing += out.existing;
        total.failed.extend(out.failed.into_iter().map(|p| p + first));
        self.apply_specials(specials, mode, total);
    }

    /// Insert-or-apply of reductions WGSL cannot run (64-bit min and max,
    /// `f64`): the batch's duplicates are folded on the host in batch order,
    /// the keys stored are looked up, and one assign of the distinct keys
    /// stores the reduced values. Exactly [`Value::reduce`]'s results.
    async fn insert_folded(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        let InsertMode::Apply(op) = mode else { unreachable!("only insert-or-apply folds on the host") };
        // One entry per distinct in-slot key: how many positions hold it and
        // the reduction of their values.
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
                    uvals[u] = V::reduce(op, uvals[u], v);
                    which.push(u as u32);
                }
                Entry::Vacant(e) => {
                    e.insert(ukeys.len() as u32);
                    which.push(ukeys.len() as u32);
                    ukeys.push(k);
                    uvals.push(v);
                    count.push(1u64);
                }
            }
        }
        drop(index);
        let mut old = vec![V::from_bits(0); ukeys.len()];
        let mut found = vec![false; ukeys.len()];
        self.find_async(&ukeys, &mut old, &mut found).await?;
        for u in 0..ukeys.len() {
            if found[u] {
                uvals[u] = V::reduce(op, old[u], uvals[u]);
            }
        }
        let r = self.insert_plain(&ukeys, &uvals, InsertMode::Assign).await?;
        let mut refused = vec![false; ukeys.len()];
        for &u in &r.failed {
            refused[u] = true;
        }
        let stored: u64 = (0..ukeys.len()).filter(|&u| !refused[u]).map(|u| count[u]).sum();
        let mut out = RawInsert { inserted: r.inserted, existing: stored - r.inserted, failed: Vec::new() };
        // A refused key is refused at every position that holds it, ascending.
        out.failed = which.iter().enumerate().filter(|&(_, &u)| u != NONE && refused[u as usize]).map(|(i, _)| i).collect();
        self.apply_specials(events, mode, &mut out);
        Ok(out)
    }

    /// [`Backend::find`], awaiting the GPU. Checks the outputs' lengths.
    pub async fn find_async(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        check_len("find", keys.len(), values.len(), "value outputs")?;
        self.lookup(keys, Some(values), found).await
    }

    /// [`Backend::contains`], awaiting the GPU. Checks the output's length.
    pub async fn contains_async(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        self.lookup(keys, None, found).await
    }

    async fn lookup(&self, keys: &[K], mut values: Option<&mut [V]>, found: &mut [bool]) -> Result<u64> {
        check_len("find", keys.len(), found.len(), "found outputs")?;
        let s = &self.slots;
        let vw = V::KIND.bits() / 32;
        let mut hits = 0;
        for first in (0..keys.len()).step_by(self.batch()) {
            let k = &keys[first..(first + self.batch()).min(keys.len())];
            let n = k.len();
            let kb = s.upload(Role::Keys, words_of(k)).await?;
            let vb = match values {
                Some(_) => Some(s.cached(Role::Out, n as u64 * vw as u64 * 4).await?),
                None => None,
            };
            let fb = s.cached(Role::Flags, n as u64 * 4).await?;
            let counters = s.cached(Role::Counters, COUNTER_BYTES).await?;
            let (vbytes, fbytes) = (vb.as_ref().map_or(0, |_| n as u64 * vw as u64 * 4), n as u64 * 4);
            let staging = s.cached(Role::Staging, vbytes + fbytes + COUNTER_BYTES).await?;
            let mut w = s.gpu.work(s.variant).await?;
            s.record_find(&mut w, &kb, n, vb.as_ref(), &fb, &counters, self.special_params()).await?;
            if let Some(vb) = &vb {
                w.copy(vb, &staging, vbytes);
            }
            w.copy_at(&fb, &staging, vbytes, fbytes);
            w.copy_at(&counters, &staging, vbytes + fbytes, COUNTER_BYTES);
            let words = w.finish_and_read(&staging, ((vbytes + fbytes + COUNTER_BYTES) / 4) as usize).await?;
            let (vwords, rest) = words.split_at((vbytes / 4) as usize);
            if let Some(values) = values.as_deref_mut() {
                let out: &mut [V] = &mut values[first..first + n];
                bytemuck::cast_slice_mut::<V, u32>(out).copy_from_slice(vwords);
            }
            for (f, &w) in found[first..first + n].iter_mut().zip(&rest[..n]) {
                *f = w != 0;
            }
            hits += Counters::from_words(&rest[n..]).count as u64;
        }
        Ok(hits)
    }

    /// [`Backend::erase`], awaiting the GPU.
    pub async fn erase_async(&mut self, keys: &[K]) -> Result<u64> {
        let mut removed = 0;
        for first in (0..keys.len()).step_by(self.batch()) {
            let k = &keys[first..(first + self.batch()).min(keys.len())];
            let kb = self.slots.upload(Role::Keys, words_of(k)).await?;
            removed += self.erase_on_gpu(&kb, k.len()).await?;
        }
        Ok(removed)
    }

    /// One erase submission over `n` keys in a GPU buffer, out-of-band keys included.
    async fn erase_on_gpu(&mut self, keys: &wgpu::Buffer, n: usize) -> Result<u64> {
        if n == 0 {
            return Ok(0);
        }
        let s = &self.slots;
        let counters = s.cached(Role::Counters, COUNTER_BYTES).await?;
        let mut w = s.gpu.work(s.variant).await?;
        s.record_erase(&mut w, keys, n, &counters).await?;
        let c = s.finish_counters(w, &counters).await?;
        let erased = c.count as u64;
        self.slots.live -= erased;
        if self.config.scheme.erase_leaves_tombstones() {
            self.slots.tombstones += erased;
        }
        let mut removed = erased;
        for (i, slot) in self.specials.iter_mut().enumerate() {
            if c.specials & (1 << i) != 0 && slot.take().is_some() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Checks a caller's buffer: at least `n` items of `bytes_each`, usable as storage.
    fn check_buffer(op: &'static str, b: &wgpu::Buffer, n: usize, bytes_each: u64, what: &'static str) -> Result<()> {
        let held = (b.size() / bytes_each) as usize;
        if held < n {
            return Err(Error::LengthMismatch { op, keys: n, other: held, what });
        }
        if !b.usage().contains(wgpu::BufferUsages::STORAGE) {
            return Err(Error::Unsupported(format!("{op}: the {what} buffer needs BufferUsages::STORAGE")));
        }
        Ok(())
    }

    /// Looks up the first `n` keys of `keys` (a storage buffer of `K`) on
    /// the GPU: their values into `values` (`V` each; 0 where absent) and a
    /// `u32` flag each into `found` (1 found, 0 absent). Returns the hits.
    /// Nothing crosses to the host but one counter. The buffers must be
    /// this table's device's ([`WgpuTable::wgpu_device`]).
    ///
    /// ```no_run
    /// use gpuhash::backend::wgpu::wgpu;
    /// use gpuhash::backend::InsertMode;
    /// use gpuhash::Device;
    /// # fn main() -> gpuhash::Result<()> {
    /// let mut table = gpuhash::HashTable::<u32, u32>::new(Device::Wgpu, 1 << 10)?;
    /// let t = table.wgpu_mut().expect("a wgpu table");
    /// let storage = |bytes| {
    ///     t.wgpu_device().create_buffer(&wgpu::BufferDescriptor {
    ///         label: None,
    ///         size: bytes,
    ///         usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
    ///         mapped_at_creation: false,
    ///     })
    /// };
    /// let (keys, values, found) = (storage(12), storage(12), storage(12));
    /// t.wgpu_queue().write_buffer(&keys, 0, bytemuck::cast_slice(&[1u32, 2, 3]));
    /// t.wgpu_queue().write_buffer(&values, 0, bytemuck::cast_slice(&[10u32, 20, 30]));
    /// t.insert_buffers(&keys, &values, 3, InsertMode::Assign)?;
    /// assert_eq!(t.find_buffers(&keys, &values, &found, 3)?, 3);
    /// # Ok(()) }
    /// ```
    pub fn find_buffers(&self, keys: &wgpu::Buffer, values: &wgpu::Buffer, found: &wgpu::Buffer, n: usize) -> Result<u64> {
        pollster::block_on(self.find_buffers_async(keys, Some(values), found, n))
    }

    /// [`WgpuTable::find_buffers`] without values: only the found flags.
    pub fn contains_buffers(&self, keys: &wgpu::Buffer, found: &wgpu::Buffer, n: usize) -> Result<u64> {
        pollster::block_on(self.find_buffers_async(keys, None, found, n))
    }

    /// [`WgpuTable::find_buffers`] (`values: None`: contains), awaiting the GPU.
    pub async fn find_buffers_async(
        &self,
        keys: &wgpu::Buffer,
        values: Option<&wgpu::Buffer>,
        found: &wgpu::Buffer,
        n: usize,
    ) -> Result<u64> {
        Self::check_buffer("find", keys, n, K::BITS as u64 / 8, "keys")?;
        if let Some(v) = values {
            Self::check_buffer("find", v, n, V::KIND.bits() as u64 / 8, "value outputs")?;
        }
        Self::check_buffer("find", found, n, 4, "found outputs")?;
        if n == 0 {
            return Ok(0);
        }
        let s = &self.slots;
        let counters = s.cached(Role::Counters, COUNTER_BYTES).await?;
        let mut w = s.gpu.work(s.variant).await?;
        s.record_find(&mut w, keys, n, values, found, &counters, self.special_params()).await?;
        Ok(s.finish_counters(w, &counters).await?.count as u64)
    }

    /// Inserts the first `n` pairs of `keys` and `values` (storage buffers
    /// of `K` and `V`) with one submission, as [`Backend::insert`] does; it
    /// never grows the table. Keys equal to a slot marker and insert-or-apply
    /// reductions folded on the host (64-bit min and max, `f64`) read the
    /// buffers back; everything else stays on the GPU. A batch larger than
    /// one submission takes (a `u32` per item must fit one storage binding:
    /// 2^29 items under a 2 GiB binding limit) goes in pieces, each copied
    /// on the GPU first, for which the buffers need `BufferUsages::COPY_SRC`.
    pub fn insert_buffers(&mut self, keys: &wgpu::Buffer, values: &wgpu::Buffer, n: usize, mode: InsertMode) -> Result<RawInsert> {
        pollster::block_on(self.insert_buffers_async(keys, values, n, mode))
    }

    /// [`WgpuTable::insert_buffers`], awaiting the GPU.
    pub async fn insert_buffers_async(
        &mut self,
        keys: &wgpu::Buffer,
        values: &wgpu::Buffer,
        n: usize,
        mode: InsertMode,
    ) -> Result<RawInsert> {
        Self::check_buffer("insert", keys, n, K::BITS as u64 / 8, "keys")?;
        Self::check_buffer("insert", values, n, V::KIND.bits() as u64 / 8, "values")?;
        if n >= SPECIAL_BIT as usize {
            return Err(Error::Unsupported(format!("insert: {n} keys in one wgpu call; split the batch below 2^31")));
        }
        if folds_on_host::<V>(mode) {
            let (k, v) = (self.read_items::<K>(keys, n).await?, self.read_items::<V>(values, n).await?);
            return self.insert_async(&k, &v, mode).await;
        }
        // Batches larger than one submission takes go piece by piece, each
        // copied on the GPU into the table's upload buffers first.
        let piece = self.batch();
        let mut total = RawInsert::default();
        for first in (0..n).step_by(piece) {
            let len = piece.min(n - first);
            let part = if len == n { None } else { Some(self.copy_piece(keys, values, first, len).await?) };
            let (k, v) = part.as_ref().map_or((keys, values), |(k, v)| (k, v));
            let (out, listed) = self.insert_on_gpu(k, v, len, mode).await?;
            let mut specials = Vec::new();
            if !listed.is_empty() {
                let (k, v) = (self.read_items::<K>(k, len).await?, self.read_items::<V>(v, len).await?);
                specials = listed.iter().map(|&p| (special_index(k[p]).expect("listed as out of band"), v[p])).collect();
            }
            self.finish_insert(out, specials, mode, first, &mut total);
        }
        Ok(total)
    }

    /// Items `first..first + len` of `keys` and `values` copied on the GPU
    /// into the table's upload buffers (the callers' buffers need
    /// `BufferUsages::COPY_SRC` for this).
    async fn copy_piece(&self, keys: &wgpu::Buffer, values: &wgpu::Buffer, first: usize, len: usize) -> Result<(wgpu::Buffer, wgpu::Buffer)> {
        let (kw, vw) = (K::BITS as u64 / 8, V::KIND.bits() as u64 / 8);
        let s = &self.slots;
        let (kb, vb) = (s.cached(Role::Keys, len as u64 * kw).await?, s.cached(Role::Values, len as u64 * vw).await?);
        for (what, b) in [("keys", keys), ("values", values)] {
            if !b.usage().contains(wgpu::BufferUsages::COPY_SRC) {
                return Err(Error::Unsupported(format!(
                    "insert: a batch of more than {} items is done in pieces copied on the GPU; the {what} buffer needs BufferUsages::COPY_SRC",
                    self.batch()
                )));
            }
        }
        let mut w = s.gpu.work(s.variant).await?;
        w.copy_range(keys, first as u64 * kw, &kb, 0, len as u64 * kw);
        w.copy_range(values, first as u64 * vw, &vb, 0, len as u64 * vw);
        w.finish().await?;
        Ok((kb, vb))
    }

    /// Erases the first `n` keys of `keys` (a storage buffer of `K`) with
    /// one submission; returns how many were stored (duplicates count once).
    pub fn erase_buffers(&mut self, keys: &wgpu::Buffer, n: usize) -> Result<u64> {
        pollster::block_on(self.erase_buffers_async(keys, n))
    }

    /// [`WgpuTable::erase_buffers`], awaiting the GPU.
    pub async fn erase_buffers_async(&mut self, keys: &wgpu::Buffer, n: usize) -> Result<u64> {
        Self::check_buffer("erase", keys, n, K::BITS as u64 / 8, "keys")?;
        self.erase_on_gpu(keys, n).await
    }

    /// The first `n` items of a caller's buffer, read back (copied through
    /// a staging buffer; the caller's buffer needs `COPY_SRC`).
    async fn read_items<T: bytemuck::Pod>(&self, b: &wgpu::Buffer, n: usize) -> Result<Vec<T>> {
        let bytes = (n * std::mem::size_of::<T>()) as u64;
        let staging = self.slots.cached(Role::Staging, bytes).await?;
        let mut w = self.slots.gpu.work(self.slots.variant).await?;
        w.copy(b, &staging, bytes);
        let words = w.finish_and_read(&staging, (bytes / 4) as usize).await?;
        Ok(bytemuck::cast_slice(&words).to_vec())
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
        let mut pairs = self.slots.pairs().await?;
        if self.slots.pool.is_some() {
            pairs = slab_list::spread(&pairs);
        }
        // The new slots are allocated before anything changes; the old ones
        // stay the table's until every key has found a place.
        let fresh = Slots::new(self.slots.gpu.clone(), &config, self.slots.variant).await?;
        let keys: Vec<K> = pairs.iter().map(|&(_, k, _)| K::from_u64(k)).collect();
        let values: Vec<V> = pairs.iter().map(|&(_, _, v)| V::from_bits(v)).collect();
        let old = std::mem::replace(&mut self.slots, fresh);
        let placed = self.insert_async(&keys, &values, InsertMode::Assign).await;
        match placed {
            Ok(r) if r.failed.is_empty() => {
                self.config = config;
                Ok(())
            }
            other => {
                self.slots = old;
                match other {
                    Ok(r) => Err(Error::RehashFailed { slots, unplaced: r.failed.len() as u64 }),
                    Err(e) => Err(e),
                }
            }
        }
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
        let bytes = self.slots.variant.slot_bytes;
        let spb = (BUCKET_BYTES / bytes) as u64;
        if self.slots.pool.is_some() {
            // Slabs past the head of the key's chain, as on the CPU.
            let next = self.slots.read_next().await?;
            return Ok(slab_list::displacement(&next, spb, &self.slots.pairs().await?));
        }
        let p = self.slots.probe;
        Ok(self.slots.pairs().await?.into_iter().fold((0, 0), |(sum, max), (s, k, _)| {
            let d = match self.config.scheme {
                Scheme::Cuckoo | Scheme::TwoLevel => {
                    cuckoo::displacement(k, s, p.buckets, p.seed, bytes, self.config.scheme == Scheme::TwoLevel)
                }
                _ => p.displacement(k, s / spb),
            };
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
        pollster::block_on(self.contains_async(keys, found))
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
