//! Nothing is lost when memory runs out. For every scheme, on the CPU and on
//! CUDA device 0, for `u32 -> u32` and `u64 -> u64`: each operation that
//! allocates (an insert that grows, `rehash`, `reserve`, `clean_tombstones`,
//! an insert with growth off that reclaims tombstones, and on CUDA the
//! region build and the staging pipeline) runs once per allocation point
//! with that allocation failing ([`gpuhash::fault`]), until it runs without
//! reaching the failure. Each time the outcome must be success (a fallback),
//! `OutOfMemory` with the table unchanged, or, for an insert that got
//! part-way, `GrowthFailed` naming exactly the positions it did not store;
//! and the table must then equal the `HashMap` oracle (len, every lookup,
//! export) and take a further insert. On CUDA a second test first takes
//! nearly all of the device's memory. Without a usable device the CUDA tests
//! print `skipped: no CUDA device (...)`; `GPUHASH_REQUIRE_CUDA=1` makes that
//! a failure.
//!
//! Each target prints `faults <target>: N injected, N survived`; run with
//! `--nocapture` to see them.

#[macro_use]
mod common;

#[cfg(feature = "cuda")]
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};

use common::*;
#[cfg(feature = "cuda")]
use gpuhash::cudarc::driver::{result as cu, sys::CUdeviceptr, CudaContext};
use gpuhash::{fault, Builder, Device, Error, HashTable, InsertReport, Key, Scheme};
use rand::seq::SliceRandom;

/// The operations whose every allocation is made to fail in turn.
#[derive(Clone, Copy, Debug, PartialEq)]
enum FaultOp {
    /// An insert with growth on that passes the maximum load part-way.
    GrowingInsert,
    /// `rehash` into twice the slots, with tombstones.
    Rehash,
    /// `reserve` beyond the maximum load.
    Reserve,
    /// `clean_tombstones` after erasing half the keys.
    Clean,
    /// The same with a probe limit of two buckets (linear schemes), where
    /// the put-back may need the fallback rebuild.
    CleanShortLimit,
    /// An insert with growth off into a full table holding tombstones: it
    /// reclaims them and tries again.
    ReclaimingInsert,
    /// CUDA, linear scheme: a batch the region build takes.
    RegionBuild,
    /// The same with a probe limit of two buckets and growth off: the build
    /// refuses keys and must name their positions after its kernels ran.
    RegionRefusing,
    /// CUDA: the first batch through the staging pipeline.
    StagedInsert,
}

impl FaultOp {
    const ALL: [FaultOp; 9] = [
        FaultOp::GrowingInsert,
        FaultOp::Rehash,
        FaultOp::Reserve,
        FaultOp::Clean,
        FaultOp::CleanShortLimit,
        FaultOp::ReclaimingInsert,
        FaultOp::RegionBuild,
        FaultOp::RegionRefusing,
        FaultOp::StagedInsert,
    ];

    fn applies(self, dev: Target) -> bool {
        let cuda = matches!(dev.device, Device::Cuda(_));
        match self {
            FaultOp::CleanShortLimit => matches!(dev.scheme, Scheme::Linear | Scheme::Hashinator { .. }),
            FaultOp::RegionBuild | FaultOp::RegionRefusing => cuda && dev.scheme == Scheme::Linear,
            FaultOp::StagedInsert => cuda,
            _ => true,
        }
    }

    fn inserts(self) -> bool {
        !matches!(self, FaultOp::Rehash | FaultOp::Reserve | FaultOp::Clean | FaultOp::CleanShortLimit)
    }
}

/// A table, its oracle, and the batch an insert operation stores.
struct Case<K: Key, V: TestValue> {
    t: HashTable<K, V>,
    o: Oracle<K, V>,
    keys: Vec<K>,
    vals: Vec<V>,
}

fn build<K: Key, V: TestValue>(b: Builder, cx: &Ctx) -> HashTable<K, V> {
    b.build().unwrap_or_else(|e| panic!("{cx}: build failed: {e}"))
}

