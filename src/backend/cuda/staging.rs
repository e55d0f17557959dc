//! Host slices through pinned staging buffers, copies overlapped with kernels.
//!
//! A bulk call on host slices is cut into chunks. While the GPU copies and
//! processes chunk `c - 1`, the host copies chunk `c` into a pinned buffer:
//!
//! ```text
//!  host     fill 0 | fill 1 | fill 2 | drain 0 | fill 3 | drain 1 | ...
//!  upload          | H2D 0  | H2D 1  | H2D 2   |        | H2D 3   |
//!  table                    | kern 0 | kern 1  | kern 2 |         | kern 3
//!  download                          | D2H 0   | D2H 1  |         | D2H 2
//! ```
//!
//! Each direction has [`DEPTH`] pinned buffers and as many device buffers
//! (one device allocation cut into slots), used round robin: chunk `c` uses
//! slot `c % DEPTH`. Three streams share the work: an upload stream, the
//! table's own stream for the kernels, and a download stream, so a
//! host-to-device copy, a kernel and a device-to-host copy can all run at
//! once. Events per slot order them (see [`Step`]); the host waits on an
//! event only before it reuses a pinned buffer. The copies never touch the
//! caller's memory, only the table's pinned buffers, so an error part-way
//! leaves nothing in flight that could outlive the caller's slices.
//!
//! Counters in the metadata block add up over the launches of one call, so
//! one readback per call is enough, and inserts record failed positions as
//! `chunk start + i` (`gh_insert`'s `base`), which keeps them exact.

use std::mem::size_of;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    result as cu, sys, CudaEvent, CudaSlice, CudaStream, DevicePtr, DriverError, PinnedHostSlice, PushKernelArg,
};

use super::{driver_error, mode_codes, CudaTable};
use crate::backend::{InsertMode, RawInsert};
use crate::core::keys::{Key, Value};
use crate::{Device, Result};

/// Batches shorter than this keep the simple path (one pageable copy each
/// way around one kernel): a batch smaller than a chunk has nothing to
/// overlap with, and below 64 Ki keys (256-512 KiB) the pipeline's fixed
/// cost (events, three streams, a host wait per chunk) is a large share of
/// a copy that takes tens of microseconds.
pub(crate) const STAGE_MIN_KEYS: usize = 64 << 10;

/// Bytes of one staging buffer (each pinned buffer and each device slot
/// half). 4 MiB moves in about 80 us over PCIe 5 x16 (~50 GB/s), far above
/// the few microseconds an event, a copy or a launch costs, so chunking
/// costs little; and it is small enough that the first chunk, which nothing
/// overlaps, is short, and that the buffers (2 x 4 MiB per direction, 16 MiB
/// pinned and 16 MiB on the device) are cheap to keep per table.
pub(crate) const STAGING_BYTES: usize = 4 << 20;

/// Buffers per direction: two, so that one is filled or drained by the host
/// while the other is copied or used by the GPU.
pub(crate) const DEPTH: usize = 2;

/// Alignment of each array packed into a staging buffer (keys, then values;
/// or values, then found flags): 256 bytes, what cudaMalloc guarantees.
const PART_ALIGN: usize = 256;

/// Whether a batch of `n` keys goes through the staging pipeline.
pub(crate) fn staged(n: usize) -> bool {
    n >= STAGE_MIN_KEYS
}

fn align_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// Offsets of arrays of `len` elements of the given sizes packed one after
/// the other, each aligned to [`PART_ALIGN`], and the bytes they span.
pub(crate) fn packed<const N: usize>(len: usize, sizes: [usize; N]) -> ([usize; N], usize) {
    let mut offsets = [0; N];
    let mut end = 0;
    for (o, s) in offsets.iter_mut().zip(sizes) {
        *o = align_up(end, PART_ALIGN);
        end = *o + len * s;
    }
    (offsets, end)
}

