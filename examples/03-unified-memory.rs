//! A table in CUDA unified (managed) memory: the GPU inserts, the CPU looks
//! keys up directly in the slots, with no kernel and no copy of the batch.
//!
//! Run: `cargo run --release --example 03-unified-memory`

#[cfg(feature = "cuda")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use gpuhash::{Device, HashTable, Memory};

    if let Err(why) = Device::Cuda(0).check_available() {
        eprintln!("skipped: no CUDA device ({why})");
        if std::env::var_os("GPUHASH_REQUIRE_CUDA").is_some() {
            std::process::exit(1);
        }
        return Ok(());
    }

    // Squares of 0..n, inserted by the GPU (host slices, staged through pinned memory).
    let n = 1u64 << 20;
    let keys: Vec<u64> = (0..n).collect();
    let squares: Vec<u64> = keys.iter().map(|k| k * k).collect();
    let mut table: HashTable<u64, u64> =
        HashTable::<u64, u64>::builder().device(Device::Cuda(0)).capacity_for(n).memory(Memory::Unified).build()?;
    table.insert_or_assign(&keys, &squares)?;

    // The CPU reads the managed slots: they are prefetched to the host first,
    // and back to the GPU by the next GPU call.
    let cuda = table.cuda().expect("a CUDA table");
    let probe = [3u64, 1000, n - 1, n, u64::MAX];
    let on_host = cuda.host_find(&probe)?;
    let on_gpu = table.find(&probe)?;
    for ((k, h), g) in probe.iter().zip(&on_host).zip(&on_gpu) {
        let want = (*k < n).then(|| k * k);
        if *h != want || *g != want {
            return Err(format!("key {k}: host {h:?}, GPU {g:?}, expected {want:?}").into());
        }
    }
    println!("{} keys inserted on {}; host lookups {:?} agree with the GPU", table.len(), table.device(), on_host);
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("skipped: built without the `cuda` feature");
}
