//! Concurrent operations from users' kernels through the device view, on
//! CUDA device 0 (WarpSpeed's adversarial race test is the model): many
//! threads insert, erase, re-insert and look up a small pool of hot keys at
//! the same time, and every outcome they report is checked against a
//! deterministic model of one launch.
//!
//! Operations on different keys commute, so a launch is explainable iff, for
//! every key on its own, some order of that key's operations that keeps each
//! thread's program order gives the outcomes seen. The checks that follow
//! from that, per key:
//! * `present_before + inserts that returned INSERTED - erases that returned
//!   true` is 0 or 1 and says whether the key is present afterwards (no key
//!   lost, none stored twice);
//! * a key present afterwards holds the value of an insert that was the last
//!   insert or erase of the key in its thread (or its old value if the
//!   launch did not insert it);
//! * a lookup that found the key saw its old value or one some insert wrote;
//! * `export` lists each key once, `len` (after `resync`) counts them, and
//!   the bulk `find` agrees.
//!
//! Which mixes a scheme allows (see `kernels/gpuhash.cuh`): Linear and
//! Hashinator take inserts, erases and lookups together; Robin Hood takes
//! inserts with erases (lookups take no locks and may miss a key being
//! moved); cuckoo and two-level take concurrent inserts, and erases or
//! lookups only while no insert runs. Each scheme runs the strongest mix it
//! allows, plus concurrent insert-or-apply (Sum) of overlapping keys, whose
//! totals must count every application. Without a usable device each test
//! prints `skipped: no CUDA device (...)`; `GPUHASH_REQUIRE_CUDA=1` makes that
//! a failure.

#[macro_use]
mod common;

use std::collections::{HashMap, HashSet};

use common::*;
use gpuhash::backend::cuda::kernels::{arch_of, with_device_header};
use gpuhash::cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};
use gpuhash::cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use gpuhash::{Device, HashTable, Key, Scheme};

/// The user kernels, for `K` = `V` = `GH_T` (u32 or u64).
const SOURCE: &str = r#"
#include "gpuhash.cuh"
typedef GH_T K;
typedef gh::TableView<K, K> T;

__device__ __forceinline__ unsigned long long draw(unsigned long long seed, unsigned long long t, unsigned long long s) {
    return gh::mix64(t * 0x9e3779b97f4a7c15ull + s, seed);
}

// Thread t runs `steps` operations on keys of pool[0..m), drawn from a
// seeded stream: insert-or-assign (value t * steps + s + 1) with
// probability ins/100, erase with erase/100, else a lookup. Op (t, s) is
// logged at t * steps + s: key index, kind (0 insert, 1 erase, 2 find) and
// outcome (INSERTED / EXISTING / FAILED; erased or not; found or not), and
// the value a lookup saw.
extern "C" __global__ void churn(T t, const K* pool, unsigned m, unsigned steps, unsigned long long seed,
                                 unsigned ins, unsigned erase, unsigned long long threads,
                                 unsigned* idx, unsigned char* kind, unsigned char* outcome, K* seen) {
    unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (tid >= threads) return;
    for (unsigned s = 0; s < steps; ++s) {
        unsigned long long r = draw(seed, tid, s);
        unsigned i = (unsigned)((r >> 16) % m);
        unsigned p = (unsigned)(r % 100);
        unsigned long long at = tid * steps + s;
        K key = pool[i];
        idx[at] = i;
        if (p < ins) {
            kind[at] = 0;
            outcome[at] = (unsigned char)t.insert(key, (K)(at + 1), gh::MODE_ASSIGN, 0);
        } else if (p < ins + erase) {
            kind[at] = 1;
            outcome[at] = t.erase(key) ? 1 : 0;
        } else {
            kind[at] = 2;
            K v = 0;
            outcome[at] = t.find(key, &v) ? 1 : 0;
            seen[at] = v;
        }
    }
}

// Every thread adds 1 to `steps` keys of the pool (insert-or-apply, Sum),
// logging the key index and the outcome.
extern "C" __global__ void count(T t, const K* pool, unsigned m, unsigned steps, unsigned long long seed,
                                 unsigned long long threads, unsigned* idx, unsigned char* outcome) {
    unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (tid >= threads) return;
    for (unsigned s = 0; s < steps; ++s) {
        unsigned long long at = tid * steps + s;
        unsigned i = (unsigned)((draw(seed, tid, s) >> 16) % m);
        idx[at] = i;
        outcome[at] = (unsigned char)t.insert(pool[i], (K)1, gh::MODE_APPLY, gh::REDUCE_SUM);
    }
}
"#;

const INSERTED: u8 = 0;
const EXISTING: u8 = 1;
const FAILED: u8 = 2;
const KIND_INSERT: u8 = 0;
const KIND_ERASE: u8 = 1;

