//! The conformance suite on the default wgpu adapter (Mesa's lavapipe on a
//! machine without a GPU). Without an adapter each test prints
//! `skipped: no wgpu adapter (...)`; set `GPUHASH_REQUIRE_WGPU=1` to make
//! that a failure instead (CI does). The wgpu backend implements
//! `Scheme::Linear`, `Scheme::SlabList`, `Scheme::Cuckoo` and
//! `Scheme::TwoLevel`.

use crate::common;

use gpuhash::{Device, Scheme};

conformance_suite!(wgpu_linear, Device::Wgpu, Scheme::Linear);
// The browser's path (32-bit atomics only) on an adapter with 64-bit ones:
// 16-byte slots then elect representatives instead of claiming keys whole.
conformance_suite!(wgpu_linear_portable, Device::Wgpu, Scheme::Linear, wgpu_portable);
conformance_suite!(wgpu_slab_list, Device::Wgpu, Scheme::SlabList);
conformance_suite!(wgpu_cuckoo, Device::Wgpu, Scheme::Cuckoo);
// The same path for cuckoo tables: 16-byte slots' first phase through
// representatives instead of 64-bit claims.
conformance_suite!(wgpu_cuckoo_portable, Device::Wgpu, Scheme::Cuckoo, wgpu_portable);
// Two-level cuckoo (the cuckoo module with regions and an overflow instead
// of a stash), on both first phases.
conformance_suite!(wgpu_two_level, Device::Wgpu, Scheme::TwoLevel);
conformance_suite!(wgpu_two_level_portable, Device::Wgpu, Scheme::TwoLevel, wgpu_portable);

use common::{distinct_keys, usable, Ctx, Target, TestValue};
use gpuhash::{HashTable, Key};

/// The WGSL hash, home bucket and probe order are the CPU's: keys inserted
/// one call at a time (so no two race for a slot) land in the very slots
/// they take on the CPU, in a table small enough that most runs collide,
/// and `export` (which lists slots in order on both) returns the same
/// sequence. Both slot widths; keys of every width of the hash input.
/// The slab list too: its chain heads are the CPU's and, one key per call,
/// its chains grow in the same order, past the pool running out.
#[test]
fn placement_matches_the_cpu() {
    for scheme in [Scheme::Linear, Scheme::SlabList] {
        placement_body::<u32, u32>(scheme);
        placement_body::<u64, u64>(scheme);
        placement_body::<u32, f64>(scheme);
    }
}

