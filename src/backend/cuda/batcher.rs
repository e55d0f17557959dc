//! A paged table's batches split by page on the device.
//!
//! Routing a batch on the host costs several passes over it (the page of
//! every key, a counting sort of positions, a gather per page, staging
//! copies, a scatter of results per page), random accesses over arrays of
//! the batch's size, all while the GPU waits. Here the host copies the keys
//! once into pinned memory (on every core) and the rest happens on the
//! device:
//!
//! ```text
//!  host keys (values) --par copy--> pinned --H2D--> wave keys --gh_page_count--> keys per page (one small read)
//!  pages in visiting order, packed into groups that fit the scratch:
//!    wave keys --gh_page_scatter (the group's pages)--> keys (values) by page + their wave positions
//!    per page (resident or brought in): the page table's own kernel on its range of keys by page
//!    results by page --gh_page_unpermute--> results in wave order
//!  results in wave order --D2H--> pinned --par copy--> caller
//! ```
//!
//! The wave positions are 32-bit, and a call's device scratch is bounded
//! ([`Batcher::sizes`]). A wave's keys and results stay on the device for
//! the whole wave while its pages are worked on a group at a time, so a
//! batch larger than the scratch for keys by page still visits each page
//! once (splitting it by position instead would bring every page in once
//! per part). Only a batch whose keys and results alone pass the
//! allowance is split into waves.

use std::mem::size_of;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{result as cu, sys, CudaContext, CudaEvent, CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceRepr, PinnedHostSlice, PushKernelArg};

use super::kernels::{kernels, Kernels};
use super::staging::{bytes_of, copy_to_values, par_copy, par_flags};
use super::{driver_error, grid};
use crate::core::keys::{Key, Value};
use crate::core::scheme::Scheme;
use crate::routed::Router;
use crate::{Device, Result};

/// Batches of at least this many keys are split on the device: below it a
/// batch's passes on the host cost less than the launches, the small
/// read-back of the page counts and the synchronisations (the staging
/// pipeline's threshold, for the same reasons).
pub(crate) const MIN_KEYS: usize = super::staging::STAGE_MIN_KEYS;

/// Bytes a copy through the pinned buffer moves a step: the host copies a
/// step in (or out) while the bus moves another, so a copy of hundreds of
/// megabytes takes about the longer of the two, not their sum.
const STEP: usize = 16 << 20;

/// Keys a thread of `gh_page_scatter` takes per tile (`GH_SCATTER_ITEMS`).
const SCATTER_ITEMS: u64 = 8;

/// What a routed call keeps on the device besides the keys, which decides
/// its scratch per key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Carry {
    /// Values in (inserts).
    Values,
    /// Values and found flags out (`find`).
    Found,
    /// Found flags out (`contains`).
    Flags,
    /// Nothing besides the keys (`erase`).
    Keys,
}

impl Carry {
    /// Bytes per key held for a whole wave: the keys, and the values in or
    /// the results out in batch order.
    fn wave_bytes<K: Key, V: Value>(self) -> usize {
        size_of::<K>()
            + match self {
                Carry::Values => size_of::<V>(),
                Carry::Found => size_of::<V>() + 1,
                Carry::Flags => 1,
                Carry::Keys => 0,
            }
    }
    /// Bytes per key of a group: the keys by page, their positions, and
    /// their values or results by page.
    fn group_bytes<K: Key, V: Value>(self) -> usize {
        4 + self.wave_bytes::<K, V>()
    }
}

/// A wave of a batch on the device: its keys (and values) in batch order,
/// and how many fall in each page.
pub(crate) struct Wave<K: Key, V: Value> {
    keys: CudaSlice<K>,
    values: Option<CudaSlice<V>>,
    /// Keys of each page.
    pub(crate) counts: Vec<usize>,
    seed: u64,
}