/// Inserts `n` fresh keys in batches of at most `batch` (what does not fit
/// a table with growth off is reported and left out of the oracle).
fn fill<K: Key, V: TestValue>(t: &mut HashTable<K, V>, o: &mut Oracle<K, V>, n: usize, batch: usize, cx: &mut Ctx) {
    let keys = fresh_keys(&mut cx.rng, n, o, &[]);
    for chunk in keys.chunks(batch.max(1)) {
        let vals = any_values::<V>(&mut cx.rng, chunk.len());
        insert(t, o, Op::Assign, chunk, &vals, cx);
    }
}

/// Erases a random `share` of the stored keys.
fn erase_share<K: Key, V: TestValue>(t: &mut HashTable<K, V>, o: &mut Oracle<K, V>, share: f64, cx: &mut Ctx) {
    let mut stored: Vec<K> = o.sorted().into_iter().map(|p| p.0).collect();
    stored.shuffle(&mut cx.rng);
    stored.truncate((stored.len() as f64 * share) as usize);
    erase(t, o, &stored, cx);
}

/// `fresh` new keys and `old` stored ones with new values, shuffled (all distinct).
fn batch<K: Key, V: TestValue>(o: &Oracle<K, V>, fresh: usize, old: usize, cx: &mut Ctx) -> (Vec<K>, Vec<V>) {
    let mut keys = fresh_keys(&mut cx.rng, fresh, o, &[]);
    let mut stored: Vec<K> = o.sorted().into_iter().map(|p| p.0).collect();
    stored.shuffle(&mut cx.rng);
    keys.extend(stored.into_iter().take(old));
    keys.shuffle(&mut cx.rng);
    let vals = any_values::<V>(&mut cx.rng, keys.len());
    (keys, vals)
}

/// The table before `op`, the same for every fault (the inputs come from `cx`'s seed).
fn setup<K: Key, V: TestValue>(dev: Target, op: FaultOp, cx: &mut Ctx) -> Case<K, V> {
    let s = scaled(1 << 13);
    let share = |slots: usize, f: f64| (slots as f64 * f) as usize;
    let mut o = Oracle::new();
    let mut none = (Vec::new(), Vec::new());
    let (t, (keys, vals)) = match op {
        FaultOp::GrowingInsert => {
            let mut t = build(builder(dev).capacity(s as u64), cx);
            fill(&mut t, &mut o, share(s, 0.6), s, cx);
            let b = batch(&o, share(s, 0.6), share(s, 0.1), cx);
            (t, b)
        }
        FaultOp::Rehash | FaultOp::Reserve => {
            let mut t = build(builder(dev).capacity(s as u64), cx);
            fill(&mut t, &mut o, share(s, 0.6), s, cx);
            erase_share(&mut t, &mut o, 0.25, cx);
            (t, std::mem::take(&mut none))
        }
        FaultOp::Clean => {
            let mut t = build(builder(dev).capacity(s as u64), cx);
            fill(&mut t, &mut o, share(s, 0.8), s, cx);
            erase_share(&mut t, &mut o, 0.5, cx);
            (t, std::mem::take(&mut none))
        }
        FaultOp::CleanShortLimit => {
            let b = builder(dev).capacity(s as u64).growth(false).max_load_factor(1.0).max_probe_buckets(2);
            let mut t = build(b, cx);
            fill(&mut t, &mut o, share(s, 0.9), s, cx);
            erase_share(&mut t, &mut o, 0.35, cx);
            (t, std::mem::take(&mut none))
        }
        FaultOp::ReclaimingInsert => {
            let mut t = build(builder(dev).capacity(s as u64).growth(false).max_load_factor(1.0), cx);
            fill(&mut t, &mut o, s, s, cx);
            erase_share(&mut t, &mut o, 0.3, cx);
            let b = batch(&o, share(s, 0.25), 0, cx);
            (t, b)
        }
        FaultOp::RegionBuild | FaultOp::RegionRefusing => {
            // At least 4 regions of 64 KiB; the batch at least a sixteenth of
            // the slots, below the staging threshold (64 Ki keys), leaving
            // the table at most 96% full (see src/backend/cuda/region.rs).
            let s = scaled(1 << 16).max(1 << 15);
            let mut b = builder(dev).capacity(s as u64);
            if op == FaultOp::RegionRefusing {
                b = b.growth(false).max_load_factor(1.0).max_probe_buckets(2);
            }
            let mut t = build(b, cx);
            fill(&mut t, &mut o, share(s, 0.45), s, cx);
            let b = batch(&o, share(s, 0.45), share(s, 0.03), cx);
            (t, b)
        }
        FaultOp::StagedInsert => {
            // The staging threshold is fixed (64 Ki keys): not scaled.
            let s = 1 << 18;
            let mut t = build(builder(dev).capacity(s as u64), cx);
            fill(&mut t, &mut o, share(s, 0.2), 1 << 15, cx);
            let b = batch(&o, 1 << 16, 1 << 10, cx);
            (t, b)
        }
    };
    Case { t, o, keys, vals }
}

