//! The routed operations of a paged table on CUDA with the batch split by
//! page on the device ([`Batcher`]): the host copies keys (and values) in
//! and results out once, on every core, instead of partitioning, gathering
//! and scattering the batch itself. The pages are visited, brought in,
//! written back and served in host memory exactly as by the host-routed
//! operations (`super::find` and the others), through the same
//! [`SubTables`]; inserts grow each page alone through the same growth
//! loop, fed from device memory.
//!
//! A call runs in waves ([`Batcher::sizes`]); each wave's pages are worked
//! on in groups whose keys fit the routing buffers, in the visiting order
//! (resident pages first), so each page is visited once per wave.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaSlice;
use rayon::prelude::*;

use crate::backend::cuda::batcher::{Batcher, Carry, Routed, Wave};
use crate::backend::cuda::paging::HostPage;
use crate::backend::cuda::{CudaTable, DeviceBatch};
use crate::backend::{Backend, InsertMode};
use crate::core::keys::{Key, Value};
use crate::growth::Policy;
use crate::table::InsertReport;
use crate::{Error, Result};

use super::{page_groups, Access, Parts, SubOutcome, SubTables};

/// Where a page of a routed group is worked on.
enum On<'a, K: Key, V: Value> {
    /// A resident device table: its range of the keys by page is on the device.
    Device(&'a mut CudaTable<K, V>),
    /// The page in host memory (too sparse to bring in, or no device
    /// memory for it): its keys (and values), brought back.
    Host(&'a mut dyn Backend<K, V>, Vec<K>, Vec<V>),
    /// A lookup's page in host memory, which the GPU reads where it lies.
    Mapped(&'a HostPage<K, V>),
}

/// The buffers of one wave: the wave on the device, its group buffers, and
/// what the operation keeps per group (`T`).
struct Loaded<K: Key, V: Value, T> {
    wave: Wave<K, V>,
    routed: Routed<K, V>,
    groups: Vec<Vec<usize>>,
    extra: T,
    access: Access,
}

/// Uploads a wave and allocates everything it needs (`extra(keys per
/// group)` allocates the operation's own buffers), before any page is
/// touched: a wave that finds no device memory has changed nothing.
fn load<K: Key, V: Value, S: SubTables<K, V>, T>(
    b: &Batcher,
    s: &mut S,
    keys: &[K],
    values: Option<&[V]>,
    carry: Carry,
    extra: impl FnOnce(usize) -> Result<T>,
) -> Result<Loaded<K, V, T>> {
    let wave = b.load(s.router(), keys, values)?;
    let (_, cap) = b.sizes::<K, V>(keys.len(), carry);
    let touched: Vec<usize> = (0..wave.counts.len()).filter(|&p| wave.counts[p] > 0).collect();
    let access = if carry == Carry::Values || carry == Carry::Keys { Access::Write } else { Access::ReadOnDevice };
    let order = s.visit_sized(touched, &|p| wave.counts[p], access);
    let groups = page_groups(&order, &wave.counts, cap);
    let largest = groups.iter().map(|g| g.iter().map(|&p| wave.counts[p]).sum::<usize>()).max().unwrap_or(0);
    let routed = b.group_buffers(&wave, largest)?;
    let extra = extra(largest)?;
    Ok(Loaded { wave, routed, groups, extra, access })
}

/// A page a lookup reads on the host beside the GPU's work
/// ([`SubTables::lend`]): the page and its range of the keys by page.
struct Lent<K: Key, V: Value> {
    table: Arc<dyn Backend<K, V>>,
    range: Range<usize>,
}

/// Runs `op` on each page of each group of `l`, in the visiting order,
/// with the page's range of the keys by page; `after(group)` runs once a
/// group's pages are done (results back to wave order). `op` returns its
/// result and whether it changed the page.
///
/// Lookups only: of the pages the table can lend ([`SubTables::lendable`]:
/// those not resident), the host takes those the cost estimate gives it
/// ([`SubTables::device_cost`] against its keys, at [`Batcher::rates`]);
/// those are not visited: `aside(pages, keys by page, span)` brings their
/// keys (`span` of the keys by page, which holds their ranges) to the host
/// and looks them up there, on a thread of its own, while the GPU works on
/// the group's other pages; `settle` then takes its result and the span,
/// before `after`. Both sides are timed, to tune the rates.
#[allow(clippy::too_many_arguments)] // the three stages of a page's work, and the lookups' two beside it
fn each_page<K: Key, V: Value, S: SubTables<K, V>, T, R, A: Send>(
    b: &Batcher,
    s: &mut S,
    l: &mut Loaded<K, V, T>,
    mut op: impl FnMut(On<'_, K, V>, &Routed<K, V>, &mut T, Range<usize>) -> Result<(R, bool)>,
    aside: impl Fn(&[Lent<K, V>], &CudaSlice<K>, Range<usize>) -> Result<A> + Sync,
    mut settle: impl FnMut(A, Range<usize>, &mut T) -> Result<()>,
    mut after: impl FnMut(&Routed<K, V>, &mut T) -> Result<()>,
    mut fold: impl FnMut(usize, R),
) -> Result<()> {
    let groups = std::mem::take(&mut l.groups);
    let read = l.access == Access::ReadOnDevice;
    for group in &groups {
        let order = s.visit_group(group.clone(), &|p| l.wave.counts[p], l.access);
        let counts = &l.wave.counts;
        // The host takes the pages that save the GPU the most time for its
        // own (the GPU pays a page's bytes for one it brings in, however
        // few its keys), while that ends the group sooner; the GPU keeps
        // the rest, in the visiting order (which the prefetch follows).
        let (host_rate, device_rate) = b.rates();
        let cost: Vec<u64> = order.iter().map(|&p| s.device_cost(p, counts[p])).collect();
        let mut device_bytes = cost.iter().fold(0u64, |a, &c| a.saturating_add(c));
        let device_s = |bytes: u64| bytes as f64 * device_rate;
        let mut host_s = 0.0;
        let mut shared: Vec<(usize, u64)> =
            order.iter().zip(&cost).filter(|&(&p, _)| read && counts[p] > 0 && s.lendable(p)).map(|(&p, &c)| (p, c)).collect();
        shared.sort_by(|x, y| (y.1 as f64 / counts[y.0] as f64).total_cmp(&(x.1 as f64 / counts[x.0] as f64)));
        let mut host = Vec::new();
        for (p, c) in shared {
            let (h, rest) = (counts[p] as f64 * host_rate, device_bytes.saturating_sub(c));
            if (host_s + h).max(device_s(rest)) >= host_s.max(device_s(device_bytes)) {
                continue;
            }
            if let Some(table) = s.lend(p) {
                host_s += h;
                device_bytes = rest;
                host.push((p, table));
            }
        }
        let mut lent_page = vec![false; counts.len()];
        for (p, _) in &host {
            lent_page[*p] = true;
        }
        let visit: Vec<usize> = order.into_iter().filter(|&p| !lent_page[p]).collect();
        // Routed with the host's pages last, so their keys come down, and
        // their results go up, in one copy each.
        let layout: Vec<usize> = visit.iter().copied().chain(host.iter().map(|(p, _)| *p)).collect();
        b.route(&l.wave, &layout, &mut l.routed)?;
        let lent: Vec<Lent<K, V>> = host.into_iter().map(|(p, table)| Lent { table, range: l.routed.range(p) }).collect();
        // Routed last and in order, the host's pages' ranges are adjacent.
        let span = match (lent.first(), lent.last()) {
            (Some(a), Some(z)) => a.range.start..z.range.end,
            _ => 0..0,
        };
        let (aside, lent_ref, routed_keys, lent_span) = (&aside, &lent, &l.routed.keys, span.clone());
        let beside = std::thread::scope(|scope| -> Result<(Option<(A, f64)>, f64)> {
            let task = (!lent_ref.is_empty()).then(|| {
                scope.spawn(move || {
                    let start = Instant::now();
                    aside(lent_ref, routed_keys, lent_span).map(|a| (a, start.elapsed().as_secs_f64()))
                })
            });
            let start = Instant::now();
            let mut run = || -> Result<()> {
                for &p in &visit {
                    let r = l.routed.range(p);
                    let (routed, extra) = (&l.routed, &mut l.extra);
                    let out = s.with_sub(p, |t| {
                        if t.as_any().is::<CudaTable<K, V>>() {
                            let ct = t.as_any_mut().downcast_mut::<CudaTable<K, V>>().expect("checked above");
                            op(On::Device(ct), routed, extra, r.clone())
                        } else if let Some(hp) = t.as_any().downcast_ref::<HostPage<K, V>>().filter(|hp| read && hp.mapped()) {
                            op(On::Mapped(hp), routed, extra, r.clone())
                        } else {
                            let keys = b.download(&routed.keys.slice(r.clone()))?;
                            let values = match &routed.values {
                                Some(v) => b.download(&v.slice(r.clone()))?,
                                None => Vec::new(),
                            };
                            op(On::Host(t, keys, values), routed, extra, r.clone())
                        }
                    })?;
                    fold(p, out);
                }
                Ok(())
            };
            // A lookup's kernels run behind their launches: the GPU's
            // time, which tunes the split, lasts until they are done.
            let done = run().and_then(|()| if read { b.wait_all() } else { Ok(()) });
            let device = start.elapsed().as_secs_f64();
            // The host's lookups are joined whatever the GPU's work did.
            let beside = task.map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).transpose();
            done?;
            Ok((beside?, device))
        })?;
        let host_keys = span.len();
        let (beside, device) = beside;
        // Rates are learnt from groups the two sides shared: a group the
        // GPU had alone may be all resident pages whose hot keys hit in
        // its cache, ten times faster a byte than a shared group's pages.
        if read && host_keys > 0 {
            b.measured(host_keys, beside.as_ref().map_or(0.0, |x| x.1), device_bytes, device);
        }
        if let Some((a, _)) = beside {
            settle(a, span, &mut l.extra)?;
        }
        drop(lent);
        after(&l.routed, &mut l.extra)?;
    }
    Ok(())
}

/// Results of a lookup by page, for a group.
struct ByPage<V: Value> {
    values: Option<CudaSlice<V>>,
    found: CudaSlice<u8>,
    /// Results in wave order.
    out_values: Option<CudaSlice<V>>,
    out_found: CudaSlice<u8>,
}

fn by_page<V: Value>(b: &Batcher, with_values: bool, group: usize, wave: usize) -> Result<ByPage<V>> {
    Ok(ByPage {
        values: if with_values { Some(b.alloc::<V>(group)?) } else { None },
        found: b.alloc::<u8>(group)?,
        out_values: if with_values { Some(b.alloc::<V>(wave)?) } else { None },
        out_found: b.alloc::<u8>(wave)?,
    })
}

/// Routed `find` with the batch split on the device.
pub(crate) fn find<K: Key, V: Value, S: SubTables<K, V>>(
    b: &Batcher,
    s: &mut S,
    keys: &[K],
    values: &mut [V],
    found: &mut [bool],
) -> Result<u64> {
    let (wave, _) = b.sizes::<K, V>(keys.len(), Carry::Found);
    let mut hits = 0;
    for ((k, v), f) in keys.chunks(wave).zip(values.chunks_mut(wave)).zip(found.chunks_mut(wave)) {
        hits += match lookup_wave(b, s, k, Some(v), f) {
            // No device memory for the split: lookups change nothing, so
            // the wave is looked up again, split on the host.
            Err(Error::OutOfMemory { .. }) => super::find(s, k, v, f)?,
            r => r?,
        };
    }
    Ok(hits)
}

/// Routed `contains` with the batch split on the device.
pub(crate) fn contains<K: Key, V: Value, S: SubTables<K, V>>(b: &Batcher, s: &mut S, keys: &[K], found: &mut [bool]) -> Result<u64> {
    let (wave, _) = b.sizes::<K, V>(keys.len(), Carry::Flags);
    let mut hits = 0;
    for (k, f) in keys.chunks(wave).zip(found.chunks_mut(wave)) {
        hits += match lookup_wave(b, s, k, None, f) {
            Err(Error::OutOfMemory { .. }) => super::contains(s, k, f)?,
            r => r?,
        };
    }
    Ok(hits)
}

/// One wave of `find` (with `values`) or `contains` (without).
fn lookup_wave<K: Key, V: Value, S: SubTables<K, V>>(
    b: &Batcher,
    s: &mut S,
    k: &[K],
    v: Option<&mut [V]>,
    f: &mut [bool],
) -> Result<u64> {
    let with_values = v.is_some();
    let carry = if with_values { Carry::Found } else { Carry::Flags };
    let mut l = load::<K, V, S, _>(b, s, k, None, carry, |group| by_page::<V>(b, with_values, group, k.len()))?;
    let (mut hits, mut hits_beside) = (0, 0);
    each_page(
        b,
        s,
        &mut l,
        |on, routed, bp, r| match on {
            On::Device(t) => {
                let mut sf = bp.found.slice_mut(r.clone());
                let h = match &mut bp.values {
                    Some(sv) => t.find_device(&routed.keys.slice(r.clone()), &mut sv.slice_mut(r), &mut sf)?,
                    None => t.contains_device(&routed.keys.slice(r), &mut sf)?,
                };
                Ok((h, false))
            }
            On::Mapped(page) => {
                let mut sf = bp.found.slice_mut(r.clone());
                let keys = routed.keys.slice(r.clone());
                let h = match &mut bp.values {
                    Some(sv) => page.find_in_place(b.stream(), &keys, Some(&mut sv.slice_mut(r)), &mut sf)?,
                    None => page.find_in_place(b.stream(), &keys, None, &mut sf)?,
                };
                Ok((h, false))
            }
            On::Host(t, keys, _) => {
                let mut hf = vec![false; keys.len()];
                let h = match &mut bp.values {
                    Some(sv) => {
                        let mut hv = vec![V::from_bits(0); keys.len()];
                        let h = t.find(&keys, &mut hv, &mut hf)?;
                        b.upload_into(&hv, &mut sv.slice_mut(r.clone()))?;
                        h
                    }
                    None => t.contains(&keys, &mut hf)?,
                };
                b.upload_into(bytemuck::cast_slice::<bool, u8>(&hf), &mut bp.found.slice_mut(r))?;
                Ok((h, false))
            }
        },
        |lent, keys, span| {
            let keys = b.download(&keys.slice(span))?;
            b.beside(|| lookup_beside(lent, &keys, with_values))
        },
        |(hv, hf, h), span, bp| {
            hits_beside += h;
            if let Some(sv) = &mut bp.values {
                b.upload_into(&hv, &mut sv.slice_mut(span.clone()))?;
            }
            b.upload_into(bytemuck::cast_slice::<bool, u8>(&hf), &mut bp.found.slice_mut(span))
        },
        |routed, bp| {
            let values = match (&bp.values, &mut bp.out_values) {
                (Some(sv), Some(ov)) => Some((sv, ov)),
                _ => None,
            };
            b.unpermute(routed, values, (&bp.found, &mut bp.out_found))
        },
        |_, h| hits += h,
    )?;
    let values = match (&l.extra.out_values, v) {
        (Some(ov), Some(dst)) => Some((ov, dst)),
        _ => None,
    };
    b.download_results(values, (&l.extra.out_found, f))?;
    Ok(hits + hits_beside)
}

/// Looks the keys of the lent pages up in host memory, the pages in
/// parallel: values (with `with_values`), found flags and hits. `keys` and
/// the results cover the pages' ranges, which follow one another in
/// `lent`'s order (they were routed so).
fn lookup_beside<K: Key, V: Value>(lent: &[Lent<K, V>], keys: &[K], with_values: bool) -> Result<(Vec<V>, Vec<bool>, u64)> {
    debug_assert!(lent.windows(2).all(|w| w[0].range.end == w[1].range.start));
    let mut values = vec![V::from_bits(0); if with_values { keys.len() } else { 0 }];
    let mut found = vec![false; keys.len()];
    // Each page's own part of the keys and results.
    let mut pieces = Vec::with_capacity(lent.len());
    let (mut rest_k, mut rest_v, mut rest_f) = (keys, &mut values[..], &mut found[..]);
    for x in lent {
        let n = x.range.len();
        let (k, tail_k) = rest_k.split_at(n);
        rest_k = tail_k;
        let (f, tail_f) = std::mem::take(&mut rest_f).split_at_mut(n);
        rest_f = tail_f;
        let v = with_values.then(|| {
            let (v, tail_v) = std::mem::take(&mut rest_v).split_at_mut(n);
            rest_v = tail_v;
            v
        });
        pieces.push((x, k, v, f));
    }
    let hits = pieces
        .into_par_iter()
        .map(|(x, k, v, f)| match v {
            Some(v) => x.table.find(k, v, f),
            None => x.table.contains(k, f),
        })
        .try_reduce(|| 0, |a, b| Ok(a + b))?;
    Ok((values, found, hits))
}

/// Routed `erase` with the batch split on the device: the keys removed.
pub(crate) fn erase<K: Key, V: Value, S: SubTables<K, V>>(b: &Batcher, s: &mut S, keys: &[K]) -> Result<u64> {
    let (wave, _) = b.sizes::<K, V>(keys.len(), Carry::Keys);
    let mut removed = 0;
    for k in keys.chunks(wave) {
        let mut l = match load::<K, V, S, _>(b, s, k, None, Carry::Keys, |_| Ok(())) {
            // No device memory for the split (nothing erased yet): split
            // this wave on the host.
            Err(Error::OutOfMemory { .. }) => {
                removed += super::erase(s, k)?;
                continue;
            }
            r => r?,
        };
        each_page(
            b,
            s,
            &mut l,
            |on, routed, _, r| {
                let n = match on {
                    On::Device(t) => t.erase_device(&routed.keys.slice(r))?,
                    On::Host(t, keys, _) => t.erase(&keys)?,
                    On::Mapped(_) => unreachable!("erases work on host pages themselves"),
                };
                Ok((n, n > 0))
            },
            |_, _, _| Ok(()),
            |(), _, _| Ok(()),
            |_, _| Ok(()),
            |_, n| removed += n,
        )?;
    }
    Ok(removed)
}

/// Routed insert under the growth policy with the batch split on the
/// device: each page's range of the pairs by page goes through the growth
/// loop from device memory, so the page grows alone; outcomes as
/// [`super::insert_with`].
pub(crate) fn insert_with<K: Key, V: Value, S: SubTables<K, V>>(
    b: &Batcher,
    s: &mut S,
    policy: Policy,
    keys: &[K],
    values: &[V],
    mode: InsertMode,
) -> Result<InsertReport> {
    let (wave, _) = b.sizes::<K, V>(keys.len(), Carry::Values);
    let mut parts = Parts::default();
    for (w, (k, v)) in keys.chunks(wave).zip(values.chunks(wave)).enumerate() {
        let base = w * wave;
        let mut l = match load::<K, V, S, _>(b, s, k, Some(v), Carry::Values, |_| Ok(())) {
            // No device memory for the split (nothing stored yet): split
            // this wave on the host.
            Err(Error::OutOfMemory { .. }) => {
                let host = super::insert_parts(s, policy, k, v, mode);
                parts.add(SubOutcome { report: host.report, not_stored: host.not_stored, cause: host.cause }, |j| base + j);
                continue;
            }
            Err(e) => {
                // Nothing of this wave or the ones after it was stored.
                parts.add(SubOutcome { report: InsertReport::default(), not_stored: (0..keys.len() - base).collect(), cause: Some(e) }, |j| base + j);
                break;
            }
            Ok(l) => l,
        };
        // Each page's outcome, in its own positions, with those positions'
        // wave positions when some were not stored.
        let mut outs: Vec<(usize, SubOutcome, Vec<u32>)> = Vec::new();
        let run = each_page(
            b,
            s,
            &mut l,
            |on, routed, _, r| {
                let (out, changed) = match on {
                    On::Device(t) => {
                        let (pk, pv) = (routed.keys.slice(r.clone()), routed.values.as_ref().expect("inserts carry values").slice(r.clone()));
                        let batch = DeviceBatch { keys: &pk, values: &pv };
                        super::sub_insert_from(t, policy, &batch, mode)
                    }
                    On::Host(t, keys, values) => super::sub_insert(t, policy, &keys, &values, mode),
                    On::Mapped(_) => unreachable!("inserts work on host pages themselves"),
                };
                let pos = if out.not_stored.is_empty() { Vec::new() } else { b.download(&routed.pos.slice(r))? };
                Ok(((out, pos), changed))
            },
            |_, _, _| Ok(()),
            |(), _, _| Ok(()),
            |_, _| Ok(()),
            |p, (out, pos)| outs.push((p, out, pos)),
        );
        let done: Vec<usize> = outs.iter().map(|(p, ..)| *p).collect();
        for (p, out, pos) in outs {
            let out = super::retry_alone(s, p, policy, out, |j| (k[pos[j] as usize], v[pos[j] as usize]), mode);
            parts.add(out, |j| base + pos[j] as usize);
        }
        if let Err(e) = run {
            // A device error part-way: what the pages done stored stands;
            // every key of the other pages, and of the waves after this
            // one, is reported not stored (found by routing on the host).
            let router = s.router();
            let mut done_page = vec![false; router.count()];
            for p in done {
                done_page[p] = true;
            }
            let rest = (0..k.len()).filter(|&j| !done_page[router.route(k[j].to_u64())]).map(|j| base + j);
            parts.not_stored.extend(rest.chain(base + k.len()..keys.len()));
            parts.cause.get_or_insert(e);
            break;
        }
    }
    super::insert_outcome(keys, parts.report, parts.not_stored, parts.cause)
}
