//! The region build: large batches of the linear and two-level schemes
//! inserted one region (64 KiB of buckets) per thread block in shared memory.
//!
//! Inserting key by key costs each key a random compare-and-swap in device
//! memory (the CAS limit, about 16 G/s on an H200). Sorting the batch by
//! region first turns those into shared-memory work, and the table moves
//! through device memory once each way, coalesced. The result is a table the
//! plain kernel could have built: within a region the same first-EMPTY-slot
//! rule holds, and keys whose sequence leaves their region continue in the
//! next one (`kernels/bulk.cu`, "region build").
//!
//! The sort is a radix partition of the region index in one pass (up to 256
//! regions) or two (high digit, then low digit within each high bin). Each
//! pass is one scatter that ranks a tile of keys by bin in shared memory,
//! reserves the tile's range of each bin (a global atomic per bin and tile,
//! not per key) and writes runs from a shared-memory grouping while the
//! next tile streams in. Where a batch has enough keys per region, the bins
//! are open: each region gets its mean share of places and eight standard
//! deviations of a uniform hash's spread more, the scatters fill them from
//! their starts, and no histogram pass is needed. A batch that overflows a
//! bin (skewed keys) leaves the table as it was and is partitioned again
//! with packed bins: one histogram of the regions and its prefix sum serve
//! both passes, so region r's pairs lie exactly at `offsets[r]..offsets[r +
//! 1]` (see [`open_bin`]).
//!
//! **Building a region.** A block loads its region (streaming it into shared
//! memory while it counts its bin's keys per home bucket; a table the host
//! knows to be all EMPTY, one created or cleared with no insert and no
//! `view()` handed out since, is not read at all). If the region is
//! EMPTY, a scan of those counts gives every key its slot directly: keys in
//! order of home bucket fill runs, exactly as first-EMPTY probing lays them
//! out, with no probe walking a cluster however full the region ends (at load
//! 0.9 this is 4x faster than probing in shared memory). Keys that run past
//! the region's end take the first EMPTY slots of the next region
//! (`gh_region_spill`). Regions that already hold keys, and bins with a
//! repeated key, take shared-memory probing with atomics (the plain rules,
//! a whole bucket compared per step), and what those settle nowhere in the
//! region goes to a plain insert with a warp per key (`gh_region_deferred`:
//! these keys' sequences are the table's longest, crossing region ends),
//! launched with the build and counted on the device, so the host reads the
//! counters once for the whole batch.
//!
//! **Two-level tables** take the same partition: a build region holds one
//! two-level region (four small ones in tables under 2^20 buckets), and a
//! key's candidates all lie in its own region. A block claims free
//! candidate slots with shared-memory CASes in candidate order (so copies
//! of a key meet in one slot), then sends each key whose candidates were
//! all full on a random walk of exchanges. In a table that was empty, a
//! walk that gives up defers the pair in its hand; otherwise (and in
//! insert-or-apply batches, from the walks' state) one warp places the
//! region's waiting keys by a breadth-first search over eviction paths of
//! up to six moves (four for 16-byte slots; `kernels/bulk.cu`, "two-level
//! region build"). What is left goes to the plain kernel: a free
//! candidate slot, else the overflow, and a walk or a rebuild of the region
//! with a new seed only when the overflow is full.
//!
//! **Skewed insert-or-apply batches.** A region's bin is one block's work,
//! so a key repeated millions of times (zipf keys, one hot key) kept one
//! block busy long after the others were done: zipf(1.2) keys aggregated
//! 7x slower than uniform ones. The first scan of the histogram therefore
//! checks an insert-or-apply batch for a region with more keys than a fair
//! share of the blocks that build at once. If there is one, the copies of
//! a key within each pass-1 tile are combined into one pair (a table in
//! shared memory, the values reduced into the first copy; every reduction
//! is commutative), in the regions of an eighth of that share or more, and
//! a second histogram and scan count the combined tiles. Uniform batches
//! are not combined: a shared-memory claim for every key doubled the
//! partition's time. The report does not count merged copies: each
//! position is a new key (counted exactly), refused (found by the search
//! below), or else a copy of a stored or earlier key.
//!
//! **Scratch memory is kept for reuse.** The partition needs two copies of
//! the batch as words binned by region (open bins take up to a quarter
//! more) plus a list of deferred words: up to `3.5 * n * word` bytes for `n`
//! keys (1.6 GB for 2^26 u32 pairs). Batch positions are not
//! carried along: the few keys deferred to the plain kernel travel as pairs,
//! and if the table refuses any of them, a search of the batch for those
//! keys finds their positions. Allocating that inside every call cost more than the build, so a
//! build takes its device's scratch from a per-device cache, grows it when
//! the batch needs more, and puts it back after: later builds on the same
//! device (by any table) reuse it, and it stays allocated until
//! [`release_scratch`] frees it.
//!
//! **When it runs.** A batch of at least a sixteenth of the table's slots
//! (into a two-level table, where the plain kernel leaves more keys to its
//! locked insert the fuller the table: a 256th from 75% full, 85% for u64
//! pairs; for u32 pairs a 2048th from 95%), into a
//! table of two regions or more, that leaves the table at most 96%
//! full; insert-or-apply batches, which mostly repeat keys, whenever the
//! table is at most 96% full before, in chunks of up to max(4 * slots,
//! 2^26) keys where the device has room for their scratch, else
//! max(slots, 2^26) (see [`chunk_len`] for the figures). If the scratch cannot be
//! allocated, the batch takes the plain kernel. The table's
//! [`RegionBuild`] setting turns the region build off, or takes it for
//! every batch that suits it whatever the load (the tests use that to reach
//! it at every load, and to reach the two-pass partition on their small
//! tables).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, CudaView, DeviceRepr, DriverError, LaunchConfig,
    PushKernelArg,
};

use super::CudaTable;
use crate::backend::{InsertMode, RawInsert};
use crate::core::keys::{Key, Value};
use crate::core::layout::{Word, BUCKET_BYTES};
use crate::{Device, Error, RegionBuild, Result, Scheme};

/// Bytes of table one block builds: 64 KiB leaves room for three blocks per
/// SM in the 228 KiB of an H100/H200, and makes 2^27 eight-byte slots 16 Ki
/// regions, enough to fill the GPU.
const REGION_BYTES: u64 = 64 << 10;
/// Buckets per region.
const REGION_BUCKETS: u64 = REGION_BYTES / BUCKET_BYTES as u64;
/// Threads per block of the partition and build kernels (`GH_PART_THREADS`).
const THREADS: u32 = 512;
/// Regions sorted in one partition pass; more take two. (Measured on an
/// H200, `bench-results/h200-apply/one_pass_sweep.txt`: for 1024 and 2048
/// regions, two passes beat one.)
const ONE_PASS_REGIONS: u64 = 256;
/// Most regions: bins of a pass (at most 2^12) are u16 in the kernels.
const MAX_REGIONS: u64 = 1 << 24;
/// Partition blocks per SM: as many as are resident at a time (equal
/// slices, so one wave).
const PART_BLOCKS_PER_SM: u64 = 3;
/// Pass-2 blocks, in waves of `PART_BLOCKS_PER_SM` blocks an SM: slices
/// small enough to even out the bins' sizes (measured on an H200: 8 waves
/// against 1 took u64 inserts' pass 2 from 0.79 to 0.65 ms, u32's from 0.88
/// to 0.82).
const SCATTER2_WAVES: u64 = 8;
/// Threads of a histogram block that has its SM to itself
/// (`HIST_WIDE_THREADS` in the kernels).
const HIST_WIDE_THREADS: u32 = 1024;
/// Most regions the histogram counts in shared memory (128 KiB); larger
/// tables count with a global atomic per key.
const LOCAL_HIST_REGIONS: u64 = 1 << 15;
/// Batches smaller than this share of the table's slots take the plain
/// kernel: a region build moves the whole table twice whatever the batch.
const MIN_BATCH_SHARE: u64 = 16;
/// The smallest batch, as a share of the slots, that a two-level table takes
/// the region build for at `load` percent full, with `word`-byte slots. The
/// fuller the table, the more keys its plain kernel leaves to the locked
/// insert, so the smaller the batch that a pass over the whole table beats.
/// Measured on an H200, 2^27 slots, ms by the plain kernel / by regions:
/// u32 pairs, 2^20 keys: 0.31 / 0.76 at load 0.5, 0.66 / 0.85 at 0.7, 1.36 /
/// 0.87 at 0.8, 8.4 / 1.4 at 0.9, 76 / 7.8 at 0.95 (2^19 keys at 0.9: 3.8 /
/// 1.2); u64 pairs, whose regions take twice the bytes, 1.14 / 1.76 at 0.8
/// and 8.3 / 3.4 at 0.9. Smaller u32 batches: 2^16 / 2^17 keys at 0.95
/// 8.4-8.9 / 1.46 and 12.8-13.7 / 1.85 ms (insert-or-apply of 2^17: 2.9-3.0
/// / 1.0), while at 0.9 2^17 and 2^18 keys take as long either way (1.0-1.2
/// and 1.9-2.2 ms), so a 1024th is not worth it there.
fn two_level_share(word: usize, load: u64) -> u64 {
    match (word <= 8, load) {
        (true, 95..) => 2048,
        (true, 75..) | (false, 85..) => 256,
        _ => MIN_BATCH_SHARE,
    }
}