/// Runs `op`; `Err` only as the table API reports it.
fn act<K: Key, V: TestValue>(op: FaultOp, c: &mut Case<K, V>) -> gpuhash::Result<Option<InsertReport>> {
    match op {
        FaultOp::Rehash => c.t.rehash(c.t.capacity() * 2).map(|()| None),
        FaultOp::Reserve => c.t.reserve(c.t.capacity() / 2).map(|()| None),
        FaultOp::Clean | FaultOp::CleanShortLimit => c.t.clean_tombstones().map(|()| None),
        _ => c.t.insert_or_assign(&c.keys, &c.vals).map(Some),
    }
}

/// Checks an insert's outcome (`hit`: the injected failure was reached) and
/// brings the oracle to what the table must now hold.
fn judge_insert<K: Key, V: TestValue>(r: gpuhash::Result<Option<InsertReport>>, c: &mut Case<K, V>, hit: bool, cx: &Ctx) {
    let growth = c.t.growth();
    let n = c.keys.len();
    let (report, not_stored) = match r {
        Ok(report) => (report.expect("an insert reports"), Vec::new()),
        Err(Error::TableFull(ns)) if !growth => {
            check_not_stored(&ns, &c.keys, cx);
            (ns.report, ns.positions)
        }
        Err(Error::GrowthFailed { cause, not_stored }) if growth && hit => {
            assert!(matches!(*cause, Error::OutOfMemory { .. }), "{cx}: GrowthFailed for {cause}");
            check_not_stored(&not_stored, &c.keys, cx);
            (not_stored.report, not_stored.positions)
        }
        // Nothing stored.
        Err(Error::OutOfMemory { .. }) if hit => (InsertReport::default(), (0..n).collect()),
        Err(e) => panic!("{cx}: insert of {n} keys: {e} (injected failure reached: {hit})"),
    };
    let mut skip = vec![false; n];
    for &p in &not_stored {
        skip[p] = true;
    }
    let mut new = 0;
    for i in (0..n).filter(|&i| !skip[i]) {
        new += c.o.map.insert(c.keys[i], c.vals[i]).is_none() as u64;
    }
    let stored = (n - not_stored.len()) as u64;
    assert_eq!(report, InsertReport { inserted: new, existing: stored - new }, "{cx}: report");
}

/// Checks a maintenance call's outcome: success, or `OutOfMemory` with the
/// capacity and tombstones as they were.
fn judge_maintenance<K: Key, V: TestValue>(
    op: FaultOp,
    r: gpuhash::Result<Option<InsertReport>>,
    c: &Case<K, V>,
    before: (u64, u64),
    hit: bool,
    cx: &Ctx,
) {
    let now = (c.t.capacity(), tombstones(&c.t, cx));
    match r {
        Ok(_) => match op {
            FaultOp::Clean | FaultOp::CleanShortLimit => assert_eq!(now.1, 0, "{cx}: tombstones after cleaning"),
            _ => assert!(now.0 > before.0 && now.1 == 0, "{cx}: {op:?} left {now:?} from {before:?}"),
        },
        Err(Error::OutOfMemory { .. }) if hit => assert_eq!(now, before, "{cx}: capacity and tombstones after a failure"),
        Err(e) => panic!("{cx}: {op:?}: {e} (injected failure reached: {hit})"),
    }
}

