// diagnostic only (not committed): per-call cost of small calls on CUDA paged tables
use std::time::Instant;
use gpuhash::{Builder, Device, Paging, Residency, Scheme};

fn mix(i: u64) -> u32 {
    let mut x = (i as u32).wrapping_mul(0x9e37_79b1);
    x ^= x >> 15;
    x = x.wrapping_mul(0x85eb_ca77);
    x ^ (x >> 13)
}

fn main() {
    let dev = if Device::Cuda(0).check_available().is_ok() { Device::Cuda(0) } else { Device::Cpu };
    let cases: Vec<(&str, Scheme, Option<Paging>)> = vec![
        ("two-level unpaged", Scheme::TwoLevel, None),
        ("two-level paged lru", Scheme::TwoLevel, Some(Paging::new(8, 3).residency(Residency::Lru))),
        ("linear unpaged", Scheme::Linear, None),
        ("linear paged fifo", Scheme::Linear, Some(Paging::new(8, 3))),
        ("linear paged split", Scheme::Linear, Some(Paging::new(8, 3).device_split(1))),
        ("two-level paged lru again", Scheme::TwoLevel, Some(Paging::new(8, 3).residency(Residency::Lru))),
    ];
    for (name, scheme, paging) in cases {
        for rep in 0..2 {
            let t = Instant::now();
            let mut b = Builder::default().device(dev).scheme(scheme).capacity(1 << 14);
            if let Some(p) = paging { b = b.paged(p); }
            let mut tab = b.build::<u32, u32>().unwrap();
            let mut line = format!("{name} rep {rep}: build {:.2}", t.elapsed().as_secs_f64() * 1e3);
            let keys: Vec<u32> = (0..6000u64).map(mix).collect();
            let vals: Vec<u32> = keys.iter().map(|k| k ^ 7).collect();
            let mut time = |what: &str, f: &mut dyn FnMut()| {
                let t = Instant::now();
                f();
                line += &format!(" | {what} {:.2}", t.elapsed().as_secs_f64() * 1e3);
            };
            time("ins100", &mut || { tab.insert_or_assign(&keys[..100], &vals[..100]).unwrap(); });
            time("ins6000", &mut || { tab.insert_or_assign(&keys, &vals).unwrap(); });
            time("find100", &mut || { tab.find(&keys[..100]).unwrap(); });
            time("find6000", &mut || { tab.find(&keys).unwrap(); });
            time("get", &mut || { tab.get(keys[5]).unwrap(); });
            time("erase500", &mut || { tab.erase(&keys[..500]).unwrap(); });
            time("export", &mut || { tab.export().unwrap(); });
            time("stats", &mut || { tab.stats().unwrap(); });
            time("clean", &mut || { tab.clean_tombstones().unwrap(); });
            time("rehash", &mut || { tab.rehash(1 << 15).unwrap(); });
            time("ins_grow", &mut || { let k: Vec<u32> = (10000..40000u64).map(mix).collect(); tab.insert_or_assign(&k, &k).unwrap(); });
            time("drop", &mut || { });
            let t = Instant::now();
            drop(tab);
            line += &format!(" | drop {:.2}", t.elapsed().as_secs_f64() * 1e3);
            println!("{line}");
        }
    }
}
