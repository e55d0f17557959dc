//! The constants the GPU sources share with the Rust core, emitted so both
//! sides cannot drift: `kernels/gpuhash_constants.cuh` is [`cuda_header`]'s
//! text (a test fails if the committed file differs), and the WGSL shaders
//! get [`wgsl_header`] prepended when their pipelines are created (they
//! define none of these constants themselves; a test checks that too).

use super::layout::Word;
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
         #define GH_ROUTE_SALT 0x{:016x}ull\n\
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
        hash::ROUTE_SALT,
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

/// The WGSL constants for slots of word type `W` (8 or 16 bytes), prepended
/// to `kernels/wgsl/*.wgsl`. WGSL has no 64-bit integers, so every 64-bit
/// constant is split into its low and high 32-bit halves (`_LO`, `_HI`), and
/// a slot is `GH_SLOT_WORDS` 32-bit words in the order of the packed word's
/// bytes (little-endian: key field first, then the value field).
pub fn wgsl_header<W: Word>() -> String {
    let split = |name: &str, v: u64| format!("const {name}_LO: u32 = 0x{:08x}u;\nconst {name}_HI: u32 = 0x{:08x}u;\n", v as u32, (v >> 32) as u32);
    // The markers' 32-bit words, in memory order.
    let words = |w: W| -> Vec<u32> {
        let (k, v) = (w.key(), w.value());
        let field = W::FIELD_BITS / 32;
        let mut out = Vec::new();
        for f in [k, v] {
            for i in 0..field {
                out.push((f >> (32 * i)) as u32);
            }
        }
        out
    };
    let slot_words = W::BYTES / 4;
    let mut s = String::from(
        "// Generated from src/core/constants.rs (wgsl_header) when the pipelines are created.\n",
    );
    s += &split("GH_MIX_MUL_1", hash::MIX_MUL_1);
    s += &split("GH_MIX_MUL_2", hash::MIX_MUL_2);
    // The WGSL xor-shift takes the high word's bits into the low word only.
    const _: () = assert!(hash::MIX_SHIFT > 32 && hash::MIX_SHIFT < 64);
    s += &format!("const GH_MIX_SHIFT: u32 = {}u;\n", hash::MIX_SHIFT);
    s += &format!("const GH_BUCKET_BYTES: u32 = {}u;\n", layout::BUCKET_BYTES);
    s += &format!("const GH_SLOT_BYTES: u32 = {}u;\n", W::BYTES);
    s += &format!("const GH_SLOT_WORDS: u32 = {slot_words}u;\n");
    s += &format!("const GH_FIELD_WORDS: u32 = {}u;\n", W::FIELD_BITS / 32);
    s += &format!("const GH_SLOTS_PER_BUCKET: u32 = {}u;\n", W::slots_per_bucket());
    s += &split("GH_EMPTY_KEY", W::empty_key_field());
    s += &split("GH_TOMBSTONE_KEY", W::tombstone_key_field());
    for (name, w) in [("GH_EMPTY_WORD", W::EMPTY), ("GH_TOMBSTONE_WORD", W::TOMBSTONE)] {
        // Four words each, so shaders name them all; 8-byte slots use two.
        let mut ws = words(w);
        ws.resize(4, 0);
        for (i, x) in ws.into_iter().enumerate() {
            s += &format!("const {name}_{i}: u32 = 0x{x:08x}u;\n");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn wgsl_header_carries_the_layout() {
        use crate::core::layout::Word;
        let h8 = super::wgsl_header::<u64>();
        assert!(h8.contains("const GH_SLOT_WORDS: u32 = 2u;"));
        assert!(h8.contains("const GH_TOMBSTONE_WORD_0: u32 = 0xfffffffeu;"));
        assert!(h8.contains("const GH_EMPTY_KEY_HI: u32 = 0x00000000u;"), "8-byte slots have a 32-bit key field");
        let h16 = super::wgsl_header::<u128>();
        assert!(h16.contains("const GH_SLOT_WORDS: u32 = 4u;"));
        assert!(h16.contains("const GH_TOMBSTONE_WORD_1: u32 = 0xffffffffu;"));
        assert!(h16.contains(&format!("const GH_MIX_MUL_1_LO: u32 = 0x{:08x}u;", crate::core::hash::MIX_MUL_1 as u32)));
        assert_eq!(<u128 as Word>::TOMBSTONE.key(), u64::MAX - 1);
    }

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
