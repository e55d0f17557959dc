//! Hardware limits measured in the same run, as ceilings for the table
//! results: multi-threaded memory copy bandwidth, and the rate of random
//! cache-line reads over buffers beyond the LLC, inside it, and of exactly
//! each benchmarked table's size.

use std::hint::black_box;
use std::time::Instant;

use gpuhash::core::hash::reduce_range;
use indicatif::ProgressBar;
use rayon::prelude::*;

use super::defaults;
use super::keys::{mix64, rep_seed};
use super::record::Recorder;
use super::report::{LimitSpec, Row};
use super::BenchError;

/// What to measure.
#[derive(Clone, Debug)]
pub(crate) struct LimitPlan {
    /// Sizes of the benchmarked tables in bytes (deduplicated).
    pub table_bytes: Vec<u64>,
    /// Random reads per measurement.
    pub reads: u64,
    pub reps: usize,
    pub warmup: usize,
    pub seed: u64,
}

impl LimitPlan {
    /// Measurements the plan makes (for the progress bar).
    pub(crate) fn steps(&self) -> u64 {
        3 + self.table_bytes.len() as u64
    }
}

/// Size of the last-level cache, from /sys on Linux.
pub(crate) fn llc_bytes() -> Option<u64> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut best: Option<(u32, u64)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(level), Some(size)) = (read("level"), read("size")) else { continue };
        let Ok(level) = level.trim().parse::<u32>() else { continue };
        let Some(bytes) = parse_cache_size(size.trim()) else { continue };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, bytes));
        }
    }
    best.map(|(_, b)| b)
}

/// Parses sizes as /sys writes them: `32768K`, `2M`, `512`.
fn parse_cache_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// The "beyond the LLC" and "in cache" buffer sizes for an LLC of `llc` bytes.
pub(crate) fn buffer_sizes(llc: u64) -> (u64, u64) {
    let large = (llc * defaults::LIMIT_LLC_MULTIPLE)
        .clamp(defaults::LIMIT_LARGE_MIN_BYTES, defaults::LIMIT_LARGE_MAX_BYTES);
    let small = (llc / defaults::LIMIT_SMALL_LLC_DIVISOR).max(64 << 10);
    (large, small)
}

/// A buffer of `bytes` (rounded up to whole lines), written so every page
/// is really mapped: reading never-touched zero pages would hit one shared
/// physical page and overstate the rate.
fn buffer(bytes: u64) -> Vec<u64> {
    let words = bytes.div_ceil(defaults::CACHE_LINE_BYTES) * (defaults::CACHE_LINE_BYTES / 8);
    (0..words).into_par_iter().map(|i| i ^ 0x5555_5555).collect()
}

