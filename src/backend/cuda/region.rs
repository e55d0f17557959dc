//! The region build: large batches of the linear scheme inserted one region
//! (64 KiB of buckets) per thread block in shared memory.
//!
//! Inserting key by key costs each key a random compare-and-swap in device
//! memory (the CAS limit, about 16 G/s on an H200). Binning the batch by
//! region first turns those into shared-memory atomics, and the table moves
//! through device memory once each way, coalesced. The result is the table
//! the plain kernel would build: within a region the same first-EMPTY-slot
//! rule applies, and keys whose sequence leaves their region (or that do not
//! fit their bin) continue with the plain kernel afterwards (`kernels/bulk.cu`).
//!
//! **Off by default** (`GPUHASH_REGION_BUILD=1` turns it on): measured on an
//! H200 (2^26 u32 keys into 2^27 slots), it inserted at 10.4 G/s against the
//! plain kernel's 12.7. The scatter pass bins with one global atomic per key
//! on 16 Ki hot counters; a radix-style partition (block-local histograms,
//! one offset per bin and block) is the part to replace before it can pay.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, CudaView, DriverError, LaunchConfig, PushKernelArg,
};

use super::{grid, CudaTable};
use crate::backend::{InsertMode, RawInsert};
use crate::core::keys::{Key, Value};
use crate::core::layout::{Word, BUCKET_BYTES};
use crate::{Error, Result};

/// Bytes of table one block builds: 64 KiB leaves room for three blocks per
/// SM in the 228 KiB of an H100/H200, and makes 2^27 eight-byte slots 16 Ki
/// regions, enough to fill the GPU.
const REGION_BYTES: u64 = 64 << 10;
/// Buckets per region.
const REGION_BUCKETS: u64 = REGION_BYTES / BUCKET_BYTES as u64;
/// Threads per build block (`__launch_bounds__(512)` in the kernel).
const BUILD_THREADS: u32 = 512;
/// Bins hold this much more than the mean batch share of a region, plus
/// [`BIN_SLACK`]: an overfull bin defers its excess to the plain kernel, so
/// this trades scratch memory against deferred keys (at 4096 keys per bin the
/// standard deviation is 64, so 1/8 more is 8 sigma).
const BIN_HEADROOM: f64 = 1.125;
const BIN_SLACK: u64 = 64;
/// Batches smaller than this share of the table's slots take the plain
/// kernel: a region build moves the whole table twice whatever the batch.
const MIN_BATCH_SHARE: u64 = 16;

/// The region kernels of a module (present in linear-scheme modules only).
pub(crate) struct RegionKernels {
    scatter: CudaFunction,
    build: CudaFunction,
}

impl RegionKernels {
    pub(crate) fn load(module: &Arc<CudaModule>) -> std::result::Result<Option<Self>, DriverError> {
        let (Ok(scatter), Ok(build)) = (module.load_function("gh_region_scatter"), module.load_function("gh_region_build"))
        else {
            return Ok(None);
        };
        // A region is more shared memory than the default 48 KiB a launch may use.
        build.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            REGION_BYTES as i32,
        )?;
        Ok(Some(RegionKernels { scatter, build }))
    }
}

/// Scratch buffers of the region build, kept by the table between calls and
/// grown when a larger batch needs more (allocating inside the call would
/// cost more than the build).
#[derive(Default)]
pub(crate) struct RegionScratch {
    bin_count: Option<CudaSlice<u32>>,
    bin_words: Option<CudaSlice<u8>>,
    bin_pos: Option<CudaSlice<u32>>,
    deferred: Option<CudaSlice<u32>>,
}

fn ensure<T: cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    slot: &mut Option<CudaSlice<T>>,
    len: usize,
) -> std::result::Result<(), DriverError> {
    if !slot.as_ref().is_some_and(|s| s.len() >= len) {
        *slot = None; // free the old buffer before taking a larger one
        // Safety: every element a kernel reads is written first (bins below
        // their count, deferred positions below counters[2]).
        *slot = Some(unsafe { stream.alloc::<T>(len.max(1)) }?);
    }
    Ok(())
}

/// Whether the region build is turned on (`GPUHASH_REGION_BUILD=1`).
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("GPUHASH_REGION_BUILD").is_ok_and(|v| v == "1"))
}

/// Whether a batch of `n` keys into a table of `slots` slots and `buckets`
/// buckets suits the region build.
pub(crate) fn suits(n: u64, slots: u64, buckets: u64) -> bool {
    buckets >= 2 * REGION_BUCKETS && n >= slots / MIN_BATCH_SHARE && n < u32::MAX as u64
}

/// Whether to take the region build for such a batch.
pub(crate) fn worth_it(n: u64, slots: u64, buckets: u64) -> bool {
    enabled() && suits(n, slots, buckets)
}

