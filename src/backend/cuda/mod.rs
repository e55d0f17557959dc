//! The CUDA backend: the shared layout in GPU memory, bulk kernels compiled
//! at run time by NVRTC, and a copyable device view for users' own kernels.
//!
//! The CUDA driver and NVRTC are loaded dynamically, so this compiles and the
//! rest of the crate works on machines without CUDA; [`available`] says why a
//! device cannot be used.

pub(crate) mod batcher;
mod foreign;
mod hashinator;
pub(crate) mod paging;
pub mod kernels;
pub mod limits;
mod region;
mod staging;
mod stream_ops;
mod unified;

pub use foreign::Borrowed;
pub(crate) use foreign::DeviceBatch;
pub use region::release_scratch;
pub use stream_ops::{PendingCount, PendingInsert};

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    result as cu, CudaContext, CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceRepr,
    DriverError, LaunchConfig, PinnedHostSlice, PushKernelArg,
};

use super::{Backend, Config, InsertMode, RawInsert};
use crate::core::keys::{Key, Reduce, Value};
use crate::core::layout::Word;
use crate::core::probe::ProbeParams;
use crate::core::scheme::Scheme;
use crate::{Device, Error, Memory, Result};

use kernels::Kernels;
use unified::Slots;

/// Threads per block of the bulk kernels.
const BLOCK: u32 = 256;

/// A device buffer the table owns, with its address taken once. Every use of
/// it is on the table's stream or ordered with it by events (the async calls'
/// `enter`/`leave`), and it is freed on that stream, so cudarc's per-use event
/// waits and records add nothing but driver calls: about a microsecond each,
/// and a small call made a dozen of them.
pub(crate) struct TableBuf<T> {
    buf: CudaSlice<T>,
    addr: u64,
}

impl<T> TableBuf<T> {
    fn new(buf: CudaSlice<T>, stream: &CudaStream) -> Self {
        let addr = {
            let (addr, _record) = buf.device_ptr(stream);
            addr
        };
        TableBuf { buf, addr }
    }

    /// The device address, for work on the table's stream.
    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }
}

/// A table's page-locked read-back words. They are taken from, and given
/// back to, a list shared by all tables: page-locked memory is slow to
/// allocate, and freeing it synchronizes the whole device, while a paged
/// table makes a table for each page it brings in.
pub(crate) struct Readback {
    words: Option<PinnedHostSlice<u64>>,
    ordinal: usize,
}

/// Read-back words of dropped tables, by device ordinal.
static SPARE_READBACK: Mutex<Vec<(usize, PinnedHostSlice<u64>)>> = Mutex::new(Vec::new());
/// Spare read-back words kept at most (a page of page-locked memory each).
const SPARE_READBACK_MAX: usize = 64;

impl Readback {
    fn take(ctx: &Arc<CudaContext>) -> std::result::Result<Self, DriverError> {
        let ordinal = ctx.ordinal();
        let spare = {
            let mut list = SPARE_READBACK.lock().unwrap_or_else(|p| p.into_inner());
            list.iter().position(|(o, _)| *o == ordinal).map(|i| list.swap_remove(i).1)
        };
        let words = match spare {
            Some(w) => w,
            // Safety: written by a copy before every read. Cached host memory
            // (not cudarc's default, write-combined): the host reads it.
            None => unsafe { ctx.alloc_pinned_with_flags::<u64>(META_WORDS, 0) }?,
        };
        Ok(Readback { words: Some(words), ordinal })
    }

    /// Queues a copy of `words` 8-byte words at device address `src` into
    /// the first of these words, on `stream`; read them with [`Self::read`]
    /// once the stream has passed the copy.
    fn copy_from(&self, stream: &CudaStream, src: u64, words: usize) -> std::result::Result<(), DriverError> {
        let host = self.words.as_ref().expect("held until drop");
        debug_assert!(words <= host.len());
        let dst = host.as_ptr()? as *mut u64;
        // The raw copy needs the context current on this thread.
        stream.context().bind_to_thread()?;
        // Safety: `dst` holds at least `words` words, page-locked; `src` is
        // the caller's live device range of `words` words, on `stream`.
        unsafe { cudarc::driver::sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, 8 * words, stream.cu_stream()).result() }
    }

    /// Fills `out` from the first words, once the copy into them completed.
    fn read(&self, out: &mut [u64]) -> std::result::Result<(), DriverError> {
        let host = self.words.as_ref().expect("held until drop");
        let ptr = host.as_ptr()?;
        // Safety: the caller waited for the copy; nothing else writes these
        // words while their owner holds them.
        out.copy_from_slice(unsafe { std::slice::from_raw_parts(ptr, out.len().min(host.len())) });
        Ok(())
    }
}

impl Drop for Readback {
    fn drop(&mut self) {
        if let Some(w) = self.words.take() {
            let mut list = SPARE_READBACK.lock().unwrap_or_else(|p| p.into_inner());
            if list.len() < SPARE_READBACK_MAX {
                list.push((self.ordinal, w));
            }
        }
    }
}

impl<T> std::ops::Deref for TableBuf<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.buf
    }
}

impl<T> std::ops::DerefMut for TableBuf<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.buf
    }
}
/// Failed insert positions the kernel records directly. For schemes whose
/// refusals are final ([`Scheme::refusals_are_final`]) more are found by a
/// second pass over the batch (the keys left absent); the others record
/// every position, in a buffer grown to the batch.
const FAILED_CAP: usize = 1 << 16;
/// Inserts on a locking scheme run in parts of at most [`UNLOCKED_PART`]
/// items, each first through the step without locks (gh_insert_unlocked),
/// then the items it left through the locked insert. Insert-or-apply on
/// Robin Hood, whose step only updates stored keys, starts with a part of
/// [`APPLY_FIRST_PART`] items and doubles: the keys a skewed batch repeats
/// are stored by the first parts before many of their copies queue on
/// their locks. The cuckoo schemes' step also claims free slots, so their
/// parts start full.
const APPLY_FIRST_PART: usize = 1 << 16;
const UNLOCKED_PART: usize = 1 << 22;
/// A part's flag of an item gh_insert refused (gh_insert_unlocked writes 0
/// for items it settled, 1 for those it left).
const REFUSED_FLAG: u8 = 2;

/// Whether the scheme's unlocked step claims free slots (not only updates
/// stored keys), so that it serves every insert mode.
fn claims_unlocked(scheme: Scheme) -> bool {
    matches!(scheme, Scheme::Cuckoo | Scheme::TwoLevel)
}

/// Items of the part of a batch that starts at item `at` (see [`UNLOCKED_PART`]).
fn unlocked_part(scheme: Scheme, at: usize) -> usize {
    if claims_unlocked(scheme) {
        UNLOCKED_PART
    } else {
        at.clamp(APPLY_FIRST_PART, UNLOCKED_PART)
    }
}

/// `Meta` block in u64 words (see `kernels/gpuhash.cuh`).
const META_WORDS: usize = 8;
const META_STATE: usize = 6;

