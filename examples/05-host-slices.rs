//! What a lookup from host memory costs, piece by piece: the same batch of
//! keys looked up through device buffers (`find_device`), host slices into
//! outputs the caller already holds (`find_into`), and host slices into a
//! fresh `Vec<Option<V>>` (`find`); next to what the host alone costs
//! (first-touch of fresh output memory, one copy into pinned memory on one
//! thread and on all of them) and the pinned copy rate. Then a paged
//! table: one batch whose keys all live in one page, resident or not, so
//! the cost of bringing a page in shows beside the bus time of its bytes.
//!
//! Run: `cargo run --release --example 05-host-slices [LOG2_KEYS]`
//! (default 24: 16.7M lookups into a table of 4x as many slots). Without a
//! CUDA device it prints the host-only rows and says why the rest is skipped.

use std::time::Instant;

use gpuhash::Device;
#[cfg(feature = "cuda")]
use gpuhash::{HashTable, Paging};
use rayon::prelude::*;

/// A bijective mix, so `mix(i)` are distinct keys.
fn mix(i: u64) -> u32 {
    let mut x = (i as u32).wrapping_mul(0x9e37_79b1);
    x ^= x >> 15;
    x = x.wrapping_mul(0x85eb_ca77);
    x ^ (x >> 13)
}

/// Median seconds of `reps` runs of `f` after one warm-up run.
fn time(reps: usize, mut f: impl FnMut() -> Result<(), Box<dyn std::error::Error>>) -> Result<f64, Box<dyn std::error::Error>> {
    f()?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        t.push(start.elapsed().as_secs_f64());
    }
    t.sort_by(f64::total_cmp);
    Ok(t[reps / 2])
}

fn row(what: &str, n: usize, bytes: usize, secs: f64) {
    println!("{what:<34} {:>9.3} ms {:>8.3} G keys/s {:>7.1} GB/s", secs * 1e3, n as f64 / secs / 1e9, bytes as f64 / secs / 1e9);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let log2: u32 = std::env::args().nth(1).map_or(Ok(24), |s| s.parse())?;
    let n = 1usize << log2;
    let keys: Vec<u32> = (0..n as u64).map(mix).collect();
    let values: Vec<u32> = keys.iter().map(|k| k.wrapping_mul(3)).collect();
    println!("{n} keys, {} threads on the host", rayon::current_num_threads());

    // The host alone.
    row("host: fresh outputs, first touch", n, n * 5, time(5, || {
        let v = vec![0u32; n];
        let f = vec![false; n];
        std::hint::black_box((v.iter().step_by(1024).sum::<u32>(), f.iter().step_by(4096).filter(|&&x| x).count()));
        Ok(())
    })?);
    let mut dst = vec![0u32; n];
    row("host: copy keys, one thread", n, n * 4, time(5, || {
        dst.copy_from_slice(&keys);
        Ok(())
    })?);
    row("host: copy keys, all threads", n, n * 4, time(5, || {
        dst.par_chunks_mut(1 << 16).zip(keys.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s));
        Ok(())
    })?);

    if let Err(e) = Device::Cuda(0).check_available() {
        println!("skipped: the CUDA rows need a CUDA device ({e})");
        return Ok(());
    }
    #[cfg(feature = "cuda")]
    cuda_rows(&keys, &values)?;
    #[cfg(not(feature = "cuda"))]
    let _ = values;
    Ok(())
}

