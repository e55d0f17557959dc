//! The WebGPU table: gpuhash's wgpu backend on the browser's adapter,
//! through the backend's awaitable operations (`WgpuTable::*_async`, the
//! same code the native blocking calls run), each JS call returning a
//! Promise.

use std::cell::RefCell;
use std::rc::Rc;

use gpuhash::backend::wgpu::WgpuTable;
use gpuhash::backend::{Backend, Config, InsertMode};
use gpuhash::core::capacity::{grow_target, load_limit, slots_for_keys, DEFAULT_MAX_LOAD};
use gpuhash::core::hash::DEFAULT_SEED;
use gpuhash::{Device, Memory, RegionBuild, Scheme};
use js_sys::{Promise, Uint32Array, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::{js, key_count};

/// Bytes of a `u32 -> u32` slot.
const SLOT_BYTES: usize = 8;
/// The scheme of a table created without one.
const DEFAULT_SCHEME: Scheme = Scheme::Linear;
/// Grow-and-retry rounds for keys refused at the probe limit; each at least
/// doubles the table, so a handful always make room.
const RETRIES: usize = 16;

/// The plain-Rust WebGPU table under [`GpuTable`] (natively testable on any
/// wgpu adapter).
pub struct GpuCore {
    table: WgpuTable<u32, u32>,
    scheme: Scheme,
}

fn text(e: gpuhash::Error) -> String {
    e.to_string()
}

impl GpuCore {
    /// A table sized for `keys` keys on the default wgpu adapter (in a
    /// browser: `navigator.gpu`'s), of `scheme` (a name as the command line
    /// takes it: "linear", the default, "cuckoo", "two-level" or
    /// "slab-list"; another is refused with the reason).
    pub async fn create(keys: f64, scheme: Option<&str>) -> Result<GpuCore, String> {
        let keys = key_count(keys)?;
        let scheme = match scheme {
            None => DEFAULT_SCHEME,
            Some(name) => name.parse::<Scheme>().map_err(|e| format!("scheme \"{name}\": {e}"))?,
        };
        let slots = Self::round(scheme, slots_for_keys(keys, DEFAULT_MAX_LOAD))?;
        let config = Config {
            slots,
            max_probe_buckets: scheme.default_max_probe_buckets(SLOT_BYTES),
            seed: DEFAULT_SEED,
            scheme,
            memory: Memory::Device,
            // The region build is CUDA's; wgpu has none.
            region_build: RegionBuild::Auto,
            // A browser offers 32-bit atomics only: the portable kernels whatever this says.
            wgpu_portable: false,
        };
        let table = WgpuTable::new_async(Device::Wgpu, config).await.map_err(text)?;
        Ok(GpuCore { table, scheme })
    }

    fn round(scheme: Scheme, slots: u64) -> Result<u64, String> {
        scheme.round_slots(slots, SLOT_BYTES).ok_or_else(|| format!("{slots} slots is beyond any table"))
    }

    /// The placement scheme's name.
    pub fn scheme(&self) -> String {
        self.scheme.name()
    }

    /// The adapter: name and graphics backend (a browser may tell no name).
    pub fn adapter(&self) -> String {
        let a = self.table.adapter();
        let name = if a.name.is_empty() { "unnamed adapter" } else { &a.name };
        format!("{name} ({:?})", a.backend)
    }

    /// Keys stored.
    pub fn len(&self) -> u64 {
        self.table.len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots allocated.
    pub fn capacity(&self) -> u64 {
        self.table.slots()
    }

    /// Rebuilds so that `expected` live keys fit under the maximum load:
    /// at the same size (dropping tombstones) if they do, else grown.
    async fn make_room(&mut self, expected: u64) -> Result<(), String> {
        let slots = self.table.slots();
        let target = if expected <= load_limit(slots, DEFAULT_MAX_LOAD) {
            slots
        } else {
            grow_target(slots, expected, DEFAULT_MAX_LOAD)
        };
        self.table.rehash_async(Self::round(self.scheme, target)?).await.map_err(text)
    }

    /// Insert-or-assign; returns how many keys were new. The growth policy
    /// of the table API, kept small: before a batch that could pass the
    /// maximum load (live keys plus tombstones), rebuild; keys refused at
    /// the probe limit grow the table and are tried again.
    pub async fn insert(&mut self, keys: &[u32], values: &[u32]) -> Result<u64, String> {
        if keys.len() != values.len() {
            return Err(format!("insert: {} keys but {} values", keys.len(), values.len()));
        }
        let batch = keys.len() as u64;
        if self.table.used() + batch > load_limit(self.table.slots(), DEFAULT_MAX_LOAD) {
            self.make_room(self.table.len() + batch).await?;
        }
        let out = self.table.insert_async(keys, values, InsertMode::Assign).await.map_err(text)?;
        let mut inserted = out.inserted;
        let mut pending = out.failed;
        for _ in 0..RETRIES {
            if pending.is_empty() {
                return Ok(inserted);
            }
            let slots = self.table.slots();
            let grown = grow_target(slots, self.table.len() + pending.len() as u64, DEFAULT_MAX_LOAD);
            self.table.rehash_async(Self::round(self.scheme, grown)?).await.map_err(text)?;
            let k: Vec<u32> = pending.iter().map(|&i| keys[i]).collect();
            let v: Vec<u32> = pending.iter().map(|&i| values[i]).collect();
            let again = self.table.insert_async(&k, &v, InsertMode::Assign).await.map_err(text)?;
            inserted += again.inserted;
            pending = again.failed.iter().map(|&i| pending[i]).collect();
        }
        if pending.is_empty() {
            Ok(inserted)
        } else {
            Err(format!("insert: {} keys found no slot after {RETRIES} growths", pending.len()))
        }
    }

    /// Erases keys; returns how many were present.
    pub async fn erase(&mut self, keys: &[u32]) -> Result<u64, String> {
        self.table.erase_async(keys).await.map_err(text)
    }

    /// Looks keys up: (values, found flags as 1 or 0, hits).
    pub async fn find(&self, keys: &[u32]) -> Result<(Vec<u32>, Vec<u8>, u64), String> {
        let mut values = vec![0; keys.len()];
        let mut found = vec![false; keys.len()];
        let hits = self.table.find_async(keys, &mut values, &mut found).await.map_err(text)?;
        Ok((values, found.into_iter().map(u8::from).collect(), hits))
    }
}

/// A `u32 -> u32` table on the browser's WebGPU adapter. Every operation
/// returns a Promise; one call at a time (await each before the next, else
/// the next one rejects).
#[wasm_bindgen]
pub struct GpuTable {
    core: Rc<RefCell<GpuCore>>,
}

const BUSY: &str = "the table is busy with an earlier call: await it before the next";

fn reject(message: String) -> JsValue {
    js(message).into()
}

// The calls hold the table's borrow across their awaits on purpose: a call
// made before the previous one resolved finds it taken and rejects (BUSY),
// never running two operations on one table at once.
#[allow(clippy::await_holding_refcell_ref)]
#[wasm_bindgen]
impl GpuTable {
    /// `await GpuTable.create(keys, scheme)`: a table sized for `keys` keys
    /// (it grows past them), of placement `scheme` ("linear" if left out;
    /// "cuckoo", "two-level" or "slab-list"). Rejects if there is no
    /// WebGPU adapter, or the count or scheme is bad.
    pub async fn create(keys: f64, scheme: Option<String>) -> Result<GpuTable, JsError> {
        let core = GpuCore::create(keys, scheme.as_deref()).await.map_err(js)?;
        Ok(GpuTable { core: Rc::new(RefCell::new(core)) })
    }

    /// Inserts pairs (as `Table.insert`); resolves to how many keys were new.
    pub fn insert(&self, keys: Vec<u32>, values: Vec<u32>) -> Promise {
        let core = self.core.clone();
        future_to_promise(async move {
            let mut t = core.try_borrow_mut().map_err(|_| reject(BUSY.into()))?;
            let n = t.insert(&keys, &values).await.map_err(reject)?;
            Ok(JsValue::from_f64(n as f64))
        })
    }

    /// Erases keys; resolves to how many were present.
    pub fn erase(&self, keys: Vec<u32>) -> Promise {
        let core = self.core.clone();
        future_to_promise(async move {
            let mut t = core.try_borrow_mut().map_err(|_| reject(BUSY.into()))?;
            let n = t.erase(&keys).await.map_err(reject)?;
            Ok(JsValue::from_f64(n as f64))
        })
    }

    /// Looks keys up into `values` (0 where absent) and `found` (1 or 0),
    /// both as long as `keys`; resolves to how many were found.
    pub fn find(&self, keys: Vec<u32>, values: Uint32Array, found: Uint8Array) -> Promise {
        let core = self.core.clone();
        future_to_promise(async move {
            if values.length() as usize != keys.len() || found.length() as usize != keys.len() {
                return Err(reject(format!(
                    "find: {} keys but {} value outputs and {} found outputs",
                    keys.len(),
                    values.length(),
                    found.length()
                )));
            }
            let t = core.try_borrow().map_err(|_| reject(BUSY.into()))?;
            let (v, f, hits) = t.find(&keys).await.map_err(reject)?;
            values.copy_from(&v);
            found.copy_from(&f);
            Ok(JsValue::from_f64(hits as f64))
        })
    }

    /// Keys stored (throws while a call is in flight).
    pub fn size(&self) -> Result<f64, JsError> {
        Ok(self.core.try_borrow().map_err(|_| js(BUSY.into()))?.len() as f64)
    }

    /// The adapter the table runs on.
    pub fn adapter(&self) -> Result<String, JsError> {
        Ok(self.core.try_borrow().map_err(|_| js(BUSY.into()))?.adapter())
    }

    /// The table's placement scheme.
    pub fn scheme(&self) -> Result<String, JsError> {
        Ok(self.core.try_borrow().map_err(|_| js(BUSY.into()))?.scheme())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WebGPU table's own code (growth, retries, the async backend
    /// calls) on a native adapter, against a map, for every scheme the
    /// page may ask for; skipped without an adapter. Schemes wgpu lacks and
    /// unknown names are refused with a reason.
    #[test]
    fn agrees_with_a_map_on_a_native_adapter() {
        if let Err(why) = pollster::block_on(GpuCore::create(8.0, None)) {
            // CI sets GPUHASH_REQUIRE_WGPU=1 where lavapipe is installed, as
            // for the conformance suite: there a missing adapter is a failure.
            if std::env::var("GPUHASH_REQUIRE_WGPU").is_ok_and(|v| v == "1") {
                panic!("GPUHASH_REQUIRE_WGPU=1, but no wgpu adapter ({why})");
            }
            println!("skipped: {why}");
            return;
        }
        for bad in ["robin-hood", "no-such-scheme"] {
            let e = pollster::block_on(GpuCore::create(8.0, Some(bad))).err();
            assert!(e.as_ref().is_some_and(|e| !e.is_empty()), "scheme {bad}: {e:?}");
        }
        for scheme in [None, Some("cuckoo"), Some("two-level"), Some("slab-list")] {
            let t = pollster::block_on(GpuCore::create(8.0, scheme)).unwrap_or_else(|e| panic!("{scheme:?}: {e}"));
            assert_eq!(t.scheme(), scheme.unwrap_or("linear"));
            agrees_with_a_map(t);
        }
    }

    fn agrees_with_a_map(mut t: GpuCore) {
        let scheme = t.scheme();
        assert!(pollster::block_on(t.insert(&[1, 2], &[3])).is_err());
        let mut oracle = std::collections::HashMap::new();
        let mut x = 7u32;
        for round in 0..20u32 {
            let keys: Vec<u32> = (0..300)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x % 1000
                })
                .collect();
            let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(31) ^ round).collect();
            let new = keys.iter().zip(&values).filter(|&(k, v)| oracle.insert(*k, *v).is_none()).count();
            assert_eq!(pollster::block_on(t.insert(&keys, &values)).unwrap(), new as u64, "{scheme}: round {round}");
            let gone = keys[..100].iter().filter(|k| oracle.remove(k).is_some()).count();
            assert_eq!(pollster::block_on(t.erase(&keys[..100])).unwrap(), gone as u64, "{scheme}: round {round}");
        }
        let probe: Vec<u32> = (0..1000).chain([u32::MAX, u32::MAX - 1]).collect();
        let (v, f, hits) = pollster::block_on(t.find(&probe)).unwrap();
        for (i, k) in probe.iter().enumerate() {
            assert_eq!((f[i] == 1).then_some(v[i]), oracle.get(k).copied(), "{scheme}: key {k}");
        }
        assert_eq!(hits, oracle.len() as u64);
        assert_eq!(t.len(), oracle.len() as u64);
    }
}
