//! Every default of `gpuhash bench`, in one place.
//!
//! Two presets: `quick` (the default: about a minute on a 2-core machine)
//! and `full` (the whole grid, meant for a GPU host with many cores). Flags
//! given on the command line replace single axes of the chosen preset.

use super::grid::{Batch, Mix, Op};

/// One grid preset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Preset {
    pub name: &'static str,
    pub ops: &'static [Op],
    pub key_bits: &'static [u32],
    pub value_bits: &'static [u32],
    pub loads: &'static [f64],
    /// Table sizes in slots.
    pub sizes: &'static [u64],
    /// Keys per timed call.
    pub batches: &'static [Batch],
    /// Timed repetitions (after the warm-up).
    pub reps: usize,
    /// Random cache-line reads per limit measurement.
    pub limit_reads: u64,
}

/// The default preset: small enough for a 2-core machine in about a minute
/// (the three peers and the 16-fold apply_sum batch dominate the time).
/// 2^18 slots is 2-4 MiB of table: it fits the LLC of most CPUs, so the
/// results are compared with the in-cache random-read rate.
pub(crate) const QUICK: Preset = Preset {
    name: "quick",
    ops: Op::ALL,
    key_bits: &[32, 64],
    value_bits: &[32],
    loads: &[0.5, 0.8, 0.95, 1.05],
    sizes: &[1 << 18],
    batches: &[Batch::All],
    reps: 3,
    limit_reads: 1 << 22,
};

/// The whole grid: every op, key and value width, loads from 0.5 to 0.95
/// plus two oversubscribed loads, a table far larger than any cache, and
/// besides whole-load calls a batch of 2^20 keys against the filled table
/// (a 2^20-key call into 2^27 slots is the small-batch case of a GPU).
pub(crate) const FULL: Preset = Preset {
    name: "full",
    ops: Op::ALL,
    key_bits: &[32, 64],
    value_bits: &[32, 64],
    loads: &[0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.05, 1.2],
    sizes: &[1 << 22, 1 << 26],
    batches: &[Batch::All, Batch::Keys(1 << 20)],
    reps: 5,
    limit_reads: 1 << 26,
};

/// Base seed of the key generator (each repetition derives its own).
pub(crate) const SEED: u64 = 0x6270_6861_7368_2031;
/// Where results go unless `--out` says otherwise.
pub(crate) const OUT_DIR: &str = "bench-out";
/// Untimed repetitions before the timed ones.
pub(crate) const WARMUP_REPS: usize = 1;
/// Milliseconds of GPU work right before each timed wgpu call (`--warm-ms`).
/// Vulkan drivers lower the clocks after an idle second or so (an NVIDIA
/// H200 drops from 1980 to 345 MHz while the bench prepares the next case
/// on the host) and raise them again only under sustained work, so a short
/// call timed after the preparation would measure the idle clock.
pub(crate) const WGPU_WARM_MS: u64 = 500;
/// Occurrences of each distinct key in the `apply_sum` batch.
pub(crate) const MULTIPLICITY: u64 = 16;
/// The exponent of `apply_zipf`'s draws.
pub(crate) const ZIPF_EXPONENT: f64 = 1.2;
/// Copies of `apply_hot`'s one hot key.
pub(crate) const HOT_COPIES: u64 = 1 << 24;
/// Split of the `mixed` workload, percent of operations.
pub(crate) const MIX: Mix = Mix { insert: 20, erase: 10, find: 70 };
/// Operations per round of the `mixed` workload: each round is one insert,
/// one erase and one find call, so rounds of this size interleave the three
/// kinds finely while keeping every call a real bulk call.
pub(crate) const MIX_ROUND_OPS: u64 = 1 << 16;
/// `clean_reinsert` / `rehash_reinsert` (Hashinator, fig. 10): the load the
/// table is filled to (whatever `--loads` says), the fraction of its keys
/// then erased, and the fraction of those inserted again in the timed part.
pub(crate) const CLEAN_LOAD: f64 = 0.9;
pub(crate) const CLEAN_ERASED: f64 = 0.2;
pub(crate) const CLEAN_REINSERTED: f64 = 0.5;
/// The scheme used when `--scheme` is not given (`--scheme all` runs every
/// scheme of `gpuhash::Scheme::ALL`).
pub(crate) const SCHEME: &str = "linear";
/// Resident pages of a paged case (`--oversub`) unless `--resident` says
/// otherwise: three let the upload of one page, the kernels on another and
/// the write-back of a third overlap.
pub(crate) const RESIDENT: u32 = 3;
/// Largest `--resident` and `--oversub`: their product is the page count,
/// and thousands of pages of a few slots each measure only the bookkeeping.
pub(crate) const MAX_RESIDENT: u32 = 64;
pub(crate) const MAX_OVERSUB: u64 = 1024;
/// Loads above this are refused as typos (1.2 is already a 20 % overflow).
pub(crate) const MAX_LOAD: f64 = 4.0;
/// Smallest table accepted (the library's minimum).
pub(crate) const MIN_SLOTS: u64 = 16;
/// Largest table accepted: 2^34 slots is 256 GiB of 16-byte slots.
pub(crate) const MAX_SLOTS: u64 = 1 << 34;

