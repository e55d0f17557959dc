//! CUDA data paths beyond the conformance suite, on CUDA device 0: host
//! batches large enough for the pinned staging pipeline, calls on a user's
//! stream, and unified memory with host lookups. Without a usable device
//! each GPU test prints `skipped: no CUDA device (...)`; set
//! `GPUHASH_REQUIRE_CUDA=1` to make that a failure instead.

#[macro_use]
mod common;

use std::sync::Arc;

use common::*;
use gpuhash::backend::InsertMode;
use gpuhash::cudarc::driver::{CudaSlice, CudaStream};
use gpuhash::{Device, Error, HashTable, Key, Memory, Reduce, Scheme};

/// Large enough for several chunks of the staging pipeline (about 256 Ki
/// keys per chunk for 16-byte pairs), and not a multiple of a chunk.
fn big() -> usize {
    scaled(1_000_003)
}

/// CUDA device 0 with the default scheme (these tests are about data
/// movement, which every scheme shares).
fn cuda() -> Option<Target> {
    usable(Target::new(Device::Cuda(0), Scheme::Linear))
}

/// CUDA device 0 with each scheme whose async inserts take their own path:
/// linear (one kernel), cuckoo and two-level (a step without locks, then
/// the locked insert of what it left).
fn async_targets() -> Vec<Target> {
    [Scheme::Linear, Scheme::Cuckoo, Scheme::TwoLevel].into_iter().filter_map(|s| usable(Target::new(Device::Cuda(0), s))).collect()
}

/// `n` distinct in-slot keys plus the two out-of-band ones.
fn keys_with_specials<K: Key>(cx: &mut Ctx, n: usize) -> Vec<K> {
    let mut keys = distinct_keys::<K>(&mut cx.rng, n);
    keys.extend([key_max::<K>(), K::from_u64(key_max::<K>().to_u64() - 1)]);
    keys
}

// ------------------------------------------------------------ staging

fn staged_body<K: Key, V: TestValue>(dev: Target) {
    let mut cx = Ctx::new::<K, V>("staged_host_batches", dev);
    let n = big();
    let mut t = builder(dev).capacity((2 * n) as u64).max_load_factor(1.0).growth(false).build::<K, V>().unwrap();
    let mut o = Oracle::new();
    let universe = keys_with_specials::<K>(&mut cx, n);
    cx.phase = "assign".into();
    let keys = with_duplicates(&mut cx.rng, &universe[..n / 2], n / 8);
    let vals = any_values::<V>(&mut cx.rng, keys.len());
    assert!(insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx).is_empty(), "{cx}: keys not stored");
    cx.phase = "apply".into();
    let keys = sample(&mut cx.rng, &universe, n);
    let vals = num_values::<V>(&mut cx.rng, keys.len());
    assert!(insert(&mut t, &mut o, Op::Apply(Reduce::Max), &keys, &vals, &cx).is_empty(), "{cx}: keys not stored");
    cx.phase = "lookups".into();
    let mut probe = universe.clone();
    probe.extend(fresh_keys(&mut cx.rng, n / 3, &o, &universe));
    check_find(&t, &o, &probe, &cx);
    cx.phase = "erase".into();
    let gone = sample(&mut cx.rng, &universe, n / 2);
    erase(&mut t, &mut o, &gone, &cx);
    check_table(&t, &o, &cx);
}

#[test]
fn staged_host_batches_match_the_oracle() {
    let Some(dev) = cuda() else { return };
    staged_body::<u32, u32>(dev);
    staged_body::<u32, f64>(dev);
    staged_body::<u64, u64>(dev);
    staged_body::<u64, i32>(dev);
}

fn full_body<K: Key, V: TestValue>(dev: Target, slots: u64, n: usize) {
    let mut cx = Ctx::new::<K, V>("staged_full_table", dev);
    cx.phase = format!("{n} keys into {slots} slots");
    let mut t = builder(dev).capacity(slots).max_load_factor(1.0).growth(false).build::<K, V>().unwrap();
    let mut o = Oracle::new();
    let keys = distinct_keys::<K>(&mut cx.rng, n);
    let vals = any_values::<V>(&mut cx.rng, n);
    // `insert` checks the positions (ascending, exact keys) and that they are absent.
    let failed = insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
    assert!(failed.len() >= n - slots as usize, "{cx}: only {} keys not stored", failed.len());
    check_table(&t, &o, &cx);
}

