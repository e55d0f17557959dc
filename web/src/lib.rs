//! gpuhash in the browser: `u32 -> u32` tables exposed to JavaScript
//! through wasm-bindgen, for the page in `web/www/` (README, "In the
//! browser").
//!
//! * [`Table`]: gpuhash's CPU backend compiled to `wasm32-unknown-unknown`,
//!   the same slot layout, hash and probe order as on a native CPU, on the
//!   one thread a page has (rayon runs its work on the calling thread
//!   there). Synchronous.
//! * [`GpuTable`]: gpuhash's wgpu backend on the browser's WebGPU adapter.
//!   A page cannot block on the GPU, so every call returns a Promise.
//!
//! Every bad argument from JavaScript comes back as a thrown `Error` (or a
//! rejected Promise) with a message, never a panic, which would abort the
//! module.
//!
//! ```js
//! import init, { Table } from "./pkg/gpuhash_web.js";
//! await init();
//! const t = new Table(1000, "cpu");
//! t.insert(new Uint32Array([1, 2]), new Uint32Array([10, 20]));
//! const values = new Uint32Array(2), found = new Uint8Array(2);
//! t.find(new Uint32Array([2, 3]), values, found); // values[0] == 20, found = [1, 0]
//!
//! const g = await GpuTable.create(1000); // rejects without a WebGPU adapter
//! await g.insert(new Uint32Array([1, 2]), new Uint32Array([10, 20]));
//! await g.find(new Uint32Array([2, 3]), values, found);
//! ```

use gpuhash::{Device, HashTable};
use wasm_bindgen::prelude::*;

mod gpu;
pub use gpu::{GpuCore, GpuTable};

/// Most keys a table may be sized for. wasm32 addresses 4 GiB; 2^28 keys at
/// the default load need about 2.3 GiB of 8-byte slots, leaving room for the
/// copy a rehash makes of the old slots.
pub const MAX_KEYS: u64 = 1 << 28;

/// A hash table of `u32` keys and `u32` values, for JavaScript.
#[wasm_bindgen]
pub struct Table {
    inner: HashTable<u32, u32>,
    /// Reused for the `found` flags of [`Table::find`] (JS passes bytes).
    found: Vec<bool>,
}

/// The device names the page may pass.
fn device(name: &str) -> Result<Device, String> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "webgpu" | "wgpu" => {
            Err(format!("device \"{name}\": Table runs on the CPU; for WebGPU use `await GpuTable.create(keys)`"))
        }
        other => Err(format!("unknown device \"{other}\" (expected \"cpu\")")),
    }
}

/// A key count from JavaScript: a whole number in `1..=MAX_KEYS`.
fn key_count(keys: f64) -> Result<u64, String> {
    if !(keys.is_finite() && keys.fract() == 0.0 && keys >= 1.0 && keys <= MAX_KEYS as f64) {
        return Err(format!("capacity must be a whole number of keys from 1 to {MAX_KEYS}, got {keys}"));
    }
    Ok(keys as u64)
}

/// The plain-Rust side of every method, so native tests reach it (a
/// `JsError` can only be made inside a wasm module).
impl Table {
    /// A table sized for `keys` keys at the default load factor, growing
    /// past it when needed.
    pub fn create(keys: f64, device_name: &str) -> Result<Table, String> {
        let keys = key_count(keys)?;
        let inner = HashTable::<u32, u32>::builder()
            .device(device(device_name)?)
            .capacity_for(keys)
            .build::<u32, u32>()
            .map_err(|e| e.to_string())?;
        Ok(Table { inner, found: Vec::new() })
    }

    /// Insert-or-assign; returns how many keys were new.
    pub fn try_insert(&mut self, keys: &[u32], values: &[u32]) -> Result<u64, String> {
        self.inner.insert_or_assign(keys, values).map(|r| r.inserted).map_err(|e| e.to_string())
    }

    /// Erases keys; returns how many were present.
    pub fn try_erase(&mut self, keys: &[u32]) -> Result<u64, String> {
        self.inner.erase(keys).map_err(|e| e.to_string())
    }

    /// Looks keys up: each value (0 when absent) into `values`, 1 or 0 into
    /// `found`; returns how many were found.
    pub fn try_find(&mut self, keys: &[u32], values: &mut [u32], found: &mut [u8]) -> Result<u64, String> {
        if found.len() != keys.len() {
            return Err(format!("find: {} keys but {} found outputs", keys.len(), found.len()));
        }
        self.found.clear();
        self.found.resize(keys.len(), false);
        let hits = self.inner.find_into(keys, values, &mut self.found).map_err(|e| e.to_string())?;
        for (out, &f) in found.iter_mut().zip(&self.found) {
            *out = f as u8;
        }
        Ok(hits)
    }
}

