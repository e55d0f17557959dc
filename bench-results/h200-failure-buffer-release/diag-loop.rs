use gpuhash::backend::InsertMode;
use gpuhash::{Device, HashTable, Scheme};
use std::time::Instant;

fn keys(from: u32, n: u32) -> Vec<u32> {
    (from..from + n).map(|i| i.wrapping_mul(2654435761) ^ 0x5bd1e995).collect()
}

fn main() -> Result<(), gpuhash::Error> {
    let slots = 1u64 << 27;
    let which = std::env::args().nth(1).unwrap_or("two-level".into());
    let scheme = match which.as_str() {
        "linear" => Scheme::Linear,
        "cuckoo" => Scheme::Cuckoo,
        "robin-hood" => Scheme::RobinHood,
        _ => Scheme::TwoLevel,
    };
    for round in 0..2 {
        let mut t = HashTable::<u32, u32>::builder().device(Device::Cuda(0)).capacity(slots).scheme(scheme).growth(false).build::<u32, u32>()?;
        let pre = keys(0, (slots / 2) as u32);
        let c = t.cuda().unwrap();
        let s = c.stream().clone();
        let pk = s.clone_htod(&pre).unwrap();
        let t0 = Instant::now();
        if std::env::args().nth(2).is_some() {
            t.insert_or_assign(&pre, &pre)?;
        } else {
            t.insert_device(&pk.as_view(), &pk.as_view(), InsertMode::Assign)?;
        }
        println!("{which} round {round} prefill {:.3} ms", t0.elapsed().as_secs_f64() * 1e3);
        drop(pk);
        let mut next = (slots / 2) as u32;
        for &n in &[1u32 << 12, 1 << 12, 1 << 12, 1 << 16, 1 << 16, 1 << 20, 1 << 20, 1 << 12] {
            let k = s.clone_htod(&keys(next, n)).unwrap();
            s.synchronize().unwrap();
            next += n;
            let t0 = Instant::now();
            t.insert_device(&k.as_view(), &k.as_view(), InsertMode::Assign)?;
            let ins = t0.elapsed().as_secs_f64() * 1e3;
            let mut v = s.alloc_zeros::<u32>(n as usize).unwrap();
            let mut f = s.alloc_zeros::<u8>(n as usize).unwrap();
            s.synchronize().unwrap();
            let t0 = Instant::now();
            let hits = t.cuda().unwrap().find_device(&k.as_view(), &mut v.as_view_mut(), &mut f.as_view_mut())?;
            let fd = t0.elapsed().as_secs_f64() * 1e3;
            println!("{which} round {round} n={n} insert {ins:.3} ms find {fd:.3} ms hits {hits}");
        }
    }
    Ok(())
}