#[test]
fn staged_full_table_reports_exact_positions() {
    let Some(dev) = cuda() else { return };
    // A few thousand failures: recorded by the kernels, across chunks.
    full_body::<u32, u32>(dev, 1 << 19, (1 << 19) + scaled(20_000));
    // More failures than the kernels record (2^16): found by a lookup pass.
    full_body::<u64, u64>(dev, 1 << 16, scaled(600_000).max(200_000));
}

// ------------------------------------------------------------ user streams

fn upload<T: gpuhash::cudarc::driver::DeviceRepr>(s: &Arc<CudaStream>, v: &[T]) -> CudaSlice<T> {
    s.clone_htod(v).unwrap()
}

fn async_body<K: Key, V: TestValue>(dev: Target) {
    let mut cx = Ctx::new::<K, V>("async_calls", dev);
    let n = scaled(300_000);
    let mut t = builder(dev).capacity((2 * n) as u64).growth(false).build::<K, V>().unwrap();
    let user = t.cuda().unwrap().stream().context().new_stream().unwrap();
    let keys = keys_with_specials::<K>(&mut cx, n);
    let vals = any_values::<V>(&mut cx.rng, keys.len());
    let (kd, vd) = (upload(&user, &keys), upload(&user, &vals));

    cx.phase = "insert, find and contains queued back to back".into();
    let cuda = t.cuda_mut().unwrap();
    let pending = cuda.insert_device_async(&user, &kd.as_view(), &vd.as_view(), InsertMode::Assign).unwrap();
    let mut out_v = upload(&user, &vec![V::from_bits(0); keys.len()]);
    let mut out_f = user.alloc_zeros::<u8>(keys.len()).unwrap();
    cuda.find_device_async(&user, &kd.as_view(), &mut out_v.as_view_mut(), &mut out_f.as_view_mut()).unwrap();
    let mut out_c = user.alloc_zeros::<u8>(keys.len()).unwrap();
    cuda.contains_device_async(&user, &kd.as_view(), &mut out_c.as_view_mut()).unwrap();
    let report = pending.wait().unwrap_or_else(|e| panic!("{cx}: {e}"));
    assert_eq!(report.inserted, keys.len() as u64, "{cx}");
    let (got_v, got_f, got_c) = (user.clone_dtoh(&out_v).unwrap(), user.clone_dtoh(&out_f).unwrap(), user.clone_dtoh(&out_c).unwrap());
    user.synchronize().unwrap();
    for i in 0..keys.len() {
        assert!(got_f[i] == 1 && got_c[i] == 1, "{cx}: key {:?} not found", keys[i]);
        assert!(same(got_v[i], vals[i]), "{cx}: key {:?} holds {:?}, expected {:?}", keys[i], got_v[i], vals[i]);
    }

    cx.phase = "the table's own calls wait for the user's stream".into();
    let half = &keys[..keys.len() / 2];
    let cuda = t.cuda_mut().unwrap();
    let erased = cuda.erase_device_async(&user, &kd.slice(..half.len())).unwrap();
    // Not waited for: the host call below must still see the erase.
    let found = t.contains(&keys).unwrap();
    assert!(found[..half.len()].iter().all(|f| !f) && found[half.len()..].iter().all(|&f| f), "{cx}");
    assert_eq!(erased.wait().unwrap(), half.len() as u64, "{cx}");
    let cuda = t.cuda_mut().unwrap();
    cuda.resync().unwrap();
    assert_eq!(t.len(), (keys.len() - half.len()) as u64, "{cx}: len after resync");

    cx.phase = "a full table reports exact positions".into();
    // Ten times what fits (more would only queue refused keys on the locks
    // of the cuckoo schemes' few regions), the out-of-band keys included.
    let from = keys.len() - keys.len().min(10 << 12);
    let (fk, fkd, fvd) = (&keys[from..], kd.slice(from..), vd.slice(from..));
    let mut small = builder(dev).capacity(1 << 12).max_load_factor(1.0).growth(false).build::<K, V>().unwrap();
    let cuda = small.cuda_mut().unwrap();
    match cuda.insert_device_async(&user, &fkd, &fvd, InsertMode::IfAbsent).unwrap().wait() {
        Err(Error::TableFull(ns)) => {
            check_not_stored(&ns, fk, &cx);
            let stored = fk.len() - ns.positions.len();
            assert_eq!(ns.report.inserted as usize, stored, "{cx}");
            assert!(stored <= (1 << 12) + 2, "{cx}: {stored} keys in 2^12 slots");
            let present = small.contains(fk).unwrap();
            for &p in &ns.positions {
                assert!(!present[p], "{cx}: key at {p} reported not stored, yet present");
            }
            assert_eq!(present.iter().filter(|&&f| f).count(), stored, "{cx}");
        }
        other => panic!("{cx}: expected TableFull, got {other:?}"),
    }

    cx.phase = "insert-or-apply (max) of repeated keys".into();
    let mut m = builder(dev).capacity((2 * n) as u64).growth(false).build::<K, V>().unwrap();
    let rep = with_duplicates(&mut cx.rng, &keys[..n / 2], n);
    let rv = num_values::<V>(&mut cx.rng, rep.len());
    let (rk, rvd) = (upload(&user, &rep), upload(&user, &rv));
    let cuda = m.cuda_mut().unwrap();
    let r = cuda.insert_device_async(&user, &rk.as_view(), &rvd.as_view(), InsertMode::Apply(Reduce::Max)).unwrap().wait();
    let r = r.unwrap_or_else(|e| panic!("{cx}: {e}"));
    let mut o = Oracle::new();
    for (&k, &v) in rep.iter().zip(&rv) {
        o.map.entry(k).and_modify(|w| *w = V::reduce_ref(Reduce::Max, *w, v)).or_insert(v);
    }
    assert_eq!((r.inserted, r.existing), (o.map.len() as u64, (rep.len() - o.map.len()) as u64), "{cx}");
    cuda.resync().unwrap();
    check_table(&m, &o, &cx);

    cx.phase = "empty and mismatched calls".into();
    let cuda = t.cuda_mut().unwrap();
    let none = cuda.insert_device_async(&user, &kd.slice(0..0), &vd.slice(0..0), InsertMode::Assign).unwrap();
    assert_eq!(none.wait().unwrap(), Default::default(), "{cx}");
    let bad = cuda.insert_device_async(&user, &kd.slice(0..2), &vd.slice(0..3), InsertMode::Assign);
    assert!(matches!(bad, Err(Error::LengthMismatch { .. })), "{cx}");
}