pub(crate) fn driver_error(ordinal: usize, e: DriverError) -> Error {
    let device = Device::Cuda(ordinal).to_string();
    if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        return Error::OutOfMemory { bytes: 0, device };
    }
    Error::Device { device, message: format!("{e:?}") }
}

/// Whether CUDA device `ordinal` can be used: the driver and NVRTC load and
/// the device exists.
pub fn available(ordinal: usize) -> Result<()> {
    // Probed once a process: every table creation checks (a paged table
    // twice, and once more for each resident table it creates), looking for
    // the shared libraries took 5-7 ms a time on an H200 machine, and
    // neither the libraries nor the driver's answer (its initialisation
    // errors are final) changes.
    static PROBED: std::sync::OnceLock<std::result::Result<usize, String>> = std::sync::OnceLock::new();
    let count = PROBED.get_or_init(probe_driver).clone();
    let device = Device::Cuda(ordinal).to_string();
    let count = count.map_err(|reason| Error::Unavailable { device: device.clone(), reason })?;
    if ordinal >= count {
        return Err(Error::Unavailable { device, reason: format!("only {count} CUDA device(s) present") });
    }
    Ok(())
}

/// The number of CUDA devices, or why CUDA cannot be used.
fn probe_driver() -> std::result::Result<usize, String> {
    // Safety: only probes whether the shared libraries can be opened.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("the CUDA driver library (libcuda.so) was not found".into());
    }
    // Safety: as above, for NVRTC.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err("NVRTC (libnvrtc.so) was not found; install the CUDA runtime compiler".into());
    }
    let count = std::panic::catch_unwind(CudaContext::device_count)
        .map_err(|_| "the CUDA driver could not be initialised".to_string())?
        .map_err(|e| format!("{e:?}"))?;
    Ok(count.max(0) as usize)
}

/// The table as seen from a kernel: pass it by value to kernels that include
/// `kernels/gpuhash.cuh` (`gh::TableView<K, V>` has the same layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DeviceView {
    /// Device address of the first slot.
    pub slots: u64,
    /// Number of 32-byte buckets.
    pub buckets: u64,
    /// Hash seed.
    pub seed: u64,
    /// Buckets probed at most.
    pub limit: u64,
    /// Device address of the metadata block (counters, out-of-band keys).
    pub meta: u64,
    /// Device address of the scheme's state words (0 if it has none).
    pub aux: u64,
    /// The scheme's code (`GH_SCHEME_*`).
    pub scheme: u32,
    /// The scheme's parameter (Hashinator: the team size).
    pub param: u32,
}

// Safety: plain #[repr(C)] integers, laid out as the C++ view.
unsafe impl DeviceRepr for DeviceView {}

fn mode_codes(mode: InsertMode) -> (u32, u32) {
    match mode {
        InsertMode::Assign => (0, 0),
        InsertMode::IfAbsent => (1, 0),
        InsertMode::Apply(op) => (2, op.code()),
    }
}

/// Cap on blocks per SM: none, one thread per key. Measured on an
/// H200 (u32 keys, 2^27 slots, load 0.5): a grid-stride loop over 8 or 64
/// blocks per SM found keys at 25 and 29 G/s, one thread per key at 33 G/s,
/// and inserts went from 7.8 to 12.7 G/s; the kernels' loops wait on each
/// key's memory round trips, so more, shorter-lived threads keep more loads
/// in flight.
const BLOCKS_PER_SM: u64 = u64::MAX / (1 << 32);

fn grid(n: u64, sms: u64) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK as u64).clamp(1, sms.saturating_mul(BLOCKS_PER_SM).min(i32::MAX as u64));
    LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// Asks the driver to keep the local memory it sizes for a launch instead of
/// shrinking it back afterwards. The cuckoo schemes' insert kernels keep an
/// eviction path in local memory (a 616-byte frame, hundreds of MB across a
/// full GPU); without this flag every launch after one of them reallocated
/// it, about 2.4 ms a call whatever the batch. The flag is set on the
/// (shared) primary context and only ever grows memory the driver already
/// chose to reserve.
fn keep_local_memory(ctx: &Arc<CudaContext>) -> std::result::Result<(), DriverError> {
    use cudarc::driver::sys::{cuCtxGetFlags, cuCtxSetFlags, CUctx_flags};
    ctx.bind_to_thread()?;
    let mut flags = 0u32;
    // Safety: the context is bound to this thread; both calls take plain integers.
    unsafe {
        cuCtxGetFlags(&mut flags).result()?;
        let want = flags | CUctx_flags::CU_CTX_LMEM_RESIZE_TO_MAX as u32;
        if want != flags {
            cuCtxSetFlags(want).result()?;
        }
    }
    Ok(())
}

/// Threads the bulk insert, find, contains and erase kernels give one key:
/// Hashinator's team size, else one.
fn threads_per_key(scheme: Scheme) -> u64 {
    match scheme {
        Scheme::Hashinator { team } => team.max(1) as u64,
        _ => 1,
    }
}

/// Blocks per SM of the insert kernels of the cuckoo schemes (see
/// `CudaTable::insert_grid`).
const LOCKING_BLOCKS_PER_SM: u64 = 2;

/// A hash table in the memory of one NVIDIA GPU.
pub struct CudaTable<K: Key, V: Value> {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: Arc<Kernels>,
    slots: Slots,
    meta: TableBuf<u64>,
    /// Page-locked words the counters are read back into: a copy into
    /// pageable memory is staged by the driver, several microseconds more.
    meta_host: Mutex<Readback>,
    /// The scheme's state words (at least one word, so the view's pointer is valid).
    aux: TableBuf<u64>,
    failed: TableBuf<u32>,
    probe: ProbeParams,
    config: Config,
    live: u64,
    tombstones: u64,
    specials: u64,
    /// Every slot is EMPTY, for certain: set by `new` and `clear`, cleared by
    /// every insert and by handing out a view (users' kernels may write).
    /// The region build then skips reading the table.
    pristine: AtomicBool,
    /// Multiprocessors, for sizing grids.
    sms: u64,
    /// Pinned buffers and streams for host slices (see `staging`).
    staging: staging::LazyStaging,
    /// Device scratch of finished async inserts, for the next ones.
    async_pool: Arc<Mutex<Vec<stream_ops::AsyncBuffers>>>,
    /// The unlocked step's part flags (see [`UNLOCKED_PART`]), kept for
    /// the next insert rather than allocated at every call.
    flags: Option<CudaSlice<u8>>,
    _types: PhantomData<(K, V)>,
}

impl<K: Key, V: Value> CudaTable<K, V> {
    fn err(&self, e: DriverError) -> Error {
        driver_error(self.ctx.ordinal(), e)
    }

