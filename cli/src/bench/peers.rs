//! CPU peers on the same workloads: `std::collections::HashMap` and
//! `hashbrown::HashMap` on one thread, `DashMap` on all cores through rayon.
//! Each uses its crate's default hasher, as a user would.

use std::hint::black_box;
use std::time::Instant;

use dashmap::DashMap;
use gpuhash::{Reduce, Value};
use rayon::prelude::*;

use super::grid::{Case, Op, Sample, Target};
use super::keys::{apply_distinct, GenKey, Workload};
use super::BenchError;

/// Scheme labels of the peers, in the order they run.
pub(crate) const NAMES: &[&str] = &["std", "hashbrown", "dashmap"];

/// Peers grow instead of rejecting keys, so loads above 1.0 mean nothing to
/// them; they keep no tombstones, so the cleaning ops neither; they have no
/// device budget to oversubscribe, so paged cases neither.
pub(crate) fn supports(case: &Case) -> bool {
    case.load <= 1.0 && !case.op.cleans() && case.paging.is_none()
}

/// One instance of every peer.
pub(crate) fn all<K: GenKey, V: Value>() -> Vec<Box<dyn Target<K, V>>> {
    vec![
        Box::new(SerialPeer::<std::collections::HashMap<K, V>, K, V>::new(NAMES[0])),
        Box::new(SerialPeer::<hashbrown::HashMap<K, V>, K, V>::new(NAMES[1])),
        Box::new(DashPeer::<K, V>::new(NAMES[2])),
    ]
}

/// Entries a peer map is pre-sized for: everything the case will store, so
/// that, like the gpuhash table, it never grows inside the timed region.
fn capacity_for<K, V>(case: &Case, w: &Workload<K, V>) -> usize {
    match case.op {
        Op::ApplySum | Op::ApplyZipf | Op::ApplyHot => w.prefill.len() + apply_distinct(case) as usize,
        _ => w.prefill.len() + w.keys.len(),
    }
}

/// The single-threaded maps, behind one interface.
trait SerialMap<K, V> {
    fn with_capacity(n: usize) -> Self;
    fn put(&mut self, k: K, v: V);
    fn put_if_absent(&mut self, k: K, v: V);
    fn add(&mut self, k: K, v: V);
    fn lookup(&self, k: &K) -> Option<V>;
    fn has(&self, k: &K) -> bool;
    fn delete(&mut self, k: &K) -> bool;
}

macro_rules! serial_map {
    ($map:ty) => {
        impl<K: GenKey, V: Value> SerialMap<K, V> for $map {
            fn with_capacity(n: usize) -> Self {
                <$map>::with_capacity_and_hasher(n, Default::default())
            }
            fn put(&mut self, k: K, v: V) {
                self.insert(k, v);
            }
            fn put_if_absent(&mut self, k: K, v: V) {
                self.entry(k).or_insert(v);
            }
            fn add(&mut self, k: K, v: V) {
                self.entry(k).and_modify(|x| *x = V::reduce(Reduce::Sum, *x, v)).or_insert(v);
            }
            fn lookup(&self, k: &K) -> Option<V> {
                self.get(k).copied()
            }
            fn has(&self, k: &K) -> bool {
                self.contains_key(k)
            }
            fn delete(&mut self, k: &K) -> bool {
                self.remove(k).is_some()
            }
        }
    };
}
serial_map!(std::collections::HashMap<K, V>);
serial_map!(hashbrown::HashMap<K, V>);

/// Lookups into caller-provided outputs, as `HashTable::find_into` does.
fn find_serial<K, V: Copy, M: SerialMap<K, V>>(m: &M, keys: &[K], vals: &mut [V], found: &mut [bool]) -> u64 {
    let mut hits = 0;
    for ((k, v), f) in keys.iter().zip(vals).zip(found) {
        match m.lookup(k) {
            Some(x) => {
                *v = x;
                *f = true;
                hits += 1;
            }
            None => *f = false,
        }
    }
    hits
}

