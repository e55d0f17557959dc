//! The constants the CUDA sources share with the Rust core, emitted as a
//! header so both sides cannot drift: `kernels/gpuhash_constants.cuh` is this
//! text, and a test fails if the committed file differs.

use super::{capacity, cuckoo, hash, layout, probe, scheme::Scheme};

/// The text of `kernels/gpuhash_constants.cuh`.
pub fn cuda_header() -> String {
    format!(
        "// Generated from src/core/constants.rs: do not edit by hand.\n\
         // `cargo test` fails if this file and the Rust constants differ.\n\
         #pragma once\n\
         #define GH_MIX_MUL_1 0x{:016x}ull\n\
         #define GH_MIX_MUL_2 0x{:016x}ull\n\
         #define GH_DEFAULT_SEED 0x{:016x}ull\n\
         #define GH_FIBONACCI_MUL 0x{:016x}ull\n\
         #define GH_BUCKET_BYTES {}\n\
         #define GH_DEFAULT_MAX_PROBE_BUCKETS {}ull\n\
         #define GH_MIN_SLOTS {}ull\n\
         #define GH_SCHEME_LINEAR {}\n\
         #define GH_SCHEME_HASHINATOR {}\n\
         #define GH_SCHEME_ROBIN_HOOD {}\n\
         #define GH_SCHEME_CUCKOO {}\n\
         #define GH_SCHEME_TWO_LEVEL {}\n\
         {}",
        hash::MIX_MUL_1,
        hash::MIX_MUL_2,
        hash::DEFAULT_SEED,
        hash::FIBONACCI_MUL,
        layout::BUCKET_BYTES,
        probe::DEFAULT_MAX_PROBE_BUCKETS,
        capacity::MIN_SLOTS,
        Scheme::Linear.code(),
        Scheme::Hashinator { team: 0 }.code(),
        Scheme::RobinHood.code(),
        Scheme::Cuckoo.code(),
        Scheme::TwoLevel.code(),
        cuckoo::cuda_defines(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn committed_header_matches_the_rust_constants() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/gpuhash_constants.cuh");
        // A test binary run away from the sources (the GPU bundle) has nothing to compare.
        let Ok(committed) = std::fs::read_to_string(path) else {
            println!("skipped: {path} is not here (this binary runs outside the source tree)");
            return;
        };
        let expected = super::cuda_header();
        if committed != expected {
            if std::env::var_os("GPUHASH_BLESS").is_some() {
                std::fs::write(path, &expected).unwrap();
                return;
            }
            panic!("{path} is out of date; rerun with GPUHASH_BLESS=1 to regenerate it");
        }
    }
}
