//! The benchmark grid: operations, cases, the `Target` abstraction and the
//! loop that times every target on every case.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use gpuhash::core::capacity::round_slots;
use gpuhash::core::layout::Word;
use gpuhash::{Device, Error as TableError, HashTable, Key, Paging, Reduce, RegionBuild, Value};
use indicatif::ProgressBar;

use super::bus::Traffic;
use super::keys::{rep_seed, GenKey, Workload};
use super::peers;
use super::record::Recorder;
use super::report::Row;
use super::BenchError;

/// One benchmarked operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    /// insert-or-assign of n distinct keys into an empty table.
    Insert,
    /// insert-if-absent of n distinct keys into an empty table.
    InsertIfAbsent,
    /// Lookup of the n stored keys.
    FindHit,
    /// Lookup of n keys, each a hit or a miss with probability 1/2.
    FindMiss50,
    /// Lookup of n keys that are not stored.
    FindMiss,
    /// Membership test of the n stored keys.
    Contains,
    /// Erase of the n stored keys.
    Erase,
    /// insert-or-apply (sum) of n distinct keys, each `multiplicity` times.
    ApplySum,
    /// `apply_sum`'s n distinct keys once, then its other copies drawn
    /// zipf(1.2) over them (the hottest key takes about 18% of the draws).
    ApplyZipf,
    /// `apply_sum` with 2^24 of its copies (at most all but one pass) made
    /// one key.
    ApplyHot,
    /// Rounds of insert, erase and find calls in the `--mix` proportions.
    Mixed,
    /// `clean_tombstones`, then reinsertion of erased keys (see `clean.rs`).
    CleanReinsert,
    /// A rehash at the same capacity, then the same reinsertion.
    RehashReinsert,
}

impl Op {
    pub(crate) const ALL: &'static [Op] = &[
        Op::Insert,
        Op::InsertIfAbsent,
        Op::FindHit,
        Op::FindMiss50,
        Op::FindMiss,
        Op::Contains,
        Op::Erase,
        Op::ApplySum,
        Op::ApplyZipf,
        Op::ApplyHot,
        Op::Mixed,
        Op::CleanReinsert,
        Op::RehashReinsert,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::InsertIfAbsent => "insert_if_absent",
            Op::FindHit => "find_hit",
            Op::FindMiss50 => "find_miss50",
            Op::FindMiss => "find_miss",
            Op::Contains => "contains",
            Op::Erase => "erase",
            Op::ApplySum => "apply_sum",
            Op::ApplyZipf => "apply_zipf",
            Op::ApplyHot => "apply_hot",
            Op::Mixed => "mixed",
            Op::CleanReinsert => "clean_reinsert",
            Op::RehashReinsert => "rehash_reinsert",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Op> {
        Op::ALL.iter().copied().find(|o| o.name() == s)
    }

    /// The insert-or-apply ops: uniform copies and the two skews.
    pub(crate) fn applies(self) -> bool {
        matches!(self, Op::ApplySum | Op::ApplyZipf | Op::ApplyHot)
    }

    /// Ops that run at loads above 1.0 and count the keys a full table
    /// rejects. Lookups in an overfull table would only measure the probe
    /// limit (every miss scans it), so they stop at 1.0.
    pub(crate) fn allows_overfull(self) -> bool {
        matches!(self, Op::Insert | Op::InsertIfAbsent) || self.applies()
    }

    /// Whether the timed call builds the table (probe statistics are then
    /// taken after it) rather than using a prefilled one (taken before).
    fn builds_table(self) -> bool {
        matches!(self, Op::Insert | Op::InsertIfAbsent) || self.applies()
    }
}

/// How many keys the timed call takes: the whole load into an empty (for
/// inserts) or filled table, or a batch of that many against a table
/// prefilled to the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Batch {
    /// The whole load in one call (inserts start from an empty table).
    All,
    /// `n` keys in one call against a table holding the load's keys:
    /// fresh keys for inserts, stored keys (or misses) for lookups and erases.
    Keys(u64),
}

impl Batch {
    /// Keys per timed call, or `None` for the whole load.
    pub(crate) fn keys(self) -> Option<u64> {
        match self {
            Batch::All => None,
            Batch::Keys(n) => Some(n),
        }
    }

