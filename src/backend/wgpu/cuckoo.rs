//! [`Scheme::Cuckoo`](crate::Scheme::Cuckoo) and
//! [`Scheme::TwoLevel`](crate::Scheme::TwoLevel) on wgpu
//! (`kernels/wgsl/cuckoo.wgsl`, one module switched by `GH_TWO_LEVEL`):
//! the constants its module takes from the core, the size of its words
//! beside the occupancy bits, the dispatches that place the keys a batch's
//! first phase left without a slot, and where a key sits among its
//! candidates. The first phase claims keys by compare-exchange on their key
//! field where one atomic holds it (8-byte slots; 16-byte ones with 64-bit
//! atomics) and defers those whose candidates are all full; only those
//! elect representatives. 16-byte slots on 32-bit atomics elect them for
//! every key and claim slots by their occupancy bits. Candidates, stash,
//! regions and overflow are the CPU's ([`crate::core::cuckoo`]), so lookups
//! agree with it; which slot a key takes may differ. Two-level regions are
//! never rebuilt here (every region keeps seed number 0): a key its region
//! cannot place goes to the overflow.

use super::gpu::{Bindings, Kernel, Params, Range, Work};
use crate::core::cuckoo::{
    candidate, choices, region_candidate, stash_buckets, Regions, LARGE_REGIONS_FROM, LARGE_REGION_BUCKETS, MAX_EVICTIONS, OVERFLOW_PROBE,
    OVERFLOW_SALT, OVERFLOW_SHARE, REGION_BUCKETS, REGION_CAND_BITS, REGION_SALT, SALTS, STASH_PAIRS, WALK_SALT, WALK_STEP_MUL,
};
use crate::core::hash::mix64;
use crate::Result;

/// Keys one dispatch of the serial phase places at most: one per
/// invocation of its single workgroup, in turn (an invocation that placed
/// several keys in one dispatch lost moves on lavapipe).
const SERIAL_KEYS: u32 = super::gpu::WORKGROUP;

/// Scratch words the placement phase uses before its list of keys (count,
/// cursor, moved flag, keys that lost a lock, keys without a path):
/// `kernels/wgsl/cuckoo.wgsl` PENDING_LIST.
pub(super) const SCRATCH_HEADER: usize = 5;
const PENDING_COUNT: u64 = 0;
const PENDING_LOST: u64 = 3;
const PENDING_NONE: u64 = 4;

/// Moves a path planned in a parallel round has at most: three words, four
/// bits a move (`kernels/wgsl/cuckoo.wgsl` path_move), past the default
/// probe limit ([`crate::core::cuckoo::DEFAULT_EVICTIONS`]), so that a key
/// whose parallel walks found no path goes to the stash (two-level: the
/// overflow) without walking
/// again one key at a time. Paths longer than this (a larger probe limit)
/// are the serial phase's.
const PARALLEL_MOVES: u64 = 21;

/// Words of a planned path.
const PATH_WORDS: u64 = 3;

const _: () = assert!(crate::core::cuckoo::DEFAULT_EVICTIONS <= PARALLEL_MOVES && PARALLEL_MOVES == 5 + 8 * (PATH_WORDS - 1));

/// Listed keys one run of parallel rounds plans at once: their path words
/// (three each) are a work buffer taken before an insert changes anything.
/// Large, so that the pending keys of a chunk rarely take two windows, each
/// with its own rounds.
const WINDOW: usize = 1 << 22;

/// Parallel rounds of one window at most; keys still losing locks after
/// them are the serial phase's.
const MAX_ROUNDS: usize = 32;

/// Parallel rounds recorded per read-back of the keys that lost a lock:
/// most windows are done in 5 to 8 rounds, and a round with nothing left
/// to place only scans the window's path words.
const ROUNDS_PER_READ: usize = 3;

// One mask word holds the stash; a path move names a slot of its bucket
// and a candidate in two bits each.
const _: () = assert!(STASH_PAIRS <= 32);
const _: () = assert!(crate::core::layout::BUCKET_BYTES / 8 <= 4 && crate::core::cuckoo::MAX_CHOICES <= 3);

