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
//!  host keys --par copy--> pinned --H2D--> keys --gh_page_count--> page of each key, keys per page
//!                                                                          | prefix sums (host, one small read)
//!                          keys, page --gh_page_scatter--> keys by page + their batch positions
//!  per page (resident or brought in): the page table's own kernel on its range of keys by page
//!  results by page --gh_page_unpermute--> results in batch order --D2H--> pinned --par copy--> caller
//! ```
//!
//! The batch positions are 32-bit, and a batch's device scratch is bounded
//! ([`Batcher::wave`]): a larger batch is worked on in waves, each visiting
//! the pages it touches.

use std::mem::size_of;
use std::ops::Range;
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

/// Device scratch per key of a routed lookup: the keys and their pages,
/// then the keys by page and their positions, then results by page and in
/// batch order (a value and a found byte each).
fn scratch_per_key<K: Key, V: Value>() -> usize {
    2 * size_of::<K>() + 2 * 4 + 2 * (size_of::<V>() + 1)
}

/// A batch's keys grouped by page on the device.
pub(crate) struct Routed<K: Key> {
    /// The keys, page by page (batch order within a warp's share).
    pub(crate) keys: CudaSlice<K>,
    /// The batch position of each of `keys`.
    pos: CudaSlice<u32>,
    /// Page `p`'s keys are `keys[starts[p]..starts[p + 1]]`.
    starts: Vec<usize>,
}

