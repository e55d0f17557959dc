// Bulk kernels behind the Rust CUDA backend. One module is compiled per
// (key type, value type, scheme), chosen with -DGH_KEY_T=... -DGH_VALUE_T=...
// -DGH_SCHEME=...; the table view is passed by value. The host launches one thread per key
// (or slot); the kernels still loop grid-stride so a capped grid works too.
// Counters the host reads back cost one atomic per block, not one per warp:
// same-address atomics serialise in L2 and cost milliseconds at 2^26 keys.
#include "gpuhash.cuh"

#ifndef GH_KEY_T
#define GH_KEY_T unsigned int
#endif
#ifndef GH_VALUE_T
#define GH_VALUE_T unsigned int
#endif
#ifndef GH_SCHEME
#define GH_SCHEME GH_SCHEME_LINEAR
#endif

typedef GH_KEY_T K;
typedef GH_VALUE_T V;
typedef gh::TableView<K, V> View;
using gh::u32;
using gh::u64;

// Adds every thread's count into a 64-bit counter with one atomic per block.
// All threads of the block must call it (blockDim.x a multiple of 32).
__device__ __forceinline__ void block_add(u64* counter, u64 v) {
    __shared__ u64 per_warp[32];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) per_warp[warp] = v;
    __syncthreads();
    if (warp == 0) {
        u64 t = lane < (blockDim.x >> 5) ? per_warp[lane] : 0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(0xffffffffu, t, o);
        if (lane == 0 && t != 0) atomicAdd(counter, t);
    }
    __syncthreads();  // per_warp is reused by the next call
}

__device__ __forceinline__ u64 thread_index() { return blockIdx.x * (u64)blockDim.x + threadIdx.x; }
__device__ __forceinline__ u64 grid_stride() { return (u64)gridDim.x * blockDim.x; }

// Appends batch position `pos` of an insert that found no slot to `failed`
// (up to `cap`; counters[2] holds the true count).
__device__ __forceinline__ void note_failed(const View& t, u32* failed, u64 cap, u64 pos) {
    const u64 at = atomicAdd(&t.meta->counters[2], 1ull);
    if (at < cap) failed[at] = (u32)pos;
}

// Two values reduced as `op` says, out of place (lanes that hold copies of
// one key reduce their values before one of them reaches a lock or a
// shared word). Integers wrap like the atomics they stand in for.
template <typename T> __device__ __forceinline__ T reduce_pair(T a, T b, u32 op) {
    if (op == gh::REDUCE_SUM) return (T)((u64)a + (u64)b);
    if (op == gh::REDUCE_MIN) return b < a ? b : a;
    return a < b ? b : a;
}
template <> __device__ __forceinline__ float reduce_pair<float>(float a, float b, u32 op) {
    return op == gh::REDUCE_SUM ? a + b : op == gh::REDUCE_MIN ? fminf(a, b) : fmaxf(a, b);
}
template <> __device__ __forceinline__ double reduce_pair<double>(double a, double b, u32 op) {
    return op == gh::REDUCE_SUM ? a + b : op == gh::REDUCE_MIN ? fmin(a, b) : fmax(a, b);
}

// The values `mine` of the lanes in `group` (every one of them calls this)
// reduced as `op` says: the result is whole in the group's lowest lane.
template <typename T> __device__ __forceinline__ T reduce_group(u32 group, T mine, u32 op) {
    T value = mine;
    for (u32 rest = group & (group - 1); rest; rest &= rest - 1)
        value = reduce_pair(value, __shfl_sync(group, mine, __ffs(rest) - 1), op);
    return value;
}

#if GH_SCHEME == GH_SCHEME_HASHINATOR
// Hashinator: a team of t.param lanes per key (kernels/schemes/hashinator.cuh);
// the host launches keys * team threads. Team k serves keys k, k + teams, ...
// (every lane of a team sees the same key, so the team stays together), and
// its first lane does the per-key bookkeeping, so counters stay exact.

// Inserts keys[i] -> values[i]. Positions that find no slot are appended to
// `failed` (up to `failed_cap`; counters[2] holds the true count).
extern "C" __global__ void gh_insert(View t, const K* keys, const V* values, u64 n, u32 mode, u32 op,
                                     u32* failed, u64 failed_cap, u64 base, const unsigned char* todo) {
    const gh::hashinator::Team team(t.param);
    u64 ins = 0, ex = 0;
    for (u64 i = thread_index() / team.size; i < n; i += grid_stride() / team.size) {
        if (todo && !todo[i]) continue;  // a whole team sees the same i
        int r = gh::hashinator::team_insert(t, team, keys[i], values[i], mode, op);
        if (!team.leader()) continue;
        ins += r == gh::INSERTED;
        ex += r == gh::EXISTING;
        if (r == gh::FAILED) note_failed(t, failed, failed_cap, base + i);
    }
    block_add(&t.meta->counters[0], ins);
    block_add(&t.meta->counters[1], ex);
}

// Looks keys up: values (zero bits when absent) and a found mask (0/1 bytes).
extern "C" __global__ void gh_find(View t, const K* keys, u64 n, V* out, unsigned char* found) {
    const gh::hashinator::Team team(t.param);
    u64 hits = 0;
    for (u64 i = thread_index() / team.size; i < n; i += grid_stride() / team.size) {
        V v = gh::from_bits<V>(0);
        bool hit = gh::hashinator::team_find(t, team, keys[i], &v);
        if (!team.leader()) continue;
        out[i] = v;
        found[i] = (unsigned char)hit;
        hits += hit;
    }
    block_add(&t.meta->counters[3], hits);
}

extern "C" __global__ void gh_contains(View t, const K* keys, u64 n, unsigned char* found) {
    const gh::hashinator::Team team(t.param);
    u64 hits = 0;
    for (u64 i = thread_index() / team.size; i < n; i += grid_stride() / team.size) {
        V v;
        bool hit = gh::hashinator::team_find(t, team, keys[i], &v);
        if (!team.leader()) continue;
        found[i] = (unsigned char)hit;
        hits += hit;
    }
    block_add(&t.meta->counters[3], hits);
}

extern "C" __global__ void gh_erase(View t, const K* keys, u64 n) {
    const gh::hashinator::Team team(t.param);
    u64 gone = 0;
    for (u64 i = thread_index() / team.size; i < n; i += grid_stride() / team.size) {
        bool g = gh::hashinator::team_erase(t, team, keys[i]);
        gone += team.leader() && g;
    }
    block_add(&t.meta->counters[3], gone);
}

#else
// Inserts keys[i] -> values[i]. Positions that find no slot are appended to
// `failed` as `base + i` (up to `failed_cap`; counters[2] holds the true
// count), so launches over consecutive sub-ranges of one batch report
// positions in the whole batch.
#if GH_SCHEME == GH_SCHEME_LINEAR
extern "C" __global__ void gh_insert(View t, const K* keys, const V* values, u64 n, u32 mode, u32 op,
                                     u32* failed, u64 failed_cap, u64 base, const unsigned char* todo) {
    u64 ins = 0, ex = 0;
    for (u64 i = thread_index(); i < n; i += grid_stride()) {
        if (todo && !todo[i]) continue;
        int r = t.template insert_as<GH_SCHEME>(keys[i], values[i], mode, op);
        ins += r == gh::INSERTED;
        ex += r == gh::EXISTING;
        if (r == gh::FAILED) note_failed(t, failed, failed_cap, base + i);
    }
    block_add(&t.meta->counters[0], ins);
    block_add(&t.meta->counters[1], ex);
}
#else
// The locking schemes (Robin Hood, cuckoo, two-level): lanes of a warp that
// hold one key would only queue on its locks, so the lowest lane of each
// group of equal keys inserts for the group (for insert-or-apply, the
// group's values reduced first) and the others take its outcome. A key
// repeated throughout a batch then costs one insert per warp.

// The live lanes of this warp that hold `key`; for insert-or-apply, `value`
// becomes their values reduced (whole in the group's lowest lane, the leader).
__device__ __forceinline__ u32 key_group(K key, V& value, bool live, u32 mode, u32 op) {
    const u32 group = __match_any_sync(0xffffffffu, key) & __ballot_sync(0xffffffffu, live);
    if (live && mode == gh::MODE_APPLY) value = reduce_group(group, value, op);
    return group;
}

// Counts a group's outcome `r` (its leader's): one new key, the others copies.
__device__ __forceinline__ void count_group(int r, u32 group, u64& ins, u64& ex) {
    const u64 others = __popc(group) - 1;
    ins += r == gh::INSERTED;
    ex += r == gh::EXISTING ? others + 1 : r == gh::INSERTED ? others : 0;
}

// With todo flags, a refused item's flag becomes 2 as well: the host reads
// the positions there when more than `failed_cap` were refused.
extern "C" __global__ void gh_insert(View t, const K* keys, const V* values, u64 n, u32 mode, u32 op,
                                     u32* failed, u64 failed_cap, u64 base, unsigned char* todo) {
    const u32 lane = threadIdx.x & 31;
    u64 ins = 0, ex = 0;
    // Whole warps step together (blockDim.x is a multiple of 32), so every
    // lane reaches the warp-wide votes; lanes past the batch's end sit out.
    u64 w = thread_index() - lane;
    while (w < n) {
        // The warp's next items: with todo flags, the items gh_insert_unlocked
        // left (todo[i] != 0) from as many of the warp's 32-item chunks as
        // fit in 32 lanes, in batch order. A round costs a locked insert's
        // latency if any lane is live, and the step leaves a few items per
        // chunk: a chunk per round took 16 rounds of a 2^20-key batch.
        u64 i = n;  // none
        for (u32 have = 0; w < n;) {
            const bool left = w + lane < n && (!todo || todo[w + lane]);
            const u32 ballot = __ballot_sync(0xffffffffu, left);
            const u32 count = __popc(ballot);
            if (have + count > 32) break;  // the next round takes this chunk whole
            if (lane >= have && lane < have + count) i = w + __fns(ballot, 0, (int)(lane - have) + 1);
            have += count;
            w += grid_stride();
            if (!todo) break;  // every item is live: one chunk a round
        }
        const bool live = i < n;
        const K key = live ? keys[i] : (K)0;
        V value = live ? values[i] : gh::from_bits<V>(0);
        const u32 group = key_group(key, value, live, mode, op);
        if (!live) continue;
        const int leader = __ffs(group) - 1;
        int r = gh::FAILED;
        if ((int)lane == leader) {
            r = t.template insert_as<GH_SCHEME>(key, value, mode, op);
            count_group(r, group, ins, ex);
        }
        r = __shfl_sync(group, r, leader);
        if (r == gh::FAILED) {
            note_failed(t, failed, failed_cap, base + i);
            if (todo) todo[i] = 2;
        }
    }
    block_add(&t.meta->counters[0], ins);
    block_add(&t.meta->counters[1], ex);
}

// The locking schemes' first step, without locks (the host runs no other
// insert meanwhile, so no key moves): a stored key is updated in place and,
// on the cuckoo schemes, an absent one claims its first EMPTY candidate slot
// by CAS (see Engine::claim). The items left (every candidate full, and
// out-of-band keys) get todo[i] = 1 for gh_insert. A key repeated throughout
// a batch then costs an atomic per warp, not a lock per warp that every warp
// queues for, and most keys of a batch into a table with room take no lock.
extern "C" __global__ void gh_insert_unlocked(View t, const K* keys, const V* values, u64 n, u32 mode, u32 op,
                                              unsigned char* todo) {
    const u32 lane = threadIdx.x & 31;
    u64 ins = 0, ex = 0;
    for (u64 w = thread_index() - lane; w < n; w += grid_stride()) {
        const u64 i = w + lane;
        const bool live = i < n;
        const K key = live ? keys[i] : (K)0;
        V value = live ? values[i] : gh::from_bits<V>(0);
        const u32 group = key_group(key, value, live, mode, op);
        if (!live) continue;
        const int leader = __ffs(group) - 1;
        int r = gh::LEFT;
        if ((int)lane == leader && View::special_index(key) < 0) {
            r = t.template insert_unlocked_as<GH_SCHEME>((u64)key, value, mode, op);
            count_group(r, group, ins, ex);
        }
        r = __shfl_sync(group, r, leader);
        todo[i] = (unsigned char)(r == gh::LEFT);
    }
    block_add(&t.meta->counters[0], ins);
    block_add(&t.meta->counters[1], ex);
}
#endif

// Looks keys up: values (zero bits when absent) and a found mask (0/1 bytes).
extern "C" __global__ void gh_find(View t, const K* keys, u64 n, V* out, unsigned char* found) {
    u64 hits = 0;
    for (u64 i = thread_index(); i < n; i += grid_stride()) {
        V v = gh::from_bits<V>(0);
        bool hit = t.template find_as<GH_SCHEME>(keys[i], &v, true);
        out[i] = v;
        found[i] = (unsigned char)hit;
        hits += hit;
    }
    block_add(&t.meta->counters[3], hits);
}

extern "C" __global__ void gh_contains(View t, const K* keys, u64 n, unsigned char* found) {
    u64 hits = 0;
    for (u64 i = thread_index(); i < n; i += grid_stride()) {
        V v;
        bool hit = t.template find_as<GH_SCHEME>(keys[i], &v, true);
        found[i] = (unsigned char)hit;
        hits += hit;
    }
    block_add(&t.meta->counters[3], hits);
}

#if GH_SCHEME == GH_SCHEME_LINEAR
extern "C" __global__ void gh_erase(View t, const K* keys, u64 n) {
    u64 gone = 0;
    for (u64 i = thread_index(); i < n; i += grid_stride()) gone += t.template erase_as<GH_SCHEME>(keys[i]);
    block_add(&t.meta->counters[3], gone);
}
#else
// As gh_insert above: one erase per group of equal keys in a warp (the
// others would find the key gone, after queueing on its locks).
extern "C" __global__ void gh_erase(View t, const K* keys, u64 n) {
    const u32 lane = threadIdx.x & 31;
    u64 gone = 0;
    for (u64 w = thread_index() - lane; w < n; w += grid_stride()) {
        const u64 i = w + lane;
        const bool live = i < n;
        const K key = live ? keys[i] : (K)0;
        const u32 group = __match_any_sync(0xffffffffu, key) & __ballot_sync(0xffffffffu, live);
        if (live && (int)lane == __ffs(group) - 1) gone += t.template erase_as<GH_SCHEME>(key);
    }
    block_add(&t.meta->counters[3], gone);
}
#endif

#endif  // GH_SCHEME == GH_SCHEME_HASHINATOR

// Appends the positions of absent keys (used when more inserts failed than
// the failure buffer held: a failed key is exactly one left absent).
extern "C" __global__ void gh_collect_absent(View t, const K* keys, u64 n, u32* out, u64 cap) {
    for (u64 i = thread_index(); i < n; i += grid_stride()) {
        V v;
        if (!t.template find_as<GH_SCHEME>(keys[i], &v)) {
            u64 at = atomicAdd(&t.meta->counters[3], 1ull);
            if (at < cap) out[at] = (u32)i;
        }
    }
}

// out[j] = keys[pos[j]]: fetches the keys a full table did not store without
// copying the whole batch back to the host.
extern "C" __global__ void gh_gather_keys(const K* keys, const u32* pos, u64 n, K* out) {
    for (u64 j = thread_index(); j < n; j += grid_stride()) out[j] = keys[pos[j]];
}

