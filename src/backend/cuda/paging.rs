//! Pages of a paged table on a CUDA device: each host page is a CPU table
//! whose cells are page-locked (registered with the driver), so a copy
//! engine moves it whole to or from a resident device table while kernels
//! run on other streams. The layout is the same word for word on both
//! sides, so a page is copied as raw bytes, never re-inserted.
//!
//! Copies are asynchronous on the resident table's stream:
//! * bringing a page in enqueues its upload ahead of the kernels of the
//!   first operation on it (the same stream orders them);
//! * writing a page back enqueues the download and records an event on the
//!   host page; every use of the host page (an operation served in host
//!   memory, a later upload on another stream, a resize) waits for it.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream, CudaView, CudaViewMut, DevicePtr, PushKernelArg};

use super::{driver_error, CudaTable, META_STATE, META_WORDS};
use crate::backend::cpu::{CpuTable, PageCounts};
use crate::backend::{Backend, Config, InsertMode, RawInsert};
use crate::core::keys::{Key, Value};
use crate::core::layout::Word;
use crate::core::scheme::Scheme;
use crate::{Device, Error, Result};

/// A page in host memory: a CPU table with its cells page-locked.
pub(crate) struct HostPage<K: Key, V: Value> {
    table: CpuTable<K, V>,
    ctx: Arc<CudaContext>,
    /// The registered range (address, bytes), unregistered on drop or
    /// before the cells are freed.
    pinned: Option<(usize, usize)>,
    /// A download into the cells still in flight.
    pending: Option<CudaEvent>,
}

impl<K: Key, V: Value> HostPage<K, V> {
    /// An empty page of `config.slots` slots, page-locked for `ctx`'s device.
    /// A registration the driver refuses is an error: the caller asked for
    /// pages the GPU can stream.
    pub(crate) fn new(ctx: &Arc<CudaContext>, config: Config) -> Result<Self> {
        let mut page = HostPage { table: CpuTable::new(config)?, ctx: ctx.clone(), pinned: None, pending: None };
        page.pin()?;
        Ok(page)
    }

    fn device(&self) -> Device {
        Device::Cuda(self.ctx.ordinal())
    }

    /// Registers the cells with the driver (page-locked, usable by every context).
    fn pin(&mut self) -> Result<()> {
        let (ptr, bytes) = self.table.cell_bytes();
        let refused = |why: String| Error::OutOfMemory {
            bytes: bytes as u64,
            device: format!("pinned host memory for a page of {} ({why})", self.device()),
        };
        crate::fault::alloc_point(bytes as u64, self.device()).map_err(|e| refused(e.to_string()))?;
        let e = |e| driver_error(self.ctx.ordinal(), e);
        self.ctx.bind_to_thread().map_err(e)?;
        // Safety: the range is the live cell allocation, unregistered (in
        // `unpin`) before it is freed or moved.
        // Mapped as well: lookups may read a page where it lies (`find_in_place`).
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        let r = unsafe { sys::cuMemHostRegister_v2(ptr as *mut c_void, bytes, flags) };
        match r.result() {
            Ok(()) => {
                self.pinned = Some((ptr as usize, bytes));
                Ok(())
            }
            Err(err) => Err(refused(format!("{err:?}"))),
        }
    }

    fn unpin(&mut self) {
        self.settle();
        if let Some((ptr, _)) = self.pinned.take() {
            let _ = self.ctx.bind_to_thread();
            // Safety: registered by `pin`, once; no copy is in flight (settled).
            let r = unsafe { sys::cuMemHostUnregister(ptr as *mut c_void) };
            self.ctx.record_err(r.result());
        }
    }

    /// Waits for a download into the cells, if one is in flight.
    fn settle(&mut self) {
        if let Some(ev) = self.pending.take() {
            self.ctx.record_err(ev.synchronize());
        }
    }

    /// As `settle`, for readers (the event stays; waiting again is free).
    fn settled(&self) -> &CpuTable<K, V> {
        if let Some(ev) = &self.pending {
            self.ctx.record_err(ev.synchronize());
        }
        &self.table
    }

