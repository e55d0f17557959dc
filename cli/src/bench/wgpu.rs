//! The wgpu target: keys and outputs live in GPU buffers before the timed
//! call (the GPU-buffer calls, as an application keeping its data on the GPU
//! would make them), timed on the host clock from the call to its result,
//! which includes the submission and the read-back of its counters. Each
//! timed call follows `--warm-ms` of lookups, so it runs at the clocks a
//! busy GPU keeps, not the idle ones the host-side preparation leaves.

use std::time::{Duration, Instant};

use gpuhash::backend::wgpu::wgpu;
use gpuhash::backend::wgpu::WgpuTable;
use gpuhash::backend::InsertMode;
use gpuhash::{Device, Error as TableError, HashTable, Reduce, RegionBuild, Value};

use super::grid::{check_hits, prefilled_table, Case, Op, Sample, TableOptions, Target};
use super::keys::{GenKey, Workload};
use super::BenchError;

/// GPU-resident inputs and outputs of one case.
struct Buffers {
    keys: wgpu::Buffer,
    values: wgpu::Buffer,
    out_values: wgpu::Buffer,
    found: wgpu::Buffer,
    /// The `mixed` rounds' inserts, erases and lookups, one buffer each.
    rounds: Vec<[(wgpu::Buffer, usize); 4]>,
}

pub(crate) struct WgpuTarget<K: GenKey, V: Value> {
    device: Device,
    scheme: String,
    table: Option<HashTable<K, V>>,
    bufs: Option<Buffers>,
    probes: Option<f64>,
    stored: u64,
    /// GPU work right before each timed call (`--warm-ms`).
    warm: Duration,
    /// Tables built portable (`--wgpu-portable`).
    portable: bool,
}

impl<K: GenKey, V: Value> WgpuTarget<K, V> {
    pub(crate) fn new(device: Device, scheme: &str, warm: Duration, portable: bool) -> Self {
        WgpuTarget { device, scheme: scheme.into(), table: None, bufs: None, probes: None, stored: 0, warm, portable }
    }

    fn err(&self, source: TableError) -> BenchError {
        BenchError::Table { target: format!("{}/{}", self.device, self.scheme), source }
    }
}

/// A storage buffer holding `data` (at least 4 bytes).
fn upload<T: bytemuck::Pod>(t: &WgpuTable<impl GenKey, impl Value>, data: &[T]) -> wgpu::Buffer {
    let bytes: &[u8] = bytemuck::cast_slice(data);
    let b = t.wgpu_device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("bench"),
        size: (bytes.len() as u64).max(4).next_multiple_of(4),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    t.wgpu_queue().write_buffer(&b, 0, bytes);
    b
}

impl<K: GenKey, V: Value> Target<K, V> for WgpuTarget<K, V> {
    fn device(&self) -> String {
        self.device.to_string()
    }

    fn scheme(&self) -> String {
        self.scheme.clone()
    }

    fn supports(&self, _case: &Case) -> bool {
        true
    }

