//! Shared machinery of the conformance tests: seeded generators, a
//! `HashMap` oracle, and checks that compare a table with the oracle.
//!
//! Every input comes from a PCG stream seeded from `GPUHASH_TEST_SEED`
//! (default [`DEFAULT_SEED`]); assertion messages name the seed, so a failure
//! replays with `GPUHASH_TEST_SEED=<seed> cargo test ...`.

// Each test binary uses a different part of this module, and `pub` only
// shares items between its files.
#![allow(dead_code, unreachable_pub)]

pub mod suite;

use std::collections::{HashMap, HashSet};
use std::fmt;

use gpuhash::{Builder, Device, Error, HashTable, InsertReport, Key, NotStored, Paging, Reduce, RegionBuild};
use gpuhash::{Scheme, Sharding, Value};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// Seed used when `GPUHASH_TEST_SEED` is not set (fixed, so CI is stable).
pub const DEFAULT_SEED: u64 = 0x6768_5f63_6f6e_666f;

/// The base seed of this run: `GPUHASH_TEST_SEED` (decimal or `0x` hex) or the default.
pub fn base_seed() -> u64 {
    match std::env::var("GPUHASH_TEST_SEED") {
        Ok(s) => {
            let t = s.trim();
            let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => t.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("GPUHASH_TEST_SEED={s:?} is not a u64 (decimal or 0x hex)"))
        }
        Err(_) => DEFAULT_SEED,
    }
}

/// 64-bit FNV-1a, to give each test and type pair its own stream from one seed.
pub fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Short type name for messages (`u32`, not `core::primitive::u32`).
pub fn short_type<T>() -> &'static str {
    let n = std::any::type_name::<T>();
    n.rsplit("::").next().unwrap_or(n)
}

/// Where a test runs: a device, a placement scheme, and optionally a
/// paging or a shard count (shards on the target's device), which every
/// table of the test is then built with ([`builder`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub device: Device,
    pub scheme: Scheme,
    pub paging: Option<Paging>,
    pub shards: Option<usize>,
    /// wgpu: tables kept to 32-bit atomics ([`Builder::wgpu_portable`]).
    pub wgpu_portable: bool,
}

impl Target {
    pub const fn new(device: Device, scheme: Scheme) -> Target {
        Target { device, scheme, paging: None, shards: None, wgpu_portable: false }
    }
    /// wgpu tables on the browser's path (32-bit atomics) whatever the adapter offers.
    pub const fn wgpu_portable(device: Device, scheme: Scheme) -> Target {
        Target { wgpu_portable: true, ..Target::new(device, scheme) }
    }
    /// Tables split into pages with `paging`.
    pub const fn paged(device: Device, scheme: Scheme, paging: Paging) -> Target {
        Target { paging: Some(paging), ..Target::new(device, scheme) }
    }
    /// Tables spread over `shards` shards, all on `device`.
    pub const fn sharded(device: Device, scheme: Scheme, shards: usize) -> Target {
        Target { shards: Some(shards), ..Target::new(device, scheme) }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.device, self.scheme)?;
        if let Some(p) = self.paging {
            write!(f, "/paged({} pages, {} resident, {:?})", p.pages, p.resident, p.residency)?;
        }
        if let Some(n) = self.shards {
            write!(f, "/sharded({n} shards)")?;
        }
        if self.wgpu_portable {
            write!(f, "/portable")?;
        }
        Ok(())
    }
}

/// Per-test context: the random stream and what to print when an assertion fails.
pub struct Ctx {
    pub rng: Pcg64,
    pub seed: u64,
    what: String,
    /// The phase of the test, set by the test body as it goes.
    pub phase: String,
    /// Per-key outcomes compared with the oracle so far (insert positions,
    /// erased keys, lookups through each find/contains form, exported
    /// pairs), printed when the test ends.
    pub checked: std::cell::Cell<u64>,
}

impl Ctx {
    /// Counts `n` per-key outcomes compared with the oracle.
    pub fn count(&self, n: usize) {
        self.checked.set(self.checked.get() + n as u64);
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // A mismatch panics, so a test that ends normally had none.
        if !std::thread::panicking() {
            println!("oracle: {} per-key outcomes checked, 0 mismatches [{}]", self.checked.get(), self.what);
        }
    }
}