#[test]
fn async_calls_on_a_user_stream() {
    for dev in async_targets() {
        async_body::<u32, u32>(dev);
        async_body::<u64, f64>(dev);
    }
}

/// Async calls on the table's own stream (ordered by the stream alone), and
/// the scratch a finished or dropped insert leaves to the next call.
fn own_stream_body<K: Key, V: TestValue>(dev: Target) {
    let mut cx = Ctx::new::<K, V>("async_calls_on_the_table_stream", dev);
    let n = scaled(200_000);
    let mut t = builder(dev).capacity((4 * n) as u64).growth(false).build::<K, V>().unwrap();
    let own = t.cuda().unwrap().stream().clone();
    let user = own.context().new_stream().unwrap();
    let keys = keys_with_specials::<K>(&mut cx, 2 * n);
    let vals = any_values::<V>(&mut cx.rng, keys.len());
    let (kd, vd) = (upload(&own, &keys), upload(&own, &vals));
    let (a, b) = (0..n, n..keys.len());

    cx.phase = "an insert dropped unwaited, then others on both streams".into();
    let cuda = t.cuda_mut().unwrap();
    drop(cuda.insert_device_async(&own, &kd.slice(a.clone()), &vd.slice(a.clone()), InsertMode::Assign).unwrap());
    // Its scratch may go to this call while it still runs.
    let again = cuda.insert_device_async(&user, &kd.slice(a.clone()), &vd.slice(a.clone()), InsertMode::IfAbsent).unwrap();
    let r = again.wait().unwrap_or_else(|e| panic!("{cx}: {e}"));
    assert_eq!((r.inserted, r.existing), (0, n as u64), "{cx}: the dropped insert did not come first");
    let r = cuda.insert_device_async(&own, &kd.slice(b.clone()), &vd.slice(b.clone()), InsertMode::Assign).unwrap().wait();
    assert_eq!(r.unwrap_or_else(|e| panic!("{cx}: {e}")).inserted, b.len() as u64, "{cx}");

    cx.phase = "lookups and an erase on the table's stream".into();
    let mut out_v = upload(&own, &vec![V::from_bits(0); keys.len()]);
    let mut out_f = own.alloc_zeros::<u8>(keys.len()).unwrap();
    cuda.find_device_async(&own, &kd.as_view(), &mut out_v.as_view_mut(), &mut out_f.as_view_mut()).unwrap();
    let (got_v, got_f) = (own.clone_dtoh(&out_v).unwrap(), own.clone_dtoh(&out_f).unwrap());
    own.synchronize().unwrap();
    for i in 0..keys.len() {
        assert!(got_f[i] == 1, "{cx}: key {:?} not found", keys[i]);
        assert!(same(got_v[i], vals[i]), "{cx}: key {:?} holds {:?}, expected {:?}", keys[i], got_v[i], vals[i]);
    }
    let gone = cuda.erase_device_async(&own, &kd.slice(a.clone())).unwrap().wait().unwrap();
    assert_eq!(gone, n as u64, "{cx}");
    let found = t.contains(&keys).unwrap();
    assert!(found[a].iter().all(|f| !f) && found[b].iter().all(|&f| f), "{cx}: erased keys left, or others lost");

    cx.phase = "a full table after larger calls reports only its own positions".into();
    let mut small = builder(dev).capacity(1 << 10).max_load_factor(1.0).growth(false).build::<K, V>().unwrap();
    let small_own = small.cuda().unwrap().stream().clone();
    let cuda = small.cuda_mut().unwrap();
    for round in 0..2 {
        let part = 3000 * (round + 1);
        match cuda.insert_device_async(&small_own, &kd.slice(..part), &vd.slice(..part), InsertMode::IfAbsent).unwrap().wait() {
            Err(Error::TableFull(ns)) => {
                check_not_stored(&ns, &keys[..part], &cx);
                let present = present_in(&small_own, cuda, &kd.slice(..part));
                let absent: Vec<usize> = (0..part).filter(|&i| !present[i]).collect();
                assert_eq!(ns.positions, absent, "{cx}: round {round}: reported positions are not the absent keys");
            }
            other => panic!("{cx}: round {round}: expected TableFull, got {other:?}"),
        }
    }
}

