//! Bulk calls enqueued on a stream of yours, without waiting on the host.
//!
//! Each call is ordered with the table's own stream by events both ways:
//! your stream first waits for the work already queued on the table, then
//! the table's stream waits for your stream (as of the end of the call)
//! before anything else it runs. So the calls on one table still happen one
//! after the other, in the order they were made, whichever streams they
//! use; what runs concurrently with them is the host and other work.
//!
//! Counters: the metadata block's counters are shared by every call, so an
//! insert or erase copies them on your stream, right after its kernel, into
//! page-locked host words of its own, which [`PendingInsert::wait`] or
//! [`PendingCount::wait`] read once the call's end has passed: one wait,
//! no copy after it. Nothing else on the table can run in between.

use std::sync::{Arc, Mutex};

use cudarc::driver::{
    result as cu, CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DriverError,
    PushKernelArg,
};

use super::kernels::Kernels;
use super::{claims_unlocked, driver_error, grid, mode_codes, CudaTable, DeviceView, Readback};
use crate::backend::InsertMode;
use crate::core::keys::{Key, Value};
use crate::{Device, Error, InsertReport, NotStored, Result};

/// Bytes of the metadata counters an async call resets (`counters[0..4]`).
const COUNTER_BYTES: usize = 32;

/// An insert enqueued by [`CudaTable::insert_device_async`]. [`wait`](Self::wait)
/// for its report; dropping it instead loses only the report (the insert
/// itself still happens). It borrows the keys, which it reads again to
/// report the keys a full table did not store.
#[must_use = "the report (and the keys a full table did not store) is only known after wait()"]
pub struct PendingInsert<'k, K: Key> {
    inner: Option<InsertScratch<'k, K>>,
}

struct InsertScratch<'k, K: Key> {
    keys: CudaView<'k, K>,
    bufs: Kept,
    stream: Arc<CudaStream>,
    kernels: Arc<Kernels>,
    sms: u64,
}

/// The device scratch of one async insert or erase, kept by the table for
/// the next call: allocating it per call (4 bytes a key) cost more than the
/// insert itself for 2^20 keys, since the driver's pool gives freed memory
/// back at every synchronization.
pub(crate) struct AsyncBuffers {
    /// inserted, existing, failed (an erase: removed), page-locked: a
    /// copy into pageable memory after the wait cost a second round trip
    /// (12 us of a 2^20-key insert's 170, H200).
    counters: Readback,
    /// Positions that found no slot: room for every key, so they are exact.
    failed: CudaSlice<u32>,
    /// On cuckoo and two-level tables, a byte per key for the step without
    /// locks (gh_insert_unlocked), as the synchronous inserts take it.
    flags: Option<CudaSlice<u8>>,
    /// The end of the last call that used these buffers.
    done: Option<CudaEvent>,
}

impl AsyncBuffers {
    fn done(&self) -> &CudaEvent {
        self.done.as_ref().expect("set by the call that holds the buffers")
    }
}

impl Drop for AsyncBuffers {
    // The counter words go back to the tables' shared list, where another
    // table may take them at once: the last call's copy into them must
    // have landed first. (Buffers kept for the next call skip this: its
    // copy is ordered after the last one's on the device.)
    fn drop(&mut self) {
        if let Some(done) = &self.done {
            let _ = done.synchronize();
        }
    }
}

/// Async scratch the table keeps at most; calls in flight beyond this many
/// allocate their own, freed once they are done.
const KEPT_BUFFERS: usize = 2;

/// Scratch lent to one async call, given back to the table's pool when the
/// call's pending value is dropped (after `wait` or without it).
struct Kept {
    bufs: Option<AsyncBuffers>,
    pool: Arc<Mutex<Vec<AsyncBuffers>>>,
}

impl Kept {
    fn get(&self) -> &AsyncBuffers {
        self.bufs.as_ref().expect("held until drop")
    }
    fn get_mut(&mut self) -> &mut AsyncBuffers {
        self.bufs.as_mut().expect("held until drop")
    }
}

