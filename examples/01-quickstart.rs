//! The bulk API on the best device present (a CUDA GPU, else the CPU).
//!
//! Run: `cargo run --release --example 01-quickstart`

use gpuhash::{Device, HashTable, Reduce};

fn main() -> Result<(), gpuhash::Error> {
    let device = Device::best_available();
    println!("device: {device}");

    // 2^20 slots; the table grows by itself if more keys arrive.
    let mut table = HashTable::<u64, f64>::new(device, 1 << 20)?;

    let keys: Vec<u64> = (0..100_000).map(|i| i * 7919).collect();
    let values: Vec<f64> = keys.iter().map(|&k| k as f64 * 0.5).collect();
    let report = table.insert_or_assign(&keys, &values)?;
    println!("inserted {} new keys, {} existing", report.inserted, report.existing);

    // Every key value is legal, including the all-ones key.
    table.insert_or_apply(&[u64::MAX, u64::MAX, 0], &[1.5, 2.5, 1.0], Reduce::Sum)?;

    let found = table.find(&[7919, 1, u64::MAX])?;
    println!("find 7919, 1, u64::MAX -> {found:?}");
    assert_eq!(found, vec![Some(7919.0 * 0.5), None, Some(4.0)]);

    let erased = table.erase(&keys[..50_000])?;
    println!("erased {erased}; {} keys left, load factor {:.3}", table.len(), table.load_factor());
    Ok(())
}
