//! The routed lookups and erases of a paged table on CUDA with the batch
//! split by page on the device ([`Batcher`]): the host copies keys in and
//! results out once, on every core, instead of partitioning, gathering and
//! scattering the batch itself. The pages are visited, brought in, written
//! back and served in host memory exactly as by the host-routed operations
//! (`super::find` and the others), through the same [`SubTables`].

use crate::backend::cuda::batcher::{Batcher, Routed};
use crate::backend::cuda::CudaTable;
use crate::backend::Backend;
use crate::core::keys::{Key, Value};
use crate::{Error, Result};

use super::SubTables;

/// Where a page of a routed batch is worked on.
enum On<'a, K: Key, V: Value> {
    /// A resident device table: its range of the keys by page is on the device.
    Device(&'a mut CudaTable<K, V>),
    /// The page in host memory (no device memory for it): its keys, brought back.
    Host(&'a mut dyn Backend<K, V>, Vec<K>),
}

/// Runs `op` on each page the routed batch touches, in the visiting order,
/// with the page's range of the keys by page. `op` returns its count and
/// whether it changed the page; returns the counts' sum.
fn each_page<K: Key, V: Value, S: SubTables<K, V>>(
    b: &Batcher,
    s: &mut S,
    routed: &Routed<K>,
    mut op: impl FnMut(On<'_, K, V>, std::ops::Range<usize>) -> Result<(u64, bool)>,
) -> Result<u64> {
    let mut total = 0;
    for p in s.visit_order(routed.touched()) {
        let r = routed.range(p);
        total += s.with_sub(p, |t| {
            if t.as_any().is::<CudaTable<K, V>>() {
                let ct = t.as_any_mut().downcast_mut::<CudaTable<K, V>>().expect("checked above");
                op(On::Device(ct), r.clone())
            } else {
                let keys = b.download_keys(&routed.keys.slice(r.clone()))?;
                op(On::Host(t, keys), r.clone())
            }
        })?;
    }
    Ok(total)
}

/// Routed `find` with the batch split on the device.
pub(crate) fn find<K: Key, V: Value, S: SubTables<K, V>>(
    b: &Batcher,
    s: &mut S,
    keys: &[K],
    values: &mut [V],
    found: &mut [bool],
) -> Result<u64> {
    let wave = b.wave::<K, V>();
    let mut hits = 0;
    for ((k, v), f) in keys.chunks(wave).zip(values.chunks_mut(wave)).zip(found.chunks_mut(wave)) {
        hits += match find_wave(b, s, k, v, f) {
            // No device memory for the split: lookups change nothing, so
            // the wave is looked up again, split on the host.
            Err(Error::OutOfMemory { .. }) => super::find(s, k, v, f)?,
            r => r?,
        };
    }
    Ok(hits)
}

fn find_wave<K: Key, V: Value, S: SubTables<K, V>>(b: &Batcher, s: &mut S, k: &[K], v: &mut [V], f: &mut [bool]) -> Result<u64> {
    let routed = b.route::<K, V>(s.router(), k)?;
    let mut sv = b.alloc::<V>(k.len())?;
    let mut sf = b.alloc::<u8>(k.len())?;
    let hits = each_page(b, s, &routed, |on, r| match on {
            On::Device(t) => Ok((t.find_device(&routed.keys.slice(r.clone()), &mut sv.slice_mut(r.clone()), &mut sf.slice_mut(r))?, false)),
            On::Host(t, keys) => {
                let (mut hv, mut hf) = (vec![V::from_bits(0); keys.len()], vec![false; keys.len()]);
                let h = t.find(&keys, &mut hv, &mut hf)?;
                b.upload_into(&hv, &mut sv.slice_mut(r.clone()))?;
                let flags: Vec<u8> = hf.iter().map(|&x| x as u8).collect();
                b.upload_into(&flags, &mut sf.slice_mut(r))?;
                Ok((h, false))
            }
        })?;
    b.unpermute(&routed, Some((&sv, v)), (&sf, f))?;
    Ok(hits)
}

/// Routed `contains` with the batch split on the device.
pub(crate) fn contains<K: Key, V: Value, S: SubTables<K, V>>(b: &Batcher, s: &mut S, keys: &[K], found: &mut [bool]) -> Result<u64> {
    let wave = b.wave::<K, V>();
    let mut hits = 0;
    for (k, f) in keys.chunks(wave).zip(found.chunks_mut(wave)) {
        hits += match contains_wave(b, s, k, f) {
            Err(Error::OutOfMemory { .. }) => super::contains(s, k, f)?,
            r => r?,
        };
    }
    Ok(hits)
}

fn contains_wave<K: Key, V: Value, S: SubTables<K, V>>(b: &Batcher, s: &mut S, k: &[K], f: &mut [bool]) -> Result<u64> {
    let routed = b.route::<K, V>(s.router(), k)?;
    let mut sf = b.alloc::<u8>(k.len())?;
    let hits = each_page(b, s, &routed, |on, r| match on {
            On::Device(t) => Ok((t.contains_device(&routed.keys.slice(r.clone()), &mut sf.slice_mut(r))?, false)),
            On::Host(t, keys) => {
                let mut hf = vec![false; keys.len()];
                let h = t.contains(&keys, &mut hf)?;
                let flags: Vec<u8> = hf.iter().map(|&x| x as u8).collect();
                b.upload_into(&flags, &mut sf.slice_mut(r))?;
                Ok((h, false))
            }
        })?;
    b.unpermute::<K, V>(&routed, None, (&sf, f))?;
    Ok(hits)
}

/// Routed `erase` with the batch split on the device: the keys removed.
pub(crate) fn erase<K: Key, V: Value, S: SubTables<K, V>>(b: &Batcher, s: &mut S, keys: &[K]) -> Result<u64> {
    let wave = b.wave::<K, V>();
    let mut removed = 0;
    for k in keys.chunks(wave) {
        let routed = match b.route::<K, V>(s.router(), k) {
            // No device memory for the split (nothing erased yet): split
            // this wave on the host.
            Err(Error::OutOfMemory { .. }) => {
                removed += super::erase(s, k)?;
                continue;
            }
            r => r?,
        };
        removed += each_page(b, s, &routed, |on, r| {
            let n = match on {
                On::Device(t) => t.erase_device(&routed.keys.slice(r))?,
                On::Host(t, keys) => t.erase(&keys)?,
            };
            Ok((n, n > 0))
        })?;
    }
    Ok(removed)
}
