//! Compiling the CUDA sources with NVRTC, cached on disk and in memory.
//!
//! One module per (key type, value type, architecture). The sources live in
//! `kernels/` and are embedded at build time; the header with the shared
//! constants is generated from the Rust core, so both sides agree.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

use crate::core::constants::cuda_header;
use crate::core::keys::ValueKind;
use crate::core::scheme::Scheme;
use crate::{Error, Result};

/// The device API header users include (`kernels/gpuhash.cuh`).
pub const DEVICE_HEADER: &str = include_str!("../../../kernels/gpuhash.cuh");
/// The bulk kernels (`kernels/bulk.cu`).
pub const BULK_SOURCE: &str = include_str!("../../../kernels/bulk.cu");
/// Each scheme's device code, by the path the headers include it as.
pub const SCHEME_HEADERS: &[(&str, &str)] = &[
    ("schemes/linear.cuh", include_str!("../../../kernels/schemes/linear.cuh")),
    ("schemes/robin_hood.cuh", include_str!("../../../kernels/schemes/robin_hood.cuh")),
    ("schemes/cuckoo.cuh", include_str!("../../../kernels/schemes/cuckoo.cuh")),
    ("schemes/hashinator.cuh", include_str!("../../../kernels/schemes/hashinator.cuh")),
];

/// The kernels of one module.
pub(crate) struct Kernels {
    pub insert: CudaFunction,
    pub find: CudaFunction,
    pub contains: CudaFunction,
    pub erase: CudaFunction,
    pub collect_absent: CudaFunction,
    pub rehash: CudaFunction,
    pub export: CudaFunction,
    pub displacement: CudaFunction,
    pub gather_keys: CudaFunction,
    pub unpack_pairs: CudaFunction,
    /// The region build of large batches (linear scheme only).
    pub region: Option<super::region::RegionKernels>,
    pub clean_extract: CudaFunction,
    /// The locking schemes' insert step without locks (gh_insert_unlocked).
    pub unlocked: Option<CudaFunction>,
    /// The page partition of paged tables (`gh_page_*`).
    pub page: PageKernels,
}

/// The kernels that split a batch by page and put results back in batch
/// order (see `paging::Batcher`).
pub(crate) struct PageKernels {
    pub count: CudaFunction,
    pub scatter: CudaFunction,
    pub unpermute: CudaFunction,
}

/// C type names for `-DGH_KEY_T` / `-DGH_VALUE_T`.
pub fn key_ctype(bits: u32) -> &'static str {
    if bits == 32 { "unsigned int" } else { "unsigned long long" }
}

/// C type name of a value kind.
pub fn value_ctype(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::U32 => "unsigned int",
        ValueKind::I32 => "int",
        ValueKind::F32 => "float",
        ValueKind::U64 => "unsigned long long",
        ValueKind::I64 => "long long",
        ValueKind::F64 => "double",
    }
}

/// The whole translation unit: our headers inlined in place of their
/// `#include` lines, so NVRTC needs no include paths.
pub fn full_source() -> String {
    source().to_owned()
}

/// [`full_source`], assembled once: every module's cache name hashes it.
fn source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| with_device_header(BULK_SOURCE))
}

/// Makes a user's kernel source self-contained for NVRTC: its
/// `#include "gpuhash.cuh"` line is replaced by the device API header, with
/// the headers that one includes inlined too.
pub fn with_device_header(user_source: &str) -> String {
    let mut header = DEVICE_HEADER.replace("#include \"gpuhash_constants.cuh\"", &cuda_header());
    for (path, text) in SCHEME_HEADERS {
        header = header.replace(&format!("#include \"{path}\""), text);
    }
    user_source.replace("#include \"gpuhash.cuh\"", &header)
}

/// NVRTC options for one module.
pub fn compile_options(key_bits: u32, value: ValueKind, scheme: Scheme, arch: &'static str) -> Vec<String> {
    // Extra flags for experiments (`GPUHASH_NVRTC_FLAGS="-DGH_SINGLE_BUCKET_WALK"`),
    // part of the cache key like every other option.
    let extra = std::env::var("GPUHASH_NVRTC_FLAGS").unwrap_or_default();
    let mut opts = vec![
        format!("-DGH_KEY_T={}", key_ctype(key_bits)),
        format!("-DGH_VALUE_T={}", value_ctype(value)),
        format!("-DGH_SCHEME={}", scheme.code()),
        format!("--gpu-architecture={arch}"),
        "-std=c++17".into(),
        "--extra-device-vectorization".into(),
    ];
    opts.extend(extra.split_whitespace().map(String::from));
    opts
}

