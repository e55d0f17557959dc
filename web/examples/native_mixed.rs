//! The browser page's mixed workload run natively, for the cost of the
//! browser: the same keys, values and rounds as `web/www/bench.js` (its
//! generator ported bit for bit), on
//!
//! * gpuhash's CPU backend on one thread (what the wasm build runs) and on
//!   every core,
//! * the page's WebGPU table code (`GpuCore`) on the native wgpu adapter
//!   (Mesa's lavapipe on a machine without a GPU),
//! * `std::collections::HashMap`, which is also the oracle here.
//!
//! ```text
//! cargo run --release -p gpuhash-web --example native_mixed -- [--sizes 10000,100000] [--ops N] [--batch N]
//! ```

use std::collections::HashMap;
use std::time::Instant;

use gpuhash::{Device, HashTable};
use gpuhash_web::GpuCore;

/// The page's generator: mulberry32.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(0x6d2b_79f5);
        let a = self.0;
        let mut t = (a ^ (a >> 15)).wrapping_mul(a | 1);
        t ^= t.wrapping_add((t ^ (t >> 7)).wrapping_mul(t | 61));
        t ^ (t >> 14)
    }
}

/// The page's bijection on u32.
fn scatter(i: u32) -> u32 {
    let mut x = i;
    x = (x ^ (x >> 16)).wrapping_mul(0x7feb_352d);
    x = (x ^ (x >> 15)).wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// The page's `valueOf(key, b)`, with `b1 = b + 1` (0 for the prefill).
fn value_of(key: u32, b1: u32) -> u32 {
    scatter(key ^ b1.wrapping_mul(0x9e37_79b9))
}

struct Round {
    ins: Vec<u32>,
    ins_values: Vec<u32>,
    del: Vec<u32>,
    look: Vec<u32>,
}

struct Workload {
    n: u32,
    prefill: Vec<u32>,
    prefill_values: Vec<u32>,
    rounds: Vec<Round>,
    ops: u64,
}

fn workload(n: u32, seed: u32, batch: u64, min_ops: u64) -> Workload {
    let universe = 2 * n;
    let prefill: Vec<u32> = (0..n).map(|i| scatter(2 * i)).collect();
    let prefill_values = prefill.iter().map(|&k| value_of(k, 0)).collect();
    let total = (2 * n as u64).max(min_ops);
    // At most a tenth of the table per round, as on the page (ROUND_SHARE).
    let round_len = batch.min((n as u64).div_ceil(10));
    let mut rng = Rng(seed);
    let mut rounds = Vec::new();
    let mut done = 0;
    while done < total {
        let len = round_len.min(total - done);
        let b1 = rounds.len() as u32 + 1;
        let mut r = Round { ins: Vec::new(), ins_values: Vec::new(), del: Vec::new(), look: Vec::new() };
        for _ in 0..len {
            let kind = rng.next() % 10;
            let k = scatter(rng.next() % universe);
            match kind {
                0..=2 => {
                    r.ins.push(k);
                    r.ins_values.push(value_of(k, b1));
                }
                3..=5 => r.del.push(k),
                _ => r.look.push(k),
            }
        }
        rounds.push(r);
        done += len;
    }
    Workload { n, prefill, prefill_values, rounds, ops: total }
}

/// What a run saw: per round (new keys, erased keys, lookup results).
type Seen = Vec<(u64, u64, Vec<Option<u32>>)>;

/// Also returns the keys left at the end (the page's `final_len`, so the
/// two runs can be seen to be the same workload).
fn run_std(w: &Workload) -> (f64, Seen, usize) {
    let mut m: HashMap<u32, u32> = w.prefill.iter().copied().zip(w.prefill_values.iter().copied()).collect();
    let mut seen = Vec::with_capacity(w.rounds.len());
    let t0 = Instant::now();
    for r in &w.rounds {
        let before = m.len();
        for (&k, &v) in r.ins.iter().zip(&r.ins_values) {
            m.insert(k, v);
        }
        let inserted = (m.len() - before) as u64;
        let erased = r.del.iter().filter(|k| m.remove(k).is_some()).count() as u64;
        seen.push((inserted, erased, r.look.iter().map(|k| m.get(k).copied()).collect()));
    }
    (t0.elapsed().as_secs_f64(), seen, m.len())
}

fn run_cpu(w: &Workload) -> Result<(f64, Seen), gpuhash::Error> {
    let mut t = HashTable::<u32, u32>::builder().device(Device::Cpu).capacity_for(w.n as u64).build::<u32, u32>()?;
    t.insert_or_assign(&w.prefill, &w.prefill_values)?;
    let mut seen = Vec::with_capacity(w.rounds.len());
    let t0 = Instant::now();
    for r in &w.rounds {
        let inserted = t.insert_or_assign(&r.ins, &r.ins_values)?.inserted;
        let erased = t.erase(&r.del)?;
        let (mut values, mut found) = (vec![0; r.look.len()], vec![false; r.look.len()]);
        t.find_into(&r.look, &mut values, &mut found)?;
        seen.push((inserted, erased, values.into_iter().zip(found).map(|(v, f)| f.then_some(v)).collect()));
    }
    Ok((t0.elapsed().as_secs_f64(), seen))
}

fn run_gpu_core(w: &Workload) -> Result<(f64, Seen), String> {
    pollster::block_on(async {
        let mut t = GpuCore::create(w.n as f64, None).await?;
        t.insert(&w.prefill, &w.prefill_values).await?;
        let mut seen = Vec::with_capacity(w.rounds.len());
        let t0 = Instant::now();
        for r in &w.rounds {
            let inserted = t.insert(&r.ins, &r.ins_values).await?;
            let erased = t.erase(&r.del).await?;
            let (values, found, _) = t.find(&r.look).await?;
            seen.push((inserted, erased, values.into_iter().zip(found).map(|(v, f)| (f == 1).then_some(v)).collect()));
        }
        Ok((t0.elapsed().as_secs_f64(), seen))
    })
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<u32> = arg(&args, "--sizes")
        .unwrap_or_else(|| "10000,100000,1000000,4000000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("--sizes: whole numbers"))
        .collect();
    let batch: u64 = arg(&args, "--batch").map_or(1 << 20, |s| s.parse().expect("--batch: a number"));
    let min_ops: u64 = arg(&args, "--ops").map_or(1 << 20, |s| s.parse().expect("--ops: a number"));
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool");
    let adapter = pollster::block_on(GpuCore::create(1.0, None)).map(|t| t.adapter());
    println!("wgpu adapter: {}", adapter.as_ref().map_or_else(|e| format!("none ({e})"), |a| a.clone()));
    println!(
        "{:>9} {:>9} {:>9}  {:>14} {:>14} {:>14} {:>14}   (million operations per second)",
        "keys", "ops", "final", "gpuhash 1 thr", "gpuhash all", "GpuCore wgpu", "std HashMap"
    );
    for (i, &n) in sizes.iter().enumerate() {
        let w = workload(n, 0x5eed + i as u32, batch, min_ops);
        let (std_s, oracle, final_len) = run_std(&w);
        let mops = |s: f64| w.ops as f64 / s / 1e6;
        let check = |name: &str, seen: &Seen| {
            assert!(seen == &oracle, "{name} disagrees with std HashMap at {n} keys");
        };
        let (one_s, seen) = one_thread.install(|| run_cpu(&w)).expect("the CPU table");
        check("gpuhash (one thread)", &seen);
        let (all_s, seen) = run_cpu(&w).expect("the CPU table");
        check("gpuhash (all cores)", &seen);
        let gpu = if adapter.is_ok() {
            let (s, seen) = run_gpu_core(&w).expect("the wgpu table");
            check("GpuCore", &seen);
            format!("{:14.2}", mops(s))
        } else {
            format!("{:>14}", "skipped")
        };
        println!(
            "{n:>9} {:>9} {final_len:>9}  {:14.2} {:14.2} {gpu} {:14.2}",
            w.ops,
            mops(one_s),
            mops(all_s),
            mops(std_s)
        );
    }
}