impl<K: Key, V: Value> Wave<K, V> {
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

/// A group of a wave's pages, keys grouped by page on the device. Its
/// buffers hold the largest group of the wave and are refilled per group,
/// so nothing is allocated once pages are being worked on.
pub(crate) struct Routed<K: Key, V: Value> {
    /// The keys, page by page (batch order within a warp's share).
    pub(crate) keys: CudaSlice<K>,
    /// Their values, for inserts.
    pub(crate) values: Option<CudaSlice<V>>,
    /// The wave position of each of `keys`.
    pub(crate) pos: CudaSlice<u32>,
    /// Page `p`'s range of `keys` (empty for a page outside the group).
    ranges: Vec<Range<usize>>,
    /// Each page's place in the group (`u32::MAX`: not in it), and the
    /// group's cursors.
    slot: CudaSlice<u32>,
    cursor: CudaSlice<u32>,
}

impl<K: Key, V: Value> Routed<K, V> {
    /// Page `p`'s range of the keys by page.
    pub(crate) fn range(&self, p: usize) -> Range<usize> {
        self.ranges[p].clone()
    }
    /// Keys in the group.
    fn len(&self) -> usize {
        self.ranges.iter().map(|r| r.end).max().unwrap_or(0)
    }
}

/// Splits batches by page on one device and puts results back in batch
/// order; one per paged table, used under the table's lock.
pub(crate) struct Batcher {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    scheme: Scheme,
    sms: u64,
    /// Keys per wave at most.
    wave_bytes: usize,
    /// Pinned host memory for keys up and results down (cached, not
    /// write-combined: the host reads the results), grown as needed.
    pinned: Mutex<Option<PinnedHostSlice<u8>>>,
    /// What sharing a lookup's pages with the host's cores has measured
    /// (f64 bits): the host's seconds a key, and the GPU's seconds a byte
    /// of its estimated cost (`SubTables::device_cost`), tuned after every
    /// group ([`Batcher::measured`]).
    host_s_per_key: AtomicU64,
    device_s_per_byte: AtomicU64,
    /// The host's lookups beside the GPU run here: every core but one,
    /// which the thread driving the GPU keeps (its launches and waits
    /// queue behind busy cores otherwise). `None`: one core, or no pool.
    beside_pool: std::sync::OnceLock<Option<rayon::ThreadPool>>,
}

/// The rates a batcher starts from: about 0.5 billion lookups a second on
/// 16 host cores, as measured on an H200's host with small pages, and a
/// bus of 50 GB/s.
const HOST_S_PER_KEY: f64 = 2e-9;
const DEVICE_S_PER_BYTE: f64 = 1.0 / 50e9;

impl Batcher {
    /// A batcher for a paged table of `scheme` on `ctx`'s device whose
    /// scratch may take `wave_bytes` of device memory per wave.
    pub(crate) fn new(ctx: &Arc<CudaContext>, scheme: Scheme, wave_bytes: usize) -> Result<Batcher> {
        let e = |e| driver_error(ctx.ordinal(), e);
        let stream = ctx.new_stream().map_err(e)?;
        let sms = ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(e)? as u64;
        let (host_s_per_key, device_s_per_byte) = (AtomicU64::new(HOST_S_PER_KEY.to_bits()), AtomicU64::new(DEVICE_S_PER_BYTE.to_bits()));
        Ok(Batcher {
            ctx: ctx.clone(),
            stream,
            scheme,
            sms,
            wave_bytes,
            pinned: Mutex::new(None),
            host_s_per_key,
            device_s_per_byte,
            beside_pool: std::sync::OnceLock::new(),
        })
    }