    /// The table, for a change: waits for copies first.
    fn table_mut(&mut self) -> &mut CpuTable<K, V> {
        self.settle();
        &mut self.table
    }

    /// Runs a change that may replace the cells (a rebuild): unregisters
    /// them first and registers whatever cells the table has afterwards.
    /// Should the new cells not register, the page still works (its
    /// copies then go through the driver's staging, slower).
    fn rebuild(&mut self, f: impl FnOnce(&mut CpuTable<K, V>) -> Result<()>) -> Result<()> {
        self.unpin();
        let r = f(&mut self.table);
        let _ = self.pin();
        r
    }

    /// Makes this page `config.slots` slots (its contents are about to be
    /// overwritten by a download): a resident copy grew.
    fn resize_for_download(&mut self, config: Config) -> Result<()> {
        if self.table.config().slots == config.slots {
            return Ok(());
        }
        let fresh = CpuTable::new(config)?;
        self.unpin();
        self.table = fresh;
        let _ = self.pin();
        Ok(())
    }
}

impl<K: Key, V: Value> HostPage<K, V> {
    /// Whether kernels can read the cells where they lie (they are
    /// page-locked and mapped; a rebuild whose new cells did not register
    /// leaves a page that is only copied).
    pub(crate) fn mapped(&self) -> bool {
        self.pinned.is_some()
    }

    /// Looks `keys` (device memory) up in this page where it lies: the
    /// page's own lookup kernel, on `stream`, reads the page-locked cells
    /// over the bus (zero-copy), so a sparse batch moves the buckets it
    /// probes instead of the page. `values`: `find`, else `contains`.
    /// The scheme words and out-of-band pairs go to the device first (a
    /// few words). Waits for a download into the page still in flight.
    pub(crate) fn find_in_place(
        &self,
        stream: &Arc<CudaStream>,
        keys: &CudaView<'_, K>,
        values: Option<&mut CudaViewMut<'_, V>>,
        found: &mut CudaViewMut<'_, u8>,
    ) -> Result<u64> {
        let n = keys.len() as u64;
        if n == 0 {
            return Ok(0);
        }
        let e = |e| driver_error(self.ctx.ordinal(), e);
        let Some((host_ptr, _)) = self.pinned else {
            return Err(Error::Unsupported("a page that is not page-locked cannot be read in place".into()));
        };
        let config = self.table.config();
        let kernels = super::kernels::kernels(&self.ctx, K::BITS, V::KIND, config.scheme)?;
        if let Some(ev) = &self.pending {
            stream.wait(ev).map_err(e)?;
        }
        self.ctx.bind_to_thread().map_err(e)?;
        let mut cells: sys::CUdeviceptr = 0;
        // Safety: `host_ptr` is the start of a range registered with DEVICEMAP.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut cells, host_ptr as *mut c_void, 0) }.result().map_err(e)?;
        let meta_words = page_meta(&self.table.counts());
        crate::fault::alloc_point(8 * META_WORDS as u64, self.device())?;
        let meta = stream.clone_htod(&meta_words).map_err(e)?;
        let aux_words = self.table.aux_words();
        let aux = stream.clone_htod(if aux_words.is_empty() { &[0u64][..] } else { &aux_words }).map_err(e)?;
        let buckets = config.slots / K::Word::<V>::slots_per_bucket() as u64;
        let (meta_ptr, _g1) = meta.device_ptr(stream);
        let (aux_ptr, _g2) = aux.device_ptr(stream);
        let view = super::DeviceView {
            slots: cells,
            buckets,
            seed: config.seed,
            limit: config.max_probe_buckets.clamp(1, buckets),
            meta: meta_ptr,
            aux: aux_ptr,
            scheme: config.scheme.code(),
            param: config.scheme.param(),
        };
        let sms = self.ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(e)? as u64;
        let cfg = super::grid(n.saturating_mul(super::threads_per_key(config.scheme)), sms);
        match values {
            Some(v) => {
                let mut b = stream.launch_builder(&kernels.find);
                b.arg(&view).arg(keys).arg(&n).arg(v).arg(found);
                // Safety: arguments match gh_find; outputs hold n elements;
                // the view's cells stay registered while the page is borrowed.
                unsafe { b.launch(cfg) }.map_err(e)?;
            }
            None => {
                let mut b = stream.launch_builder(&kernels.contains);
                b.arg(&view).arg(keys).arg(&n).arg(found);
                // Safety: as above, for gh_contains.
                unsafe { b.launch(cfg) }.map_err(e)?;
            }
        }
        let counters = stream.clone_dtoh(&meta).map_err(e)?;
        stream.synchronize().map_err(e)?;
        Ok(counters[3])
    }
}

