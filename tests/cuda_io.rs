//! CUDA data paths beyond the conformance suite, on CUDA device 0: host
//! batches large enough for the pinned staging pipeline. Without a usable
//! device each GPU test prints `skipped: no CUDA device (...)`; set
//! `GPUHASH_REQUIRE_CUDA=1` to make that a failure instead.

#[macro_use]
mod common;

use common::*;
use gpuhash::{Device, Key, Reduce};

/// Large enough for several chunks of the staging pipeline (about 256 Ki
/// keys per chunk for 16-byte pairs), and not a multiple of a chunk.
fn big() -> usize {
    scaled(1_000_003)
}

fn cuda() -> Option<Device> {
    usable(Device::Cuda(0))
}

/// `n` distinct in-slot keys plus the two out-of-band ones.
fn keys_with_specials<K: Key>(cx: &mut Ctx, n: usize) -> Vec<K> {
    let mut keys = distinct_keys::<K>(&mut cx.rng, n);
    keys.extend([key_max::<K>(), K::from_u64(key_max::<K>().to_u64() - 1)]);
    keys
}

// ------------------------------------------------------------ staging

fn staged_body<K: Key, V: TestValue>(dev: Device) {
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

fn full_body<K: Key, V: TestValue>(dev: Device, slots: u64, n: usize) {
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
