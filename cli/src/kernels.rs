//! `gpuhash kernels`: compiles the CUDA kernel modules into the disk cache
//! ahead of use. A table compiles its module with NVRTC the first time a
//! process needs it (seconds per module, one module per key width, value
//! type and scheme) and caches the PTX on disk; this fills the cache at
//! once, for a container image, a shared home, or a machine about to run
//! many processes.

use std::path::PathBuf;
#[cfg(feature = "cuda")]
use std::time::Instant;

use clap::Args;

#[derive(Debug, Args)]
pub struct KernelsArgs {
    /// Architectures to compile for, comma-separated: sm_XY for a GPU's
    /// machine code (sm_90 for H100/H200: what tables load), compute_XY for
    /// PTX (the fallback); default: that of CUDA device 0
    #[arg(long, value_delimiter = ',')]
    arch: Vec<String>,
    /// Key widths, comma-separated: u32, u64
    #[arg(long, value_delimiter = ',', default_value = "u32,u64")]
    keys: Vec<String>,
    /// Value types, comma-separated (u32, i32, f32, u64, i64, f64), or all
    #[arg(long, value_delimiter = ',', default_value = "all")]
    values: Vec<String>,
    /// Schemes, comma-separated (linear, hashinator, robin-hood, cuckoo,
    /// two-level), or all
    #[arg(long, value_delimiter = ',', default_value = "all")]
    scheme: Vec<String>,
    /// Cache directory; default: GPUHASH_CACHE_DIR, else
    /// $XDG_CACHE_HOME/gpuhash, else ~/.cache/gpuhash (where tables look)
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

#[cfg(not(feature = "cuda"))]
pub fn run(_: KernelsArgs) -> Result<(), String> {
    Err("this gpuhash was built without the cuda feature".into())
}

#[cfg(feature = "cuda")]
pub fn run(args: KernelsArgs) -> Result<(), String> {
    use gpuhash::backend::cuda::kernels;
    use rayon::prelude::*;

    let plan = Plan::from_args(&args)?;
    let dir = args.cache_dir.clone().or_else(kernels::cache_dir).ok_or("no cache directory: pass --cache-dir (HOME is not set)")?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let modules = plan.modules();
    let todo: Vec<_> = modules.iter().copied().filter(|&(a, k, v, s)| !kernels::cache_file(&dir, k, v, s, a).exists()).collect();
    let cached = modules.len() - todo.len();
    eprintln!("{} modules for {}: {cached} already in {}, compiling {}", modules.len(), plan.arches.join(","), dir.display(), todo.len());
    let bar = indicatif::ProgressBar::new(todo.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} modules, {elapsed} ({eta} left)").expect("a valid template"),
    );
    let start = Instant::now();
    // NVRTC compiles separate programs on separate threads at once.
    let failed: Vec<String> = todo
        .par_iter()
        .filter_map(|&(a, k, v, s)| {
            let out = if a.starts_with("sm_") {
                kernels::cubin_in(Some(&dir), k, v, s, a).map(drop)
            } else {
                kernels::ptx_in(Some(&dir), k, v, s, a).map(drop)
            };
            bar.inc(1);
            out.err().map(|e| format!("{s} u{k}/{} for {a}: {e}", v.name()))
        })
        .collect();
    bar.finish_and_clear();
    if !failed.is_empty() {
        return Err(format!("{} of {} modules failed to compile:\n{}", failed.len(), todo.len(), failed.join("\n")));
    }
    // A cache that cannot be written is skipped silently by the library; here it is the point.
    let missing = todo.iter().filter(|&&(a, k, v, s)| !kernels::cache_file(&dir, k, v, s, a).exists()).count();
    if missing > 0 {
        return Err(format!("{missing} compiled modules could not be written to {}", dir.display()));
    }
    println!("compiled {} modules in {:.1} s, {cached} were cached: {}", todo.len(), start.elapsed().as_secs_f64(), dir.display());
    Ok(())
}

/// What to compile: every combination of the chosen architectures, key
/// widths, value types and schemes.
#[cfg(feature = "cuda")]
struct Plan {
    arches: Vec<&'static str>,
    keys: Vec<u32>,
    values: Vec<gpuhash::ValueKind>,
    schemes: Vec<gpuhash::Scheme>,
}

#[cfg(feature = "cuda")]
impl Plan {
    fn from_args(args: &KernelsArgs) -> Result<Plan, String> {
        use gpuhash::backend::cuda::kernels::{ARCHES, SASS_ARCHES, VALUE_KINDS};
        let arches = if args.arch.is_empty() {
            vec![device_arch()?]
        } else {
            let known: Vec<&'static str> = SASS_ARCHES.iter().chain(&ARCHES).copied().collect();
            let named = |a: &String| {
                known.iter().copied().find(|&k| k == a).ok_or_else(|| format!("unknown --arch {a}; one of {}", known.join(", ")))
            };
            args.arch.iter().map(named).collect::<Result<_, _>>()?
        };
        let keys = args
            .keys
            .iter()
            .map(|k| match k.as_str() {
                "u32" => Ok(32),
                "u64" => Ok(64),
                other => Err(format!("unknown --keys {other}; u32 or u64")),
            })
            .collect::<Result<_, _>>()?;
        let values = if args.values.iter().any(|v| v == "all") {
            VALUE_KINDS.to_vec()
        } else {
            let named = |v: &String| {
                VALUE_KINDS.iter().copied().find(|k| k.name() == v).ok_or_else(|| format!("unknown --values {v}; u32, i32, f32, u64, i64, f64 or all"))
            };
            args.values.iter().map(named).collect::<Result<_, _>>()?
        };
        let schemes = if args.scheme.iter().any(|s| s == "all") {
            gpuhash::Scheme::ALL.to_vec()
        } else {
            args.scheme.iter().map(|s| s.parse::<gpuhash::Scheme>().map_err(|e| format!("--scheme: {e}"))).collect::<Result<_, _>>()?
        };
        Ok(Plan { arches, keys, values, schemes })
    }