/// Which of `keys` the table holds (looked up on the table's stream).
fn present_in<K: Key, V: TestValue>(
    own: &Arc<CudaStream>,
    cuda: &gpuhash::backend::cuda::CudaTable<K, V>,
    keys: &gpuhash::cudarc::driver::CudaView<'_, K>,
) -> Vec<bool> {
    let mut f = own.alloc_zeros::<u8>(keys.len()).unwrap();
    cuda.contains_device(keys, &mut f.as_view_mut()).unwrap();
    let got = own.clone_dtoh(&f).unwrap();
    own.synchronize().unwrap();
    got.into_iter().map(|b| b == 1).collect()
}

#[test]
fn async_calls_on_the_table_stream() {
    for dev in async_targets() {
        own_stream_body::<u32, u32>(dev);
        own_stream_body::<u64, u64>(dev);
    }
}

// ------------------------------------------------------------ device batches with growth, foreign memory

/// The device address of `s`, as another library would hand it over.
fn addr<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _record) = gpuhash::cudarc::driver::DevicePtr::device_ptr(s, stream);
    p
}

fn device_growth_body<K: Key, V: TestValue>(dev: Target) {
    let mut cx = Ctx::new::<K, V>("device_inserts_grow", dev);
    let n = scaled(400_000);
    // A table far too small for the batch: HashTable::insert_device grows
    // between parts of it, as the host calls do.
    let mut t = builder(dev).capacity(1 << 10).build::<K, V>().unwrap();
    let user = t.cuda().unwrap().stream().context().new_stream().unwrap();
    let universe = keys_with_specials::<K>(&mut cx, n / 4);
    let keys = sample(&mut cx.rng, &universe, n);
    let vals = num_values::<V>(&mut cx.rng, n);
    let mut expect: std::collections::HashMap<u64, V> = std::collections::HashMap::new();
    for (k, v) in keys.iter().zip(&vals) {
        let e = expect.entry(k.to_u64()).or_insert(V::from_bits(0));
        *e = V::reduce_ref(Reduce::Sum, *e, *v);
    }
    let (kd, vd) = (upload(&user, &keys), upload(&user, &vals));
    user.synchronize().unwrap();
    cx.phase = "insert_or_apply from device memory, growing".into();
    let r = t.insert_device(&kd.as_view(), &vd.as_view(), InsertMode::Apply(Reduce::Sum)).unwrap_or_else(|e| panic!("{cx}: {e}"));
    assert_eq!(r.inserted as usize, expect.len(), "{cx}: inserted");
    assert_eq!(t.len() as usize, expect.len(), "{cx}: len");
    assert!(t.capacity() > 1 << 10, "{cx}: the table did not grow");
    let probe: Vec<K> = universe.clone();
    let got = t.find(&probe).unwrap();
    for (k, g) in probe.iter().zip(got) {
        match (expect.get(&k.to_u64()), g) {
            (Some(e), Some(g)) => assert!(same(*e, g), "{cx}: key {k:?} holds {g:?}, expected {e:?}"),
            (None, None) => {}
            (e, g) => panic!("{cx}: key {k:?}: expected {e:?}, got {g:?}"),
        }
    }

    cx.phase = "foreign device memory, borrowed without a copy".into();
    let cuda = t.cuda().unwrap();
    let out_v = upload(&user, &vec![V::from_bits(0); probe.len()]);
    let out_f = user.alloc_zeros::<u8>(probe.len()).unwrap();
    let pd = upload(&user, &probe);
    let (pk, pv, pf) = (addr(&pd, &user), addr(&out_v, &user), addr(&out_f, &user));
    // Safety: the three buffers live (and hold probe.len() elements) until
    // after the borrows are dropped; the user's stream is live.
    let hits = unsafe {
        cuda.wait_for_stream(user.cu_stream() as u64).unwrap();
        let k = cuda.borrow_device::<K>(pk, probe.len(), "keys").unwrap();
        let mut v = cuda.borrow_device::<V>(pv, probe.len(), "values").unwrap();
        let mut f = cuda.borrow_device::<u8>(pf, probe.len(), "found").unwrap();
        cuda.find_device(&k.view(), &mut v.view_mut(), &mut f.view_mut()).unwrap()
    };
    assert_eq!(hits as usize, probe.iter().filter(|k| expect.contains_key(&k.to_u64())).count(), "{cx}: hits");
    // The buffers are still the caller's: readable after the borrows ended.
    let (gv, gf) = (user.clone_dtoh(&out_v).unwrap(), user.clone_dtoh(&out_f).unwrap());
    user.synchronize().unwrap();
    for i in 0..probe.len() {
        let e = expect.get(&probe[i].to_u64());
        assert_eq!(gf[i] == 1, e.is_some(), "{cx}: found[{i}]");
        if let Some(e) = e {
            assert!(same(*e, gv[i]), "{cx}: value[{i}]");
        }
    }

    cx.phase = "bad addresses are refused".into();
    // Safety: refused before any use.
    unsafe {
        let host = [0u64; 8];
        assert!(matches!(cuda.borrow_device::<u64>(host.as_ptr() as u64, 8, "keys"), Err(Error::Unsupported(_))), "{cx}: host memory");
        assert!(matches!(cuda.borrow_device::<u64>(pk + 4, 8, "keys"), Err(Error::Unsupported(_))), "{cx}: misaligned");
    }

    cx.phase = "growth off: exact refusals".into();
    let mut small = builder(dev).capacity(1 << 12).max_load_factor(1.0).growth(false).build::<K, V>().unwrap();
    let distinct = keys_with_specials::<K>(&mut cx, 3 << 12);
    let (dk, dv) = (upload(&user, &distinct), upload(&user, &any_values::<V>(&mut cx.rng, distinct.len())));
    user.synchronize().unwrap();
    match small.insert_device(&dk.as_view(), &dv.as_view(), InsertMode::Assign) {
        Err(Error::TableFull(ns)) => {
            check_not_stored(&ns, &distinct, &cx);
            let present = small.contains(&distinct).unwrap();
            for (i, p) in present.iter().enumerate() {
                assert_eq!(*p, ns.positions.binary_search(&i).is_err(), "{cx}: key at {i} stored or reported");
            }
        }
        other => panic!("{cx}: expected TableFull, got {other:?}"),
    }
}