impl Ctx {
    /// A context for test `test` on `dev` with key type `K` and value type `V`.
    pub fn new<K: Key, V: Value>(test: &str, dev: Target) -> Ctx {
        let seed = base_seed();
        let what = format!("{test} on {dev}, K={} V={}", short_type::<K>(), short_type::<V>());
        // The device and scheme are left out of the stream so every backend
        // and scheme sees the same inputs.
        let stream = fnv(&format!("{test}/{}/{}", short_type::<K>(), short_type::<V>()));
        Ctx { rng: Pcg64::seed_from_u64(seed ^ stream), seed, what, phase: String::new(), checked: Default::default() }
    }
}

impl fmt::Display for Ctx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}", self.what)?;
        if !self.phase.is_empty() {
            write!(f, ", {}", self.phase)?;
        }
        write!(f, "; replay with GPUHASH_TEST_SEED={:#x}]", self.seed)
    }
}

/// `n`, or a sixteenth of it with `GPUHASH_TEST_SCALE=small` (for slow
/// instrumented runs such as compute-sanitizer).
pub fn scaled(n: usize) -> usize {
    match scale().as_deref() {
        Some("small") => (n / 16).max(1),
        _ => n,
    }
}

/// Set once a wgpu test finds only CPU adapters (Mesa's lavapipe, say).
static SOFTWARE_WGPU: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `GPUHASH_TEST_SCALE` (`small`, `default` or `full`); unset, `small` in a
/// process whose wgpu adapters are all CPU devices: a software rasterizer
/// runs a shader a hundred times slower than a GPU, and the sizes at which
/// GPU-only bugs showed are for GPUs, so the wgpu suite there checks the
/// same behaviour on a sixteenth of the keys (`default` keeps the default
/// sizes).
fn scale() -> Option<String> {
    match std::env::var("GPUHASH_TEST_SCALE") {
        Ok(s) => Some(s),
        Err(_) => SOFTWARE_WGPU.load(std::sync::atomic::Ordering::Relaxed).then(|| "small".to_string()),
    }
}