/// 64-bit FNV-1a: a stable cache key (std's hasher may change between releases).
fn fnv1a(parts: &[&str]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

/// The directory of the disk cache of compiled modules: `GPUHASH_CACHE_DIR`,
/// else `$XDG_CACHE_HOME/gpuhash`, else `~/.cache/gpuhash` (`None` without
/// any of them: modules are then compiled in every process).
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("GPUHASH_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("gpuhash"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("gpuhash"))
}

/// The cache file of one module under `dir`: named by a hash of the sources
/// and every compile option, so a changed kernel or option never reads a
/// stale file. Machine code for one GPU (`arch` `sm_XY`) is a `.cubin`,
/// PTX (`compute_XY`) a `.ptx`.
pub fn cache_file(dir: &std::path::Path, key_bits: u32, value: ValueKind, scheme: Scheme, arch: &'static str) -> PathBuf {
    let opts = compile_options(key_bits, value, scheme, arch);
    let mut parts: Vec<&str> = vec![source()];
    parts.extend(opts.iter().map(String::as_str));
    let ext = if arch.starts_with("sm_") { "cubin" } else { "ptx" };
    dir.join(format!("bulk-{:016x}.{ext}", fnv1a(&parts)))
}

/// Compiles (or reads from the disk cache) the PTX of one module.
pub fn ptx_for(key_bits: u32, value: ValueKind, scheme: Scheme, arch: &'static str) -> Result<String> {
    ptx_in(cache_dir().as_deref(), key_bits, value, scheme, arch)
}

/// [`ptx_for`] with the cache in `dir` (none: compiled, not cached).
pub fn ptx_in(dir: Option<&std::path::Path>, key_bits: u32, value: ValueKind, scheme: Scheme, arch: &'static str) -> Result<String> {
    let path = dir.map(|d| cache_file(d, key_bits, value, scheme, arch));
    let bytes = cached(path, || {
        let options = CompileOptions { options: compile_options(key_bits, value, scheme, arch), ..Default::default() };
        let ptx = compile_ptx_with_opts(source(), options).map_err(|e| nvrtc_error(format!("{e:?}")))?;
        Ok(ptx.to_src().into_bytes())
    })?;
    String::from_utf8(bytes).map_err(|_| nvrtc_error("the cached PTX is not text".into()))
}

/// The machine code of one module for one GPU architecture (`sm`, such as
/// `sm_90`), compiled by NVRTC or read from the cache in `dir`. A process
/// loads it without the driver's translation of PTX, which takes seconds a
/// module.
pub fn cubin_in(dir: Option<&std::path::Path>, key_bits: u32, value: ValueKind, scheme: Scheme, sm: &'static str) -> Result<Vec<u8>> {
    let path = dir.map(|d| cache_file(d, key_bits, value, scheme, sm));
    cached(path, || compile_cubin(source(), &compile_options(key_bits, value, scheme, sm)))
}

fn nvrtc_error(message: String) -> Error {
    Error::Device { device: "nvrtc".into(), message: format!("kernel compilation failed: {message}") }
}

/// The bytes in the cache file `path`, or else `compile`'s, then written there.
fn cached(path: Option<PathBuf>, compile: impl FnOnce() -> Result<Vec<u8>>) -> Result<Vec<u8>> {
    if let Some(bytes) = path.as_ref().and_then(|p| std::fs::read(p).ok()).filter(|b| !b.is_empty()) {
        return Ok(bytes);
    }
    let bytes = compile()?;
    if let Some(p) = &path {
        // The cache is an optimisation: a read-only home must not fail the call.
        // The file appears whole (written aside, then renamed); the aside name
        // is unique to this write, since two threads of one process may
        // compile the same module at once, and a reader must never find a
        // file another writer is still filling.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = p.with_extension(format!("tmp{}-{n}", std::process::id()));
        if std::fs::create_dir_all(p.parent().unwrap()).is_ok() && std::fs::write(&tmp, &bytes).is_ok() {
            let _ = std::fs::rename(&tmp, p);
        }
    }
    Ok(bytes)
}

/// NVRTC's machine code for `src` (cudarc's safe API returns PTX only).
fn compile_cubin(src: &str, options: &[String]) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result, sys};
    let src = std::ffi::CString::new(src).map_err(|_| nvrtc_error("a NUL byte in the sources".into()))?;
    let prog = result::create_program(&src, None).map_err(|e| nvrtc_error(format!("{e:?}")))?;
    // Safety: `prog` was created above and is destroyed once, after its last use.
    let out = unsafe {
        match result::compile_program(prog, options) {
            Err(e) => {
                let log = result::get_program_log(prog)
                    .map(|l| std::ffi::CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned())
                    .unwrap_or_default();
                Err(nvrtc_error(format!("{e:?}: {log}")))
            }
            Ok(()) => {
                let mut size = 0usize;
                sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .and_then(|()| {
                        let mut cubin = vec![0u8; size];
                        sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()).result().map(|()| cubin)
                    })
                    .map_err(|e| nvrtc_error(format!("{e:?}")))
                    // A virtual architecture yields no machine code.
                    .and_then(|c| if c.is_empty() { Err(nvrtc_error("no machine code (a compute_ architecture?)".into())) } else { Ok(c) })
            }
        }
    };
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// A module for `ctx`'s GPU: machine code for its exact architecture when
/// there is one and NVRTC makes it, else PTX, which the driver translates
/// when it loads it: seconds a module (the CUDA 13.0 ptxas took 2.2 s on
/// one) in every process whose driver cache does not hold the translation.
fn load_module(ctx: &Arc<CudaContext>, key_bits: u32, value: ValueKind, scheme: Scheme) -> Result<Arc<CudaModule>> {
    let dir = cache_dir();
    if let Some(sm) = sass_of(ctx) {
        // Any failure (an NVRTC or driver too old for the other) falls back to PTX.
        if let Ok(cubin) = cubin_in(dir.as_deref(), key_bits, value, scheme, sm) {
            if let Ok(module) = ctx.load_module(Ptx::from_binary(cubin)) {
                return Ok(module);
            }
        }
    }
    let ptx = ptx_in(dir.as_deref(), key_bits, value, scheme, arch_of(ctx)?)?;
    ctx.load_module(Ptx::from_src(ptx)).map_err(|e| super::driver_error(ctx.ordinal(), e))
}

