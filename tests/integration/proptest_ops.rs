//! Random operation sequences on a small key range (with 0, MAX-2 and the
//! out-of-band keys MAX and MAX-1), applied to a table and to a `HashMap`
//! oracle; after every step the two must agree.
//!
//! Cases are drawn from `GPUHASH_TEST_SEED` (fixed by default), so a failure
//! replays; proptest then reports the shrunk operation sequence.

use crate::common;

use common::*;
use gpuhash::{Device, HashTable, Key, Reduce, Scheme};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Keys as `u64`: the top three wrap to MAX, MAX-1, MAX-2 of either key width.
fn key() -> impl Strategy<Value = u64> {
    prop_oneof![
        10 => 0u64..20,
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 1),
        1 => Just(u64::MAX - 2),
        1 => Just(0),
    ]
}

#[derive(Clone, Debug)]
enum Step {
    Assign(Vec<(u64, i64)>),
    IfAbsent(Vec<(u64, i64)>),
    Sum(Vec<(u64, i64)>),
    Erase(Vec<u64>),
    Find(Vec<u64>),
    Clear,
    Rehash(u64),
}

fn step() -> impl Strategy<Value = Step> {
    let pairs = || vec((key(), any::<i64>()), 0..40);
    prop_oneof![
        4 => pairs().prop_map(Step::Assign),
        3 => pairs().prop_map(Step::IfAbsent),
        3 => pairs().prop_map(Step::Sum),
        3 => vec(key(), 0..20).prop_map(Step::Erase),
        2 => vec(key(), 0..20).prop_map(Step::Find),
        1 => Just(Step::Clear),
        1 => (0u64..200).prop_map(Step::Rehash),
    ]
}

/// Applies `steps` to a 16-slot table and the oracle, comparing after each.
/// With growth off the table also gets a 2-bucket probe limit, so refused
/// inserts (`TableFull`) are common; `common::insert` checks what they list.
fn run_steps<K: Key, V: TestValue>(name: &str, dev: Target, growth: bool, steps: &[Step]) {
    let mut cx = Ctx::new::<K, V>(name, dev);
    let b = builder(dev).capacity(16).growth(growth);
    let b = if growth { b } else { b.max_load_factor(1.0).max_probe_buckets(2) };
    let mut t: HashTable<K, V> = b.build().unwrap_or_else(|e| panic!("{cx}: build failed: {e}"));
    let mut o = Oracle::new();
    let mut universe: Vec<K> = (0..24).map(K::from_u64).collect();
    universe.extend(edge_keys::<K>());
    let split = |pairs: &[(u64, i64)]| -> (Vec<K>, Vec<V>) {
        pairs.iter().map(|&(k, v)| (K::from_u64(k), V::from_i64(v))).unzip()
    };
    let keys = |ks: &[u64]| -> Vec<K> { ks.iter().map(|&k| K::from_u64(k)).collect() };
    for (i, s) in steps.iter().enumerate() {
        cx.phase = format!("step {i} of {}: {s:?}", steps.len());
        let slots = t.capacity();
        match s {
            Step::Assign(p) | Step::IfAbsent(p) | Step::Sum(p) => {
                let op = match s {
                    Step::Assign(_) => Op::Assign,
                    Step::IfAbsent(_) => Op::IfAbsent,
                    _ => Op::Apply(Reduce::Sum),
                };
                let (k, v) = split(p);
                insert(&mut t, &mut o, op, &k, &v, &cx);
                if !growth {
                    assert_eq!(t.capacity(), slots, "{cx}: capacity changed with growth off");
                }
            }
            Step::Erase(ks) => erase(&mut t, &mut o, &keys(ks), &cx),
            Step::Find(ks) => check_find(&t, &o, &keys(ks), &cx),
            Step::Clear => {
                t.clear().unwrap_or_else(|e| panic!("{cx}: clear failed: {e}"));
                o.map.clear();
                assert_eq!(t.capacity(), slots, "{cx}: clear changed the capacity");
            }
            Step::Rehash(n) => {
                t.rehash(*n).unwrap_or_else(|e| panic!("{cx}: rehash failed: {e}"));
                assert!(t.capacity() >= *n, "{cx}: rehash({n}) gave {} slots", t.capacity());
            }
        }
        check_table(&t, &o, &cx);
        check_find(&t, &o, &universe, &cx);
    }
}

/// Every scheme the properties run on.
const SCHEMES: &[Scheme] =
    &[Scheme::Linear, Scheme::Hashinator { team: 8 }, Scheme::RobinHood, Scheme::Cuckoo, Scheme::TwoLevel];

/// Runs the property on `device` once per scheme.
fn property<K: Key, V: TestValue>(name: &str, device: Device, growth: bool) {
    for &scheme in SCHEMES {
        property_on::<K, V>(name, Target::new(device, scheme), growth);
    }
}

/// Runs the property with a runner seeded from the suite's seed.
fn property_on<K: Key, V: TestValue>(name: &str, dev: Target, growth: bool) {
    let Some(dev) = usable(dev) else { return };
    let seed = base_seed();
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&fnv(name).to_le_bytes());
    let config = Config { cases: 256, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let result = runner.run(&vec(step(), 1..30), |steps| {
        run_steps::<K, V>(name, dev, growth, &steps);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name} on {dev}: {e}\n(replay with GPUHASH_TEST_SEED={seed:#x})");
    }
}

macro_rules! properties {
    ($dev:expr; $($name:ident: $k:ty, $v:ty, growth $g:expr;)*) => {$(
        #[test]
        fn $name() {
            property::<$k, $v>(stringify!($name), $dev, $g);
        }
    )*};
}

mod cpu {
    use super::*;
    properties! { Device::Cpu;
        growth_on_u32_u32: u32, u32, growth true;
        growth_off_u32_u32: u32, u32, growth false;
        growth_on_u64_i64: u64, i64, growth true;
        growth_off_u64_i64: u64, i64, growth false;
    }
}

mod cuda {
    use super::*;
    properties! { Device::Cuda(0);
        growth_on_u32_u32: u32, u32, growth true;
        growth_off_u32_u32: u32, u32, growth false;
        growth_on_u64_i64: u64, i64, growth true;
        growth_off_u64_i64: u64, i64, growth false;
    }
}