fn tombstones<K: Key, V: TestValue>(t: &HashTable<K, V>, cx: &Ctx) -> u64 {
    t.stats().unwrap_or_else(|e| panic!("{cx}: stats failed: {e}")).tombstones
}

/// The table takes a further insert, and every key is still found.
fn still_usable<K: Key, V: TestValue>(c: &mut Case<K, V>, cx: &mut Ctx) {
    let more = fresh_keys(&mut cx.rng, 64, &c.o, &c.keys);
    let vals = any_values::<V>(&mut cx.rng, more.len());
    insert(&mut c.t, &mut c.o, Op::Assign, &more, &vals, cx);
    check_table(&c.t, &c.o, cx);
}

/// Faults injected (and survived) per operation of one target.
#[derive(Default)]
struct Tally {
    per_op: Vec<(FaultOp, u64)>,
}

impl Tally {
    fn total(&self) -> u64 {
        self.per_op.iter().map(|p| p.1).sum()
    }
}

/// Fails allocation 0, 1, 2, ... of `op` until it runs without reaching the
/// failure; returns how many faults it injected. A fault that is not
/// survived fails the test, so every fault counted was survived.
fn every_fault<K: Key, V: TestValue>(dev: Target, op: FaultOp) -> u64 {
    for k in 0u64.. {
        assert!(k < 10_000, "{dev}: {op:?} keeps allocating");
        let mut cx = Ctx::new::<K, V>(&format!("faults/{op:?}"), dev);
        let mut c = setup::<K, V>(dev, op, &mut cx);
        cx.phase = format!("{op:?}, allocation {k} failing");
        if k == 0 {
            check_table(&c.t, &c.o, &cx);
        }
        let before = (c.t.capacity(), tombstones(&c.t, &cx));
        let guard = fault::fail_allocations(k, 1);
        let r = act(op, &mut c);
        let hit = guard.injected() > 0;
        drop(guard);
        if op.inserts() {
            judge_insert(r, &mut c, hit, &cx);
        } else {
            judge_maintenance(op, r, &c, before, hit, &cx);
        }
        check_table(&c.t, &c.o, &cx);
        still_usable(&mut c, &mut cx);
        if !hit {
            return k;
        }
    }
    unreachable!()
}

fn every_op<K: Key, V: TestValue>(dev: Target) -> u64 {
    let mut tally = Tally::default();
    for op in FaultOp::ALL.into_iter().filter(|op| op.applies(dev)) {
        tally.per_op.push((op, every_fault::<K, V>(dev, op)));
    }
    let ops: Vec<String> = tally.per_op.iter().map(|(op, n)| format!("{op:?} {n}")).collect();
    let n = tally.total();
    let (k, v) = (short_type::<K>(), short_type::<V>());
    println!("faults {dev} {k}->{v}: {n} injected, {n} survived ({})", ops.join(", "));
    n
}

fn every_scheme(device: Device) {
    let mut total = 0;
    for scheme in Scheme::ALL {
        let Some(dev) = usable(Target::new(device, scheme)) else { return };
        total += every_op::<u32, u32>(dev);
        total += every_op::<u64, u64>(dev);
    }
    println!("faults {device}, all schemes: {total} injected, {total} survived");
}

/// The CUDA tests take turns: one of them takes nearly all device memory.
fn gpu_turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn cpu_every_allocation_fails_in_turn() {
    every_scheme(Device::Cpu);
}

#[test]
fn cuda_every_allocation_fails_in_turn() {
    let _turn = gpu_turn();
    every_scheme(Device::Cuda(0));
}

// ------------------------------------------------------------ a full GPU

/// Device memory taken with plain allocations (never managed memory), freed on drop.
#[cfg(feature = "cuda")]
struct Hog {
    ctx: Arc<CudaContext>,
    blocks: Vec<CUdeviceptr>,
}