#[test]
fn device_inserts_grow_and_foreign_memory_is_borrowed() {
    let Some(dev) = cuda() else { return };
    device_growth_body::<u32, u32>(dev);
    // Integer values: sums in any order are exact.
    device_growth_body::<u64, i64>(dev);
}

// ------------------------------------------------------------ unified memory

fn unified_body<K: Key, V: TestValue>(dev: Target) {
    let mut cx = Ctx::new::<K, V>("unified_memory", dev);
    // Starts small so the batch below grows it (rehash keeps the memory kind).
    let mut t = builder(dev).capacity(1 << 10).memory(Memory::Unified).build::<K, V>().unwrap();
    assert_eq!(t.cuda().unwrap().memory(), Memory::Unified, "{cx}");
    let mut o = Oracle::new();
    let n = scaled(200_000);
    let universe = keys_with_specials::<K>(&mut cx, n);
    let keys = with_duplicates(&mut cx.rng, &universe, n / 4);
    let vals = any_values::<V>(&mut cx.rng, keys.len());
    cx.phase = "GPU insert, host lookups".into();
    insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
    assert!(t.capacity() > 1 << 10, "{cx}: the table did not grow");
    assert_eq!(t.cuda().unwrap().memory(), Memory::Unified, "{cx}: growth changed the memory kind");
    let mut probe = universe.clone();
    probe.extend(fresh_keys(&mut cx.rng, n / 2, &o, &universe));
    let host = t.cuda().unwrap().host_find(&probe).unwrap();
    for (k, h) in probe.iter().zip(&host) {
        match (o.map.get(k), h) {
            (Some(e), Some(h)) => assert!(same(*e, *h), "{cx}: host_find({k:?}) = {h:?}, expected {e:?}"),
            (None, None) => {}
            (e, h) => panic!("{cx}: host_find({k:?}) = {h:?}, expected {e:?}"),
        }
    }
    cx.phase = "GPU calls after a host lookup".into();
    erase(&mut t, &mut o, &universe[..n / 3], &cx);
    check_table(&t, &o, &cx);
    let host = t.cuda().unwrap().host_find(&universe).unwrap();
    assert_eq!(host.iter().filter(|h| h.is_some()).count(), o.map.len(), "{cx}");
    cx.phase = "clear".into();
    t.clear().unwrap();
    assert!(t.cuda().unwrap().host_find(&universe).unwrap().iter().all(Option::is_none), "{cx}");
}

