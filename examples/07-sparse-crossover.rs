//! Where a paged table should stop bringing a page in for a call and work
//! on it where it lies in host memory instead: one call touches one page
//! that is not resident with `k` keys, timed each way, for lookups and for
//! assignments (which also write the page back when it was brought in),
//! over `k` from a few hundred keys to a whole page. The ways: brought in;
//! in place on the host's cores (`Paging::sparse`); and for lookups, read
//! in place by the GPU over the bus (zero-copy, `Paging::zero_copy`). The
//! crossover `k*` of a way gives the cost of its key in bus bytes, page
//! bytes / `k*` (twice the page bytes for writes), the number those
//! settings take.
//!
//! Run: `cargo run --release --example 07-sparse-crossover [PAGE_MIB]`
//! (default 256 MiB pages on CUDA; without a GPU, 4 MiB pages on the CPU
//! backend, where the figures show only the host's copies).

use std::time::Instant;

use gpuhash::{Device, HashTable, Paging};

/// Bytes of one u32 -> u32 slot.
const SLOT_BYTES: u64 = 8;
const PAGES: u32 = 4;

fn mix(i: u64) -> u32 {
    let mut x = (i as u32).wrapping_mul(0x9e37_79b1);
    x ^= x >> 15;
    x = x.wrapping_mul(0x85eb_ca77);
    x ^ (x >> 13)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cuda = Device::Cuda(0).check_available().is_ok();
    let device = if cuda { Device::Cuda(0) } else { Device::Cpu };
    let page_mib: u64 = std::env::args().nth(1).map_or(Ok(if cuda { 256 } else { 4 }), |s| s.parse())?;
    let page_bytes = page_mib << 20;
    let slots = page_bytes / SLOT_BYTES * PAGES as u64;
    // Three tables, one resident page each: one always brings pages in,
    // one works on them on the host, one reads them from the GPU (each
    // call split on the device) and writes them on the host.
    let build = |paging: Paging| {
        HashTable::<u32, u32>::builder().device(device).capacity(slots).max_load_factor(1.0).growth(false).paged(paging).build()
    };
    let base = Paging::new(PAGES, 1);
    let mut brought = build(base.sparse(u64::MAX).zero_copy(u64::MAX))?;
    let mut in_place = build(base.sparse(0).device_split(usize::MAX))?;
    let mut zero_copy = build(base.sparse(0).zero_copy(0).device_split(1).host_lookups(false))?;
    let keys: Vec<u32> = (0..slots / 2).map(mix).collect();
    let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(3)).collect();
    for t in [&mut brought, &mut in_place, &mut zero_copy] {
        t.insert_or_assign(&keys, &values)?;
    }
    let paged = brought.paged().expect("paged");
    let mut by_page: Vec<Vec<u32>> = vec![Vec::new(); PAGES as usize];
    for &k in &keys {
        by_page[paged.page_of(k)].push(k);
    }
    println!("device {device}; pages of {page_mib} MiB, one resident");
    println!("op,keys,brought_in_ms,host_in_place_ms,gpu_in_place_ms");
    let mut turn = 0usize;
    let largest = by_page.iter().map(Vec::len).min().unwrap_or(0);
    // Lookups first, so no page is dirty; then assignments, each of which
    // leaves its page dirty for the next call to write back (in steady
    // state a call brings one page in and writes one back).
    for op in ["find", "assign"] {
        let mut k = 256usize;
        while k <= largest {
            let mut ms = [f64::NAN; 3];
            for (which, t) in [&mut brought, &mut in_place, &mut zero_copy].into_iter().enumerate() {
                // A page the last call on this table did not touch: not resident.
                let batch = &by_page[turn % PAGES as usize][..k];
                turn += 1;
                let (mut out, mut hit) = (vec![0u32; k], vec![false; k]);
                let start = Instant::now();
                if op == "find" {
                    t.find_into(batch, &mut out, &mut hit)?;
                } else {
                    let v: Vec<u32> = batch.iter().map(|k| k.wrapping_mul(3)).collect();
                    t.insert_or_assign(batch, &v)?;
                }
                ms[which] = start.elapsed().as_secs_f64() * 1e3;
                if op == "find" && hit.iter().zip(&out).zip(batch).any(|((h, v), k)| !h || *v != k.wrapping_mul(3)) {
                    return Err("a lookup returned a wrong value".into());
                }
            }
            println!("{op},{k},{:.3},{:.3},{:.3}", ms[0], ms[1], ms[2]);
            k *= 4;
        }
    }
    eprintln!("brought in: {:?}", brought.paged().unwrap().stats());
    eprintln!("in place on the host: {:?}", in_place.paged().unwrap().stats());
    eprintln!("in place, lookups on the GPU: {:?}", zero_copy.paged().unwrap().stats());
    Ok(())
}