/// Keys and values of one width (`K` = `V`).
trait Width: Key + TestValue + DeviceRepr + ValidAsZeroBits + std::hash::Hash {
    const NAME: &'static str;
}
impl Width for u32 {
    const NAME: &'static str = "unsigned int";
}
impl Width for u64 {
    const NAME: &'static str = "unsigned long long";
}

/// A mix of operations run together in one launch.
#[derive(Clone, Copy, Debug)]
struct Mix {
    insert: u32,
    erase: u32,
}

/// The mixes of `scheme`, launched one after another on the same table.
fn mixes(scheme: Scheme) -> Vec<Mix> {
    match scheme {
        // Everything at once.
        Scheme::Linear | Scheme::Hashinator { .. } => {
            vec![Mix { insert: 50, erase: 30 }, Mix { insert: 30, erase: 50 }, Mix { insert: 80, erase: 10 }]
        }
        // Inserts with erases, no lookups.
        Scheme::RobinHood => vec![Mix { insert: 60, erase: 40 }, Mix { insert: 40, erase: 60 }],
        // Inserts alone, then erases alone, then lookups alone, then inserts.
        _ => vec![
            Mix { insert: 100, erase: 0 },
            Mix { insert: 0, erase: 100 },
            Mix { insert: 0, erase: 0 },
            Mix { insert: 100, erase: 0 },
        ],
    }
}

struct Kernels {
    churn: CudaFunction,
    count: CudaFunction,
}

fn compile<K: Width>(t: &mut HashTable<K, K>) -> Kernels {
    let cuda = t.cuda_mut().expect("a CUDA table");
    let ctx = cuda.stream().context().clone();
    let opts = CompileOptions { arch: Some(arch_of(&ctx).unwrap()), ..Default::default() };
    let src = with_device_header(SOURCE).replace("GH_T", K::NAME);
    let ptx = compile_ptx_with_opts(src, opts).unwrap_or_else(|e| panic!("the test kernels do not compile: {e:?}"));
    let module = ctx.load_module(ptx).unwrap();
    Kernels { churn: module.load_function("churn").unwrap(), count: module.load_function("count").unwrap() }
}