#[inline(always)]
fn prefetch(p: *const u64) {
    #[cfg(target_arch = "x86_64")]
    // Safety: a prefetch is a hint and never faults.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Reads `count` random lines of `buf` starting at counter `lo`. Addresses
/// come from a hash of the counter, never from loaded data, and are
/// prefetched `AHEAD` reads early, so many misses are in flight at once.
fn gather(buf: &[u64], lo: u64, count: u64, seed: u64) -> u64 {
    // 64 reads ahead measured fastest on a 2-core EPYC VM (16 and 32 were
    // 20-40 % slower; 128 and 256 no faster).
    const AHEAD: usize = 64;
    let words_per_line = (defaults::CACHE_LINE_BYTES / 8) as usize;
    let lines = (buf.len() / words_per_line) as u64;
    let at = |i: u64| reduce_range(mix64(i ^ seed), lines) as usize * words_per_line;
    let mut ring = [0usize; AHEAD];
    for (j, r) in ring.iter_mut().enumerate() {
        *r = at(lo + j as u64);
        prefetch(&buf[*r]);
    }
    let mut sum = 0u64;
    for i in 0..count {
        let slot = i as usize % AHEAD;
        let cur = ring[slot];
        ring[slot] = at(lo + i + AHEAD as u64);
        prefetch(&buf[ring[slot]]);
        sum = sum.wrapping_add(buf[cur]);
    }
    sum
}

/// Times `reads` random line reads over `buf`, split evenly across all threads.
fn time_random_lines(buf: &[u64], reads: u64, seed: u64) -> f64 {
    let threads = rayon::current_num_threads() as u64;
    let per = reads.div_ceil(threads);
    let start = Instant::now();
    let sum: u64 = (0..threads)
        .into_par_iter()
        .map(|t| gather(buf, t * per, per.min(reads.saturating_sub(t * per)), seed))
        .reduce(|| 0, u64::wrapping_add);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    black_box(sum);
    ms
}

/// Times one parallel copy of `src` into `dst`.
fn time_copy(src: &[u64], dst: &mut [u64]) -> f64 {
    const CHUNK_WORDS: usize = 1 << 17; // 1 MiB per task
    let start = Instant::now();
    dst.par_chunks_mut(CHUNK_WORDS).zip(src.par_chunks(CHUNK_WORDS)).for_each(|(d, s)| d.copy_from_slice(s));
    let ms = start.elapsed().as_secs_f64() * 1e3;
    black_box(&dst[dst.len() / 2]);
    ms
}

/// Runs `f(seed)` for the warm-up and timed repetitions; returns the timed ones.
fn repeat(plan: &LimitPlan, mut f: impl FnMut(u64) -> f64) -> Vec<f64> {
    (0..plan.warmup + plan.reps).map(|rep| (rep, f(rep_seed(plan.seed, rep)))).filter(|(rep, _)| *rep >= plan.warmup).map(|(_, ms)| ms).collect()
}

/// Measures every CPU limit; one row each, recorded as it is measured.
pub(crate) fn measure_cpu(plan: &LimitPlan, progress: &ProgressBar, rec: &mut Recorder) -> Result<(), BenchError> {
    let llc = llc_bytes().unwrap_or(defaults::LLC_FALLBACK_BYTES);
    let (large, small) = buffer_sizes(llc);

    progress.set_message(format!("limit_copy {} MiB", large >> 20));
    {
        let src = buffer(large);
        let mut dst = buffer(large);
        let ms = repeat(plan, |_| time_copy(&src, &mut dst));
        let bytes = src.len() as u64 * 8;
        let spec = LimitSpec {
            device: "cpu",
            op: "limit_copy",
            scheme: "beyond_llc",
            n: bytes,
            buffer_bytes: bytes,
            ops: None,
            bytes_moved: Some(2.0 * bytes as f64),
            reps: ms.len(),
        };
        rec.record(Row::limit(spec, &ms))?;
    }
    progress.inc(1);

    let mut random = |scheme: &str, bytes: u64| -> Result<(), BenchError> {
        progress.set_message(format!("limit_random_line {scheme} {} KiB", bytes >> 10));
        let buf = buffer(bytes);
        let ms = repeat(plan, |seed| time_random_lines(&buf, plan.reads, seed));
        let spec = LimitSpec {
            device: "cpu",
            op: "limit_random_line",
            scheme,
            n: plan.reads,
            buffer_bytes: buf.len() as u64 * 8,
            ops: Some(plan.reads),
            bytes_moved: Some((plan.reads * defaults::CACHE_LINE_BYTES) as f64),
            reps: ms.len(),
        };
        rec.record(Row::limit(spec, &ms))?;
        progress.inc(1);
        Ok(())
    };
    random("beyond_llc", large)?;
    random("in_cache", small)?;
    for &b in &plan.table_bytes {
        random("table", b)?;
    }
    Ok(())
}

/// Measures the GPU limits with the library's limit kernels: random 32-byte
/// sector reads and random CAS over a buffer beyond the L2, one inside it and
/// one of each table size; device and pinned host copies. One call per
/// buffer beyond the L2, each also measuring the in-L2 and copy figures (kept
/// from the first call only). Rows are recorded as each call returns; a
/// failed call keeps those recorded before it.
#[cfg(feature = "cuda")]
pub(crate) fn measure_cuda(
    ordinal: usize,
    plan: &LimitPlan,
    progress: &ProgressBar,
    rec: &mut Recorder,
) -> Result<(), BenchError> {
    use gpuhash::backend::cuda::limits::measure;
    use gpuhash::cudarc::driver::{sys::CUdevice_attribute, CudaContext};

    let device = format!("cuda:{ordinal}");
    let unavailable = |e: gpuhash::Error| BenchError::Table { target: format!("{device} limits"), source: e };
    let l2 = CudaContext::new(ordinal)
        .and_then(|c| c.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE))
        .map(|b| b.max(0) as u64)
        .unwrap_or(defaults::LLC_FALLBACK_BYTES);
    let (large, small) = buffer_sizes(l2);
    let reads = plan.reads.max(defaults::GPU_LIMIT_MIN_READS);
    let buffers = std::iter::once(("beyond_llc", large)).chain(plan.table_bytes.iter().map(|&b| ("table", b)));
    for (i, (scheme, bytes)) in buffers.enumerate() {
        progress.set_message(format!("{device} limits, {scheme} {} KiB", bytes >> 10));
        for l in measure(ordinal, reads, bytes, small, large).map_err(unavailable)? {
            let (op, kind) = match l.name.as_str() {
                "random_sector_hbm" => ("limit_random_sector", scheme),
                "random_cas_hbm" => ("limit_random_cas", scheme),
                "random_sector_l2" if i == 0 => ("limit_random_sector", "in_cache"),
                "random_cas_l2" if i == 0 => ("limit_random_cas", "in_cache"),
                "copy_d2d" if i == 0 => ("limit_copy", "beyond_llc"),
                "radix_pass" if i == 0 => ("limit_radix_pass", "batch"),
                "copy_h2d_pinned" if i == 0 => ("limit_copy_h2d", "pinned"),
                "copy_d2h_pinned" if i == 0 => ("limit_copy_d2h", "pinned"),
                "copy_both_pinned" if i == 0 => ("limit_copy_both", "pinned"),
                _ => continue,
            };
            let is_copy = l.unit == "GB/s";
            let spec = LimitSpec {
                device: &device,
                op,
                scheme: kind,
                n: if is_copy { l.bytes } else { reads },
                buffer_bytes: l.bytes,
                ops: (!is_copy).then_some(reads),
                bytes_moved: Some(if is_copy { l.rate * l.ms * 1e6 } else { (reads * 32) as f64 }),
                reps: 1,
            };
            rec.record(Row::limit(spec, &[l.ms]))?;
        }
        progress.inc(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("x"), None);
    }

    #[test]
    fn buffers_bracket_the_cache() {
        let (large, small) = buffer_sizes(32 << 20);
        assert!(large >= 8 * (32 << 20) && small <= 8 << 20);
    }

    #[test]
    fn gather_reads_every_requested_line() {
        let buf = buffer(1 << 16);
        // Every word is i ^ 0x5555_5555, so the sum is nonzero for any reads.
        assert_ne!(gather(&buf, 0, 1000, 1), 0);
    }
}