/// A metadata block for `c`: counters zero, the out-of-band pairs present.
fn page_meta<V: Value>(c: &PageCounts<V>) -> [u64; META_WORDS] {
    let mut meta = [0u64; META_WORDS];
    let mut state = 0u64;
    for (s, v) in c.specials.iter().enumerate() {
        if let Some(v) = v {
            meta[4 + s] = v.to_bits();
            state |= 2 << (32 * s);
        }
    }
    meta[META_STATE] = state;
    meta
}

impl<K: Key, V: Value> Drop for HostPage<K, V> {
    fn drop(&mut self) {
        self.unpin();
    }
}

impl<K: Key, V: Value> Backend<K, V> for HostPage<K, V> {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn device(&self) -> Device {
        Device::Cpu
    }
    fn scheme(&self) -> Scheme {
        self.table.scheme()
    }
    fn slots(&self) -> u64 {
        self.table.slots()
    }
    // The counts are set when a download is enqueued: no wait needed.
    fn len(&self) -> u64 {
        self.table.len()
    }
    fn used(&self) -> u64 {
        self.table.used()
    }
    fn out_of_band(&self) -> u64 {
        self.table.out_of_band()
    }
    fn tombstones(&self) -> u64 {
        self.table.tombstones()
    }
    fn insert(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        self.table_mut().insert(keys, values, mode)
    }
    fn find(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        self.settled().find(keys, values, found)
    }
    fn contains(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        self.settled().contains(keys, found)
    }
    fn erase(&mut self, keys: &[K]) -> Result<u64> {
        self.table_mut().erase(keys)
    }
    fn clear(&mut self) -> Result<()> {
        self.table_mut().clear()
    }
    fn rehash(&mut self, slots: u64) -> Result<()> {
        self.rebuild(|t| t.rehash(slots))
    }
    fn clean_tombstones(&mut self) -> Result<()> {
        self.rebuild(|t| t.clean_tombstones())
    }
    fn export(&self) -> Result<(Vec<K>, Vec<V>)> {
        self.settled().export()
    }
    fn displacement(&self) -> Result<(u64, u64)> {
        self.settled().displacement()
    }
}

impl<K: Key, V: Value> CudaTable<K, V> {
    /// Gives the table `slots` slots of undefined contents and zeroed scheme
    /// words, keeping its metadata block: a page is about to be copied in.
    fn resize_storage(&mut self, slots: u64) -> Result<()> {
        if slots == self.config.slots {
            return Ok(());
        }
        (self.slots, self.aux, self.probe) = self.fresh_storage(slots)?;
        self.config.slots = slots;
        Ok(())
    }