/// The most keys per chunk whose arrays (`sizes` bytes per key each, packed
/// by [`packed`]) fit in `budget` bytes: a multiple of [`PART_ALIGN`] so the
/// chunks of a batch start on aligned elements.
pub(crate) fn chunk_keys(budget: usize, sizes: &[usize]) -> usize {
    let per_key: usize = sizes.iter().sum::<usize>().max(1);
    let padding = PART_ALIGN * sizes.len().saturating_sub(1);
    let keys = budget.saturating_sub(padding) / per_key;
    (keys / PART_ALIGN * PART_ALIGN).max(1)
}

/// The chunks of a batch of `n` keys, `chunk` keys each (the last one shorter).
pub(crate) fn chunk_ranges(n: usize, chunk: usize) -> impl Iterator<Item = Range<usize>> {
    let chunk = chunk.max(1);
    (0..n).step_by(chunk).map(move |s| s..(s + chunk).min(n))
}

/// One step of the pipeline, for chunk `c` in slot `c % DEPTH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Host: wait until the last upload from the slot's pinned input buffer
    /// finished, then copy the chunk's inputs into it.
    Fill(usize),
    /// Upload stream: wait until the kernel that last read the slot's device
    /// input finished, copy the pinned input to it, record `uploaded`.
    Upload(usize),
    /// Table stream: wait for the upload (and for the last download from the
    /// slot's device output), launch the kernel, record `computed`.
    Launch(usize),
    /// Host: wait for the slot's last download, copy the results out.
    Drain(usize),
    /// Download stream: wait for the kernel, copy the slot's device output
    /// to its pinned output buffer, record `downloaded`.
    Download(usize),
}

/// The order in which the host issues the steps for `chunks` chunks.
/// Results of chunk `c` are drained when chunk `c + DEPTH` needs the slot
/// (after that chunk's launch, so the GPU has queued work meanwhile), and
/// the last ones at the end.
pub(crate) fn schedule(chunks: usize, results: bool) -> Vec<Step> {
    let mut steps = Vec::with_capacity(chunks * 5);
    for c in 0..chunks {
        steps.extend([Step::Fill(c), Step::Upload(c), Step::Launch(c)]);
        if results {
            if c >= DEPTH {
                steps.push(Step::Drain(c - DEPTH));
            }
            steps.push(Step::Download(c));
        }
    }
    if results {
        steps.extend((chunks.saturating_sub(DEPTH)..chunks).map(Step::Drain));
    }
    steps
}

/// The shape of one staged call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// Keys in the batch.
    pub n: usize,
    /// Keys per chunk (every chunk's arrays must fit [`STAGING_BYTES`]).
    pub chunk: usize,
    /// Whether the kernels produce results to copy back.
    pub results: bool,
}

/// The pinned and device buffers, streams and events of one table's
/// pipeline. Created on the first staged call and kept for the next ones.
pub(crate) struct Staging {
    upload: Arc<CudaStream>,
    download: Arc<CudaStream>,
    /// Write-combined: the host only writes them.
    host_in: Vec<PinnedHostSlice<u8>>,
    /// Cached (not write-combined): the host reads them.
    host_out: Vec<PinnedHostSlice<u8>>,
    /// `DEPTH` slots of an input then an output half, `STAGING_BYTES` each,
    /// at `device_base`; owned here, used through that address.
    _device: CudaSlice<u8>,
    device_base: u64,
    uploaded: Vec<CudaEvent>,
    computed: Vec<CudaEvent>,
    downloaded: Vec<CudaEvent>,
}

impl Drop for Staging {
    fn drop(&mut self) {
        // Copies in flight use the pinned buffers and the device buffer,
        // which are freed next; the table stream's own work is ordered
        // before the device buffer's stream-ordered free already.
        let ctx = self.upload.context();
        ctx.record_err(self.upload.synchronize());
        ctx.record_err(self.download.synchronize());
    }
}

