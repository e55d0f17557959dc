//! Device memory and streams that belong to another library (a CuPy array,
//! a PyTorch tensor, a buffer of the user's own CUDA code), used by the
//! table for one call without a copy.
//!
//! ```no_run
//! # use gpuhash::{Device, HashTable};
//! # fn demo(keys_ptr: u64, vals_ptr: u64, found_ptr: u64, n: usize, their_stream: u64) -> gpuhash::Result<()> {
//! let t = HashTable::<u64, u32>::builder().device(Device::Cuda(0)).capacity(1 << 20).build()?;
//! let cuda = t.cuda().expect("a CUDA table");
//! // Safety: the three addresses hold n elements on cuda:0 and stay
//! // allocated until the borrows are dropped; their_stream is a live stream.
//! unsafe {
//!     cuda.wait_for_stream(their_stream)?; // the keys are written on it
//!     let keys = cuda.borrow_device::<u64>(keys_ptr, n, "keys")?;
//!     let mut vals = cuda.borrow_device::<u32>(vals_ptr, n, "values")?;
//!     let mut found = cuda.borrow_device::<u8>(found_ptr, n, "found")?;
//!     cuda.find_device(&keys.view(), &mut vals.view_mut(), &mut found.view_mut())?;
//! }
//! # Ok(()) }
//! ```

use std::mem::ManuallyDrop;

use cudarc::driver::{sys, CudaSlice, CudaView, CudaViewMut};

use super::CudaTable;
use crate::core::keys::{Key, Value};
use crate::{Error, Result};

/// Device memory owned elsewhere, seen as a slice for the length of a
/// borrow. Dropping it never frees the memory.
pub struct Borrowed<T> {
    slice: ManuallyDrop<CudaSlice<T>>,
}

impl<T> Borrowed<T> {
    /// The memory as a view for the table's `*_device` calls.
    pub fn view(&self) -> CudaView<'_, T> {
        self.slice.as_view()
    }

    /// The memory as a mutable view (outputs).
    pub fn view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.slice.as_view_mut()
    }

    /// Elements borrowed.
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// Whether nothing is borrowed.
    pub fn is_empty(&self) -> bool {
        self.slice.len() == 0
    }
}

impl<T> Drop for Borrowed<T> {
    fn drop(&mut self) {
        // Safety: taken once, here. `leak` hands the address back without
        // freeing it (after the table's stream has waited for its users).
        let s = unsafe { ManuallyDrop::take(&mut self.slice) };
        s.leak();
    }
}

/// Reads one pointer attribute of `ptr`.
unsafe fn pointer_attribute(ptr: u64, attr: sys::CUpointer_attribute) -> std::result::Result<u32, sys::CUresult> {
    let mut v: u32 = 0;
    // Safety: both attributes asked for are 32-bit; `v` is.
    let r = unsafe { sys::cuPointerGetAttribute(&mut v as *mut u32 as *mut std::ffi::c_void, attr, ptr) };
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(v)
    } else {
        Err(r)
    }
}

impl<K: Key, V: Value> CudaTable<K, V> {
    /// Borrows `len` elements of `T` at device address `ptr` for the
    /// table's `*_device` calls, without a copy. `what` names the array in
    /// errors. Checked: the address is aligned for `T` and is device (or
    /// managed) memory of this table's GPU; otherwise a clear
    /// [`Error::Unsupported`] and nothing is touched.
    ///
    /// # Safety
    /// `ptr` must stay allocated, with room for `len` elements, until the
    /// returned value is dropped, and no one else may write it meanwhile.
    pub unsafe fn borrow_device<T>(&self, ptr: u64, len: usize, what: &str) -> Result<Borrowed<T>> {
        let bad = |why: String| Error::Unsupported(format!("{what}: {why}"));
        let align = std::mem::align_of::<T>() as u64;
        if !ptr.is_multiple_of(align) {
            return Err(bad(format!("device address {ptr:#x} is not aligned to {align} bytes")));
        }
        if len > 0 {
            let ordinal = self.ctx.ordinal();
            self.ctx.bind_to_thread().map_err(|e| self.err(e))?;
            // Safety: a query; the driver answers an error for any address.
            let kind = unsafe { pointer_attribute(ptr, sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE) }
                .map_err(|_| bad(format!("address {ptr:#x} is not CUDA memory")))?;
            let (device, unified) = (sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32, sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32);
            if kind != device && kind != unified {
                return Err(bad(format!("address {ptr:#x} is host memory, not device memory")));
            }
            let on = unsafe { pointer_attribute(ptr, sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) }
                .map_err(|_| bad(format!("the device of address {ptr:#x} is unknown")))?;
            if on as usize != ordinal {
                return Err(bad(format!("the memory is on cuda:{on}, the table on cuda:{ordinal}")));
            }
        }
        // Safety: the caller's promise; the slice is leaked, never freed.
        Ok(Borrowed { slice: ManuallyDrop::new(unsafe { self.stream.upgrade_device_ptr(ptr, len) }) })
    }

