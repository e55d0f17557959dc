//! Allocation failures lose nothing: on every scheme, on the CPU and on CUDA
//! device 0, each allocation point of growth, rehash, reserve, tombstone
//! cleaning, the growth-off reclaim and (CUDA) the region build is failed in
//! turn through `gpuhash::fault`; every time, the call either completes (a
//! fallback) or returns `OutOfMemory` (or `GrowthFailed` listing exactly the
//! positions it did not store), and the table still equals its oracle and
//! takes more work. On CUDA a second test takes most of the device's memory
//! first, so growth meets a real shortage. Without a usable device the CUDA
//! tests print `skipped: no CUDA device (...)`; `GPUHASH_REQUIRE_CUDA=1`
//! makes that a failure.

#[macro_use]
mod common;

use std::sync::Mutex;

use common::*;
use gpuhash::fault::{self, FailAllocations};
use gpuhash::{Device, Error, HashTable, Key, Reduce, Scheme};

/// The hook is process-wide: one test at a time uses it.
static HOOK: Mutex<()> = Mutex::new(());

/// Faults injected and survived by one test.
#[derive(Default)]
struct Tally {
    injected: u64,
    survived: u64,
}

/// What a failed operation may return: it changed nothing.
fn expect_oom(e: &Error, what: &str, cx: &Ctx) {
    assert!(matches!(e, Error::OutOfMemory { .. }), "{cx}: {what} under an allocation failure gave {e}, not OutOfMemory");
}

/// Runs `op` once per allocation point it reaches, failing that point, and
/// checks the table against the oracle after each run; the last run, which
/// reaches no injected failure, is the operation done. `op` returns whether
/// it completed.
fn each_fault<K: Key, V: TestValue>(
    t: &mut HashTable<K, V>,
    o: &mut Oracle<K, V>,
    tally: &mut Tally,
    cx: &Ctx,
    mut op: impl FnMut(&mut HashTable<K, V>, &mut Oracle<K, V>) -> bool,
) {
    for k in 0.. {
        let (before, injected) = (fault::allocations(), fault::injected());
        let guard = FailAllocations::new(k, 1);
        let done = op(t, o);
        drop(guard);
        let made = fault::allocations() - before;
        let hit = fault::injected() > injected;
        check_table(t, o, cx);
        if hit {
            tally.injected += 1;
            tally.survived += 1;
        }
        if !hit {
            assert!(done, "{cx}: the operation failed with no allocation failure injected");
            assert!(made <= k, "{cx}: allocation {k} of {made} was not failed");
            return;
        }
    }
}

/// A round of ordinary work, to show the table is still usable.
fn still_usable<K: Key, V: TestValue>(t: &mut HashTable<K, V>, o: &mut Oracle<K, V>, cx: &mut Ctx) {
    let keys = fresh_keys(&mut cx.rng, 500, o, &[]);
    let vals = num_values::<V>(&mut cx.rng, keys.len());
    let growth = t.growth();
    t.set_growth(true);
    insert(t, o, Op::Apply(Reduce::Max), &keys, &vals, cx);
    t.set_growth(growth);
    check_find(t, o, &keys, cx);
}

fn faults_body<K: Key, V: TestValue>(dev: Target, tally: &mut Tally) {
    let mut cx = Ctx::new::<K, V>("faults", dev);
    let n = scaled(40_000);
    let mut t = builder(dev).capacity(1024).build::<K, V>().unwrap();
    let mut o = Oracle::new();
    let first = distinct_keys::<K>(&mut cx.rng, n);
    let vals = any_values::<V>(&mut cx.rng, n);

    // Growth: one batch that grows the table several times on the way.
    cx.phase = "insert that grows".into();
    each_fault(&mut t, &mut o, tally, &cx, |t, o| match try_insert(t, o, Op::Assign, &first, &vals, &cx) {
        Ok(_) => true,
        Err(e) => {
            expect_oom(&e, "insert", &cx);
            false
        }
    });
    still_usable(&mut t, &mut o, &mut cx);

    cx.phase = "rehash".into();
    let target = 4 * t.capacity();
    each_fault(&mut t, &mut o, tally, &cx, |t, _| match t.rehash(target) {
        Ok(()) => true,
        Err(e) => {
            expect_oom(&e, "rehash", &cx);
            false
        }
    });
    still_usable(&mut t, &mut o, &mut cx);

    cx.phase = "reserve".into();
    let more = 3 * t.capacity();
    each_fault(&mut t, &mut o, tally, &cx, |t, _| match t.reserve(more) {
        Ok(()) => true,
        Err(e) => {
            expect_oom(&e, "reserve", &cx);
            false
        }
    });

    cx.phase = "clean_tombstones".into();
    let gone: Vec<K> = o.map.keys().copied().take(o.map.len() / 2).collect();
    erase(&mut t, &mut o, &gone, &cx);
    each_fault(&mut t, &mut o, tally, &cx, |t, _| match t.clean_tombstones() {
        Ok(()) => true,
        Err(e) => {
            expect_oom(&e, "clean_tombstones", &cx);
            false
        }
    });
    still_usable(&mut t, &mut o, &mut cx);

    // Growth off, tombstones present: the reclaim before refusing rebuilds.
    cx.phase = "growth-off insert that reclaims tombstones".into();
    let mut t = builder(dev).capacity(4096).max_load_factor(1.0).growth(false).build::<K, V>().unwrap();
    let mut o = Oracle::new();
    let slots = t.capacity() as usize;
    let keys = distinct_keys::<K>(&mut cx.rng, slots * 9 / 10);
    let vals = any_values::<V>(&mut cx.rng, keys.len());
    insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
    erase(&mut t, &mut o, &keys[..slots / 5], &cx);
    let again = fresh_keys(&mut cx.rng, slots / 5, &o, &keys);
    let vals = any_values::<V>(&mut cx.rng, again.len());
    each_fault(&mut t, &mut o, tally, &cx, |t, o| match try_insert(t, o, Op::Assign, &again, &vals, &cx) {
        Ok(_) => true,
        Err(e) => {
            expect_oom(&e, "insert", &cx);
            false
        }
    });
    still_usable(&mut t, &mut o, &mut cx);

    // CUDA: a batch large enough for the region build (its scratch failing
    // sends the batch to the plain kernel).
    if matches!(dev.device, Device::Cuda(_)) && dev.scheme == Scheme::Linear {
        cx.phase = "region build".into();
        let mut t = builder(dev).capacity(1 << 16).max_load_factor(1.0).growth(false).build::<K, V>().unwrap();
        let mut o = Oracle::new();
        let keys = distinct_keys::<K>(&mut cx.rng, t.capacity() as usize / 2);
        let vals = any_values::<V>(&mut cx.rng, keys.len());
        each_fault(&mut t, &mut o, tally, &cx, |t, o| match try_insert(t, o, Op::Assign, &keys, &vals, &cx) {
            Ok(_) => true,
            Err(e) => {
                expect_oom(&e, "insert", &cx);
                false
            }
        });
        still_usable(&mut t, &mut o, &mut cx);
    }
}