fn placement_body<K: Key, V: TestValue>(scheme: Scheme) {
    let Some(dev) = usable(Target::new(Device::Wgpu, scheme)) else { return };
    let mut cx = Ctx::new::<K, V>("placement_matches_the_cpu", dev);
    let build = |device| {
        let b = HashTable::<K, V>::builder().device(device).scheme(scheme).capacity(512).max_load_factor(1.0).growth(false);
        b.max_probe_buckets(8).build::<K, V>()
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
    let r = HashTable::<u32, u32>::builder().device(Device::Wgpu).scheme(Scheme::Hashinator { team: 8 }).build::<u32, u32>();
    assert!(matches!(r, Err(gpuhash::Error::Unsupported(_))), "Hashinator on wgpu: {r:?}");
}

/// Schemes the wgpu backend does not implement yet (Robin Hood, Hashinator) are
/// refused with `Error::Unsupported`, both by `check_scheme` and by the
/// builder, never a panic; those it implements are accepted.
#[test]
fn unported_schemes_are_unsupported() {
    let Some(_) = usable(Target::new(Device::Wgpu, Scheme::Linear)) else { return };
    let e = Device::Wgpu.check_scheme(Scheme::RobinHood);
    assert!(matches!(e, Err(gpuhash::Error::Unsupported(_))), "{e:?}");
    let t = HashTable::<u64, u32>::builder().device(Device::Wgpu).scheme(Scheme::RobinHood).capacity(64).build::<u64, u32>();
    assert!(matches!(t, Err(gpuhash::Error::Unsupported(_))), "{:?}", t.err());
    for s in gpuhash::backend::wgpu::SCHEMES {
        assert!(Device::Wgpu.check_scheme(s).is_ok(), "{s} is listed as implemented");
    }
}

/// Two-level tables on wgpu never rebuild a region: a key its region
/// cannot place goes to the overflow. Filled in batches of 1% of the slots
/// until the first refusal, a table holds 0.93 of its slots or more and
/// keeps some keys in the overflow (a lookup of them reads past the key's
/// candidates); erasing half the keys (overflow slots become tombstones
/// and their regions' spill counts drop) and refilling to the same count
/// lose nothing. Both slot widths and both first phases, checked against
/// the oracle after every phase.
#[test]
fn two_level_overflow_round_trip() {
    for portable in [false, true] {
        overflow_body::<u32, u32>(portable);
        overflow_body::<u64, u64>(portable);
    }
}

fn overflow_body<K: Key, V: TestValue>(portable: bool) {
    let target = if portable { Target::wgpu_portable(Device::Wgpu, Scheme::TwoLevel) } else { Target::new(Device::Wgpu, Scheme::TwoLevel) };
    let Some(dev) = usable(target) else { return };
    let mut cx = Ctx::new::<K, V>("two_level_overflow_round_trip", dev);
    let build = common::builder(dev).capacity(1 << 15).max_load_factor(1.0).growth(false);
    let mut t = build.build::<K, V>().unwrap_or_else(|e| panic!("{cx}: build failed: {e}"));
    let slots = t.capacity();
    let mut o = common::Oracle::new();
    // Fills in batches of 1% up to `until` keys or the first refusal; the keys held then.
    let fill = |t: &mut HashTable<K, V>, o: &mut common::Oracle<K, V>, cx: &mut Ctx, until: u64| loop {
        cx.phase = format!("fill: {} keys in {slots} slots", t.len());
        let n = (slots / 100).min(until.saturating_sub(t.len())) as usize;
        if n == 0 {
            return t.len();
        }
        let keys = common::fresh_keys(&mut cx.rng, n, o, &[]);
        let values = common::any_values::<V>(&mut cx.rng, keys.len());
        if !common::insert(t, o, common::Op::Assign, &keys, &values, cx).is_empty() {
            return t.len();
        }
    };
    let held = fill(&mut t, &mut o, &mut cx, slots);
    println!("two_level_overflow_round_trip {dev} {}->{}: {held} of {slots} slots held before the first refusal", common::short_type::<K>(), common::short_type::<V>());
    common::check_table(&t, &o, &cx);
    assert!(held as f64 >= 0.93 * slots as f64, "{cx}: the first key was refused with {held} keys in {slots} slots");
    // A key in the overflow is one candidate past the key's last.
    let choices = if HashTable::<K, V>::SLOT_BYTES == 8 { 2 } else { 3 };
    let stats = t.stats().unwrap_or_else(|e| panic!("{cx}: stats failed: {e}"));
    assert_eq!(stats.max_probe_buckets, choices + 1, "{cx}: no key in the overflow at {held} keys ({stats:?})");
    cx.phase = "erase half".into();
    let mut stored: Vec<K> = o.map.keys().copied().collect();
    stored.sort_unstable();
    let half: Vec<K> = stored.iter().copied().step_by(2).collect();
    common::erase(&mut t, &mut o, &half, &cx);
    common::check_table(&t, &o, &cx);
    fill(&mut t, &mut o, &mut cx, held);
    common::check_table(&t, &o, &cx);
}

/// Slab lists: chains grown by many invocations at once lose no slab (every
/// slab handed out is linked when the call returns, as the host's copy of
/// the pool counters shows) and hold what the CPU holds; once the pool is
/// used up, each refused key is refused at every position holding it and
/// absent, and the pool stays whole. Both slot widths.
#[test]
fn slab_chains_lose_no_slab() {
    slab_chains_body::<u32, u32>();
    slab_chains_body::<u64, u64>();
}

fn slab_chains_body<K: Key, V: TestValue>() {
    let Some(dev) = usable(Target::new(Device::Wgpu, Scheme::SlabList)) else { return };
    let mut cx = Ctx::new::<K, V>("slab_chains_lose_no_slab", dev);
    let build = |device| {
        HashTable::<K, V>::builder().device(device).scheme(Scheme::SlabList).capacity(1 << 14).max_load_factor(1.0).growth(false).build::<K, V>()
    };
    let (mut gpu, mut cpu) = (build(Device::Wgpu).unwrap(), build(Device::Cpu).unwrap());
    // Load 0.73: chains of about 3 slabs (8-byte slots), all grown in one call.
    let keys = distinct_keys::<K>(&mut cx.rng, 12_000);
    let vals: Vec<V> = (0..keys.len()).map(|i| V::from_i64(i as i64)).collect();
    gpu.insert_or_assign(&keys, &vals).unwrap_or_else(|e| panic!("{cx}: {e}"));
    cpu.insert_or_assign(&keys, &vals).unwrap_or_else(|e| panic!("{cx}: {e}"));
    let pool = gpu.wgpu_mut().and_then(|t| t.slab_pool()).expect("a slab-list wgpu table");
    assert!(pool.handed_out > 0, "{cx}: no chain grew: {pool:?}");
    assert_eq!(pool.handed_out, pool.linked, "{cx}: slabs handed out but not linked: {pool:?}");
    let sorted = |t: &HashTable<K, V>| {
        let (k, v) = t.export().unwrap();
        let mut pairs: Vec<(u64, u64)> = k.iter().zip(&v).map(|(k, v)| (k.to_u64(), v.to_bits())).collect();
        pairs.sort_unstable();
        pairs
    };
    assert_eq!(sorted(&gpu), sorted(&cpu), "{cx}: contents differ from the CPU's");
    assert_eq!(gpu.stats().unwrap().len, cpu.stats().unwrap().len, "{cx}: stats");

    // The same pairs in slot order (a chain's keys side by side) into a
    // fresh table: invocations race at the same chain ends all along.
    let (ek, ev) = gpu.export().unwrap();
    let mut fresh = build(Device::Wgpu).unwrap();
    let t = fresh.wgpu_mut().unwrap();
    let r = gpuhash::backend::Backend::insert(t, &ek, &ev, gpuhash::backend::InsertMode::Assign).unwrap();
    let pool = t.slab_pool().unwrap();
    assert_eq!(pool.handed_out, pool.linked, "{cx}: chain order: slabs handed out but not linked: {pool:?}");
    assert_eq!(r.inserted as usize + r.failed.len(), ek.len(), "{cx}: chain order: report");
    let got = fresh.find(&ek).unwrap();
    for (p, ((k, v), g)) in ek.iter().zip(&ev).zip(got).enumerate() {
        let want = r.failed.binary_search(&p).is_err().then_some(v.to_bits());
        assert_eq!(g.map(|g| g.to_bits()), want, "{cx}: chain order: key {k:?}");
    }

    // Past the pool: a batch of twice the room left, each key twice.
    let stored: std::collections::HashSet<K> = keys.iter().copied().collect();
    let more: Vec<K> = distinct_keys::<K>(&mut cx.rng, 20_000).into_iter().filter(|k| !stored.contains(k)).take(8_000).collect();
    let mut batch = more.clone();
    batch.extend_from_slice(&more);
    let bv: Vec<V> = vec![V::from_i64(1); batch.len()];
    let t = gpu.wgpu_mut().unwrap();
    let r = gpuhash::backend::Backend::insert(t, &batch, &bv, gpuhash::backend::InsertMode::Apply(gpuhash::Reduce::Sum)).unwrap();
    let pool = t.slab_pool().unwrap();
    assert_eq!((pool.handed_out, pool.linked), (pool.slabs, pool.slabs), "{cx}: pool after an overfull batch: {pool:?}");
    assert!(!r.failed.is_empty(), "{cx}: nothing refused past the pool");
    let refused: std::collections::HashSet<K> = r.failed.iter().map(|&p| batch[p]).collect();
    for (p, k) in batch.iter().enumerate() {
        assert_eq!(refused.contains(k), r.failed.binary_search(&p).is_ok(), "{cx}: key {k:?} refused at some positions only");
    }
    let got = gpu.find(&more).unwrap();
    for (k, g) in more.iter().zip(got) {
        let want = (!refused.contains(k)).then(|| V::from_i64(2));
        assert_eq!(g.map(|g| g.to_bits()), want.map(|w| w.to_bits()), "{cx}: key {k:?} after the overfull batch");
    }
    assert_eq!(r.inserted as usize, more.len() - refused.len(), "{cx}: report");
    cx.count(keys.len() + batch.len());
}

/// The GPU-buffer calls (`insert_buffers`, `find_buffers`,
/// `contains_buffers`, `erase_buffers`) against a `HashMap` oracle: batch
/// duplicates, marker keys, a hot key, refused keys in a full table; and
/// buffers too short or without `STORAGE` are refused before anything is
/// stored. Both slot widths.
#[test]
fn gpu_buffer_calls_match_the_oracle() {
    buffer_calls_body::<u32, u32>();
    buffer_calls_body::<u64, u64>();
    buffer_calls_body::<u64, u32>();
}

fn buffer_calls_body<K: Key, V: TestValue>() {
    use gpuhash::backend::wgpu::wgpu;
    use gpuhash::backend::{Backend, InsertMode};
    use gpuhash::Reduce;
    use std::collections::HashMap;

    let Some(dev) = usable(Target::new(Device::Wgpu, Scheme::Linear)) else { return };
    let mut cx = Ctx::new::<K, V>("gpu_buffer_calls_match_the_oracle", dev);
    let slots = 1u64 << 12;
    let mut table = HashTable::<K, V>::builder().device(Device::Wgpu).capacity(slots).max_load_factor(1.0).growth(false).build::<K, V>().unwrap();
    let t = table.wgpu_mut().expect("a wgpu table");
    let upload = |t: &gpuhash::backend::wgpu::WgpuTable<K, V>, bytes: &[u8], usage: wgpu::BufferUsages| {
        let b = t.wgpu_device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: (bytes.len() as u64).max(4).next_multiple_of(4),
            usage: usage | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        t.wgpu_queue().write_buffer(&b, 0, bytes);
        b
    };
    let storage = wgpu::BufferUsages::STORAGE;
    let mut oracle: HashMap<K, V> = HashMap::new();

    // Assign with duplicates and both marker keys: any of a key's values may win.
    let mut keys = distinct_keys::<K>(&mut cx.rng, 1500);
    keys.extend([K::EMPTY, K::TOMBSTONE, keys[0], keys[1], K::EMPTY]);
    let vals: Vec<V> = (0..keys.len()).map(|i| V::from_i64(i as i64)).collect();
    let (kb, vb) = (upload(t, bytemuck::cast_slice(&keys), storage), upload(t, bytemuck::cast_slice(&vals), storage));
    let r = t.insert_buffers(&kb, &vb, keys.len(), InsertMode::Assign).unwrap();
    assert_eq!((r.inserted, r.existing, r.failed.len()), (1502, 3, 0), "{cx}: assign report");
    for (&k, &v) in keys.iter().zip(&vals) {
        oracle.insert(k, v);
    }
    // Later positions of a duplicate: the stored value is one of the batch's.
    let n = keys.len();
    let (out, found) = (upload(t, &vec![0u8; n * 8], storage), upload(t, &vec![0u8; n * 4], storage));
    assert_eq!(t.find_buffers(&kb, &out, &found, n).unwrap(), n as u64, "{cx}: hits");
    assert_eq!(t.contains_buffers(&kb, &found, n).unwrap(), n as u64, "{cx}: contains");
    let got = table.find(&keys).unwrap();
    for (i, (k, g)) in keys.iter().zip(&got).enumerate() {
        let g = g.unwrap_or_else(|| panic!("{cx}: key {k:?} missing"));
        let ok = keys.iter().zip(&vals).any(|(k2, v2)| k2 == k && v2.to_bits() == g.to_bits());
        assert!(ok, "{cx}: position {i}: key {k:?} holds {g:?}, none of its batch values");
        oracle.insert(*k, g);
    }

    // Insert-or-apply sum with one hot key repeated and half new keys.
    let t = table.wgpu_mut().unwrap();
    let mut keys2: Vec<K> = keys[..500].to_vec();
    keys2.extend(distinct_keys::<K>(&mut cx.rng, 4000).into_iter().filter(|k| !oracle.contains_key(k)).take(500));
    keys2.extend(std::iter::repeat_n(keys[7], 3000));
    let vals2: Vec<V> = (0..keys2.len()).map(|i| V::from_i64((i % 7) as i64)).collect();
    let (kb2, vb2) = (upload(t, bytemuck::cast_slice(&keys2), storage), upload(t, bytemuck::cast_slice(&vals2), storage));
    let r = t.insert_buffers(&kb2, &vb2, keys2.len(), InsertMode::Apply(Reduce::Sum)).unwrap();
    assert_eq!((r.inserted, r.failed.len()), (500, 0), "{cx}: apply report");
    for (&k, &v) in keys2.iter().zip(&vals2) {
        let e = oracle.entry(k).or_insert(V::from_i64(0));
        *e = V::reduce_ref(Reduce::Sum, *e, v);
    }
    // New keys start from their first value, not from 0 + value: the same for sums.
    let probe: Vec<K> = oracle.keys().copied().collect();
    for (k, g) in probe.iter().zip(table.find(&probe).unwrap()) {
        assert!(g.is_some_and(|g| g.to_bits() == oracle[k].to_bits()), "{cx}: sum of {k:?}: {g:?} vs {:?}", oracle[k]);
    }

    // Erase: duplicates count once, marker keys included, absent keys not at all.
    let t = table.wgpu_mut().unwrap();
    let mut gone: Vec<K> = keys[..300].to_vec();
    gone.extend_from_slice(&keys[..50]);
    gone.push(K::EMPTY);
    gone.extend(distinct_keys::<K>(&mut cx.rng, 3000).into_iter().filter(|k| !oracle.contains_key(k)).take(20));
    let gb = upload(t, bytemuck::cast_slice(&gone), storage);
    let mut expected = 0;
    for k in &gone {
        expected += oracle.remove(k).is_some() as u64;
    }
    assert_eq!(t.erase_buffers(&gb, gone.len()).unwrap(), expected, "{cx}: erase count");
    assert_eq!(t.len(), oracle.len() as u64, "{cx}: len after erase");

    // Bad buffers: refused, nothing stored.
    let before = t.len();
    let short = t.insert_buffers(&kb, &vb, keys.len() + 1, InsertMode::Assign);
    assert!(matches!(short, Err(gpuhash::Error::LengthMismatch { .. })), "{cx}: {short:?}");
    let plain = upload(t, bytemuck::cast_slice(&keys), wgpu::BufferUsages::empty());
    let r = t.find_buffers(&plain, &out, &found, 4);
    assert!(matches!(r, Err(gpuhash::Error::Unsupported(_))), "{cx}: {r:?}");
    assert_eq!(t.len(), before, "{cx}: a refused call stored something");

    // A full table: refused keys are listed at every position, ascending.
    let room = slots - t.used();
    let mut fresh: Vec<K> = distinct_keys::<K>(&mut cx.rng, (room + 3000) as usize).into_iter().filter(|k| !oracle.contains_key(k)).collect();
    fresh.truncate(room as usize + 500);
    let dup = fresh[fresh.len() - 1];
    fresh.push(dup);
    let fv: Vec<V> = vec![V::from_i64(1); fresh.len()];
    let (fk, fvb) = (upload(t, bytemuck::cast_slice(&fresh), storage), upload(t, bytemuck::cast_slice(&fv), storage));
    let r = t.insert_buffers(&fk, &fvb, fresh.len(), InsertMode::IfAbsent).unwrap();
    assert!(!r.failed.is_empty(), "{cx}: nothing refused in an over-full batch");
    assert!(r.failed.windows(2).all(|w| w[0] < w[1]), "{cx}: refused positions not ascending");
    let stored = (fresh.len() - r.failed.len()) as u64;
    assert_eq!(r.inserted + r.existing, stored, "{cx}: report adds up");
    let refused: std::collections::HashSet<K> = r.failed.iter().map(|&p| fresh[p]).collect();
    for (p, k) in fresh.iter().enumerate() {
        assert_eq!(refused.contains(k), r.failed.binary_search(&p).is_ok(), "{cx}: key {k:?} refused at some positions only");
    }
    let present = table.contains(&fresh).unwrap();
    for (k, f) in fresh.iter().zip(present) {
        assert_eq!(f, !refused.contains(k), "{cx}: key {k:?}: stored {f}, refused {}", refused.contains(k));
    }
    cx.count(keys.len() + keys2.len() + gone.len() + fresh.len());
}

/// 16-byte slots take 64-bit atomics exactly where the adapter has them and
/// the table was not built portable; 8-byte slots never need them. Every
/// table folds with subgroup operations where the adapter has them, but a
/// portable one.
#[test]
fn capabilities_where_offered() {
    let Some(dev) = usable(Target::new(Device::Wgpu, Scheme::Linear)) else { return };
    let build = |portable| HashTable::<u64, u32>::builder().device(dev.device).wgpu_portable(portable).build::<u64, u32>().unwrap();
    let offered = gpuhash::backend::wgpu::offered(dev.device).unwrap();
    println!("wgpu adapter offers {offered:?}");
    assert_eq!(gpuhash::backend::wgpu::offers_atomics64(dev.device).unwrap(), offered.atomics64);
    assert_eq!(build(false).wgpu().unwrap().atomics64(), offered.atomics64);
    assert_eq!(build(false).wgpu().unwrap().capabilities(), offered);
    assert!(!build(true).wgpu().unwrap().atomics64());
    assert_eq!(build(true).wgpu().unwrap().capabilities(), gpuhash::backend::wgpu::Capabilities::default());
    let narrow = HashTable::<u32, u32>::builder().device(dev.device).build::<u32, u32>().unwrap();
    assert!(!narrow.wgpu().unwrap().atomics64());
    assert_eq!(narrow.wgpu().unwrap().capabilities().subgroups, offered.subgroups);
}