#[test]
fn unified_memory_host_lookups() {
    let Some(dev) = cuda() else { return };
    unified_body::<u32, u32>(dev);
    unified_body::<u64, u64>(dev);
    unified_body::<u32, f64>(dev);
}

#[test]
fn unified_memory_limits() {
    // Runs everywhere: Unified is CUDA only.
    let cpu = HashTable::<u32, u32>::builder().device(Device::Cpu).memory(Memory::Unified).build::<u32, u32>();
    assert!(matches!(cpu, Err(Error::Unsupported(_))), "{cpu:?}");
    let Some(dev) = cuda() else { return };
    // 2^40 slots (8 TiB) is more than any GPU has free: refused before allocating.
    let huge = HashTable::<u32, u32>::builder().device(dev.device).memory(Memory::Unified).capacity(1 << 40).build::<u32, u32>();
    assert!(matches!(huge, Err(Error::OutOfMemory { .. })), "{huge:?}");
    let t = HashTable::<u32, u32>::builder().device(dev.device).build::<u32, u32>().unwrap();
    let cuda = t.cuda().unwrap();
    assert_eq!(cuda.memory(), Memory::Device);
    assert!(matches!(cuda.host_find(&[1]), Err(Error::Unsupported(_))));
}

// ------------------------------------------------------------ user kernels

