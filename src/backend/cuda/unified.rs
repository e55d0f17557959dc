//! The slot allocation, in GPU memory or in CUDA managed (unified) memory,
//! and lookups by the host directly in managed slots.
//!
//! Managed slots stay where they were last prefetched: to the GPU when they
//! are created and before the first kernel after a host access (each call
//! that takes a [`DeviceView`](super::DeviceView) does this on the table
//! stream), to the host by [`CudaTable::host_find`]. Pages still migrate on
//! demand if either side touches them elsewhere; the prefetches only avoid
//! paying that fault by fault.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cudarc::driver::{result as cu, sys, CudaContext, CudaStream, DriverError};
use rayon::prelude::*;

use super::{driver_error, CudaTable, META_STATE, META_WORDS};
use crate::core::keys::{special_index, Key, Value};
use crate::core::layout::{slot_state, SlotState, Word};
use crate::core::probe::ProbeParams;
use crate::{Device, Error, Memory, Result};

/// A table's slot memory.
pub(crate) enum Slots {
    /// Ordinary device memory.
    Device(super::TableBuf<u8>),
    /// Managed memory.
    Managed(Managed),
}

/// A managed allocation of slots, freed on drop.
pub(crate) struct Managed {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    /// The table's stream: prefetches are ordered with its kernels.
    stream: Arc<CudaStream>,
    /// Whether the last prefetch sent the pages to the host.
    on_host: AtomicBool,
}

impl Drop for Managed {
    fn drop(&mut self) {
        let ctx = self.stream.context();
        // cuMemFree must not race the kernels that still use the slots; every
        // call on the table (async ones too) is ordered into its stream.
        ctx.record_err(self.stream.synchronize());
        // Safety: allocated by cuMemAllocManaged in `Slots::alloc`, freed once,
        // after the table's stream finished every use.
        ctx.record_err(unsafe { cu::memory_free(self.ptr) });
    }
}

fn location(kind: sys::CUmemLocationType, id: i32) -> sys::CUmemLocation {
    sys::CUmemLocation { type_: kind, id }
}

impl Managed {
    fn prefetch(&self, to: sys::CUmemLocation) -> Result<(), DriverError> {
        self.stream.context().bind_to_thread()?;
        // Safety: the whole managed range allocated for these slots, on the table stream.
        unsafe { cu::mem_prefetch_async(self.ptr, self.bytes, to, self.stream.cu_stream()) }
    }

    fn to_device(&self) -> Result<(), DriverError> {
        let ordinal = self.stream.context().ordinal() as i32;
        self.prefetch(location(sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, ordinal))
    }

    /// Enqueues a prefetch of the slots to host memory on the table stream.
    fn to_host(&self) -> Result<(), DriverError> {
        self.on_host.store(true, Ordering::Release);
        // The id is ignored for the host location.
        self.prefetch(location(sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST, 0))
    }
}

/// Why managed memory cannot hold this table's slots on `ctx`, if it cannot.
fn check_unified(ctx: &Arc<CudaContext>) -> Result<()> {
    let unsupported = |why: &str| Err(Error::Unsupported(format!("Memory::Unified on cuda:{}: {why}", ctx.ordinal())));
    let attr = |a| ctx.attribute(a).map_err(|e| driver_error(ctx.ordinal(), e));
    if attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)? == 0 {
        return unsupported("the device has no managed memory");
    }
    // Prefetching to the GPU, and the host reading while kernels run, need it.
    if attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)? == 0 {
        return unsupported("the device has no concurrent managed access");
    }
    // cudarc panics on a missing symbol; ask the library first.
    // Safety: only looks the symbol up in the loaded driver library.
    let present = unsafe { sys::culib().get::<unsafe extern "C" fn()>(b"cuMemPrefetchAsync_v2\0").is_ok() };
    if !present {
        return unsupported("the driver has no cuMemPrefetchAsync_v2 (CUDA 12.2 or newer is needed)");
    }
    Ok(())
}