fn run(device: Device, name: &str) {
    let _one = HOOK.lock().unwrap_or_else(|p| p.into_inner());
    let mut tally = Tally::default();
    for scheme in Scheme::ALL {
        let Some(dev) = usable(Target::new(device, scheme)) else { return };
        if pair_selected::<u32, u32>("faults_body") {
            faults_body::<u32, u32>(dev, &mut tally);
        }
        if pair_selected::<u64, u64>("faults_body") {
            faults_body::<u64, u64>(dev, &mut tally);
        }
    }
    println!("faults on {name}: {} allocation failures injected, {} survived with nothing lost", tally.injected, tally.survived);
}

#[test]
fn allocation_failures_on_the_cpu() {
    run(Device::Cpu, "cpu");
}

#[test]
fn allocation_failures_on_cuda() {
    run(Device::Cuda(0), "cuda:0");
}

/// Takes most of the device's free memory, then asks the table to grow:
/// growth meets a real shortage, the table stays as it was, and once the
/// memory is back the same growth succeeds.
#[test]
fn growth_when_the_device_is_nearly_full() {
    let _one = HOOK.lock().unwrap_or_else(|p| p.into_inner());
    let Some(dev) = usable(Target::new(Device::Cuda(0), Scheme::Linear)) else { return };
    let mut cx = Ctx::new::<u64, u64>("growth_when_the_device_is_nearly_full", dev);
    let mut t = builder(dev).capacity(1 << 22).build::<u64, u64>().unwrap();
    let mut o = Oracle::new();
    let keys = distinct_keys::<u64>(&mut cx.rng, 1 << 21);
    let vals = any_values::<u64>(&mut cx.rng, keys.len());
    insert(&mut t, &mut o, Op::Assign, &keys, &vals, &cx);
    let table_bytes = t.capacity() * t.slot_bytes() as u64;
    let cuda = t.cuda_mut().unwrap();
    let stream = cuda.stream().clone();
    let ctx = stream.context().clone();
    // Leave three times the table's size free: room for lookups and export,
    // none for a table four times as large.
    let (free, _) = ctx.mem_get_info().unwrap();
    let hog_bytes = (free as u64).saturating_sub(3 * table_bytes);
    // Safety: never read; it only holds memory.
    let hog = unsafe { stream.alloc::<u8>(hog_bytes as usize) }.unwrap();
    let (left, _) = ctx.mem_get_info().unwrap();
    if left as u64 >= 4 * table_bytes {
        println!("skipped: {} MiB still free after taking the rest (a memory checker's allocator?)", left >> 20);
        return;
    }
    cx.phase = format!("rehash into 4x with {} MiB free", (free as u64 - hog_bytes) >> 20);
    let cap = t.capacity();
    match t.rehash(4 * cap) {
        Err(Error::OutOfMemory { .. }) => {}
        other => panic!("{cx}: expected OutOfMemory, got {other:?}"),
    }
    assert_eq!(t.capacity(), cap, "{cx}: capacity changed");
    check_table(&t, &o, &cx);
    cx.phase = "an insert that must grow".into();
    // Enough keys that growth must quadruple the table.
    let more = fresh_keys(&mut cx.rng, 12 << 20, &o, &[]);
    let vals = any_values::<u64>(&mut cx.rng, more.len());
    match try_insert(&mut t, &mut o, Op::Assign, &more, &vals, &cx) {
        Err(e) => expect_oom(&e, "insert", &cx),
        // GrowthFailed, whose stored positions try_insert has recorded and checked.
        Ok(refused) => assert!(!refused.is_empty(), "{cx}: the table grew with no memory to grow into"),
    }
    // The region build keeps its scratch for later batches; give it back
    // so lookups and export find room again.
    gpuhash::backend::cuda::release_scratch(0);
    check_table(&t, &o, &cx);
    drop(hog);
    cx.phase = "the same growth with the memory back".into();
    t.rehash(4 * cap).unwrap_or_else(|e| panic!("{cx}: rehash failed: {e}"));
    check_table(&t, &o, &cx);
}