/// Notes (once per process, loudly) that the wgpu adapters are all CPU
/// devices, which scales the tests down ([`scale`]).
#[cfg(feature = "wgpu")]
fn note_wgpu_adapters() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let found = gpuhash::backend::wgpu::adapters();
        let software = !found.is_empty() && found.iter().all(|a| format!("{:?}", a.device_type) == "Cpu");
        if software && std::env::var("GPUHASH_TEST_SCALE").is_err() {
            let names: Vec<_> = found.iter().map(|a| a.name.as_str()).collect();
            // Past the test harness's capture (which takes `eprintln!`), so
            // the log shows it once.
            let note = format!("wgpu adapters {names:?} are CPU devices: sizes as GPUHASH_TEST_SCALE=small (set GPUHASH_TEST_SCALE=default for the default sizes)\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), note.as_bytes());
            SOFTWARE_WGPU.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
}

/// `small` by default, `full` with `GPUHASH_TEST_SCALE=full` (the sizes at
/// which GPU-only bugs showed; the GPU bundle runs them), and a sixteenth of
/// `small` with `GPUHASH_TEST_SCALE=small`.
pub fn sized(small: usize, full: usize) -> usize {
    if full_scale() {
        full
    } else {
        scaled(small)
    }
}

/// Whether the tests run at full scale (`GPUHASH_TEST_SCALE=full`).
pub fn full_scale() -> bool {
    scale().as_deref() == Some("full")
}

/// Rounds of a test that repeats calls: `n`, or a fifth of it (at least
/// two) with `GPUHASH_TEST_SCALE=small`. Under compute-sanitizer each call
/// costs milliseconds of instrumented launches, and the long tests are the
/// ones that repeat calls, not the ones with large batches.
pub fn rounds(n: usize) -> usize {
    match scale().as_deref() {
        Some("small") => (n / 5).max(2),
        _ => n,
    }
}

/// Whether a test runs its body for the pair `K -> V`: all pairs, or those
/// listed in `GPUHASH_TEST_PAIRS` ("u32:u32,u64:f32"), which splits a slow
/// instrumented test into one process per pair. A pair left out says so.
pub fn pair_selected<K: Key, V: Value>(body: &str) -> bool {
    let name = |t: &str| t.rsplit("::").next().unwrap_or(t).to_string();
    let pair = format!("{}:{}", name(std::any::type_name::<K>()), name(std::any::type_name::<V>()));
    let Ok(list) = std::env::var("GPUHASH_TEST_PAIRS") else { return true };
    let on = list.split(',').any(|p| p.trim() == pair);
    if !on {
        println!("{body}: skipped pair {pair}: not in GPUHASH_TEST_PAIRS={list}");
    }
    on
}

/// Whether the tests may run on `dev`. A missing CUDA device or wgpu
/// adapter skips the test loudly (or fails it when `GPUHASH_REQUIRE_CUDA=1`
/// or `GPUHASH_REQUIRE_WGPU=1`); any other device must work, and so must
/// every scheme instantiated on a device that is there.
pub fn usable(dev: Target) -> Option<Target> {
    let required = |var: &str| std::env::var(var).is_ok_and(|v| v == "1");
    match dev.device.check_scheme(dev.scheme) {
        Ok(()) => {
            #[cfg(feature = "wgpu")]
            if matches!(dev.device, Device::Wgpu | Device::WgpuAdapter(_)) {
                note_wgpu_adapters();
            }
            Some(dev)
        }
        Err(e @ Error::Unavailable { .. }) => match dev.device {
            Device::Cuda(_) if required("GPUHASH_REQUIRE_CUDA") => panic!("GPUHASH_REQUIRE_CUDA=1, but no CUDA device ({e})"),
            Device::Cuda(_) => {
                eprintln!("skipped: no CUDA device ({e})");
                None
            }
            Device::Wgpu | Device::WgpuAdapter(_) if required("GPUHASH_REQUIRE_WGPU") => {
                panic!("GPUHASH_REQUIRE_WGPU=1, but no wgpu adapter ({e})")
            }
            Device::Wgpu | Device::WgpuAdapter(_) => {
                eprintln!("skipped: no wgpu adapter ({e})");
                None
            }
            _ => panic!("{e}"),
        },
        Err(e) => panic!("{e}"),
    }
}

/// The region build the tables of this run take: `GPUHASH_TEST_REGION`
/// (`auto`, the default, `never`, `always` or `two-pass`), so the GPU
/// bundle runs the same suites with the region build, and its two-pass
/// partition, forced on their small tables (see [`RegionBuild`]).
pub fn region_build() -> RegionBuild {
    match std::env::var("GPUHASH_TEST_REGION").as_deref() {
        Err(_) | Ok("auto") => RegionBuild::Auto,
        Ok("never") => RegionBuild::Never,
        Ok("always") => RegionBuild::Always,
        Ok("two-pass") => RegionBuild::TwoPass,
        Ok(other) => panic!("GPUHASH_TEST_REGION={other:?}: expected auto, never, always or two-pass"),
    }
}

/// A builder on `dev`'s device, scheme and paging or sharding, with the
/// run's region build ([`region_build`]) and the defaults otherwise.
pub fn builder(dev: Target) -> Builder {
    let b = Builder::default().device(dev.device).scheme(dev.scheme).region_build(region_build()).wgpu_portable(dev.wgpu_portable);
    let b = match dev.paging {
        Some(p) => b.paged(p),
        None => b,
    };
    match dev.shards {
        Some(n) => b.sharded(Sharding::new(vec![dev.device; n])),
        None => b,
    }
}

// ---------------------------------------------------------------- values

/// What the tests need of a value type beyond the library's `Value`.
pub trait TestValue: Value {
    const FLOAT: bool;
    /// Any bit pattern (NaNs included for floats): inserts only copy values.
    fn any(rng: &mut Pcg64) -> Self {
        Self::from_bits(rng.random())
    }
    /// A number to do arithmetic on: the full range for integers (sums
    /// wrap, signs matter for min/max), small integers for `f32` (sums stay
    /// exact), fractions for `f64` (sums are checked with a tolerance).
    fn num(rng: &mut Pcg64) -> Self;
    fn from_i64(x: i64) -> Self;
    /// The reduction as documented (the reference the table is held to).
    fn reduce_ref(op: Reduce, a: Self, b: Self) -> Self;
    /// Equal up to float rounding (exact for integers).
    fn close(a: Self, b: Self) -> bool;
}

macro_rules! int_test_value {
    ($($t:ty),*) => {$(
        impl TestValue for $t {
            const FLOAT: bool = false;
            fn num(rng: &mut Pcg64) -> Self {
                rng.random()
            }
            fn from_i64(x: i64) -> Self {
                x as $t
            }
            fn reduce_ref(op: Reduce, a: Self, b: Self) -> Self {
                match op {
                    Reduce::Sum => a.wrapping_add(b),
                    Reduce::Min => a.min(b),
                    Reduce::Max => a.max(b),
                }
            }
            fn close(a: Self, b: Self) -> bool {
                a == b
            }
        }
    )*};
}
int_test_value!(u32, u64, i32, i64);

macro_rules! float_test_value {
    ($t:ty, $num:expr) => {
        impl TestValue for $t {
            const FLOAT: bool = true;
            fn num(rng: &mut Pcg64) -> Self {
                $num(rng)
            }
            fn from_i64(x: i64) -> Self {
                x as $t
            }
            fn reduce_ref(op: Reduce, a: Self, b: Self) -> Self {
                match op {
                    Reduce::Sum => a + b,
                    Reduce::Min => a.min(b),
                    Reduce::Max => a.max(b),
                }
            }
            fn close(a: Self, b: Self) -> bool {
                a.to_bits() == b.to_bits() || (a - b).abs() <= 1e-6 * (1.0 + a.abs() + b.abs())
            }
        }
    };
}
float_test_value!(f32, |rng: &mut Pcg64| rng.random_range(-100i32..=100) as f32);
float_test_value!(f64, |rng: &mut Pcg64| rng.random_range(-1000.0..1000.0));

/// Bit-for-bit equal (so NaN payloads and -0.0 count).
pub fn same<V: Value>(a: V, b: V) -> bool {
    a.to_bits() == b.to_bits()
}

pub fn any_values<V: TestValue>(rng: &mut Pcg64, n: usize) -> Vec<V> {
    (0..n).map(|_| V::any(rng)).collect()
}

pub fn num_values<V: TestValue>(rng: &mut Pcg64, n: usize) -> Vec<V> {
    (0..n).map(|_| V::num(rng)).collect()
}

// ---------------------------------------------------------------- keys

pub fn key_max<K: Key>() -> K {
    K::from_u64(u64::MAX)
}

/// 0, MAX, MAX-1 (both stored out of band) and MAX-2 (the largest in-slot key).
pub fn edge_keys<K: Key>() -> Vec<K> {
    let m = key_max::<K>().to_u64();
    vec![K::from_u64(0), K::from_u64(m), K::from_u64(m - 1), K::from_u64(m - 2)]
}

/// True for the two keys the table stores out of band (not in slots).
pub fn out_of_band<K: Key>(k: K) -> bool {
    k.to_u64() >= key_max::<K>().to_u64() - 1
}

pub fn random_key<K: Key>(rng: &mut Pcg64) -> K {
    K::from_u64(rng.random())
}

/// `n` distinct random keys that are not out of band, so each takes a slot.
pub fn distinct_keys<K: Key>(rng: &mut Pcg64, n: usize) -> Vec<K> {
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let k = random_key::<K>(rng);
        if !out_of_band(k) && seen.insert(k) {
            out.push(k);
        }
    }
    out
}