// Moves every key of `from` (one thread per old slot) into the empty `to`.
// Out-of-band keys stay in the metadata block, which the host carries over.
extern "C" __global__ void gh_rehash(View from, u64 from_slots, View to) {
    u64 moved = 0, fail = 0;
    for (u64 i = thread_index(); i < from_slots; i += grid_stride()) {
        View::raw w = from.slots[i];
        u64 k = View::W::key(w);
        if (k != View::W::EMPTY_KEY && k != View::W::TOMB_KEY) {
            int r = to.template insert_as<GH_SCHEME>((K)k, gh::from_bits<V>(View::W::value(w)), gh::MODE_IF_ABSENT, 0);
            moved += r == gh::INSERTED;
            fail += r == gh::FAILED;
        }
    }
    block_add(&to.meta->counters[0], moved);
    block_add(&to.meta->counters[2], fail);
}

// Copies every pair in slots out (order unspecified); counters[3] counts them.
extern "C" __global__ void gh_export(View t, u64 slots, K* keys_out, V* values_out, u64 cap) {
    for (u64 i = thread_index(); i < slots; i += grid_stride()) {
        View::raw w = t.slots[i];
        u64 k = View::W::key(w);
        if (k == View::W::EMPTY_KEY || k == View::W::TOMB_KEY) continue;
        u64 at = atomicAdd(&t.meta->counters[3], 1ull);
        if (at < cap) {
            keys_out[at] = (K)k;
            values_out[at] = gh::from_bits<V>(View::W::value(w));
        }
    }
}

// Sum (counters[0]) and maximum (counters[1]) of the buckets each stored key
// sits past its home bucket, and the live (counters[2]) and erased
// (counters[3]) slots: a census after users' kernels changed the table.
extern "C" __global__ void gh_displacement(View t, u64 slots) {
    u64 d = 0, live = 0, tomb = 0, dmax = 0;
    for (u64 i = thread_index(); i < slots; i += grid_stride()) {
        View::raw w = t.slots[i];
        u64 k = View::W::key(w);
        tomb += k == View::W::TOMB_KEY;
        if (k != View::W::EMPTY_KEY && k != View::W::TOMB_KEY) {
            live += 1;
            u64 dist = t.template displacement_as<GH_SCHEME>(k, i);
            d += dist;
            dmax = dist > dmax ? dist : dmax;
        }
    }
    if (dmax) atomicMax(&t.meta->counters[1], dmax);
    block_add(&t.meta->counters[0], d);
    block_add(&t.meta->counters[2], live);
    block_add(&t.meta->counters[3], tomb);
}

#if GH_SCHEME == GH_SCHEME_LINEAR || GH_SCHEME == GH_SCHEME_TWO_LEVEL
// ---- region build -------------------------------------------------------------
// A large batch is inserted region by region: a region is REGION_BUCKETS
// consecutive buckets (64 KiB), the most one block holds in shared memory at
// a useful occupancy. A partition sorts the batch by the region of each key's
// home bucket into bins (region r's pairs at [offsets[r], ends[r]));
// one block per region then loads its region, places its bin (by counting
// where the region is EMPTY, else with shared-memory atomics under the same
// first-EMPTY-slot rule as `linear::insert`, so the table is one the plain
// kernel could have built) and writes the region back with coalesced stores.
// Keys of an EMPTY region's runs that pass its end take the next region's
// first EMPTY slots (gh_region_spill); keys whose sequence otherwise leaves
// the region, and out-of-band keys, are deferred as packed pairs to the plain
// kernel, which runs after and sees the built regions. counters[2] counts
// the deferred pairs.
//
// The partition is a most-significant-digit radix partition of the region
// index in one pass or two (src/backend/cuda/region.rs picks): pass 1 bins
// by `region >> shift` (every region when shift is 0), pass 2 splits each
// pass-1 bin ("segment") by `region & (2^shift - 1)`. A few hundred bins per
// pass keep the write fronts short; one pass over ~16 Ki regions would need
// either an atomic per key or scattered 8-byte writes that thrash L2.
//   gh_region_hist    counts the keys of every region, once for both passes
//                     (in shared memory, one global atomic per block and region),
//                     for packed bins; open bins skip it (region.rs);
//   gh_region_scan    prefix sums: exact region offsets, and the pass-1 bin
//                     offsets among them, so packed bins never overflow (open
//                     bins: equal places per region, and a check for overflow);
//   gh_region_scatter* per tile of the batch: rank its keys by bin in shared
//                     memory, reserve the tile's range of each bin (one global
//                     atomic per nonzero bin), group the tile by bin and write
//                     each bin's run with consecutive threads, while the next
//                     tile streams into shared memory.
// Scatter block (x, y) takes part x of `gridDim.x` of segment y (pass 1: the
// whole batch). The order of a bin's keys is not kept; nothing depends on it.

// Buckets per region (REGION_BUCKETS in region.rs): 2048 32-byte buckets.
constexpr u32 REGION_LOG2 = 11;
constexpr u32 BUILD_BUCKETS = 1u << REGION_LOG2;
// Threads of the partition and build kernels (the host launches these).
#define GH_PART_THREADS 512
// Threads of a block of the linear build's wide form (gh_region_build_wide).
#define GH_BUILD_WIDE_THREADS 768
// Keys a partition thread ranks per tile: tiles of 4096 keys (2048 for
// 16-byte words), 32 KiB of input and as much grouped, so three blocks fit
// an SM.
constexpr u32 PART_ITEMS = View::WORD_BYTES == 8 ? 8 : 4;
constexpr u32 PART_TILE = GH_PART_THREADS * PART_ITEMS;
constexpr u32 PART_IN_BYTES = PART_TILE * View::WORD_BYTES;  // holds a tile of keys and values too

#if GH_SCHEME == GH_SCHEME_TWO_LEVEL
// Buckets of a two-level region: its span (2048 or 512 buckets) but the
// share the overflow takes (src/core/cuckoo.rs Regions::of).
constexpr u32 TL_LARGE = GH_CUCKOO_LARGE_REGION_BUCKETS - GH_CUCKOO_LARGE_REGION_BUCKETS / GH_CUCKOO_OVERFLOW_SHARE;
constexpr u32 TL_SMALL = GH_CUCKOO_REGION_BUCKETS - GH_CUCKOO_REGION_BUCKETS / GH_CUCKOO_OVERFLOW_SHARE;
#endif

// The build region of a key: that of its home bucket (linear), or that of
// its two-level region, of which a build region holds one (large regions)
// or BUILD_BUCKETS / GH_CUCKOO_REGION_BUCKETS (the host builds only tables
// of two build regions or more).
__device__ __forceinline__ u32 region_of(const View& t, u64 k) {
#if GH_SCHEME == GH_SCHEME_LINEAR
    return (u32)(t.home(k) >> REGION_LOG2);
#else
    const gh::two_level::Regions<K, V> g(t);
    const u64 r = g.region(k);
    return (u32)(g.rb == TL_LARGE ? r : r / (BUILD_BUCKETS / GH_CUCKOO_REGION_BUCKETS));
#endif
}

// One element (4, 8 or 16 bytes, aligned to its size) from global to shared
// memory without passing through registers (cp.async), so loads stream while
// the block works. -DGH_REGION_SYNC_LOAD makes them plain loads: racecheck
// (CUDA 13.0) stops cp.async with a misaligned-address error that neither
// plain runs nor memcheck show, so racecheck runs build with it.
template <int BYTES>
__device__ __forceinline__ void copy_async(void* to_shared, const void* from_global) {
#ifdef GH_REGION_SYNC_LOAD
    if (BYTES == 4) *(u32*)to_shared = __ldcg((const u32*)from_global);
    if (BYTES == 8) *(u64*)to_shared = __ldcg((const u64*)from_global);
    if (BYTES == 16) *(ulonglong2*)to_shared = __ldcg((const ulonglong2*)from_global);
#else
    const unsigned to = (unsigned)__cvta_generic_to_shared(to_shared);
    if (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(from_global) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(to), "l"(from_global), "n"(BYTES) : "memory");
#endif
}
// Waits for this thread's copies (a __syncthreads must follow before others read them).
__device__ __forceinline__ void copy_async_wait() {
#ifndef GH_REGION_SYNC_LOAD
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// The slice [*lo, *hi) of the segment [seg_lo, seg_hi) that part x of
// `parts` takes: equal shares.
__device__ __forceinline__ void part_range(u64 seg_lo, u64 seg_hi, u32 x, u32 parts, u64* lo, u64* hi) {
    const u64 per = (seg_hi - seg_lo + parts - 1) / parts;
    *lo = min(seg_hi, seg_lo + x * per);
    *hi = min(seg_hi, *lo + per);
}

// Copies of a key within one partition tile are combined before the build
// for insert-or-apply (every reduction is commutative): a skewed batch's hot
// keys would otherwise reach their region's block millions of times (zipf
// keys ran 7x slower than uniform ones, one block building the hot region
// while the others idled). A tile's table of COMBINE_SLOTS entries, half
// full at most, maps each key to the first of its copies to claim it. Only
// keys of heavy regions (an eighth of the skew mark or more) go through it:
// a shared-memory CAS for every key of a batch doubled its partition's time.
constexpr u32 COMBINE_SLOTS = 2 * PART_TILE;
constexpr u32 COMBINE_FREE = 0xffffffffu;

// Claims `key`, at index j of the tile, in `tab` (every entry COMBINE_FREE
// at the start of the tile): returns j if no copy came first, else the index
// of the copy that holds the key. key_at(i) is the key at tile index i.
template <typename KeyAt>
__device__ __forceinline__ u32 combine_claim(u32* tab, u64 key, u32 j, KeyAt key_at) {
    u32 h = (u32)((key * 0x9e3779b97f4a7c15ull) >> 40) & (COMBINE_SLOTS - 1);
    while (true) {
        // An entry is written once a tile, so a plain read that finds it
        // taken saves the CAS (most claims, where copies are many).
        u32 e = ((volatile u32*)tab)[h];
        if (e == COMBINE_FREE) e = atomicCAS(&tab[h], COMBINE_FREE, j);
        if (e == COMBINE_FREE) return j;
        if ((u64)key_at(e) == key) return e;
        h = (h + 1) & (COMBINE_SLOTS - 1);
    }
}

// Keys per region (out-of-band keys excluded) added to counts[0..regions),
// zeroed by the host. With `local` the block counts in shared memory first
// (one global atomic per block and nonzero region); tables of more regions
// than shared memory holds count with a global atomic per key. With
// `combine` (run only if the first scan found the batch *skewed) only the
// first copy of a key in each scatter tile counts, as gh_region_scatter1
// combines them: the host then launches as many blocks as the scatter, so
// both see the same tiles.
// The host launches GH_PART_THREADS threads a block, or HIST_WIDE_THREADS
// where the local histogram takes more than a third of an SM's shared
// memory: one block an SM then, and with twice the threads twice the loads
// in flight (u64 inserts into 2^15 regions 2.4% faster on an H200). At
// most 40 registers, so that three blocks of GH_PART_THREADS still fit an
// SM where they are launched (a bound of 1024 threads let ptxas take 51).
constexpr u32 HIST_WIDE_THREADS = 1024;
extern "C" __global__ void __maxnreg__(40)
    gh_region_hist(View t, const K* keys, u64 n, u32 regions, u32 local, u32 combine, const u32* skewed,
                   const unsigned char* heavy, u32* counts) {
    if (combine && *skewed == 0) return;
    extern __shared__ __align__(16) unsigned char hist_smem[];
    // combine: the tile's keys, then its table; then the histogram, when local.
    K* tile_keys = (K*)hist_smem;
    u32* tab = (u32*)(hist_smem + PART_TILE * sizeof(K));
    u32* hist = combine ? tab + COMBINE_SLOTS : (u32*)hist_smem;
    if (local)
        for (u32 b = threadIdx.x; b < regions; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    u64 lo, hi;
    part_range(0, n, blockIdx.x, gridDim.x, &lo, &hi);
    if (combine) {
        for (u64 tile = lo; tile < hi; tile += PART_TILE) {
            const u32 len = (u32)min((u64)PART_TILE, hi - tile);
            for (u32 j = threadIdx.x; j < COMBINE_SLOTS; j += blockDim.x) tab[j] = COMBINE_FREE;
            K key[PART_ITEMS];  // all loads in flight before the stores
#pragma unroll
            for (u32 k = 0; k < PART_ITEMS; ++k) {
                const u32 j = k * blockDim.x + threadIdx.x;
                if (j < len) key[k] = keys[tile + j];
            }
#pragma unroll
            for (u32 k = 0; k < PART_ITEMS; ++k) {
                const u32 j = k * blockDim.x + threadIdx.x;
                if (j < len) tile_keys[j] = key[k];
            }
            __syncthreads();
            for (u32 j = threadIdx.x; j < len; j += blockDim.x) {
                const K key = tile_keys[j];
                if (View::special_index(key) >= 0) continue;
                const u32 r = region_of(t, (u64)key);
                if (heavy[r] && combine_claim(tab, (u64)key, j, [&](u32 i) { return tile_keys[i]; }) != j) continue;
                atomicAdd(local ? &hist[r] : &counts[r], 1u);
            }
            __syncthreads();
        }
    } else {
        constexpr u32 U = sizeof(K) == 4 ? 8 : 4;  // keys in flight per thread (8 u64 keys measured no faster)
        for (u64 i = lo + threadIdx.x; i < hi; i += U * blockDim.x) {
            K key[U];
#pragma unroll
            for (u32 u = 0; u < U; ++u) {
                const u64 at = i + u * blockDim.x;
                key[u] = at < hi ? keys[at] : (K)~(K)0;  // out of band: not counted
            }
#pragma unroll
            for (u32 u = 0; u < U; ++u) {
                if (View::special_index(key[u]) >= 0) continue;
                const u32 r = region_of(t, (u64)key[u]);
                atomicAdd(local ? &hist[r] : &counts[r], 1u);
            }
        }
    }
    __syncthreads();
    if (local)
        for (u32 b = threadIdx.x; b < regions; b += blockDim.x)
            if (hist[b]) atomicAdd(&counts[b], hist[b]);
}

// Exclusive scan of every thread's x over the block under `op` (associative
// and commutative, `identity` its neutral element); *total gets the whole
// block's. All threads call it; scratch is 32 shared words.
struct Plus {
    __device__ __forceinline__ u32 operator()(u32 a, u32 b) const { return a + b; }
};
struct Max {
    __device__ __forceinline__ int operator()(int a, int b) const { return max(a, b); }
};
template <typename T, typename Op>
__device__ __forceinline__ T block_exclusive(T x, T* scratch, T identity, Op op, T* total) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T incl = x;  // inclusive within the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= (u32)o) incl = op(incl, y);
    }
    if (lane == 31) scratch[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        T w = lane < (blockDim.x >> 5) ? scratch[lane] : identity;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const T y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= (u32)o) w = op(w, y);
        }
        scratch[lane] = w;  // inclusive results of the warps
    }
    __syncthreads();
    T excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = identity;
    if (warp) excl = op(excl, scratch[warp - 1]);
    *total = scratch[(blockDim.x >> 5) - 1];
    __syncthreads();  // scratch is reused by the next call
    return excl;
}
// Exclusive prefix sum over the block, and in *total the block's sum.
__device__ __forceinline__ u32 block_scan(u32 x, u32* warp_sums, u32* total) {
    return block_exclusive<u32>(x, warp_sums, 0u, Plus(), total);
}
// Exclusive prefix maximum over the block (`lowest` in thread 0); *total,
// if given, gets the block's maximum.
__device__ __forceinline__ int block_max_exclusive(int x, int* scratch, int lowest, int* total = nullptr) {
    int whole;
    const int excl = block_exclusive<int>(x, scratch, lowest, Max(), &whole);
    if (total) *total = whole;
    return excl;
}