    /// Runs `f` (the host's lookups beside the GPU) on every core but one.
    pub(crate) fn beside<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        let pool = self.beside_pool.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            (cores > 1).then(|| rayon::ThreadPoolBuilder::new().num_threads(cores - 1).build().ok()).flatten()
        });
        match pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }

    /// The host's seconds a key looked up beside the GPU, and the GPU's
    /// seconds a byte of its cost, as measured so far.
    pub(crate) fn rates(&self) -> (f64, f64) {
        (f64::from_bits(self.host_s_per_key.load(Ordering::Relaxed)), f64::from_bits(self.device_s_per_byte.load(Ordering::Relaxed)))
    }

    /// After a group: the host looked up `host_keys` in `host` seconds
    /// beside the GPU, which worked `device` seconds on pages costing
    /// `device_bytes`. Each rate moves three quarters of the way (in log)
    /// to the one measured: a host that runs slower while the bus is busy
    /// is learnt within a group or two, and one noisy group is damped; a
    /// side that did nothing keeps its rate.
    pub(crate) fn measured(&self, host_keys: usize, host: f64, device_bytes: u64, device: f64) {
        let tune = |rate: &AtomicU64, measured: f64| {
            if measured.is_finite() && measured > 0.0 {
                let old = f64::from_bits(rate.load(Ordering::Relaxed));
                rate.store((old.powf(0.25) * measured.powf(0.75)).to_bits(), Ordering::Relaxed);
            }
        };
        if host_keys > 0 {
            tune(&self.host_s_per_key, host / host_keys as f64);
        }
        if device_bytes > 0 {
            tune(&self.device_s_per_byte, device / device_bytes as f64);
        }
    }

    /// Waits for all work on the device (every page's stream and the
    /// batcher's).
    pub(crate) fn wait_all(&self) -> Result<()> {
        self.ctx.synchronize().map_err(|e| self.err(e))
    }

    /// The stream the batcher's own work runs on.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    fn err(&self, e: cudarc::driver::DriverError) -> crate::Error {
        driver_error(self.ctx.ordinal(), e)
    }

    fn device(&self) -> Device {
        Device::Cuda(self.ctx.ordinal())
    }

    fn kernels<K: Key, V: Value>(&self) -> Result<Arc<Kernels>> {
        kernels(&self.ctx, K::BITS, V::KIND, self.scheme)
    }

    /// The sizes of a call of `n` keys carrying `carry`: keys per wave and
    /// keys per group of pages. A wave holds its keys and results for the
    /// whole wave (three quarters of the scratch allowance at most), a
    /// group's buffers take the rest; so a batch larger than a group is
    /// still one wave, and visits each page once, as long as its keys and
    /// results fit. At least 2^22 keys each; 32-bit positions.
    pub(crate) fn sizes<K: Key, V: Value>(&self, n: usize, carry: Carry) -> (usize, usize) {
        const MIN: usize = 1 << 22;
        let (w, g) = (carry.wave_bytes::<K, V>(), carry.group_bytes::<K, V>());
        let wave = (self.wave_bytes / 4 * 3 / w).clamp(MIN, u32::MAX as usize).min(n.max(1));
        let group = (self.wave_bytes.saturating_sub(wave * w) / g).max(MIN).min(wave);
        (wave, group)
    }

    /// Uninitialised device memory for `n` items.
    pub(crate) fn alloc<T: DeviceRepr>(&self, n: usize) -> Result<CudaSlice<T>> {
        crate::fault::alloc_point((n * size_of::<T>()) as u64, self.device())?;
        // Safety: every caller writes the items before reading them.
        unsafe { self.stream.alloc::<T>(n) }.map_err(|e| self.err(e))
    }

    /// Runs `f` on a pinned buffer of at least `bytes`, or `None` when none
    /// can be had (the caller then copies from pageable memory).
    fn with_pinned<R>(&self, bytes: usize, f: impl FnOnce(Option<&mut PinnedHostSlice<u8>>) -> Result<R>) -> Result<R> {
        let mut guard = self.pinned.lock().unwrap_or_else(|p| p.into_inner());
        if guard.as_ref().is_none_or(|p| p.len() < bytes) {
            *guard = None;
            // Safety: the bytes are written (by the host or a copy) before they are read.
            *guard = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(bytes.next_power_of_two(), 0) }.ok();
        }
        f(guard.as_mut())
    }

    /// `src` in device memory (through pinned memory, copied on every core).
    pub(crate) fn upload<T: DeviceRepr + Copy + Send + Sync>(&self, src: &[T]) -> Result<CudaSlice<T>> {
        let mut dst = self.alloc::<T>(src.len())?;
        self.upload_into(src, &mut dst)?;
        Ok(dst)
    }

    /// Copies `src` into the start of `dst`, and waits for the copy.
    pub(crate) fn upload_into<T: DeviceRepr + Copy + Send + Sync>(&self, src: &[T], dst: &mut impl DevicePtrMut<T>) -> Result<()> {
        let bytes = bytes_of(src);
        self.with_pinned(bytes.len(), |pinned| {
            let (ptr, _record) = dst.device_ptr_mut(&self.stream);
            match pinned {
                Some(p) => {
                    let buf = p.as_mut_slice().map_err(|e| self.err(e))?;
                    // A step's copy into pinned memory overlaps the bus
                    // moving the step before.
                    for at in (0..bytes.len()).step_by(STEP) {
                        let end = (at + STEP).min(bytes.len());
                        par_copy(&mut buf[at..end], &bytes[at..end]);
                        // Safety: `dst` holds at least `src.len()` items (checked by the
                        // callers' lengths); the pinned source is not touched until the
                        // stream is synchronised below.
                        unsafe { cu::memcpy_htod_async(ptr + at as u64, &buf[at..end], self.stream.cu_stream()) }.map_err(|e| self.err(e))?;
                    }
                }
                None => {
                    // Safety: as above; a pageable source is copied before the call returns.
                    unsafe { cu::memcpy_htod_async(ptr, bytes, self.stream.cu_stream()) }.map_err(|e| self.err(e))?;
                }
            }
            self.stream.synchronize().map_err(|e| self.err(e))
        })
    }

    /// Items in device memory, on the host (through pinned memory, copied
    /// out on every core: a pageable copy of tens of megabytes runs at a
    /// few GB/s).
    pub(crate) fn download<T: DeviceRepr + bytemuck::Pod + Send + Sync>(&self, src: &CudaView<'_, T>) -> Result<Vec<T>> {
        let e = |e| self.err(e);
        let n = src.len();
        let bytes = n * size_of::<T>();
        let mut out: Vec<T> = bytemuck::allocation::try_zeroed_vec(n)
            .map_err(|()| crate::Error::OutOfMemory { bytes: bytes as u64, device: "host memory for results".into() })?;
        self.with_pinned(bytes, |pinned| {
            match pinned {
                Some(p) => {
                    let buf = p.as_mut_slice().map_err(e)?;
                    let (ptr, _record) = src.device_ptr(&self.stream);
                    let out: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
                    for (r, done) in self.steps_down(buf, 0, ptr, bytes)? {
                        done.synchronize().map_err(e)?;
                        par_copy(&mut out[r.clone()], &buf[r]);
                    }
                }
                None => {
                    self.stream.memcpy_dtoh(src, &mut out).map_err(e)?;
                    self.stream.synchronize().map_err(e)?;
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// Queues the copy of `len` bytes at `src` on the device into
    /// `buf[at..]` (pinned) a step at a time: each step's range of `buf`,
    /// with the event that marks it landed. `buf` must not be read before.
    fn steps_down(&self, buf: &mut [u8], at: usize, src: sys::CUdeviceptr, len: usize) -> Result<Vec<(Range<usize>, CudaEvent)>> {
        (0..len)
            .step_by(STEP)
            .map(|from| {
                let r = at + from..at + (from + STEP).min(len);
                // Safety: the callers size `buf` past `at + len` and `src`
                // to `len` bytes; `buf` is read only after the event.
                unsafe { cu::memcpy_dtoh_async(&mut buf[r.clone()], src + from as u64, self.stream.cu_stream()) }.map_err(|e| self.err(e))?;
                Ok((r, self.stream.record_event(None).map_err(|e| self.err(e))?))
            })
            .collect()
    }

    /// Uploads a wave of `keys` (and `values`) and counts its keys by
    /// `router`'s pages. Needs `keys.len() <= u32::MAX`.
    pub(crate) fn load<K: Key, V: Value>(&self, router: Router, keys: &[K], values: Option<&[V]>) -> Result<Wave<K, V>> {
        let n = keys.len();
        let pages = router.count();
        let k = self.kernels::<K, V>()?;
        let e = |e| self.err(e);
        let d_keys = self.upload(keys)?;
        let d_values = match values {
            Some(v) => Some(self.upload(v)?),
            None => None,
        };
        crate::fault::alloc_point(4 * pages as u64, self.device())?;
        let mut hist = self.stream.alloc_zeros::<u32>(pages).map_err(e)?;
        let (n64, seed, pages64) = (n as u64, router.seed(), pages as u64);
        let mut b = self.stream.launch_builder(&k.page.count);
        b.arg(&d_keys).arg(&n64).arg(&seed).arg(&pages64).arg(&mut hist);
        // Safety: matches gh_page_count; `hist` holds `pages` counters.
        unsafe { b.launch(grid(n64, self.sms)) }.map_err(e)?;
        let counts = self.stream.clone_dtoh(&hist).map_err(e)?;
        self.stream.synchronize().map_err(e)?;
        Ok(Wave { keys: d_keys, values: d_values, counts: counts.into_iter().map(|c| c as usize).collect(), seed })
    }

    /// Buffers for the groups of `wave`, each of at most `keys` keys.
    pub(crate) fn group_buffers<K: Key, V: Value>(&self, wave: &Wave<K, V>, keys: usize) -> Result<Routed<K, V>> {
        let pages = wave.counts.len();
        Ok(Routed {
            keys: self.alloc::<K>(keys)?,
            values: match wave.values {
                Some(_) => Some(self.alloc::<V>(keys)?),
                None => None,
            },
            pos: self.alloc::<u32>(keys)?,
            ranges: vec![0..0; pages],
            slot: self.alloc::<u32>(pages)?,
            cursor: self.alloc::<u32>(pages)?,
        })
    }

    /// Fills `r` with the keys of `group` (pages of `wave`; their keys fit
    /// its buffers), grouped by page in the group's order.
    pub(crate) fn route<K: Key, V: Value>(&self, wave: &Wave<K, V>, group: &[usize], r: &mut Routed<K, V>) -> Result<()> {
        let pages = wave.counts.len();
        let k = self.kernels::<K, V>()?;
        let e = |e| self.err(e);
        let mut slot = vec![u32::MAX; pages];
        let mut cursor = Vec::with_capacity(group.len());
        r.ranges = vec![0..0; pages];
        let mut at = 0usize;
        // The group's pages, in its order (not necessarily ascending).
        for (i, &p) in group.iter().enumerate() {
            slot[p] = i as u32;
            cursor.push(at as u32);
            r.ranges[p] = at..at + wave.counts[p];
            at += wave.counts[p];
        }
        assert!(at <= r.keys.len(), "a group's keys fit its buffers");
        self.stream.memcpy_htod(&slot, &mut r.slot).map_err(e)?;
        self.stream.memcpy_htod(&cursor, &mut r.cursor.slice_mut(0..group.len())).map_err(e)?;
        let (n64, pages64) = (wave.len() as u64, pages as u64);
        let null = 0u64;
        let mut b = self.stream.launch_builder(&k.page.scatter);
        b.arg(&wave.keys);
        match &wave.values {
            Some(v) => b.arg(v),
            None => b.arg(&null),
        };
        let slots64 = group.len() as u64;
        b.arg(&n64).arg(&wave.seed).arg(&pages64).arg(&r.slot).arg(&slots64).arg(&mut r.cursor).arg(&mut r.keys);
        match &mut r.values {
            Some(v) => b.arg(v),
            None => b.arg(&null),
        };
        b.arg(&mut r.pos);
        // Safety: matches gh_page_scatter; the counts place every key of
        // the group inside `keys`, `values` and `pos`. Each block takes
        // tiles of SCATTER_ITEMS keys a thread.
        unsafe { b.launch(grid(n64.div_ceil(SCATTER_ITEMS), self.sms)) }.map_err(e)?;
        // The page tables' streams read these next.
        self.stream.synchronize().map_err(e)
    }

    /// Puts a group's results by page (`values`, optional, and `found`)
    /// back in wave order into `out_values` and `out_found`.
    pub(crate) fn unpermute<K: Key, V: Value>(
        &self,
        r: &Routed<K, V>,
        values: Option<(&CudaSlice<V>, &mut CudaSlice<V>)>,
        found: (&CudaSlice<u8>, &mut CudaSlice<u8>),
    ) -> Result<()> {
        let n64 = r.len() as u64;
        if n64 == 0 {
            return Ok(());
        }
        let k = self.kernels::<K, V>()?;
        let null = 0u64;
        let mut b = self.stream.launch_builder(&k.page.unpermute);
        b.arg(&r.pos).arg(&n64);
        match values {
            Some((v, o)) => b.arg(v).arg(found.0).arg(o),
            None => b.arg(&null).arg(found.0).arg(&null),
        };
        b.arg(found.1);
        // Safety: matches gh_page_unpermute; the positions are distinct and
        // below the wave's length, which the outputs hold; the inputs hold
        // the group's keys (the null pointers are skipped).
        unsafe { b.launch(grid(n64, self.sms)) }.map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Copies a wave's results (`values`, optional, and `found`) into the
    /// caller's slices.
    pub(crate) fn download_results<V: Value>(&self, values: Option<(&CudaSlice<V>, &mut [V])>, found: (&CudaSlice<u8>, &mut [bool])) -> Result<()> {
        let n = found.1.len();
        let e = |e| self.err(e);
        let vbytes = values.as_ref().map_or(0, |(_, v)| std::mem::size_of_val(*v));
        self.with_pinned(vbytes + n, |pinned| {
            let Some(p) = pinned else {
                // No pinned memory: pageable copies.
                if let Some((src, dst)) = values {
                    self.stream.memcpy_dtoh(&src.slice(0..dst.len()), dst).map_err(e)?;
                }
                let flags = self.stream.clone_dtoh(&found.0.slice(0..n)).map_err(e)?;
                self.stream.synchronize().map_err(e)?;
                par_flags(found.1, &flags);
                return Ok(());
            };
            let buf = p.as_mut_slice().map_err(e)?;
            // Every step is queued first; each is copied out once it has
            // landed, while the later ones cross the bus.
            let mut steps = Vec::new();
            if let Some((src, _)) = &values {
                let (ptr, _record) = src.device_ptr(&self.stream);
                steps = self.steps_down(buf, 0, ptr, vbytes)?;
            }
            let (ptr, _record) = found.0.device_ptr(&self.stream);
            steps.extend(self.steps_down(buf, vbytes, ptr, n)?);
            let mut values = values.map(|(_, dst)| dst);
            for (r, done) in steps {
                done.synchronize().map_err(e)?;
                match values.as_deref_mut() {
                    Some(dst) if r.end <= vbytes => {
                        let size = size_of::<V>();
                        copy_to_values(&mut dst[r.start / size..r.end / size], &buf[r]);
                    }
                    _ => par_flags(&mut found.1[r.start - vbytes..r.end - vbytes], &buf[r]),
                }
            }
            Ok(())
        })
    }
}