/// Schemes that share a module: the scheme's code (parameters such as
/// Hashinator's team size are kernel arguments, not compile options).
type ModuleKey = (usize, u32, ValueKind, u32);

/// Loads the module for a key/value pair and scheme on a context (once per process).
pub(crate) fn kernels(ctx: &Arc<CudaContext>, key_bits: u32, value: ValueKind, scheme: Scheme) -> Result<Arc<Kernels>> {
    static LOADED: OnceLock<Mutex<HashMap<ModuleKey, Arc<Kernels>>>> = OnceLock::new();
    let map = LOADED.get_or_init(Default::default);
    let key = (ctx.ordinal(), key_bits, value, scheme.code());
    if let Some(k) = map.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(k.clone());
    }
    let dev = |e: cudarc::driver::DriverError| super::driver_error(ctx.ordinal(), e);
    let module = load_module(ctx, key_bits, value, scheme)?;
    let f = |name: &str| module.load_function(name).map_err(dev);
    let k = Arc::new(Kernels {
        insert: f("gh_insert")?,
        find: f("gh_find")?,
        contains: f("gh_contains")?,
        erase: f("gh_erase")?,
        collect_absent: f("gh_collect_absent")?,
        rehash: f("gh_rehash")?,
        export: f("gh_export")?,
        displacement: f("gh_displacement")?,
        gather_keys: f("gh_gather_keys")?,
        unpack_pairs: f("gh_unpack_pairs")?,
        // Linear and two-level modules have them (no failed look-ups of absent functions).
        region: if matches!(scheme, Scheme::Linear | Scheme::TwoLevel) { super::region::RegionKernels::load(ctx, &module, scheme == Scheme::Linear).map_err(dev)? } else { None },
        clean_extract: f("gh_clean_extract")?,
        unlocked: if matches!(scheme, Scheme::RobinHood | Scheme::Cuckoo | Scheme::TwoLevel) {
            Some(f("gh_insert_unlocked")?)
        } else {
            None
        },
        page: PageKernels { count: f("gh_page_count")?, scatter: f("gh_page_scatter")?, unpermute: f("gh_page_unpermute")? },
    });
    map.lock().unwrap_or_else(|p| p.into_inner()).insert(key, k.clone());
    Ok(k)
}