/// Keys one partition block stages per tile (`PART_TILE` in the kernels).
fn tile(word_bytes: usize) -> u64 {
    THREADS as u64 * if word_bytes == 8 { 8 } else { 4 }
}

/// Dynamic shared memory of a scatter block: the tile as read (a word's
/// worth per key), the tile grouped by bin (word and u16 bin per key) and
/// two u32 counters per bin.
fn scatter_shared_bytes(word_bytes: usize, bins: u64) -> u32 {
    (tile(word_bytes) * (2 * word_bytes as u64 + 2) + 8 * bins) as u32
}

/// Extra shared memory of a histogram block that combines a tile's copies
/// of a key (`gh_region_hist`): the tile's keys and a table of two u32
/// entries per key.
fn combine_shared_bytes(word_bytes: usize, key_bytes: usize) -> u32 {
    (tile(word_bytes) * (key_bytes as u64 + 8)) as u32
}

/// The reduction code that tells the scatter not to combine copies
/// (`COMBINE_FREE` in the kernels).
const NO_COMBINE: u32 = u32::MAX;

/// Build blocks an SM holds at once (72 KiB of shared memory each).
const BUILD_BLOCKS_PER_SM: u64 = 3;
/// Blocks an SM of the linear build's deferred insert (`gh_region_deferred`,
/// a warp per key): launched before their number is known, so enough warps
/// for the usual key or two a region, and few enough that a batch with none
/// pays little for the launch.
const DEFERRED_BLOCKS_PER_SM: u64 = 8;

/// Keys of one region from which an insert-or-apply batch of `n` keys
/// counts as skewed: a fair share of the blocks that build at once, so the
/// block of a region past it works longer than the others' turns together.
/// (Uniform batches into large tables stay below it; batches of more than
/// 1024 keys a region into tables of fewer regions than those blocks are
/// always combined.)
fn skew_from(n: u64, sms: u64) -> u32 {
    n.div_ceil(sms * BUILD_BLOCKS_PER_SM).clamp(1024, u32::MAX as u64) as u32
}

/// Dynamic shared memory of a build block: the region and a u32 counter per
/// bucket (`BUILD_*` in the kernels).
const BUILD_SHARED_BYTES: u64 = REGION_BYTES + 4 * REGION_BUCKETS;
/// Threads of a block of the two-level build of a fresh table of 16-byte
/// slots (`GH_FRESH_THREADS`): three blocks an SM, at 40 registers.
const FRESH_THREADS: u32 = 512;
/// Its dynamic shared memory: a u32 slot index and a cached u64 key per
/// slot of the region, and a u32 per waiting pair (`TL_WAITING`): 50 KiB.
const FRESH_SHARED_BYTES: u64 = REGION_BYTES / 16 * 12 + 4 * (8192 / 16);
/// Threads of a block of the linear build's wide form (`GH_BUILD_WIDE_THREADS`,
/// `gh_region_build_wide`): two blocks an SM instead of three of `THREADS`.
const BUILD_WIDE_THREADS: u32 = 768;
/// Waves of three build blocks an SM up to which a build of heavy regions
/// takes the wide form (see [`wide_build`]).
const WIDE_MAX_WAVES: u64 = 3;

/// Whether a linear build of `n` keys into `regions` regions of `word`-byte
/// slots on `sms` SMs takes the wide form. Where a build has few regions
/// and more keys than slots (an aggregation), each block runs long and the
/// last of a few waves of three blocks an SM leaves much of the GPU idle;
/// two blocks of 768 threads hold as many threads and fill the last wave
/// better. Measured on an H100 (bench-results/build-waves, wide-build):
/// aggregations of 8 keys a slot into 2^22 and 2^23 slots (1.3 and 2.6
/// waves) 13-25% and 10-13% faster, into 2^24 and 2^25 slots 1%; inserts at
/// load 0.5 (half a key a slot) 3-6% slower at every size, hence the narrow
/// form for them.
fn wide_build(n: u64, regions: u64, word: usize, sms: u64) -> bool {
    let slots = regions * (REGION_BYTES / word as u64);
    regions <= WIDE_MAX_WAVES * BUILD_BLOCKS_PER_SM * sms && n >= slots
}

/// Bytes of each region's spill list (`BUILD_SPILL` words in the kernels).
const SPILL_BYTES: u64 = 2048;

/// The region kernels of a module (present in linear and two-level modules).
pub(crate) struct RegionKernels {
    hist: CudaFunction,
    scan: CudaFunction,
    scatter1: CudaFunction,
    scatter2: CudaFunction,
    build: CudaFunction,
    /// The linear build's wide form (`gh_region_build_wide`), where an SM
    /// holds three narrow build blocks (as on the H100 it was measured on,
    /// see [`wide_build`]); None elsewhere and in two-level modules.
    build_wide: Option<CudaFunction>,
    /// The two-level build of a fresh table of 16-byte slots for a batch
    /// that assigns or inserts if absent (`gh_region_build_fresh`): slot
    /// indices instead of slots in shared memory. None in other modules.
    fresh: Option<CudaFunction>,
    /// The linear build's: its EMPTY regions' runs continued in the next
    /// region, and the deferred keys inserted with a warp per key
    /// (`gh_region_spill`, `gh_region_deferred`). A two-level build defers
    /// to the plain kernel, one thread per key, after a read of the counters.
    linear: Option<(CudaFunction, CudaFunction)>,
    /// Where the keys the table refused sit in the batch.
    positions: CudaFunction,
    /// Most dynamic shared memory a histogram block may take on this device.
    hist_max: u32,
}

impl RegionKernels {
    /// The kernels of a linear (`linear`) or two-level module on `ctx`'s
    /// device; none where a block cannot take a region's shared memory.
    pub(crate) fn load(
        ctx: &Arc<CudaContext>,
        module: &Arc<CudaModule>,
        linear: bool,
    ) -> std::result::Result<Option<Self>, DriverError> {
        let names = ["gh_region_hist", "gh_region_scan", "gh_region_scatter1", "gh_region_scatter2", "gh_region_positions"];
        let Ok(build) = module.load_function("gh_region_build") else {
            return Ok(None);
        };
        let [hist, scan, scatter1, scatter2, positions] = names.map(|n| module.load_function(n));
        let (hist, scan, scatter1, scatter2, positions) = (hist?, scan?, scatter1?, scatter2?, positions?);
        let linear =
            if linear { Some((module.load_function("gh_region_spill")?, module.load_function("gh_region_deferred")?)) } else { None };
        let fresh = if linear.is_some() { None } else { Some(module.load_function("gh_region_build_fresh")?) };
        // (Each block also takes 1 KiB of shared memory the system reserves.)
        let per_sm = ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?.max(0) as u64;
        let narrow_per_sm = per_sm / (BUILD_SHARED_BYTES + 1024);
        let build_wide = if linear.is_some() && narrow_per_sm >= BUILD_BLOCKS_PER_SM {
            Some(module.load_function("gh_region_build_wide")?)
        } else {
            None
        };
        // A region, a scatter tile and the histogram of 2^14 regions or more
        // exceed the default 48 KiB of shared memory a launch may use. A
        // device that lets a block take less than a build or the widest
        // scatter needs (compute 7.5, 8.6 and 8.9 have 64-99 KiB) keeps to
        // the plain kernels; the histogram counts in global memory where
        // shared memory falls short (see `insert_regions`).
        let optin = ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(0) as u64;
        let most_bins = 1u64 << MAX_REGIONS.ilog2().div_ceil(2);
        let most = scatter_shared_bytes(8, most_bins).max(scatter_shared_bytes(16, most_bins)) as u64;
        if BUILD_SHARED_BYTES > optin || most > optin {
            return Ok(None);
        }
        let max = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        for f in std::iter::once(&build).chain(&build_wide) {
            f.set_attribute(max, BUILD_SHARED_BYTES as i32)?;
        }
        if let Some(f) = &fresh {
            f.set_attribute(max, FRESH_SHARED_BYTES as i32)?;
        }
        let combining = combine_shared_bytes(8, 4).max(combine_shared_bytes(16, 8)) as u64;
        let hist_max = (4 * LOCAL_HIST_REGIONS + combining).min(optin) as u32;
        hist.set_attribute(max, hist_max as i32)?;
        for f in [&scatter1, &scatter2] {
            f.set_attribute(max, most as i32)?;
        }
        Ok(Some(RegionKernels { hist, scan, scatter1, scatter2, build, build_wide, fresh, linear, positions, hist_max }))
    }
}