impl Slots {
    /// `bytes` bytes of EMPTY slots (every bit set) in `memory`, after
    /// checking that the device has that much free (device memory) or that
    /// much in all (managed memory).
    pub(crate) fn alloc(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>, bytes: u64, memory: Memory) -> Result<Slots> {
        let ordinal = ctx.ordinal();
        let e = |e| driver_error(ordinal, e);
        crate::fault::alloc_point(bytes, Device::Cuda(ordinal))?;
        if memory == Memory::Unified {
            check_unified(ctx)?;
        }
        // Managed pages may be evicted to the host while others are in use,
        // so managed slots may take more than the free device memory (when
        // other allocations crowd the GPU; the driver then migrates pages on
        // demand, slowly), but never more than the whole device: a table
        // larger than the GPU is the paged table's job.
        let (free, total) = ctx.mem_get_info().map_err(e)?;
        let room = if memory == Memory::Unified { total } else { free };
        if bytes > room as u64 {
            return Err(Error::OutOfMemory { bytes, device: Device::Cuda(ordinal).to_string() });
        }
        let slots = match memory {
            // Safety: every byte is set just below before any kernel reads it.
            Memory::Device => Slots::Device(super::TableBuf::new(unsafe { stream.alloc::<u8>(bytes as usize) }.map_err(e)?, stream)),
            Memory::Unified => {
                ctx.bind_to_thread().map_err(e)?;
                // Safety: every byte is set just below before anything reads it.
                let ptr = unsafe { cu::malloc_managed(bytes as usize, sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL) }
                    .map_err(e)?;
                let m = Managed { ptr, bytes: bytes as usize, stream: stream.clone(), on_host: AtomicBool::new(false) };
                // Place the pages on the GPU before the fill touches them.
                m.to_device().map_err(e)?;
                Slots::Managed(m)
            }
        };
        let ptr = slots.device_ptr(stream);
        // Safety: `ptr` addresses the `bytes` bytes just allocated, on this stream.
        unsafe { cu::memset_d8_async(ptr, 0xff, bytes as usize, stream.cu_stream()) }.map_err(e)?;
        Ok(slots)
    }

    /// The device address of the first slot, for work on `stream` (the
    /// table's). Managed slots last sent to the host are prefetched back
    /// first; a failed prefetch is only recorded in the context, since
    /// pages still migrate on demand.
    pub(crate) fn device_ptr(&self, stream: &Arc<CudaStream>) -> u64 {
        match self {
            Slots::Device(s) => s.addr(),
            Slots::Managed(m) => {
                if m.on_host.swap(false, Ordering::AcqRel) {
                    stream.context().record_err(m.to_device());
                }
                m.ptr
            }
        }
    }

    /// Size of the allocation in bytes.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Slots::Device(s) => s.len(),
            Slots::Managed(m) => m.bytes,
        }
    }

    /// Which memory this is.
    pub(crate) fn memory(&self) -> Memory {
        match self {
            Slots::Device(_) => Memory::Device,
            Slots::Managed(_) => Memory::Unified,
        }
    }
}

/// The value bits of `key` (given zero-extended) in `slots`, walking its
/// probe sequence as the kernels do: buckets from the home bucket, slots in
/// order; a hit ends the walk, and so does an EMPTY slot (inserts fill each
/// sequence from its start and slots never become EMPTY again), as does the
/// probe limit. Keys equal to a slot marker are not in slots (out of band).
pub(crate) fn lookup_slots<W: Word>(slots: &[W], probe: &ProbeParams, key: u64) -> Option<u64> {
    let per_bucket = W::slots_per_bucket();
    for b in probe.seq(key) {
        let start = b as usize * per_bucket;
        for &w in slots.get(start..start + per_bucket)? {
            match slot_state(w) {
                SlotState::Full(k) if k == key => return Some(w.value()),
                SlotState::Empty => return None,
                _ => {}
            }
        }
    }
    None
}

/// An out-of-band key's value bits from the metadata block, if present.
fn special_value(meta: &[u64; META_WORDS], index: usize) -> Option<u64> {
    ((meta[META_STATE] >> (32 * index)) & 0xffff_ffff == 2).then_some(meta[4 + index])
}

impl<K: Key, V: Value> CudaTable<K, V> {
    /// Which memory the slots live in.
    pub fn memory(&self) -> Memory {
        self.slots.memory()
    }