    /// `all`, or the count as `2^20`.
    pub(crate) fn label(self) -> String {
        match self {
            Batch::All => "all".into(),
            Batch::Keys(n) => super::report::pretty_count(n),
        }
    }

    /// Whether `op` runs with this batch: `mixed` has its own rounds.
    fn applies_to(self, op: Op) -> bool {
        self == Batch::All || !matches!(op, Op::Mixed | Op::CleanReinsert | Op::RehashReinsert)
    }
}

/// Split of the `mixed` workload in percent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mix {
    pub insert: u32,
    pub erase: u32,
    pub find: u32,
}

impl Mix {
    /// Parses `insert:erase:find` percentages summing to 100.
    pub(crate) fn parse(s: &str) -> Result<Mix, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let nums: Result<Vec<u32>, _> = parts.iter().map(|p| p.trim().parse::<u32>()).collect();
        match nums {
            Ok(v) if v.len() == 3 && v.iter().sum::<u32>() == 100 => {
                Ok(Mix { insert: v[0], erase: v[1], find: v[2] })
            }
            _ => Err(format!("'{s}' is not insert:erase:find percentages summing to 100 (e.g. 20:10:70)")),
        }
    }

    /// Operations of each kind out of `total`.
    pub(crate) fn split(&self, total: u64) -> (u64, u64, u64) {
        let ins = total * self.insert as u64 / 100;
        let era = total * self.erase as u64 / 100;
        (ins, era, total - ins - era)
    }
}

/// The oversubscription of a paged case: a table of `oversub` times the
/// device budget, split into `resident * oversub` pages of which `resident`
/// fit the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CasePaging {
    /// Table size over device budget (1: every page fits).
    pub oversub: u32,
    /// Pages held in the budget at once.
    pub resident: u32,
}

impl CasePaging {
    pub(crate) fn pages(self) -> u32 {
        self.resident * self.oversub
    }
}

/// One cell of the grid (for every target).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Case {
    pub op: Op,
    pub key_bits: u32,
    pub value_bits: u32,
    /// Slots of the table (the request rounded to whole buckets).
    pub slots: u64,
    /// Bytes of the gpuhash table (`slots` times the slot size).
    pub table_bytes: u64,
    pub load: f64,
    /// Distinct keys: `load * slots`, rounded.
    pub distinct: u64,
    /// Keys of the timed call (see [`Batch`]).
    pub batch: Batch,
    pub multiplicity: u64,
    pub mix: Mix,
    pub round_ops: u64,
    /// A paged table (`--oversub`), or `None` for an ordinary one.
    pub paging: Option<CasePaging>,
}

impl Case {
    /// Bytes of one page of a paged case. The library splits the capacity
    /// evenly and rounds each page up to whole buckets, so the pages hold
    /// up to a bucket each more than `slots` / pages (and `slots` stays the
    /// capacity asked, the same at every oversubscription).
    pub(crate) fn page_bytes(&self) -> Option<u64> {
        let slot_bytes = self.table_bytes / self.slots;
        let page_slots = |p: CasePaging| self.slots.div_ceil(u64::from(p.pages()));
        self.paging.map(|p| round_slots(page_slots(p), slot_bytes as usize).unwrap_or(page_slots(p)) * slot_bytes)
    }
}

/// Everything the grid needs, resolved from flags and defaults.
#[derive(Clone, Debug)]
pub(crate) struct GridSpec {
    pub device: Device,
    pub schemes: Vec<String>,
    /// When the gpuhash tables take the CUDA region build.
    pub region_build: RegionBuild,
    pub peers: bool,
    pub ops: Vec<Op>,
    pub key_bits: Vec<u32>,
    pub value_bits: Vec<u32>,
    pub loads: Vec<f64>,
    pub sizes: Vec<u64>,
    pub batches: Vec<Batch>,
    pub reps: usize,
    pub warmup: usize,
    /// wgpu: milliseconds of GPU work before each timed call.
    pub warm_ms: u64,
    /// wgpu: tables built with `Builder::wgpu_portable` (the browser's
    /// kernels: 32-bit atomics, no subgroups).
    pub wgpu_portable: bool,
    /// CUDA: time the async device-buffer calls (see `--cuda-async`).
    pub cuda_async: bool,
    pub seed: u64,
    pub multiplicity: u64,
    pub mix: Mix,
    pub round_ops: u64,
    /// Table size / device budget of each paged case; empty: unpaged tables.
    pub oversub: Vec<u32>,
    /// Resident pages of the paged cases.
    pub resident: u32,
}