/// Open bins: where a batch has enough keys per region, the partition skips
/// the histogram, its pass over the batch that hashes every key (0.14-0.26
/// ms of a 2^26-key build on an H200). Every region's bin gets the same
/// number of places, a quarter more than its mean share, and the scatters
/// fill the bins from their starts (a bin's end is where its cursor stops).
/// Bins are open only where that quarter is at least eight standard
/// deviations of a uniform hash's spread; copies of a key widen the spread
/// (an aggregation's 16 copies a key overflowed bins of only eight
/// deviations on an H100), hence the whole quarter rather than the least.
/// A bin that a skewed or adversarial batch overflows keeps the table as it
/// was: the scatter flags it, the build does nothing, and the batch is
/// partitioned again, packed after a histogram (costing the wasted passes).
/// Insert-or-apply batches, which repeat keys by design, first count a
/// sample of their keys: a skewed sample chooses the keys to combine, and a
/// sample whose largest region, scaled up, would not fit an open bin takes
/// packed bins at once (see `insert_regions`). Returns the places per bin, or 0 where the quarter
/// is too narrow (fewer than about 1500 keys a region) or offsets would
/// pass u32.
fn open_bin(n: u64, regions: u64) -> u32 {
    let regions = regions.max(1);
    let mean = n.div_ceil(regions);
    let cap = n * 5 / 4 / regions;
    if cap < mean + 8 * mean.isqrt() + 64 || (cap * regions) as u128 + n as u128 >= u32::MAX as u128 {
        return 0;
    }
    cap as u32
}

/// Keys of an insert-or-apply batch of `n` that the histogram counts to
/// find a skewed batch before open bins: the first sixteenth, at least
/// 2^20 (or the whole batch).
fn skew_sample(n: u64) -> u64 {
    (n / 16).max(n.min(1 << 20))
}

/// The largest count of a region in a sample of `sample` keys of a batch of
/// `n` whose open bin of `open` places that region's keys fit, scaled up
/// with four standard deviations of the sampling: a larger count takes
/// packed bins (see `insert_regions`). `u32::MAX` without a sample.
fn open_sample_most(open: u32, n: u64, sample: u64) -> u32 {
    if sample == 0 {
        return u32::MAX;
    }
    let scale = n as f64 / sample as f64;
    let fits = |t: u32| (t as f64 + 4.0 * (t as f64).sqrt()) * scale <= open as f64;
    // The left side grows with t, and t = 0 fits.
    let (mut lo, mut hi) = (0u32, open);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) { lo = mid } else { hi = mid - 1 }
    }
    lo
}

/// How the partition splits a batch of `n` keys over `regions` regions.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Plan {
    regions: u64,
    /// Places of every region's open bin, or 0 where the bins are packed
    /// (see [`open_bin`]).
    open: u32,
    /// Pass 1 bins by `region >> shift`; zero means one pass, by region.
    shift: u32,
    /// Bins of pass 1.
    bins1: u64,
    /// Blocks of pass 1, and blocks per pass-1 bin in pass 2.
    parts1: u64,
    parts2: u64,
}

impl Plan {
    fn new(n: u64, regions: u64, sms: u64, word_bytes: usize, two_pass: bool, open: bool) -> Plan {
        // Two digits of about equal width: a few hundred bins per pass for
        // 2^14 regions, so runs of one bin in a 4096-key tile are long.
        let one_pass = regions <= ONE_PASS_REGIONS && !two_pass;
        let shift = if one_pass { 0 } else { (u64::BITS - (regions - 1).leading_zeros()) / 2 };
        let bins1 = regions.div_ceil(1 << shift);
        let blocks = (sms * PART_BLOCKS_PER_SM).max(1);
        let parts1 = n.div_ceil(tile(word_bytes)).clamp(1, blocks);
        // No more parts of a pass-1 bin than it has tiles, on average.
        let parts2 = (blocks * SCATTER2_WAVES / bins1).min(n.div_ceil(bins1 * tile(word_bytes))).max(1);
        let open = if open { open_bin(n, regions) } else { 0 };
        Plan { regions, open, shift, bins1, parts1, parts2 }
    }

    /// The same split with packed bins.
    fn packed(self) -> Plan {
        Plan { open: 0, ..self }
    }

    /// Words each of the two bin buffers holds for `n` keys: `n` packed,
    /// `regions * open` open.
    fn words(&self, n: u64) -> u64 {
        if self.open > 0 { self.regions * self.open as u64 } else { n }
    }

    fn two_pass(&self) -> bool {
        self.shift > 0
    }

    /// Whether the histogram counts in shared memory, its bytes there, its
    /// blocks: as many as fit the SMs at once (64 KiB, 2^14 regions, leave
    /// room for three a SM), since each adds one atomic per region; and
    /// their threads: a block alone on its SM takes `HIST_WIDE_THREADS`,
    /// for more loads in flight (measured on an H200, 2^15 regions: u64
    /// inserts 2.4% faster than with `THREADS`).
    fn hist(&self, sms: u64) -> (bool, u32, u64, u32) {
        let local = self.regions <= LOCAL_HIST_REGIONS;
        let bytes = if local { 4 * self.regions } else { 0 };
        let (per_sm, threads) = if bytes <= 64 << 10 { (PART_BLOCKS_PER_SM, THREADS) } else { (1, HIST_WIDE_THREADS) };
        (local, bytes as u32, (sms * per_sm).clamp(1, self.parts1), threads)
    }
}

/// Scratch buffers of the region build (see the module documentation).
#[derive(Default)]
pub(crate) struct RegionScratch {
    /// The batch packed by region (words as bytes).
    words: Option<CudaSlice<u8>>,
    /// Pass-1 output of a two-pass partition; afterwards the deferred pairs unpacked.
    mid_words: Option<CudaSlice<u8>>,
    /// Words deferred to the plain kernel (at worst every one).
    deferred: Option<CudaSlice<u8>>,
    /// Each region's spill list (`SPILL_BYTES`) and its length.
    spills: Option<CudaSlice<u8>>,
    spill_count: Option<CudaSlice<u32>>,
    /// Keys per region.
    counts: Option<CudaSlice<u32>>,
    /// Region offsets and their scatter cursors; the same for pass-1 bins.
    offsets: Option<CudaSlice<u32>>,
    cursor: Option<CudaSlice<u32>>,
    seg_off: Option<CudaSlice<u32>>,
    cursor1: Option<CudaSlice<u32>>,
    /// Set by the scan when an insert-or-apply batch is skewed (one word),
    /// and then a byte per region: whether its keys are combined.
    skewed: Option<CudaSlice<u32>>,
    heavy: Option<CudaSlice<u8>>,
}

impl RegionScratch {
    fn bytes(&self) -> usize {
        fn b<T>(s: &Option<CudaSlice<T>>) -> usize {
            s.as_ref().map_or(0, |s| s.len() * std::mem::size_of::<T>())
        }
        b(&self.words) + b(&self.mid_words) + b(&self.deferred) + b(&self.spills) + b(&self.spill_count) + b(&self.counts)
            + b(&self.offsets) + b(&self.cursor) + b(&self.seg_off) + b(&self.cursor1) + b(&self.skewed) + b(&self.heavy)
    }

    /// Bytes of the buffers sized by the batch (`words`, `mid_words` and
    /// `deferred` in [`Self::reserve`]) for `n` keys of `word` bytes; the
    /// rest are sized by the regions.
    fn batch_bytes(n: u64, word: usize) -> u128 {
        // Open bins take up to a quarter more (see `open_bin`).
        7 * n as u128 * word as u128 / 2
    }

