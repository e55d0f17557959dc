//! The CUDA target: keys and outputs live in device memory before the timed
//! call, which is timed with CUDA events on the table's stream (the device
//! buffer API, as an application keeping its data on the GPU would call it).
//! With `--cuda-async` the async calls are timed instead, on the table's own
//! stream: a lookup returns once enqueued (its hits are counted after the
//! timed region), an insert or erase includes `wait()` for its report.

use gpuhash::backend::cuda::CudaTable;
use gpuhash::backend::InsertMode;
use gpuhash::cudarc::driver::sys::CUevent_flags;
use gpuhash::cudarc::driver::CudaSlice;
use gpuhash::{Device, Error as TableError, HashTable, Reduce, RegionBuild, Value};

use super::grid::{check_hits, prefilled_table, rejected_of, Case, Op, Sample, TableOptions, Target};
use super::keys::{GenKey, Workload};
use super::BenchError;

/// Device-resident inputs and outputs of one case.
struct Buffers<K: GenKey, V: Value> {
    keys: CudaSlice<K>,
    values: CudaSlice<V>,
    out_values: CudaSlice<V>,
    found: CudaSlice<u8>,
    /// Keys the `mixed` rounds erase and look up (empty otherwise).
    erase_keys: CudaSlice<K>,
    find_keys: CudaSlice<K>,
}

pub(crate) struct CudaTarget<K: GenKey, V: Value> {
    device: Device,
    scheme: String,
    region_build: RegionBuild,
    table: Option<HashTable<K, V>>,
    bufs: Option<Buffers<K, V>>,
    probes: Option<f64>,
    stored: u64,
    /// Time the async calls (`--cuda-async`).
    asynch: bool,
}

impl<K: GenKey, V: Value> CudaTarget<K, V> {
    pub(crate) fn new(device: Device, scheme: &str, region_build: RegionBuild, asynch: bool) -> Self {
        CudaTarget { device, scheme: scheme.into(), region_build, table: None, bufs: None, probes: None, stored: 0, asynch }
    }

    fn err(&self, source: TableError) -> BenchError {
        BenchError::Table { target: format!("{}/{}", self.device, self.scheme), source }
    }

    fn cuda(&self) -> &CudaTable<K, V> {
        self.table.as_ref().and_then(|t| t.cuda()).expect("prepare() builds a CUDA table")
    }
}

impl<K: GenKey, V: Value> CudaTarget<K, V> {
    /// A table keeps the scratch of its last async calls for the next ones
    /// (the first call allocates it, 4 bytes a key): a small batch is timed
    /// on a table that has served one before, as in a stream of such calls.
    /// The warming call re-inserts stored keys if absent, which changes
    /// nothing in the table.
    fn warm_async_scratch(&self, table: &mut HashTable<K, V>, w: &Workload<K, V>) -> Result<(), TableError> {
        let n = w.keys.len().min(w.prefill.len());
        if n == 0 {
            return Ok(());
        }
        let t = table.cuda_mut().expect("a CUDA table");
        let stream = t.stream().clone();
        let keys = stream.clone_htod(&w.prefill[..n]).map_err(dev_err)?;
        let values = stream.clone_htod(&w.prefill_values[..n]).map_err(dev_err)?;
        let report = t.insert_device_async(&stream, &keys.as_view(), &values.as_view(), InsertMode::IfAbsent)?.wait()?;
        debug_assert_eq!(report.inserted, 0, "the warming call stores nothing");
        Ok(())
    }
}

fn dev_err(e: gpuhash::cudarc::driver::DriverError) -> TableError {
    TableError::Device { device: "cuda".into(), message: format!("{e:?}") }
}

/// `v`, or one placeholder key when empty (only the mixed rounds read these).
fn nonempty<K: GenKey>(v: &[K]) -> std::borrow::Cow<'_, [K]> {
    if v.is_empty() {
        std::borrow::Cow::Owned(vec![K::from_u64(0)])
    } else {
        std::borrow::Cow::Borrowed(v)
    }
}

impl<K: GenKey, V: Value> Target<K, V> for CudaTarget<K, V> {
    fn device(&self) -> String {
        self.device.to_string()
    }

    fn scheme(&self) -> String {
        if self.asynch {
            format!("{}+async", self.scheme)
        } else {
            self.scheme.clone()
        }
    }

    fn supports(&self, _case: &Case) -> bool {
        true
    }

    fn prepare(&mut self, case: &Case, w: &Workload<K, V>) -> Result<(), BenchError> {
        self.reset();
        let opts = TableOptions { region_build: self.region_build, ..TableOptions::default() };
        let (table, stored) = prefilled_table(self.device, &self.scheme, opts, case, w).map_err(|e| self.err(e))?;
        self.stored = stored;
        let stream = table.cuda().expect("a CUDA table").stream().clone();
        let n = w.keys.len().max(w.find_keys.len());
        let bufs = (|| -> Result<Buffers<K, V>, TableError> {
            Ok(Buffers {
                keys: stream.clone_htod(&w.keys).map_err(dev_err)?,
                values: stream.clone_htod(&w.values).map_err(dev_err)?,
                // Uploaded rather than alloc_zeros: `Value` does not promise
                // cudarc's ValidAsZeroBits. Outside the timed region either way.
                out_values: stream.clone_htod(&vec![V::from_bits(0); n.max(1)]).map_err(dev_err)?,
                found: stream.alloc_zeros::<u8>(n.max(1)).map_err(dev_err)?,
                // A zero-length device allocation is an error: keep one element.
                erase_keys: stream.clone_htod(&*nonempty(&w.erase_keys)).map_err(dev_err)?,
                find_keys: stream.clone_htod(&*nonempty(&w.find_keys)).map_err(dev_err)?,
            })
        })()
        .map_err(|e| self.err(e))?;
        stream.synchronize().map_err(|e| self.err(dev_err(e)))?;
        let mut table = table;
        // Only over a table that stored its whole prefill (else the warming call would add keys).
        if self.asynch && case.batch.keys().is_some() && stored as usize == w.prefill.len() {
            self.warm_async_scratch(&mut table, w).map_err(|e| self.err(e))?;
        }
        if !(matches!(case.op, Op::Insert | Op::InsertIfAbsent) || case.op.applies()) {
            self.probes = Some(table.stats().map_err(|e| self.err(e))?.mean_probe_buckets);
        }
        self.table = Some(table);
        self.bufs = Some(bufs);
        Ok(())
    }