    /// An empty table with `config.slots` slots on device `ordinal`.
    pub fn new(ordinal: usize, config: Config) -> Result<Self> {
        Device::Cuda(ordinal).check_scheme(config.scheme)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| driver_error(ordinal, e))?;
        if matches!(config.scheme, Scheme::Cuckoo | Scheme::TwoLevel) {
            keep_local_memory(&ctx).map_err(|e| driver_error(ordinal, e))?;
        }
        let stream = ctx.new_stream().map_err(|e| driver_error(ordinal, e))?;
        let kernels = kernels::kernels(&ctx, K::BITS, V::KIND, config.scheme)?;
        let e = |e| driver_error(ordinal, e);
        let sms = ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(e)? as u64;
        crate::fault::alloc_point((8 * META_WORDS + 4 * FAILED_CAP) as u64, Device::Cuda(ordinal))?;
        let meta = TableBuf::new(stream.alloc_zeros::<u64>(META_WORDS).map_err(e)?, &stream);
        let meta_host = Mutex::new(Readback::take(&ctx).map_err(e)?);
        // Safety: written by the insert kernel before it is read.
        let failed = TableBuf::new(unsafe { stream.alloc::<u32>(FAILED_CAP) }.map_err(e)?, &stream);
        let slots = Self::alloc_slots(&ctx, &stream, config.slots, config.memory)?;
        let spb = K::Word::<V>::slots_per_bucket() as u64;
        let buckets = config.slots / spb;
        crate::fault::alloc_point(8 * config.scheme.aux_words(buckets).max(1), Device::Cuda(ordinal))?;
        let aux = stream.alloc_zeros::<u64>(config.scheme.aux_words(buckets).max(1) as usize).map_err(e)?;
        let aux = TableBuf::new(aux, &stream);
        Ok(CudaTable {
            probe: ProbeParams { buckets, seed: config.seed, limit: config.max_probe_buckets.clamp(1, buckets) },
            ctx,
            stream,
            kernels,
            slots,
            meta,
            meta_host,
            aux,
            failed,
            config,
            live: 0,
            tombstones: 0,
            specials: 0,
            pristine: AtomicBool::new(true),
            sms,
            staging: Default::default(),
            async_pool: Default::default(),
            flags: None,
            _types: PhantomData,
        })
    }

    /// Allocates `n` EMPTY slots (all bits set) in `memory`.
    fn alloc_slots(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>, n: u64, memory: Memory) -> Result<Slots> {
        Slots::alloc(ctx, stream, n * K::Word::<V>::BYTES as u64, memory)
    }

    /// Storage for this table at `slots` slots: the slot array (contents as
    /// `alloc_slots` leaves them), zeroed scheme words and the probe
    /// parameters of that size. The table itself is left as it is.
    fn fresh_storage(&self, slots: u64) -> Result<(Slots, TableBuf<u64>, ProbeParams)> {
        let new_slots = Self::alloc_slots(&self.ctx, &self.stream, slots, self.config.memory)?;
        let buckets = slots / K::Word::<V>::slots_per_bucket() as u64;
        let aux_words = self.config.scheme.aux_words(buckets).max(1) as usize;
        crate::fault::alloc_point(8 * aux_words as u64, self.device())?;
        let aux = self.stream.alloc_zeros::<u64>(aux_words).map_err(|e| self.err(e))?;
        let probe = ProbeParams { buckets, seed: self.config.seed, limit: self.config.max_probe_buckets.clamp(1, buckets) };
        Ok((new_slots, TableBuf::new(aux, &self.stream), probe))
    }

    /// The stream every operation of this table runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The copyable view for users' kernels. It stays valid until the next
    /// operation that rehashes (growth, `reserve`, `rehash`, `clear` keeps it).
    ///
    /// What your kernels may run at once depends on the scheme: Linear and
    /// Hashinator take inserts, erases and lookups together; Robin Hood takes
    /// inserts with erases, but no lookup while any thread inserts; cuckoo
    /// and two-level take concurrent inserts, and erases or lookups only
    /// while no thread inserts (those schemes move keys, and a lookup may
    /// miss a key being moved). `tests/cuda_concurrency.rs` races each
    /// allowed mix. Call [`CudaTable::resync`] afterwards so `len` and
    /// growth see your kernels' work.
    /// With [`Memory::Unified`] it also prefetches the slots back to the GPU
    /// (on the table stream) if a host lookup moved them to the host.
    pub fn view(&self) -> DeviceView {
        self.pristine.store(false, Ordering::Relaxed);
        self.kernel_view()
    }

    /// The view without ending `pristine`: for this crate's kernels that do
    /// not store keys (writers take `view`; the region build reads and ends
    /// `pristine` itself).
    fn kernel_view(&self) -> DeviceView {
        DeviceView {
            slots: self.slots.device_ptr(&self.stream),
            buckets: self.probe.buckets,
            seed: self.probe.seed,
            limit: self.probe.limit,
            meta: self.meta.addr(),
            aux: self.aux.addr(),
            scheme: self.config.scheme.code(),
            param: self.config.scheme.param(),
        }
    }

    /// Launch size of a bulk kernel over `n` keys (a team per key for Hashinator).
    fn key_grid(&self, n: u64) -> LaunchConfig {
        grid(n.saturating_mul(threads_per_key(self.config.scheme)), self.sms)
    }

    /// The grid of kernels that insert. Cuckoo inserts take bucket or region
    /// locks with try-lock and back-off, so fewer threads at once contend
    /// less (small tables have few locks); the kernels loop grid-stride.
    fn insert_grid(&self, n: u64) -> LaunchConfig {
        match self.config.scheme {
            Scheme::Cuckoo | Scheme::TwoLevel => {
                let g = grid(n, self.sms);
                let cap = (self.sms * LOCKING_BLOCKS_PER_SM).max(1) as u32;
                LaunchConfig { grid_dim: (g.grid_dim.0.min(cap), 1, 1), ..g }
            }
            _ => self.key_grid(n),
        }
    }

    /// Reads the metadata block back (waits for the stream).
    fn read_meta(&self) -> Result<[u64; META_WORDS]> {
        // Held through the copy: calls from other threads take turns.
        let host = self.meta_host.lock().unwrap_or_else(|p| p.into_inner());
        let e = |e| self.err(e);
        // On the table's stream after the kernels that wrote the block.
        host.copy_from(&self.stream, self.meta.addr(), META_WORDS).map_err(e)?;
        self.stream.synchronize().map_err(e)?;
        let mut m = [0u64; META_WORDS];
        host.read(&mut m).map_err(e)?;
        Ok(m)
    }

    fn count_specials(m: &[u64; META_WORDS]) -> u64 {
        let s = m[META_STATE];
        ((s & 0xffff_ffff) == 2) as u64 + ((s >> 32) == 2) as u64
    }

    /// Inserts pairs already in device memory. Unlike the host calls this
    /// never grows the table (reserve first); keys that find no slot are
    /// returned in [`Error::TableFull`].
    pub fn insert_device(
        &mut self,
        keys: &CudaView<'_, K>,
        values: &CudaView<'_, V>,
        mode: InsertMode,
    ) -> Result<crate::InsertReport> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch { op: "insert_device", keys: keys.len(), other: values.len(), what: "values" });
        }
        let raw = self.insert_raw(keys, values, mode)?;
        let report = crate::InsertReport { inserted: raw.inserted, existing: raw.existing };
        if raw.failed.is_empty() {
            return Ok(report);
        }
        let not_stored = self.gather_keys(keys, &raw.failed)?.into_iter().map(Key::to_u64).collect();
        Err(Error::TableFull(Box::new(crate::NotStored { report, positions: raw.failed, keys: not_stored })))
    }

    pub(crate) fn insert_raw(&mut self, keys: &CudaView<'_, K>, values: &CudaView<'_, V>, mode: InsertMode) -> Result<RawInsert> {
        let n = keys.len() as u64;
        let (slots, buckets, setting) = (self.config.slots, self.probe.buckets, self.config.region_build);
        let word = K::Word::<V>::BYTES;
        // The device's room for larger insert-or-apply chunks: half its
        // free memory and the region scratch it keeps (which this build
        // takes over), asked only of batches larger than the table.
        let room = match mode {
            InsertMode::Apply(_) if n > slots => self.ctx.mem_get_info().map_or(0, |(free, _)| {
                (free as u64).saturating_add(region::cached_scratch_bytes(self.ctx.ordinal()) as u64) / 2
            }),
            _ => 0,
        };
        let shape = region::Shape { scheme: self.config.scheme, word, live: self.live, slots, buckets, room };
        let chunk = region::chunk_len(n, mode, shape, setting);
        let (Some(chunk), Some(_)) = (chunk, &self.kernels.region) else {
            return self.insert_plain(keys, values, mode);
        };
        // One region build per chunk; failed positions are the batch's.
        let mut out = RawInsert::default();
        let mut at = 0u64;
        while at < n {
            let end = (at + chunk).min(n);
            let (k, v) = (keys.slice(at as usize..end as usize), values.slice(at as usize..end as usize));
            let part = self.insert_regions(&k, &v, mode)?;
            out.inserted += part.inserted;
            out.existing += part.existing;
            out.failed.extend(part.failed.into_iter().map(|p| p + at as usize));
            at = end;
        }
        Ok(out)
    }

    /// One thread per key, each claiming its slot with a CAS in device memory.
    /// The locking schemes go through [`Self::insert_unlocking`] where they can.
    fn insert_plain(&mut self, keys: &CudaView<'_, K>, values: &CudaView<'_, V>, mode: InsertMode) -> Result<RawInsert> {
        let kernels = self.kernels.clone(); // not borrowed from `self`, which changes below
        if let Some(unlocked) = &kernels.unlocked {
            if let Some(out) = self.insert_unlocking(unlocked, &kernels.insert, keys, values, mode)? {
                return Ok(out);
            }
        }
        let launch = self.insert_grid(keys.len() as u64);
        self.insert_with(&kernels.insert, launch, keys, values, mode, None)
    }

    /// An insert on a locking scheme in parts ([`unlocked_part`]), each first
    /// through the step without locks, then the items it left under locks.
    /// `None` (nothing done) when the scheme has no such step for `mode`, or
    /// there is no memory for the part flags.
    fn insert_unlocking(
        &mut self,
        unlocked: &CudaFunction,
        insert: &CudaFunction,
        keys: &CudaView<'_, K>,
        values: &CudaView<'_, V>,
        mode: InsertMode,
    ) -> Result<Option<RawInsert>> {
        let (n, scheme) = (keys.len(), self.config.scheme);
        let Some(mut todo) = self.take_flags(mode, UNLOCKED_PART.min(n)) else {
            return Ok(None);
        };
        let mut out = RawInsert::default();
        let mut at = 0usize;
        while at < n {
            let end = (at + unlocked_part(scheme, at)).min(n);
            let (k, v) = (keys.slice(at..end), values.slice(at..end));
            let launch = self.insert_grid((end - at) as u64);
            let got = self.insert_with(insert, launch, &k, &v, mode, Some((unlocked, &mut todo)))?;
            out.inserted += got.inserted;
            out.existing += got.existing;
            out.failed.extend(got.failed.into_iter().map(|p| p + at));
            at = end;
        }
        self.keep_flags(Some(todo));
        Ok(Some(out))
    }

    /// `len` flags for the unlocked step of an insert in `mode`: the
    /// table's own if long enough (give them back with [`Self::keep_flags`]
    /// after the call), else new ones. `None` when the scheme has no
    /// unlocked step for `mode`, or there is no memory for them (the step
    /// is skipped: every item takes the locked insert, which stores the same).
    fn take_flags(&mut self, mode: InsertMode, len: usize) -> Option<CudaSlice<u8>> {
        let wanted = matches!(mode, InsertMode::Apply(_)) || claims_unlocked(self.config.scheme);
        if !wanted || self.kernels.unlocked.is_none() || len == 0 {
            return None;
        }
        if let Some(kept) = self.flags.take().filter(|f| f.len() >= len) {
            return Some(kept);
        }
        crate::fault::alloc_point(len as u64, self.device()).ok()?;
        // Safety: gh_insert_unlocked writes every flag of a part before gh_insert reads it.
        unsafe { self.stream.alloc::<u8>(len) }.ok()
    }

    /// Keeps flags of at most a part's length for the next insert; longer
    /// ones (a host batch's, one flag a key) go back to the driver now, as
    /// a grown failure buffer does (see [`Self::release_failure_room`]).
    fn keep_flags(&mut self, flags: Option<CudaSlice<u8>>) {
        match flags {
            Some(f) if f.len() > UNLOCKED_PART => {
                drop(f);
                // Nothing else is on the stream: only the driver's release waits.
                let _ = self.stream.synchronize();
            }
            Some(f) => self.flags = Some(f),
            None => {}
        }
    }

    /// An insert by `kernel`, gh_insert or a kernel of its signature.
    fn insert_with(
        &mut self,
        kernel: &CudaFunction,
        launch: LaunchConfig,
        keys: &CudaView<'_, K>,
        values: &CudaView<'_, V>,
        mode: InsertMode,
        unlocked: Option<(&CudaFunction, &mut CudaSlice<u8>)>,
    ) -> Result<RawInsert> {
        let n = keys.len() as u64;
        if n == 0 {
            return Ok(RawInsert::default());
        }
        let (unlocked, mut todo) = unlocked.unzip();
        // With the unlocked step's flags, the insert also marks its refusals
        // there (REFUSED_FLAG): a short failure buffer serves any batch, the
        // flags giving the positions when it overflows. (Growing the buffer
        // to the batch cost a small batch more than its kernels.)
        let cap = self.failure_room(if todo.is_some() { 0 } else { n })?;
        self.zero_counters()?;
        let (m, op) = mode_codes(mode);
        let view = self.view(); // the kernel writes: the table is no longer known EMPTY
        let base = 0u64;
        // The items gh_insert_unlocked left to the insert (all of them without it).
        let stream = self.stream.clone(); // outlives the flags' record
        let step = unlocked.zip(todo.as_deref_mut());
        let (todo_ptr, todo_record) = self.launch_unlocked(&stream, step, &view, keys, values, (m, op))?;
        let mut b = self.stream.launch_builder(kernel);
        let failed = self.failed.addr();
        b.arg(&view).arg(keys).arg(values).arg(&n).arg(&m).arg(&op).arg(&failed).arg(&cap).arg(&base).arg(&todo_ptr);
        // Safety: the arguments match gh_insert's signature (which `kernel`
        // shares); every pointer is a live allocation of the stated length
        // (`todo_ptr` is null or n flags written above, on this stream).
        unsafe { b.launch(launch) }.map_err(|e| self.err(e))?;
        drop(todo_record); // records the flags' use by the insert, on this stream
        let meta = self.read_meta()?;
        let (inserted, existing, nfailed) = (meta[0], meta[1], meta[2]);
        let mut failed: Vec<usize> = match todo {
            Some(todo) if nfailed > cap => {
                let mut flags = vec![0u8; n as usize];
                self.stream.memcpy_dtoh(&todo.slice(0..n as usize), &mut flags).map_err(|e| self.err(e))?;
                flags.iter().enumerate().filter(|&(_, &f)| f == REFUSED_FLAG).map(|(i, _)| i).collect()
            }
            _ => {
                debug_assert!(nfailed <= cap || self.config.scheme.refusals_are_final(), "failure buffer sized to the batch");
                self.failed_places(keys, nfailed)?
            }
        };
        failed.sort_unstable();
        self.account_insert(&meta);
        self.release_failure_room();
        Ok(RawInsert { inserted, existing, failed })
    }

    /// Enqueues the locking schemes' step without locks (gh_insert_unlocked)
    /// on `stream`, where `step` holds its kernel and the flags: a byte per
    /// key, nonzero for those left to the locked insert. Returns the flags'
    /// address for that insert (null without the step: every key) and the
    /// record of their use, to drop once the insert is enqueued. The
    /// synchronous and the async inserts both launch it here.
    fn launch_unlocked<'f>(
        &self,
        stream: &'f Arc<CudaStream>,
        step: Option<(&CudaFunction, &'f mut CudaSlice<u8>)>,
        view: &DeviceView,
        keys: &CudaView<'_, K>,
        values: &CudaView<'_, V>,
        (m, op): (u32, u32),
    ) -> Result<(u64, Option<cudarc::driver::SyncOnDrop<'f>>)> {
        let Some((unlocked, flags)) = step else { return Ok((0, None)) };
        let n = keys.len() as u64;
        debug_assert!(flags.len() as u64 >= n);
        let mut b = stream.launch_builder(unlocked);
        b.arg(view).arg(keys).arg(values).arg(&n).arg(&m).arg(&op).arg(&mut *flags);
        // Safety: the arguments match gh_insert_unlocked's signature; `flags`
        // holds at least n bytes.
        unsafe { b.launch(self.key_grid(n)) }.map_err(|e| self.err(e))?;
        let (p, record) = flags.device_ptr(stream);
        Ok((p, Some(record)))
    }

    /// The positions in `keys` of an insert's `count` refused keys: the
    /// failure buffer's, when it held them all, else those of the keys the
    /// table does not hold (only where refusals are final: linear tables).
    fn failed_places(&mut self, keys: &CudaView<'_, K>, count: u64) -> Result<Vec<usize>> {
        if count == 0 {
            return Ok(Vec::new());
        }
        if count > self.failed.len() as u64 {
            return self.collect_absent(keys, count);
        }
        let mut f = vec![0u32; count as usize];
        self.stream.memcpy_dtoh(&self.failed.slice(0..count as usize), &mut f).map_err(|e| self.err(e))?;
        Ok(f.into_iter().map(|i| i as usize).collect())
    }

    /// The device address of word `index` of the `Meta` block.
    fn meta_word(&self, index: usize) -> u64 {
        debug_assert!(index < META_WORDS);
        self.meta.addr() + (index * std::mem::size_of::<u64>()) as u64
    }

    /// Gives back a failure buffer grown to a large batch ([`Self::failure_room`])
    /// at the end of that batch's call. Freed memory goes back to the driver
    /// at the next synchronization, so this one is made here: left to the
    /// next call, it cost a 2^12-key insert after a 2^26-key one 0.4 ms of
    /// its 0.5 (H200). On failure the large buffer stays and serves.
    fn release_failure_room(&mut self) {
        if self.failed.len() <= FAILED_CAP || crate::fault::alloc_point(4 * FAILED_CAP as u64, self.device()).is_err() {
            return;
        }
        // Safety: written by the insert kernel before it is read.
        if let Ok(small) = unsafe { self.stream.alloc::<u32>(FAILED_CAP) } {
            self.failed = TableBuf::new(small, &self.stream);
            // Nothing else is on the stream: only the driver's release waits.
            let _ = self.stream.synchronize();
        }
    }

    /// Makes the failure buffer hold every position an insert of `n` keys
    /// must record (see [`FAILED_CAP`]) and returns its length. A
    /// failed allocation keeps the old buffer and changes nothing.
    fn failure_room(&mut self, n: u64) -> Result<u64> {
        let want = if self.config.scheme.refusals_are_final() { FAILED_CAP } else { (n as usize).max(FAILED_CAP) };
        let have = self.failed.len();
        // Grown to the batch, or far larger than this batch needs: give the memory back.
        if have < want || (have > FAILED_CAP && have / 4 > want) {
            let fresh = crate::fault::alloc_point(4 * want as u64, self.device()).and_then(|()| {
                // Safety: written by the insert kernel before it is read.
                unsafe { self.stream.alloc::<u32>(want) }.map_err(|e| self.err(e))
            });
            match fresh {
                Ok(f) => self.failed = TableBuf::new(f, &self.stream),
                // Only shrinking: the larger buffer serves.
                Err(_) if have >= want => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.failed.len() as u64)
    }

    /// Adds an insert's counters (`meta`) to the host-side counts.
    /// Saturating: counts are stale after your own kernels or async calls
    /// until `resync`, and must not panic then.
    fn account_insert(&mut self, meta: &[u64; META_WORDS]) {
        // `inserted` counts new out-of-band keys too; they occupy no slot.
        let specials = Self::count_specials(meta);
        self.live += meta[0].saturating_sub(specials.saturating_sub(self.specials));
        self.specials = specials;
    }

    /// Takes an erase's counters (`meta`) off the host-side counts.
    fn account_erase(&mut self, meta: &[u64; META_WORDS]) {
        let specials = Self::count_specials(meta);
        let slot_removed = meta[3].saturating_sub(self.specials.saturating_sub(specials));
        self.specials = specials;
        self.live = self.live.saturating_sub(slot_removed);
        // Cuckoo schemes free the slot instead.
        if self.config.scheme.erase_leaves_tombstones() {
            self.tombstones += slot_removed;
        }
    }

    /// `keys[positions]`, gathered on the device (positions are few; the
    /// batch may be huge), or from a copy of the batch when the device has
    /// no memory for the gather: it runs after an insert stored keys, and
    /// must not fail for want of memory then.
    pub(crate) fn gather_keys(&self, keys: &CudaView<'_, K>, positions: &[usize]) -> Result<Vec<K>> {
        match self.gather_on_device(keys, positions) {
            Err(Error::OutOfMemory { .. }) => {
                let all = self.stream.clone_dtoh(keys).map_err(|e| self.err(e))?;
                self.stream.synchronize().map_err(|e| self.err(e))?;
                Ok(positions.iter().map(|&p| all[p]).collect())
            }
            other => other,
        }
    }

    fn gather_on_device(&self, keys: &CudaView<'_, K>, positions: &[usize]) -> Result<Vec<K>> {
        let pos: Vec<u32> = positions.iter().map(|&p| p as u32).collect();
        let pos_dev = self.upload(&pos)?;
        let n = pos.len() as u64;
        crate::fault::alloc_point((pos.len() * std::mem::size_of::<K>()) as u64, self.device())?;
        // Safety: fully written by gh_gather_keys.
        let mut out = unsafe { self.stream.alloc::<K>(pos.len()) }.map_err(|e| self.err(e))?;
        let mut b = self.stream.launch_builder(&self.kernels.gather_keys);
        b.arg(keys).arg(&pos_dev).arg(&n).arg(&mut out);
        // Safety: arguments match gh_gather_keys; every position is below keys.len().
        unsafe { b.launch(grid(n, self.sms)) }.map_err(|e| self.err(e))?;
        let host = self.stream.clone_dtoh(&out).map_err(|e| self.err(e))?;
        self.stream.synchronize().map_err(|e| self.err(e))?;
        Ok(host)
    }

    /// The positions of `keys` the table does not hold (the failed inserts of
    /// a call), about `expected` of them.
    fn collect_absent(&mut self, keys: &CudaView<'_, K>, expected: u64) -> Result<Vec<usize>> {
        self.collect_positions(keys, expected, None)
    }

    /// Positions of `keys` absent from the table (`among` is None) or equal to
    /// an entry of the ascending `among.0`, searched by `among.1`
    /// (gh_region_positions); about `expected` of them, more when a key is
    /// repeated in the batch, and then a second pass takes them all. This
    /// runs after an insert stored keys, so it must not fail for want of
    /// memory: without room for the list it searches the batch in windows
    /// no longer than the failure buffer, which then holds any window's.
    fn collect_positions(
        &mut self,
        keys: &CudaView<'_, K>,
        expected: u64,
        among: Option<(&CudaSlice<K>, &CudaFunction)>,
    ) -> Result<Vec<usize>> {
        let n = keys.len() as u64;
        let mut cap = expected.clamp(1, n.max(1));
        loop {
            let out = crate::fault::alloc_point(4 * cap, self.device()).and_then(|()| {
                // Safety: written by the kernel before being read.
                unsafe { self.stream.alloc::<u32>(cap as usize) }.map_err(|e| self.err(e))
            });
            let out = match out {
                Ok(out) => out,
                Err(Error::OutOfMemory { .. }) => return self.positions_in_windows(keys, among),
                Err(e) => return Err(e),
            };
            let found = self.search_positions(keys, among, &out, cap)?;
            if found > cap {
                cap = found;
                continue;
            }
            let mut f = vec![0u32; found as usize];
            self.stream.memcpy_dtoh(&out.slice(0..found as usize), &mut f).map_err(|e| self.err(e))?;
            self.stream.synchronize().map_err(|e| self.err(e))?;
            return Ok(f.into_iter().map(|i| i as usize).collect());
        }
    }

    /// [`Self::collect_positions`] with no memory to spare: windows of the
    /// batch as long as the failure buffer (each position is found once, so
    /// a window's fit), one search and readback each.
    fn positions_in_windows(
        &self,
        keys: &CudaView<'_, K>,
        among: Option<(&CudaSlice<K>, &CudaFunction)>,
    ) -> Result<Vec<usize>> {
        let w = self.failed.len();
        let mut all = Vec::new();
        for lo in (0..keys.len()).step_by(w.max(1)) {
            let hi = (lo + w).min(keys.len());
            let found = self.search_positions(&keys.slice(lo..hi), among, &self.failed, w as u64)?;
            let mut f = vec![0u32; found.min(w as u64) as usize];
            self.stream.memcpy_dtoh(&self.failed.slice(0..f.len()), &mut f).map_err(|e| self.err(e))?;
            self.stream.synchronize().map_err(|e| self.err(e))?;
            all.extend(f.into_iter().map(|i| lo + i as usize));
        }
        Ok(all)
    }

    /// One search of [`Self::collect_positions`]: writes up to `cap`
    /// positions to `out` and returns how many it found.
    fn search_positions(
        &self,
        keys: &CudaView<'_, K>,
        among: Option<(&CudaSlice<K>, &CudaFunction)>,
        out: &CudaSlice<u32>,
        cap: u64,
    ) -> Result<u64> {
        let n = keys.len() as u64;
        // The kernel writes `out` on the table stream, which orders every use of it.
        let out = {
            let (ptr, _record) = out.device_ptr(&self.stream);
            ptr
        };
        self.zero_counters()?;
        let view = self.kernel_view();
        match among {
            None => {
                let mut b = self.stream.launch_builder(&self.kernels.collect_absent);
                b.arg(&view).arg(keys).arg(&n).arg(&out).arg(&cap);
                // Safety: arguments match gh_collect_absent; `out` holds `cap` positions.
                unsafe { b.launch(grid(n, self.sms)) }.map_err(|e| self.err(e))?;
            }
            Some((sorted, search)) => {
                let m = sorted.len() as u64;
                let mut b = self.stream.launch_builder(search);
                b.arg(&view).arg(keys).arg(&n).arg(sorted).arg(&m).arg(&out).arg(&cap);
                // As many blocks as are resident at once (8 of 256 threads an SM),
                // each thread loading 8 keys a step (POS_BATCH): each block first
                // stages the refused keys.
                let blocks = n.div_ceil(8 * BLOCK as u64).clamp(1, self.sms * 8);
                let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 };
                // Safety: arguments match gh_region_positions; `sorted` holds m
                // keys, `out` holds `cap` positions.
                unsafe { b.launch(cfg) }.map_err(|e| self.err(e))?;
            }
        }
        Ok(self.read_meta()?[3])
    }

    /// Looks up keys in device memory; `found` receives 0/1 bytes.
    pub fn find_device(
        &self,
        keys: &CudaView<'_, K>,
        values: &mut CudaViewMut<'_, V>,
        found: &mut CudaViewMut<'_, u8>,
    ) -> Result<u64> {
        if keys.len() != values.len() || keys.len() != found.len() {
            return Err(Error::LengthMismatch { op: "find_device", keys: keys.len(), other: values.len().min(found.len()), what: "outputs" });
        }
        let n = keys.len() as u64;
        if n == 0 {
            return Ok(0);
        }
        self.zero_counters()?;
        let view = self.kernel_view();
        let mut b = self.stream.launch_builder(&self.kernels.find);
        b.arg(&view).arg(keys).arg(&n).arg(values).arg(found);
        // Safety: arguments match gh_find; outputs hold n elements.
        unsafe { b.launch(self.key_grid(n)) }.map_err(|e| self.err(e))?;
        Ok(self.read_meta()?[3])
    }

    /// Marks which keys in device memory are present.
    pub fn contains_device(&self, keys: &CudaView<'_, K>, found: &mut CudaViewMut<'_, u8>) -> Result<u64> {
        if keys.len() != found.len() {
            return Err(Error::LengthMismatch { op: "contains_device", keys: keys.len(), other: found.len(), what: "outputs" });
        }
        let n = keys.len() as u64;
        if n == 0 {
            return Ok(0);
        }
        self.zero_counters()?;
        let view = self.kernel_view();
        let mut b = self.stream.launch_builder(&self.kernels.contains);
        b.arg(&view).arg(keys).arg(&n).arg(found);
        // Safety: arguments match gh_contains; the output holds n bytes.
        unsafe { b.launch(self.key_grid(n)) }.map_err(|e| self.err(e))?;
        Ok(self.read_meta()?[3])
    }

    /// Erases keys in device memory; returns how many were removed.
    pub fn erase_device(&mut self, keys: &CudaView<'_, K>) -> Result<u64> {
        let n = keys.len() as u64;
        if n == 0 {
            return Ok(0);
        }
        self.zero_counters()?;
        let view = self.kernel_view();
        let mut b = self.stream.launch_builder(&self.kernels.erase);
        b.arg(&view).arg(keys).arg(&n);
        // Safety: arguments match gh_erase.
        unsafe { b.launch(self.key_grid(n)) }.map_err(|e| self.err(e))?;
        let meta = self.read_meta()?;
        self.account_erase(&meta);
        Ok(meta[3])
    }

    /// Zeroes the counters of the metadata block (on the stream).
    fn zero_counters(&self) -> Result<()> {
        // Safety: the first 4 words of the metadata block, on this stream.
        unsafe { cu::memset_d8_async(self.meta.addr(), 0, 32, self.stream.cu_stream()) }.map_err(|e| self.err(e))
    }

    /// Recounts live keys and tombstones on the device. Call it after your
    /// own kernels inserted or erased through [`CudaTable::view`], so that
    /// `len`, growth and statistics see their work.
    pub fn resync(&mut self) -> Result<()> {
        let m = self.census()?;
        self.live = m[2];
        self.tombstones = m[3];
        self.specials = Self::count_specials(&m);
        Ok(())
    }

    /// Runs gh_displacement over every slot: counters hold the displacement
    /// sum and maximum, then the live and erased slot counts.
    fn census(&self) -> Result<[u64; META_WORDS]> {
        let slots = self.config.slots;
        self.zero_counters()?;
        let view = self.kernel_view();
        let mut b = self.stream.launch_builder(&self.kernels.displacement);
        b.arg(&view).arg(&slots);
        // Safety: arguments match gh_displacement.
        unsafe { b.launch(grid(slots, self.sms)) }.map_err(|e| self.err(e))?;
        self.read_meta()
    }

    fn upload<T: DeviceRepr>(&self, data: &[T]) -> Result<CudaSlice<T>> {
        crate::fault::alloc_point(std::mem::size_of_val(data) as u64, self.device())?;
        self.stream.clone_htod(data).map_err(|e| self.err(e))
    }
}