    /// Grows every buffer to what a batch of `n` keys of `word` bytes and `plan` needs.
    fn reserve(&mut self, stream: &Arc<CudaStream>, n: u64, word: usize, plan: &Plan) -> Result<()> {
        let (n, bins) = (n as usize, plan.words(n).max(n) as usize);
        let r = plan.regions as usize;
        ensure(stream, &mut self.words, bins * word)?;
        // Also the deferred pairs (keys, then values from a 16-byte boundary), so always there.
        ensure(stream, &mut self.mid_words, bins * word + 16)?;
        ensure(stream, &mut self.deferred, n * word)?;
        ensure(stream, &mut self.spills, r * SPILL_BYTES as usize)?;
        ensure(stream, &mut self.spill_count, r)?;
        ensure(stream, &mut self.counts, r)?;
        ensure(stream, &mut self.offsets, r + 1)?;
        ensure(stream, &mut self.cursor, r)?;
        ensure(stream, &mut self.seg_off, plan.bins1 as usize + 1)?;
        ensure(stream, &mut self.cursor1, plan.bins1 as usize)?;
        ensure(stream, &mut self.skewed, 1)?;
        ensure(stream, &mut self.heavy, r)
    }
}

fn ensure<T: DeviceRepr>(stream: &Arc<CudaStream>, slot: &mut Option<CudaSlice<T>>, len: usize) -> Result<()> {
    if slot.as_ref().is_none_or(|s| s.len() < len) {
        *slot = None; // free the old buffer before taking a larger one
        let ordinal = stream.context().ordinal();
        crate::fault::alloc_point((len.max(1) * std::mem::size_of::<T>()) as u64, Device::Cuda(ordinal))?;
        // Safety: every element a kernel reads is written first (counts are
        // zeroed, offsets scanned, bins scattered, deferred positions below
        // counters[2]).
        *slot = Some(unsafe { stream.alloc::<T>(len.max(1)) }.map_err(|e| super::driver_error(ordinal, e))?);
    }
    Ok(())
}

/// Each device's region scratch while no build uses it.
fn cache() -> &'static Mutex<HashMap<usize, RegionScratch>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, RegionScratch>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The scratch of a device for one build; put back in the cache when
/// dropped. Builds at the same time on one device each get their own
/// (the first to finish keeps the larger).
struct Taken {
    ordinal: usize,
    scratch: RegionScratch,
}

impl Taken {
    fn new(ordinal: usize) -> Taken {
        let scratch = cache().lock().unwrap_or_else(|p| p.into_inner()).remove(&ordinal).unwrap_or_default();
        Taken { ordinal, scratch }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        let mine = std::mem::take(&mut self.scratch);
        let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
        let slot = map.entry(self.ordinal).or_default();
        if mine.bytes() > slot.bytes() {
            *slot = mine;
        }
    }
}

/// Bytes of region scratch kept on CUDA device `ordinal` for later builds
/// (the next build takes them over, or frees them for larger buffers).
pub(crate) fn cached_scratch_bytes(ordinal: usize) -> usize {
    cache().lock().unwrap_or_else(|p| p.into_inner()).get(&ordinal).map_or(0, |s| s.bytes())
}

/// Frees the scratch memory the region build keeps on CUDA device `ordinal`
/// for later builds (see [`RegionBuild::Never`]); returns the bytes freed.
/// A later region build allocates it again. Safe to call at any time: a
/// build running meanwhile keeps its buffers until it ends.
pub fn release_scratch(ordinal: usize) -> usize {
    let taken = cache().lock().unwrap_or_else(|p| p.into_inner()).remove(&ordinal);
    taken.map_or(0, |s| s.bytes())
}

/// What the choice of the region build knows of a table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub scheme: Scheme,
    /// Bytes a slot.
    pub word: usize,
    /// Keys stored.
    pub live: u64,
    pub slots: u64,
    pub buckets: u64,
    /// Bytes of device memory the scratch of an insert-or-apply batch
    /// larger than the table may take (half of the free memory and of the
    /// scratch kept from earlier builds, which the build takes over).
    pub room: u64,
}

/// Whether a build of `n` keys into table `t` suits the region build.
pub(crate) fn suits(n: u64, t: Shape) -> bool {
    let share = match t.scheme {
        Scheme::TwoLevel => two_level_share(t.word, (t.live as u128 * 100 / t.slots.max(1) as u128) as u64),
        _ => MIN_BATCH_SHARE,
    };
    t.buckets >= 2 * REGION_BUCKETS
        && t.buckets.div_ceil(REGION_BUCKETS) <= MAX_REGIONS
        && n >= t.slots / share
        && n < u32::MAX as u64
}

/// Most keys one region build takes: larger batches are built in chunks of
/// at most this many (or the table's slots, if more), which bounds the
/// scratch memory (up to `3.5 * chunk * word` bytes, what an insert of 2^26 new
/// keys takes anyway). Each chunk costs a full partition's fixed costs, a
/// read of the counters and a pass over the whole table, so chunks are as
/// large as that bound allows.
const MAX_CHUNK: u64 = 1 << 26;
/// Insert-or-apply chunks may take this many times the table's slots where
/// the device has room for their scratch. (Measured on an H200, 2^30
/// positions over 2^26 keys into 2^27 slots: chunks of 2^27 / 2^28 / 2^29
/// / 2^30 keys ran u64 pairs at 24.3 / 25.7 / 25.9 / 25.5 G/s, and chunks
/// of 2^29 took linear u32 pairs from 39.3 to 44.4 G/s, two-level from
/// 37.3 to 37.8; `bench-results/h200-apply-chunks/`.)
const APPLY_CHUNK_TABLES: u64 = 4;

/// Whether to take the region build for a batch of `n` keys in `mode` into
/// a table of `slots` slots and `buckets` buckets holding `live` keys, and
/// if so the keys per build (`n` or less: a larger batch is built in equal
/// chunks). Inserts take it when it suits and the batch leaves the table at
/// most 96% full, counting every key as new. (Measured on an H200 with 2^27
/// slots, into an empty table: 2.5x to 5.8x the plain kernel's rate for u32
/// pairs from load 0.5 to 0.95; at 0.99 most regions overflow and defer keys
/// to the plain kernel.)
/// Insert-or-apply batches mostly repeat keys, so their final load is not
/// known: they take it whenever the table is at most 96% full before, in
/// chunks of up to max(4 * slots, 2^26) keys where half the free device
/// memory holds their scratch, else max(slots, 2^26). `setting` may
/// override the load rules ([`RegionBuild`]).
pub(crate) fn chunk_len(n: u64, mode: InsertMode, t: Shape, setting: RegionBuild) -> Option<u64> {
    let (live, slots) = (t.live, t.slots);
    let within = |keys: u64| (live as u128 + keys as u128) * 100 <= slots as u128 * 96;
    let (by_load, cap) = match mode {
        InsertMode::Apply(_) => {
            let large = (APPLY_CHUNK_TABLES * slots).max(MAX_CHUNK);
            let fits = RegionScratch::batch_bytes(large.min(n), t.word) <= t.room as u128;
            (within(0), if fits { large } else { slots.max(MAX_CHUNK) })
        }
        _ => (within(n), u64::MAX),
    };
    let chunks = n.div_ceil(cap.min(u32::MAX as u64 - 1)).max(1);
    let chunk = n.div_ceil(chunks);
    (setting.forced().unwrap_or(by_load) && suits(chunk, t)).then_some(chunk)
}