    fn prepare(&mut self, case: &Case, w: &Workload<K, V>) -> Result<(), BenchError> {
        self.reset();
        let (table, stored) =
            prefilled_table(self.device, &self.scheme, TableOptions { region_build: RegionBuild::Never, wgpu_portable: self.portable }, case, w)
                .map_err(|e| self.err(e))?;
        self.stored = stored;
        if !(matches!(case.op, Op::Insert | Op::InsertIfAbsent) || case.op.applies()) {
            self.probes = Some(table.stats().map_err(|e| self.err(e))?.mean_probe_buckets);
        }
        let t = table.wgpu().expect("a wgpu table");
        let n = w.keys.len().max(w.find_keys.len()).max(1);
        let mut rounds = Vec::new();
        for [ins, era, f] in w.round_ranges() {
            rounds.push([
                (upload(t, &w.keys[ins.clone()]), ins.len()),
                (upload(t, &w.values[ins.clone()]), ins.len()),
                (upload(t, &w.erase_keys[era.clone()]), era.len()),
                (upload(t, &w.find_keys[f.clone()]), f.len()),
            ]);
        }
        // The table's work buffers exist before the timed call, as they do
        // for an application's second call.
        t.reserve_work(n).map_err(|e| self.err(e))?;
        let bufs = Buffers {
            keys: upload(t, &w.keys),
            values: upload(t, &w.values),
            out_values: upload(t, &vec![V::from_bits(0); n]),
            found: upload(t, &vec![0u32; n]),
            rounds,
        };
        // The uploads land before the timed call (written buffers go with
        // the next submission), and what the preparation dropped (the last
        // case's table, the statistics' read-back) is freed at this poll,
        // not inside the timed call: submit nothing now and wait for it.
        t.wgpu_queue().submit([]);
        t.wgpu_device()
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| self.err(TableError::Device { device: self.device.to_string(), message: e.to_string() }))?;
        self.table = Some(table);
        self.bufs = Some(bufs);
        Ok(())
    }

    fn run(&mut self, case: &Case, w: &Workload<K, V>) -> Result<Sample, BenchError> {
        let bufs = self.bufs.take().expect("prepare() runs before run()");
        let mut table = self.table.take().expect("prepare() runs before run()");
        let n = w.keys.len();
        // Lookups of the case's keys until the clocks are up (see
        // defaults::WGPU_WARM_MS): they change nothing the timed call reads.
        let warm = Instant::now();
        while n > 0 && warm.elapsed() < self.warm {
            let t = table.wgpu().expect("a wgpu table");
            if let Err(e) = t.find_buffers(&bufs.keys, &bufs.out_values, &bufs.found, n) {
                self.table = Some(table);
                self.bufs = Some(bufs);
                return Err(self.err(e));
            }
        }
        let start = Instant::now();
        let outcome: Result<(u64, u64), TableError> = (|| {
            super::clean::make_room(&mut table, case.op)?;
            let t = table.wgpu_mut().expect("a wgpu table");
            let rejected = |r: gpuhash::Result<gpuhash::backend::RawInsert>| r.map(|r| r.failed.len() as u64);
            Ok(match case.op {
                Op::Insert | Op::CleanReinsert | Op::RehashReinsert => {
                    (rejected(t.insert_buffers(&bufs.keys, &bufs.values, n, InsertMode::Assign))?, 0)
                }
                Op::InsertIfAbsent => (rejected(t.insert_buffers(&bufs.keys, &bufs.values, n, InsertMode::IfAbsent))?, 0),
                Op::ApplySum | Op::ApplyZipf | Op::ApplyHot => {
                    (rejected(t.insert_buffers(&bufs.keys, &bufs.values, n, InsertMode::Apply(Reduce::Sum)))?, 0)
                }
                Op::FindHit | Op::FindMiss50 | Op::FindMiss => (0, t.find_buffers(&bufs.keys, &bufs.out_values, &bufs.found, n)?),
                Op::Contains => (0, t.contains_buffers(&bufs.keys, &bufs.found, n)?),
                Op::Erase => (0, t.erase_buffers(&bufs.keys, n)?),
                Op::Mixed => {
                    let (mut rejected_n, mut hits) = (0, 0);
                    for [(ik, ni), (iv, _), (ek, ne), (fk, nf)] in &bufs.rounds {
                        rejected_n += rejected(t.insert_buffers(ik, iv, *ni, InsertMode::Assign))?;
                        hits += t.erase_buffers(ek, *ne)?;
                        hits += t.find_buffers(fk, &bufs.out_values, &bufs.found, *nf)?;
                    }
                    (rejected_n, hits)
                }
            })
        })();
        let ms = start.elapsed().as_secs_f64() * 1e3;
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(t) = table.wgpu() {
            super::vkmem::sample(t.wgpu_device());
        }
        self.table = Some(table);
        self.bufs = Some(bufs);
        let (rejected, hits) = outcome.map_err(|e| self.err(e))?;
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