impl<K: Key, V: Value> CudaTable<K, V> {
    /// The pairs in slots, in device memory (the first `n` of each buffer;
    /// the out-of-band pairs stay in the metadata block).
    fn export_device(&self) -> Result<(CudaSlice<K>, CudaSlice<V>, usize)> {
        // Sized by the host's count of live keys, which users' kernels make
        // stale until `resync`: a table holding more is exported again with
        // room for what the kernel counted, so no pair is ever left out.
        let mut cap = self.live.max(1);
        loop {
            crate::fault::alloc_point(cap * (std::mem::size_of::<K>() + std::mem::size_of::<V>()) as u64, self.device())?;
            // Safety: entries below the returned count are written by gh_export.
            let mut k = unsafe { self.stream.alloc::<K>(cap as usize) }.map_err(|e| self.err(e))?;
            let mut v = unsafe { self.stream.alloc::<V>(cap as usize) }.map_err(|e| self.err(e))?;
            let slots = self.config.slots;
            self.zero_counters()?;
            let view = self.kernel_view();
            let mut b = self.stream.launch_builder(&self.kernels.export);
            b.arg(&view).arg(&slots).arg(&mut k).arg(&mut v).arg(&cap);
            // Safety: arguments match gh_export; outputs hold `cap` elements.
            unsafe { b.launch(grid(slots, self.sms)) }.map_err(|e| self.err(e))?;
            let found = self.read_meta()?[3];
            if found <= cap {
                return Ok((k, v, found as usize));
            }
            cap = found;
        }
    }

