//! Counting a stream far larger than the table on a CUDA GPU: every
//! position is `insert_or_apply` with `Reduce::Sum` of a count of 1, from
//! device buffers, and the counts come back checked.
//!
//! Run: `cargo run --release --example 08-count-stream [LOG2_POSITIONS] [LOG2_KEYS]`
//! (default 2^24 positions over 2^20 keys; `30 26` is 2^30 positions, 16 GiB
//! of u64 keys and counts, into a table of 2^27 slots).

#[cfg(feature = "cuda")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use gpuhash::backend::InsertMode;
    use gpuhash::{Device, HashTable, Reduce};

    let arg = |i: usize, default: u32| -> Result<u32, String> {
        match std::env::args().nth(i) {
            None => Ok(default),
            Some(a) => a.parse().ok().filter(|&l| l <= 32).ok_or(format!("argument {i}: a log2 size up to 32, not {a:?}")),
        }
    };
    let (log_n, log_keys) = (arg(1, 24)?, arg(2, 20)?);
    if log_keys > log_n {
        return Err("more keys than positions".into());
    }
    let (n, keys) = (1u64 << log_n, 1u64 << log_keys);
    if let Err(why) = Device::Cuda(0).check_available() {
        eprintln!("skipped: no CUDA device ({why})");
        if std::env::var_os("GPUHASH_REQUIRE_CUDA").is_some() {
            std::process::exit(1);
        }
        return Ok(());
    }

    // Position i holds key mix(i mod keys): every key comes n / keys times,
    // its copies far apart (splitmix64's finaliser is a bijection).
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let stream_keys: Vec<u64> = (0..n).map(|i| mix(i & (keys - 1))).collect();

    // Load 0.5 once every key is in; the table does not need to grow.
    let mut table = HashTable::<u64, u64>::builder().device(Device::Cuda(0)).capacity(2 * keys).build()?;
    let stream = table.cuda().expect("a CUDA table").stream().clone();
    let keys_dev = stream.clone_htod(&stream_keys)?;
    drop(stream_keys);
    let ones = stream.clone_htod(&vec![1u64; n as usize])?;

    let start = std::time::Instant::now();
    let report = table.insert_device(&keys_dev.as_view(), &ones.as_view(), InsertMode::Apply(Reduce::Sum))?;
    stream.synchronize()?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{n} positions over {keys} keys into {} slots: {:.3} s ({:.2} G positions/s, first call: kernels compile); {} new keys",
        table.capacity(),
        secs,
        n as f64 / secs / 1e9,
        report.inserted
    );
    assert_eq!(report.inserted, keys, "every key is new once");
    assert_eq!(table.len(), keys);

    // Every key's count is n / keys.
    let distinct: Vec<u64> = (0..keys).map(mix).collect();
    let distinct_dev = stream.clone_htod(&distinct)?;
    let mut counts = stream.alloc_zeros::<u64>(keys as usize)?;
    let mut found = stream.alloc_zeros::<u8>(keys as usize)?;
    let hits = table.cuda().expect("a CUDA table").find_device(
        &distinct_dev.as_view(),
        &mut counts.as_view_mut(),
        &mut found.as_view_mut(),
    )?;
    assert_eq!(hits, keys);
    let counts = stream.clone_dtoh(&counts)?;
    stream.synchronize()?;
    let wrong = counts.iter().filter(|&&c| c != n / keys).count();
    assert_eq!(wrong, 0, "{wrong} keys with a count other than {}", n / keys);
    println!("every key counted {} times", n / keys);
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("skipped: built without the `cuda` feature");
}