    /// Looks `keys` up on the host, reading the managed slots directly: no
    /// kernel, no copy of the batch. Needs a table built with
    /// [`Memory::Unified`] (else [`Error::Unsupported`]).
    ///
    /// Prefetches the slots to host memory on the table stream and waits for
    /// it (so every earlier call on the table, async ones included, has
    /// finished); the next GPU call prefetches them back. Results are those
    /// of [`HashTable::find`](crate::HashTable::find), computed with the
    /// same hash and probe order as the kernels. Your own kernels must not
    /// modify the table (through [`CudaTable::view`]) while this runs.
    ///
    /// ```no_run
    /// use gpuhash::{Device, HashTable, Memory};
    ///
    /// let mut t: HashTable<u32, u32> =
    ///     HashTable::<u32, u32>::builder().device(Device::Cuda(0)).memory(Memory::Unified).build()?;
    /// t.insert_or_assign(&[1, 2], &[10, 20])?; // on the GPU
    /// let cuda = t.cuda().expect("a CUDA table");
    /// assert_eq!(cuda.host_find(&[1, 3])?, vec![Some(10), None]); // on the CPU
    /// # Ok::<(), gpuhash::Error>(())
    /// ```
    pub fn host_find(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        let Slots::Managed(m) = &self.slots else {
            return Err(Error::Unsupported("host_find needs a table built with Memory::Unified".into()));
        };
        if self.config.scheme != crate::core::scheme::Scheme::Linear {
            return Err(Error::Unsupported(format!("host_find on the {} scheme (only linear so far)", self.config.scheme)));
        }
        m.to_host().map_err(|e| self.err(e))?;
        // One small copy of the metadata block; it also waits for the stream,
        // so the prefetch and every earlier kernel are done.
        let meta = self.read_meta()?;
        let words = self.config.slots as usize;
        if words * K::Word::<V>::BYTES != m.bytes {
            return Err(Error::Device { device: Device::Cuda(self.ctx.ordinal()).to_string(), message: "slot count and allocation differ".into() });
        }
        // Safety: `m.ptr` is a managed allocation of `words` slot words
        // (checked above), aligned far beyond 16 bytes, valid on the host
        // (unified addressing). Every GPU call on the table has finished
        // (the stream was synchronized), and new ones that write need
        // `&mut self`, which cannot coexist with this borrow; users' own
        // kernels must not write meanwhile (documented).
        let slots: &[K::Word<V>] = unsafe { std::slice::from_raw_parts(m.ptr as *const K::Word<V>, words) };
        let probe = self.probe;
        let one = |&key: &K| {
            let bits = match special_index(key) {
                Some(s) => special_value(&meta, s),
                None => lookup_slots(slots, &probe, key.to_u64()),
            };
            bits.map(V::from_bits)
        };
        // Lookups are independent; large batches use every core.
        if keys.len() >= 1 << 14 {
            Ok(keys.par_iter().map(one).collect())
        } else {
            Ok(keys.iter().map(one).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts like the kernels do: the first EMPTY slot of the sequence.
    fn place<W: Word>(slots: &mut [W], p: &ProbeParams, key: u64, value: u64) {
        let per = W::slots_per_bucket();
        for b in p.seq(key) {
            for w in &mut slots[b as usize * per..][..per] {
                if slot_state(*w) == SlotState::Empty {
                    *w = W::pack(key, value);
                    return;
                }
            }
        }
        panic!("no room for {key}");
    }

    fn walk_matches_insert<W: Word>(key_bits: u32) {
        let buckets = 64u64;
        let p = ProbeParams { buckets, seed: 7, limit: buckets };
        let mut slots = vec![W::EMPTY; buckets as usize * W::slots_per_bucket()];
        let mask = if key_bits == 32 { u32::MAX as u64 } else { u64::MAX };
        let keys: Vec<u64> = (0..100u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask).collect();
        for (i, &k) in keys.iter().enumerate() {
            place(&mut slots, &p, k, i as u64 + 1);
        }
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(lookup_slots(&slots, &p, k), Some(i as u64 + 1), "key {k}");
        }
        assert_eq!(lookup_slots(&slots, &p, 12345), None);
        // A tombstone keeps later keys of the sequence reachable.
        let k = keys[40];
        let at = slots.iter().position(|w| slot_state(*w) == SlotState::Full(k)).unwrap();
        slots[at] = W::TOMBSTONE;
        assert_eq!(lookup_slots(&slots, &p, k), None);
        for &other in keys.iter().filter(|&&o| o != k) {
            assert!(lookup_slots(&slots, &p, other).is_some(), "key {other} lost behind a tombstone");
        }
    }

    #[test]
    fn host_lookup_walks_like_the_kernels() {
        walk_matches_insert::<u64>(32);
        walk_matches_insert::<u128>(64);
    }

    #[test]
    fn an_empty_slot_ends_the_walk_and_the_limit_bounds_it() {
        let p = ProbeParams { buckets: 8, seed: 1, limit: 2 };
        let mut slots = vec![<u64 as Word>::EMPTY; 32];
        let key = 5u64;
        let home = p.home(key) as usize;
        // Fill the home bucket with other keys; the key sits two buckets on,
        // beyond the limit of 2 buckets.
        for s in 0..4 {
            slots[home * 4 + s] = <u64 as Word>::pack(1000 + s as u64, 0);
        }
        for s in 0..4 {
            slots[((home + 1) % 8) * 4 + s] = <u64 as Word>::pack(2000 + s as u64, 0);
        }
        slots[((home + 2) % 8) * 4] = <u64 as Word>::pack(key, 9);
        assert_eq!(lookup_slots(&slots, &p, key), None);
        let wide = ProbeParams { limit: 3, ..p };
        assert_eq!(lookup_slots(&slots, &wide, key), Some(9));
    }

    #[test]
    fn out_of_band_values_come_from_the_metadata_block() {
        let mut meta = [0u64; META_WORDS];
        meta[4] = 11;
        meta[5] = 22;
        meta[META_STATE] = 2 | (1u64 << 32); // key 0 present, key 1 being written
        assert_eq!(special_value(&meta, 0), Some(11));
        assert_eq!(special_value(&meta, 1), None);
    }
}