/// The module's constants for slots of `slot_bytes`, for the two-level
/// scheme if `two_level`.
pub(super) fn wgsl_constants(slot_bytes: usize, two_level: bool) -> String {
    let mut s = format!("const GH_TWO_LEVEL: bool = {two_level};\n");
    let mut def = |name: &str, x: u64| s += &format!("const {name}: u32 = 0x{:08x}u;\n", x as u32);
    def("GH_CUCKOO_CHOICES", choices(slot_bytes) as u64);
    def("GH_CUCKOO_STASH_PAIRS", STASH_PAIRS);
    def("GH_CUCKOO_MAX_EVICTIONS", MAX_EVICTIONS);
    def("GH_CUCKOO_SERIAL_KEYS", SERIAL_KEYS as u64);
    def("GH_CUCKOO_PARALLEL_MOVES", PARALLEL_MOVES);
    def("GH_CUCKOO_PATH_WORDS", PATH_WORDS);
    let mut split = |name: &str, x: u64| {
        def(&format!("{name}_LO"), x);
        def(&format!("{name}_HI"), x >> 32);
    };
    for (j, &salt) in SALTS.iter().enumerate() {
        split(&format!("GH_CUCKOO_SALT_{j}"), salt);
    }
    split("GH_CUCKOO_WALK_SALT", WALK_SALT);
    split("GH_CUCKOO_WALK_STEP_MUL", WALK_STEP_MUL);
    split("GH_TL_REGION_SALT", REGION_SALT);
    split("GH_TL_OVERFLOW_SALT", OVERFLOW_SALT);
    for (name, x) in [
        ("GH_TL_REGION_BUCKETS", REGION_BUCKETS),
        ("GH_TL_LARGE_REGION_BUCKETS", LARGE_REGION_BUCKETS),
        ("GH_TL_LARGE_REGIONS_FROM", LARGE_REGIONS_FROM),
        ("GH_TL_OVERFLOW_SHARE", OVERFLOW_SHARE),
        ("GH_TL_OVERFLOW_PROBE", OVERFLOW_PROBE),
        ("GH_TL_CAND_BITS", REGION_CAND_BITS as u64),
        ("GH_TL_CAND_MASK", (1 << REGION_CAND_BITS) - 1),
    ] {
        def(name, x);
    }
    s
}

// The shader computes a region's candidates with three fixed 21-bit fields
// of one 64-bit hash, and its geometry in 32-bit words.
const _: () = assert!(REGION_CAND_BITS == 21 && LARGE_REGIONS_FROM <= u32::MAX as u64);

/// 32-bit words of the `occupied` buffer: a bit per slot, then a lock bit
/// per bucket and one for the stash, then the stash mask (cuckoo) or a
/// spill count per region (two-level: its keys in the overflow).
pub(super) fn occupied_words(slots: u64, buckets: u64, two_level: bool) -> u64 {
    let own = if two_level { Regions::of(buckets).count } else { 1 };
    slots.div_ceil(32) + (buckets + 1).div_ceil(32) + own
}

/// Work buffers of the second phase.
pub(super) struct Placement<'a> {
    /// The de-duplication table, done with by then: header and list.
    pub scratch: &'a wgpu::Buffer,
    /// Path words of a window ([`path_bytes`]).
    pub paths: &'a wgpu::Buffer,
    /// Read-back buffer of at least 4 bytes.
    pub staging: &'a wgpu::Buffer,
}

/// Bytes of the path words of a chunk of `n` items.
pub(super) fn path_bytes(n: usize) -> u64 {
    n.min(WINDOW) as u64 * PATH_WORDS * 4
}

/// Scratch word `at`, read back after the work recorded so far.
async fn read_word(w: &mut Work<'_>, b: &Placement<'_>, at: u64) -> Result<u32> {
    Ok(read_words(w, b, at, 1).await?[0])
}

/// `n` scratch words from `at` on, read back after the work recorded so far.
async fn read_words(w: &mut Work<'_>, b: &Placement<'_>, at: u64, n: usize) -> Result<Vec<u32>> {
    w.copy_range(b.scratch, at * 4, b.staging, 0, n as u64 * 4);
    w.flush_and_read(b.staging, n).await
}