/// `n` distinct in-slot keys absent from `o` and from `avoid`.
/// A table on `dev` of `capacity` slots; with growth off its maximum load is
/// 1, so the capacity is all there is.
pub fn build_table<K: Key, V: TestValue>(dev: Target, capacity: u64, growth: bool, cx: &Ctx) -> HashTable<K, V> {
    let b = builder(dev).capacity(capacity).growth(growth);
    let b = if growth { b } else { b.max_load_factor(1.0) };
    b.build::<K, V>().unwrap_or_else(|e| panic!("{cx}: build failed: {e}"))
}

/// `n` fresh keys (absent from `o`) that `route` sends to sub-table `sub`
/// (a page of a paged table, a shard of a sharded one).
pub fn keys_routed_to<K: Key, V>(route: impl Fn(K) -> usize, cx: &mut Ctx, sub: usize, n: usize, o: &Oracle<K, V>) -> Vec<K> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        for k in fresh_keys(&mut cx.rng, 4 * n, o, &out) {
            if route(k) == sub && out.len() < n {
                out.push(k);
            }
        }
    }
    out
}

pub fn fresh_keys<K: Key, V>(rng: &mut Pcg64, n: usize, o: &Oracle<K, V>, avoid: &[K]) -> Vec<K> {
    let avoid: HashSet<K> = avoid.iter().copied().collect();
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let k = random_key::<K>(rng);
        if !out_of_band(k) && !o.map.contains_key(&k) && !avoid.contains(&k) && seen.insert(k) {
            out.push(k);
        }
    }
    out
}