impl<K: Key> Routed<K> {
    /// Pages with at least one key, ascending.
    pub(crate) fn touched(&self) -> Vec<usize> {
        (0..self.starts.len() - 1).filter(|&p| self.starts[p + 1] > self.starts[p]).collect()
    }
    /// Page `p`'s range of the keys by page.
    pub(crate) fn range(&self, p: usize) -> Range<usize> {
        self.starts[p]..self.starts[p + 1]
    }
    fn len(&self) -> usize {
        self.keys.len()
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
}

impl Batcher {
    /// A batcher for a paged table of `scheme` on `ctx`'s device whose
    /// scratch may take `wave_bytes` of device memory per wave.
    pub(crate) fn new(ctx: &Arc<CudaContext>, scheme: Scheme, wave_bytes: usize) -> Result<Batcher> {
        let e = |e| driver_error(ctx.ordinal(), e);
        let stream = ctx.new_stream().map_err(e)?;
        let sms = ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(e)? as u64;
        Ok(Batcher { ctx: ctx.clone(), stream, scheme, sms, wave_bytes, pinned: Mutex::new(None) })
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

    /// Keys per wave: the scratch of a wave within the budget given at
    /// creation, at least 2^22 keys, and 32-bit positions.
    pub(crate) fn wave<K: Key, V: Value>(&self) -> usize {
        (self.wave_bytes / scratch_per_key::<K, V>()).clamp(1 << 22, u32::MAX as usize)
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

    /// Keys in device memory, on the host.
    pub(crate) fn download_keys<K: Key>(&self, src: &CudaView<'_, K>) -> Result<Vec<K>> {
        let mut out = vec![K::from_u64(0); src.len()];
        self.stream.memcpy_dtoh(src, &mut out).map_err(|e| self.err(e))?;
        self.stream.synchronize().map_err(|e| self.err(e))?;
        Ok(out)
    }

    /// Splits `keys` by `router`'s pages on the device. Needs
    /// `keys.len() <= u32::MAX` (the caller waves larger batches).
    pub(crate) fn route<K: Key, V: Value>(&self, router: Router, keys: &[K]) -> Result<Routed<K>> {
        let n = keys.len();
        let pages = router.count();
        let k = self.kernels::<K, V>()?;
        let e = |e| self.err(e);
        let d_keys = self.upload(keys)?;
        let mut page = self.alloc::<u32>(n)?;
        crate::fault::alloc_point(4 * pages as u64, self.device())?;
        let mut hist = self.stream.alloc_zeros::<u32>(pages).map_err(e)?;
        let (n64, seed, pages64) = (n as u64, router.seed(), pages as u64);
        let mut b = self.stream.launch_builder(&k.page.count);
        b.arg(&d_keys).arg(&n64).arg(&seed).arg(&pages64).arg(&mut page).arg(&mut hist);
        // Safety: matches gh_page_count; `page` holds n items, `hist` `pages`.
        unsafe { b.launch(grid(n64, self.sms)) }.map_err(e)?;
        let counts = self.stream.clone_dtoh(&hist).map_err(e)?;
        self.stream.synchronize().map_err(e)?;
        let mut starts = Vec::with_capacity(pages + 1);
        starts.push(0usize);
        for c in &counts {
            starts.push(starts.last().copied().unwrap_or(0) + *c as usize);
        }
        let cursor_host: Vec<u32> = starts[..pages].iter().map(|&s| s as u32).collect();
        let mut cursor = self.stream.clone_htod(&cursor_host).map_err(e)?;
        let mut sorted = self.alloc::<K>(n)?;
        let mut pos = self.alloc::<u32>(n)?;
        let mut b = self.stream.launch_builder(&k.page.scatter);
        b.arg(&d_keys).arg(&page).arg(&n64).arg(&mut cursor).arg(&mut sorted).arg(&mut pos);
        // Safety: matches gh_page_scatter; the counts place every key inside
        // `sorted` and `pos` (n items each).
        unsafe { b.launch(grid(n64, self.sms)) }.map_err(e)?;
        // The page tables' streams read these next.
        self.stream.synchronize().map_err(e)?;
        Ok(Routed { keys: sorted, pos, starts })
    }

    /// Puts results by page (`values`, optional, and `found`) back in batch
    /// order into the caller's slices.
    pub(crate) fn unpermute<K: Key, V: Value>(
        &self,
        routed: &Routed<K>,
        values: Option<(&CudaSlice<V>, &mut [V])>,
        found: (&CudaSlice<u8>, &mut [bool]),
    ) -> Result<()> {
        let n = routed.len();
        let k = self.kernels::<K, V>()?;
        let e = |e| self.err(e);
        let mut out_f = self.alloc::<u8>(n)?;
        let mut out_v = match values {
            Some(_) => Some(self.alloc::<V>(n)?),
            None => None,
        };
        let n64 = n as u64;
        let null = 0u64;
        let mut b = self.stream.launch_builder(&k.page.unpermute);
        b.arg(&routed.pos).arg(&n64);
        match (&values, &mut out_v) {
            (Some((v, _)), Some(o)) => b.arg(*v).arg(found.0).arg(o),
            _ => b.arg(&null).arg(found.0).arg(&null),
        };
        b.arg(&mut out_f);
        // Safety: matches gh_page_unpermute; positions are a permutation of
        // 0..n and every array holds n items (the null pointers are skipped).
        unsafe { b.launch(grid(n64, self.sms)) }.map_err(e)?;
        let vbytes = if values.is_some() { n * size_of::<V>() } else { 0 };
        self.with_pinned(vbytes + n, |pinned| {
            let Some(p) = pinned else {
                // No pinned memory: pageable copies.
                if let (Some((_, dst)), Some(o)) = (values, &out_v) {
                    self.stream.memcpy_dtoh(o, dst).map_err(e)?;
                }
                let flags = self.stream.clone_dtoh(&out_f).map_err(e)?;
                self.stream.synchronize().map_err(e)?;
                par_flags(found.1, &flags);
                return Ok(());
            };
            let buf = p.as_mut_slice().map_err(e)?;
            if let Some(o) = &out_v {
                let (ptr, _record) = o.device_ptr(&self.stream);
                // Safety: `buf` holds vbytes + n bytes; read only after the synchronisation below.
                unsafe { cu::memcpy_dtoh_async(&mut buf[..vbytes], ptr, self.stream.cu_stream()) }.map_err(e)?;
            }
            let (ptr, _record) = out_f.device_ptr(&self.stream);
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
