//! The conformance suite on the default wgpu adapter (Mesa's lavapipe on a
//! machine without a GPU). Without an adapter each test prints
//! `skipped: no wgpu adapter (...)`; set `GPUHASH_REQUIRE_WGPU=1` to make
//! that a failure instead (CI does). The wgpu backend implements
//! `Scheme::Linear` so far.

#[macro_use]
mod common;

use gpuhash::{Device, Scheme};

conformance_suite!(wgpu_linear, Device::Wgpu, Scheme::Linear);

use common::{distinct_keys, usable, Ctx, Target, TestValue};
use gpuhash::{HashTable, Key};

/// The WGSL hash, home bucket and probe order are the CPU's: keys inserted
/// one call at a time (so no two race for a slot) land in the very slots
/// they take on the CPU, in a table small enough that most runs collide,
/// and `export` (which lists slots in order on both) returns the same
/// sequence. Both slot widths; keys of every width of the hash input.
#[test]
fn placement_matches_the_cpu() {
    placement_body::<u32, u32>();
    placement_body::<u64, u64>();
    placement_body::<u32, f64>();
}

fn placement_body<K: Key, V: TestValue>() {
    let Some(dev) = usable(Target::new(Device::Wgpu, Scheme::Linear)) else { return };
    let mut cx = Ctx::new::<K, V>("placement_matches_the_cpu", dev);
    let build = |device| {
        HashTable::<K, V>::builder().device(device).capacity(512).max_load_factor(1.0).growth(false).max_probe_buckets(8).build::<K, V>()
    };
    let (mut gpu, mut cpu) = (build(Device::Wgpu).unwrap(), build(Device::Cpu).unwrap());
    let mut keys = distinct_keys::<K>(&mut cx.rng, 400);
    keys.extend((0..40).map(|k| K::from_u64(k << 20)));
    for (i, &k) in keys.iter().enumerate() {
        let v = [V::from_i64(i as i64)];
        let (g, c) = (gpu.insert_or_assign(&[k], &v), cpu.insert_or_assign(&[k], &v));
        assert_eq!(g.is_ok(), c.is_ok(), "{cx}: key {k:?}: wgpu {g:?}, cpu {c:?}");
    }
    let (ge, ce) = (gpu.export().unwrap(), cpu.export().unwrap());
    assert!(ge.0.len() > 300, "{cx}: only {} keys stored", ge.0.len());
    assert_eq!(ge.0, ce.0, "{cx}: the slots' keys differ from the CPU's");
    let (gs, cs) = (gpu.stats().unwrap(), cpu.stats().unwrap());
    assert_eq!((gs.len, gs.tombstones), (cs.len, cs.tombstones), "{cx}: stats");
    assert_eq!(format!("{gs:?}"), format!("{cs:?}"), "{cx}: displacement");
    cx.count(keys.len());
}

/// `Device::WgpuAdapter(i)` opens the `i`th of `adapters()`, and an index
/// past them is unavailable (an error, not a panic).
#[test]
fn adapters_by_index() {
    let Some(_) = usable(Target::new(Device::Wgpu, Scheme::Linear)) else { return };
    let found = gpuhash::backend::wgpu::adapters();
    assert!(!found.is_empty(), "Device::Wgpu works, yet no adapter is listed");
    for (i, a) in found.iter().enumerate() {
        println!("wgpu adapter {i}: {} ({:?}, {:?})", a.name, a.backend, a.device_type);
    }
    let dev: Device = "wgpu:0".parse().unwrap();
    assert_eq!(dev, Device::WgpuAdapter(0));
    assert_eq!(dev.to_string(), "wgpu:0");
    let mut t = HashTable::<u64, i64>::new(dev, 64).unwrap();
    t.insert_or_apply(&[1, 1, u64::MAX], &[-2, 5, 7], gpuhash::Reduce::Sum).unwrap();
    assert_eq!(t.find(&[1, u64::MAX, 2]).unwrap(), vec![Some(3), Some(7), None]);
    assert_eq!(t.device(), Device::WgpuAdapter(0));
    let past = Device::WgpuAdapter(found.len());
    assert!(matches!(past.check_available(), Err(gpuhash::Error::Unavailable { .. })), "{past}");
    assert!(matches!(HashTable::<u32, u32>::new(past, 64), Err(gpuhash::Error::Unavailable { .. })), "{past}");
    let r = HashTable::<u32, u32>::builder().device(Device::Wgpu).scheme(Scheme::Cuckoo).build::<u32, u32>();
    assert!(matches!(r, Err(gpuhash::Error::Unsupported(_))), "cuckoo on wgpu: {r:?}");
}

/// Schemes the wgpu backend does not implement yet (the slab list) are
/// refused with `Error::Unsupported`, both by `check_scheme` and by the
/// builder, never a panic.
#[test]
fn unported_schemes_are_unsupported() {
    let Some(_) = usable(Target::new(Device::Wgpu, Scheme::Linear)) else { return };
    let e = Device::Wgpu.check_scheme(Scheme::SlabList);
    assert!(matches!(e, Err(gpuhash::Error::Unsupported(_))), "{e:?}");
    let t = HashTable::<u64, u32>::builder().device(Device::Wgpu).scheme(Scheme::SlabList).capacity(64).build::<u64, u32>();
    assert!(matches!(t, Err(gpuhash::Error::Unsupported(_))), "{:?}", t.err());
}