/// Every key of `distinct` once plus `extra` repeats of random ones, shuffled.
pub fn with_duplicates<K: Copy>(rng: &mut Pcg64, distinct: &[K], extra: usize) -> Vec<K> {
    let mut v = distinct.to_vec();
    v.extend((0..extra).map(|_| distinct[rng.random_range(0..distinct.len())]));
    v.shuffle(rng);
    v
}

/// `n` keys drawn from `pool` with repetition.
pub fn sample<K: Copy>(rng: &mut Pcg64, pool: &[K], n: usize) -> Vec<K> {
    (0..n).map(|_| pool[rng.random_range(0..pool.len())]).collect()
}

// ---------------------------------------------------------------- oracle

/// The reference model: what the table should hold.
pub struct Oracle<K, V> {
    pub map: HashMap<K, V>,
    /// Set once a float sum has been applied: values then compare with a tolerance.
    pub approx: bool,
}

impl<K: Key, V: TestValue> Oracle<K, V> {
    pub fn new() -> Self {
        Oracle { map: HashMap::new(), approx: false }
    }

    fn matches(&self, expected: V, got: V) -> bool {
        if self.approx {
            V::close(expected, got)
        } else {
            same(expected, got)
        }
    }

    /// Keys in ascending order.
    pub fn sorted(&self) -> Vec<(K, V)> {
        let mut v: Vec<(K, V)> = self.map.iter().map(|(k, v)| (*k, *v)).collect();
        v.sort_unstable_by_key(|p| p.0);
        v
    }
}

/// The three insert flavours.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    Assign,
    IfAbsent,
    Apply(Reduce),
}

pub fn call_insert<K: Key, V: Value>(
    t: &mut HashTable<K, V>,
    op: Op,
    keys: &[K],
    vals: &[V],
) -> gpuhash::Result<InsertReport> {
    match op {
        Op::Assign => t.insert_or_assign(keys, vals),
        Op::IfAbsent => t.insert_if_absent(keys, vals),
        Op::Apply(r) => t.insert_or_apply(keys, vals, r),
    }
}

/// Checks a `TableFull` payload against the batch it came from.
pub fn check_not_stored<K: Key>(ns: &NotStored, keys: &[K], cx: &Ctx) {
    assert_eq!(ns.positions.len(), ns.keys.len(), "{cx}: TableFull lists {} positions but {} keys", ns.positions.len(), ns.keys.len());
    assert!(!ns.positions.is_empty(), "{cx}: TableFull with nothing listed");
    assert!(ns.positions.windows(2).all(|w| w[0] < w[1]), "{cx}: TableFull positions not strictly ascending: {:?}", ns.positions);
    for (p, k) in ns.positions.iter().zip(&ns.keys) {
        assert!(*p < keys.len(), "{cx}: TableFull position {p} outside a batch of {}", keys.len());
        assert_eq!(keys[*p].to_u64(), *k, "{cx}: TableFull key at position {p} is {k:#x}, batch has {:?}", keys[*p]);
    }
}

/// Runs one bulk insert on the table and the oracle and checks what the
/// call reported; returns the batch positions the table could not store.
///
/// Values the spec leaves open (duplicates of a key in one assign batch,
/// or of a new key in one if-absent batch) are read back from the table,
/// checked to be one of the batch's values for that key, and adopted.
pub fn insert<K: Key, V: TestValue>(
    t: &mut HashTable<K, V>,
    o: &mut Oracle<K, V>,
    op: Op,
    keys: &[K],
    vals: &[V],
    cx: &Ctx,
) -> Vec<usize> {
    try_insert(t, o, op, keys, vals, cx).unwrap_or_else(|e| panic!("{cx}: {op:?} of {} keys failed: {e}", keys.len()))
}