    /// Every module to compile, once each: schemes that share a module
    /// (Hashinator's team sizes) appear once.
    fn modules(&self) -> Vec<(&'static str, u32, gpuhash::ValueKind, gpuhash::Scheme)> {
        let mut out = Vec::new();
        for &a in &self.arches {
            for &k in &self.keys {
                for &v in &self.values {
                    for &s in &self.schemes {
                        let same = |m: &(&str, u32, gpuhash::ValueKind, gpuhash::Scheme)| (m.0, m.1, m.2, m.3.code()) == (a, k, v, s.code());
                        if !out.iter().any(same) {
                            out.push((a, k, v, s));
                        }
                    }
                }
            }
        }
        out
    }
}

/// What tables on CUDA device 0 load: machine code for its architecture,
/// else PTX; or why there is no device.
#[cfg(feature = "cuda")]
fn device_arch() -> Result<&'static str, String> {
    use gpuhash::backend::cuda::kernels;
    let none = |why: String| format!("{why}; name the target with --arch (sm_90 for H100/H200)");
    gpuhash::backend::cuda::available(0).map_err(|e| none(e.to_string()))?;
    let ctx = gpuhash::cudarc::driver::CudaContext::new(0).map_err(|e| none(format!("{e:?}")))?;
    kernels::sass_of(&ctx).map_or_else(|| kernels::arch_of(&ctx).map_err(|e| none(e.to_string())), Ok)
}

#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: KernelsArgs,
    }

    fn args(a: &[&str]) -> KernelsArgs {
        Cli::parse_from(std::iter::once("kernels").chain(a.iter().copied())).args
    }

    #[test]
    fn the_plan_is_every_combination_once() {
        let p = Plan::from_args(&args(&["--arch", "compute_90,compute_80", "--keys", "u32", "--values", "u32,f64"])).unwrap();
        // Five schemes, two value types, two architectures.
        assert_eq!(p.modules().len(), 20);
        let p = Plan::from_args(&args(&["--arch", "compute_90", "--scheme", "hashinator,hashinator-t32,linear"])).unwrap();
        assert_eq!(p.modules().len(), 2 * 6 * 2, "the two Hashinator teams share a module");
    }

    #[test]
    fn bad_names_are_refused_with_the_choices() {
        let e = Plan::from_args(&args(&["--arch", "sm_91"])).err().unwrap();
        assert!(e.contains("sm_90") && e.contains("compute_90"), "{e}");
        let e = Plan::from_args(&args(&["--arch", "compute_90", "--keys", "u16"])).err().unwrap();
        assert!(e.contains("u32 or u64"), "{e}");
        let e = Plan::from_args(&args(&["--arch", "compute_90", "--values", "u8"])).err().unwrap();
        assert!(e.contains("f64"), "{e}");
        assert!(Plan::from_args(&args(&["--arch", "compute_90", "--scheme", "quadratic"])).is_err());
    }

    /// Fills a cache, then finds every module there; the tables read those files.
    #[test]
    fn fills_the_cache_the_tables_read() {
        // Safety: only probes whether the library can be opened.
        if !unsafe { gpuhash::cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: NVRTC (libnvrtc.so) not found");
            return;
        }
        use gpuhash::backend::cuda::kernels;
        let dir = std::env::temp_dir().join(format!("gpuhash-cli-kernels-{}", std::process::id()));
        let a = args(&["--arch", "sm_90,compute_90", "--keys", "u32", "--values", "u32", "--scheme", "linear", "--cache-dir", dir.to_str().unwrap()]);
        run(a).unwrap();
        let (u32v, linear) = (gpuhash::ValueKind::U32, gpuhash::Scheme::Linear);
        let ptx = std::fs::read_to_string(kernels::cache_file(&dir, 32, u32v, linear, "compute_90")).unwrap();
        assert!(ptx.contains("gh_insert") && ptx.contains(".target sm_90"), "not the module's PTX");
        let cubin = std::fs::read(kernels::cache_file(&dir, 32, u32v, linear, "sm_90")).unwrap();
        assert_eq!(&cubin[..4], b"\x7fELF", "not machine code");
        // The library's own lookups return the cached files.
        assert_eq!(kernels::ptx_in(Some(&dir), 32, u32v, linear, "compute_90").unwrap(), ptx);
        assert_eq!(kernels::cubin_in(Some(&dir), 32, u32v, linear, "sm_90").unwrap(), cubin);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