impl Staging {
    fn new(table: &Arc<CudaStream>) -> Result<Self, DriverError> {
        let ctx = table.context();
        let pinned = |flags: u32| -> Result<Vec<PinnedHostSlice<u8>>, DriverError> {
            // Safety: bytes of a pinned buffer are written (by the host or a
            // copy) before they are read, and any byte pattern is a valid u8.
            (0..DEPTH).map(|_| unsafe { ctx.alloc_pinned_with_flags::<u8>(STAGING_BYTES, flags) }).collect()
        };
        let events = || (0..DEPTH).map(|_| ctx.new_event(None)).collect::<Result<Vec<_>, _>>();
        // Zeroed once: the kernels write the packed arrays of a chunk, not
        // the alignment padding between them, which the download copies too
        // (compute-sanitizer's initcheck flags a copy of unwritten bytes).
        let device = table.alloc_zeros::<u8>(DEPTH * 2 * STAGING_BYTES)?;
        let device_base = {
            let (ptr, _record) = device.device_ptr(table);
            ptr
        };
        let staging = Staging {
            upload: ctx.new_stream()?,
            download: ctx.new_stream()?,
            host_in: pinned(sys::CU_MEMHOSTALLOC_WRITECOMBINED)?,
            host_out: pinned(0)?,
            _device: device,
            device_base,
            uploaded: events()?,
            computed: events()?,
            downloaded: events()?,
        };
        // The device buffer is a stream-ordered allocation of the table
        // stream: the other streams may use it once that allocation is done.
        table.synchronize()?;
        Ok(staging)
    }

    fn device_in(&self, slot: usize) -> u64 {
        self.device_base + (slot * 2 * STAGING_BYTES) as u64
    }

    fn device_out(&self, slot: usize) -> u64 {
        self.device_in(slot) + STAGING_BYTES as u64
    }

    /// Runs the pipeline over the `plan.n` keys of a batch.
    ///
    /// * `fill(range, buf)` writes the inputs of the keys in `range` into
    ///   the pinned buffer and returns how many bytes to upload;
    /// * `launch(range, input, output)` enqueues the kernel(s) of the chunk
    ///   on `table` (device addresses of the slot's halves) and returns how
    ///   many result bytes to download (`plan.results` must then be true);
    /// * `drain(range, bytes)` copies a chunk's results out of its pinned
    ///   buffer.
    ///
    /// Every buffer is at most [`STAGING_BYTES`]; `plan.chunk` must keep them so.
    pub(crate) fn run(
        &mut self,
        table: &CudaStream,
        plan: Plan,
        fill: &mut dyn FnMut(Range<usize>, &mut [u8]) -> usize,
        launch: &mut dyn FnMut(Range<usize>, u64, u64) -> Result<usize>,
        drain: &mut dyn FnMut(Range<usize>, &[u8]),
    ) -> Result<()> {
        let ctx = table.context().clone();
        let err = |e| driver_error(ctx.ordinal(), e);
        ctx.bind_to_thread().map_err(err)?;
        let Plan { n, chunk, results } = plan;
        let ranges: Vec<Range<usize>> = chunk_ranges(n, chunk).collect();
        let mut in_bytes = vec![0usize; ranges.len()];
        let mut out_bytes = vec![0usize; ranges.len()];
        for step in schedule(ranges.len(), results) {
            match step {
                Step::Fill(c) => {
                    let s = c % DEPTH;
                    self.uploaded[s].synchronize().map_err(err)?;
                    let buf = self.host_in[s].as_mut_slice().map_err(err)?;
                    in_bytes[c] = fill(ranges[c].clone(), buf).min(STAGING_BYTES);
                }
                Step::Upload(c) => {
                    let s = c % DEPTH;
                    self.upload.wait(&self.computed[s]).map_err(err)?;
                    let src = &self.host_in[s].as_slice().map_err(err)?[..in_bytes[c]];
                    // Safety: the slot's input half holds STAGING_BYTES >= src.len()
                    // bytes; the pinned source is not refilled before `uploaded`
                    // says this copy finished (Fill waits on it).
                    unsafe { cu::memcpy_htod_async(self.device_in(s), src, self.upload.cu_stream()) }
                        .map_err(err)?;
                    self.uploaded[s].record(&self.upload).map_err(err)?;
                }
                Step::Launch(c) => {
                    let s = c % DEPTH;
                    table.wait(&self.uploaded[s]).map_err(err)?;
                    if results {
                        table.wait(&self.downloaded[s]).map_err(err)?;
                    }
                    out_bytes[c] = launch(ranges[c].clone(), self.device_in(s), self.device_out(s))?.min(STAGING_BYTES);
                    self.computed[s].record(table).map_err(err)?;
                }
                Step::Drain(c) => {
                    let s = c % DEPTH;
                    self.downloaded[s].synchronize().map_err(err)?;
                    drain(ranges[c].clone(), &self.host_out[s].as_slice().map_err(err)?[..out_bytes[c]]);
                }
                Step::Download(c) => {
                    let s = c % DEPTH;
                    self.download.wait(&self.computed[s]).map_err(err)?;
                    let src = self.device_out(s);
                    let dst = &mut self.host_out[s].as_mut_slice().map_err(err)?[..out_bytes[c]];
                    // Safety: the slot's output half holds STAGING_BYTES >= dst.len()
                    // bytes; the host reads the pinned buffer only after
                    // `downloaded` says this copy finished (Drain waits on it).
                    unsafe { cu::memcpy_dtoh_async(dst, src, self.download.cu_stream()) }
                        .map_err(err)?;
                    self.downloaded[s].record(&self.download).map_err(err)?;
                }
            }
        }
        Ok(())
    }
}