#[cfg(feature = "cuda")]
impl Hog {
    /// Takes the device's free memory but about `leave` bytes.
    fn take(ctx: &Arc<CudaContext>, leave: usize) -> Hog {
        ctx.bind_to_thread().expect("bind the context");
        let mut hog = Hog { ctx: ctx.clone(), blocks: Vec::new() };
        loop {
            let (free, _) = cu::mem_get_info().expect("free memory");
            if free <= leave + (16 << 20) {
                return hog;
            }
            // The whole rest at once, or half of it when that is refused.
            let want = free - leave;
            // Safety: plain device memory, only freed (in Drop).
            let got = unsafe { cu::malloc_sync(want) }.or_else(|_| unsafe { cu::malloc_sync(want / 2) });
            match got {
                Ok(p) => hog.blocks.push(p),
                Err(_) => return hog,
            }
        }
    }
}

#[cfg(feature = "cuda")]
impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        for p in self.blocks.drain(..) {
            // Safety: allocated by malloc_sync in `take`, freed once; no kernel uses it.
            let _ = unsafe { cu::free_sync(p) };
        }
    }
}

/// With nearly all device memory taken, asking the table to grow gives
/// `OutOfMemory` (or, for an insert that stored part of its batch,
/// `GrowthFailed`) and leaves it equal to the oracle and usable; once the
/// memory is back, it grows.
#[cfg(feature = "cuda")]
fn full_gpu_body(dev: Target) {
    type K = u64;
    type V = u64;
    let mut cx = Ctx::new::<K, V>("faults/full_gpu", dev);
    let ctx = CudaContext::new(0).expect("CUDA context");
    // 2^22 slots of 16 bytes (64 MiB), growth wants 128 MiB more; at most
    // 0.1 full, so a batch of twice the keys must grow part-way.
    let slots = 1u64 << 22;
    let leave = 32 << 20;
    let mut t = build::<K, V>(builder(dev).capacity(slots).max_load_factor(0.1), &cx);
    let mut o = Oracle::new();
    // Every kernel and the staging buffers once before the memory goes.
    fill(&mut t, &mut o, 1 << 18, 1 << 18, &mut cx);
    erase_share(&mut t, &mut o, 0.1, &mut cx);
    check_table(&t, &o, &cx);
    let (keys, vals) = batch(&o, 1 << 18, 1 << 12, &mut cx);
    let mut c = Case { t, o, keys, vals };
    {
        let hog = Hog::take(&ctx, leave);
        let (free, _) = ctx.mem_get_info().expect("free memory");
        if free as u64 >= 2 * slots * 16 {
            println!("skipped: {dev}: could not take the device's memory ({free} bytes still free)");
            return;
        }
        for op in [FaultOp::Rehash, FaultOp::Reserve, FaultOp::GrowingInsert, FaultOp::Clean] {
            cx.phase = format!("{op:?} with {free} bytes free");
            let before = (c.t.capacity(), tombstones(&c.t, &cx));
            let r = act(op, &mut c);
            if op.inserts() {
                judge_insert(r, &mut c, true, &cx);
            } else {
                judge_maintenance(op, r, &c, before, true, &cx);
            }
            check_table(&c.t, &c.o, &cx);
        }
        assert_eq!(c.t.capacity(), slots, "{cx}: the table grew with no memory to grow into");
        drop(hog);
    }
    cx.phase = "memory back".into();
    c.t.reserve(c.t.len() * 3).unwrap_or_else(|e| panic!("{cx}: reserve failed: {e}"));
    assert!(c.t.capacity() > slots, "{cx}: no growth");
    let r = c.t.insert_or_assign(&c.keys, &c.vals).map(Some);
    judge_insert(r, &mut c, false, &cx);
    still_usable(&mut c, &mut cx);
}

#[test]
fn cuda_out_of_device_memory() {
    #[cfg(not(feature = "cuda"))]
    println!("skipped: built without the cuda feature");
    #[cfg(feature = "cuda")]
    {
        let _turn = gpu_turn();
        for scheme in Scheme::ALL {
            let Some(dev) = usable(Target::new(Device::Cuda(0), scheme)) else { return };
            full_gpu_body(dev);
        }
    }
}