impl<K: Key, V: Value> CudaTable<K, V> {
    /// Inserts a large batch by regions (see the module documentation); the
    /// same outcome as the plain kernel, failed positions exact and ascending.
    pub(super) fn insert_regions(
        &mut self,
        keys: &CudaView<'_, K>,
        values: &CudaView<'_, V>,
        mode: InsertMode,
    ) -> Result<RawInsert> {
        let rk = match self.kernels.region.as_ref() {
            Some(rk) => (rk.scatter.clone(), rk.build.clone()),
            None => return Err(Error::Unsupported("region build outside the linear scheme".into())),
        };
        let n = keys.len() as u64;
        let rb = REGION_BUCKETS;
        let regions = self.probe.buckets.div_ceil(rb);
        let bin_cap = ((n as f64 / regions as f64) * BIN_HEADROOM) as u64 + BIN_SLACK;
        let word = K::Word::<V>::BYTES;
        let e = |t: &Self, err| t.err(err);
        {
            let stream = self.stream.clone();
            let s = &mut self.region_scratch;
            let r = ensure(&stream, &mut s.bin_count, regions as usize)
                .and_then(|_| ensure(&stream, &mut s.bin_words, (regions * bin_cap) as usize * word))
                .and_then(|_| ensure(&stream, &mut s.bin_pos, (regions * bin_cap) as usize))
                // Every position may be deferred at worst: the list never overflows.
                .and_then(|_| ensure(&stream, &mut s.deferred, n as usize));
            r.map_err(|err| e(self, err))?;
        }
        self.reset_counters()?;
        let (m, op) = super::mode_codes(mode);
        let view = self.view();
        let s = &mut self.region_scratch;
        let (count, words, pos, deferred) = (
            s.bin_count.as_mut().expect("allocated above"),
            s.bin_words.as_mut().expect("allocated above"),
            s.bin_pos.as_mut().expect("allocated above"),
            s.deferred.as_mut().expect("allocated above"),
        );
        let stream = self.stream.clone();
        let mut counts = count.slice_mut(0..regions as usize);
        stream.memset_zeros(&mut counts).map_err(|err| super::driver_error(self.ctx.ordinal(), err))?;

        let mut b = stream.launch_builder(&rk.0);
        b.arg(&view).arg(keys).arg(values).arg(&n).arg(&rb).arg(&mut *count).arg(&bin_cap);
        b.arg(&mut *words).arg(&mut *pos).arg(&mut *deferred);
        // Safety: arguments match gh_region_scatter; bins hold regions * bin_cap
        // entries, the deferred list n.
        unsafe { b.launch(grid(n, self.sms)) }.map_err(|err| super::driver_error(self.ctx.ordinal(), err))?;

        let cfg = LaunchConfig {
            grid_dim: (regions as u32, 1, 1),
            block_dim: (BUILD_THREADS, 1, 1),
            shared_mem_bytes: (rb * BUCKET_BYTES as u64) as u32,
        };
        let mut b = stream.launch_builder(&rk.1);
        b.arg(&view).arg(&rb).arg(&*count).arg(&bin_cap).arg(&*words).arg(&*pos).arg(&mut *deferred);
        b.arg(&m).arg(&op);
        // Safety: arguments match gh_region_build; one block per region, each
        // with the region's bytes of shared memory.
        unsafe { b.launch(cfg) }.map_err(|err| super::driver_error(self.ctx.ordinal(), err))?;

        let meta = self.read_meta()?;
        let (inserted, existing, ndeferred) = (meta[0], meta[1], meta[2]);
        // Out-of-band keys are always deferred, so every key counted here took a slot.
        self.live += inserted;
        let mut out = RawInsert { inserted, existing, failed: Vec::new() };
        if ndeferred == 0 {
            return Ok(out);
        }
        // The deferred keys, gathered on the device, through the plain kernel.
        let nd = ndeferred as usize;
        let s = &self.region_scratch;
        let deferred = s.deferred.as_ref().expect("allocated above").slice(0..nd);
        // Safety: both fully written by gh_gather_pairs.
        let mut dk = unsafe { self.stream.alloc::<K>(nd) }.map_err(|err| self.err(err))?;
        let mut dv = unsafe { self.stream.alloc::<V>(nd) }.map_err(|err| self.err(err))?;
        let mut b = self.stream.launch_builder(&self.kernels.gather_pairs);
        b.arg(keys).arg(values).arg(&deferred).arg(&ndeferred).arg(&mut dk).arg(&mut dv);
        // Safety: arguments match gh_gather_pairs; every deferred position is below n.
        unsafe { b.launch(grid(ndeferred, self.sms)) }.map_err(|err| self.err(err))?;
        let rest = self.insert_plain(&dk.as_view(), &dv.as_view(), mode)?;
        out.inserted += rest.inserted;
        out.existing += rest.existing;
        if !rest.failed.is_empty() {
            let mut at = vec![0u32; nd];
            let s = &self.region_scratch;
            let deferred = s.deferred.as_ref().expect("allocated above").slice(0..nd);
            self.stream.memcpy_dtoh(&deferred, &mut at).map_err(|err| self.err(err))?;
            self.stream.synchronize().map_err(|err| self.err(err))?;
            out.failed = rest.failed.iter().map(|&i| at[i] as usize).collect();
            out.failed.sort_unstable();
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_large_batches_into_multi_region_tables() {
        let slots = 1u64 << 27;
        let buckets = slots / 4;
        assert!(suits(1 << 26, slots, buckets));
        assert!(!suits(1 << 20, slots, buckets), "small batches take the plain kernel");
        assert!(!suits(1 << 10, 1 << 12, 1 << 10), "one region: nothing to gain");
    }
}