// Splits a[0..len) into runs of consecutive entries, one per thread, in
// order: [*first, *last) is this thread's. Returns the sum of the runs before
// it; *total gets the sum of all. All threads call it.
__device__ __forceinline__ u32 block_runs_scan(const u32* a, u32 len, u32* first, u32* last, u32* total) {
    __shared__ u32 warp_sums[32];
    const u32 per = (len + blockDim.x - 1) / blockDim.x;
    *first = min(len, threadIdx.x * per);
    *last = min(len, *first + per);
    u32 own = 0;
    for (u32 j = *first; j < *last; ++j) own += a[j];
    return block_scan(own, warp_sums, total);
}

// offsets[j] = counts[0] + ... + counts[j - 1] for j <= regions, and
// cursor[j] = offsets[j] for j < regions. With two passes (shift > 0) also
// the pass-1 bins: seg_off[s] = offsets[s << shift] for s < bins1 and
// seg_off[bins1] the total, cursor1[s] = seg_off[s]. One block of 1024
// threads, over the counts in chunks of SCAN_CHUNK staged in shared memory:
// coalesced loads, all of a chunk's in flight at once. (A run of
// consecutive regions per thread read from device memory waited a load
// latency per region: 113 us for 2^15 regions, NVIDIA H200.)
// Insert-or-apply scans twice. The first scan (`again` 0) sets *skewed when
// some region has at least `combine_from` keys (0: never), and then marks
// the heavy regions, those of an eighth of that or more, and zeroes the
// counts for the histogram that combines copies in heavy regions; the
// second (`again` 1) runs only if *skewed is set, over that histogram.
// With `uniform` nonzero the partition's bins are open (region.rs, "open
// bins"): every region is given `uniform` places whatever its count, and
// the counts (a sample's histogram, or nothing read when combine_from is 0)
// only tell whether the batch is skewed. A sample also decides, here on the
// device, that the bins must be packed: where it is skewed, or its largest
// count passes `open_most` (its region, scaled up to the batch, would
// overflow an open bin), *packed (the open bins' overflow flag, counters[1])
// is set, every kernel of the open attempt does nothing, and the host
// partitions again, packed, after the one read of the counters it makes
// anyway (a read-back of the sample before the scatter cost an aggregation
// 1.6% on an H100).
constexpr u32 SCAN_THREADS = 1024;
constexpr u32 SCAN_PER = 8;  // entries of a chunk per thread
constexpr u32 SCAN_CHUNK = SCAN_PER * SCAN_THREADS;
extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
    gh_region_scan(u32* counts, u32 regions, u32 shift, u32* offsets, u32* cursor, u32* seg_off, u32* cursor1,
                   u32 combine_from, u32 again, u32* skewed, unsigned char* heavy, u32 uniform, u32 open_most,
                   unsigned long long* packed) {
    __shared__ int most[32];
    __shared__ u32 warp_sums[32];
    __shared__ u32 chunk[SCAN_CHUNK];
    if (again && *skewed == 0) return;
    const u32 low = (1u << shift) - 1;
    u32 carry = 0, own_most = 0;  // the sum of the chunks before; this thread's largest count
    for (u32 base = 0; base < regions; base += SCAN_CHUNK) {
        const u32 len = min(SCAN_CHUNK, regions - base);
        u32 c[SCAN_PER];
#pragma unroll
        for (u32 u = 0; u < SCAN_PER; ++u) {
            const u32 j = u * SCAN_THREADS + threadIdx.x;
            c[u] = j < len && (!uniform || combine_from) ? counts[base + j] : 0u;
        }
#pragma unroll
        for (u32 u = 0; u < SCAN_PER; ++u) {
            const u32 j = u * SCAN_THREADS + threadIdx.x;
            chunk[j] = uniform ? (j < len ? uniform : 0u) : c[u];
            own_most = max(own_most, c[u]);
        }
        __syncthreads();
        // Each thread the exclusive sums of its run of SCAN_PER entries, in place.
        u32* run = chunk + threadIdx.x * SCAN_PER;
        u32 own = 0;
#pragma unroll
        for (u32 u = 0; u < SCAN_PER; ++u) own += run[u];
        u32 total;
        u32 excl = carry + block_scan(own, warp_sums, &total);  // its syncs order the reads above
#pragma unroll
        for (u32 u = 0; u < SCAN_PER; ++u) {
            const u32 v = run[u];
            run[u] = excl;
            excl += v;
        }
        __syncthreads();
#pragma unroll
        for (u32 u = 0; u < SCAN_PER; ++u) {
            const u32 j = u * SCAN_THREADS + threadIdx.x, g = base + j;
            if (j >= len) continue;
            const u32 o = chunk[j];
            offsets[g] = o;
            cursor[g] = o;
            if (shift && (g & low) == 0) {
                seg_off[g >> shift] = o;
                cursor1[g >> shift] = o;
            }
        }
        carry += total;
        __syncthreads();  // the chunk is read before the next one lands
    }
    if (threadIdx.x == 0) {
        offsets[regions] = carry;
        if (shift) seg_off[(regions + low) >> shift] = carry;
    }
    if (again || combine_from == 0) return;
    int top;
    block_max_exclusive((int)own_most, most, 0, &top);
    const bool skew = (u32)top >= combine_from;
    if (threadIdx.x == 0) {
        skewed[0] = skew;
        if (uniform && (skew || (u32)top > open_most)) *packed = 1;
    }
    if (skew)
        for (u32 j = threadIdx.x; j < regions; j += SCAN_THREADS) {
            heavy[j] = counts[j] >= max(combine_from >> 3, 1u);
            counts[j] = 0;
        }
}

// In-place exclusive prefix sums of a[0..len) (len <= 8 * blockDim.x) by the
// whole block; returns the total to every thread.
__device__ __forceinline__ u32 block_exclusive_scan(u32* a, u32 len) {
    u32 first, last, total;
    u32 run = block_runs_scan(a, len, &first, &last, &total);
    for (u32 j = first; j < last; ++j) {
        const u32 c = a[j];
        a[j] = run;
        run += c;
    }
    __syncthreads();  // every thread's entries are written before any reads them
    return total;
}

// Shared memory of the scatter kernels (region.rs, scatter_shared_bytes,
// sizes it the same way): the tile as read, the tile grouped by bin with each
// key's bin, and two counters per bin. Batch positions are not carried: the
// few keys that end deferred travel as packed pairs, and a key the table then
// refuses is found in the batch again (gh_positions_of). Pass 1 combines
// the copies of a key within a tile when `combine` is a reduction
// (COMBINE_FREE: none), in a table kept where the grouped tile goes later.
// Pass 2 reads pass-1 bin y at [seg_off[y], seg_end[y]). Open bins (region.rs)
// pass `limit`, each bin's end (indexed as `cursor`): a tile's run that
// would pass it is not written, and counters[1] (no build kernel counts
// there) flags the overflow, after which pass 2 and the builds do nothing and
// the host partitions the batch again, packed.
template <bool FIRST>
__device__ __forceinline__ void region_scatter(View t, u32 shift, u32 bins, const K* keys, const V* values,
                                               const View::raw* words_in, u64 n, const u32* seg_off,
                                               const u32* seg_end, u32* cursor, const u32* limit,
                                               View::raw* words_out, View::raw* deferred, u32 combine,
                                               const u32* skewed, const unsigned char* heavy) {
    typedef View::raw raw;
    extern __shared__ __align__(16) unsigned char part_smem[];
    K* in_keys = (K*)part_smem;                                    // pass 1: PART_TILE keys,
    V* in_values = (V*)(part_smem + PART_TILE * sizeof(K));        //         then their values;
    raw* in_words = (raw*)part_smem;                               // pass 2: PART_TILE words
    raw* s_word = (raw*)(part_smem + PART_IN_BYTES);               // PART_TILE, grouped by bin
    u32* s_tile = (u32*)(s_word + PART_TILE);                      // bins: keys of a bin in the tile, then offsets
    u32* s_base = s_tile + bins;                                   // bins: where the tile's run of a bin goes
    unsigned short* s_bin = (unsigned short*)(s_base + bins);      // PART_TILE
    u32* tab = (u32*)s_word;                                       // pass 1, combining: COMBINE_SLOTS
    static_assert(COMBINE_SLOTS * 4 <= PART_TILE * sizeof(raw), "the combining table fits the grouped tile");
    const u32 lane = threadIdx.x & 31;
    const u32 NONE = 0xffffffffu;
    const bool combining = FIRST && combine != COMBINE_FREE && *skewed;

    // Open bins that must be packed: a sample said so (gh_region_scan), or
    // a bin overflowed, so that a pass-1 bin's words are not all there.
    // Blocks of pass 1 that start after an overflow skip their slices.
    if (limit && __syncthreads_or(t.meta->counters[1] != 0)) return;
    // This block's slice: the whole batch in pass 1, part of pass-1 bin
    // blockIdx.y in pass 2.
    u64 lo, hi;
    part_range(FIRST ? 0 : seg_off[blockIdx.y], FIRST ? n : seg_end[blockIdx.y], blockIdx.x, gridDim.x, &lo, &hi);
    auto fetch = [&](u64 tile) {  // the tile's input into shared memory, asynchronously
        const u32 len = (u32)min((u64)PART_TILE, hi - tile);
        for (u32 j = threadIdx.x; j < len; j += blockDim.x) {
            if (FIRST) {
                copy_async<sizeof(K)>(&in_keys[j], &keys[tile + j]);
                copy_async<sizeof(V)>(&in_values[j], &values[tile + j]);
            } else {
                copy_async<sizeof(raw)>(&in_words[j], &words_in[tile + j]);
            }
        }
    };
    if (lo < hi) fetch(lo);
    for (u64 tile = lo; tile < hi; tile += PART_TILE) {
        const u32 len = (u32)min((u64)PART_TILE, hi - tile);
        for (u32 b = threadIdx.x; b < bins; b += blockDim.x) s_tile[b] = 0;
        if (combining)
            for (u32 j = threadIdx.x; j < COMBINE_SLOTS; j += blockDim.x) tab[j] = COMBINE_FREE;
        copy_async_wait();
        __syncthreads();
        // Each thread's keys of the tile, with their bin and rank in the bin
        // packed as bin << 16 | rank (bins <= 4096, ranks < PART_TILE).
        u32 place[PART_ITEMS];
#pragma unroll
        for (u32 k = 0; k < PART_ITEMS; ++k) {
            const u32 j = k * blockDim.x + threadIdx.x;
            place[k] = NONE;
            u32 into = NONE;  // the first copy of the key in the tile, if this is a later one
            bool defer = false;
            if (j < len) {
                const u64 key = FIRST ? (u64)in_keys[j] : View::W::key(in_words[j]);
                defer = FIRST && View::special_index((K)key) >= 0;
                if (!defer) {
                    const u32 r = region_of(t, key);
                    if (combining && heavy[r]) {
                        const u32 first = combine_claim(tab, key, j, [&](u32 i) { return in_keys[i]; });
                        if (first != j) into = first;
                    }
                    const u32 b = FIRST ? r >> shift : r & ((1u << shift) - 1);
                    if (into == NONE) place[k] = b << 16 | atomicAdd(&s_tile[b], 1u);
                }
            }
            if (combining) {
                // A later copy: its value into the first copy's, which is
                // packed only after the __syncthreads below. The lanes with
                // one first copy reduce their values first, so one atomic
                // per warp reaches the shared word: a 64-bit one spins on a
                // compare-and-swap, and a hot key has hundreds of copies.
                const u32 merging = __ballot_sync(0xffffffffu, into != NONE);
                if (into != NONE) {
                    const u32 group = __match_any_sync(merging, into);
                    const V value = reduce_group(group, in_values[j], combine);
                    if (lane == (u32)__ffs(group) - 1) gh::atomic_reduce<V>(&in_values[into], combine, value);
                }
            }
            if (FIRST) {
                // Out-of-band keys: one global atomic per warp (all threads run every k).
                const u32 mask = __ballot_sync(0xffffffffu, defer);
                if (mask) {
                    const u32 leader = __ffs(mask) - 1;
                    u64 at = 0;
                    if (lane == leader) at = atomicAdd(&t.meta->counters[2], (u64)__popc(mask));
                    at = __shfl_sync(0xffffffffu, at, leader);
                    if (defer)
                        deferred[at + __popc(mask & ((1u << lane) - 1))] =
                            View::W::pack((u64)in_keys[j], gh::to_bits<V>(in_values[j]));
                }
            }
        }
        __syncthreads();
        // The tile's range of every bin: one global atomic per nonzero bin.
        // With a thread per bin, the atomic's result is stored only after
        // the scan and the grouping below, which run while it is in flight
        // (u64 inserts 0.7% faster on an H200).
        const bool one_each = bins <= blockDim.x;
        // A run past its open bin's end: NONE, not written (see above).
        auto fits = [&](u32 at, u32 c, u32 end) {
            if (at + c <= end) return at;
            atomicExch(&t.meta->counters[1], 1ull);
            return NONE;
        };
        u32 reserved = 0, mine = 0, end = NONE;
        if (one_each) {
            const u64 at = (u64)blockIdx.y * bins + threadIdx.x;
            mine = threadIdx.x < bins ? s_tile[threadIdx.x] : 0u;
            if (mine) reserved = atomicAdd(&cursor[at], mine);
            if (mine && limit) end = limit[at];
        } else {
            for (u32 b = threadIdx.x; b < bins; b += blockDim.x) {
                const u64 at = (u64)blockIdx.y * bins + b;
                const u32 c = s_tile[b];
                s_base[b] = c ? atomicAdd(&cursor[at], c) : 0;
                if (c && limit) s_base[b] = fits(s_base[b], c, limit[at]);
            }
        }
        const u32 binned = block_exclusive_scan(s_tile, bins);  // s_tile: offset of each bin in the tile
        // Group the tile by bin in shared memory ...
#pragma unroll
        for (u32 k = 0; k < PART_ITEMS; ++k) {
            if (place[k] == NONE) continue;
            const u32 i = k * blockDim.x + threadIdx.x;
            const u32 b = place[k] >> 16, j = s_tile[b] + (place[k] & 0xffffu);
            s_word[j] = FIRST ? View::W::pack((u64)in_keys[i], gh::to_bits<V>(in_values[i])) : in_words[i];
            s_bin[j] = (unsigned short)b;
        }
        if (one_each && threadIdx.x < bins) s_base[threadIdx.x] = mine && limit ? fits(reserved, mine, end) : reserved;
        __syncthreads();
        // ... fetch the next tile into the input area, now free, while this
        // one is written out: consecutive threads, consecutive addresses within a bin.
        if (tile + PART_TILE < hi) fetch(tile + PART_TILE);
        for (u32 j = threadIdx.x; j < binned; j += blockDim.x) {
            const u32 b = s_bin[j], base = s_base[b];
            if (base != NONE) words_out[base + (j - s_tile[b])] = s_word[j];
        }
        __syncthreads();
    }
}