/// 256-thread blocks: `insert` carries every scheme's code (kernels/gpuhash.cuh).
fn blocks(threads: u64) -> LaunchConfig {
    LaunchConfig { grid_dim: (threads.div_ceil(256) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }
}

/// A pool of hot keys: random in-slot keys, 0 and both out-of-band keys.
fn pool<K: Width>(cx: &mut Ctx, m: usize) -> Vec<K> {
    let mut keys: Vec<K> = distinct_keys::<K>(&mut cx.rng, m).into_iter().filter(|k| k.to_u64() != 0).take(m - 3).collect();
    keys.extend([K::from_u64(0), key_max::<K>(), K::from_u64(key_max::<K>().to_u64() - 1)]);
    keys
}

/// The table's pairs, checked to list each key once.
fn snapshot<K: Width>(t: &HashTable<K, K>, cx: &Ctx) -> HashMap<K, K> {
    let (keys, vals) = t.export().unwrap_or_else(|e| panic!("{cx}: export failed: {e}"));
    let mut map = HashMap::with_capacity(keys.len());
    for (k, v) in keys.into_iter().zip(vals) {
        assert!(map.insert(k, v).is_none(), "{cx}: export lists key {k:?} twice");
    }
    map
}

/// `len` after `resync`, and the bulk `find` of the whole pool, agree with `export`.
fn check_bulk_view<K: Width>(t: &mut HashTable<K, K>, now: &HashMap<K, K>, pool: &[K], cx: &Ctx) {
    t.cuda_mut().unwrap().resync().unwrap_or_else(|e| panic!("{cx}: resync failed: {e}"));
    assert_eq!(t.len(), now.len() as u64, "{cx}: len after resync");
    let got = t.find(pool).unwrap_or_else(|e| panic!("{cx}: find failed: {e}"));
    for (k, g) in pool.iter().zip(got) {
        assert_eq!(g, now.get(k).copied(), "{cx}: find({k:?}) disagrees with export");
    }
    cx.count(2 * pool.len());
}

/// One launch of `churn` with `mix`, checked against the per-key model.
#[allow(clippy::too_many_arguments)]
fn churn_round<K: Width>(
    t: &mut HashTable<K, K>,
    k: &Kernels,
    pool: &[K],
    threads: u64,
    steps: u32,
    mix: Mix,
    seed: u64,
    cx: &Ctx,
) {
    let before = snapshot(t, cx);
    let cuda = t.cuda_mut().unwrap();
    let stream = cuda.stream().clone();
    let view = cuda.view();
    let ops = (threads * steps as u64) as usize;
    let pool_dev = stream.clone_htod(pool).unwrap();
    let mut idx = stream.alloc_zeros::<u32>(ops).unwrap();
    let mut kind = stream.alloc_zeros::<u8>(ops).unwrap();
    let mut outcome = stream.alloc_zeros::<u8>(ops).unwrap();
    let mut seen = stream.alloc_zeros::<K>(ops).unwrap();
    let m = pool.len() as u32;
    let mut b = stream.launch_builder(&k.churn);
    b.arg(&view).arg(&pool_dev).arg(&m).arg(&steps).arg(&seed).arg(&mix.insert).arg(&mix.erase).arg(&threads);
    b.arg(&mut idx).arg(&mut kind).arg(&mut outcome).arg(&mut seen);
    // Safety: the arguments match `churn`'s parameters; every log holds `ops` entries.
    unsafe { b.launch(blocks(threads)) }.unwrap_or_else(|e| panic!("{cx}: launch failed: {e:?}"));
    let idx = stream.clone_dtoh(&idx).unwrap();
    let kind = stream.clone_dtoh(&kind).unwrap();
    let outcome = stream.clone_dtoh(&outcome).unwrap();
    let seen = stream.clone_dtoh(&seen).unwrap();
    stream.synchronize().unwrap();
    // The host's counts (which size `export`) see the kernel's work only after a resync.
    t.cuda_mut().unwrap().resync().unwrap_or_else(|e| panic!("{cx}: resync failed: {e}"));
    let after = snapshot(t, cx);

    // Per key: the values inserts wrote, the candidates for the final value
    // (each thread's last insert or erase of it, if an insert), and the net count.
    let mut written: HashMap<usize, HashSet<K>> = HashMap::new();
    let mut last_write: HashMap<(usize, u64), (u8, K)> = HashMap::new();
    let mut net: HashMap<usize, i64> = HashMap::new();
    let (scheme, mut refused) = (t.scheme(), 0u64);
    for at in 0..ops {
        let (i, tid) = (idx[at] as usize, at as u64 / steps as u64);
        let value = K::from_u64(at as u64 + 1);
        match kind[at] {
            // Robin Hood never reuses tombstones, so a hot key erased and
            // inserted again many times may find its 64-bucket cap full of
            // them: refused, reported, and nothing stored (a no-op here).
            KIND_INSERT if outcome[at] == FAILED && scheme == Scheme::RobinHood => refused += 1,
            KIND_INSERT => {
                assert!(outcome[at] == INSERTED || outcome[at] == EXISTING, "{cx}: an insert of {:?} failed ({mix:?})", pool[i]);
                written.entry(i).or_default().insert(value);
                last_write.insert((i, tid), (KIND_INSERT, value));
                *net.entry(i).or_default() += (outcome[at] == INSERTED) as i64;
            }
            KIND_ERASE => {
                last_write.insert((i, tid), (KIND_ERASE, value));
                *net.entry(i).or_default() -= outcome[at] as i64;
            }
            _ => {}
        }
    }
    let mut finals: HashMap<usize, HashSet<K>> = HashMap::new();
    for ((i, _), (what, v)) in &last_write {
        if *what == KIND_INSERT {
            finals.entry(*i).or_default().insert(*v);
        }
    }
    for (i, key) in pool.iter().enumerate() {
        let was = before.get(key).copied();
        let now = after.get(key).copied();
        let n = was.is_some() as i64 + net.get(&i).copied().unwrap_or(0);
        assert!(
            n == now.is_some() as i64,
            "{cx}: {mix:?}: key {key:?} was {}, saw {} net inserts, and is {} (lost or stored twice)",
            if was.is_some() { "present" } else { "absent" },
            net.get(&i).copied().unwrap_or(0),
            if now.is_some() { "present" } else { "absent" }
        );
        if let Some(v) = now {
            let ok = match written.get(&i) {
                Some(_) => finals.get(&i).is_some_and(|f| f.contains(&v)),
                None => was == Some(v),
            };
            assert!(ok, "{cx}: {mix:?}: key {key:?} holds {v:?}, which no order of the launch's operations leaves");
        }
    }
    for at in 0..ops {
        if kind[at] == 2 && outcome[at] == 1 {
            let (i, v) = (idx[at] as usize, seen[at]);
            let ok = before.get(&pool[i]) == Some(&v) || written.get(&i).is_some_and(|w| w.contains(&v));
            assert!(ok, "{cx}: {mix:?}: a lookup of {:?} saw {v:?}, which no insert wrote", pool[i]);
        }
    }
    cx.count(ops + pool.len());
    if refused > 0 {
        println!("{cx}: {mix:?}: {refused} of {ops} operations were inserts refused by a cap full of tombstones");
    }
    check_bulk_view(t, &after, pool, cx);
}

/// Concurrent insert-or-apply (Sum) of overlapping keys: each key's total
/// counts every application, and exactly one of them inserted it.
fn count_round<K: Width>(t: &mut HashTable<K, K>, k: &Kernels, pool: &[K], threads: u64, steps: u32, seed: u64, cx: &Ctx) {
    let before = snapshot(t, cx);
    let cuda = t.cuda_mut().unwrap();
    let stream = cuda.stream().clone();
    let view = cuda.view();
    let ops = (threads * steps as u64) as usize;
    let pool_dev = stream.clone_htod(pool).unwrap();
    let mut idx = stream.alloc_zeros::<u32>(ops).unwrap();
    let mut outcome = stream.alloc_zeros::<u8>(ops).unwrap();
    let m = pool.len() as u32;
    let mut b = stream.launch_builder(&k.count);
    b.arg(&view).arg(&pool_dev).arg(&m).arg(&steps).arg(&seed).arg(&threads).arg(&mut idx).arg(&mut outcome);
    // Safety: the arguments match `count`'s parameters; both logs hold `ops` entries.
    unsafe { b.launch(blocks(threads)) }.unwrap_or_else(|e| panic!("{cx}: launch failed: {e:?}"));
    let idx = stream.clone_dtoh(&idx).unwrap();
    let outcome = stream.clone_dtoh(&outcome).unwrap();
    stream.synchronize().unwrap();
    // Counts carry on from earlier launches.
    let mut total: Vec<u64> = pool.iter().map(|k| before.get(k).map_or(0, |v| v.to_u64())).collect();
    let mut firsts = vec![0u64; pool.len()];
    t.cuda_mut().unwrap().resync().unwrap_or_else(|e| panic!("{cx}: resync failed: {e}"));
    for at in 0..ops {
        assert!(outcome[at] == INSERTED || outcome[at] == EXISTING, "{cx}: an apply of {:?} failed", pool[idx[at] as usize]);
        total[idx[at] as usize] += 1;
        firsts[idx[at] as usize] += (outcome[at] == INSERTED) as u64;
    }
    let after = snapshot(t, cx);
    for (i, key) in pool.iter().enumerate() {
        let got = after.get(key).map(|v| v.to_u64());
        let want = (total[i] > 0).then_some(total[i]);
        assert_eq!(got, want, "{cx}: key {key:?} counts {got:?} of {} applications", total[i]);
        let new = !before.contains_key(key) && total[i] > 0;
        assert_eq!(firsts[i], new as u64, "{cx}: key {key:?} was inserted {} times", firsts[i]);
    }
    cx.count(ops + pool.len());
    check_bulk_view(t, &after, pool, cx);
}

fn races_body<K: Width>(dev: Target) {
    let mut cx = Ctx::new::<K, K>("concurrent_ops", dev);
    let threads = scaled(1 << 15) as u64;
    let steps = 8u32;
    let m = 4096;
    // Linear tables never reuse tombstones: room for every insert of the run.
    let slots = 4 * threads * steps as u64;
    let mut t = builder(dev).capacity(slots).max_load_factor(1.0).growth(false).build::<K, K>().unwrap();
    let k = compile(&mut t);
    let pool = pool::<K>(&mut cx, m);
    for round in 0..rounds(3) {
        for mix in mixes(dev.scheme) {
            cx.phase = format!("round {round}, {mix:?}");
            // Erases leave tombstones that Linear and Robin Hood inserts never
            // reuse: reclaim them between launches so inserts find room.
            t.clean_tombstones().unwrap_or_else(|e| panic!("{cx}: clean_tombstones failed: {e}"));
            let seed = cx.seed ^ fnv(&cx.phase);
            churn_round(&mut t, &k, &pool, threads, steps, mix, seed, &cx);
        }
    }
    // Aggregation into a fresh table, keys far hotter than the pool's.
    cx.phase = "insert-or-apply".into();
    let mut t = builder(dev).capacity(slots).max_load_factor(1.0).growth(false).build::<K, K>().unwrap();
    let k = compile(&mut t);
    count_round(&mut t, &k, &pool[..256], threads, steps, cx.seed ^ 0x51, &cx);
    count_round(&mut t, &k, &pool, threads, steps, cx.seed ^ 0x52, &cx);
}

macro_rules! race_tests {
    ($($name:ident: $scheme:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            if let Some(dev) = usable(Target::new(Device::Cuda(0), $scheme)) {
                if pair_selected::<u32, u32>("races_body") {
                    races_body::<u32>(dev);
                }
                if pair_selected::<u64, u64>("races_body") {
                    races_body::<u64>(dev);
                }
            }
        }
    )*};
}

race_tests!(
    linear: Scheme::Linear,
    hashinator: Scheme::Hashinator { team: 8 },
    robin_hood: Scheme::RobinHood,
    cuckoo: Scheme::Cuckoo,
    two_level: Scheme::TwoLevel,
);