/// The virtual architectures [`arch_of`] picks from, oldest first.
pub const ARCHES: [&str; 8] =
    ["compute_70", "compute_75", "compute_80", "compute_86", "compute_89", "compute_90", "compute_100", "compute_120"];

/// The GPU architectures (`sm_XY`) whose machine code a module is compiled
/// to when the GPU is one of them ([`sass_of`]).
pub const SASS_ARCHES: [&str; 8] = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"];

/// The value kinds modules are compiled for: one per [`crate::Value`] type.
pub const VALUE_KINDS: [ValueKind; 6] =
    [ValueKind::U32, ValueKind::I32, ValueKind::F32, ValueKind::U64, ValueKind::I64, ValueKind::F64];

/// The exact architecture (`sm_XY`) of `ctx`'s GPU when it is one of
/// [`SASS_ARCHES`]; other GPUs load PTX.
pub fn sass_of(ctx: &Arc<CudaContext>) -> Option<&'static str> {
    let (major, minor) = ctx.compute_capability().ok()?;
    let name = format!("sm_{major}{minor}");
    SASS_ARCHES.iter().copied().find(|&a| a == name)
}

/// The virtual architecture (`compute_XY`) to compile for, from the device's compute capability.
pub fn arch_of(ctx: &Arc<CudaContext>) -> Result<&'static str> {
    let (major, minor) = ctx.compute_capability().map_err(|e| super::driver_error(ctx.ordinal(), e))?;
    Ok(match (major, minor) {
        (9, _) => "compute_90",
        (10, _) => "compute_100",
        (12, _) => "compute_120",
        (8, 9) => "compute_89",
        (8, 6) => "compute_86",
        (8, _) => "compute_80",
        (7, 5) => "compute_75",
        _ => "compute_70",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether NVRTC is missing here (then the test says so and passes).
    fn nvrtc_absent() -> bool {
        // Safety: only probes whether the library can be opened.
        let absent = !unsafe { cudarc::nvrtc::sys::is_culib_present() };
        if absent {
            eprintln!("skipped: NVRTC (libnvrtc.so) not found");
        }
        absent
    }

    /// Every module compiles for sm_90 with the NVRTC found at run time.
    #[test]
    fn every_module_compiles_with_nvrtc() {
        if nvrtc_absent() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("gpuhash-nvrtc-test-{}", std::process::id()));
        let mut modules = 0;
        for scheme in Scheme::ALL {
            for key_bits in [32, 64] {
                for kind in VALUE_KINDS {
                    let ptx = ptx_in(Some(&dir), key_bits, kind, scheme, "compute_90").unwrap();
                    for name in ["gh_insert", "gh_find", "gh_contains", "gh_erase", "gh_rehash", "gh_export", "gh_clean_extract", "gh_page_scatter"] {
                        assert!(ptx.contains(name), "{name} missing for {scheme} u{key_bits}/{kind:?}");
                    }
                    modules += 1;
                }
            }
        }
        // One cache entry per module.
        let entries = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(entries, modules);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Machine code for an H100/H200, cached beside the PTX under its own name.
    #[test]
    fn a_module_compiles_to_machine_code() {
        if nvrtc_absent() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("gpuhash-cubin-test-{}", std::process::id()));
        let cubin = cubin_in(Some(&dir), 32, ValueKind::U32, Scheme::TwoLevel, "sm_90").unwrap();
        assert_eq!(&cubin[..4], b"\x7fELF", "a cubin is an ELF image");
        let file = cache_file(&dir, 32, ValueKind::U32, Scheme::TwoLevel, "sm_90");
        assert_eq!(file.extension().unwrap(), "cubin");
        assert_eq!(std::fs::read(&file).unwrap(), cubin);
        assert_ne!(file, cache_file(&dir, 32, ValueKind::U32, Scheme::TwoLevel, "compute_90"));
        // A virtual architecture has no machine code: an error, not an empty file.
        assert!(cubin_in(None, 32, ValueKind::U32, Scheme::Linear, "compute_90").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