// Pass 1: the batch into bins by `region >> shift` (by region when shift is
// 0); out-of-band keys go to the deferred list. `combine`: the reduction of
// an insert-or-apply, whose copies of a key in a tile become one pair if
// the scan found the batch *skewed and the key's region `heavy` (the
// histogram counted them so), or COMBINE_FREE.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS, 3)
    gh_region_scatter1(View t, const K* keys, const V* values, u64 n, u32 shift, u32 bins, u32* cursor,
                       const u32* limit, View::raw* words_out, View::raw* deferred, u32 combine, const u32* skewed,
                       const unsigned char* heavy) {
    region_scatter<true>(t, shift, bins, keys, values, nullptr, n, nullptr, nullptr, cursor, limit, words_out, deferred,
                         combine, skewed, heavy);
}

// Pass 2: each pass-1 segment into bins by `region & (2^shift - 1)`: the
// output is grouped by region.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS, 3)
    gh_region_scatter2(View t, const View::raw* words_in, u32 shift, const u32* seg_off, const u32* seg_end,
                       u32* cursor, const u32* limit, View::raw* words_out) {
    region_scatter<false>(t, shift, 1u << shift, nullptr, nullptr, words_in, 0, seg_off, seg_end, cursor, limit,
                          words_out, nullptr, COMBINE_FREE, nullptr, nullptr);
}

// The keys of a bucket in shared memory, read with 16-byte loads that other
// threads' CASes may land between (hence volatile).
__device__ __forceinline__ void shared_bucket_keys(const View::raw* bucket, u64 (&k)[View::SLOTS]) {
    const u32 at = (u32)__cvta_generic_to_shared(bucket);
#pragma unroll
    for (int i = 0; i < GH_BUCKET_BYTES / 16; ++i) {
        if constexpr (View::WORD_BYTES == 8) {
            u64 x, y;
            asm volatile("ld.volatile.shared.v2.u64 {%0, %1}, [%2];" : "=l"(x), "=l"(y) : "r"(at + 16 * i) : "memory");
            k[2 * i] = x & 0xffffffffull;
            k[2 * i + 1] = y & 0xffffffffull;
        } else {
            // The key word alone: a warp's loads of random buckets conflict
            // on fewer banks than whole slots would.
            u64 x;
            asm volatile("ld.volatile.shared.u64 %0, [%1];" : "=l"(x) : "r"(at + 16 * i) : "memory");
            k[i] = x;
        }
    }
}

// Shared memory of the build: the region, then one counter per bucket
// (72 KiB: three blocks an SM).
// Keys of an empty-region build that may run past the region's end (each
// region's list is BUILD_SPILL words of scratch, SPILL_BYTES in region.rs).
constexpr u32 BUILD_SPILL = 2048 / View::WORD_BYTES;
// Keys of one bucket above which the placement below is not tried (its
// duplicate check compares the bucket's keys pairwise).
constexpr u32 BUILD_RUN = 64;
// Below every term of the run-start maximum (those are above -2^17).
constexpr int NO_RUN = -(1 << 30);

// Placement of a bin into an EMPTY region without atomics on slots. In a
// region with no key yet, linear probing's first-EMPTY rule puts a bin's keys,
// taken in order of home bucket, in runs: a key goes to slot
// max(home * SLOTS, previous key's slot + 1). Counting the keys per bucket,
// a scan then gives each bucket the first slot of its keys, and every key
// takes its bucket's next slot: no probe walks a cluster, however full the
// region ends. The layout is one the plain kernel could have built (any
// order of a bucket's keys is), so lookups, erases and later inserts find it
// as usual. It is not taken where the plain rules must decide: a key
// repeated in the bin, a bucket of more than BUILD_RUN keys, a key past the
// probe limit, or more keys running past the region's end than the spill
// list holds. Positions past the region's end are one run (runs only grow
// toward the end), so a key placed at slots + o is spill entry o, in run
// order, for gh_region_spill, which continues that run in the next region.

// Words of the bin a thread loads before it works on them: a loop that
// loaded one per step would wait a full memory latency each time (fewer
// 16-byte words, or the build's registers spill).
constexpr u32 BUILD_BATCH = View::WORD_BYTES == 8 ? 4 : 2;

// Calls f(word) for every word of words[begin, end) this thread takes, the
// loads of each batch issued together. IN_STEP: the lanes of a warp start
// each word together, for an f whose lanes part ways (CAS retries, early
// exits): left alone, lanes that finish a word early run ahead into the
// next and the warp runs each word's code several times, a few lanes each
// (the two-level build ran its step 1 at 8.6 active lanes of 32 and
// inserted 1.5x slower, NVIDIA H200; the linear build, whose lanes part
// little, measured the same either way). Each __syncwarp names the lanes
// of the warp still in the loop (a uniform trip count instead made the
// build spill registers with f64 values).
template <bool IN_STEP = false, typename F>
__device__ __forceinline__ void for_bin(const View::raw* words, u32 begin, u32 end, F f) {
    for (u32 j0 = begin + threadIdx.x; j0 < end; j0 += BUILD_BATCH * blockDim.x) {
        View::raw w[BUILD_BATCH];
#pragma unroll
        for (u32 u = 0; u < BUILD_BATCH; ++u)
            if (j0 + u * blockDim.x < end) w[u] = words[j0 + u * blockDim.x];
        // The next round's words into L2 while this round's are worked on
        // (a prefetch takes no register; loading them into registers made the
        // two-level build spill at its 40-register bound).
#pragma unroll
        for (u32 u = 0; u < BUILD_BATCH; ++u) {
            const u32 j1 = j0 + (BUILD_BATCH + u) * blockDim.x;
            if (j1 < end) asm volatile("prefetch.global.L2 [%0];" ::"l"(words + j1));
        }
        // The lanes of this warp in this round: a prefix of it.
        const u32 left = end - (j0 - (threadIdx.x & 31));
        const u32 lanes = left >= 32 ? ~0u : (1u << left) - 1;
#pragma unroll
        for (u32 u = 0; u < BUILD_BATCH; ++u) {
            // The lanes that call f for this u (a prefix of `lanes`).
            const u32 at = j0 - (threadIdx.x & 31) + u * blockDim.x;
            const u32 calls = end - at >= 32 ? ~0u : (1u << (end - at)) - 1;
            if (j0 + u * blockDim.x < end) f(w[u], calls);
            if (IN_STEP) __syncwarp(lanes);
        }
    }
}

#if GH_SCHEME == GH_SCHEME_LINEAR
// Step 1: the keys of the bin per home bucket, in cnt (zeroed by the
// caller); false if a bucket has too many.
__device__ __forceinline__ bool count_bin(const View& t, u32* cnt, u64 first, const View::raw* words, u32 begin,
                                          u32 end) {
    bool bad = false;
    for_bin(words, begin, end, [&](const View::raw& w, u32) {
        const u32 h = (u32)(t.home(View::W::key(w)) - first);
        bad |= atomicAdd(&cnt[h], 1u) >= BUILD_RUN;
    });
    return !bad;
}

// Whether two keys of a bucket's run [start, start + c) are equal; the run
// lies in the shared `region` below `slots`, then in the spill list. Runs of
// up to 8 keys (nearly all) are compared in registers, all loads at once.
__device__ __forceinline__ bool repeated_in_run(const View::raw* region, const View::raw* spill, u32 slots, u32 start,
                                                u32 c) {
    auto key_at = [&](u32 p) { return View::W::key(p < slots ? region[p] : spill[p - slots]); };
    if (c < 2) return false;
    bool bad = false;
    if (c <= 8) {
        u64 k[8];
#pragma unroll
        for (u32 a = 0; a < 8; ++a) k[a] = a < c ? key_at(start + a) : 0;
#pragma unroll
        for (u32 a = 0; a < 8; ++a)
#pragma unroll
            for (u32 b = a + 1; b < 8; ++b) bad |= b < c && k[a] == k[b];
        return bad;
    }
    for (u32 a = start; a + 1 < start + c && !bad; ++a) {
        const u64 k = key_at(a);
        for (u32 b = a + 1; b < start + c && !bad; ++b) bad = k == key_at(b);
    }
    return bad;
}

// Steps 2-4 into the EMPTY shared `region`, after count_bin; false (with
// the region EMPTY again) where the plain rules must decide. Spilled keys
// go to `spill`, their count to *spilled_out; *placed is the keys placed
// (summed over the block's threads).
__device__ bool place_counted(const View& t, View::raw* region, u32* cnt, View::raw* spill, u64 first, u32 nb,
                              const View::raw* words, u32 begin, u32 end, u32* spilled_out, u64* placed) {
    typedef View::raw raw;
    typedef View::W W;
    constexpr u32 S = View::SLOTS;
    __shared__ u32 s_spilled;
    __shared__ u32 warp_sums[32];
    const u32 slots = nb * S;
    // 2. First slot of each bucket's keys: with c_h keys in bucket h and s_h
    //    keys in the buckets before it, run starts obey
    //    start_h = s_h + max over nonempty h' <= h of (h' * S - s_h').
    //    cnt[h] becomes start_h << 16, the low half counting the keys placed.
    //    (Both fit: start_h < slots + keys <= 2 * slots + BUILD_SPILL.)
    const u32 per = (nb + blockDim.x - 1) / blockDim.x;  // consecutive buckets per thread
    const u32 lo = min(nb, threadIdx.x * per), hi = min(nb, lo + per);
    u32 own = 0;
    for (u32 h = lo; h < hi; ++h) own += cnt[h];
    if (threadIdx.x == 0) s_spilled = 0;
    u32 total;
    const u32 s = block_scan(own, warp_sums, &total);  // keys in the buckets before this thread's
    int best = NO_RUN;                                 // the max term over this thread's buckets
    for (u32 h = lo, run = s; h < hi; ++h) {
        if (cnt[h]) best = max(best, (int)(h * S) - (int)run);
        run += cnt[h];
    }
    int before = block_max_exclusive(best, (int*)warp_sums, NO_RUN);  // over the threads before
    for (u32 h = lo, run = s; h < hi; ++h) {
        const u32 c = cnt[h];
        if (c) before = max(before, (int)(h * S) - (int)run);
        cnt[h] = c ? (u32)((int)run + before) << 16 : 0;
        run += c;
    }
    __syncthreads();
    // 3. Every key takes its bucket's next slot, within its probe limit;
    //    past the region's end, the spill entry at the same offset.
    bool bad = false;
    for_bin(words, begin, end, [&](const raw& w, u32) {
        const u32 h = (u32)(t.home(W::key(w)) - first);
        const u32 v = atomicAdd(&cnt[h], 1u);
        const u32 at = (v >> 16) + (v & 0xffffu);
        if (at < slots) {
            region[at] = w;
            bad |= at / S - h >= t.limit;
        } else if (at - slots < BUILD_SPILL) {
            spill[at - slots] = w;
            atomicMax(&s_spilled, at - slots + 1);
        } else {
            bad = true;
        }
    });
    // 4. No key twice: copies of a key share a home bucket, so each thread
    //    compares the keys of its buckets' runs pairwise (cnt[h] now holds
    //    start_h << 16 | c_h).
    bad = __syncthreads_or(bad);
    for (u32 h = lo; h < hi && !bad; ++h) bad = repeated_in_run(region, spill, slots, cnt[h] >> 16, cnt[h] & 0xffffu);
    if (__syncthreads_or(bad)) {
        const raw e = W::empty();
        for (u32 x = threadIdx.x; x < slots; x += blockDim.x) region[x] = e;
        __syncthreads();
        return false;
    }
    const u32 spilled = s_spilled;
    if (threadIdx.x == 0) *spilled_out = spilled;
    *placed = threadIdx.x == 0 ? end - begin - spilled : 0;
    return true;
}

// One block per region: region r's pairs are words[offsets[r] .. ends[r])
// (ends = offsets + 1 where the partition packed the bins; nothing is built
// where an open bin overflowed, see region_scatter).
// Keys of an empty region's runs that pass its end go to spills[r *
// BUILD_SPILL ..], their count to spill_count[r]; keys the plain rules
// settle nowhere in the region go to `deferred`. `try_count` is 0 where the
// host knows few regions are EMPTY: counting would be wasted. `fresh` is 1
// where the host knows every slot is EMPTY: the table is not read.
__device__ __forceinline__ void region_build(View t, const u32* offsets, const u32* ends, const View::raw* words,
                                             View::raw* spills, u32* spill_count, View::raw* deferred, u32 mode, u32 op,
                                             u32 try_count, u32 fresh) {
    if (t.meta->counters[1]) return;  // an open bin overflowed: the host partitions again
    typedef View::raw raw;
    typedef View::W W;
    extern __shared__ __align__(16) unsigned char smem[];
    raw* region = (raw*)smem;
    u32* cnt = (u32*)(region + BUILD_BUCKETS * View::SLOTS);
    const u64 r = blockIdx.x, first = r * BUILD_BUCKETS;
    const u32 nb = (u32)min((u64)BUILD_BUCKETS, t.buckets - first);
    ulonglong2* global16 = (ulonglong2*)(t.slots + first * View::SLOTS);
    ulonglong2* shared16 = (ulonglong2*)region;
    const u32 words16 = nb * (GH_BUCKET_BYTES / 16);
    const ulonglong2 all_ones = make_ulonglong2(~0ull, ~0ull);  // EMPTY slots
    for (u32 j = threadIdx.x; j < words16; j += blockDim.x) {
        if (fresh) shared16[j] = all_ones;
        else copy_async<16>(shared16 + j, global16 + j);
    }
    const u32 begin = offsets[r], end = ends[r];
    // Count the bin by bucket while the region arrives (wasted if it is not EMPTY).
    const bool fits = try_count && end - begin <= nb * View::SLOTS + BUILD_SPILL;
    for (u32 b = threadIdx.x; b < nb; b += blockDim.x) cnt[b] = 0;
    __syncthreads();
    const bool counted = fits && count_bin(t, cnt, first, words, begin, end);
    copy_async_wait();
    bool used = false;  // a slot of the region is not EMPTY (EMPTY is all ones)
    for (u32 j = threadIdx.x; j < words16; j += blockDim.x) {
        const ulonglong2 v = shared16[j];  // copied by this thread
        used |= (v.x & v.y) != ~0ull;
    }
    const bool empty = !__syncthreads_or(used);
    const bool placeable = __syncthreads_and(counted) && fits && empty;

    u64 ins = 0;
    if (!(placeable &&
          place_counted(t, region, cnt, spills + r * BUILD_SPILL, first, nb, words, begin, end, &spill_count[r],
                        &ins))) {
        // The plain rules with shared-memory atomics.
        if (threadIdx.x == 0) spill_count[r] = 0;
        // One bucket per step, each lane on its own key: a lane whose key
        // settles takes its next word at the next step, so a warp does not
        // wait on its lanes with the longest sequences (a loop per key ran
        // each warp's steps as often as its slowest key needed). The lane's
        // next Q words are loaded while it places the current one: with one
        // word ahead, insert-or-apply batches waited on most loads.
        constexpr u32 Q = View::WORD_BYTES == 8 ? 4 : 2;
        u32 j = begin + threadIdx.x;  // the word in q[0]
        raw q[Q];
#pragma unroll
        for (u32 u = 0; u < Q; ++u) q[u] = j + u * blockDim.x < end ? words[j + u * blockDim.x] : W::empty();
        raw desired = W::empty();
        u32 b = 0, step = 0;   // the bucket in the region, and buckets passed
        bool placing = false;  // this lane holds a key not yet settled
        while (true) {
            if (!placing) {
                if (j >= end) break;
                desired = q[0];
#pragma unroll
                for (u32 u = 0; u + 1 < Q; ++u) q[u] = q[u + 1];
                const u32 far = j + Q * blockDim.x;
                if (far < end) q[Q - 1] = words[far];
                j += blockDim.x;
                b = (u32)(t.home(W::key(desired)) - first);
                step = 0;
                placing = true;
            }
            if (step >= t.limit || b >= nb) {
                // Not settled inside the region: the plain kernel continues the sequence.
                deferred[atomicAdd(&t.meta->counters[2], 1ull)] = desired;
                placing = false;
                continue;
            }
            // The whole bucket at once: a copy of the key in it, else its
            // first EMPTY slot (keys are never past an EMPTY slot of their
            // sequence, and no slot becomes EMPTY during a build).
            raw* bucket = region + b * View::SLOTS;
            const u64 k = W::key(desired);
            u64 kk[View::SLOTS];
            shared_bucket_keys(bucket, kk);
            int hit = -1, open = -1;
#pragma unroll
            for (int s = View::SLOTS - 1; s >= 0; --s) {
                if (kk[s] == k) hit = s;
                if (kk[s] == W::EMPTY_KEY) open = s;
            }
            if (hit >= 0) {
                t.update_value(&bucket[hit], gh::from_bits<V>(W::value(desired)), mode, op);
                placing = false;
            } else if (open < 0) {
                ++b;  // full: the next bucket
                ++step;
            } else if (W::eq(W::cas(&bucket[open], W::empty(), desired), W::empty())) {
                ++ins;
                placing = false;
            }
            // Else another thread took the slot (perhaps with this key): read the bucket again.
        }
    }
    __syncthreads();
    for (u32 j = threadIdx.x; j < words16; j += blockDim.x) __stcg(global16 + j, shared16[j]);
    block_add(&t.meta->counters[0], ins);
}

