//! A table on wgpu (Vulkan, Metal, DX12, or a CPU driver such as lavapipe)
//! driven with keys that already live in GPU buffers: one insert of a whole
//! batch, then lookups of growing batches, each one submission whose only
//! read-back is its hit counter. The times show what a call costs beside
//! its keys (the fixed cost of a submission and its read-back) and the
//! rate it reaches on large batches, next to a clear of the table (every
//! slot word written once: the streaming rate the same path reaches);
//! every lookup's hit count is checked.
//!
//! Run: `cargo run --release --example 06-wgpu-buffers [LOG2_KEYS]`
//! (default 22: 4M keys into a table of twice as many slots). Without a
//! wgpu adapter it says why and stops.

use std::time::Instant;

use gpuhash::backend::wgpu::wgpu;
use gpuhash::backend::{Backend, InsertMode};
use gpuhash::{Device, HashTable};

/// A bijective mix, so `mix(i)` are distinct keys (never u32::MAX: the
/// inverse image of the two marker keys is skipped below).
fn mix(i: u64) -> u32 {
    let mut x = (i as u32).wrapping_mul(0x9e37_79b1);
    x ^= x >> 15;
    x = x.wrapping_mul(0x85eb_ca77);
    x ^ (x >> 13)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let log2: u32 = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(22);
    if let Err(e) = Device::Wgpu.check_available() {
        println!("skipped: {e}");
        return Ok(());
    }
    let n = 1usize << log2;
    let keys: Vec<u32> = (0..).map(mix).filter(|&k| k < u32::MAX - 1).take(n).collect();
    let values: Vec<u32> = (0..n as u32).collect();

    let mut table = HashTable::<u32, u32>::builder().device(Device::Wgpu).capacity(2 * n as u64).growth(false).build::<u32, u32>()?;
    let t = table.wgpu_mut().expect("a wgpu table");
    println!("adapter: {} ({:?})", t.adapter().name, t.adapter().backend);
    let buffer = |bytes: usize| {
        t.wgpu_device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes.max(4) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    };
    let (kb, vb, out, found) = (buffer(4 * n), buffer(4 * n), buffer(4 * n), buffer(4 * n));
    t.wgpu_queue().write_buffer(&kb, 0, bytemuck::cast_slice(&keys));
    t.wgpu_queue().write_buffer(&vb, 0, bytemuck::cast_slice(&values));
    t.reserve_work(n)?;
    // Written buffers go with the next submission: submit nothing now and
    // wait, so the first timed call does not carry the uploads.
    t.wgpu_queue().submit([]);
    t.wgpu_device().poll(wgpu::PollType::wait_indefinitely())?;

    println!("{:>10} {:>12} {:>10} {:>8}", "op", "keys", "ms", "G/s");
    let row = |op: &str, keys: usize, secs: f64| println!("{op:>10} {keys:>12} {:>10.3} {:>8.3}", secs * 1e3, keys as f64 / secs / 1e9);
    for round in ["insert", "assign"] {
        let start = Instant::now();
        let r = t.insert_buffers(&kb, &vb, n, InsertMode::Assign)?;
        row(round, n, start.elapsed().as_secs_f64());
        let expected = if round == "insert" { n as u64 } else { 0 };
        assert_eq!((r.inserted, r.failed.len()), (expected, 0), "{round}: {r:?}");
    }
    // Streaming writes alone: a clear writes every slot word once.
    let slot_bytes = t.slots() * 8;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        t.clear()?;
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!("{:>10} {:>12} {:>10.3} {:>8} ({:.0} GB/s written)", "clear", t.slots(), best * 1e3, "", slot_bytes as f64 / best / 1e9);
    t.insert_buffers(&kb, &vb, n, InsertMode::Assign)?;
    let mut m = 1;
    while m <= n {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            let hits = t.find_buffers(&kb, &out, &found, m)?;
            best = best.min(start.elapsed().as_secs_f64());
            assert_eq!(hits, m as u64, "every key of the batch is stored");
        }
        row("find", m, best);
        m *= 16;
    }
    Ok(())
}