/// A table's staging resources, created on first use.
#[derive(Default)]
pub(crate) struct LazyStaging(Mutex<Option<Box<Staging>>>);

impl LazyStaging {
    /// Runs `f` on the staging resources, creating them first if needed.
    /// Calls on one table take turns (a call holds them until it returns).
    fn with<R>(&self, table: &Arc<CudaStream>, f: impl FnOnce(&mut Staging) -> Result<R>) -> Result<R> {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            // Pinned buffers both ways and their device halves.
            crate::fault::alloc_point((4 * DEPTH * STAGING_BYTES) as u64, Device::Cuda(table.context().ordinal()))?;
            *guard = Some(Box::new(Staging::new(table).map_err(|e| driver_error(table.context().ordinal(), e))?));
        }
        match guard.as_deref_mut() {
            Some(staging) => f(staging),
            None => unreachable!("created above"),
        }
    }
}

/// The bytes of a slice of keys or values.
pub(crate) fn bytes_of<T: Copy>(s: &[T]) -> &[u8] {
    // Safety: only called with keys and values, which are sealed to u32,
    // u64, i32, i64, f32 and f64 (crate::core::keys): plain numbers without
    // padding, so every byte is initialised.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// Bytes per task of the host's copies into and out of the pinned buffers:
/// one thread copies about 6 GB/s, well below the bus (55 GB/s measured on
/// an H200 host), so a chunk's copy is shared by every core.
const COPY_TASK: usize = 256 << 10;

/// Copies `src` into the start of `dst` on every core.
pub(crate) fn par_copy(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    dst[..src.len()].par_chunks_mut(COPY_TASK).zip(src.par_chunks(COPY_TASK)).for_each(|(d, s)| d.copy_from_slice(s));
}

/// Found flags (0/1 bytes) into `bool`s, on every core.
pub(crate) fn par_flags(dst: &mut [bool], bytes: &[u8]) {
    use rayon::prelude::*;
    dst.par_chunks_mut(COPY_TASK).zip(bytes.par_chunks(COPY_TASK)).for_each(|(d, s)| {
        for (o, &b) in d.iter_mut().zip(s) {
            *o = b != 0;
        }
    });
}

/// Copies `bytes` into a slice of values (`bytes.len()` = its size).
pub(crate) fn copy_to_values<V: Value>(dst: &mut [V], bytes: &[u8]) {
    let n = bytes.len().min(std::mem::size_of_val(dst));
    // Safety: `dst` is `size_of_val(dst) >= n` bytes; V is one of u32, u64,
    // i32, i64, f32, f64 (sealed), for which every bit pattern is a valid value.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), n) };
    par_copy(dst, &bytes[..n]);
}

/// Copies `keys[r]` (and `values[r]`) into a pinned buffer as packed arrays.
fn fill_pairs<K: Key, V: Value>(keys: &[K], values: Option<&[V]>, r: Range<usize>, buf: &mut [u8]) -> usize {
    let (off, end) = packed(r.len(), [size_of::<K>(), size_of::<V>()]);
    let k = bytes_of(&keys[r.clone()]);
    par_copy(buf, k);
    match values {
        Some(values) => {
            let v = bytes_of(&values[r]);
            par_copy(&mut buf[off[1]..], v);
            end
        }
        None => k.len(),
    }
}

impl<K: Key, V: Value> CudaTable<K, V> {
    fn staged_launch_error(&self, e: DriverError) -> crate::Error {
        driver_error(self.ctx.ordinal(), e)
    }

    /// [`Backend::insert`](crate::backend::Backend::insert) of a large host
    /// batch through the staging pipeline.
    pub(super) fn insert_staged(&mut self, keys: &[K], values: &[V], mode: InsertMode) -> Result<RawInsert> {
        let n = keys.len();
        let (ks, vs) = (size_of::<K>(), size_of::<V>());
        let chunk = chunk_keys(STAGING_BYTES, &[ks, vs]);
        // A locking scheme: each part first through the step without locks
        // (see `insert_unlocking`), with a flag per key of the whole batch,
        // where the locked insert also marks its refusals: the positions
        // come from there when more than the failure buffer holds, which
        // then need not grow to the batch (1 byte a key, not 4).
        let scheme = self.config.scheme;
        let todo = self.take_flags(mode, n);
        let todo_ptr = todo.as_ref().map(|t| t.device_ptr(&self.stream).0);
        let cap = self.failure_room(if todo.is_some() { 0 } else { n as u64 })?;
        self.zero_counters()?;
        let (m, op) = mode_codes(mode);
        let view = self.view(); // the kernel writes: the table is no longer known EMPTY
        let failed = {
            let (ptr, _record) = self.failed.device_ptr(&self.stream);
            ptr
        };
        let this = &*self;
        this.staging.with(&this.stream, |st| {
            st.run(
                &this.stream,
                Plan { n, chunk, results: false },
                &mut |r, buf| fill_pairs(keys, Some(values), r, buf),
                &mut |r, input, _| {
                    let (off, _) = packed(r.len(), [ks, vs]);
                    let (k0, v0) = (input, input + off[1] as u64);
                    let mut at = 0usize;
                    while at < r.len() {
                        let end = if todo_ptr.is_some() { (at + super::unlocked_part(scheme, r.start + at)).min(r.len()) } else { r.len() };
                        let (k, v) = (k0 + (at * ks) as u64, v0 + (at * vs) as u64);
                        let (len, base) = ((end - at) as u64, (r.start + at) as u64);
                        // This part's flags: those of its keys' batch positions.
                        let part_flags = todo_ptr.map(|t| t + base);
                        if let (Some(t), Some(unlocked)) = (part_flags, &this.kernels.unlocked) {
                            let mut b = this.stream.launch_builder(unlocked);
                            b.arg(&view).arg(&k).arg(&v).arg(&len).arg(&m).arg(&op).arg(&t);
                            // Safety: the arguments match gh_insert_unlocked's signature;
                            // `t` addresses flags base..base + len of the batch's n.
                            unsafe { b.launch(this.key_grid(len)) }.map_err(|e| this.staged_launch_error(e))?;
                        }
                        let todo = part_flags.unwrap_or(0); // null: every item
                        let mut b = this.stream.launch_builder(&this.kernels.insert);
                        b.arg(&view).arg(&k).arg(&v).arg(&len).arg(&m).arg(&op).arg(&failed).arg(&cap).arg(&base).arg(&todo);
                        // Safety: the arguments match gh_insert's signature: `k` and `v`
                        // address `len` keys and values in the staging slot, `failed`
                        // holds `cap` positions, `todo` is null or written just above.
                        unsafe { b.launch(this.insert_grid(len)) }.map_err(|e| this.staged_launch_error(e))?;
                        at = end;
                    }
                    Ok(0)
                },
                &mut |_, _| {},
            )
        })?;
        let meta = self.read_meta()?;
        let (inserted, existing, nfailed) = (meta[0], meta[1], meta[2]);
        let mut failed: Vec<usize> = if nfailed == 0 {
            Vec::new()
        } else if nfailed <= cap {
            let mut f = vec![0u32; nfailed as usize];
            self.stream.memcpy_dtoh(&self.failed.slice(0..nfailed as usize), &mut f).map_err(|e| self.err(e))?;
            self.stream.synchronize().map_err(|e| self.err(e))?;
            f.into_iter().map(|i| i as usize).collect()
        } else if let Some(flags) = &todo {
            let mut host = vec![0u8; n];
            self.stream.memcpy_dtoh(&flags.slice(0..n), &mut host).map_err(|e| self.err(e))?;
            self.stream.synchronize().map_err(|e| self.err(e))?;
            host.iter().enumerate().filter(|&(_, &f)| f == super::REFUSED_FLAG).map(|(i, _)| i).collect()
        } else {
            // More failures than the buffer holds (only for schemes whose
            // refusals are final): a key that found no slot is exactly one
            // left absent (slots only fill during an insert).
            debug_assert!(self.config.scheme.refusals_are_final(), "failure buffer sized to the batch");
            let mut found = vec![false; n];
            self.contains_staged(keys, &mut found)?;
            found.iter().enumerate().filter(|(_, &f)| !f).map(|(i, _)| i).collect()
        };
        failed.sort_unstable();
        self.account_insert(&meta);
        self.keep_flags(todo); // read_meta waited for their last use
        self.release_failure_room();
        Ok(RawInsert { inserted, existing, failed })
    }

    /// [`Backend::find`](crate::backend::Backend::find) of a large host
    /// batch through the staging pipeline.
    pub(super) fn find_staged(&self, keys: &[K], values: &mut [V], found: &mut [bool]) -> Result<u64> {
        let (ks, vs) = (size_of::<K>(), size_of::<V>());
        let chunk = chunk_keys(STAGING_BYTES, &[ks]).min(chunk_keys(STAGING_BYTES, &[vs, 1]));
        // Under the staging lock from the counter reset to the readback, so
        // concurrent lookups on one table (`&self`) do not mix their counts.
        self.staging.with(&self.stream, |st| {
            self.zero_counters()?;
            let view = self.kernel_view();
            st.run(
                &self.stream,
                Plan { n: keys.len(), chunk, results: true },
                &mut |r, buf| fill_pairs::<K, V>(keys, None, r, buf),
                &mut |r, input, output| {
                    let (off, end) = packed(r.len(), [vs, 1]);
                    let (v, f) = (output, output + off[1] as u64);
                    let len = r.len() as u64;
                    let mut b = self.stream.launch_builder(&self.kernels.find);
                    b.arg(&view).arg(&input).arg(&len).arg(&v).arg(&f);
                    // Safety: the arguments match gh_find's signature: `input` holds
                    // `len` keys, `v` and `f` room for `len` values and flags.
                    unsafe { b.launch(self.key_grid(len)) }.map_err(|e| self.staged_launch_error(e))?;
                    Ok(end)
                },
                &mut |r, bytes| {
                    let (off, _) = packed(r.len(), [vs, 1]);
                    copy_to_values(&mut values[r.clone()], &bytes[..r.len() * vs]);
                    par_flags(&mut found[r.clone()], &bytes[off[1]..off[1] + r.len()]);
                },
            )?;
            Ok(self.read_meta()?[3])
        })
    }

    /// [`Backend::contains`](crate::backend::Backend::contains) of a large
    /// host batch through the staging pipeline.
    pub(super) fn contains_staged(&self, keys: &[K], found: &mut [bool]) -> Result<u64> {
        let chunk = chunk_keys(STAGING_BYTES, &[size_of::<K>()]);
        // Under the staging lock, as in `find_staged`.
        self.staging.with(&self.stream, |st| {
            self.zero_counters()?;
            let view = self.kernel_view();
            st.run(
                &self.stream,
                Plan { n: keys.len(), chunk, results: true },
                &mut |r, buf| fill_pairs::<K, V>(keys, None, r, buf),
                &mut |r, input, output| {
                    let len = r.len() as u64;
                    let mut b = self.stream.launch_builder(&self.kernels.contains);
                    b.arg(&view).arg(&input).arg(&len).arg(&output);
                    // Safety: the arguments match gh_contains' signature: `input`
                    // holds `len` keys, `output` room for `len` flags.
                    unsafe { b.launch(self.key_grid(len)) }.map_err(|e| self.staged_launch_error(e))?;
                    Ok(r.len())
                },
                &mut |r, bytes| par_flags(&mut found[r], bytes),
            )?;
            Ok(self.read_meta()?[3])
        })
    }

    /// [`Backend::erase`](crate::backend::Backend::erase) of a large host
    /// batch through the staging pipeline.
    pub(super) fn erase_staged(&mut self, keys: &[K]) -> Result<u64> {
        let chunk = chunk_keys(STAGING_BYTES, &[size_of::<K>()]);
        self.zero_counters()?;
        let view = self.kernel_view();
        let this = &*self;
        this.staging.with(&this.stream, |st| {
            st.run(
                &this.stream,
                Plan { n: keys.len(), chunk, results: false },
                &mut |r, buf| fill_pairs::<K, V>(keys, None, r, buf),
                &mut |r, input, _| {
                    let len = r.len() as u64;
                    let mut b = this.stream.launch_builder(&this.kernels.erase);
                    b.arg(&view).arg(&input).arg(&len);
                    // Safety: the arguments match gh_erase's signature: `input` holds `len` keys.
                    unsafe { b.launch(this.key_grid(len)) }.map_err(|e| this.staged_launch_error(e))?;
                    Ok(0)
                },
                &mut |_, _| {},
            )
        })?;
        let meta = self.read_meta()?;
        self.account_erase(&meta);
        Ok(meta[3])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_fill_their_buffers_and_stay_aligned() {
        for sizes in [vec![4], vec![8], vec![4, 4], vec![8, 8], vec![4, 8], vec![8, 1], vec![4, 1], vec![1]] {
            let c = chunk_keys(STAGING_BYTES, &sizes);
            assert_eq!(c % PART_ALIGN, 0, "{sizes:?}");
            let per_key: usize = sizes.iter().sum();
            let end = match sizes[..] {
                [a] => packed(c, [a]).1,
                [a, b] => packed(c, [a, b]).1,
                _ => unreachable!(),
            };
            assert!(end <= STAGING_BYTES, "{sizes:?}: {end} bytes");
            // Nearly full: less than one more aligned group of keys would fit.
            assert!(end + (PART_ALIGN + 1) * per_key > STAGING_BYTES - PART_ALIGN * sizes.len(), "{sizes:?}");
        }
        // 8-byte pairs: 256 Ki keys of 16 bytes in 4 MiB, less the padding.
        assert_eq!(chunk_keys(4 << 20, &[8, 8]), (256 << 10) - 256);
        assert_eq!(chunk_keys(0, &[8]), 1);
    }

    #[test]
    fn packed_arrays_are_aligned_and_disjoint() {
        let (off, end) = packed(1000, [8usize, 1]);
        assert_eq!(off, [0, 8192]);
        assert_eq!(end, 9192);
        let (off, end) = packed(3, [4usize, 8]);
        assert_eq!(off, [0, 256]);
        assert_eq!(end, 280);
        assert_eq!(packed(0, [4usize, 4]), ([0, 0], 0));
    }

    #[test]
    fn chunk_ranges_cover_the_batch_once() {
        let r: Vec<_> = chunk_ranges(10, 4).collect();
        assert_eq!(r, vec![0..4, 4..8, 8..10]);
        assert_eq!(chunk_ranges(0, 4).count(), 0);
        assert_eq!(chunk_ranges(8, 4).collect::<Vec<_>>(), vec![0..4, 4..8]);
        assert_eq!(chunk_ranges(3, 0).count(), 3);
        assert!(staged(STAGE_MIN_KEYS) && !staged(STAGE_MIN_KEYS - 1));
    }

    /// Replays a schedule on a model of the buffers: which chunk each
    /// buffer holds, and whether a pinned output was read since it was
    /// written. The events make the GPU follow the host's issue order per
    /// slot; this checks that the order itself never reuses a buffer early.
    fn replay(chunks: usize, results: bool) {
        let steps = schedule(chunks, results);
        let (mut host_in, mut dev_in, mut dev_out, mut host_out) = ([None; DEPTH], [None; DEPTH], [None; DEPTH], [None; DEPTH]);
        let mut host_out_drained = [true; DEPTH];
        let (mut launched, mut drained) = (Vec::new(), Vec::new());
        for step in steps {
            match step {
                Step::Fill(c) => host_in[c % DEPTH] = Some(c),
                Step::Upload(c) => {
                    assert_eq!(host_in[c % DEPTH], Some(c), "upload {c} reads another chunk");
                    dev_in[c % DEPTH] = Some(c);
                }
                Step::Launch(c) => {
                    assert_eq!(dev_in[c % DEPTH], Some(c), "kernel {c} reads another chunk");
                    launched.push(c);
                    dev_out[c % DEPTH] = Some(c);
                }
                Step::Download(c) => {
                    assert_eq!(dev_out[c % DEPTH], Some(c), "download {c} reads another chunk");
                    assert!(host_out_drained[c % DEPTH], "download {c} overwrites undrained results");
                    host_out[c % DEPTH] = Some(c);
                    host_out_drained[c % DEPTH] = false;
                }
                Step::Drain(c) => {
                    assert_eq!(host_out[c % DEPTH], Some(c), "drain {c} reads another chunk");
                    host_out_drained[c % DEPTH] = true;
                    drained.push(c);
                }
            }
        }
        assert_eq!(launched, (0..chunks).collect::<Vec<_>>());
        let want: Vec<usize> = if results { (0..chunks).collect() } else { Vec::new() };
        assert_eq!(drained, want);
    }

    #[test]
    fn schedules_never_reuse_a_buffer_early() {
        for chunks in 0..9 {
            replay(chunks, false);
            replay(chunks, true);
        }
        assert_eq!(
            schedule(3, true),
            vec![
                Step::Fill(0),
                Step::Upload(0),
                Step::Launch(0),
                Step::Download(0),
                Step::Fill(1),
                Step::Upload(1),
                Step::Launch(1),
                Step::Download(1),
                Step::Fill(2),
                Step::Upload(2),
                Step::Launch(2),
                Step::Drain(0),
                Step::Download(2),
                Step::Drain(1),
                Step::Drain(2),
            ]
        );
    }
}