/// [`insert`], except that an error which stored nothing (anything but
/// `TableFull` and `GrowthFailed`, which list exactly what they did not
/// store) is returned, with the oracle left as it was.
pub fn try_insert<K: Key, V: TestValue>(
    t: &mut HashTable<K, V>,
    o: &mut Oracle<K, V>,
    op: Op,
    keys: &[K],
    vals: &[V],
    cx: &Ctx,
) -> Result<Vec<usize>, Error> {
    // GrowthFailed also lists positions the call never tried, whose keys
    // may be stored already; TableFull lists only keys that found no slot.
    let mut untried = false;
    let (report, failed) = match call_insert(t, op, keys, vals) {
        Ok(r) => (r, Vec::new()),
        Err(Error::TableFull(ns)) => {
            check_not_stored(&ns, keys, cx);
            assert!(!t.growth(), "{cx}: growth is on, yet {op:?} reported {} keys not stored", ns.positions.len());
            (ns.report, ns.positions.clone())
        }
        Err(Error::GrowthFailed { not_stored: ns, cause }) => {
            check_not_stored(&ns, keys, cx);
            assert!(t.growth(), "{cx}: GrowthFailed ({cause}) with growth off");
            untried = true;
            (ns.report, ns.positions.clone())
        }
        Err(e) => return Err(e),
    };
    // The checks below are the oracle's, not the call under test: no
    // allocation fault a caller injected applies to them (lookups on a GPU
    // allocate; a newer guard that fails nothing decides while alive).
    let _checks = gpuhash::fault::count_allocations();

    // Stored values per key in batch order, skipping positions not stored.
    let mut not_stored = vec![false; keys.len()];
    for &p in &failed {
        not_stored[p] = true;
    }
    let mut order: Vec<K> = Vec::new();
    let mut groups: HashMap<K, Vec<V>> = HashMap::new();
    let mut failed_keys: HashSet<K> = HashSet::new();
    for (i, (&k, &v)) in keys.iter().zip(vals).enumerate() {
        if not_stored[i] {
            failed_keys.insert(k);
            continue;
        }
        groups
            .entry(k)
            .or_insert_with(|| {
                order.push(k);
                Vec::new()
            })
            .push(v);
    }
    for k in failed_keys.iter().filter(|_| !untried) {
        // An existing key never needs a free slot.
        assert!(!o.map.contains_key(k), "{cx}: {op:?}: key {k:?} was present, yet reported as not stored");
    }

    let new = order.iter().filter(|k| !o.map.contains_key(k)).count() as u64;
    let stored = (keys.len() - failed.len()) as u64;
    let expected = InsertReport { inserted: new, existing: stored - new };
    assert_eq!(
        report, expected,
        "{cx}: {op:?} report for a batch of {} positions ({} not stored)",
        keys.len(),
        failed.len()
    );

    let mut open = Vec::new();
    for k in &order {
        let vs = &groups[k];
        let old = o.map.get(k).copied();
        match (op, old) {
            (Op::IfAbsent, Some(_)) => {}
            (Op::Apply(r), Some(old)) => {
                let v = vs.iter().fold(old, |a, &b| V::reduce_ref(r, a, b));
                o.map.insert(*k, v);
            }
            (Op::Apply(r), None) => {
                let v = vs[1..].iter().fold(vs[0], |a, &b| V::reduce_ref(r, a, b));
                o.map.insert(*k, v);
            }
            (Op::Assign | Op::IfAbsent, _) => {
                if vs.iter().all(|v| same(*v, vs[0])) {
                    o.map.insert(*k, vs[0]);
                } else {
                    open.push(*k);
                }
            }
        }
    }
    if op == Op::Apply(Reduce::Sum) && V::FLOAT {
        o.approx = true;
    }
    if !open.is_empty() {
        let got = t.find(&open).unwrap_or_else(|e| panic!("{cx}: find failed: {e}"));
        for (k, g) in open.iter().zip(got) {
            let vs = &groups[k];
            let g = g.unwrap_or_else(|| panic!("{cx}: {op:?} stored key {k:?}, but find misses it"));
            assert!(
                vs.iter().any(|v| same(*v, g)),
                "{cx}: {op:?}: key {k:?} holds {g:?}, which is none of the batch's values {vs:?}"
            );
            o.map.insert(*k, g);
        }
    }

    cx.count(keys.len() + open.len());
    // Keys reported not stored (at every position of the batch) must be
    // absent, unless stored before the call (the oracle still has them).
    let absent: Vec<K> = failed_keys.into_iter().filter(|k| !groups.contains_key(k) && !o.map.contains_key(k)).collect();
    if !absent.is_empty() {
        let found = t.contains(&absent).unwrap_or_else(|e| panic!("{cx}: contains failed: {e}"));
        for (k, f) in absent.iter().zip(found) {
            assert!(!f, "{cx}: {op:?}: key {k:?} was reported not stored, yet it is present");
        }
    }
    Ok(failed)
}

/// Erases a batch from both; the count must be the distinct keys present.
pub fn erase<K: Key, V: TestValue>(t: &mut HashTable<K, V>, o: &mut Oracle<K, V>, keys: &[K], cx: &Ctx) {
    let removed = t.erase(keys).unwrap_or_else(|e| panic!("{cx}: erase failed: {e}"));
    let mut expected = 0u64;
    for k in keys {
        expected += o.map.remove(k).is_some() as u64;
    }
    assert_eq!(removed, expected, "{cx}: erase of {} keys (duplicates count once)", keys.len());
    cx.count(keys.len());
}