    /// Makes this table a copy of `host`: resizes it to the page if need be,
    /// then enqueues the upload of the cells on the table's stream (after
    /// any download into the page still in flight), so the next operation's
    /// kernels follow it. Returns before the upload has finished.
    pub(crate) fn load_page(&mut self, host: &HostPage<K, V>) -> Result<()> {
        self.resize_storage(host.table.slots())?;
        if let Some(ev) = &host.pending {
            self.stream.wait(ev).map_err(|e| self.err(e))?;
        }
        // The small copies from pageable memory first: the driver may hold
        // the host until such a copy runs, and behind the page it would wait
        // for the whole upload, which prefetching means to overlap.
        let aux = host.table.aux_words();
        let n = aux.len().min(self.aux.len());
        let mut dst_aux = self.aux.slice_mut(0..n);
        self.stream.memcpy_htod(&aux[..n], &mut dst_aux).map_err(|e| self.err(e))?;
        let c = host.table.counts();
        let meta = page_meta(&c);
        self.stream.memcpy_htod(&meta, &mut *self.meta).map_err(|e| self.err(e))?;
        let (src, bytes) = host.table.cell_bytes();
        debug_assert_eq!(bytes as u64, self.slots.bytes() as u64);
        let dst = self.slots.device_ptr(&self.stream);
        self.ctx.bind_to_thread().map_err(|e| self.err(e))?;
        // Safety: both ranges are `bytes` long and live; the host page stays
        // unchanged until the stream passes this copy (changes to a host
        // page wait for its resident copy to leave; see `paged`).
        unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src as *const c_void, bytes, self.stream.cu_stream()) }
            .result()
            .map_err(|e| self.err(e))?;
        self.live = c.live;
        self.tombstones = c.tombstones;
        self.specials = c.specials.iter().filter(|s| s.is_some()).count() as u64;
        self.pristine.store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Copies this table into `host` (resized to it first if it grew):
    /// the counts, out-of-band pairs and scheme words now, the cells by a
    /// download left in flight on the table's stream, which the host page
    /// waits for before any use.
    pub(crate) fn store_page(&self, host: &mut HostPage<K, V>) -> Result<()> {
        host.settle();
        host.resize_for_download(Config { slots: self.config.slots, ..host.table.config() })?;
        let meta = self.read_meta()?;
        let mut aux = vec![0u64; self.aux.len()];
        self.stream.memcpy_dtoh(&*self.aux, &mut aux).map_err(|e| self.err(e))?;
        let (dst, bytes) = host.table.cell_bytes_mut();
        let src = self.slots.device_ptr(&self.stream);
        self.ctx.bind_to_thread().map_err(|e| self.err(e))?;
        // Safety: both ranges are `bytes` long and live; the host page is
        // not touched until the event recorded below has passed.
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst as *mut c_void, src, bytes, self.stream.cu_stream()) }
            .result()
            .map_err(|e| self.err(e))?;
        let ev = self.stream.record_event(None).map_err(|e| self.err(e))?;
        let mut specials = [None, None];
        for (s, slot) in specials.iter_mut().enumerate() {
            if (meta[META_STATE] >> (32 * s)) & 0xffff_ffff == 2 {
                *slot = Some(V::from_bits(meta[4 + s]));
            }
        }
        host.table.set_aux_words(&aux);
        host.table.set_counts(PageCounts { live: self.live, tombstones: self.tombstones, specials });
        host.pending = Some(ev);
        Ok(())
    }
}

/// Creates host pages and resident tables of one CUDA device.
pub(crate) struct CudaPages {
    ordinal: usize,
    ctx: Arc<CudaContext>,
}

impl CudaPages {
    pub(crate) fn new(ordinal: usize) -> Result<Self> {
        crate::backend::cuda_available(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| driver_error(ordinal, e))?;
        Ok(CudaPages { ordinal, ctx })
    }

    /// The batcher of a paged table of `scheme` whose batches' device
    /// scratch may take `wave_bytes`.
    pub(crate) fn batcher(&self, scheme: Scheme, wave_bytes: usize) -> Result<super::batcher::Batcher> {
        super::batcher::Batcher::new(&self.ctx, scheme, wave_bytes)
    }

    /// An empty page in pinned host memory.
    pub(crate) fn host_page<K: Key, V: Value>(&self, config: Config) -> Result<HostPage<K, V>> {
        HostPage::new(&self.ctx, config)
    }

    /// A new resident copy of `host`.
    pub(crate) fn page_in<K: Key, V: Value>(&self, host: &HostPage<K, V>) -> Result<CudaTable<K, V>> {
        let mut t = CudaTable::new(self.ordinal, host.table.config())?;
        t.load_page(host)?;
        Ok(t)
    }
}