impl<K: Key, V: Value> CudaTable<K, V> {
    /// Inserts a large batch by regions (see the module documentation); the
    /// same outcome as the plain kernel, failed positions exact and ascending.
    /// Its memory is taken before the first kernel (without the scratch the
    /// plain kernel runs instead); after the kernels, the steps that allocate
    /// (the refused keys' positions) have fallbacks that need no memory, so
    /// it never fails for want of memory having stored part of the batch.
    pub(super) fn insert_regions(
        &mut self,
        keys: &CudaView<'_, K>,
        values: &CudaView<'_, V>,
        mode: InsertMode,
    ) -> Result<RawInsert> {
        let kernels = self.kernels.clone(); // not borrowed from `self`, which changes below
        let Some(rk) = kernels.region.as_ref() else {
            return Err(Error::Unsupported("region build outside the linear and two-level schemes".into()));
        };
        let n = keys.len() as u64;
        let word = K::Word::<V>::BYTES;
        // A block builds a region's span: one large two-level region, or
        // four small ones (not the overflow after them).
        let regions = match self.config.scheme {
            Scheme::TwoLevel => {
                let g = crate::core::cuckoo::Regions::of(self.probe.buckets);
                g.count.div_ceil((REGION_BUCKETS / g.buckets).max(1))
            }
            _ => self.probe.buckets.div_ceil(REGION_BUCKETS),
        };
        let mut plan = Plan::new(n, regions, self.sms, word, self.config.region_build.two_pass(), true);
        let stream = self.stream.clone();
        let ordinal = self.ctx.ordinal();
        let dev = move |err| super::driver_error(ordinal, err);

        let mut taken = Taken::new(ordinal);
        if taken.scratch.reserve(&stream, n, word, &plan).is_err() {
            // No room for open bins: packed ones; without room for those
            // either, the plain kernel, which needs none.
            plan = plan.packed();
            if taken.scratch.reserve(&stream, n, word, &plan).is_err() {
                drop(taken);
                return self.insert_plain(keys, values, mode);
            }
        }
        let (m, op) = super::mode_codes(mode);
        // Where the linear build's deferred keys note those the table refuses.
        let (failed_addr, failed_cap) = (self.failed.addr(), self.failed.len() as u64);
        // Twice at most: an open bin that overflows leaves the table as it
        // was, and the batch is partitioned again, packed.
        let meta = loop {
            self.zero_counters()?;
            let view = self.kernel_view();
            let s = &mut taken.scratch;
            let words = s.words.as_mut().expect("reserved");
            let mid_words = s.mid_words.as_mut().expect("reserved");
            let deferred = s.deferred.as_mut().expect("reserved");
            let counts = s.counts.as_mut().expect("reserved");
            let offsets = s.offsets.as_mut().expect("reserved");
            let cursor = s.cursor.as_mut().expect("reserved");
            let seg_off = s.seg_off.as_mut().expect("reserved");
            let cursor1 = s.cursor1.as_mut().expect("reserved");
            let spills = s.spills.as_mut().expect("reserved");
            let spill_count = s.spill_count.as_mut().expect("reserved");

            let part = |blocks_x: u64, blocks_y: u64, shared: u32| LaunchConfig {
                grid_dim: (blocks_x as u32, blocks_y as u32, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: shared,
            };
            let scan_cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1024, 1, 1), shared_mem_bytes: 0 };

            // Keys per region, then the region offsets (and the pass-1 bin
            // offsets among them): exact places for both passes; with open
            // bins, a quarter more places than every region's share.
            let (regions, shift, bins1) = (plan.regions as u32, plan.shift, plan.bins1 as u32);
            let r = plan.regions as usize;
            // Insert-or-apply combines the copies of a key within each tile of
            // pass 1 (every reduction is commutative) when the batch is skewed:
            // some region gets more keys than a fair share of the blocks that
            // build at once, so its block would finish long after the others
            // (zipf keys ran 7x slower than uniform ones on an H100). The first
            // scan tells, and marks the heavy regions, whose keys are combined;
            // a second histogram then counts the combined tiles, with as many
            // blocks as pass 1 so both see the same tiles, and a second scan
            // places them. Both do nothing for a batch not skewed. (Combining
            // every key of a batch doubled its partition's time on an H100.)
            let combine = match mode {
                InsertMode::Apply(_) => op,
                _ => NO_COMBINE,
            };
            let combine_from = if combine == NO_COMBINE { 0 } else { skew_from(n, self.sms) };
            let skewed = s.skewed.as_mut().expect("reserved");
            let heavy = s.heavy.as_mut().expect("reserved");
            let (local, hist_shared, hist_blocks, hist_threads) = plan.hist(self.sms);
            let (local, parts1) = (local as u32, plan.parts1);
            // Counts the first `counted` keys (none: 0) by region and scans the
            // counts, or with `uniform` nonzero gives each region that many
            // places, the counts telling skew only, and a largest count past
            // `most` that the bins must be packed (open bins' sample).
            let packed_flag = self.meta_word(1); // counters[1]
            let mut histogram = |counted: u64, combining: u32, from: u32, uniform: u32, most: u32| -> Result<()> {
                let (blocks, shared) = match combining {
                    0 => (hist_blocks, hist_shared),
                    _ => (parts1, hist_shared + combine_shared_bytes(word, std::mem::size_of::<K>())),
                };
                // Without room for the local histogram (beside the combining
                // table, if any), the block counts in global memory.
                let (local, shared) = if shared > rk.hist_max { (0, shared - hist_shared) } else { (local, shared) };
                if counted > 0 {
                    if combining == 0 {
                        stream.memset_zeros(&mut counts.slice_mut(0..regions as usize)).map_err(dev)?;
                    }
                    let mut b = stream.launch_builder(&rk.hist);
                    b.arg(&view).arg(keys).arg(&counted).arg(&regions).arg(&local).arg(&combining).arg(&*skewed);
                    b.arg(&*heavy).arg(&mut *counts);
                    let mut cfg = part(blocks, 1, shared);
                    if combining == 0 {
                        cfg.block_dim.0 = hist_threads;
                    }
                    // Safety: arguments match gh_region_hist; counted <= n keys;
                    // counts holds `regions` entries, and so does the shared
                    // histogram when local, after the combining table and the
                    // tile's keys when combining.
                    unsafe { b.launch(cfg) }.map_err(dev)?;
                }
                let mut b = stream.launch_builder(&rk.scan);
                b.arg(&mut *counts).arg(&regions).arg(&shift).arg(&mut *offsets).arg(&mut *cursor);
                b.arg(&mut *seg_off).arg(&mut *cursor1).arg(&from).arg(&combining).arg(&mut *skewed);
                b.arg(&mut *heavy).arg(&uniform).arg(&most).arg(&packed_flag);
                // Safety: arguments match gh_region_scan; offsets hold regions + 1
                // entries, the cursors regions, seg_off bins1 + 1 and cursor1 bins1
                // (the last two written only with two passes), skewed one word, heavy
                // regions (written, and read later, only when skewed); counts
                // are read only where they were just counted; `packed_flag` is
                // a counter word of the table's metadata block.
                unsafe { b.launch(scan_cfg) }.map_err(dev)?;
                Ok(())
            };
            if plan.open > 0 {
                // An insert-or-apply batch's sample, counted, tells whether to
                // combine copies (as the full histogram would, scaled); a skewed
                // batch takes packed bins, where the histogram of the combined
                // tiles sizes its hot regions' bins.
                // So does a batch whose largest region, scaled up from the
                // sample with four deviations of the sampling, would
                // overflow its open bin (many copies of each key).
                // The scan decides on the device (see gh_region_scan): the
                // open attempt then does nothing, and the loop goes on packed.
                let sample = if combine == NO_COMBINE { 0 } else { skew_sample(n) };
                let from = if sample > 0 { (combine_from as u64 * sample / n).max(1) as u32 } else { 0 };
                histogram(sample, 0, from, plan.open, open_sample_most(plan.open, n, sample))?;
            } else {
                histogram(n, 0, combine_from, 0, u32::MAX)?;
                if combine != NO_COMBINE {
                    histogram(n, 1, combine_from, 0, u32::MAX)?;
                }
            }
            let null = 0u64; // a pointer argument that is not there
            // Where each bin's successor begins: a packed bin's end, an open
            // bin's limit (the last at the total), for the regions and the
            // pass-1 bins.
            let (region_next, seg_next) = (offsets.slice(1..), seg_off.slice(1..));

            // Pass 1: the batch by `region >> shift`, into `mid` (two passes) or
            // straight into the region bins (one pass).
            let (w1, c1) = if plan.two_pass() { (&mut *mid_words, &mut *cursor1) } else { (&mut *words, &mut *cursor) };
            let mut b = stream.launch_builder(&rk.scatter1);
            b.arg(&view).arg(keys).arg(values).arg(&n).arg(&shift).arg(&bins1).arg(&mut *c1);
            // Open bins end where the next begins (the last at the total).
            let limit1 = if plan.two_pass() { &seg_next } else { &region_next };
            if plan.open > 0 {
                b.arg(limit1);
            } else {
                b.arg(&null);
            }
            b.arg(&mut *w1).arg(&mut *deferred).arg(&combine).arg(&*skewed).arg(&*heavy);
            // Safety: arguments match gh_region_scatter1; the bins hold
            // plan.words(n) words (packed: the counts sum to at most n; open: no
            // run is written past its bin's limit), the deferred list n words,
            // the cursors and limits one per bin.
            unsafe { b.launch(part(plan.parts1, 1, scatter_shared_bytes(word, plan.bins1))) }.map_err(dev)?;

            if plan.two_pass() {
                // Pass 2: each pass-1 bin by `region & (2^shift - 1)`, into the region bins.
                // A pass-1 bin ends where pass 1 left its cursor (open), or
                // where the next begins (packed).
                let mut b = stream.launch_builder(&rk.scatter2);
                b.arg(&view).arg(&*mid_words).arg(&shift).arg(&*seg_off);
                if plan.open > 0 {
                    b.arg(&*cursor1).arg(&mut *cursor).arg(&region_next);
                } else {
                    b.arg(&seg_next).arg(&mut *cursor).arg(&null);
                }
                b.arg(&mut *words);
                // Safety: arguments match gh_region_scatter2; pass 1 filled each
                // pass-1 bin up to its end (open bins: unless a bin overflowed,
                // which pass 2 checks first), and the region bins hold as many
                // (open: no run is written past its region's limit).
                unsafe { b.launch(part(plan.parts2, plan.bins1, scatter_shared_bytes(word, 1 << shift))) }.map_err(dev)?;
            }

            let cfg = LaunchConfig {
                grid_dim: (plan.regions as u32, 1, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: BUILD_SHARED_BYTES as u32,
            };
            // Counting pays only in EMPTY regions: with as many keys (or
            // tombstones) as regions, at most about a third of them are.
            let try_count = (self.live + self.tombstones < plan.regions) as u32;
            // A table known to be all EMPTY is not read: the build starts from
            // EMPTY regions (a third of its traffic at load 0.5, for u64 pairs).
            let fresh = self.pristine.swap(false, Ordering::Relaxed) as u32;
            // Region r's bin ends where its cursor stopped (open) or where the
            // next bin begins (packed).
            let ends = if plan.open > 0 { cursor.slice(0..r) } else { region_next };
            match &rk.fresh {
                // Where no value is combined, a fresh table of 16-byte slots is
                // built from slot indices (u64 inserts into 2^27 slots 2% faster
                // at load 0.5 and 10% at 0.9 than the slot-wide build, H200).
                Some(f) if fresh == 1 && word == 16 && !matches!(mode, InsertMode::Apply(_)) => {
                    let cfg = LaunchConfig {
                        block_dim: (FRESH_THREADS, 1, 1),
                        shared_mem_bytes: FRESH_SHARED_BYTES as u32,
                        ..cfg
                    };
                    let mut b = stream.launch_builder(f);
                    b.arg(&view).arg(&*offsets).arg(&ends).arg(&*words).arg(&mut *deferred);
                    // Safety: arguments match gh_region_build_fresh; one block
                    // per region, with its slot indices, keys and waiting list in
                    // shared memory; each bin lies within the plan.words(n) words of
                    // `words` (or an open bin overflowed and the kernel returns)
                    // and the deferred list holds n words.
                    unsafe { b.launch(cfg) }.map_err(dev)?;
                }
                _ => {
                    let (build, cfg) = match &rk.build_wide {
                        Some(wide) if wide_build(n, plan.regions, word, self.sms) => {
                            (wide, LaunchConfig { block_dim: (BUILD_WIDE_THREADS, 1, 1), ..cfg })
                        }
                        _ => (&rk.build, cfg),
                    };
                    let mut b = stream.launch_builder(build);
                    b.arg(&view).arg(&*offsets).arg(&ends).arg(&*words).arg(&mut *spills).arg(&mut *spill_count);
                    b.arg(&mut *deferred).arg(&m).arg(&op).arg(&try_count).arg(&fresh).arg(&*skewed);
                    // Safety: arguments match gh_region_build and its wide
                    // form; one block per region, each with the region and
                    // its counters in shared memory; each bin lies within the
                    // plan.words(n) words of `words` (or an open bin
                    // overflowed and the kernel returns), the deferred list
                    // holds n words, the spill lists SPILL_BYTES per region.
                    unsafe { b.launch(cfg) }.map_err(dev)?;
                }
            }
            if let Some((spill, insert_deferred)) = &rk.linear {
                let spill_cfg = LaunchConfig { shared_mem_bytes: 0, ..cfg };
                let regions = plan.regions;
                let mut b = stream.launch_builder(spill);
                b.arg(&view).arg(&regions).arg(&*spill_count).arg(&*spills).arg(&mut *deferred);
                // Safety: arguments match gh_region_spill; the build wrote every
                // region's spill count and the lists they count.
                unsafe { b.launch(spill_cfg) }.map_err(dev)?;
                // Their count is on the device: as many warps as a few blocks
                // an SM hold, each taking keys until the list is done (a
                // batch leaves a key or two a region; the table's fullest
                // runs leave more, which the warps take in turns).
                let mut b = stream.launch_builder(insert_deferred);
                b.arg(&view).arg(&*deferred).arg(&m).arg(&op).arg(&failed_addr).arg(&failed_cap);
                // Safety: arguments match gh_region_deferred; the deferred list
                // holds the counters[2] words the build and the spill wrote, and
                // `failed` is the table's failure buffer of `cap` entries.
                unsafe { b.launch(super::grid(self.sms * DEFERRED_BLOCKS_PER_SM * super::BLOCK as u64, self.sms)) }.map_err(dev)?;
            }

            let meta = self.read_meta()?;
            if plan.open > 0 && meta[1] != 0 {
                // An open bin overflowed, or the sample said one would
                // (counters[1], which no build kernel counts): nothing was
                // built. Again, with packed bins.
                self.pristine.store(fresh == 1, Ordering::Relaxed);
                plan = plan.packed();
                continue;
            }
            break meta;
        };
        // The build kernels count new keys only (meta[1] is not theirs); see
        // below. A linear build's count includes its deferred keys' and the
        // out-of-band keys among them, which take no slot.
        let (inserted, ndeferred) = (meta[0], meta[2]);
        self.account_insert(&meta);
        let mut out = RawInsert { inserted, existing: 0, failed: Vec::new() };
        // What is left: a linear build's refused keys (meta[3]: its deferred
        // keys are in), a two-level build's deferred keys.
        let refused = meta[3];
        if (rk.linear.is_some() && refused > 0) || (rk.linear.is_none() && ndeferred > 0) {
            out = self.insert_deferred(rk, keys, mode, &mut taken.scratch, ndeferred, refused, out)?;
        }
        // Every position is a new key, a copy of a stored or earlier one, or
        // refused, and the kernels count new keys exactly. The copies are
        // not counted where they merge: the scatter combines some of them
        // without a trace, and a fresh two-level build goes on from where
        // its walks stopped, so a pair left in a walk's hand may carry
        // copies step 1 merged, which are reported again if the table then
        // refuses that key.
        let settled = n - out.failed.len() as u64;
        debug_assert!(out.inserted <= settled, "more keys inserted than positions stored");
        out.existing = settled.saturating_sub(out.inserted);
        Ok(out)
    }