// Three blocks of 512 threads an SM.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS, 3)
    gh_region_build(View t, const u32* offsets, const u32* ends, const View::raw* words, View::raw* spills,
                    u32* spill_count, View::raw* deferred, u32 mode, u32 op, u32 try_count, u32 fresh, const u32*) {
    region_build(t, offsets, ends, words, spills, spill_count, deferred, mode, op, try_count, fresh);
}

// The same build in two blocks of 768 threads an SM, for builds of few
// regions with many keys each (the host chooses: region.rs wide_build):
// as many threads an SM, and the last wave of blocks less empty.
extern "C" __global__ void __launch_bounds__(GH_BUILD_WIDE_THREADS, 2)
    gh_region_build_wide(View t, const u32* offsets, const u32* ends, const View::raw* words, View::raw* spills,
                         u32* spill_count, View::raw* deferred, u32 mode, u32 op, u32 try_count, u32 fresh,
                         const u32*) {
    region_build(t, offsets, ends, words, spills, spill_count, deferred, mode, op, try_count, fresh);
}
// The spilled keys of region p = r - 1 (cyclically) take the EMPTY slots of
// region r in slot order, the j-th key the j-th EMPTY slot: the slot a
// linear probe from its home claims when these keys come after the built
// regions, since its run fills region p from its home to the end. One block
// per region r. A key whose slot lies past its probe limit, the keys after
// it, and keys for which region r has no EMPTY slot left go to the plain
// kernel (`deferred`): it fails the first kind and carries the others on.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS)
    gh_region_spill(View t, u64 regions, const u32* spill_count, const View::raw* spills,
                    View::raw* deferred) {
    typedef View::raw raw;
    typedef View::W W;
    if (t.meta->counters[1]) return;  // nothing was built (gh_region_build)
    const u64 r = blockIdx.x, p = (r == 0 ? regions : r) - 1;
    const u32 m = spill_count[p];
    if (m == 0) return;  // the whole block
    const raw* in = spills + p * BUILD_SPILL;
    const u64 first = r * BUILD_BUCKETS, slots = min((u64)BUILD_BUCKETS, t.buckets - first) * View::SLOTS;
    raw* base = t.slots + first * View::SLOTS;
    __shared__ u32 warp_sums[32];
    __shared__ u32 s_stop;
    if (threadIdx.x == 0) s_stop = m;
    u32 taken = 0, stop = m;  // EMPTY slots passed; the first key not to place
    u64 ins = 0;
    for (u64 chunk = 0; chunk < slots && taken < stop; chunk += blockDim.x) {
        const u64 x = chunk + threadIdx.x;
        const bool empty = x < slots && W::key(base[x]) == W::EMPTY_KEY;
        u32 total;
        const u32 j = taken + block_scan(empty ? 1u : 0u, warp_sums, &total);
        if (empty && j < stop) {
            const u64 b = first + x / View::SLOTS, h = t.home(W::key(in[j]));
            if ((b >= h ? b - h : b + t.buckets - h) >= t.limit) atomicMin(&s_stop, j);
        }
        __syncthreads();
        stop = s_stop;
        if (empty && j < stop) {
            base[x] = in[j];
            ++ins;
        }
        taken += total;
    }
    const u32 placed = min(taken, stop);
    if (placed < m) {
        __shared__ u64 s_at;
        if (threadIdx.x == 0) s_at = atomicAdd(&t.meta->counters[2], (u64)(m - placed));
        __syncthreads();
        for (u32 o = threadIdx.x; placed + o < m; o += blockDim.x) deferred[s_at + o] = in[placed + o];
    }
    block_add(&t.meta->counters[0], ins);
}

// One key's insert by a whole warp, each lane reading one bucket of the
// key's sequence per round trip: the outcome of gh::linear::insert (the
// first bucket holding the key or an EMPTY slot decides), at a 32nd of the
// round trips on long sequences.
__device__ int insert_by_warp(const View& t, u64 k, V value, u32 mode, u32 op, u32 lane) {
    typedef View::W W;
    typedef View::raw raw;
    const raw desired = W::pack(k, gh::to_bits<V>(value));
    const u64 home = t.home(k);
    for (u64 step = 0; step < t.limit;) {
        const u64 mine = step + lane;  // this lane's bucket, counted along the sequence
        raw* bucket = t.slots + ((home + mine) % t.buckets) * View::SLOTS;
        int hit = -1, open = -1;
        if (mine < t.limit)
            t.scan_bucket(bucket, [&](int s, u64 kk, u64) {
                if (kk == k) hit = s;
                else if (kk == W::EMPTY_KEY) open = s;
                return hit >= 0 || open >= 0;
            });
        const u32 deciding = __ballot_sync(0xffffffffu, hit >= 0 || open >= 0);
        if (!deciding) {
            step += 32;
            continue;
        }
        const int first = __ffs(deciding) - 1;
        int r = -1;  // -1: another key took the EMPTY slot first
        if ((int)lane == first) {
            if (hit < 0) {
                const raw prev = W::cas(&bucket[open], W::empty(), desired);
                if (W::eq(prev, W::empty())) r = gh::INSERTED;
                else if (W::key(prev) == k) hit = open;
            }
            if (hit >= 0) {
                t.update_value(&bucket[hit], value, mode, op);
                r = gh::EXISTING;
            }
        }
        r = __shfl_sync(0xffffffffu, r, first);
        if (r >= 0) return r;
        step += first;  // read that bucket again: it only gained keys
    }
    return gh::FAILED;
}

#else  // GH_SCHEME == GH_SCHEME_TWO_LEVEL
// ---- two-level region build ---------------------------------------------------
// A build block holds Tl<RB>::SUBS consecutive two-level regions of RB
// buckets (64 KiB: one large region, or four of a smaller table; a key's
// candidates all lie in its own region, gh::two_level), so the partition
// above serves unchanged with region_of = the key's region / SUBS. The
// block loads its regions, places its bin with shared-memory atomics and
// writes the regions back coalesced; no lock and no random access to device
// memory. Placement is the plain scheme's: any slot of a key's candidates
// under its region's current seed, so lookups, erases and later inserts find
// the keys as usual.
//   1. Every thread takes keys of the bin: a key already among its
//      candidates is updated; else it claims the first EMPTY slot, in
//      candidate order, with a CAS. Slots only fill in this step, so copies
//      of a key meet in one slot (a copy that finds the slot taken reads the
//      bucket again), and a key whose candidates are all full has all its
//      copies here too: those wait in a per-region list.
//   2. Every thread takes a waiting key (the first copy of each; later
//      copies wait) on a random walk of exchanges in its candidates (below,
//      tl_walk); then the later copies update the slot their key reached.
//      In a fresh table (all this batch's keys) a walk that gives up
//      defers the pair left in its hand (insert-or-apply batches: the
//      region's warp below goes on from the walks' state). In a table that
//      held keys, step 1's regions are first written to the table, so a
//      region where a walk gives up restarts from there (a walk must not
//      leave a key stored before this call in hand): one warp places its
//      list one key at a time, a copy placed meanwhile being updated, else
//      by a breadth-first search over eviction paths (every lane checks
//      one path of the current length, up to TL_LEVELS moves) that moves
//      the residents of the shortest path, last move first, and stores the
//      key where the first was.
// Those deferred pairs, keys without a path, lists longer than shared
// memory holds and the keys of regions with keys in the overflow go to the
// plain kernel, run with a probe limit of 0: under its region's lock a key
// takes a free candidate slot, else the overflow, and walks further only
// when the overflow has no room; it refuses exactly what it cannot place.
constexpr int TL_D = gh::cuckoo::Choices<K, V>::D;
constexpr int TL_S = View::SLOTS;
// Waiting pairs a build block holds in shared memory (8 KiB).
constexpr u32 TL_WAITING = 8192 / View::WORD_BYTES;
// The shape of a build block of two-level regions of RB buckets.
template <u32 RB> struct Tl {
    static constexpr u32 SUBS = BUILD_BUCKETS / RB;  // regions of the block
    static_assert(SUBS * RB <= BUILD_BUCKETS && (SUBS + 1) * RB > BUILD_BUCKETS, "a build region holds SUBS regions");
    // Waiting keys per region held in shared memory.
    static constexpr u32 PEND = TL_WAITING / SUBS;
    static_assert(SUBS * PEND == TL_WAITING, "the regions share the block's list");
    // 16-byte words of one region (its share of the block's copy).
    static constexpr u32 WORDS16 = RB * GH_BUCKET_BYTES / 16;
};
// Bits of the filter that spots keys that may wait more than once (below,
// tl_build, where later copies are marked).
constexpr u32 TL_FILTER_LOG2 = 12;
constexpr u32 TL_FILTER_BITS = 1u << TL_FILTER_LOG2;
// The filter's bit of a key (Fibonacci hashing of its low and high halves).
__device__ __forceinline__ u32 tl_filter_bit(u64 k) {
    return ((u32)k ^ (u32)(k >> 32)) * 0x9e3779b9u >> (32 - TL_FILTER_LOG2);
}
// Moves of the longest eviction path searched, and paths per length: the
// first move picks one of the key's D * S residents and one of its D - 1
// other candidates, each later one a resident (S) and a candidate (D - 1).
// The search is breadth-first, so only keys of crowded regions go deep. For
// 8-byte slots six moves (8192 paths) keep nearly every key of a region
// below the plain kernel's rebuild limit (31/32 full) in the block, where a
// rebuild by one thread costs milliseconds (measured on an H100, 2^27 slots
// at load 0.9: 4.9 against 2.7 G/s with four moves). For 16-byte slots
// (1024-slot regions, more of them overfull) six moves measured slower than
// four (1.8 against 3.0 G/s): the deep searches mostly fail. (Measured
// before random walks; the search now runs only where a walk gave up.)
constexpr u32 TL_LEVELS = View::WORD_BYTES == 8 ? 6 : 4;
constexpr u32 TL_FIRST = TL_D * TL_S * (TL_D - 1);
constexpr u32 TL_NEXT = TL_S * (TL_D - 1);

// Candidate j of k in region `sub` of the block (bucket in shared memory):
// RegionSpace::cand of the region's current seed.
template <u32 RB> __device__ __forceinline__ u32 tl_cand(u64 k, u64 seed, u32 sub, int j) {
    return sub * RB + gh::cuckoo::region_cand(gh::mix64(k, seed), j, RB);
}

// The key of a shared-memory slot, read past any value a CAS of another
// thread may be writing (volatile: slots change under the reader).
__device__ __forceinline__ u64 tl_key(const View::raw* slot) {
    const u64 w = *(const volatile u64*)slot;  // a whole 8-byte slot, or a Pair16's key word
    return View::WORD_BYTES == 8 ? w & 0xffffffffull : w;
}

// Eviction path number `node` of `moves` moves for the key with candidates
// xc: whether it is valid (distinct buckets, each resident moving to one of
// its own other candidates, an EMPTY slot at its end); with `word`, applies
// it and stores the pair. Only the calling warp touches the region.
template <u32 RB>
__device__ bool tl_path(View::raw* region, const u32* xc, u64 seed, u32 sub, u32 node, u32 moves,
                        const View::raw* word) {
    typedef View::W W;
    u32 bucket[TL_LEVELS + 1];
    unsigned char slot[TL_LEVELS];
    u32 d = node % TL_FIRST;
    node /= TL_FIRST;
    u32 b = xc[d / TL_NEXT];
    d %= TL_NEXT;
    for (u32 l = 0; l < moves; ++l) {
        if (l > 0) {
            d = node % TL_NEXT;
            node /= TL_NEXT;
        }
        const u32 s = d / (TL_D - 1), a = d % (TL_D - 1);
        const u64 z = tl_key(region + b * TL_S + s);
        if (z == W::EMPTY_KEY) return false;
        // The a-th candidate of z other than b.
        u32 next = ~0u, seen = 0;
        for (int j = 0; j < TL_D; ++j) {
            const u32 c = tl_cand<RB>(z, seed, sub, j);
            if (c != b && seen++ == a) { next = c; break; }
        }
        if (next == ~0u) return false;
        for (u32 i = 0; i < l; ++i)
            if (bucket[i] == next) return false;  // a path visits a bucket once
        bucket[l] = b;
        slot[l] = (unsigned char)s;
        b = next;
    }
    int empty = -1;
    for (int s = TL_S - 1; s >= 0; --s)
        if (tl_key(region + b * TL_S + s) == W::EMPTY_KEY) empty = s;
    if (empty < 0) return false;
    if (word) {
        u32 dst = b * TL_S + (u32)empty;
        for (int l = (int)moves - 1; l >= 0; --l) {
            const u32 src = bucket[l] * TL_S + slot[l];
            region[dst] = region[src];
            dst = src;
        }
        region[dst] = *word;
    }
    return true;
}

// Exchanges one random walk makes before it gives its region up. At a
// region load of 0.9 (2-choice, 4-slot buckets) walks take a few steps;
// one that runs this long is in a region past what cuckoo placement holds.
constexpr u32 TL_WALK_STEPS = 512;
// In a table that was empty a walk that gives up hands its pair to the
// overflow, so it gives up sooner: measured on an H200 (2^27 slots, load
// 0.95) u32 inserts ran at 10.1, 11.0, 11.6 and 11.3 G/s with 512, 256,
// 128 and 64 steps, u64 at 6.1, 6.9, 8.0 and 8.4.
constexpr u32 TL_FRESH_WALK_STEPS = View::WORD_BYTES == 8 ? 128 : 64;