    /// Makes the table's next work wait for everything queued so far on
    /// `stream`, a `CUstream` (or `cudaStream_t`) of another library; 0 and
    /// 1 name the legacy default stream and 2 the per-thread default
    /// stream, as in `__cuda_array_interface__`. Call it before borrowing
    /// memory that work on `stream` writes.
    ///
    /// # Safety
    /// `stream` must be a live stream of this table's device (or one of the
    /// values above).
    pub unsafe fn wait_for_stream(&self, stream: u64) -> Result<()> {
        let raw = if stream == 1 { 0 } else { stream } as sys::CUstream;
        // Safety: the caller's promise; the wrapper never destroys it.
        let theirs = unsafe { self.ctx.wrap_borrowed_stream(raw) };
        let e = |e| self.err(e);
        let done = theirs.record_event(None).map_err(e)?;
        self.stream.wait(&done).map_err(e)
    }
}

/// Pairs in device memory of the table's GPU, inserted by the growth loop
/// a range at a time ([`crate::HashTable::insert_device`]).
pub(crate) struct DeviceBatch<'a, 'b, K: Key, V: Value> {
    pub(crate) keys: &'a CudaView<'b, K>,
    pub(crate) values: &'a CudaView<'b, V>,
}

fn not_cuda() -> Error {
    Error::Unsupported("device memory given to a table that is not a plain CUDA table".into())
}

/// Positions up to which [`DeviceBatch::pairs`] copies values one by one;
/// beyond, the whole batch of values comes back in one copy.
const SINGLE_COPIES: usize = 4096;

impl<K: Key, V: Value> crate::growth::Batch<K, V> for DeviceBatch<'_, '_, K, V> {
    fn len(&self) -> usize {
        self.keys.len()
    }

    fn insert(
        &self,
        b: &mut dyn crate::backend::Backend<K, V>,
        range: std::ops::Range<usize>,
        mode: crate::backend::InsertMode,
    ) -> Result<crate::backend::RawInsert> {
        let t = b.as_any_mut().downcast_mut::<CudaTable<K, V>>().ok_or_else(not_cuda)?;
        t.insert_raw(&self.keys.slice(range.clone()), &self.values.slice(range), mode)
    }

    fn pairs(&self, b: &dyn crate::backend::Backend<K, V>, positions: &[usize]) -> Result<(Vec<K>, Vec<V>)> {
        let t = b.as_any().downcast_ref::<CudaTable<K, V>>().ok_or_else(not_cuda)?;
        let keys = t.gather_keys(self.keys, positions)?;
        let e = |e| t.err(e);
        let values = if positions.len() <= SINGLE_COPIES {
            let mut out = Vec::with_capacity(positions.len());
            for &p in positions {
                let mut one = [V::from_bits(0)];
                t.stream.memcpy_dtoh(&self.values.slice(p..p + 1), &mut one).map_err(e)?;
                out.push(one[0]);
            }
            out
        } else {
            let all = t.stream.clone_dtoh(self.values).map_err(e)?;
            positions.iter().map(|&p| all[p]).collect()
        };
        t.stream.synchronize().map_err(e)?;
        Ok((keys, values))
    }
}