/// `find`, `find_into`, `contains` and `contains_into` agree with the oracle on `keys`.
pub fn check_find<K: Key, V: TestValue>(t: &HashTable<K, V>, o: &Oracle<K, V>, keys: &[K], cx: &Ctx) {
    let got = t.find(keys).unwrap_or_else(|e| panic!("{cx}: find failed: {e}"));
    assert_eq!(got.len(), keys.len(), "{cx}: find returned the wrong number of results");
    let mut hits = 0u64;
    for (k, g) in keys.iter().zip(&got) {
        match (o.map.get(k), g) {
            (Some(e), Some(g)) => {
                assert!(o.matches(*e, *g), "{cx}: find({k:?}) = {g:?}, expected {e:?}");
                hits += 1;
            }
            (None, None) => {}
            (e, g) => panic!("{cx}: find({k:?}) = {g:?}, expected {e:?}"),
        }
    }
    let mut values = vec![V::from_bits(0); keys.len()];
    let mut found = vec![false; keys.len()];
    let n = t.find_into(keys, &mut values, &mut found).unwrap_or_else(|e| panic!("{cx}: find_into failed: {e}"));
    assert_eq!(n, hits, "{cx}: find_into count");
    for i in 0..keys.len() {
        assert_eq!(found[i], got[i].is_some(), "{cx}: find_into and find disagree on {:?}", keys[i]);
        let expected = got[i].unwrap_or(V::from_bits(0));
        assert!(same(values[i], expected), "{cx}: find_into({:?}) wrote {:?}, find said {:?}", keys[i], values[i], got[i]);
    }
    let c = t.contains(keys).unwrap_or_else(|e| panic!("{cx}: contains failed: {e}"));
    let mut c2 = vec![false; keys.len()];
    let n = t.contains_into(keys, &mut c2).unwrap_or_else(|e| panic!("{cx}: contains_into failed: {e}"));
    assert_eq!(n, hits, "{cx}: contains_into count");
    for i in 0..keys.len() {
        assert_eq!(c[i], got[i].is_some(), "{cx}: contains({:?}) disagrees with find", keys[i]);
        assert_eq!(c2[i], c[i], "{cx}: contains_into({:?}) disagrees with contains", keys[i]);
    }
    cx.count(4 * keys.len());
}

/// `export` returns each key once, exactly the oracle's pairs.
pub fn check_export<K: Key, V: TestValue>(t: &HashTable<K, V>, o: &Oracle<K, V>, cx: &Ctx) {
    let (keys, vals) = t.export().unwrap_or_else(|e| panic!("{cx}: export failed: {e}"));
    assert_eq!(keys.len(), vals.len(), "{cx}: export returned {} keys and {} values", keys.len(), vals.len());
    let mut got: Vec<(K, V)> = keys.into_iter().zip(vals).collect();
    got.sort_unstable_by_key(|p| p.0);
    if let Some(w) = got.windows(2).find(|w| w[0].0 == w[1].0) {
        panic!("{cx}: export lists key {:?} twice: {:?} and {:?}", w[0].0, w[0].1, w[1].1);
    }
    let expected = o.sorted();
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g.0, e.0, "{cx}: export has key {:?} where the oracle's next key is {:?}", g.0, e.0);
        assert!(o.matches(e.1, g.1), "{cx}: export has {:?} => {:?}, expected {:?}", g.0, g.1, e.1);
    }
    assert_eq!(got.len(), expected.len(), "{cx}: export has {} pairs, the oracle {}", got.len(), expected.len());
    cx.count(got.len());
}

/// How many of `keys` (distinct, in-slot, none stored) are beyond the free
/// slots of the table they go to: what a table whose probe reaches every
/// slot must refuse. A single table is one such table; a paged (sharded)
/// table routes each key to its page (shard), so a page that receives more
/// keys than it has free slots refuses the rest even while other pages have
/// room.
pub fn overflow<K: Key, V: Value>(t: &HashTable<K, V>, keys: &[K]) -> u64 {
    if let Some(s) = t.sharded() {
        let (slots, len) = (s.shard_slots(), s.shard_len());
        let mut n = vec![0u64; s.shards()];
        for k in keys {
            n[s.shard_of(*k)] += 1;
        }
        return (0..s.shards()).map(|i| n[i].saturating_sub(slots[i] - len[i])).sum();
    }
    match t.paged() {
        None => (keys.len() as u64).saturating_sub(t.capacity() - t.len()),
        Some(p) => {
            let (slots, len) = (p.page_slots(), p.page_len());
            let mut n = vec![0u64; p.pages()];
            for k in keys {
                n[p.page_of(*k)] += 1;
            }
            (0..p.pages()).map(|i| n[i].saturating_sub(slots[i] - len[i])).sum()
        }
    }
}