// Puts w into *slot and returns what was there (one atomic: 8-byte slots
// exchange, 16-byte slots swap by CAS, as nothing else but walks write).
// (A template, so that only the branch of the slot's width is compiled.)
template <typename R> __device__ __forceinline__ R tl_exchange(R* slot, const R& w) {
    if constexpr (sizeof(R) == 8) {
        return atomicExch((unsigned long long*)slot, (unsigned long long)w);
    } else {
        const volatile u64* half = (const volatile u64*)slot;  // a torn read only fails the first CAS
        R cur = View::W::pack(half[0], half[1]);
        while (true) {
            const R seen = View::W::cas(slot, cur, w);
            if (View::W::eq(seen, cur)) return cur;
            cur = seen;
        }
    }
}

// Step 2 for one waiting pair by one thread: w goes into an EMPTY slot of
// the bucket in hand if it has one, else takes a random slot's place and
// the resident it displaced goes on to another of its own candidates, and
// so on (true once a pair lands in a free slot). Every pair is in a slot
// or in one thread's hand throughout, so walks of one region run at once
// without locks. False: the walk gave up, or *stop was set by another walk
// of the region, with a pair still in hand, left in w.
template <u32 RB>
__device__ bool tl_walk(View::raw* region, View::raw& w, u64 seed, u32 sub, u32 steps, const volatile u32* stop) {
    typedef View::W W;
    u64 k = W::key(w);
    u32 rnd = (u32)gh::mix64(k, seed ^ GH_CUCKOO_WALK_SALT) | 1u;
    u32 b = tl_cand<RB>(k, seed, sub, (int)(rnd % TL_D));
    for (u32 step = 0; step < steps; ++step) {
        View::raw* bucket = region + b * TL_S;
        u64 kk[TL_S];
        shared_bucket_keys(bucket, kk);
#pragma unroll
        for (int s = 0; s < TL_S; ++s)
            if (kk[s] == W::EMPTY_KEY && W::eq(W::cas(&bucket[s], W::empty(), w), W::empty())) return true;
        rnd ^= rnd << 13;  // xorshift32
        rnd ^= rnd >> 17;
        rnd ^= rnd << 5;
        const View::raw out = tl_exchange(&bucket[rnd % TL_S], w);
        if (!gh::cuckoo::full<W>(out)) return true;
        w = out;
        k = W::key(w);
        // One of the displaced key's other candidates, from a random start.
        const u32 j0 = (rnd >> 16) % TL_D;
#pragma unroll
        for (int u = 0; u < TL_D; ++u) {
            const u32 c = tl_cand<RB>(k, seed, sub, (int)((j0 + u) % TL_D));
            if (c != b) { b = c; break; }
        }
        if ((step & 15) == 15 && *stop) return false;
    }
    return false;
}

// Step 2 for one waiting pair, by the whole warp: EXISTING (a copy was
// placed meanwhile: updated), INSERTED, or FAILED (no path within TL_LEVELS).
template <u32 RB>
__device__ int tl_place_by_warp(const View& t, View::raw* region, const View::raw& w, u32 sub, u64 seed, u32 lane,
                                u32 mode, u32 op) {
    typedef View::W W;
    const u64 k = W::key(w);
    u32 xc[TL_D];
#pragma unroll
    for (int j = 0; j < TL_D; ++j) xc[j] = tl_cand<RB>(k, seed, sub, j);
    u32 at = 0;
    bool mine = false;
    if (lane < (u32)(TL_D * TL_S)) {
        at = xc[lane / TL_S] * TL_S + lane % TL_S;
        mine = tl_key(region + at) == k;
    }
    const u32 hit = __ballot_sync(0xffffffffu, mine);
    if (hit) {
        if (lane == (u32)__ffs(hit) - 1) t.update_value(&region[at], gh::from_bits<V>(W::value(w)), mode, op);
        __syncwarp();
        return gh::EXISTING;
    }
    u32 paths = TL_FIRST;
    for (u32 moves = 1; moves <= TL_LEVELS; ++moves, paths *= TL_NEXT) {
        for (u32 base = 0; base < paths; base += 32) {
            const bool ok = base + lane < paths && tl_path<RB>(region, xc, seed, sub, base + lane, moves, nullptr);
            const u32 found = __ballot_sync(0xffffffffu, ok);
            if (found) {
                if (lane == (u32)__ffs(found) - 1) tl_path<RB>(region, xc, seed, sub, base + lane, moves, &w);
                __syncwarp();
                return gh::INSERTED;
            }
        }
    }
    return gh::FAILED;
}

// The region and place in its list of waiting entry i of a build block
// whose regions' lists hold npend[s] entries each (PEND at most).
template <u32 PEND> __device__ __forceinline__ void tl_position(const u32* npend, u32 i, u32* sub, u32* at) {
    u32 s = 0;
    while (i >= min(npend[s], PEND)) i -= min(npend[s++], PEND);
    *sub = s;
    *at = i;
}

// Marks in `later` the waiting entries of a build block (`total` of them)
// that are later copies of a key that waits more than once. A key's copies
// all wait in its region's list; its first copy is the one that found its
// filter bit clear (`again` marks those that found it set), else (the bit
// was another key's) the earliest in the list. Only entries that found
// their bit set (a few percent at load 0.9) are checked, each by a whole
// warp reading the list together: one thread reading it alone ran at 2
// active lanes and took half the build's instructions at load 0.9 (NVIDIA
// H200). key_of(q): the key of list entry q.
template <u32 PEND, typename KeyOf>
__device__ __forceinline__ void tl_mark_later(const u32* npend, u32 total, const u32* again, u32* later,
                                              KeyOf key_of) {
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    auto found_set = [&](u32 p) { return (again[p / 32] >> (p % 32)) & 1u; };
    for (u32 base = warp * 32; base < total; base += blockDim.x) {
        u32 sub = 0, at = 0;
        if (base + lane < total) tl_position<PEND>(npend, base + lane, &sub, &at);
        const u32 p = sub * PEND + at;
        for (u32 todo = __ballot_sync(~0u, base + lane < total && found_set(p)); todo; todo &= todo - 1) {
            const u32 src = __ffs(todo) - 1;
            const u32 s = __shfl_sync(~0u, sub, src), a = __shfl_sync(~0u, at, src);
            const u64 k = key_of(s * PEND + a);
            const u32 m = min(npend[s], PEND);
            bool copy = false;
            for (u32 j = lane; j < m; j += 32) {
                const u32 q = s * PEND + j;
                copy |= j != a && key_of(q) == k && (j < a || !found_set(q));
            }
            if (__any_sync(~0u, copy) && lane == src) atomicOr(&later[p / 32], 1u << (p % 32));
        }
    }
}

// Build region r (two-level regions r * SUBS ..) of RB-bucket regions, by
// one block: gh_region_build below.
template <u32 RB>
__device__ __forceinline__ void tl_build(const View& t, const gh::two_level::Regions<K, V>& g, const u32* offsets,
                                         const u32* ends, const View::raw* words, View::raw* deferred, u32 mode, u32 op, u32 fresh,
                                         bool group) {
    typedef View::raw raw;
    typedef View::W W;
    constexpr u32 TL_SUBS = Tl<RB>::SUBS, TL_PEND = Tl<RB>::PEND, TL_WORDS16 = Tl<RB>::WORDS16;
    extern __shared__ __align__(16) unsigned char smem[];
    raw* region = (raw*)smem;
    raw* pend = region + BUILD_BUCKETS * TL_S;
    __shared__ u32 npend[TL_SUBS];
    __shared__ u64 seeds[TL_SUBS];
    __shared__ u32 spilled[TL_SUBS];  // the region has keys in the overflow
    __shared__ u32 gave_up[TL_SUBS];  // a walk of the region gave up
    __shared__ u32 walked[TL_SUBS];   // walks that placed their pair
    __shared__ u32 filter[TL_FILTER_BITS / 32];  // bits of the keys that wait
    __shared__ u32 again[TL_WAITING / 32];       // waiting pairs whose bit was set before
    __shared__ u32 later[TL_WAITING / 32];       // waiting pairs that are later copies of a key
    __shared__ u32 next_walk;                    // the next waiting pair to take
    const u64 r = blockIdx.x, sub0 = r * TL_SUBS;
    const u32 subs = (u32)min((u64)TL_SUBS, g.count - sub0);
    const u64 first = sub0 * RB;
    const u32 nb = subs * RB;
    ulonglong2* global16 = (ulonglong2*)(t.slots + first * TL_S);
    ulonglong2* shared16 = (ulonglong2*)region;
    const u32 words16 = nb * (GH_BUCKET_BYTES / 16);
    const ulonglong2 all_ones = make_ulonglong2(~0ull, ~0ull);  // EMPTY slots
    const u32 begin = offsets[r], end = ends[r];
    // 16-byte words: the bin's first round of words is on its way to L2
    // while the region is set up (u64 inserts 1-2% faster on an H200; u32
    // pairs, whose round is half the bytes, ran 1% slower).
    if constexpr (View::WORD_BYTES == 16) {
#pragma unroll
        for (u32 u = 0; u < BUILD_BATCH; ++u) {
            const u32 j = begin + threadIdx.x + u * blockDim.x;
            if (j < end) asm volatile("prefetch.global.L2 [%0];" ::"l"(words + j));
        }
    }
    for (u32 j = threadIdx.x; j < words16; j += blockDim.x) {
        if (fresh) shared16[j] = all_ones;
        else copy_async<16>(shared16 + j, global16 + j);
    }
    if (threadIdx.x < subs) {
        npend[threadIdx.x] = 0;
        const u64 w = __ldcg(&t.aux[sub0 + threadIdx.x]);
        seeds[threadIdx.x] = g.space(sub0 + threadIdx.x, w & GH_CUCKOO_REGION_SEED).seed;
        spilled[threadIdx.x] = gh::two_level::Regions<K, V>::spilled(w) != 0;
    }
    for (u32 j = threadIdx.x; j < TL_FILTER_BITS / 32; j += blockDim.x) filter[j] = 0;
    for (u32 j = threadIdx.x; j < TL_WAITING / 32; j += blockDim.x) again[j] = later[j] = 0;
    if (threadIdx.x == 0) next_walk = 0;
    copy_async_wait();
    __syncthreads();

    // 1. Present keys updated, free candidate slots claimed in order.
    u64 ins = 0;
    for_bin<true>(words, begin, end, [&](const raw& word, u32 calls) {
        const u64 k = W::key(word);
        V value = gh::from_bits<V>(W::value(word));
        if (group) {
            // Copies of a key in this warp reduce their values first and the
            // lowest goes on for them: the copies a skewed batch leaves (one
            // per partition tile) would otherwise queue on the slot's
            // shared word, and a 64-bit reduction there spins on a CAS.
            const u32 copies = __match_any_sync(calls, k);
            value = reduce_group(copies, value, op);
            if ((threadIdx.x & 31) != (u32)__ffs(copies) - 1) return;
        }
        // The pair this lane places (or leaves waiting) for its copies.
        const raw w = group ? W::pack(k, gh::to_bits<V>(value)) : word;
        // A block of one region needs no hash to know it (the partition did).
        const u32 sub = TL_SUBS == 1 ? 0u : (u32)(g.region(k) - sub0);
        const u64 seed = seeds[sub];
        u32 xc[TL_D];
#pragma unroll
        for (int j = 0; j < TL_D; ++j) xc[j] = tl_cand<RB>(k, seed, sub, j);
        // The key anywhere among its candidates (a table built earlier may
        // hold it past a slot an erase freed). Not in a fresh table: there
        // copies of a key meet in the claims below, which only fill slots.
#pragma unroll
        for (int j = 0; j < TL_D && !fresh; ++j) {
            u64 kk[TL_S];
            shared_bucket_keys(region + xc[j] * TL_S, kk);
#pragma unroll
            for (int s = 0; s < TL_S; ++s)
                if (kk[s] == k) {
                    t.update_value(&region[xc[j] * TL_S + s], value, mode, op);
                    return;
                }
        }
        // Not in the region, and its overflow holds keys of this region: the
        // plain kernel, which reads the overflow, takes it. (Reading it here
        // made the build spill registers, 10% slower for every batch.) A key
        // the region holds is updated above, even here: deferring every key
        // of such regions took an insert-or-apply batch that repeats a
        // table's keys at load 0.95 to 1.8 G/s (u32, H200).
        if (spilled[sub]) {
            deferred[atomicAdd(&t.meta->counters[2], 1ull)] = w;
            return;
        }
#pragma unroll
        for (int j = 0; j < TL_D; ++j) {
            raw* bucket = region + xc[j] * TL_S;
            while (true) {
                u64 kk[TL_S];
                shared_bucket_keys(bucket, kk);
                int hit = -1, open = -1;
#pragma unroll
                for (int s = TL_S - 1; s >= 0; --s) {
                    if (kk[s] == k) hit = s;
                    if (kk[s] == W::EMPTY_KEY) open = s;
                }
                if (hit >= 0) {
                    t.update_value(&bucket[hit], value, mode, op);
                    return;
                }
                if (open < 0) break;  // full: the next candidate
                if (W::eq(W::cas(&bucket[open], W::empty(), w), W::empty())) {
                    ++ins;
                    return;
                }
                // Another thread took the slot (perhaps with this key): read the bucket again.
            }
        }
        const u32 at = atomicAdd(&npend[sub], 1u);
        if (at < TL_PEND) {
            const u32 p = sub * TL_PEND + at, b = tl_filter_bit(k);
            pend[p] = w;
            if (atomicOr(&filter[b / 32], 1u << (b % 32)) & (1u << (b % 32))) atomicOr(&again[p / 32], 1u << (p % 32));
        } else {
            deferred[atomicAdd(&t.meta->counters[2], 1ull)] = w;
        }
    });
    __syncthreads();

    // 2. Random walks for every region's waiting pairs. A fresh table holds
    // only this batch's keys, and is not copied first (a whole table's
    // write at every load from 0.5, as nearly every region has a few
    // waiting pairs): a walk that gives up defers its pair in hand (to the
    // overflow, rather than a warp's search of the whole region). In a
    // table that held keys a region where a walk gives up restarts from
    // step 1's state, written to the table first, so that a walk never
    // leaves a key stored before this call in hand, and one warp searches
    // the whole region for its waiting pairs (below).
    u32 total = 0;  // waiting pairs of the block (the same for every thread)
    for (u32 sub = 0; sub < subs; ++sub) total += min(npend[sub], TL_PEND);
    if (total > 0) {
        if (!fresh)
            for (u32 j = threadIdx.x; j < words16; j += blockDim.x)
                if (npend[j / TL_WORDS16] > 0) __stcg(global16 + j, shared16[j]);
        if (threadIdx.x < subs) {
            gave_up[threadIdx.x] = 0;
            walked[threadIdx.x] = 0;
        }
        __syncthreads();
        tl_mark_later<TL_PEND>(npend, total, again, later, [&](u32 q) { return W::key(pend[q]); });
        __syncthreads();
    }
    // Pair i's region and place, and whether it is a later copy.
    auto locate = [&](u32 i, u32* sub, u32* at) {
        tl_position<TL_PEND>(npend, i, sub, at);
        const u32 p = *sub * TL_PEND + *at;
        return (later[p / 32] >> (p % 32)) & 1u;
    };
    // Pairs are taken in turn (a thread whose walk ended early takes the
    // next), so a block waits for its longest walk, not for a thread's
    // several.
    if (total > 0) {
        for (u32 i = atomicAdd(&next_walk, 1u); i < total; i = atomicAdd(&next_walk, 1u)) {
            u32 sub, at;
            if (locate(i, &sub, &at) || *(volatile u32*)&gave_up[sub]) continue;
            const u32 p = sub * TL_PEND + at;
            raw w = pend[p];
            if (tl_walk<RB>(region, w, seeds[sub], sub, fresh ? TL_FRESH_WALK_STEPS : TL_WALK_STEPS, &gave_up[sub])) {
                atomicAdd(&walked[sub], 1u);
            } else if (fresh) {
                // The pair in hand to the plain kernel, which takes it into
                // the overflow. The region holds as many keys as before the
                // walk (the walk's own pair, perhaps, in place of one counted
                // in step 1), so nothing is added to the count here.
                deferred[atomicAdd(&t.meta->counters[2], 1ull)] = w;
            } else {
                atomicOr(&gave_up[sub], 1u);
            }
        }
        __syncthreads();
    }
    // Later copies update the slot their first copy reached.
    for (u32 i = threadIdx.x; i < total; i += blockDim.x) {
        u32 sub, at;
        if (!locate(i, &sub, &at) || gave_up[sub]) continue;
        const raw w = pend[sub * TL_PEND + at];
        const u64 k = W::key(w);
        bool done = false;
        for (int j = 0; j < TL_D && !done; ++j) {
            raw* bucket = region + tl_cand<RB>(k, seeds[sub], sub, j) * TL_S;
            u64 kk[TL_S];
            shared_bucket_keys(bucket, kk);
#pragma unroll
            for (int s = 0; s < TL_S; ++s)
                if (!done && kk[s] == k) {
                    t.update_value(&bucket[s], gh::from_bits<V>(W::value(w)), mode, op);
                    done = true;
                }
        }
        // Its first copy was left in a walk's hand (a fresh table): deferred with it.
        if (!done) deferred[atomicAdd(&t.meta->counters[2], 1ull)] = w;
    }
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp < subs && npend[warp] > 0 && !gave_up[warp] && lane == 0) ins += walked[warp];
    // A region whose walks gave up (only in a table that held keys): one
    // warp places every waiting pair, from step 1's state.
    if (warp < subs && npend[warp] > 0 && gave_up[warp]) {
        for (u32 j = lane; j < TL_WORDS16; j += 32)
            shared16[warp * TL_WORDS16 + j] = __ldcg(global16 + warp * TL_WORDS16 + j);
        __syncwarp();
        const u32 m = min(npend[warp], TL_PEND);
        const u64 seed = seeds[warp];
        for (u32 i = 0; i < m; ++i) {
            const u32 p = warp * TL_PEND + i;
            const raw w = pend[p];
            const int res = tl_place_by_warp<RB>(t, region, w, warp, seed, lane, mode, op);
            if (lane != 0) continue;
            ins += res == gh::INSERTED;
            if (res == gh::FAILED) deferred[atomicAdd(&t.meta->counters[2], 1ull)] = w;
        }
    }
    __syncthreads();
    for (u32 j = threadIdx.x; j < words16; j += blockDim.x) __stcg(global16 + j, shared16[j]);
    block_add(&t.meta->counters[0], ins);
}