    /// The deferred pairs of a region build, unpacked on the device: a
    /// two-level build's through the plain kernel, adding the keys it
    /// inserts and refuses to `out` (the caller derives `existing`); for a
    /// linear build, whose deferred keys were inserted with it, the
    /// `refused` ones it noted. The positions of the keys the table refuses
    /// are found by searching the batch for them.
    #[allow(clippy::too_many_arguments)] // the build's state, handed over
    fn insert_deferred(
        &mut self,
        rk: &RegionKernels,
        keys: &CudaView<'_, K>,
        mode: InsertMode,
        s: &mut RegionScratch,
        ndeferred: u64,
        refused: u64,
        mut out: RawInsert,
    ) -> Result<RawInsert> {
        let nd = ndeferred as usize;
        let deferred = s.deferred.as_ref().expect("reserved").slice(0..nd * K::Word::<V>::BYTES);
        // The pairs go to `mid_words` (free once the bins are built): the keys,
        // then the values from the next 16-byte boundary. A word is at least
        // a key and a value wide, nd <= n, and the buffer holds n words and
        // 16 bytes more. (The buffer may come from a build of another key or
        // value type, so its length says nothing of the alignment.)
        let mid = s.mid_words.as_mut().expect("reserved");
        let half = (nd * std::mem::size_of::<K>()).next_multiple_of(16);
        let (mut kb, mut vb) = mid.split_at_mut(half.min(mid.len()));
        // Safety: plain bytes reinterpreted as keys and values (the buffer
        // starts 256-byte aligned and `half` is a multiple of 16), written in
        // full by gh_unpack_pairs before they are read.
        let (mut dk, mut dv) = unsafe { (kb.transmute_mut::<K>(nd), vb.transmute_mut::<V>(nd)) };
        let (Some(dk), Some(dv)) = (dk.as_mut(), dv.as_mut()) else {
            return Err(Error::Device { device: "cuda".into(), message: "region scratch too small".into() });
        };
        let mut b = self.stream.launch_builder(&self.kernels.unpack_pairs);
        b.arg(&deferred).arg(&ndeferred).arg(&mut *dk).arg(&mut *dv);
        // Safety: arguments match gh_unpack_pairs; the list holds nd words.
        unsafe { b.launch(super::grid(ndeferred, self.sms)) }.map_err(|err| self.err(err))?;
        let refused = match &rk.linear {
            // gh_region_deferred noted the list places of the first keys it
            // refused; of more, every refused key is absent (a linear
            // table's refusals are final), and those are searched for.
            Some(_) => {
                let places = self.failed_places(&dk.as_view(), refused)?;
                self.gather_keys(&dk.as_view(), &places)?
            }
            // Two-level: keys without a short path, under their region's lock.
            None => self.insert_two_level_deferred(dk, dv, mode, &mut out)?,
        };
        if !refused.is_empty() {
            out.failed = self.positions_of(&rk.positions, keys, refused)?;
            out.failed.sort_unstable();
        }
        Ok(out)
    }