impl Drop for Kept {
    // A later async call may take these buffers at once, even while this
    // one still runs: its stream first waits for the table's, which waits
    // for this call's end (`enter`, `leave_marked`).
    fn drop(&mut self) {
        if let Some(b) = self.bufs.take() {
            let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
            if pool.len() < KEPT_BUFFERS {
                pool.push(b);
            }
        }
    }
}

/// A count enqueued by [`CudaTable::erase_device_async`]; [`wait`](Self::wait) for it.
#[must_use = "the count is only known after wait()"]
pub struct PendingCount {
    inner: Option<(Kept, Arc<CudaStream>)>,
}

/// The first `N` counter words of an async call, after its end `done`.
fn counters_after<const N: usize>(done: &CudaEvent, counters: &Readback) -> Result<[u64; N], DriverError> {
    done.synchronize()?;
    let mut c = [0u64; N];
    counters.read(&mut c)?;
    Ok(c)
}

/// Reads a small device buffer back after `done` (synchronous copy).
fn read_back<T: cudarc::driver::DeviceRepr + Default + Clone>(
    stream: &Arc<CudaStream>,
    done: &CudaEvent,
    src: &CudaSlice<T>,
    len: usize,
) -> Result<Vec<T>, DriverError> {
    done.synchronize()?;
    stream.context().bind_to_thread()?;
    let mut out = vec![T::default(); len.min(src.len())];
    if out.is_empty() {
        return Ok(out);
    }
    let (ptr, _record) = src.device_ptr(stream);
    // Safety: `ptr` holds at least `out.len()` elements, written by work that
    // `done` (just waited for) follows.
    unsafe { cu::memcpy_dtoh_sync(&mut out, ptr) }?;
    Ok(out)
}

impl<K: Key> PendingInsert<'_, K> {
    /// Waits for the insert and returns what it did, or
    /// [`Error::TableFull`] with the exact positions (ascending) and keys
    /// that found no slot, as [`CudaTable::insert_device`] does. When some
    /// did not fit, this also waits for the work queued on the stream after
    /// the insert (the keys are gathered there).
    pub fn wait(self) -> Result<InsertReport> {
        let Some(p) = self.inner else { return Ok(InsertReport::default()) };
        let ordinal = p.stream.context().ordinal();
        let e = |e| driver_error(ordinal, e);
        let c = counters_after::<3>(p.bufs.get().done(), &p.bufs.get().counters).map_err(e)?;
        let report = InsertReport { inserted: c[0], existing: c[1] };
        if c[2] == 0 {
            return Ok(report);
        }
        let mut positions = read_back(&p.stream, p.bufs.get().done(), &p.bufs.get().failed, c[2] as usize).map_err(e)?;
        positions.sort_unstable();
        let keys = gather(&p, &positions).map_err(e)?;
        Err(Error::TableFull(Box::new(NotStored {
            report,
            positions: positions.into_iter().map(|i| i as usize).collect(),
            keys: keys.into_iter().map(Key::to_u64).collect(),
        })))
    }
}

/// `keys[positions]`, gathered on the call's stream; from a copy of the
/// batch when the device has no memory for the gather (the insert is done:
/// its report must not be lost for want of memory).
fn gather<K: Key>(p: &InsertScratch<'_, K>, positions: &[u32]) -> Result<Vec<K>, DriverError> {
    match gather_on_device(p, positions) {
        Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
            let all = p.stream.clone_dtoh(&p.keys)?;
            p.stream.synchronize()?;
            Ok(positions.iter().map(|&i| all[i as usize]).collect())
        }
        other => other,
    }
}

fn gather_on_device<K: Key>(p: &InsertScratch<'_, K>, positions: &[u32]) -> Result<Vec<K>, DriverError> {
    let s = &p.stream;
    let pos = s.clone_htod(positions)?;
    let n = positions.len() as u64;
    // Safety: fully written by gh_gather_keys.
    let mut out = unsafe { s.alloc::<K>(positions.len()) }?;
    let mut b = s.launch_builder(&p.kernels.gather_keys);
    b.arg(&p.keys).arg(&pos).arg(&n).arg(&mut out);
    // Safety: arguments match gh_gather_keys; every position is below keys.len().
    unsafe { b.launch(grid(n, p.sms)) }?;
    let host = s.clone_dtoh(&out)?;
    s.synchronize()?;
    Ok(host)
}