// One block per build region r: its pairs are words[offsets[r] ..
// ends[r]) (as the linear build's). Pairs placed nowhere go to `deferred` (counters[2]
// counts them). The spill arguments and try_count are the linear build's
// (unused here); `fresh` is 1 where the host knows every slot is EMPTY: the
// table is not read.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS, 3)
    gh_region_build(View t, const u32* offsets, const u32* ends, const View::raw* words, View::raw* spills,
                    u32* spill_count, View::raw* deferred, u32 mode, u32 op, u32 try_count, u32 fresh,
                    const u32* skewed) {
    if (t.meta->counters[1]) return;  // an open bin overflowed: the host partitions again
    const gh::two_level::Regions<K, V> g(t);
    // The partition's combining leaves a copy per tile of a hot key in a
    // skewed insert-or-apply batch: only such batches group a warp's copies
    // (a match per warp cost uniform u64 batches 13%; grouping only in the
    // regions the scan marked heavy cost zipf batches 25%).
    const bool group = mode == gh::MODE_APPLY && *skewed;
    if (g.rb == TL_LARGE) tl_build<TL_LARGE>(t, g, offsets, ends, words, deferred, mode, op, fresh, group);
    else tl_build<TL_SMALL>(t, g, offsets, ends, words, deferred, mode, op, fresh, group);
}

// ---- two-level: a fresh table of 16-byte slots built from slot indices ----
// Where every slot is EMPTY and the batch assigns (or inserts if absent) and
// its slots are 16 bytes, a build block holds no slots at all: each slot
// of its regions is a 4-byte index into the region's bin (FR_EMPTY where
// EMPTY), beside a copy of the bin's keys: 50 KiB with the waiting list,
// against 72 KiB. Claims and walks are 4-byte atomics on fewer shared-memory
// lines, and the slots are gathered from the bin when the regions are
// written back. Measured on an H200 (2^27 slots, u64 pairs), against the
// slot-wide build: +2% at load 0.5, +10% at 0.9. Blocks stay three an SM,
// at 40 registers: four at 32 registers (the shared memory would allow
// them) ran 14% slower at 0.5. Placement is tl_build's (step 1: a free candidate slot in
// candidate order, copies of a key meeting in one slot; step 2: random walks
// whose leftovers go to the plain kernel), so the table is one tl_build
// could have built. With these modes the value of any copy of a key may be
// the stored one, so later copies of a waiting key are dropped, not applied.
constexpr u32 FR_EMPTY = ~0u;
// Keys of a bin held in shared memory (a region's 4096 slots at most hold
// as many distinct keys); the keys of larger bins past these are read from
// the bin.
constexpr u32 FR_CACHE = BUILD_BUCKETS * TL_S;
// Threads of a block (three blocks an SM).
#define GH_FRESH_THREADS 512
// Exchanges a walk makes before its entry goes to the plain kernel: twice
// the slot-wide build's, as these walks' steps cost less (H200, 2^27 u64
// pairs, against 64: +2.5% at load 0.95, -1% at 0.9, even at 0.5).
constexpr u32 FR_WALK_STEPS = 128;

// The key of bin entry i.
__device__ __forceinline__ u64 fr_key(const u64* cache, const View::raw* bin, u32 i) {
    if (i < FR_CACHE) return cache[i];
    return __ldcg((const u64*)(bin + i));  // a Pair16's key word
}

// The slot indices of a bucket, read past other threads' atomics (the
// kernel runs only for 16-byte slots, two a bucket; the other case keeps
// 8-byte modules compiling).
__device__ __forceinline__ void fr_bucket(const u32* bucket, u32 (&e)[TL_S]) {
    const u32 at = (u32)__cvta_generic_to_shared(bucket);
    if constexpr (TL_S == 2) {
        asm volatile("ld.volatile.shared.v2.u32 {%0, %1}, [%2];" : "=r"(e[0]), "=r"(e[1]) : "r"(at) : "memory");
    } else {
#pragma unroll
        for (int s = 0; s < TL_S; ++s) e[s] = ((const volatile u32*)bucket)[s];
    }
}

// tl_walk on slot indices: entry e of the bin goes into a free slot of a
// candidate, else takes a random slot's place and the entry it displaced
// goes on. False: it gave up, with entry e still in hand.
template <u32 RB>
__device__ bool fr_walk(u32* img, const u64* cache, const View::raw* bin, u32& e, u64 seed, u32 sub) {
    u64 k = fr_key(cache, bin, e);
    u32 rnd = (u32)gh::mix64(k, seed ^ GH_CUCKOO_WALK_SALT) | 1u;
    u32 b = tl_cand<RB>(k, seed, sub, (int)(rnd % TL_D));
    for (u32 step = 0; step < FR_WALK_STEPS; ++step) {
        u32* bucket = img + b * TL_S;
        u32 cur[TL_S];
        fr_bucket(bucket, cur);
#pragma unroll
        for (int s = 0; s < TL_S; ++s)
            if (cur[s] == FR_EMPTY && atomicCAS(&bucket[s], FR_EMPTY, e) == FR_EMPTY) return true;
        rnd ^= rnd << 13;  // xorshift32
        rnd ^= rnd >> 17;
        rnd ^= rnd << 5;
        const u32 out = atomicExch(&bucket[rnd % TL_S], e);
        if (out == FR_EMPTY) return true;
        e = out;
        k = fr_key(cache, bin, e);
        const u32 j0 = (rnd >> 16) % TL_D;
#pragma unroll
        for (int u = 0; u < TL_D; ++u) {
            const u32 c = tl_cand<RB>(k, seed, sub, (int)((j0 + u) % TL_D));
            if (c != b) { b = c; break; }
        }
    }
    return false;
}

// Build region r of a fresh table (mode MODE_ASSIGN or MODE_IF_ABSENT) by one block.
template <u32 RB>
__device__ __forceinline__ void fr_build(const View& t, const gh::two_level::Regions<K, V>& g, const u32* offsets,
                                         const u32* ends, const View::raw* words, View::raw* deferred) {
    typedef View::raw raw;
    constexpr u32 SUBS = Tl<RB>::SUBS, PEND = Tl<RB>::PEND;
    extern __shared__ __align__(16) unsigned char smem[];
    u32* img = (u32*)smem;                             // BUILD_BUCKETS * TL_S slot indices
    u64* cache = (u64*)(img + BUILD_BUCKETS * TL_S);   // FR_CACHE keys
    u32* pend = (u32*)(cache + FR_CACHE);              // TL_WAITING entries
    __shared__ u32 npend[SUBS];
    __shared__ u64 seeds[SUBS];
    __shared__ u32 walked[SUBS];
    __shared__ u32 filter[TL_FILTER_BITS / 32];
    __shared__ u32 again[TL_WAITING / 32];
    __shared__ u32 later[TL_WAITING / 32];
    __shared__ u32 next_walk;
    const u64 r = blockIdx.x, sub0 = r * SUBS;
    const u32 subs = (u32)min((u64)SUBS, g.count - sub0);
    const u64 first = sub0 * RB;
    const u32 slots = subs * RB * TL_S;
    const u32 begin = offsets[r], n = ends[r] - begin;
    const raw* bin = words + begin;
    for (u32 j = threadIdx.x; j < slots; j += blockDim.x) img[j] = FR_EMPTY;
    for (u32 i = threadIdx.x; i < min(n, FR_CACHE); i += blockDim.x) copy_async<8>(cache + i, bin + i);
    if (threadIdx.x < subs) {
        npend[threadIdx.x] = 0;
        walked[threadIdx.x] = 0;
        const u64 w = __ldcg(&t.aux[sub0 + threadIdx.x]);
        seeds[threadIdx.x] = g.space(sub0 + threadIdx.x, w & GH_CUCKOO_REGION_SEED).seed;
    }
    for (u32 j = threadIdx.x; j < TL_FILTER_BITS / 32; j += blockDim.x) filter[j] = 0;
    for (u32 j = threadIdx.x; j < TL_WAITING / 32; j += blockDim.x) again[j] = later[j] = 0;
    if (threadIdx.x == 0) next_walk = 0;
    copy_async_wait();
    __syncthreads();

    // 1. Free candidate slots claimed in order; a key already placed is done.
    u64 ins = 0;
    for (u32 i0 = 0; i0 < n; i0 += blockDim.x) {
        const u32 i = i0 + threadIdx.x;
        if (i < n) {
            // The lanes of this warp in this round, kept in step (see for_bin).
            const u32 at0 = i0 + (threadIdx.x & ~31u);
            const u32 lanes = n - at0 >= 32 ? ~0u : (1u << (n - at0)) - 1;
            const u64 k = fr_key(cache, bin, i);
            const u32 sub = SUBS == 1 ? 0u : (u32)(g.region(k) - sub0);
            const u64 seed = seeds[sub];
            bool done = false;
#pragma unroll
            for (int j = 0; j < TL_D && !done; ++j) {
                u32* bucket = img + tl_cand<RB>(k, seed, sub, j) * TL_S;
                while (true) {
                    u32 cur[TL_S];
                    fr_bucket(bucket, cur);
                    int open = -1;
                    bool hit = false;
#pragma unroll
                    for (int s = TL_S - 1; s >= 0; --s) {
                        if (cur[s] == FR_EMPTY) open = s;
                        else hit |= fr_key(cache, bin, cur[s]) == k;
                    }
                    if (hit) {
                        done = true;
                        break;
                    }
                    if (open < 0) break;  // full: the next candidate
                    if (atomicCAS(&bucket[open], FR_EMPTY, i) == FR_EMPTY) {
                        ++ins;
                        done = true;
                        break;
                    }
                    // Another thread took the slot (perhaps with this key): read the bucket again.
                }
            }
            if (!done) {
                const u32 at = atomicAdd(&npend[sub], 1u);
                if (at < PEND) {
                    const u32 p = sub * PEND + at, b = tl_filter_bit(k);
                    pend[p] = i;
                    if (atomicOr(&filter[b / 32], 1u << (b % 32)) & (1u << (b % 32)))
                        atomicOr(&again[p / 32], 1u << (p % 32));
                } else {
                    deferred[atomicAdd(&t.meta->counters[2], 1ull)] = View::W::load(bin + i);
                }
            }
            __syncwarp(lanes);
        }
    }
    __syncthreads();

    // 2. Random walks for the waiting entries but later copies of a key (as
    // tl_build finds them), each taken in turn by the next free thread.
    u32 total = 0;
    for (u32 sub = 0; sub < subs; ++sub) total += min(npend[sub], PEND);
    if (total > 0) {
        tl_mark_later<PEND>(npend, total, again, later, [&](u32 q) { return fr_key(cache, bin, pend[q]); });
        __syncthreads();
        for (u32 i = atomicAdd(&next_walk, 1u); i < total; i = atomicAdd(&next_walk, 1u)) {
            u32 sub, at;
            tl_position<PEND>(npend, i, &sub, &at);
            const u32 p = sub * PEND + at;
            if ((later[p / 32] >> (p % 32)) & 1u) continue;  // its first copy walks for it
            u32 e = pend[p];
            if (fr_walk<RB>(img, cache, bin, e, seeds[sub], sub)) atomicAdd(&walked[sub], 1u);
            // The entry in hand to the plain kernel (the region holds as
            // many keys as before the walk: nothing is counted here).
            else deferred[atomicAdd(&t.meta->counters[2], 1ull)] = View::W::load(bin + e);
        }
        __syncthreads();
        if (threadIdx.x < subs) ins += walked[threadIdx.x];
    }

    // The regions written back, each slot gathered from the bin, with
    // streaming stores: this build reads no slot again, and the bins it
    // gathers from then stay in L2 (measured on an H100, 2^27 u64 pairs at
    // load 0.5: 1.61 -> 1.29 GB read from DRAM, the build 1.55 -> 1.47 ms).
    ulonglong2* out = (ulonglong2*)(t.slots + first * TL_S);
    const ulonglong2 all_ones = make_ulonglong2(~0ull, ~0ull);  // EMPTY slots
    constexpr u32 UNROLL = 4;
    for (u32 j0 = threadIdx.x; j0 < slots; j0 += UNROLL * blockDim.x) {
        ulonglong2 w[UNROLL];
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            const u32 j = j0 + u * blockDim.x;
            const u32 e = j < slots ? img[j] : FR_EMPTY;
            w[u] = e == FR_EMPTY ? all_ones : __ldcg((const ulonglong2*)(bin + e));
        }
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u)
            if (j0 + u * blockDim.x < slots) __stcs(out + j0 + u * blockDim.x, w[u]);
    }
    block_add(&t.meta->counters[0], ins);
}