    /// A rehash of a cuckoo or two-level table as a bulk insert into fresh
    /// slots: the step without locks places most keys, and a large
    /// two-level table takes the region build's fresh path (one coalesced
    /// pass), where the rehash kernel makes a locked cuckoo insert per old
    /// slot on a grid capped for its local memory. `None` when
    /// device memory for the exported pairs is lacking (the caller then
    /// rehashes slot by slot, which needs none); on a refusal the old slots
    /// come back untouched.
    fn rehash_by_insert(&mut self, slots: u64) -> Result<Option<Result<()>>> {
        let Ok((k, v, n)) = self.export_device() else {
            return Ok(None);
        };
        let Ok((new_slots, new_aux, probe)) = self.fresh_storage(slots) else {
            return Ok(None);
        };
        let old = (
            std::mem::replace(&mut self.slots, new_slots),
            std::mem::replace(&mut self.aux, new_aux),
            std::mem::replace(&mut self.probe, probe),
            std::mem::replace(&mut self.config.slots, slots),
            std::mem::replace(&mut self.live, 0),
            std::mem::replace(&mut self.tombstones, 0),
        );
        self.pristine.store(true, Ordering::Relaxed);
        let (kv, vv) = (k.slice(0..n), v.slice(0..n));
        let outcome = match self.insert_raw(&kv, &vv, InsertMode::IfAbsent) {
            Ok(raw) if raw.failed.is_empty() => return Ok(Some(Ok(()))),
            Ok(raw) => Ok(Some(Err(Error::RehashFailed { slots, unplaced: raw.failed.len() as u64 }))),
            Err(e) => Err(e),
        };
        // Back to the old slots, which nothing changed.
        (self.slots, self.aux, self.probe, self.config.slots, self.live, self.tombstones) = old;
        self.pristine.store(false, Ordering::Relaxed);
        outcome
    }
}