    fn run(&mut self, case: &Case, w: &Workload<K, V>) -> Result<Sample, BenchError> {
        let stream = self.cuda().stream().clone();
        let ctx = stream.context().clone();
        // cudarc's default event flags disable timing; ask for timing events.
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = ctx.new_event(timing).map_err(|e| self.err(dev_err(e)))?;
        let end = ctx.new_event(timing).map_err(|e| self.err(dev_err(e)))?;
        let mut bufs = self.bufs.take().expect("prepare() runs before run()");
        let mut table = self.table.take().expect("prepare() runs before run()");
        start.record(&stream).map_err(|e| self.err(dev_err(e)))?;
        let asynch = self.asynch;
        // `None` hits: an async lookup, counted from `found` after the timed region.
        let outcome: Result<(u64, Option<u64>), TableError> = (|| {
            super::clean::make_room(&mut table, case.op)?;
            let t = table.cuda_mut().expect("a CUDA table");
            let (k, v) = (bufs.keys.as_view(), bufs.values.as_view());
            let mut insert = |mode| {
                if asynch {
                    t.insert_device_async(&stream, &k, &v, mode)?.wait()
                } else {
                    t.insert_device(&k, &v, mode)
                }
            };
            Ok(match case.op {
                Op::Insert | Op::CleanReinsert | Op::RehashReinsert => (rejected_of(insert(InsertMode::Assign))?, Some(0)),
                Op::InsertIfAbsent => (rejected_of(insert(InsertMode::IfAbsent))?, Some(0)),
                Op::ApplySum | Op::ApplyZipf | Op::ApplyHot => (rejected_of(insert(InsertMode::Apply(Reduce::Sum)))?, Some(0)),
                Op::FindHit | Op::FindMiss50 | Op::FindMiss if asynch => {
                    t.find_device_async(&stream, &k, &mut bufs.out_values.as_view_mut(), &mut bufs.found.as_view_mut())?;
                    (0, None)
                }
                Op::FindHit | Op::FindMiss50 | Op::FindMiss => {
                    (0, Some(t.find_device(&k, &mut bufs.out_values.as_view_mut(), &mut bufs.found.as_view_mut())?))
                }
                Op::Contains if asynch => {
                    t.contains_device_async(&stream, &k, &mut bufs.found.as_view_mut())?;
                    (0, None)
                }
                Op::Contains => (0, Some(t.contains_device(&k, &mut bufs.found.as_view_mut())?)),
                Op::Erase if asynch => (0, Some(t.erase_device_async(&stream, &k)?.wait()?)),
                Op::Erase => (0, Some(t.erase_device(&k)?)),
                Op::Mixed => {
                    // Rounds of device-buffer calls on sub-slices, as in the CPU
                    // grid (the synchronous calls, with or without --cuda-async).
                    let (mut rejected, mut hits) = (0, 0);
                    for [ins, era, f] in w.round_ranges() {
                        let (ik, iv) = (bufs.keys.slice(ins.clone()), bufs.values.slice(ins));
                        rejected += rejected_of(t.insert_device(&ik, &iv, InsertMode::Assign))?;
                        hits += t.erase_device(&bufs.erase_keys.slice(era))?;
                        let fk = bufs.find_keys.slice(f.clone());
                        hits += t.find_device(
                            &fk,
                            &mut bufs.out_values.slice_mut(f.clone()),
                            &mut bufs.found.slice_mut(f),
                        )?;
                    }
                    (rejected, Some(hits))
                }
            })
        })();
        end.record(&stream).map_err(|e| self.err(dev_err(e)))?;
        end.synchronize().map_err(|e| self.err(dev_err(e)))?;
        let ms = start.elapsed_ms(&end).map_err(|e| self.err(dev_err(e)))? as f64;
        self.table = Some(table);
        self.bufs = Some(bufs);
        let (rejected, hits) = outcome.map_err(|e| self.err(e))?;
        let hits = match hits {
            Some(h) => h,
            None => {
                let written = self.bufs.as_ref().expect("kept above").found.slice(0..w.keys.len());
                let found = stream.clone_dtoh(&written).map_err(|e| self.err(dev_err(e)))?;
                stream.synchronize().map_err(|e| self.err(dev_err(e)))?;
                found.iter().map(|&f| f as u64).sum()
            }
        };
        check_hits(&format!("{}/{}", self.device, self.scheme), case, hits, self.stored)?;
        if (matches!(case.op, Op::Insert | Op::InsertIfAbsent) || case.op.applies()) {
            let stats = self.table.as_ref().unwrap().stats().map_err(|e| self.err(e))?;
            self.probes = Some(stats.mean_probe_buckets);
        }
        Ok(Sample { ms, rejected, traffic: None })
    }

    fn probes(&self) -> Option<f64> {
        self.probes
    }

    fn reset(&mut self) {
        self.bufs = None;
        self.table = None;
        self.probes = None;
        self.stored = 0;
    }
}
