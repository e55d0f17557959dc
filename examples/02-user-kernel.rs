//! Your own CUDA kernel inserting into and reading from a gpuhash table.
//!
//! The kernel includes `gpuhash.cuh` and receives the table's device view by
//! value; NVRTC compiles it at run time. Results are checked against a CPU count.
//!
//! Run: `cargo run --release --example 02-user-kernel`

#[cfg(feature = "cuda")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
    use gpuhash::backend::cuda::kernels::{arch_of, with_device_header};
    use gpuhash::{Device, HashTable};

    if let Err(why) = Device::Cuda(0).check_available() {
        eprintln!("skipped: no CUDA device ({why})");
        if std::env::var_os("GPUHASH_REQUIRE_CUDA").is_some() {
            std::process::exit(1);
        }
        return Ok(());
    }

    const SOURCE: &str = r#"
#include "gpuhash.cuh"
typedef gh::TableView<unsigned int, unsigned int> Counts;

// Counts occurrences: a present key gets +1, a new key starts at 1.
extern "C" __global__ void count(Counts t, const unsigned int* words, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) t.insert(words[i], 1u, gh::MODE_APPLY, gh::REDUCE_SUM);
}

// Writes each key's count, or 0 when absent.
extern "C" __global__ void lookup(Counts t, const unsigned int* keys, unsigned long long n, unsigned int* out) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int c = 0;
    out[i] = t.find(keys[i], &c) ? c : 0u;
}
"#;

    // Words drawn from a small vocabulary, including the all-ones key.
    let n = 1 << 20;
    let words: Vec<u32> = (0..n as u64)
        .map(|i| {
            let r = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as u32 % 5000;
            if r == 0 { u32::MAX } else { r * 31 }
        })
        .collect();
    let mut expected = std::collections::HashMap::new();
    for &w in &words {
        *expected.entry(w).or_insert(0u32) += 1;
    }

    let mut table: HashTable<u32, u32> = HashTable::<u32, u32>::builder().device(Device::Cuda(0)).capacity(1 << 14).build()?;
    let cuda = table.cuda_mut().expect("a CUDA table");
    let stream = cuda.stream().clone();
    let ctx = stream.context().clone();
    let opts = CompileOptions { arch: Some(arch_of(&ctx)?), ..Default::default() };
    let ptx = compile_ptx_with_opts(with_device_header(SOURCE), opts)?;
    let module = ctx.load_module(ptx)?;
    let (count, lookup) = (module.load_function("count")?, module.load_function("lookup")?);

    let words_dev = stream.clone_htod(&words)?;
    let view = cuda.view();
    let n64 = n as u64;
    // 256 threads per block: `insert` carries every scheme's code, more
    // registers than a 1024-thread block may have (see kernels/gpuhash.cuh).
    let blocks = |n: usize| LaunchConfig { grid_dim: (n.div_ceil(256) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let cfg = blocks(n);
    let mut launch = stream.launch_builder(&count);
    launch.arg(&view).arg(&words_dev).arg(&n64);
    // Safety: the arguments match `count`'s parameters.
    unsafe { launch.launch(cfg) }?;
    cuda.resync()?; // let len() see what the kernel inserted

    let keys: Vec<u32> = expected.keys().copied().chain([7, 8, 9]).collect();
    let keys_dev = stream.clone_htod(&keys)?;
    let mut out_dev = stream.alloc_zeros::<u32>(keys.len())?;
    let nk = keys.len() as u64;
    let mut launch = stream.launch_builder(&lookup);
    launch.arg(&view).arg(&keys_dev).arg(&nk).arg(&mut out_dev);
    // Safety: the arguments match `lookup`'s parameters.
    unsafe { launch.launch(blocks(keys.len())) }?;
    let out = stream.clone_dtoh(&out_dev)?;

    for (k, got) in keys.iter().zip(&out) {
        let want = expected.get(k).copied().unwrap_or(0);
        if *got != want {
            return Err(format!("key {k}: kernel counted {got}, expected {want}").into());
        }
    }
    assert_eq!(table.len(), expected.len() as u64);
    println!("user kernels counted {} words into {} distinct keys on {}: all correct", n, table.len(), table.device());
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("skipped: built without the `cuda` feature");
}