fn slot_bytes<K: Key, V: Value>() -> u64 {
    <K::Word<V> as Word>::BYTES as u64
}

fn slot_bytes_of(key_bits: u32, value_bits: u32) -> u64 {
    match (key_bits, value_bits) {
        (32, 32) => slot_bytes::<u32, u32>(),
        (32, _) => slot_bytes::<u32, u64>(),
        (_, 32) => slot_bytes::<u64, u32>(),
        _ => slot_bytes::<u64, u64>(),
    }
}

impl GridSpec {
    /// The paging of each table size: `None` alone when unpaged.
    fn pagings(&self) -> Vec<Option<CasePaging>> {
        if self.oversub.is_empty() {
            return vec![None];
        }
        self.oversub.iter().map(|&oversub| Some(CasePaging { oversub, resident: self.resident })).collect()
    }

    /// Every case, in the order they run: key width, value width, size,
    /// oversubscription, batch, op, load.
    pub(crate) fn cases(&self) -> Vec<Case> {
        let mut out = Vec::new();
        for &key_bits in &self.key_bits {
            for &value_bits in &self.value_bits {
                let sb = slot_bytes_of(key_bits, value_bits);
                for (&size, paging) in self.sizes.iter().flat_map(|s| self.pagings().into_iter().map(move |p| (s, p))) {
                    let slots = round_slots(size, sb as usize).unwrap_or(size);
                    for &batch in &self.batches {
                        for &op in self.ops.iter().filter(|&&op| batch.applies_to(op)) {
                            let loads = op.fixed_load().map_or_else(|| self.loads.clone(), |l| vec![l]);
                            for &load in &loads {
                                if load > 1.0 && !op.allows_overfull() {
                                    continue;
                                }
                                out.push(Case {
                                    op,
                                    key_bits,
                                    value_bits,
                                    slots,
                                    table_bytes: slots * sb,
                                    load,
                                    distinct: (load * slots as f64).round() as u64,
                                    batch,
                                    multiplicity: self.multiplicity,
                                    mix: self.mix,
                                    round_ops: self.round_ops,
                                    paging,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// One timed run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    pub ms: f64,
    /// Keys a full table did not store (growth off).
    pub rejected: u64,
    /// What the call moved between host and device (paged tables only).
    pub traffic: Option<Traffic>,
}

/// Something the grid can time: a gpuhash table on some device, or a peer.
///
/// `prepare` and `reset` are never timed; `run` times only the bulk call(s)
/// and reports milliseconds, so a GPU target can time with device events
/// instead of the host clock.
pub(crate) trait Target<K: GenKey, V: Value> {
    /// Device label for the results (`cpu`, `cuda:0`).
    fn device(&self) -> String;
    /// Scheme label for the results (`default`, `std`, ...).
    fn scheme(&self) -> String;
    /// Whether this target runs `case` at all.
    fn supports(&self, case: &Case) -> bool;
    /// Builds the state the timed call starts from.
    fn prepare(&mut self, case: &Case, w: &Workload<K, V>) -> Result<(), BenchError>;
    /// Runs the case's operation once and times it.
    fn run(&mut self, case: &Case, w: &Workload<K, V>) -> Result<Sample, BenchError>;
    /// Mean 32-byte buckets probed per stored key, if known (see `stats()`).
    fn probes(&self) -> Option<f64> {
        None
    }
    /// Drops the state, so only one table lives at a time.
    fn reset(&mut self);
}

/// A gpuhash `HashTable` on any device. On the CPU the host clock is exact;
/// a CUDA implementation may replace `run`'s timing by CUDA events.
pub(crate) struct TableTarget<K: Key, V: Value> {
    device: Device,
    scheme: String,
    region_build: RegionBuild,
    table: Option<HashTable<K, V>>,
    out_values: Vec<V>,
    found: Vec<bool>,
    probes: Option<f64>,
    /// Prefilled keys the table holds (fewer than asked only if it was full).
    stored: u64,
}

impl<K: Key, V: Value> TableTarget<K, V> {
    pub(crate) fn new(device: Device, scheme: &str, region_build: RegionBuild) -> Self {
        TableTarget {
            device,
            scheme: scheme.to_string(),
            region_build,
            table: None,
            out_values: Vec::new(),
            found: Vec::new(),
            probes: None,
            stored: 0,
        }
    }

    fn err(&self, source: TableError) -> BenchError {
        BenchError::Table { target: format!("{}/{}", self.device, self.scheme), source }
    }

    fn table(&mut self) -> &mut HashTable<K, V> {
        self.table.as_mut().expect("prepare() runs before run()")
    }

    fn measure_probes(&mut self) -> Result<(), BenchError> {
        let stats = self.table().stats().map_err(|e| self.err(e))?;
        self.probes = Some(stats.mean_probe_buckets);
        Ok(())
    }
}

/// Keys an insert did not store: a full table (growth off) is an outcome
/// to count, not a failure.
pub(crate) fn rejected_of(r: Result<gpuhash::InsertReport, TableError>) -> Result<u64, TableError> {
    match r {
        Ok(_) => Ok(0),
        Err(TableError::TableFull(not)) => Ok(not.positions.len() as u64),
        Err(e) => Err(e),
    }
}

/// Builder options of the gpuhash tables a grid measures (`--region-build`,
/// `--wgpu-portable`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TableOptions {
    pub region_build: RegionBuild,
    pub wgpu_portable: bool,
}

/// A table of the case's size at exact load (growth off), holding the
/// workload's prefill; returns it with the number of keys it stored.
pub(crate) fn prefilled_table<K: GenKey, V: Value>(
    device: Device,
    scheme: &str,
    opts: TableOptions,
    case: &Case,
    w: &Workload<K, V>,
) -> Result<(HashTable<K, V>, u64), TableError> {
    let scheme: gpuhash::Scheme = scheme.parse().map_err(TableError::Unsupported)?;
    let mut builder = HashTable::<K, V>::builder()
        .device(device)
        .scheme(scheme)
        .region_build(opts.region_build)
        .wgpu_portable(opts.wgpu_portable)
        .capacity(case.slots)
        .max_load_factor(1.0)
        .growth(false);
    if let Some(p) = case.paging {
        builder = builder.paged(Paging::new(p.pages(), p.resident));
    }
    let mut table: HashTable<K, V> = builder.build()?;
    let mut stored = 0;
    if !w.prefill.is_empty() {
        let rejected = rejected_of(table.insert_or_assign(&w.prefill, &w.prefill_values))?;
        stored = w.prefill.len() as u64 - rejected;
    }
    let erased = super::clean::erased_before(case.op, w);
    if !erased.is_empty() {
        stored -= table.erase(erased)?;
    }
    Ok((table, stored))
}

/// The result must be right for the timing to mean anything: the hits a
/// lookup or erase reported against what the table holds (`stored` of the
/// case's prefill). A batch queries stored keys only when all were stored.
pub(crate) fn check_hits(target: &str, case: &Case, hits: u64, stored: u64) -> Result<(), BenchError> {
    let all_stored = stored == case.distinct;
    let expected = match (case.op, case.batch) {
        (Op::FindMiss, _) => Some(0),
        (Op::FindHit | Op::Contains | Op::Erase, Batch::All) => Some(stored),
        (Op::FindHit | Op::Contains, Batch::Keys(n)) if all_stored => Some(n),
        // Erasing a key twice in one batch counts once.
        (Op::Erase, Batch::Keys(n)) if all_stored => Some(n.min(stored)),
        _ => None,
    };
    match expected.filter(|&want| want != hits) {
        Some(want) => Err(BenchError::Check(format!("{target} {}: {hits} keys found, expected {want}", case.op.name()))),
        None => Ok(()),
    }
}

/// Output buffers written by a lookup, touched now so that page faults do
/// not land in the timed region (a zeroed allocation may be mapped lazily).
fn touched<T: Clone>(n: usize, fill: T) -> Vec<T> {
    vec![fill; n]
}

impl<K: GenKey, V: Value> Target<K, V> for TableTarget<K, V> {
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
        let opts = TableOptions { region_build: self.region_build, ..TableOptions::default() };
        let (table, stored) = prefilled_table(self.device, &self.scheme, opts, case, w).map_err(|e| self.err(e))?;
        self.table = Some(table);
        self.stored = stored;
        if !case.op.builds_table() {
            self.measure_probes()?;
        }
        let outputs = match case.op {
            Op::Mixed => w.find_keys.len(),
            Op::FindHit | Op::FindMiss50 | Op::FindMiss | Op::Contains => w.keys.len(),
            _ => 0,
        };
        self.out_values = touched(outputs, V::from_bits(1));
        self.found = touched(outputs, true);
        Ok(())
    }

    fn run(&mut self, case: &Case, w: &Workload<K, V>) -> Result<Sample, BenchError> {
        let mut table = self.table.take().expect("prepare() runs before run()");
        let (vals, found) = (&mut self.out_values, &mut self.found);
        let paging_before = table.paged().map(|p| p.stats());
        let start = Instant::now();
        let outcome: Result<(u64, u64), TableError> = (|| {
            let t = &mut table;
            super::clean::make_room(t, case.op)?;
            Ok(match case.op {
                Op::Insert | Op::CleanReinsert | Op::RehashReinsert => {
                    (rejected_of(t.insert_or_assign(&w.keys, &w.values))?, 0)
                }
                Op::InsertIfAbsent => (rejected_of(t.insert_if_absent(&w.keys, &w.values))?, 0),
                Op::ApplySum | Op::ApplyZipf | Op::ApplyHot => {
                    (rejected_of(t.insert_or_apply(&w.keys, &w.values, Reduce::Sum))?, 0)
                }
                Op::FindHit | Op::FindMiss50 | Op::FindMiss => (0, t.find_into(&w.keys, vals, found)?),
                Op::Contains => (0, t.contains_into(&w.keys, found)?),
                Op::Erase => (0, t.erase(&w.keys)?),
                Op::Mixed => {
                    let (mut rejected, mut hits) = (0, 0);
                    for [ins, era, f] in w.round_ranges() {
                        rejected += rejected_of(t.insert_or_assign(&w.keys[ins.clone()], &w.values[ins]))?;
                        hits += t.erase(&w.erase_keys[era])?;
                        hits += t.find_into(&w.find_keys[f.clone()], &mut vals[f.clone()], &mut found[f])?;
                    }
                    (rejected, hits)
                }
            })
        })();
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let traffic = match (paging_before, table.paged(), case.page_bytes()) {
            (Some(before), Some(p), Some(page_bytes)) => {
                Some(Traffic::of_call(before, p.stats(), page_bytes, super::bus::io_bytes(case, w)))
            }
            _ => None,
        };
        self.table = Some(table);
        let (rejected, hits) = outcome.map_err(|e| self.err(e))?;
        black_box(hits);
        check_hits(&format!("{}/{}", self.device, self.scheme), case, hits, self.stored)?;
        if case.op.builds_table() {
            self.measure_probes()?;
        }
        Ok(Sample { ms, rejected, traffic })
    }

    fn probes(&self) -> Option<f64> {
        self.probes
    }

    fn reset(&mut self) {
        self.table = None;
        self.out_values = Vec::new();
        self.found = Vec::new();
        self.probes = None;
        self.stored = 0;
    }
}

/// The gpuhash table on `device`: on a CUDA GPU, the target that keeps keys
/// in device memory and times with CUDA events; on wgpu, the one that keeps
/// them in wgpu buffers; elsewhere, and for paged
/// tables (whose pages and keys live in host memory, so their calls take
/// host buffers), the host-timed one.
fn table_target<K: GenKey, V: Value>(spec: &GridSpec, scheme: &str, paged: bool) -> Box<dyn Target<K, V>> {
    let (device, region) = (spec.device, spec.region_build);
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(_) if !paged => Box::new(super::cuda::CudaTarget::<K, V>::new(device, scheme, region, spec.cuda_async)),
        #[cfg(feature = "wgpu")]
        Device::Wgpu | Device::WgpuAdapter(_) if !paged => {
            Box::new(super::wgpu::WgpuTarget::<K, V>::new(device, scheme, std::time::Duration::from_millis(spec.warm_ms), spec.wgpu_portable))
        }
        _ => {
            let _ = paged;
            Box::new(TableTarget::<K, V>::new(device, scheme, region))
        }
    }
}

/// Runs every case on every target; one row per (case, target), each
/// recorded as soon as its case is measured. The progress bar advances once
/// per case. Once `stop` is set, no further case starts.
pub(crate) fn run(spec: &GridSpec, progress: &ProgressBar, rec: &mut Recorder, stop: &AtomicBool) -> Result<(), BenchError> {
    let cases = spec.cases();
    for &kb in &spec.key_bits {
        for &vb in &spec.value_bits {
            let mine: Vec<Case> = cases.iter().filter(|c| c.key_bits == kb && c.value_bits == vb).copied().collect();
            match (kb, vb) {
                (32, 32) => run_typed::<u32, u32>(spec, &mine, progress, rec, stop)?,
                (32, _) => run_typed::<u32, u64>(spec, &mine, progress, rec, stop)?,
                (_, 32) => run_typed::<u64, u32>(spec, &mine, progress, rec, stop)?,
                _ => run_typed::<u64, u64>(spec, &mine, progress, rec, stop)?,
            }
        }
    }
    Ok(())
}

fn run_typed<K: GenKey, V: Value>(
    spec: &GridSpec,
    cases: &[Case],
    progress: &ProgressBar,
    rec: &mut Recorder,
    stop: &AtomicBool,
) -> Result<(), BenchError> {
    let paged = !spec.oversub.is_empty();
    let mut targets: Vec<Box<dyn Target<K, V>>> =
        spec.schemes.iter().map(|s| table_target(spec, s, paged)).collect();
    if spec.peers {
        targets.extend(peers::all::<K, V>());
    }
    for case in cases {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let active: Vec<usize> = (0..targets.len()).filter(|&t| targets[t].supports(case)).collect();
        progress.set_message(format!(
            "{} k{}/v{} load {} slots {}{}",
            case.op.name(),
            case.key_bits,
            case.value_bits,
            case.load,
            case.slots,
            case.paging.map_or_else(String::new, |p| format!(" oversub {}", p.oversub))
        ));
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); targets.len()];
        let mut probes: Vec<Option<f64>> = vec![None; targets.len()];
        let mut out_of_memory = vec![false; targets.len()];
        let mut ops = 0;
        // Every repetition gets fresh keys; all targets share them, and run
        // one after the other so slow drifts (clock, heat) hit all alike.
        for rep in 0..spec.warmup + spec.reps {
            let w = Workload::<K, V>::build(case, rep_seed(spec.seed, rep));
            ops = w.ops();
            for &t in &active {
                if out_of_memory[t] {
                    continue;
                }
                let target = &mut targets[t];
                // A case larger than a device can hold is a finding, not the
                // end of the grid: it is reported and the next case runs.
                let s = match target.prepare(case, &w).and_then(|()| target.run(case, &w)) {
                    Err(BenchError::Table { target: name, source: source @ gpuhash::Error::OutOfMemory { .. } }) => {
                        progress.suspend(|| eprintln!("skipped: {name}: {source}"));
                        target.reset();
                        out_of_memory[t] = true;
                        continue;
                    }
                    r => r?,
                };
                if rep >= spec.warmup {
                    samples[t].push(s);
                    probes[t] = target.probes();
                }
                target.reset();
            }
        }
        for &t in active.iter().filter(|&&t| !out_of_memory[t]) {
            let tg = &targets[t];
            rec.record(Row::measurement(&tg.device(), &tg.scheme(), case, ops, &samples[t], probes[t]))?;
        }
        rec.case_done();
        progress.inc(1);
    }
    Ok(())
}