/// A single-threaded map.
struct SerialPeer<M, K, V> {
    name: &'static str,
    map: Option<M>,
    vals: Vec<V>,
    found: Vec<bool>,
    _k: std::marker::PhantomData<K>,
}

impl<M, K, V> SerialPeer<M, K, V> {
    fn new(name: &'static str) -> Self {
        SerialPeer { name, map: None, vals: Vec::new(), found: Vec::new(), _k: std::marker::PhantomData }
    }
}

impl<M: SerialMap<K, V>, K: GenKey, V: Value> Target<K, V> for SerialPeer<M, K, V> {
    fn device(&self) -> String {
        "cpu".into()
    }
    fn scheme(&self) -> String {
        self.name.into()
    }
    fn supports(&self, case: &Case) -> bool {
        supports(case)
    }

    fn prepare(&mut self, case: &Case, w: &Workload<K, V>) -> Result<(), BenchError> {
        let mut m = M::with_capacity(capacity_for(case, w));
        for (k, v) in w.prefill.iter().zip(&w.prefill_values) {
            m.put(*k, *v);
        }
        self.map = Some(m);
        let outputs = if case.op == Op::Mixed { w.find_keys.len() } else { w.keys.len() };
        self.vals = vec![V::from_bits(1); outputs];
        self.found = vec![true; outputs];
        Ok(())
    }

    fn run(&mut self, case: &Case, w: &Workload<K, V>) -> Result<Sample, BenchError> {
        let m = self.map.as_mut().expect("prepare() runs before run()");
        let (vals, found) = (&mut self.vals, &mut self.found);
        let start = Instant::now();
        let pairs = w.keys.iter().zip(&w.values);
        let hits: u64 = match case.op {
            // The cleaning ops are not run on peers (see `supports`).
            Op::Insert | Op::CleanReinsert | Op::RehashReinsert => {
                pairs.for_each(|(k, v)| m.put(*k, *v));
                0
            }
            Op::InsertIfAbsent => {
                pairs.for_each(|(k, v)| m.put_if_absent(*k, *v));
                0
            }
            Op::ApplySum | Op::ApplyZipf | Op::ApplyHot => {
                pairs.for_each(|(k, v)| m.add(*k, *v));
                0
            }
            Op::FindHit | Op::FindMiss50 | Op::FindMiss => find_serial(m, &w.keys, vals, found),
            Op::Contains => {
                let mut hits = 0;
                for (k, f) in w.keys.iter().zip(found.iter_mut()) {
                    *f = m.has(k);
                    hits += *f as u64;
                }
                hits
            }
            Op::Erase => w.keys.iter().filter(|k| m.delete(k)).count() as u64,
            Op::Mixed => {
                let mut hits = 0;
                for [ins, era, f] in w.round_ranges() {
                    for (k, v) in w.keys[ins.clone()].iter().zip(&w.values[ins]) {
                        m.put(*k, *v);
                    }
                    hits += w.erase_keys[era].iter().filter(|k| m.delete(k)).count() as u64;
                    hits += find_serial(m, &w.find_keys[f.clone()], &mut vals[f.clone()], &mut found[f]);
                }
                hits
            }
        };
        let ms = start.elapsed().as_secs_f64() * 1e3;
        black_box(hits);
        Ok(Sample { ms, rejected: 0, traffic: None })
    }

    fn reset(&mut self) {
        self.map = None;
        self.vals = Vec::new();
        self.found = Vec::new();
    }
}

/// Keys per rayon task: amortises scheduling over cheap per-key work.
const PAR_MIN: usize = 1024;

/// `DashMap` driven by all cores.
struct DashPeer<K: GenKey, V> {
    name: &'static str,
    map: Option<DashMap<K, V>>,
    vals: Vec<V>,
    found: Vec<bool>,
}

impl<K: GenKey, V> DashPeer<K, V> {
    fn new(name: &'static str) -> Self {
        DashPeer { name, map: None, vals: Vec::new(), found: Vec::new() }
    }
}