impl<K: Key, V: Value> Backend<K, V> for CudaTable<K, V> {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn device(&self) -> Device {
        Device::Cuda(self.ctx.ordinal())
    }
    fn scheme(&self) -> Scheme {
        self.config.scheme
    }
    fn slots(&self) -> u64 {
        self.config.slots
    }
    fn len(&self) -> u64 {
        self.live + self.specials
    }
    fn used(&self) -> u64 {
        self.live + self.specials + self.tombstones
    }
    fn out_of_band(&self) -> u64 {
        self.specials
    }
    fn tombstones(&self) -> u64 {
        self.tombstones
    }

    fn insert(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        if keys.is_empty() {
            return Ok(RawInsert::default());
        }
        if staging::staged(keys.len()) {
            return self.insert_staged(keys, values, mode);
        }
        let k = self.upload(keys)?;
        let v = self.upload(values)?;
        self.insert_raw(&k.as_view(), &v.as_view(), mode)
    }

    fn find(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        if staging::staged(keys.len()) {
            return self.find_staged(keys, values, found);
        }
        let k = self.upload(keys)?;
        crate::fault::alloc_point((keys.len() * (std::mem::size_of::<V>() + 1)) as u64, self.device())?;
        // Safety: fully written by gh_find.
        let mut v = unsafe { self.stream.alloc::<V>(keys.len()) }.map_err(|e| self.err(e))?;
        let mut f = unsafe { self.stream.alloc::<u8>(keys.len()) }.map_err(|e| self.err(e))?;
        let hits = self.find_device(&k.as_view(), &mut v.as_view_mut(), &mut f.as_view_mut())?;
        self.stream.memcpy_dtoh(&v, values).map_err(|e| self.err(e))?;
        let mut bytes = vec![0u8; keys.len()];
        self.stream.memcpy_dtoh(&f, &mut bytes).map_err(|e| self.err(e))?;
        self.stream.synchronize().map_err(|e| self.err(e))?;
        for (o, b) in found.iter_mut().zip(bytes) {
            *o = b != 0;
        }
        Ok(hits)
    }

