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

use cudarc::driver::{result as cu, CudaContext, CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceRepr, PinnedHostSlice, PushKernelArg};

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
    /// The share of the keys of the pages a lookup reads in place that the
    /// host's cores look up beside the GPU (f64 bits), tuned after each
    /// group so both sides finish together ([`Batcher::tune_host_share`]).
    host_share: AtomicU64,
}

/// Bounds of [`Batcher::host_share`]: the host always takes the smallest
/// page at least (so its rate keeps being measured), the GPU may take none.
const HOST_SHARE: (f64, f64) = (1.0 / 64.0, 1.0);

impl Batcher {
    /// A batcher for a paged table of `scheme` on `ctx`'s device whose
    /// scratch may take `wave_bytes` of device memory per wave.
    pub(crate) fn new(ctx: &Arc<CudaContext>, scheme: Scheme, wave_bytes: usize) -> Result<Batcher> {
        let e = |e| driver_error(ctx.ordinal(), e);
        let stream = ctx.new_stream().map_err(e)?;
        let sms = ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(e)? as u64;
        let host_share = AtomicU64::new(0.5f64.to_bits());
        Ok(Batcher { ctx: ctx.clone(), stream, scheme, sms, wave_bytes, pinned: Mutex::new(None), host_share })
    }

    /// The share of the keys read in place that the host looks up.
    pub(crate) fn host_share(&self) -> f64 {
        f64::from_bits(self.host_share.load(Ordering::Relaxed))
    }

    /// After a group whose pages read in place were shared: the host took
    /// `host` seconds for its share, the GPU `device` for everything else
    /// (its own pages and the rest of those read in place). The share moves
    /// toward both taking as long (by the square root of their ratio, so a
    /// noisy group moves it less), within [`HOST_SHARE`].
    pub(crate) fn tune_host_share(&self, host: f64, device: f64) {
        if !(host > 0.0 && device > 0.0) {
            return;
        }
        let share = (self.host_share() * (device / host).sqrt()).clamp(HOST_SHARE.0, HOST_SHARE.1);
        self.host_share.store(share.to_bits(), Ordering::Relaxed);
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
                    par_copy(buf, bytes);
                    // Safety: `dst` holds at least `src.len()` items (checked by the
                    // callers' lengths); the pinned source is not touched until the
                    // stream is synchronised below.
                    unsafe { cu::memcpy_htod_async(ptr, &buf[..bytes.len()], self.stream.cu_stream()) }.map_err(|e| self.err(e))?;
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
                    // Safety: `buf` holds at least `bytes`, `src` exactly;
                    // read only after the synchronisation below.
                    unsafe { cu::memcpy_dtoh_async(&mut buf[..bytes], ptr, self.stream.cu_stream()) }.map_err(e)?;
                    self.stream.synchronize().map_err(e)?;
                    par_copy(bytemuck::cast_slice_mut(&mut out), &buf[..bytes]);
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
        b.arg(&n64).arg(&wave.seed).arg(&pages64).arg(&r.slot).arg(&mut r.cursor).arg(&mut r.keys);
        match &mut r.values {
            Some(v) => b.arg(v),
            None => b.arg(&null),
        };
        b.arg(&mut r.pos);
        // Safety: matches gh_page_scatter; the counts place every key of
        // the group inside `keys`, `values` and `pos`.
        unsafe { b.launch(grid(n64, self.sms)) }.map_err(e)?;
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
        let vbytes = values.as_ref().map_or(0, |(_, v)| v.len() * size_of::<V>());
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
            if let Some((src, _)) = &values {
                let (ptr, _record) = src.device_ptr(&self.stream);
                // Safety: `buf` holds vbytes + n bytes and `src` at least
                // vbytes; read only after the synchronisation below.
                unsafe { cu::memcpy_dtoh_async(&mut buf[..vbytes], ptr, self.stream.cu_stream()) }.map_err(e)?;
            }
            let (ptr, _record) = found.0.device_ptr(&self.stream);
            // Safety: as above.
            unsafe { cu::memcpy_dtoh_async(&mut buf[vbytes..vbytes + n], ptr, self.stream.cu_stream()) }.map_err(e)?;
            self.stream.synchronize().map_err(e)?;
            if let Some((_, dst)) = values {
                copy_to_values(dst, &buf[..vbytes]);
            }
            par_flags(found.1, &buf[vbytes..vbytes + n]);
            Ok(())
        })
    }
}