/// Records and runs the second phase of an insert chunk, after the first
/// (`claim_reps`, or `dedupe_pending` where keys are claimed directly):
/// the representatives left without a slot are listed (the host reads how
/// many; returns whether there were any) and placed by parallel rounds of
/// eviction paths under bucket locks, window by window, while keys lose
/// locks (a few rounds per read-back), then once more for the keys that
/// found no path. Keys with still no path within the probe limit take
/// free spill slots (the stash, or the two-level overflow) or are refused; keys still losing locks are listed
/// again and placed one at a time ([`SERIAL_KEYS`] per dispatch). Every
/// representative's slot is looked up again if a path moved keys.
pub(super) async fn place_pending(w: &mut Work<'_>, bufs: &Placement<'_>, p: Params, b: &Bindings<'_>) -> Result<bool> {
    w.clear_range(bufs.scratch, SCRATCH_HEADER as u64 * 4);
    w.dispatch(Kernel::CollectPending, p, b).await?;
    let pending = read_word(w, bufs, PENDING_COUNT).await? as usize;
    if pending == 0 {
        return Ok(false);
    }
    let planned = Bindings { flags: Some(Range::all(bufs.paths)), ..*b };
    for start in (0..pending).step_by(WINDOW) {
        let n = (pending - start).min(WINDOW);
        w.clear_range(bufs.paths, path_bytes(n));
        let q = Params { n: n as u32, base: start as u32, ..p };
        w.clear_at(bufs.scratch, PENDING_NONE * 4, 4);
        let mut retried = false;
        loop {
            let mut left = vec![0, 0];
            for _ in 0..MAX_ROUNDS.div_ceil(ROUNDS_PER_READ) {
                for _ in 0..ROUNDS_PER_READ {
                    w.clear_at(bufs.scratch, PENDING_LOST * 4, 4);
                    w.dispatch(Kernel::PlanPaths, q, &planned).await?;
                    w.dispatch(Kernel::ApplyPaths, q, &planned).await?;
                }
                // The last round's count (none lost: none left to plan), and the keys without a path.
                left = read_words(w, bufs, PENDING_LOST, 2).await?;
                if left[0] == 0 {
                    break;
                }
            }
            if retried || left[1] == 0 {
                break;
            }
            // Keys without a path walk once more, the others placed.
            retried = true;
            w.clear_at(bufs.scratch, PENDING_NONE * 4, 4);
            w.dispatch(Kernel::RetryNoPath, q, &planned).await?;
        }
    }
    w.dispatch(Kernel::StashNoPath, p, b).await?;
    // Count and cursor start again; the moved flag stays.
    w.clear_range(bufs.scratch, 8);
    w.dispatch(Kernel::CollectPending, p, b).await?;
    let left = read_word(w, bufs, PENDING_COUNT).await?;
    w.dispatch_times(Kernel::EvictSerial, Params { n: 1, ..p }, b, left.div_ceil(SERIAL_KEYS)).await?;
    w.dispatch(Kernel::Relocate, p, b).await?;
    Ok(true)
}

/// Where `key` in `slot` sits: the index of its candidate bucket, or the
/// number of candidates for a stash or overflow slot (as the CPU reports it).
pub(super) fn displacement(key: u64, slot: u64, buckets: u64, seed: u64, slot_bytes: usize, two_level: bool) -> u64 {
    let spb = (crate::core::layout::BUCKET_BYTES / slot_bytes) as u64;
    let d = choices(slot_bytes);
    let b = slot / spb;
    if two_level {
        // Seed number 0: regions are never rebuilt on wgpu.
        let g = Regions::of(buckets);
        let r = g.region(key, seed);
        let h = mix64(key, Regions::region_seed(seed, r, 0));
        return (0..d).position(|j| r * g.buckets + region_candidate(h, j, g.buckets) == b).unwrap_or(d) as u64;
    }
    let main = buckets - stash_buckets(buckets, spb);
    (0..d).position(|j| candidate(key, seed, j, main) == b).unwrap_or(d) as u64
}