    /// The two-level build's deferred pairs (`dk`, `dv`) through the plain
    /// kernel; adds the keys it inserts to `out` and returns the keys refused.
    /// Every position of a refused key is reported, so a refused key must
    /// have no copy stored: in linear probing a later copy finds no more
    /// room than an earlier one, but a cuckoo walk that moved other keys may
    /// have made room for a later copy. Refused pairs therefore go through
    /// the kernel again until a pass settles none of them: then each is
    /// absent (a copy of a present key is updated, never refused). The pairs
    /// are compacted into the same buffers, so no device memory is taken.
    ///
    /// The build's searches found no place for most of these keys, and the
    /// kernel's walks would mostly fail too, each thousands of bucket reads
    /// under a region lock (at load 0.95 they took an insert from 79 to
    /// 245 ms on an H200): the kernels run with a probe limit of 0, which
    /// sends a key to the overflow before any walk while it has room.
    fn insert_two_level_deferred(
        &mut self,
        dk: &mut cudarc::driver::CudaViewMut<'_, K>,
        dv: &mut cudarc::driver::CudaViewMut<'_, V>,
        mode: InsertMode,
        out: &mut RawInsert,
    ) -> Result<Vec<K>> {
        let limit = std::mem::replace(&mut self.probe.limit, 0);
        let refused = self.insert_leftovers(dk, dv, mode, out);
        self.probe.limit = limit;
        refused
    }

    fn insert_leftovers(
        &mut self,
        dk: &mut cudarc::driver::CudaViewMut<'_, K>,
        dv: &mut cudarc::driver::CudaViewMut<'_, V>,
        mode: InsertMode,
        out: &mut RawInsert,
    ) -> Result<Vec<K>> {
        let rest = self.insert_plain(&dk.as_view(), &dv.as_view(), mode)?;
        out.inserted += rest.inserted;
        if rest.failed.is_empty() {
            return Ok(Vec::new());
        }
        let ordinal = self.ctx.ordinal();
        let err = move |e| super::driver_error(ordinal, e);
        let all_keys = self.stream.clone_dtoh(&dk.as_view()).map_err(err)?;
        let all_values = self.stream.clone_dtoh(&dv.as_view()).map_err(err)?;
        self.stream.synchronize().map_err(err)?;
        let mut keys: Vec<K> = rest.failed.iter().map(|&p| all_keys[p]).collect();
        let mut values: Vec<V> = rest.failed.iter().map(|&p| all_values[p]).collect();
        loop {
            let m = keys.len();
            self.stream.memcpy_htod(&keys, &mut dk.slice_mut(0..m)).map_err(err)?;
            self.stream.memcpy_htod(&values, &mut dv.slice_mut(0..m)).map_err(err)?;
            let again = self.insert_plain(&dk.slice(0..m), &dv.slice(0..m), mode)?;
            out.inserted += again.inserted;
            let settled = again.inserted + again.existing;
            keys = again.failed.iter().map(|&p| keys[p]).collect();
            values = again.failed.iter().map(|&p| values[p]).collect();
            if settled == 0 || keys.is_empty() {
                return Ok(keys);
            }
        }
    }