/// After a fault the table matches the oracle and still takes 500 new keys,
/// all stored, and matches it again.
pub fn takes_more_after_fault<K: Key, V: TestValue>(t: &mut HashTable<K, V>, o: &mut Oracle<K, V>, cx: &mut Ctx) {
    check_table(t, o, cx);
    let more = fresh_keys(&mut cx.rng, 500, o, &[]);
    let vals = num_values::<V>(&mut cx.rng, more.len());
    let failed = insert(t, o, Op::Assign, &more, &vals, cx);
    assert!(failed.is_empty(), "{cx}: {} refused after the fault", failed.len());
    check_table(t, o, cx);
}

/// The whole table equals the oracle: `len`, a lookup of every key, `export`.
pub fn check_table<K: Key, V: TestValue>(t: &HashTable<K, V>, o: &Oracle<K, V>, cx: &Ctx) {
    assert_eq!(t.len(), o.map.len() as u64, "{cx}: len");
    assert_eq!(t.is_empty(), o.map.is_empty(), "{cx}: is_empty");
    let keys: Vec<K> = o.map.keys().copied().collect();
    check_find(t, o, &keys, cx);
    check_export(t, o, cx);
    let st = t.stats().unwrap_or_else(|e| panic!("{cx}: stats failed: {e}"));
    assert_eq!((st.len, st.slots), (t.len(), t.capacity()), "{cx}: stats len and slots");
    let in_slots = keys.iter().filter(|k| !out_of_band(**k)).count() as u64;
    assert!(in_slots + st.tombstones <= st.slots, "{cx}: {in_slots} keys and {} tombstones in {} slots", st.tombstones, st.slots);
}

/// Expands to one `#[test]` per behaviour in module `$name`, running on
/// device `$dev` with placement scheme `$scheme`.
#[allow(unused_macros)] // not every test binary instantiates it
macro_rules! conformance_suite {
    ($name:ident, $dev:expr, $scheme:expr) => {
        conformance_suite!(@all $name, $crate::common::Target::new($dev, $scheme));
    };
    // Every table of every test split into pages with `$paging`.
    ($name:ident, $dev:expr, $scheme:expr, paged: $paging:expr) => {
        conformance_suite!(@all $name, $crate::common::Target::paged($dev, $scheme, $paging));
    };
    // Every table of every test spread over `$shards` shards on `$dev`.
    ($name:ident, $dev:expr, $scheme:expr, sharded: $shards:expr) => {
        conformance_suite!(@all $name, $crate::common::Target::sharded($dev, $scheme, $shards));
    };
    // wgpu tables kept to 32-bit atomics (the browser's path).
    ($name:ident, $dev:expr, $scheme:expr, wgpu_portable) => {
        conformance_suite!(@all $name, $crate::common::Target::wgpu_portable($dev, $scheme));
    };
    (@all $name:ident, $target:expr) => {
        conformance_suite!(@tests $name, $target;
            random_keys_at_load_factors,
            large_batches,
            large_batches_into_empty_tables,
            assign_duplicates_in_one_batch,
            if_absent_and_apply,
            skewed_apply,
            erase_churn,
            insert_erase_insert_same_keys,
            special_keys,
            one_key_repeated,
            sequential_and_low_bit_keys,
            growth_off_full_table,
            oversubscribed_batches,
            overfull_apply_every_key_twice,
            refill_after_erase_with_growth_off,
            fill_until_refused,
            growth_across_doublings,
            load_limit_with_out_of_band_keys,
            clear_reserve_rehash_and_single_key_calls,
            bad_input,
            determinism,
            tombstone_cleaning
        );
    };
    (@tests $name:ident, $dev:expr; $($test:ident),* $(,)?) => {
        mod $name {
            use super::*;
            $(
                #[test]
                fn $test() {
                    if let Some(dev) = $crate::common::usable($dev) {
                        $crate::common::suite::$test(dev);
                    }
                }
            )*
        }
    };
}