fn js(message: String) -> JsError {
    JsError::new(&message)
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}

/// Runs when the module is instantiated: a panic (a bug; bad input is an
/// Error, never a panic) still aborts the module, but its message reaches the
/// console instead of a bare "unreachable".
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen(start)]
fn start() {
    std::panic::set_hook(Box::new(|info| console_error(&format!("gpuhash-web panicked: {info}"))));
}

#[wasm_bindgen]
impl Table {
    /// `new Table(keys, device)`: a table sized for `keys` keys (it grows
    /// past them) on `device`, `"cpu"` for now. Throws on a bad count or
    /// device.
    #[wasm_bindgen(constructor)]
    pub fn new(keys: f64, device: &str) -> Result<Table, JsError> {
        Table::create(keys, device).map_err(js)
    }

    /// Inserts pairs (a present key gets the new value; a key repeated in
    /// the batch gets one of its values, which one is unspecified); returns
    /// how many keys were new. Throws if the arrays differ in length.
    pub fn insert(&mut self, keys: &[u32], values: &[u32]) -> Result<f64, JsError> {
        self.try_insert(keys, values).map(|n| n as f64).map_err(js)
    }

    /// Erases keys; returns how many were present (a repeated key counts once).
    pub fn erase(&mut self, keys: &[u32]) -> Result<f64, JsError> {
        self.try_erase(keys).map(|n| n as f64).map_err(js)
    }

    /// Looks keys up into `values` (a `Uint32Array`, 0 where absent) and
    /// `found` (a `Uint8Array` of 1 and 0), both as long as `keys`; returns
    /// how many were found. Throws if a length differs.
    pub fn find(&mut self, keys: &[u32], values: &mut [u32], found: &mut [u8]) -> Result<f64, JsError> {
        self.try_find(keys, values, found).map(|n| n as f64).map_err(js)
    }

    /// Keys stored.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        self.inner.len() as f64
    }

    /// Slots allocated.
    #[wasm_bindgen(getter)]
    pub fn capacity(&self) -> f64 {
        self.inner.capacity() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_errors() {
        for keys in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY, (MAX_KEYS + 1) as f64] {
            assert!(Table::create(keys, "cpu").is_err(), "{keys}");
        }
        for name in ["", "gpu", "cuda", "webgpu"] {
            let e = Table::create(10.0, name).err().expect(name);
            assert!(e.contains(name), "{e}");
        }
        let mut t = Table::create(10.0, "cpu").unwrap();
        assert!(t.try_insert(&[1, 2], &[1]).is_err());
        let (mut v, mut f) = (vec![0; 2], vec![0; 1]);
        assert!(t.try_find(&[1, 2], &mut v, &mut f).is_err());
        let (mut v, mut f) = (vec![0; 1], vec![0; 2]);
        assert!(t.try_find(&[1, 2], &mut v, &mut f).is_err());
        // Nothing was stored by the refused calls.
        assert_eq!(t.inner.len(), 0);
    }

    #[test]
    fn agrees_with_a_map() {
        let mut t = Table::create(4.0, "cpu").unwrap();
        let mut oracle = std::collections::HashMap::new();
        let mut x = 1u32;
        for round in 0..50u32 {
            let keys: Vec<u32> = (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x % 200
                })
                .collect();
            let values: Vec<u32> = keys.iter().map(|k| k ^ round).collect();
            let new = keys.iter().zip(&values).filter(|&(k, v)| oracle.insert(*k, *v).is_none()).count();
            assert_eq!(t.try_insert(&keys, &values).unwrap(), new as u64);
            let gone = keys[..20].iter().filter(|k| oracle.remove(k).is_some()).count();
            assert_eq!(t.try_erase(&keys[..20]).unwrap(), gone as u64);
            let probe: Vec<u32> = (0..200).collect();
            let (mut v, mut f) = (vec![0; 200], vec![0; 200]);
            t.try_find(&probe, &mut v, &mut f).unwrap();
            for k in probe {
                let got = (f[k as usize] == 1).then_some(v[k as usize]);
                assert_eq!(got, oracle.get(&k).copied(), "key {k} after round {round}");
            }
        }
        assert_eq!(t.inner.len(), oracle.len() as u64);
    }
}