// gh_region_build for a fresh table of 16-byte slots and a batch that
// assigns or inserts if absent (the host launches GH_FRESH_THREADS threads
// a block and 48 KiB of shared memory plus TL_WAITING entries).
extern "C" __global__ void __launch_bounds__(GH_FRESH_THREADS, 3)
    gh_region_build_fresh(View t, const u32* offsets, const u32* ends, const View::raw* words, View::raw* deferred) {
    if (t.meta->counters[1]) return;  // an open bin overflowed: the host partitions again
    if constexpr (View::WORD_BYTES == 16) {
        const gh::two_level::Regions<K, V> g(t);
        if (g.rb == TL_LARGE) fr_build<TL_LARGE>(t, g, offsets, ends, words, deferred);
        else fr_build<TL_SMALL>(t, g, offsets, ends, words, deferred);
    }
}
#endif  // the build of each scheme

// Refused keys a block stages in shared memory (16 KiB of u64 keys); a
// search for more reads them from global memory.
constexpr u32 POS_SHARED = 2048;
// Bits of the filter in front of the search (4 KiB).
constexpr u32 POS_FILTER_LOG2 = 15;
// Batch keys a thread of gh_region_positions loads before it searches any.
constexpr u32 POS_BATCH = 8;

// Whether k is in the ascending a[0..m) (shared or global memory).
__device__ __forceinline__ bool in_sorted(const K* a, u64 m, K k) {
    u64 lo = 0, len = m;  // the first entry not below k is in [lo, lo + len]
    while (len > 0) {
        const u64 half = len / 2;
        if (a[lo + half] < k) {
            lo += half + 1;
            len -= half + 1;
        } else {
            len = half;
        }
    }
    return lo < m && a[lo] == k;
}

// A key's bit in the filter (a multiplicative hash: cheap, and only a
// key whose bit is set is searched for).
__device__ __forceinline__ u32 filter_bit(K k) { return (u32)(((u64)k * 0x9e3779b97f4a7c15ull) >> (64 - POS_FILTER_LOG2)); }

// Appends the positions i of keys[i] found in sorted[0..m) (ascending):
// where a region build's refused keys sit in the batch, without a lookup of
// every key in the table. counters[3] counts them. The refused keys are few
// against a batch of millions, so each block sets their bits in a filter in
// shared memory and searches only for keys whose bit is set (a copy of the
// refused keys in shared memory when they fit). The host launches as many
// blocks as are resident at once (one set-up each; a block per few keys
// measured 0.94 ms for 2^27 keys, latency-bound); a thread's POS_BATCH batch
// loads are in flight together.
extern "C" __global__ void gh_region_positions(View t, const K* keys, u64 n, const K* sorted, u64 m, u32* out,
                                               u64 cap) {
    __shared__ K s_sorted[POS_SHARED];
    __shared__ u32 s_filter[1u << (POS_FILTER_LOG2 - 5)];
    const bool local = m <= POS_SHARED;
    for (u32 j = threadIdx.x; j < (1u << (POS_FILTER_LOG2 - 5)); j += blockDim.x) s_filter[j] = 0;
    __syncthreads();
    for (u64 j = threadIdx.x; j < m; j += blockDim.x) {
        const K k = sorted[j];
        if (local) s_sorted[j] = k;
        const u32 b = filter_bit(k);
        atomicOr(&s_filter[b >> 5], 1u << (b & 31));
    }
    __syncthreads();
    const u64 stride = grid_stride();
    for (u64 i0 = thread_index(); i0 < n; i0 += POS_BATCH * stride) {
        K k[POS_BATCH];
#pragma unroll
        for (u32 u = 0; u < POS_BATCH; ++u) k[u] = i0 + u * stride < n ? keys[i0 + u * stride] : (K)0;
#pragma unroll
        for (u32 u = 0; u < POS_BATCH; ++u) {
            const u64 i = i0 + u * stride;
            const u32 b = filter_bit(k[u]);
            if (i >= n || !(s_filter[b >> 5] >> (b & 31) & 1)) continue;
            if (local ? in_sorted(s_sorted, m, k[u]) : in_sorted(sorted, m, k[u])) {
                const u64 at = atomicAdd(&t.meta->counters[3], 1ull);
                if (at < cap) out[at] = (u32)i;
            }
        }
    }
}

#if GH_SCHEME == GH_SCHEME_LINEAR
// The region build's deferred pairs (counters[2] of them, packed in
// `deferred` by the build and the spill), a warp per key (insert_by_warp):
// few, but they are the ones whose sequences cross region ends through the
// table's longest runs, or walk to the probe limit. The count is read here,
// on the device, so the host launches this with the build and reads the
// counters once for both (a read-back between them cost an aggregation 2%
// on an H100). New keys add to counters[0] with the build's; a pair the
// table refuses is counted in counters[3] and its place in the list noted
// in `failed` (up to `failed_cap`). Copies of stored keys are not counted:
// counters[1] is the open bins' overflow flag, and the host derives them.
extern "C" __global__ void gh_region_deferred(View t, const View::raw* deferred, u32 mode, u32 op, u32* failed,
                                              u64 failed_cap) {
    if (t.meta->counters[1]) return;  // nothing was built (gh_region_build)
    const u64 n = t.meta->counters[2];
    const u32 lane = threadIdx.x & 31;
    u64 ins = 0;
    for (u64 i = thread_index() / 32; i < n; i += grid_stride() / 32) {
        const View::raw w = deferred[i];
        const K key = (K)View::W::key(w);
        const V value = gh::from_bits<V>(View::W::value(w));
        int r = 0;
        if (View::special_index(key) >= 0) {  // out-of-band: not in a slot
            if (lane == 0) r = t.template insert_as<GH_SCHEME>(key, value, mode, op);
        } else {
            r = insert_by_warp(t, (u64)key, value, mode, op, lane);
        }
        if (lane != 0) continue;
        ins += r == gh::INSERTED;
        if (r == gh::FAILED) {
            const u64 at = atomicAdd(&t.meta->counters[3], 1ull);
            if (at < failed_cap) failed[at] = (u32)i;
        }
    }
    block_add(&t.meta->counters[0], ins);
}
#endif  // GH_SCHEME_LINEAR
#endif  // the region build

// keys_out[j], values_out[j] = the pair packed in words[j]: the deferred
// part of a region-built batch, for the plain insert kernel.
extern "C" __global__ void gh_unpack_pairs(const View::raw* words, u64 n, K* keys_out, V* values_out) {
    for (u64 j = thread_index(); j < n; j += grid_stride()) {
        const View::raw w = words[j];
        keys_out[j] = (K)View::W::key(w);
        values_out[j] = gh::from_bits<V>(View::W::value(w));
    }
}

// Tombstone cleaning, step 1 (Linear and Hashinator; the host rehashes for
// other schemes): one thread per bucket. Keys that lookups will still reach
// stay (gh::clean_stays; Linear packs them to the bucket's front); the others
// are appended to keys_out / values_out (counters[3] counts them, one atomic
// per warp) and their slots, like every tombstone, become EMPTY. counters[0]
// counts the live keys seen. A key that finds the buffer full (`cap` too
// small: the host's live count was stale) stays in its bucket and is counted
// in counters[2]; the host then rebuilds the table, which reads every slot,
// so no key is lost. Every thread of a block runs the same iterations (warp
// shuffles below).
extern "C" __global__ void gh_clean_extract(View t, u64 buckets, K* keys_out, V* values_out, u64 cap) {
    constexpr int G = View::SLOTS;
    constexpr bool PACK = GH_SCHEME != GH_SCHEME_HASHINATOR;
    typedef View::W W;
    const u32 lane = threadIdx.x & 31;
    u64 live = 0, overflow = 0;
    for (u64 first = blockIdx.x * (u64)blockDim.x; first < buckets; first += grid_stride()) {
        const u64 b = first + threadIdx.x;
        const bool in = b < buckets;
        View::raw* slots = t.slots + (in ? b : 0) * G;
        View::raw w[G];
        u32 keep = 0, lift = 0, was_empty = 0;  // bit j: slot j of the bucket
        int gap = -1;                           // last slot so far that ends up EMPTY
#pragma unroll
        for (int j = 0; j < G; ++j) {
            w[j] = in ? W::load(&slots[j]) : W::empty();
            const u64 k = W::key(w[j]);
            if (k == W::EMPTY_KEY) was_empty |= 1u << j;
            if (k == W::EMPTY_KEY || k == W::TOMB_KEY) {
                gap = j;
            } else if (gh::clean_stays<GH_SCHEME>(t, k, b, j, gap)) {
                keep |= 1u << j;
            } else {
                lift |= 1u << j;
                gap = j;
            }
        }
        live += __popc(keep) + __popc(lift);
        // Warp-wide exclusive prefix of the lifted counts: one atomic per warp.
        const u32 mine = __popc(lift);
        u32 incl = mine;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            u32 x = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= (u32)o) incl += x;
        }
        const u32 total = __shfl_sync(0xffffffffu, incl, 31);
        u64 base = 0;
        if (lane == 31 && total != 0) base = atomicAdd(&t.meta->counters[3], (u64)total);
        base = __shfl_sync(0xffffffffu, base, 31);
        u64 at = base + (incl - mine);
        if (!in) continue;
        u32 dst = 0;  // PACK: the next front slot (dst <= j, so nothing unread is overwritten)
#pragma unroll
        for (int j = 0; j < G; ++j) {
            bool stays = keep >> j & 1;
            if (lift >> j & 1) {
                if (at < cap) {
                    keys_out[at] = (K)W::key(w[j]);
                    values_out[at] = gh::from_bits<V>(W::value(w[j]));
                } else {
                    overflow += 1;
                    stays = true;
                }
                ++at;
            }
            if (PACK) {
                if (stays) {
                    if (dst != (u32)j) slots[dst] = w[j];
                    ++dst;
                }
            } else if (!stays && !(was_empty >> j & 1)) {
                slots[j] = W::empty();
            }
        }
        if (PACK) {
#pragma unroll
            for (int j = 0; j < G; ++j)
                if ((u32)j >= dst && !(was_empty >> j & 1)) slots[j] = W::empty();
        }
    }
    block_add(&t.meta->counters[0], live);
    block_add(&t.meta->counters[2], overflow);
}

// ---- Paged tables: a batch split by page on the device ----
// (src/backend/cuda/paging.rs, `Batcher`.) The page of a key is
// core::hash::route: the high bits of a mix salted apart from placement.
__device__ __forceinline__ u32 page_of_key(K key, u64 seed, u64 pages) {
    return (u32)__umul64hi(gh::mix64((u64)key, seed ^ GH_ROUTE_SALT), pages);
}

// Pages of at most this many counters are counted in shared memory first
// (one global atomic per page and block, not per key).
#define GH_PAGE_SHARED_COUNTERS 4096

// hist[p] += keys of page p.
extern "C" __global__ void gh_page_count(const K* keys, u64 n, u64 seed, u64 pages, u32* hist) {
    __shared__ u32 local[GH_PAGE_SHARED_COUNTERS];
    const bool in_shared = pages <= GH_PAGE_SHARED_COUNTERS;
    if (in_shared)
        for (u64 p = threadIdx.x; p < pages; p += blockDim.x) local[p] = 0;
    __syncthreads();
    for (u64 i = thread_index(); i < n; i += grid_stride()) {
        const u32 p = page_of_key(keys[i], seed, pages);
        atomicAdd(in_shared ? &local[p] : &hist[p], 1u);
    }
    __syncthreads();
    if (in_shared)
        for (u64 p = threadIdx.x; p < pages; p += blockDim.x)
            if (local[p]) atomicAdd(&hist[p], local[p]);
}

// Moves each key of a group of pages to sorted[cursor[slot[page]]++] (its
// value, when given, to sorted_values at the same place) and records its
// batch position there; slot[page] is the page's place in the group (below
// `slots`), ~0 for a page left to another group. The page is recomputed
// rather than stored: a hash costs less than 4 bytes a key of scratch.
// A batch spreads over few pages, so per-key atomics on their handful of
// cursors would serialise: a block takes a tile of keys, the lanes of a
// warp that share a page take their places in the tile with one
// shared-memory atomic, and the block then claims each page's run with one
// global atomic (a group of more than GH_SCATTER_SHARED pages: one global
// atomic per warp and page). Within a warp, batch order is kept.
#define GH_SCATTER_SHARED 2048
#define GH_SCATTER_ITEMS 8
extern "C" __global__ void gh_page_scatter(const K* keys, const V* values, u64 n, u64 seed, u64 pages, const u32* slot,
                                           u64 slots, u32* cursor, K* sorted, V* sorted_values, u32* pos) {
    __shared__ u32 count[GH_SCATTER_SHARED];
    __shared__ u32 base[GH_SCATTER_SHARED];
    const u32 lane = threadIdx.x & 31;
    const u32 below = (1u << lane) - 1u;
    const bool in_shared = slots <= GH_SCATTER_SHARED;
    const u64 tile = (u64)blockDim.x * GH_SCATTER_ITEMS;
    // Block-uniform loop: every thread runs every tile (the barriers).
    for (u64 first = (u64)blockIdx.x * tile; first < n; first += (u64)gridDim.x * tile) {
        if (in_shared)
            for (u64 j = threadIdx.x; j < slots; j += blockDim.x) count[j] = 0;
        __syncthreads();
        u32 at[GH_SCATTER_ITEMS], s[GH_SCATTER_ITEMS];
        K k[GH_SCATTER_ITEMS];
#pragma unroll
        for (int it = 0; it < GH_SCATTER_ITEMS; ++it) {
            const u64 i = first + (u64)it * blockDim.x + threadIdx.x;
            k[it] = i < n ? keys[i] : K(0);
            s[it] = i < n ? slot[page_of_key(k[it], seed, pages)] : 0xffffffffu;
            const bool live = s[it] != 0xffffffffu;
            const u32 peers = __match_any_sync(0xffffffffu, s[it]);
            const u32 leader = __ffs(peers) - 1;
            u32 b = 0;
            if (live && lane == leader) b = atomicAdd(in_shared ? &count[s[it]] : &cursor[s[it]], (u32)__popc(peers));
            at[it] = __shfl_sync(0xffffffffu, b, leader) + __popc(peers & below);
        }
        __syncthreads();
        if (in_shared)
            for (u64 j = threadIdx.x; j < slots; j += blockDim.x) base[j] = count[j] ? atomicAdd(&cursor[j], count[j]) : 0;
        __syncthreads();
#pragma unroll
        for (int it = 0; it < GH_SCATTER_ITEMS; ++it) {
            if (s[it] == 0xffffffffu) continue;
            const u64 i = first + (u64)it * blockDim.x + threadIdx.x;
            const u32 to = (in_shared ? base[s[it]] : 0u) + at[it];
            sorted[to] = k[it];
            if (values) sorted_values[to] = values[i];
            pos[to] = (u32)i;
        }
    }
}

// Back to batch order: out[pos[j]] = values[j] (when given) and
// found_out[pos[j]] = found[j].
extern "C" __global__ void gh_page_unpermute(const u32* pos, u64 n, const V* values, const unsigned char* found,
                                             V* out, unsigned char* found_out) {
    for (u64 j = thread_index(); j < n; j += grid_stride()) {
        const u32 p = pos[j];
        if (values) out[p] = values[j];
        found_out[p] = found[j];
    }
}