fn par_insert<K: GenKey, V: Value>(m: &DashMap<K, V>, keys: &[K], values: &[V], op: Op) {
    let pairs = keys.par_iter().zip(values.par_iter()).with_min_len(PAR_MIN);
    match op {
        Op::InsertIfAbsent => pairs.for_each(|(k, v)| {
            m.entry(*k).or_insert(*v);
        }),
        Op::ApplySum | Op::ApplyZipf | Op::ApplyHot => pairs.for_each(|(k, v)| {
            m.entry(*k).and_modify(|x| *x = V::reduce(Reduce::Sum, *x, *v)).or_insert(*v);
        }),
        _ => pairs.for_each(|(k, v)| {
            m.insert(*k, *v);
        }),
    }
}

fn par_find<K: GenKey, V: Value>(m: &DashMap<K, V>, keys: &[K], vals: &mut [V], found: &mut [bool]) -> u64 {
    keys.par_iter()
        .zip(vals.par_iter_mut())
        .zip(found.par_iter_mut())
        .with_min_len(PAR_MIN)
        .map(|((k, v), f)| match m.get(k) {
            Some(x) => {
                *v = *x;
                *f = true;
                1
            }
            None => {
                *f = false;
                0
            }
        })
        .sum()
}

fn par_erase<K: GenKey, V: Value>(m: &DashMap<K, V>, keys: &[K]) -> u64 {
    keys.par_iter().with_min_len(PAR_MIN).filter(|k| m.remove(k).is_some()).count() as u64
}

impl<K: GenKey, V: Value> Target<K, V> for DashPeer<K, V> {
    fn device(&self) -> String {
        "cpu".into()
    }
    fn scheme(&self) -> String {
        self.name.into()
    }
    fn supports(&self, case: &Case) -> bool {
        supports(case)
    }

    fn prepare(&mut self, case: &Case, w: &Workload<K, V>) -> Result<(), BenchError> {
        let m = DashMap::with_capacity(capacity_for(case, w));
        par_insert(&m, &w.prefill, &w.prefill_values, Op::Insert);
        self.map = Some(m);
        let outputs = if case.op == Op::Mixed { w.find_keys.len() } else { w.keys.len() };
        self.vals = vec![V::from_bits(1); outputs];
        self.found = vec![true; outputs];
        Ok(())
    }

    fn run(&mut self, case: &Case, w: &Workload<K, V>) -> Result<Sample, BenchError> {
        let m = self.map.as_ref().expect("prepare() runs before run()");
        let (vals, found) = (&mut self.vals, &mut self.found);
        let start = Instant::now();
        let hits = match case.op {
            // The cleaning ops are not run on peers (see `supports`).
            Op::Insert | Op::InsertIfAbsent | Op::ApplySum | Op::ApplyZipf | Op::ApplyHot | Op::CleanReinsert | Op::RehashReinsert => {
                par_insert(m, &w.keys, &w.values, case.op);
                0
            }
            Op::FindHit | Op::FindMiss50 | Op::FindMiss => par_find(m, &w.keys, vals, found),
            Op::Contains => w
                .keys
                .par_iter()
                .zip(found.par_iter_mut())
                .with_min_len(PAR_MIN)
                .map(|(k, f)| {
                    *f = m.contains_key(k);
                    *f as u64
                })
                .sum(),
            Op::Erase => par_erase(m, &w.keys),
            Op::Mixed => {
                let mut hits = 0;
                for [ins, era, f] in w.round_ranges() {
                    par_insert(m, &w.keys[ins.clone()], &w.values[ins], Op::Insert);
                    hits += par_erase(m, &w.erase_keys[era]);
                    hits += par_find(m, &w.find_keys[f.clone()], &mut vals[f.clone()], &mut found[f]);
                }
                hits
            }
        };
        let ms = start.elapsed().as_secs_f64() * 1e3;
        black_box(hits);
        Ok(Sample { ms, rejected: 0, traffic: None })
    }

    fn reset(&mut self) {
        self.map = None;
        self.vals = Vec::new();
        self.found = Vec::new();
    }
}