#[cfg(feature = "cuda")]
fn cuda_rows(keys: &[u32], values: &[u32]) -> Result<(), Box<dyn std::error::Error>> {
    let n = keys.len();
    let slots = 4 * n as u64;
    let mut t = HashTable::<u32, u32>::builder().device(Device::Cuda(0)).capacity(slots).growth(false).build()?;
    t.insert_or_assign(keys, values)?;
    let cuda = t.cuda().expect("a CUDA table");
    let stream = cuda.stream().clone();
    let ctx = stream.context().clone();

    // Safety: every byte is written by the copies below before it is read.
    let mut pinned = unsafe { ctx.alloc_pinned::<u32>(n) }?;
    row("host: copy keys to pinned, one thread", n, n * 4, time(5, || {
        pinned.as_mut_slice()?.copy_from_slice(keys);
        Ok(())
    })?);
    row("host: copy keys to pinned, all threads", n, n * 4, time(5, || {
        pinned.as_mut_slice()?.par_chunks_mut(1 << 16).zip(keys.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s));
        Ok(())
    })?);
    let mut dk = stream.alloc_zeros::<u32>(n)?;
    row("bus: keys up, pinned", n, n * 4, time(5, || {
        stream.memcpy_htod(&pinned, &mut dk)?;
        stream.synchronize()?;
        Ok(())
    })?);
    row("bus: keys up, pageable", n, n * 4, time(5, || {
        stream.memcpy_htod(keys, &mut dk)?;
        stream.synchronize()?;
        Ok(())
    })?);

    let mut dv = stream.alloc_zeros::<u32>(n)?;
    let mut df = stream.alloc_zeros::<u8>(n)?;
    row("find_device (device buffers)", n, 0, time(5, || {
        let hits = cuda.find_device(&dk.as_view(), &mut dv.as_view_mut(), &mut df.as_view_mut())?;
        assert_eq!(hits, n as u64);
        Ok(())
    })?);
    let (mut v, mut f) = (vec![0u32; n], vec![false; n]);
    row("find_into (host slices, held outputs)", n, n * 9, time(5, || {
        assert_eq!(t.find_into(keys, &mut v, &mut f)?, n as u64);
        Ok(())
    })?);
    assert!(v.iter().zip(values).all(|(a, b)| a == b), "find_into returned a wrong value");
    row("find (host slices, fresh Vec<Option>)", n, n * 9, time(5, || {
        let r = t.find(keys)?;
        std::hint::black_box(&r);
        Ok(())
    })?);
    row("contains_into (host slices)", n, n * 5, time(5, || {
        assert_eq!(t.contains_into(keys, &mut f)?, n as u64);
        Ok(())
    })?);
    let mut fresh = HashTable::<u32, u32>::builder().device(Device::Cuda(0)).capacity(slots).growth(false).build()?;
    row("insert_or_assign (host slices)", n, n * 8, time(5, || {
        fresh.insert_or_assign(keys, values)?;
        Ok(())
    })?);
    drop((t, fresh, dk, dv, df));

    // A paged table of 8 pages of n slots each, 3 resident; one batch of
    // n / 8 keys of one page at a time.
    let pages = 8u32;
    let mut p = HashTable::<u32, u32>::builder()
        .device(Device::Cuda(0))
        .capacity(pages as u64 * n as u64)
        .growth(false)
        .paged(Paging::new(pages, 3))
        .build()?;
    p.insert_or_assign(keys, values)?;
    let paged = p.paged().expect("paged");
    let page_bytes = paged.page_slots()[0] as usize * 8;
    let mut of_page: Vec<Vec<u32>> = vec![Vec::new(); pages as usize];
    for &k in keys {
        of_page[paged.page_of(k)].push(k);
    }
    println!("paged: {pages} pages of {:.0} MiB, 3 resident", page_bytes as f64 / (1 << 20) as f64);
    let resident: Vec<usize> = paged.resident().into_iter().flatten().collect();
    let hot = resident[0];
    let batch = &of_page[hot][..of_page[hot].len().min(n / 8)];
    let (mut v, mut f) = (vec![0u32; batch.len()], vec![false; batch.len()]);
    row("paged find_into, resident page", batch.len(), batch.len() * 9, time(5, || {
        p.find_into(batch, &mut v, &mut f)?;
        Ok(())
    })?);
    // Cycle through the pages not resident: every call brings one in.
    let cold: Vec<usize> = (0..pages as usize).filter(|i| !resident.contains(i)).collect();
    let mut next = 0;
    let before = p.paged().unwrap().stats();
    let secs = time(5, || {
        let page = cold[next % cold.len()];
        next += 1;
        let b = &of_page[page][..of_page[page].len().min(n / 8)];
        p.find_into(b, &mut v[..b.len()], &mut f[..b.len()])?;
        Ok(())
    })?;
    let after = p.paged().unwrap().stats();
    row("paged find_into, page brought in", batch.len(), page_bytes + batch.len() * 9, secs);
    println!("  page-ins {} write-backs {} over 6 calls", after.page_ins - before.page_ins, after.write_backs - before.write_backs);
    Ok(())
}