impl PendingCount {
    /// Waits for the call and returns its count.
    pub fn wait(self) -> Result<u64> {
        let Some((counter, stream)) = self.inner else { return Ok(0) };
        let ordinal = stream.context().ordinal();
        let c = counters_after::<1>(counter.get().done(), &counter.get().counters).map_err(|e| driver_error(ordinal, e))?;
        Ok(c[0])
    }
}

impl<K: Key, V: Value> CudaTable<K, V> {
    fn check_stream(&self, stream: &Arc<CudaStream>) -> Result<()> {
        if stream.context() != &self.ctx {
            return Err(Error::Unsupported(format!(
                "a stream of cuda:{} used with a table on cuda:{}",
                stream.context().ordinal(),
                self.ctx.ordinal()
            )));
        }
        Ok(())
    }

    /// Whether `stream` is the table's own: its calls are then ordered by
    /// the stream itself, with no events between the two.
    fn is_table_stream(&self, stream: &Arc<CudaStream>) -> bool {
        stream.cu_stream() == self.stream.cu_stream()
    }

    /// Starts an async call on `stream`: the table's view, after `stream`
    /// was made to wait for the work queued on the table's stream.
    fn enter(&self, stream: &Arc<CudaStream>) -> Result<DeviceView, DriverError> {
        // view() may enqueue a prefetch of managed slots on the table stream.
        let view = self.view();
        if !self.is_table_stream(stream) {
            stream.wait(&self.stream.record_event(None)?)?;
        }
        Ok(view)
    }

    /// Ends an async call: the table's stream waits for `stream` as of now.
    fn leave(&self, stream: &Arc<CudaStream>) -> Result<(), DriverError> {
        if !self.is_table_stream(stream) {
            self.stream.wait(&stream.record_event(None)?)?;
        }
        Ok(())
    }

    /// [`Self::leave`] for a call whose end is waited for: the event that marks it.
    fn leave_marked(&self, stream: &Arc<CudaStream>) -> Result<CudaEvent, DriverError> {
        let done = stream.record_event(None)?;
        if !self.is_table_stream(stream) {
            self.stream.wait(&done)?;
        }
        Ok(done)
    }

    /// Copies counter words `from..from + words` of the metadata block into
    /// the page-locked words `dst`, on `stream`.
    fn copy_counters(
        &self,
        stream: &Arc<CudaStream>,
        view: &DeviceView,
        from: usize,
        words: usize,
        dst: &Readback,
    ) -> Result<(), DriverError> {
        // The metadata block has 8 words; on `stream`, after the kernel; the
        // host reads them only after the call's end event.
        debug_assert!(from + words <= 4);
        dst.copy_from(stream, view.meta + 8 * from as u64, words)
    }

    /// Scratch for an async call on `n` keys (positions of failed inserts for
    /// `n` of them, and `flags` for them if asked): kept from an earlier call
    /// when large enough, else allocated on `stream`.
    fn async_buffers(&self, stream: &Arc<CudaStream>, n: usize, flags: bool) -> Result<Kept> {
        let pool = self.async_pool.clone();
        let fits = |b: &AsyncBuffers| b.failed.len() >= n && (!flags || b.flags.as_ref().is_some_and(|f| f.len() >= n));
        let kept = {
            let mut p = pool.lock().unwrap_or_else(|p| p.into_inner());
            p.iter().position(fits).map(|i| p.swap_remove(i))
        };
        if let Some(b) = kept {
            return Ok(Kept { bufs: Some(b), pool });
        }
        let e = |e| self.err(e);
        let flag_bytes = if flags { n.max(1) } else { 0 };
        crate::fault::alloc_point(24 + 4 * n as u64 + flag_bytes as u64, Device::Cuda(self.ctx.ordinal()))?;
        // Page-locked words shared with the tables' read-backs (slow to allocate).
        let counters = Readback::take(stream.context()).map_err(e)?;
        // Safety: written by the kernel (failed, up to the failure count)
        // before it is read. One element at least: a zero-length allocation
        // is an error.
        let failed = unsafe { stream.alloc::<u32>(n.max(1)) }.map_err(e)?;
        // Safety: gh_insert_unlocked writes the flag of every key before
        // gh_insert reads it.
        let flags = if flags { Some(unsafe { stream.alloc::<u8>(flag_bytes) }.map_err(e)?) } else { None };
        Ok(Kept { bufs: Some(AsyncBuffers { counters, failed, flags, done: None }), pool })
    }