    fn contains(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        if staging::staged(keys.len()) {
            return self.contains_staged(keys, found);
        }
        let k = self.upload(keys)?;
        crate::fault::alloc_point(keys.len() as u64, self.device())?;
        // Safety: fully written by gh_contains.
        let mut f = unsafe { self.stream.alloc::<u8>(keys.len()) }.map_err(|e| self.err(e))?;
        let hits = self.contains_device(&k.as_view(), &mut f.as_view_mut())?;
        let mut bytes = vec![0u8; keys.len()];
        self.stream.memcpy_dtoh(&f, &mut bytes).map_err(|e| self.err(e))?;
        self.stream.synchronize().map_err(|e| self.err(e))?;
        for (o, b) in found.iter_mut().zip(bytes) {
            *o = b != 0;
        }
        Ok(hits)
    }

    fn erase(&mut self, keys: &[K]) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        if staging::staged(keys.len()) {
            return self.erase_staged(keys);
        }
        let k = self.upload(keys)?;
        self.erase_device(&k.as_view())
    }

    fn clear(&mut self) -> Result<()> {
        let bytes = self.slots.bytes();
        let ptr = self.slots.device_ptr(&self.stream);
        // Safety: the whole slot allocation, on this stream.
        unsafe { cu::memset_d8_async(ptr, 0xff, bytes, self.stream.cu_stream()) }
            .map_err(|e| driver_error(self.ctx.ordinal(), e))?;
        self.stream.memset_zeros(&mut *self.meta).map_err(|e| self.err(e))?;
        self.stream.memset_zeros(&mut *self.aux).map_err(|e| self.err(e))?;
        self.stream.synchronize().map_err(|e| self.err(e))?;
        self.live = 0;
        self.tombstones = 0;
        self.specials = 0;
        self.pristine.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn clean_tombstones(&mut self) -> Result<()> {
        if super::hashinator::cleans_in_place(self.config.scheme) {
            return self.clean_in_place();
        }
        self.rehash(self.config.slots)
    }

    fn rehash(&mut self, slots: u64) -> Result<()> {
        if matches!(self.config.scheme, Scheme::Cuckoo | Scheme::TwoLevel) {
            if let Some(done) = self.rehash_by_insert(slots)? {
                return done;
            }
        }
        let (new_slots, new_aux, probe) = self.fresh_storage(slots)?;
        // The new table shares the metadata block: out-of-band keys carry over.
        self.zero_counters()?;
        let from = self.kernel_view();
        let to = DeviceView {
            slots: new_slots.device_ptr(&self.stream),
            buckets: probe.buckets,
            seed: probe.seed,
            limit: probe.limit,
            aux: new_aux.addr(),
            ..from
        };
        let old_slots = self.config.slots;
        let mut b = self.stream.launch_builder(&self.kernels.rehash);
        b.arg(&from).arg(&old_slots).arg(&to);
        // One thread per old slot (never a team); the cuckoo schemes' capped grid.
        let launch = match self.config.scheme {
            Scheme::Cuckoo | Scheme::TwoLevel => self.insert_grid(old_slots),
            _ => grid(old_slots, self.sms),
        };
        // Safety: arguments match gh_rehash; both slot arrays are live.
        unsafe { b.launch(launch) }.map_err(|e| self.err(e))?;
        let meta = self.read_meta()?;
        if meta[2] > 0 {
            return Err(Error::RehashFailed { slots, unplaced: meta[2] });
        }
        self.slots = new_slots;
        self.aux = new_aux;
        self.probe = probe;
        self.config.slots = slots;
        self.live = meta[0];
        self.tombstones = 0;
        Ok(())
    }

    fn export(&self) -> Result<(Vec<K>, Vec<V>)> {
        let (k, v, n) = self.export_device()?;
        let mut keys = vec![K::from_u64(0); n];
        let mut values = vec![V::from_bits(0); n];
        self.stream.memcpy_dtoh(&k.slice(0..n), &mut keys).map_err(|e| self.err(e))?;
        self.stream.memcpy_dtoh(&v.slice(0..n), &mut values).map_err(|e| self.err(e))?;
        let meta = self.read_meta()?;
        for (s, key) in [K::EMPTY, K::TOMBSTONE].into_iter().enumerate() {
            if (meta[META_STATE] >> (32 * s)) & 0xffff_ffff == 2 {
                keys.push(key);
                values.push(V::from_bits(meta[4 + s]));
            }
        }
        Ok((keys, values))
    }

    fn displacement(&self) -> Result<(u64, u64)> {
        let m = self.census()?;
        Ok((m[0], m[1]))
    }
}

// Keep the Rust codes and the C++ enum (`gh::ReduceOp`) in step.
const _: () = assert!(Reduce::Sum.code() == 0 && Reduce::Min.code() == 1 && Reduce::Max.code() == 2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_team_of_threads_per_hashinator_key() {
        assert_eq!(threads_per_key(Scheme::Linear), 1);
        assert_eq!(threads_per_key(Scheme::Hashinator { team: 16 }), 16);
        assert_eq!(grid(1000 * threads_per_key(Scheme::Hashinator { team: 8 }), 132).grid_dim.0, 32);
    }
}
