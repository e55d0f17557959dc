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

#if GH_SCHEME == GH_SCHEME_HASHINATOR
// Hashinator: a team of t.param lanes per key (kernels/schemes/hashinator.cuh);
// the host launches keys * team threads. Team k serves keys k, k + teams, ...
// (every lane of a team sees the same key, so the team stays together), and
// its first lane does the per-key bookkeeping, so counters stay exact.

// Inserts keys[i] -> values[i]. Positions that find no slot are appended to
// `failed` (up to `failed_cap`; counters[2] holds the true count).
extern "C" __global__ void gh_insert(View t, const K* keys, const V* values, u64 n, u32 mode, u32 op,
                                     u32* failed, u64 failed_cap, u64 base) {
    const gh::hashinator::Team team(t.param);
    u64 ins = 0, ex = 0;
    for (u64 i = thread_index() / team.size; i < n; i += grid_stride() / team.size) {
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
                                     u32* failed, u64 failed_cap, u64 base) {
    u64 ins = 0, ex = 0;
    for (u64 i = thread_index(); i < n; i += grid_stride()) {
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
// repeated throughout a batch then costs one locked insert per warp.
template <typename T> __device__ __forceinline__ T combine(T a, T b, u32 op) {
    // Integers wrap like the atomics they stand in for.
    if (op == gh::REDUCE_SUM) return (T)((u64)a + (u64)b);
    if (op == gh::REDUCE_MIN) return b < a ? b : a;
    return a < b ? b : a;
}
template <> __device__ __forceinline__ float combine<float>(float a, float b, u32 op) {
    return op == gh::REDUCE_SUM ? a + b : op == gh::REDUCE_MIN ? fminf(a, b) : fmaxf(a, b);
}
template <> __device__ __forceinline__ double combine<double>(double a, double b, u32 op) {
    return op == gh::REDUCE_SUM ? a + b : op == gh::REDUCE_MIN ? fmin(a, b) : fmax(a, b);
}

extern "C" __global__ void gh_insert(View t, const K* keys, const V* values, u64 n, u32 mode, u32 op,
                                     u32* failed, u64 failed_cap, u64 base) {
    const u32 lane = threadIdx.x & 31;
    u64 ins = 0, ex = 0;
    // Whole warps step together (blockDim.x is a multiple of 32), so every
    // lane reaches the warp-wide votes; lanes past the batch's end sit out.
    for (u64 w = thread_index() - lane; w < n; w += grid_stride()) {
        const u64 i = w + lane;
        const bool live = i < n;
        const K key = live ? keys[i] : (K)0;
        V value = live ? values[i] : gh::from_bits<V>(0);
        const u32 group = __match_any_sync(0xffffffffu, key) & __ballot_sync(0xffffffffu, live);
        if (!live) continue;
        const int leader = __ffs(group) - 1;
        if (mode == gh::MODE_APPLY) {
            const V mine = value;  // shuffled as read, not as combined so far
            for (u32 rest = group & (group - 1); rest; rest &= rest - 1)
                value = combine(value, __shfl_sync(group, mine, __ffs(rest) - 1), op);
        }
        int r = gh::FAILED;
        if ((int)lane == leader) {
            r = t.template insert_as<GH_SCHEME>(key, value, mode, op);
            const u64 others = __popc(group) - 1;
            ins += r == gh::INSERTED;
            ex += r == gh::EXISTING ? others + 1 : r == gh::INSERTED ? others : 0;
        }
        r = __shfl_sync(group, r, leader);
        if (r == gh::FAILED) note_failed(t, failed, failed_cap, base + i);
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
        bool hit = t.template find_as<GH_SCHEME>(keys[i], &v);
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
        bool hit = t.template find_as<GH_SCHEME>(keys[i], &v);
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

// Appends the positions i of keys[i] found in sorted[0..m) (ascending):
// where a region build's refused keys sit in the batch, without a lookup of
// every key in the table. counters[3] counts them, as above.
extern "C" __global__ void gh_positions_of(View t, const K* keys, u64 n, const K* sorted, u64 m, u32* out,
                                           u64 cap) {
    for (u64 i = thread_index(); i < n; i += grid_stride()) {
        const K k = keys[i];
        u64 lo = 0, hi = m;  // the first entry not below k is in [lo, hi]
        while (lo < hi) {
            const u64 mid = (lo + hi) / 2;
            if (sorted[mid] < k) lo = mid + 1;
            else hi = mid;
        }
        if (lo < m && sorted[lo] == k) {
            const u64 at = atomicAdd(&t.meta->counters[3], 1ull);
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

#if GH_SCHEME == GH_SCHEME_LINEAR
// ---- region build -------------------------------------------------------------
// A large batch is inserted region by region: a region is `rb` consecutive
// buckets (64 KiB), the most one block holds in shared memory at a useful
// occupancy. A partition sorts the batch by the region of each key's home
// bucket into packed bins (region r's pairs at [offsets[r], offsets[r+1]));
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
// index, one or two passes (src/backend/cuda/region.rs picks): pass 1 bins
// by `region >> shift` (every region when shift is 0), pass 2 splits each
// pass-1 bin ("segment") by `region & (2^shift - 1)`. A few hundred bins per
// pass keep both the per-block counts and the write fronts small; one pass
// over ~16 Ki regions would need either an atomic per key or scattered
// 8-byte writes that thrash L2. Each pass is three kernels:
//   gh_region_hist*   each block counts its slice's keys per bin in shared
//                     memory, stores its counts and adds them to the global
//                     counts (one atomic per block and nonzero bin);
//   gh_region_scan    exclusive prefix sums of the counts: exact bin offsets
//                     (and cursors), so bins are packed and never overflow;
//   gh_region_scatter* each block reserves its range of every bin (one
//                     atomic per block and nonzero bin), then per tile
//                     groups its keys by bin in shared memory and writes
//                     each bin's run with consecutive threads.
// The hist and scatter kernels of a pass split the work identically: block
// (x, y) takes part x of `gridDim.x` of segment y (pass 1: the whole batch).

// Threads of the partition and build kernels (the host launches these).
#define GH_PART_THREADS 512
// Keys a partition thread stages per tile: tiles of 4096 keys (2048 for
// 16-byte words) keep the shared staging area at 40 KiB / 36 KiB. (Three
// blocks an SM would leave 42 registers a thread, and the staged words spill.)
constexpr u32 PART_ITEMS = View::WORD_BYTES == 8 ? 8 : 4;
constexpr u32 PART_TILE = GH_PART_THREADS * PART_ITEMS;

// The slice [*lo, *hi) of the segment [seg_lo, seg_hi) that part x of
// `parts` takes: equal shares, so the hist and scatter kernels agree.
__device__ __forceinline__ void part_range(u64 seg_lo, u64 seg_hi, u32 x, u32 parts, u64* lo, u64* hi) {
    const u64 per = (seg_hi - seg_lo + parts - 1) / parts;
    *lo = min(seg_hi, seg_lo + x * per);
    *hi = min(seg_hi, *lo + per);
}

// The segment of this block: the whole batch in pass 1, pass-1 bin
// blockIdx.y (from the pass-1 offsets) in pass 2.
template <bool FIRST>
__device__ __forceinline__ void block_slice(u64 n, const u32* seg_off, u64* lo, u64* hi) {
    const u64 seg_lo = FIRST ? 0 : seg_off[blockIdx.y], seg_hi = FIRST ? n : seg_off[blockIdx.y + 1];
    part_range(seg_lo, seg_hi, blockIdx.x, gridDim.x, lo, hi);
}

// A key's region; pass 1 reads the batch, pass 2 the packed words of pass 1.
template <bool FIRST>
__device__ __forceinline__ u64 region_of(const View& t, u64 rb, const K* keys, const View::raw* words, u64 i,
                                         bool* defer) {
    u64 k;
    if (FIRST) {
        const K key = keys[i];
        *defer = View::special_index(key) >= 0;
        k = (u64)key;
    } else {
        *defer = false;
        k = View::W::key(words[i]);
    }
    return t.home(k) / rb;
}

// The bin of a region in this pass (its index within the block's segment).
template <bool FIRST>
__device__ __forceinline__ u32 digit(u64 region, u32 shift) {
    return FIRST ? (u32)(region >> shift) : (u32)(region & ((1ull << shift) - 1));
}

template <bool FIRST>
__device__ __forceinline__ void region_hist(View t, u64 rb, u32 shift, u32 bins, const K* keys,
                                            const View::raw* words, u64 n, const u32* seg_off, u32* block_counts,
                                            u32* counts) {
    extern __shared__ u32 hist[];  // bins
    for (u32 b = threadIdx.x; b < bins; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    u64 lo, hi;
    block_slice<FIRST>(n, seg_off, &lo, &hi);
    for (u64 i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        bool defer;
        const u64 r = region_of<FIRST>(t, rb, keys, words, i, &defer);
        if (!defer) atomicAdd(&hist[digit<FIRST>(r, shift)], 1u);
    }
    __syncthreads();
    const u64 block = (u64)blockIdx.y * gridDim.x + blockIdx.x;
    for (u32 b = threadIdx.x; b < bins; b += blockDim.x) {
        const u32 c = hist[b];
        block_counts[block * bins + b] = c;
        // Pass 2: segment y's bins are regions y * bins + b (bins = 2^shift).
        if (c) atomicAdd(&counts[(u64)blockIdx.y * bins + b], c);
    }
}

// Pass-1 counts of the batch by `region >> shift` (out-of-band keys excluded).
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS)
    gh_region_hist1(View t, const K* keys, u64 n, u64 rb, u32 shift, u32 bins, u32* block_counts, u32* counts) {
    region_hist<true>(t, rb, shift, bins, keys, nullptr, n, nullptr, block_counts, counts);
}

// Pass-2 counts of each pass-1 segment by `region & (2^shift - 1)`: counts
// per region.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS)
    gh_region_hist2(View t, const View::raw* words, u64 rb, u32 shift, const u32* seg_off, u32* block_counts,
                    u32* counts) {
    region_hist<false>(t, rb, shift, 1u << shift, nullptr, words, 0, seg_off, block_counts, counts);
}

// offsets[j] = counts[0] + ... + counts[j - 1] for j <= len, and cursor[j] =
// offsets[j] for j < len. One block of 1024 threads; len is at most a few
// tens of thousands, so one block walking it in steps of 1024 is enough.
// Exclusive prefix sum of every thread's x over the block, and in *total
// the block's sum. All threads call it; warp_sums is 32 shared words.
__device__ __forceinline__ u32 block_scan(u32 x, u32* warp_sums, u32* total) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 incl = x;  // inclusive within the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const u32 y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= (u32)o) incl += y;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        u32 w = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const u32 y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= (u32)o) w += y;
        }
        warp_sums[lane] = w;  // inclusive sums of the warps
    }
    __syncthreads();
    const u32 excl = (warp ? warp_sums[warp - 1] : 0) + incl - x;
    *total = warp_sums[(blockDim.x >> 5) - 1];
    __syncthreads();  // warp_sums is reused by the next call
    return excl;
}

extern "C" __global__ void __launch_bounds__(1024) gh_region_scan(const u32* counts, u64 len, u32* offsets,
                                                                 u32* cursor) {
    __shared__ u32 warp_sums[32];
    u32 carry = 0;  // the same in every thread: the sum of the chunks before
    for (u64 first = 0; first < len; first += blockDim.x) {
        const u64 j = first + threadIdx.x;
        u32 total;
        const u32 excl = carry + block_scan(j < len ? counts[j] : 0, warp_sums, &total);
        if (j < len) {
            offsets[j] = excl;
            cursor[j] = excl;
        }
        carry += total;
    }
    if (threadIdx.x == 0) offsets[len] = carry;
}

// In-place exclusive prefix sums of a[0..len) (len <= 8 * blockDim.x) by the
// whole block; returns the total to every thread.
__device__ __forceinline__ u32 block_exclusive_scan(u32* a, u32 len) {
    __shared__ u32 warp_sums[32];
    const u32 per = (len + blockDim.x - 1) / blockDim.x;  // consecutive entries per thread
    const u32 first = min(len, threadIdx.x * per), last = min(len, first + per);
    u32 own = 0;
    for (u32 j = first; j < last; ++j) own += a[j];
    u32 total;
    u32 run = block_scan(own, warp_sums, &total);
    for (u32 j = first; j < last; ++j) {
        const u32 c = a[j];
        a[j] = run;
        run += c;
    }
    __syncthreads();  // every thread's entries are written before any reads them
    return total;
}

// Shared memory of the scatter kernels: the staged tile (words and bins)
// and two arrays of `bins` counters. The host sizes it the same way
// (region.rs, scatter_shared_bytes). Batch positions are not carried: the
// few keys that end deferred travel as packed pairs, and a key the table
// then refuses is found again by lookup (gh_collect_absent).
template <bool FIRST>
__device__ __forceinline__ void region_scatter(View t, u64 rb, u32 shift, u32 bins, const K* keys,
                                               const V* values, const View::raw* words_in, u64 n,
                                               const u32* seg_off, const u32* block_counts, u32* cursor,
                                               View::raw* words_out, View::raw* deferred) {
    typedef View::raw raw;
    extern __shared__ __align__(16) unsigned char part_smem[];
    raw* s_word = (raw*)part_smem;                               // PART_TILE
    u32* s_next = (u32*)(s_word + PART_TILE);                    // bins: where the block's next key of a bin goes
    u32* s_tile = s_next + bins;                                 // bins: keys of a bin in the tile, then offsets
    unsigned short* s_bin = (unsigned short*)(s_tile + bins);    // PART_TILE
    const u32 lane = threadIdx.x & 31;
    const u32 NONE = 0xffffffffu;

    u64 lo, hi;
    block_slice<FIRST>(n, seg_off, &lo, &hi);
    // This block's range of every bin: one global atomic per nonzero bin.
    const u64 block = (u64)blockIdx.y * gridDim.x + blockIdx.x;
    for (u32 b = threadIdx.x; b < bins; b += blockDim.x) {
        const u32 c = block_counts[block * bins + b];
        s_next[b] = c ? atomicAdd(&cursor[(u64)blockIdx.y * bins + b], c) : 0;
    }
    for (u64 tile = lo; tile < hi; tile += PART_TILE) {
        const u32 len = (u32)min((u64)PART_TILE, hi - tile);
        for (u32 b = threadIdx.x; b < bins; b += blockDim.x) s_tile[b] = 0;
        __syncthreads();
        // Each thread's keys of the tile, with their bin and rank in the bin
        // packed as bin << 16 | rank (bins <= 4096, ranks < PART_TILE).
        raw word[PART_ITEMS];
        u32 place[PART_ITEMS];
#pragma unroll
        for (u32 k = 0; k < PART_ITEMS; ++k) {
            const u32 j = k * blockDim.x + threadIdx.x;
            place[k] = NONE;
            bool defer = false;
            if (j < len) {
                const u64 i = tile + j;
                const u64 r = region_of<FIRST>(t, rb, keys, words_in, i, &defer);
                word[k] = FIRST ? View::W::pack((u64)keys[i], gh::to_bits<V>(values[i])) : words_in[i];
                if (!defer) {
                    const u32 b = digit<FIRST>(r, shift);
                    place[k] = b << 16 | atomicAdd(&s_tile[b], 1u);
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
                    if (defer) deferred[at + __popc(mask & ((1u << lane) - 1))] = word[k];
                }
            }
        }
        __syncthreads();
        const u32 binned = block_exclusive_scan(s_tile, bins);  // s_tile: offset of each bin in the tile
        // Group the tile by bin in shared memory ...
#pragma unroll
        for (u32 k = 0; k < PART_ITEMS; ++k) {
            if (place[k] == NONE) continue;
            const u32 b = place[k] >> 16, j = s_tile[b] + (place[k] & 0xffffu);
            s_word[j] = word[k];
            s_bin[j] = (unsigned short)b;
        }
        __syncthreads();
        // ... and write it out: consecutive threads, consecutive addresses within a bin.
        for (u32 j = threadIdx.x; j < binned; j += blockDim.x) {
            const u32 b = s_bin[j];
            words_out[s_next[b] + (j - s_tile[b])] = s_word[j];
        }
        __syncthreads();
        for (u32 b = threadIdx.x; b < bins; b += blockDim.x) {
            const u32 end = b + 1 < bins ? s_tile[b + 1] : binned;
            s_next[b] += end - s_tile[b];
        }
        __syncthreads();
    }
}

// Pass 1: the batch into bins by `region >> shift` (by region when shift is
// 0); out-of-band keys go to the deferred list.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS, 2)
    gh_region_scatter1(View t, const K* keys, const V* values, u64 n, u64 rb, u32 shift, u32 bins,
                       const u32* block_counts, u32* cursor, View::raw* words_out, View::raw* deferred) {
    region_scatter<true>(t, rb, shift, bins, keys, values, nullptr, n, nullptr, block_counts, cursor, words_out,
                         deferred);
}

// Pass 2: each pass-1 segment into bins by `region & (2^shift - 1)`: the
// output is packed by region.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS, 2)
    gh_region_scatter2(View t, const View::raw* words_in, u64 rb, u32 shift, const u32* seg_off,
                       const u32* block_counts, u32* cursor, View::raw* words_out) {
    region_scatter<false>(t, rb, shift, 1u << shift, nullptr, nullptr, words_in, 0, seg_off, block_counts, cursor,
                          words_out, nullptr);
}

// The key field of a slot in shared memory, read once (other threads of the
// block change slots with atomics meanwhile).
__device__ __forceinline__ u64 shared_key(const View::raw* p) {
    if (View::WORD_BYTES == 8) return *(const volatile u64*)p & 0xffffffffull;
    return *(const volatile u64*)p;
}

// Shared memory of the build: the region, then one counter per bucket
// (72 KiB: three blocks an SM).
constexpr u32 BUILD_BUCKETS = 2048;  // REGION_BUCKETS in region.rs
// Keys of an empty-region build that may run past the region's end (each
// region's list is BUILD_SPILL words of scratch, SPILL_WORDS in region.rs).
constexpr u32 BUILD_SPILL = 2048 / View::WORD_BYTES;
// Keys of one bucket above which the placement below is not tried (its
// duplicate check looks at the bucket's keys one by one).
constexpr u32 BUILD_RUN = 64;
// Below every term of the run-start maximum (those are above -2^17).
constexpr int NO_RUN = -(1 << 30);

// Exclusive prefix maximum of every thread's x over the block (`lowest` in
// thread 0). All threads call it; scratch is 32 shared ints.
__device__ __forceinline__ int block_max_exclusive(int x, int* scratch, int lowest) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int incl = x;  // inclusive within the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= (u32)o) incl = max(incl, y);
    }
    if (lane == 31) scratch[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        int w = lane < (blockDim.x >> 5) ? scratch[lane] : lowest;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= (u32)o) w = max(w, y);
        }
        scratch[lane] = w;  // inclusive maxima of the warps
    }
    __syncthreads();
    int excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = lowest;
    if (warp) excl = max(excl, scratch[warp - 1]);
    __syncthreads();  // scratch is reused by the next call
    return excl;
}

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
// list holds. Keys whose slot lies past the region's end go to the region's
// spill list for gh_region_spill, which continues their runs in the next
// region.

// Step 1: the keys of the bin per home bucket, in cnt (zeroed by the
// caller); false if a bucket has too many.
__device__ __forceinline__ bool count_bin(const View& t, u32* cnt, u64 first, const View::raw* words, u64 begin,
                                          u64 end) {
    bool bad = false;
    for (u64 j = begin + threadIdx.x; j < end; j += blockDim.x) {
        const u64 h = t.home(View::W::key(words[j])) - first;
        bad |= atomicAdd(&cnt[h], 1u) >= BUILD_RUN;
    }
    return !bad;
}

// Steps 2-4 into the EMPTY shared `region`, after count_bin; false (with
// the region EMPTY again) where the plain rules must decide. Spilled keys
// go to `spill`, their count to *spilled_out; *placed is the keys placed
// (summed over the block's threads).
__device__ bool place_counted(const View& t, View::raw* region, u32* cnt, View::raw* spill, u64 first, u64 nb,
                              const View::raw* words, u64 begin, u64 end, u32* spilled_out, u64* placed) {
    typedef View::raw raw;
    typedef View::W W;
    constexpr u32 S = View::SLOTS;
    __shared__ u32 s_spilled;
    __shared__ u32 warp_sums[32];
    const u64 slots = nb * S;
    // 2. First slot of each bucket's keys: with c_h keys in bucket h and s_h
    //    keys in the buckets before it, run starts obey
    //    start_h = s_h + max over nonempty h' <= h of (h' * S - s_h').
    //    cnt[h] becomes start_h << 16, the low half counting the keys placed.
    //    (Both fit: start_h < slots + keys <= 2 * slots + BUILD_SPILL.)
    const u32 per = (u32)((nb + blockDim.x - 1) / blockDim.x);  // consecutive buckets per thread
    const u32 lo = min((u32)nb, threadIdx.x * per), hi = min((u32)nb, lo + per);
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
    // 3. Every key takes its bucket's next slot; past the region's end, the spill list.
    for (u64 j = begin + threadIdx.x; j < end; j += blockDim.x) {
        const raw w = words[j];
        const u32 v = atomicAdd(&cnt[t.home(W::key(w)) - first], 1u);
        const u32 at = (v >> 16) + (v & 0xffffu);
        if (at < slots) {
            region[at] = w;
        } else {
            const u32 o = atomicAdd(&s_spilled, 1u);
            if (o < BUILD_SPILL) spill[o] = w;
        }
    }
    __syncthreads();
    const u32 spilled = s_spilled;
    bool bad = spilled > BUILD_SPILL;
    // 4. Checks, one thread per slot: within its probe limit, and no earlier
    //    key of its bucket's run equal. Spilled keys look for their twins in
    //    the region part of their run and among the spills before them.
    for (u64 x = threadIdx.x; x < slots + spilled && !bad; x += blockDim.x) {
        const bool in = x < slots;
        const u64 k = W::key(in ? region[x] : spill[x - slots]);
        if (k == W::EMPTY_KEY) continue;
        const u64 h = t.home(k) - first;
        if (in && x / S - h >= t.limit) bad = true;
        for (u64 y = cnt[h] >> 16, stop = in ? x : slots; y < stop && !bad; ++y) bad = W::key(region[y]) == k;
        for (u64 o = 0; !in && o < x - slots && !bad; ++o) bad = W::key(spill[o]) == k;
    }
    if (__syncthreads_or(bad)) {
        const raw e = W::empty();
        for (u64 x = threadIdx.x; x < slots; x += blockDim.x) region[x] = e;
        __syncthreads();
        return false;
    }
    if (threadIdx.x == 0) *spilled_out = spilled;
    *placed = threadIdx.x == 0 ? end - begin - spilled : 0;
    return true;
}

// 16 bytes from global to shared memory without passing through registers
// (cp.async): the region streams in while the block counts its bin.
// -DGH_REGION_SYNC_LOAD loads it before counting instead: compute-sanitizer's
// racecheck (CUDA 13.0) stops these copies with a misaligned-address error
// that neither plain runs nor memcheck show, so racecheck runs build with it.
__device__ __forceinline__ void copy16_async(ulonglong2* to_shared, const ulonglong2* from_global) {
#ifdef GH_REGION_SYNC_LOAD
    *to_shared = __ldcg(from_global);
#else
    const unsigned to = (unsigned)__cvta_generic_to_shared(to_shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(from_global) : "memory");
#endif
}
__device__ __forceinline__ void copy16_wait_all() {
#ifndef GH_REGION_SYNC_LOAD
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// One block per region: region r's pairs are words[offsets[r] .. offsets[r + 1]).
// Keys of an empty region's runs that pass its end go to spills[r *
// BUILD_SPILL ..], their count to spill_count[r]; keys the plain rules
// settle nowhere in the region go to `deferred`.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS, 3)
    gh_region_build(View t, u64 rb, const u32* offsets, const View::raw* words, View::raw* spills,
                    u32* spill_count, View::raw* deferred, u32 mode, u32 op) {
    typedef View::raw raw;
    typedef View::W W;
    extern __shared__ __align__(16) unsigned char smem[];
    raw* region = (raw*)smem;
    u32* cnt = (u32*)(region + BUILD_BUCKETS * View::SLOTS);
    const u64 r = blockIdx.x, first = r * rb;
    const u64 nb = min(rb, t.buckets - first);
    ulonglong2* global16 = (ulonglong2*)(t.slots + first * View::SLOTS);
    ulonglong2* shared16 = (ulonglong2*)region;
    const u64 words16 = nb * (GH_BUCKET_BYTES / 16);
    for (u64 j = threadIdx.x; j < words16; j += blockDim.x) copy16_async(shared16 + j, global16 + j);
    const u64 begin = offsets[r], end = offsets[r + 1];
    // Count the bin by bucket while the region arrives (wasted if it is not EMPTY).
    const bool fits = rb <= BUILD_BUCKETS && end - begin <= nb * View::SLOTS + BUILD_SPILL;
    for (u32 b = threadIdx.x; b < nb; b += blockDim.x) cnt[b] = 0;
    __syncthreads();
    const bool counted = fits && count_bin(t, cnt, first, words, begin, end);
    copy16_wait_all();
    bool used = false;  // a slot of the region is not EMPTY (EMPTY is all ones)
    for (u64 j = threadIdx.x; j < words16; j += blockDim.x) {
        const ulonglong2 v = shared16[j];  // copied by this thread
        used |= (v.x & v.y) != ~0ull;
    }
    const bool empty = !__syncthreads_or(used);
    const bool placeable = __syncthreads_and(counted) && fits && empty;

    u64 ins = 0, ex = 0;
    if (!(placeable &&
          place_counted(t, region, cnt, spills + r * BUILD_SPILL, first, nb, words, begin, end, &spill_count[r],
                        &ins))) {
        // The plain rules with shared-memory atomics.
        if (threadIdx.x == 0) spill_count[r] = 0;
        for (u64 j = begin + threadIdx.x; j < end; j += blockDim.x) {
            const raw desired = words[j];
            const u64 k = W::key(desired);
            const V value = gh::from_bits<V>(W::value(desired));
            int res = gh::FAILED;
            u64 b = t.home(k) - first;
            for (u64 step = 0; step < t.limit && b < nb && res == gh::FAILED; ++step, ++b) {
                raw* bucket = region + b * View::SLOTS;
                for (int s = 0; s < View::SLOTS && res == gh::FAILED; ++s) {
                    u64 kk = shared_key(&bucket[s]);
                    while (true) {
                        if (kk == k) {
                            t.update_value(&bucket[s], value, mode, op);
                            res = gh::EXISTING;
                            break;
                        }
                        if (kk != W::EMPTY_KEY) break;  // another key or a tombstone
                        raw prev = W::cas(&bucket[s], W::empty(), desired);
                        if (W::eq(prev, W::empty())) { res = gh::INSERTED; break; }
                        kk = W::key(prev);
                    }
                }
            }
            ins += res == gh::INSERTED;
            ex += res == gh::EXISTING;
            // Not settled inside the region: the plain kernel continues the sequence.
            if (res == gh::FAILED) deferred[atomicAdd(&t.meta->counters[2], 1ull)] = desired;
        }
    }
    __syncthreads();
    for (u64 j = threadIdx.x; j < words16; j += blockDim.x) __stcg(global16 + j, shared16[j]);
    block_add(&t.meta->counters[0], ins);
    block_add(&t.meta->counters[1], ex);
}
// The spilled keys of region p = r - 1 (cyclically) take the EMPTY slots of
// region r in slot order, the j-th key the j-th EMPTY slot: the slot a
// linear probe from its home claims when these keys come after the built
// regions, since its run fills region p from its home to the end. One block
// per region r. A key whose slot lies past its probe limit, the keys after
// it, and keys for which region r has no EMPTY slot left go to the plain
// kernel (`deferred`): it fails the first kind and carries the others on.
extern "C" __global__ void __launch_bounds__(GH_PART_THREADS)
    gh_region_spill(View t, u64 rb, u64 regions, const u32* spill_count, const View::raw* spills,
                    View::raw* deferred) {
    typedef View::raw raw;
    typedef View::W W;
    const u64 r = blockIdx.x, p = (r == 0 ? regions : r) - 1;
    const u32 m = spill_count[p];
    if (m == 0) return;  // the whole block
    const raw* in = spills + p * BUILD_SPILL;
    const u64 first = r * rb, slots = min(rb, t.buckets - first) * View::SLOTS;
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
#endif

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