    /// Zeroes the metadata counters on `stream`.
    fn zero_counters_on(stream: &Arc<CudaStream>, view: &DeviceView) -> Result<(), DriverError> {
        // Safety: the first 4 words of the metadata block; no other call on
        // the table runs meanwhile (see the module docs).
        unsafe { cu::memset_d8_async(view.meta, 0, COUNTER_BYTES, stream.cu_stream()) }
    }

    /// Enqueues an insert of pairs in device memory on `stream` and returns
    /// at once; [`PendingInsert::wait`] gives its report.
    ///
    /// * Like [`CudaTable::insert_device`] this **never grows the table**:
    ///   reserve first; keys that find no slot are reported by `wait` in
    ///   [`Error::TableFull`], exactly.
    /// * Ordering: `stream` waits for the work already queued on the table,
    ///   and the table's next call (on any stream) waits for this one.
    /// * Counts: [`HashTable::len`](crate::HashTable::len), the load the
    ///   table grows by and the statistics do not see async inserts and
    ///   erases until you call [`CudaTable::resync`] after them.
    /// * Lifetimes: `keys` stays borrowed by the returned value. The other
    ///   buffers may be dropped at once: cudarc (with its default event
    ///   tracking) frees a buffer only after the work that uses it. The call's
    ///   scratch (4 bytes per key for failed positions, a fifth byte on cuckoo
    ///   and two-level tables for the step without locks) is kept by the table
    ///   for the next async call (two such at most); a larger batch than the
    ///   kept ones allocates it on `stream`.
    pub fn insert_device_async<'k>(
        &mut self,
        stream: &Arc<CudaStream>,
        keys: &CudaView<'k, K>,
        values: &CudaView<'_, V>,
        mode: InsertMode,
    ) -> Result<PendingInsert<'k, K>> {
        if keys.len() != values.len() {
            return Err(Error::LengthMismatch {
                op: "insert_device_async",
                keys: keys.len(),
                other: values.len(),
                what: "values",
            });
        }
        self.check_stream(stream)?;
        if keys.is_empty() {
            return Ok(PendingInsert { inner: None });
        }
        let n = keys.len() as u64;
        let e = |e| self.err(e);
        let view = self.enter(stream).map_err(e)?;
        // Cuckoo and two-level inserts first take the step without locks, as
        // the synchronous ones do: without it every key took a lock (a
        // 2^20-key two-level insert ran 2.3x as long as the synchronous call).
        let unlocked = self.kernels.unlocked.as_ref().filter(|_| claims_unlocked(self.config.scheme));
        let mut bufs = self.async_buffers(stream, keys.len(), unlocked.is_some())?;
        Self::zero_counters_on(stream, &view).map_err(e)?;
        let (m, op) = mode_codes(mode);
        let (cap, base) = (n, 0u64);
        let AsyncBuffers { failed, flags, .. } = bufs.get_mut();
        // Without the step, todo is null: every item.
        let (todo, todo_record) = self.launch_unlocked(stream, unlocked.zip(flags.as_mut()), &view, keys, values, (m, op))?;
        let mut b = stream.launch_builder(&self.kernels.insert);
        b.arg(&view).arg(keys).arg(values).arg(&n).arg(&m).arg(&op).arg(&mut *failed).arg(&cap).arg(&base).arg(&todo);
        // Safety: the arguments match gh_insert's signature; `failed` has room
        // for every position; `todo` is null or the n flags written above, on
        // this stream.
        unsafe { b.launch(self.insert_grid(n)) }.map_err(e)?;
        drop(todo_record); // records the flags' use by the insert, on this stream
        self.copy_counters(stream, &view, 0, 3, &bufs.get().counters).map_err(e)?;
        bufs.get_mut().done = Some(self.leave_marked(stream).map_err(e)?);
        Ok(PendingInsert {
            inner: Some(InsertScratch {
                keys: keys.slice(..),
                bufs,
                stream: stream.clone(),
                kernels: self.kernels.clone(),
                sms: self.sms,
            }),
        })
    }

    /// Enqueues a lookup of keys in device memory on `stream` and returns at
    /// once: `values_out` receives each value (zero bits when absent) and
    /// `found_out` 0/1 bytes, ready once `stream` has passed this call.
    /// Ordering and lifetimes as for [`CudaTable::insert_device_async`].
    pub fn find_device_async(
        &self,
        stream: &Arc<CudaStream>,
        keys: &CudaView<'_, K>,
        values_out: &mut CudaViewMut<'_, V>,
        found_out: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        if keys.len() != values_out.len() || keys.len() != found_out.len() {
            return Err(Error::LengthMismatch {
                op: "find_device_async",
                keys: keys.len(),
                other: if keys.len() != values_out.len() { values_out.len() } else { found_out.len() },
                what: "outputs",
            });
        }
        self.check_stream(stream)?;
        if keys.is_empty() {
            return Ok(());
        }
        let n = keys.len() as u64;
        let e = |e| self.err(e);
        let view = self.enter(stream).map_err(e)?;
        let mut b = stream.launch_builder(&self.kernels.find);
        b.arg(&view).arg(keys).arg(&n).arg(values_out).arg(found_out);
        // Safety: the arguments match gh_find's signature; outputs hold n elements.
        unsafe { b.launch(self.key_grid(n)) }.map_err(e)?;
        self.leave(stream).map_err(e)?;
        Ok(())
    }

    /// Enqueues a membership test of keys in device memory on `stream`:
    /// `found_out` receives 0/1 bytes, ready once `stream` has passed this
    /// call. Ordering and lifetimes as for [`CudaTable::insert_device_async`].
    pub fn contains_device_async(
        &self,
        stream: &Arc<CudaStream>,
        keys: &CudaView<'_, K>,
        found_out: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        if keys.len() != found_out.len() {
            return Err(Error::LengthMismatch {
                op: "contains_device_async",
                keys: keys.len(),
                other: found_out.len(),
                what: "outputs",
            });
        }
        self.check_stream(stream)?;
        if keys.is_empty() {
            return Ok(());
        }
        let n = keys.len() as u64;
        let e = |e| self.err(e);
        let view = self.enter(stream).map_err(e)?;
        let mut b = stream.launch_builder(&self.kernels.contains);
        b.arg(&view).arg(keys).arg(&n).arg(found_out);
        // Safety: the arguments match gh_contains' signature; the output holds n bytes.
        unsafe { b.launch(self.key_grid(n)) }.map_err(e)?;
        self.leave(stream).map_err(e)?;
        Ok(())
    }

    /// Enqueues an erase of keys in device memory on `stream` and returns at
    /// once; [`PendingCount::wait`] gives how many were removed. Ordering,
    /// counts and lifetimes as for [`CudaTable::insert_device_async`].
    pub fn erase_device_async(&mut self, stream: &Arc<CudaStream>, keys: &CudaView<'_, K>) -> Result<PendingCount> {
        self.check_stream(stream)?;
        if keys.is_empty() {
            return Ok(PendingCount { inner: None });
        }
        let n = keys.len() as u64;
        let e = |e| self.err(e);
        let view = self.enter(stream).map_err(e)?;
        let mut counter = self.async_buffers(stream, 0, false)?;
        Self::zero_counters_on(stream, &view).map_err(e)?;
        let mut b = stream.launch_builder(&self.kernels.erase);
        b.arg(&view).arg(keys).arg(&n);
        // Safety: the arguments match gh_erase's signature.
        unsafe { b.launch(self.key_grid(n)) }.map_err(e)?;
        self.copy_counters(stream, &view, 3, 1, &counter.get().counters).map_err(e)?;
        counter.get_mut().done = Some(self.leave_marked(stream).map_err(e)?);
        Ok(PendingCount { inner: Some((counter, stream.clone())) })
    }
}