/// A user's kernel inserting through the table's view, then a batch large
/// enough for the region build: the build reads the regions again, rather
/// than assuming an untouched table is empty (it skips that read only when
/// no view was handed out since the table was created or cleared).
#[test]
fn keys_a_user_kernel_wrote_survive_a_region_build() {
    use gpuhash::backend::cuda::kernels::{arch_of, with_device_header};
    use gpuhash::cudarc::driver::{LaunchConfig, PushKernelArg};
    use gpuhash::cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
    let Some(dev) = cuda() else { return };
    let mut cx = Ctx::new::<u32, u32>("user_kernel_then_region_build", dev);
    const SOURCE: &str = r#"
#include "gpuhash.cuh"
extern "C" __global__ void put(gh::TableView<unsigned int, unsigned int> t, const unsigned int* keys,
                               const unsigned int* values, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) t.insert(keys[i], values[i], gh::MODE_ASSIGN, 0);
}
"#;
    // 2^17 slots (16 regions), growth off: the batch below takes the region build.
    let slots = 1u64 << 17;
    let mut t = builder(dev).capacity(slots).max_load_factor(1.0).growth(false).build::<u32, u32>().unwrap();
    let mut o = Oracle::new();
    let first = distinct_keys::<u32>(&mut cx.rng, 20_000);
    let first_vals = any_values::<u32>(&mut cx.rng, first.len());

    cx.phase = "a user's kernel inserts".into();
    let cuda = t.cuda_mut().unwrap();
    let stream = cuda.stream().clone();
    let ctx = stream.context().clone();
    let opts = CompileOptions { arch: Some(arch_of(&ctx).unwrap()), ..Default::default() };
    let module = ctx.load_module(compile_ptx_with_opts(with_device_header(SOURCE), opts).unwrap()).unwrap();
    let put = module.load_function("put").unwrap();
    let (kd, vd) = (upload(&stream, &first), upload(&stream, &first_vals));
    let view = cuda.view();
    let n = first.len() as u64;
    let cfg = LaunchConfig { grid_dim: (n.div_ceil(256) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let mut launch = stream.launch_builder(&put);
    launch.arg(&view).arg(&kd).arg(&vd).arg(&n);
    // Safety: the arguments match `put`'s parameters.
    unsafe { launch.launch(cfg) }.unwrap();
    cuda.resync().unwrap();
    for (&k, &v) in first.iter().zip(&first_vals) {
        o.map.insert(k, v);
    }

    cx.phase = "then a large batch".into();
    let more = fresh_keys(&mut cx.rng, (slots / 2) as usize, &o, &[]);
    let vals = any_values::<u32>(&mut cx.rng, more.len());
    let failed = insert(&mut t, &mut o, Op::Assign, &more, &vals, &cx);
    assert!(failed.is_empty(), "{cx}: {} keys not stored", failed.len());
    check_table(&t, &o, &cx);
}
