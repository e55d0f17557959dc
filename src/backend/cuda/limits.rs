//! Hardware limits measured on the GPU itself, so every benchmark result can
//! be read as a fraction of what the memory system allows.

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

use super::driver_error;
use crate::{Error, Result};

/// Source of the limit kernels.
pub const LIMITS_SOURCE: &str = include_str!("../../../kernels/limits.cu");

/// One measured limit.
#[derive(Debug, Clone)]
pub struct Limit {
    /// Short name (`copy`, `random_sector_hbm`, ...).
    pub name: String,
    /// Milliseconds of one run (median of several).
    pub ms: f64,
    /// Keys (or bytes, for copies) per second, in billions.
    pub rate: f64,
    /// Unit of `rate`: "G keys/s" or "GB/s".
    pub unit: &'static str,
    /// Table bytes the run touched.
    pub bytes: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Measures the limits on device `ordinal`: device-to-device copy, random
/// sector reads and random CAS with a table of `hbm_bytes` (in HBM) and of
/// `l2_bytes` (resident in L2), each for `n` keys, and pinned host<->device
/// copies of `copy_bytes`.
pub fn measure(ordinal: usize, n: u64, hbm_bytes: u64, l2_bytes: u64, copy_bytes: u64) -> Result<Vec<Limit>> {
    super::available(ordinal)?;
    let e = |e| driver_error(ordinal, e);
    let ctx = CudaContext::new(ordinal).map_err(e)?;
    let stream = ctx.new_stream().map_err(e)?;
    let arch = super::kernels::arch_of(&ctx)?;
    let ptx = compile_ptx_with_opts(LIMITS_SOURCE, CompileOptions { arch: Some(arch), ..Default::default() })
        .map_err(|err| Error::Device { device: "nvrtc".into(), message: format!("{err:?}") })?;
    let module = ctx.load_module(ptx).map_err(e)?;
    let read = module.load_function("gh_limit_read").map_err(e)?;
    let cas = module.load_function("gh_limit_cas").map_err(e)?;
    let reps = 7;
    let time = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        f()?; // warm-up
        let mut v = Vec::new();
        for _ in 0..reps {
            let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
            let a = ctx.new_event(timing).map_err(e)?;
            let b = ctx.new_event(timing).map_err(e)?;
            a.record(&stream).map_err(e)?;
            f()?;
            b.record(&stream).map_err(e)?;
            b.synchronize().map_err(e)?;
            v.push(a.elapsed_ms(&b).map_err(e)? as f64);
        }
        Ok(median(v))
    };
    let mut out = Vec::new();
    let cfg = LaunchConfig { grid_dim: (n.div_ceil(256) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let mut sink = stream.alloc_zeros::<u32>(n as usize).map_err(e)?;
    for (label, bytes) in [("hbm", hbm_bytes), ("l2", l2_bytes)] {
        let mut table = stream.alloc_zeros::<u64>((bytes / 8) as usize).map_err(e)?;
        let (sectors, words) = (bytes / 32, bytes / 8);
        let mut seed = 1u64;
        let ms = time(&mut || {
            seed += 1;
            let mut b = stream.launch_builder(&read);
            b.arg(&table).arg(&sectors).arg(&n).arg(&seed).arg(&mut sink);
            // Safety: arguments match gh_limit_read; indices stay below `sectors`.
            unsafe { b.launch(cfg) }.map(|_| ()).map_err(e)
        })?;
        out.push(Limit { name: format!("random_sector_{label}"), ms, rate: n as f64 / ms / 1e6, unit: "G keys/s", bytes });
        let ms = time(&mut || {
            seed += 1;
            let mut b = stream.launch_builder(&cas);
            b.arg(&mut table).arg(&words).arg(&n).arg(&seed);
            // Safety: arguments match gh_limit_cas; indices stay below `words`.
            unsafe { b.launch(cfg) }.map(|_| ()).map_err(e)
        })?;
        out.push(Limit { name: format!("random_cas_{label}"), ms, rate: n as f64 / ms / 1e6, unit: "G keys/s", bytes });
    }
    // One radix partition pass of n hashes with a 4-byte payload (the
    // reordering a region-partitioned build would pay).
    {
        let f = |name: &str| module.load_function(name).map_err(e);
        let (hist_k, offs_k, scat_k) =
            (f("gh_limit_radix_hist")?, f("gh_limit_radix_offsets")?, f("gh_limit_radix_scatter")?);
        let hashes: Vec<u32> = (0..n).map(|i| (crate::core::hash::mix64(i, 7) >> 32) as u32).collect();
        let hashes = stream.clone_htod(&hashes).map_err(e)?;
        let payload = stream.alloc_zeros::<u32>(n as usize).map_err(e)?;
        let mut out_h = stream.alloc_zeros::<u32>(n as usize).map_err(e)?;
        let mut out_p = stream.alloc_zeros::<u32>(n as usize).map_err(e)?;
        let mut hist = stream.alloc_zeros::<u32>(256).map_err(e)?;
        let mut cursor = stream.alloc_zeros::<u32>(256).map_err(e)?;
        let per_block: u64 = 4096;
        let blocks = n.div_ceil(per_block) as u32;
        let cfg256 = |g: u32| LaunchConfig { grid_dim: (g, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let ms = time(&mut || {
            stream.memset_zeros(&mut hist).map_err(e)?;
            let mut b = stream.launch_builder(&hist_k);
            b.arg(&hashes).arg(&n).arg(&per_block).arg(&mut hist);
            // Safety: arguments match gh_limit_radix_hist.
            unsafe { b.launch(cfg256(blocks)) }.map_err(e)?;
            let mut b = stream.launch_builder(&offs_k);
            b.arg(&hist).arg(&mut cursor);
            // Safety: arguments match gh_limit_radix_offsets (one block of 256).
            unsafe { b.launch(cfg256(1)) }.map_err(e)?;
            let mut b = stream.launch_builder(&scat_k);
            b.arg(&hashes).arg(&payload).arg(&n).arg(&per_block).arg(&mut cursor).arg(&mut out_h).arg(&mut out_p);
            // Safety: arguments match gh_limit_radix_scatter; cursors stay below n.
            unsafe { b.launch(cfg256(blocks)) }.map(|_| ()).map_err(e)
        })?;
        out.push(Limit { name: "radix_pass".into(), ms, rate: n as f64 / ms / 1e6, unit: "G keys/s", bytes: n * 8 });
    }
    // Device-to-device copy, counting bytes read plus written.
    let src = stream.alloc_zeros::<u8>(copy_bytes as usize).map_err(e)?;
    let mut dst = stream.alloc_zeros::<u8>(copy_bytes as usize).map_err(e)?;
    let ms = time(&mut || stream.memcpy_dtod(&src, &mut dst).map_err(e))?;
    out.push(Limit { name: "copy_d2d".into(), ms, rate: 2.0 * copy_bytes as f64 / ms / 1e6, unit: "GB/s", bytes: copy_bytes });
    // Pinned host<->device copies.
    // Safety: the pinned buffer is written by the device-to-host copy before any read.
    let mut host = unsafe { ctx.alloc_pinned::<u8>(copy_bytes as usize) }.map_err(e)?;
    let ms = time(&mut || stream.memcpy_htod(&host, &mut dst).map_err(e))?;
    out.push(Limit { name: "copy_h2d_pinned".into(), ms, rate: copy_bytes as f64 / ms / 1e6, unit: "GB/s", bytes: copy_bytes });
    let ms = time(&mut || stream.memcpy_dtoh(&src, &mut host).map_err(e))?;
    out.push(Limit { name: "copy_d2h_pinned".into(), ms, rate: copy_bytes as f64 / ms / 1e6, unit: "GB/s", bytes: copy_bytes });
    // Both directions at once, on two streams, as a paged table's uploads
    // and write-backs run: the rate each way.
    // Safety: as above, written by the device-to-host copy before any read.
    let mut back = unsafe { ctx.alloc_pinned::<u8>(copy_bytes as usize) }.map_err(e)?;
    let other = stream.fork().map_err(e)?;
    let ms = time(&mut || {
        other.join(&stream).map_err(e)?;
        stream.memcpy_htod(&host, &mut dst).map_err(e)?;
        other.memcpy_dtoh(&src, &mut back).map_err(e)?;
        stream.join(&other).map_err(e)
    })?;
    out.push(Limit { name: "copy_both_pinned".into(), ms, rate: copy_bytes as f64 / ms / 1e6, unit: "GB/s", bytes: copy_bytes });
    Ok(out)
}