    /// The positions of `keys` that hold one of `refused` (the keys a build
    /// failed to store, in any order): a search of the batch, not a lookup
    /// of every key in the table. The build has stored keys by now, so this
    /// must not fail for want of memory: without room for the sorted list on
    /// the device, a copy of the batch is searched on the host.
    fn positions_of(&mut self, search: &CudaFunction, keys: &CudaView<'_, K>, mut refused: Vec<K>) -> Result<Vec<usize>> {
        refused.sort_unstable();
        refused.dedup();
        let sorted = match self.upload(&refused) {
            Ok(sorted) => sorted,
            Err(Error::OutOfMemory { .. }) => {
                let batch = self.stream.clone_dtoh(keys).map_err(|e| self.err(e))?;
                self.stream.synchronize().map_err(|e| self.err(e))?;
                let refused_at = |(i, k): (usize, &K)| refused.binary_search(k).is_ok().then_some(i);
                return Ok(batch.iter().enumerate().filter_map(refused_at).collect());
            }
            Err(e) => return Err(e),
        };
        self.collect_positions(keys, refused.len() as u64, Some((&sorted, search)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_build_for_few_heavy_regions() {
        // 132 SMs: three waves of narrow blocks are 1188 regions.
        let sms = 132;
        assert!(wide_build(1 << 26, 1024, 8, sms), "the aggregation of 2^26 keys into 2^23 slots");
        assert!(wide_build(1 << 25, 512, 8, sms));
        assert!(!wide_build(1 << 27, 2048, 8, sms), "past three waves");
        assert!(!wide_build((1 << 23) - 1, 1024, 8, sms), "fewer keys than slots");
        assert!(!wide_build(1 << 26, 16384, 8, sms), "an insert into 2^27 slots");
        assert!(wide_build(1 << 22, 1024, 16, sms), "16-byte slots: 4096 a region");
    }

    fn shape(scheme: Scheme, word: usize, live: u64, slots: u64, buckets: u64) -> Shape {
        Shape { scheme, word, live, slots, buckets, room: 1 << 40 }
    }

    #[test]
    fn only_large_batches_into_multi_region_tables() {
        let slots = 1u64 << 27;
        let buckets = slots / 4;
        for scheme in [Scheme::Linear, Scheme::TwoLevel] {
            assert!(suits(1 << 26, shape(scheme, 8, 0, slots, buckets)));
            assert!(!suits(1 << 20, shape(scheme, 8, 0, slots, buckets)), "small batches take the plain kernel");
            assert!(!suits(1 << 10, shape(scheme, 8, 0, 1 << 12, 1 << 10)), "one region: nothing to gain");
        }
        // A two-level table from load 0.75 (u64 pairs: 0.85) on builds
        // batches down to 1/256 of its slots.
        let busy = slots / 4 * 3;
        assert!(suits(1 << 19, shape(Scheme::TwoLevel, 8, busy, slots, buckets)));
        assert!(!suits((1 << 19) - 1, shape(Scheme::TwoLevel, 8, busy, slots, buckets)));
        assert!(!suits(1 << 19, shape(Scheme::TwoLevel, 8, busy - 1, slots, buckets)));
        assert!(!suits(1 << 19, shape(Scheme::TwoLevel, 16, busy, slots, buckets)), "u64 pairs: from 0.85");
        assert!(suits(1 << 19, shape(Scheme::TwoLevel, 16, slots - slots / 8, slots, buckets)));
        assert!(!suits(1 << 19, shape(Scheme::Linear, 8, busy, slots, buckets)), "linear probing: not below 1/16");
        // u32 pairs from load 0.95: down to 1/2048.
        let at = |pct: u64| slots * pct / 100 + 1;
        assert!(suits(1 << 16, shape(Scheme::TwoLevel, 8, at(95), slots, buckets)));
        assert!(!suits((1 << 16) - 1, shape(Scheme::TwoLevel, 8, at(95), slots, buckets)));
        assert!(!suits(1 << 16, shape(Scheme::TwoLevel, 8, at(94), slots, buckets)), "1/256 below 0.95");
        assert!(suits(1 << 19, shape(Scheme::TwoLevel, 8, at(94), slots, buckets)));
        assert!(!suits(1 << 17, shape(Scheme::TwoLevel, 16, at(95), slots, buckets)), "u64 pairs: 1/256 from 0.85");
    }

    #[test]
    fn apply_batches_larger_than_the_table_are_built_in_chunks() {
        let (slots, buckets) = (1u64 << 27, 1u64 << 25);
        let sum = InsertMode::Apply(crate::Reduce::Sum);
        let chunk_len = |n, mode, live, slots, buckets| chunk_len(n, mode, shape(Scheme::Linear, 8, live, slots, buckets), RegionBuild::Auto);
        // 2^30 inputs (16 per key at load 0.5): two equal chunks of four
        // times the table's size where the device has room for their
        // scratch, else eight of the table's size.
        assert_eq!(chunk_len(1 << 30, sum, 0, slots, buckets), Some(1 << 29));
        assert_eq!(chunk_len(3 << 27, sum, 0, slots, buckets), Some(3 << 27));
        assert_eq!(chunk_len((5 << 27) + 1, sum, 0, slots, buckets), Some((5 << 26) + 1));
        let tight = |n, room| super::chunk_len(n, sum, Shape { room, ..shape(Scheme::Linear, 8, 0, slots, buckets) }, RegionBuild::Auto);
        // (3.5 words a key: two binned copies, open bins up to a quarter
        // larger, and the deferred list.)
        assert_eq!(tight(1 << 30, (7 * 8) << 28), Some(1 << 29), "room for the scratch of 2^29 8-byte pairs");
        assert_eq!(tight(1 << 30, ((7 * 8) << 28) - 1), Some(1 << 27));
        assert_eq!(tight(3 << 27, 7 * 8 * (3 << 27) / 2), Some(3 << 27), "room for the batch's scratch");
        assert_eq!(tight(1 << 30, 0), Some(1 << 27));
        assert_eq!(tight(3 << 27, 0), Some(1 << 27));
        // TARGETS' aggregation: 2^26 inputs into 2^23 slots, one build;
        // up to 2^26 more, still one; past that, equal chunks.
        assert_eq!(chunk_len(1 << 26, sum, 0, 1 << 23, 1 << 21), Some(1 << 26));
        assert_eq!(chunk_len(1 << 27, sum, 0, 1 << 23, 1 << 21), Some(1 << 26));
        assert_eq!(chunk_len(1 << 27, sum, 0, 1 << 25, 1 << 23), Some(1 << 27));
        // Assign counts every key as new: no more than 96% of the slots.
        assert_eq!(chunk_len(1 << 26, InsertMode::Assign, 0, slots, buckets), Some(1 << 26));
        assert_eq!(chunk_len(1 << 27, InsertMode::Assign, 0, slots, buckets), None);
        // A table already 97% full takes the plain kernel for either.
        assert_eq!(chunk_len(1 << 26, sum, slots / 100 * 97, slots, buckets), None);
    }

    #[test]
    fn the_setting_overrides_the_load_rules_not_the_size_rules() {
        let (slots, buckets) = (1u64 << 27, 1u64 << 25);
        let full = slots / 100 * 97;
        for mode in [InsertMode::Assign, InsertMode::Apply(crate::Reduce::Sum)] {
            let at = |n, live, setting| chunk_len(n, mode, shape(Scheme::Linear, 8, live, slots, buckets), setting);
            assert_eq!(at(1 << 26, 0, RegionBuild::Never), None, "never, even where it would pay");
            for forced in [RegionBuild::Always, RegionBuild::TwoPass] {
                assert_eq!(at(1 << 26, full, forced), Some(1 << 26), "{forced:?} whatever the load");
                assert_eq!(at(1 << 20, 0, forced), None, "{forced:?}: small batches still take the plain kernel");
                let one_region = chunk_len(1 << 10, mode, shape(Scheme::Linear, 8, 0, 1 << 12, 1 << 10), forced);
                assert_eq!(one_region, None, "{forced:?}: one region, nothing to build");
            }
        }
        assert!(RegionBuild::TwoPass.two_pass() && !RegionBuild::Always.two_pass() && !RegionBuild::Auto.two_pass());
    }

    #[test]
    fn scratch_goes_back_to_its_device_and_can_be_released() {
        let ordinal = usize::MAX; // no such device: only the cache is involved
        drop(Taken::new(ordinal));
        assert!(cache().lock().unwrap().contains_key(&ordinal), "put back after the build");
        assert_eq!(release_scratch(ordinal), 0, "nothing was allocated");
        assert!(!cache().lock().unwrap().contains_key(&ordinal));
        assert_eq!(release_scratch(ordinal), 0);
    }

    #[test]
    fn plans_split_regions_into_two_digits() {
        // 2^27 eight-byte slots: 2^14 regions, 128 bins per pass.
        let p = Plan::new(1 << 26, 1 << 14, 132, 8, false, false);
        assert_eq!((p.shift, p.bins1), (7, 128));
        assert_eq!(p.parts1, 396, "one wave of three blocks per SM");
        assert_eq!(p.parts2, 24, "eight waves of pass-2 blocks");
        assert_eq!(Plan::new(1 << 20, 1 << 14, 132, 8, false, false).parts2, 2, "no more parts than tiles");
        // Regions not a power of two: the last pass-1 bin is partial.
        let p = Plan::new(1 << 20, 1000, 132, 16, false, false);
        assert_eq!((p.shift, p.bins1), (5, 32));
        assert!(p.bins1 << p.shift >= 1000);
        // Few regions: one pass, by region.
        let p = Plan::new(1 << 20, 200, 132, 8, false, false);
        assert_eq!((p.shift, p.bins1), (0, 200));
        assert!(!p.two_pass());
        // The tests' tables of 4 and 8 regions, forced to two passes.
        let p = Plan::new(1 << 14, 4, 132, 8, true, false);
        assert_eq!((p.shift, p.bins1), (1, 2));
        let p = Plan::new(1 << 14, 5, 132, 16, true, false);
        assert_eq!((p.shift, p.bins1), (1, 3));
        assert!(Plan::new(1 << 14, 2, 132, 8, true, false).shift == 0, "two regions: one pass");
        // The most regions stay within the kernels' u16 bins and 4096 per pass.
        let p = Plan::new(1 << 30, MAX_REGIONS, 132, 8, false, false);
        assert!(p.bins1 <= 4096 && (1u64 << p.shift) <= 4096);
        // Scatter shared memory fits three blocks per SM on an H100/H200
        // (1 KiB of each block's 228 KiB share is the system's).
        assert!(scatter_shared_bytes(8, 128) * 3 <= 225 << 10);
        assert!(scatter_shared_bytes(16, 128) * 3 <= 225 << 10);
        assert!(scatter_shared_bytes(16, 4096) <= 227 << 10);
    }

    #[test]
    fn open_bins_take_a_quarter_more_than_the_share() {
        // The aggregation: 2^26 keys over 1024 regions, a quarter more places.
        let p = Plan::new(1 << 26, 1 << 10, 132, 8, false, true);
        assert_eq!(p.open, 65536 + 16384);
        assert_eq!(p.words(1 << 26), 1024 * p.open as u64);
        // u64 inserts into 2^27 slots at load 0.5: 2^15 regions, 2048 keys
        // each, 512 more places (8 deviations and 64 need 2472).
        let p = Plan::new(1 << 26, 1 << 15, 132, 16, false, true);
        assert_eq!(p.open, 2560);
        assert!(p.words(1 << 26) * 4 <= 5 << 26);
        assert_eq!(open_bin(1400 << 15, 1 << 15), 0, "a quarter of 1400 keys is under 8 deviations and 64");
        assert_eq!(open_bin(1500 << 15, 1 << 15), 1875);
        // Few keys a region: packed bins.
        assert_eq!(Plan::new(1 << 20, 1 << 14, 132, 8, false, true).open, 0);
        assert_eq!(Plan::new(1 << 20, 1 << 14, 132, 8, false, true).words(1 << 20), 1 << 20);
        // Offsets stay within u32, the batch's words past the end included.
        assert_eq!(open_bin(u32::MAX as u64 - 2, 4), 0);
        // Packed again after an overflow: the same split, n words.
        let p = Plan::new(1 << 26, 1 << 10, 132, 8, false, true);
        let q = p.packed();
        assert_eq!((q.open, q.words(1 << 26), q.shift, q.bins1, q.parts2), (0, 1 << 26, p.shift, p.bins1, p.parts2));
        assert_eq!(Plan::new(1 << 26, 1 << 10, 132, 8, false, false), q);
        // The largest sample count whose region, scaled up, fits an open
        // bin (the device's decision, gh_region_scan): 2^26 keys over 2^10
        // regions, a sixteenth sampled, 81920 places a bin.
        let most = open_sample_most(81920, 1 << 26, 1 << 22);
        let scaled = |t: f64| (t + 4.0 * t.sqrt()) * 16.0;
        assert!(scaled(most as f64) <= 81920.0 && scaled(most as f64 + 1.0) > 81920.0, "{most}");
        assert_eq!(open_sample_most(81920, 1 << 26, 0), u32::MAX, "no sample, no decision");
        assert_eq!(open_sample_most(100, 1000, 1000), 67, "67 + 4 * 8.19 fits 100 places, 68 + 4 * 8.25 does not");
        // An insert-or-apply batch's skew sample.
        assert_eq!(skew_sample(1 << 26), 1 << 22);
        assert_eq!(skew_sample(1 << 21), 1 << 20);
        assert_eq!(skew_sample(1000), 1000);
    }
}