/// Last-level cache size assumed when /sys does not say.
pub(crate) const LLC_FALLBACK_BYTES: u64 = 32 << 20;
/// The "beyond the LLC" limit buffers are this many times the LLC...
pub(crate) const LIMIT_LLC_MULTIPLE: u64 = 8;
/// ...but at least this large, so DRAM pages dominate even on small caches,
pub(crate) const LIMIT_LARGE_MIN_BYTES: u64 = 256 << 20;
/// ...and at most this large, to stay friendly to small machines.
pub(crate) const LIMIT_LARGE_MAX_BYTES: u64 = 2 << 30;
/// The in-cache limit buffer is this fraction of the LLC (so it stays in
/// cache while other data passes through).
pub(crate) const LIMIT_SMALL_LLC_DIVISOR: u64 = 4;
/// Random reads per GPU limit measurement at least: fewer finish in well
/// under a millisecond, too short to time reliably.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) const GPU_LIMIT_MIN_READS: u64 = 1 << 24;
/// Bytes per cache line, the unit of the random-read limit.
pub(crate) const CACHE_LINE_BYTES: u64 = 64;
/// Bytes per bucket of the gpuhash layout (what one probe step reads).
pub(crate) const BUCKET_BYTES: f64 = 32.0;

/// The defaults as shown at the end of `gpuhash bench --help`.
pub(crate) fn help_text() -> String {
    let show = |p: &Preset| {
        let ops: Vec<&str> = p.ops.iter().map(|o| o.name()).collect();
        let sizes: Vec<String> = p.sizes.iter().map(|s| format!("2^{}", s.trailing_zeros())).collect();
        let batches: Vec<String> = p.batches.iter().map(|b| b.label()).collect();
        format!(
            "  {}: ops {}; keys {:?}; values {:?}; loads {:?}; sizes {}; batches {}; reps {}",
            p.name,
            ops.join(","),
            p.key_bits,
            p.value_bits,
            p.loads,
            sizes.join(","),
            batches.join(","),
            p.reps
        )
    };
    format!(
        "Presets (flags replace single axes):\n{}\n{}\nOther defaults: --seed {SEED:#x}, --out {OUT_DIR}, \
         --multiplicity {MULTIPLICITY}, --mix {}:{}:{}, --scheme {SCHEME}, {WARMUP_REPS} warm-up repetition, --warm-ms {WGPU_WARM_MS}; \
         no --oversub (unpaged tables), --resident {RESIDENT} with it",
        show(&QUICK),
        show(&FULL),
        MIX.insert,
        MIX.erase,
        MIX.find
    )
}
