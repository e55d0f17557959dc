//! Where a 2^20-key device-buffer call's time goes (a measuring probe, built
//! as an example for one run; see NOTES.txt). u32 -> u32 and u64 -> u64,
//! a 2^27-slot table prefilled to load 0.5, median of REPS:
//! - `timed`: CUDA events around the call on an idle stream (as the bench);
//! - `host`: the call's own host time (enqueue, or enqueue + wait);
//! - `behind`: events around the call queued behind a long kernel, so the
//!   host's enqueue overlaps GPU work: the GPU time of its stream work alone.
use std::time::Instant;

use gpuhash::backend::InsertMode;
use gpuhash::cudarc::driver::sys::CUevent_flags;
use gpuhash::{Device, HashTable, Key, Value};

const REPS: usize = 15;

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ceb9fe1a85ec53);
    x ^ (x >> 33)
}

fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn probe<K: Key, V: Value>(name: &str, untracked: bool) {
    let slots = 1u64 << 27;
    let mut t = HashTable::<K, V>::builder().device(Device::Cuda(0)).capacity(slots).max_load_factor(1.0).growth(false).build::<K, V>().unwrap();
    // Bijective mixes, so every key is distinct.
    let key = |i: u64| K::from_u64(if std::mem::size_of::<K>() == 4 { fmix32(i as u32) as u64 } else { mix(i) });
    let prefill: Vec<K> = (0..slots / 2).map(key).collect();
    let vals: Vec<V> = (0..slots / 2).map(|i| V::from_bits(i & 0xffff)).collect();
    t.insert_or_assign(&prefill, &vals).unwrap();
    let stream = t.cuda().unwrap().stream().clone();
    let ctx = stream.context().clone();
    if untracked {
        // Buffers made after this carry no events.
        unsafe { ctx.disable_event_tracking() };
    }
    let n = 1usize << 20;
    let small = stream.clone_htod(&prefill[..n]).unwrap();
    let small_v = stream.clone_htod(&vals[..n]).unwrap();
    let mut out = stream.clone_htod(&vec![V::from_bits(0); n]).unwrap();
    let mut found = stream.alloc_zeros::<u8>(n).unwrap();
    let big = stream.clone_htod(&prefill[..1 << 25]).unwrap();
    let mut big_out = stream.clone_htod(&vec![V::from_bits(0); 1 << 25]).unwrap();
    let mut big_found = stream.alloc_zeros::<u8>(1 << 25).unwrap();
    let fresh: Vec<Vec<K>> = (0..2 * REPS + 2).map(|r| (0..n as u64).map(|i| key(slots / 2 + (r as u64) * n as u64 + i)).collect()).collect();
    let fresh_d: Vec<_> = fresh.iter().map(|f| stream.clone_htod(f).unwrap()).collect();
    stream.synchronize().unwrap();
    let ev = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
    let (e0, e1, e2) = (ev(), ev(), ev());
    let mut rows = Vec::new();
    let only = std::env::args().nth(2).unwrap_or_default();
    for op in ["find_async", "find_sync", "insert_async_wait", "insert_sync"] {
        if !op.contains(only.as_str()) {
            continue;
        }
        let (mut timed, mut host, mut behind) = (vec![], vec![], vec![]);
        for rep in 0..REPS + 1 {
            for queued in [false, true] {
                let c = t.cuda_mut().unwrap();
                stream.synchronize().unwrap();
                if queued {
                    e0.record(&stream).unwrap();
                    c.find_device_async(&stream, &big.as_view(), &mut big_out.as_view_mut(), &mut big_found.as_view_mut()).unwrap();
                }
                e1.record(&stream).unwrap();
                let h = Instant::now();
                let ins = &fresh_d[2 * rep + queued as usize];
                match op {
                    "find_async" => c.find_device_async(&stream, &small.as_view(), &mut out.as_view_mut(), &mut found.as_view_mut()).unwrap(),
                    "find_sync" => {
                        assert_eq!(c.find_device(&small.as_view(), &mut out.as_view_mut(), &mut found.as_view_mut()).unwrap(), n as u64);
                    }
                    "insert_async_wait" => {
                        let r = c.insert_device_async(&stream, &ins.as_view(), &small_v.as_view(), InsertMode::Assign).unwrap().wait().unwrap();
                        assert_eq!(r.inserted, n as u64);
                    }
                    _ => {
                        let r = c.insert_device(&ins.as_view(), &small_v.as_view(), InsertMode::Assign).unwrap();
                        assert_eq!(r.inserted, n as u64);
                    }
                }
                let hs = h.elapsed().as_secs_f64() * 1e3;
                e2.record(&stream).unwrap();
                e2.synchronize().unwrap();
                if rep == 0 {
                    continue; // warm-up
                }
                if queued {
                    behind.push(e1.elapsed_ms(&e2).unwrap() as f64);
                } else {
                    timed.push(e1.elapsed_ms(&e2).unwrap() as f64);
                    host.push(hs);
                }
            }
            // Undo the inserts so every rep sees load 0.5.
            // (Erased keys leave tombstones, which take slots: cleaned away.)
            if op.starts_with("insert") {
                let c = t.cuda_mut().unwrap();
                c.resync().unwrap();
                for q in 0..2 {
                    assert_eq!(c.erase_device(&fresh_d[2 * rep + q].as_view()).unwrap(), n as u64);
                }
                t.clean_tombstones().unwrap();
                assert_eq!(t.len(), slots / 2);
            }
        }
        let (tm, hm, bm) = (median(timed), median(host), median(behind));
        rows.push(format!(
            "{name} tracking={} {op:18} timed {:7.1} us ({:5.2} G/s)  host {:7.1} us  behind {:7.1} us ({:5.2} G/s)",
            !untracked, tm * 1e3, n as f64 / tm / 1e6, hm * 1e3, bm * 1e3, n as f64 / bm / 1e6
        ));
    }
    for r in rows {
        println!("{r}");
    }
}

/// Arguments: `tracked` or `untracked`, then optionally an op filter (a
/// substring of the op names) and `u32` or `u64`.
fn main() {
    let untracked = std::env::args().nth(1).as_deref() == Some("untracked");
    let keys = std::env::args().nth(3).unwrap_or_default();
    if keys != "u64" {
        probe::<u32, u32>("u32", untracked);
    }
    if keys != "u32" {
        probe::<u64, u64>("u64", untracked);
    }
}
